//! Guest ring 0: one `out` per entry. Ring-0 code is emulated on PVM, so the
//! trampoline does nothing else; the monitor returns to ring 3 by writing
//! registers.

use super::gdt::KERNEL_CS;
use super::layout::{
    DEBUG_HANDLER, EXCEPTION_PORT_BASE, EXCEPTION_VECTORS, HIDE_ROUTINE, IDT, IDT_STUBS,
    IDT_STUB_SIZE, POINT_SLOTS, SYSCALL_ENTRY, SYSCALL_PORT,
};

/// `out imm8, al`
const OUT_IMM8_AL: u8 = 0xe6;
/// Present, DPL 0, 64-bit interrupt gate.
const INTERRUPT_GATE: u64 = 0x8e;
/// Int3 (#BP) must be reachable from ring 3: a trap gate with DPL 3.
const USER_TRAP_GATE: u64 = 0xef;
pub const VECTOR_DEBUG: u8 = 1;
pub const VECTOR_BREAKPOINT: u8 = 3;
pub const VECTOR_GENERAL_PROTECTION: u8 = 13;
/// Bytes of the `out imm8, al` each entry executes.
const OUT_LEN: u64 = 2;

/// A trampoline entry an exit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Syscall,
    Exception(u8),
}

/// Which entry made an exit to `port` with the vCPU at `rip`, or None: the
/// guest's own port I/O. KVM reports the exit at the entry's `out` (hardware)
/// or just after it (PVM); nowhere else is an exit the trampoline's.
pub fn exit_at(port: u16, rip: u64) -> Option<Entry> {
    let at = |out: u64| rip == out || rip == out + OUT_LEN;
    if port == SYSCALL_PORT {
        return at(SYSCALL_ENTRY).then_some(Entry::Syscall);
    }
    let vector = port.checked_sub(EXCEPTION_PORT_BASE)? as u64;
    let out = if vector == VECTOR_DEBUG as u64 {
        DEBUG_HANDLER + DEBUG_HANDLER_OUT
    } else {
        IDT_STUBS + vector * IDT_STUB_SIZE
    };
    (vector < EXCEPTION_VECTORS && at(out)).then_some(Entry::Exception(vector as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_debug_handler_exits_where_the_machine_expects() {
        let code = debug_handler();
        assert_eq!(code.len() as u64, DEBUG_HANDLER_OUT + 2);
        assert_eq!(
            exit_at(0x81, DEBUG_HANDLER + DEBUG_HANDLER_OUT + 2),
            Some(Entry::Exception(VECTOR_DEBUG))
        );
        // The jumps land on `exit` (the `mov rax, [SAVED_RAX]` before the out).
        assert_eq!(0x15 + 0x2e, DEBUG_HANDLER_OUT as usize - 8);
        assert_eq!(0x30 + 0x13, DEBUG_HANDLER_OUT as usize - 8);
        assert_eq!(exit_at(0x81, IDT_STUBS + 4 + 2), None);
        assert_eq!(exit_at(0x20, 0x401002), None);
        assert_eq!(exit_at(0x20, SYSCALL_ENTRY + 2), Some(Entry::Syscall));
    }
}

/// Bytes to write at guest physical addresses.
pub fn code() -> Vec<(u64, Vec<u8>)> {
    let mut out = vec![(SYSCALL_ENTRY, vec![OUT_IMM8_AL, SYSCALL_PORT as u8])];
    let mut idt = Vec::with_capacity(EXCEPTION_VECTORS as usize * 16);
    out.push((DEBUG_HANDLER, debug_handler()));
    out.push((HIDE_ROUTINE, hide_routine()));
    for v in 0..EXCEPTION_VECTORS {
        let mut stub = IDT_STUBS + v * IDT_STUB_SIZE;
        out.push((stub, vec![OUT_IMM8_AL, EXCEPTION_PORT_BASE as u8 + v as u8]));
        if v == VECTOR_DEBUG as u64 {
            stub = DEBUG_HANDLER;
        }
        let gate = if v == VECTOR_BREAKPOINT as u64 {
            USER_TRAP_GATE
        } else {
            INTERRUPT_GATE
        };
        let lo = (stub & 0xffff)
            | ((KERNEL_CS as u64) << 16)
            | (gate << 40)
            | ((stub >> 16 & 0xffff) << 48);
        let hi = stub >> 32;
        idt.extend_from_slice(&lo.to_le_bytes());
        idt.extend_from_slice(&hi.to_le_bytes());
    }
    out.push((IDT, idt));
    out
}

/// The monitor's slots the #DB handler uses, in guest memory (identity
/// mapped, supervisor only).
pub mod slot {
    use super::POINT_SLOTS;
    use crate::machine::memory::MonitorWord;
    /// The direct-map address of the page-table entry a memory point made
    /// user-accessible for one instruction; 0 when no point is armed.
    pub const ARMED_PTE: MonitorWord = MonitorWord::at(POINT_SLOTS);
    /// The user's RAX while the handler runs.
    pub const SAVED_RAX: u64 = POINT_SLOTS + 8;
    /// Non-zero: every #DB exits to the monitor, a memory point's too (after
    /// the handler re-protected its page): a debugger is single-stepping.
    pub const DEBUG_EXITS: MonitorWord = MonitorWord::at(POINT_SLOTS + 16);
    /// The user's RCX while the hide routine runs.
    pub const SAVED_RCX: u64 = POINT_SLOTS + 24;
    /// How many entries of `HIDE_LIST` the hide routine clears on the next
    /// entry (0: none, the guest enters ring 3 directly).
    pub const HIDE_COUNT: MonitorWord = MonitorWord::at(POINT_SLOTS + 32);
    /// Direct-map addresses of page-table entries to clear U in.
    pub const HIDE_LIST: u64 = POINT_SLOTS + 64;
    /// Room in the slot page for that many entries.
    pub const HIDE_MAX: usize = ((crate::machine::layout::PAGE_SIZE - 64) / 8) as usize;
}

/// The hide routine, in guest ring 0, entered by the monitor (not by a
/// vector) with an `iretq` frame of the user's state on the ring-0 stack:
///
/// ```text
///     mov [SAVED_RAX], rax
///     mov [SAVED_RCX], rcx
///     mov rcx, [HIDE_COUNT]          ; at least 1
/// again:
///     mov rax, [HIDE_LIST + rcx*8 - 8]
///     and qword [rax], ~4            ; U=0: a guest write, which KVM sees
///     dec rcx
///     jnz again
///     mov qword [HIDE_COUNT], 0
///     mov rcx, [SAVED_RCX]
///     mov rax, [SAVED_RAX]
///     iretq                          ; to ring 3
/// ```
///
/// A host-side edit that takes a permission away is not seen by PVM's
/// shadow MMU (the monitor would have to re-register the memory slot, which
/// waits for an RCU grace period); a ring-0 write of the entry is.
fn hide_routine() -> Vec<u8> {
    let abs = |a: u64| (a as u32).to_le_bytes();
    let mut c = Vec::with_capacity(0x50);
    c.extend([0x48, 0x89, 0x04, 0x25]);
    c.extend(abs(slot::SAVED_RAX));
    c.extend([0x48, 0x89, 0x0c, 0x25]);
    c.extend(abs(slot::SAVED_RCX));
    c.extend([0x48, 0x8b, 0x0c, 0x25]);
    c.extend(abs(slot::HIDE_COUNT.pa()));
    let again = c.len();
    c.extend([0x48, 0x8b, 0x04, 0xcd]);
    c.extend(abs(slot::HIDE_LIST - 8));
    c.extend([0x48, 0x83, 0x20, 0xfb]);
    c.extend([0x48, 0xff, 0xc9]);
    let back = again as i64 - (c.len() as i64 + 2);
    c.extend([0x75, back as i8 as u8]);
    c.extend([0x48, 0xc7, 0x04, 0x25]);
    c.extend(abs(slot::HIDE_COUNT.pa()));
    c.extend([0, 0, 0, 0]);
    c.extend([0x48, 0x8b, 0x0c, 0x25]);
    c.extend(abs(slot::SAVED_RCX));
    c.extend([0x48, 0x8b, 0x04, 0x25]);
    c.extend(abs(slot::SAVED_RAX));
    c.extend([0x48, 0xcf]);
    c
}

/// Offset of the handler's `out` (its exit to the monitor).
const DEBUG_HANDLER_OUT: u64 = 0x4b;

/// The #DB handler (vector 1), in guest ring 0:
///
/// ```text
///     mov [SAVED_RAX], rax
///     mov rax, [ARMED_PTE]
///     test rax, rax
///     jz exit                    ; no memory point armed: the monitor's #DB
///     and qword [rax], ~4        ; the page is no longer user-accessible (U=0)
///     mov qword [ARMED_PTE], 0
///     cmp qword [DEBUG_EXITS], 0
///     jne exit                   ; a debugger wants this single-step too
///     mov rax, [SAVED_RAX]
///     and qword [rsp+16], ~TF    ; the frame's RFLAGS
///     iretq                      ; back to ring 3: no exit at all
/// exit:
///     mov rax, [SAVED_RAX]
///     out 0x81, al               ; #DB exit, as every other vector's stub
/// ```
///
/// A PTE written by guest ring-0 code is seen by KVM (PVM's shadow MMU
/// write-protects page tables), where one the monitor writes is not; so the
/// page is re-protected without a second exit (`../shared/probes/mprobe.c`,
/// variant DG).
fn debug_handler() -> Vec<u8> {
    let abs = |a: u64| (a as u32).to_le_bytes();
    let mut c = Vec::with_capacity(0x50);
    c.extend([0x48, 0x89, 0x04, 0x25]);
    c.extend(abs(slot::SAVED_RAX));
    c.extend([0x48, 0x8b, 0x04, 0x25]);
    c.extend(abs(slot::ARMED_PTE.pa()));
    c.extend([0x48, 0x85, 0xc0, 0x74, 0x2e]);
    c.extend([0x48, 0x83, 0x20, 0xfb]);
    c.extend([0x48, 0xc7, 0x04, 0x25]);
    c.extend(abs(slot::ARMED_PTE.pa()));
    c.extend([0, 0, 0, 0]);
    c.extend([0x48, 0x83, 0x3c, 0x25]);
    c.extend(abs(slot::DEBUG_EXITS.pa()));
    c.extend([0x00, 0x75, 0x13]);
    c.extend([0x48, 0x8b, 0x04, 0x25]);
    c.extend(abs(slot::SAVED_RAX));
    c.extend([0x48, 0x81, 0x64, 0x24, 0x10, 0xff, 0xfe, 0xff, 0xff]);
    c.extend([0x48, 0xcf]);
    c.extend([0x48, 0x8b, 0x04, 0x25]);
    c.extend(abs(slot::SAVED_RAX));
    debug_assert_eq!(c.len() as u64, DEBUG_HANDLER_OUT);
    c.extend([OUT_IMM8_AL, EXCEPTION_PORT_BASE as u8 + VECTOR_DEBUG]);
    c
}

/// Vectors that push an error code (#DF, #TS, #NP, #SS, #GP, #PF, #AC, #CP, #VC, #SX).
pub fn has_error_code(vector: u8) -> bool {
    matches!(vector, 8 | 10..=14 | 17 | 21 | 29 | 30)
}
