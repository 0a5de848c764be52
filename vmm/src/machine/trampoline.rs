//! Guest ring 0: one `out` per entry. Ring-0 code is emulated on PVM, so the
//! trampoline does nothing else; the monitor returns to ring 3 by writing
//! registers.

use super::gdt::KERNEL_CS;
use super::layout::{
    EXCEPTION_PORT_BASE, EXCEPTION_VECTORS, IDT, IDT_STUBS, IDT_STUB_SIZE, SYSCALL_ENTRY,
    SYSCALL_PORT,
};

/// `out imm8, al`
const OUT_IMM8_AL: u8 = 0xe6;
/// Present, DPL 0, 64-bit interrupt gate.
const INTERRUPT_GATE: u64 = 0x8e;
/// Int3 (#BP) must be reachable from ring 3: a trap gate with DPL 3.
const USER_TRAP_GATE: u64 = 0xef;
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
    (vector < EXCEPTION_VECTORS && at(IDT_STUBS + vector * IDT_STUB_SIZE))
        .then_some(Entry::Exception(vector as u8))
}

/// Bytes to write at guest physical addresses.
pub fn code() -> Vec<(u64, Vec<u8>)> {
    let mut out = vec![(SYSCALL_ENTRY, vec![OUT_IMM8_AL, SYSCALL_PORT as u8])];
    let mut idt = Vec::with_capacity(EXCEPTION_VECTORS as usize * 16);
    for v in 0..EXCEPTION_VECTORS {
        let stub = IDT_STUBS + v * IDT_STUB_SIZE;
        out.push((stub, vec![OUT_IMM8_AL, EXCEPTION_PORT_BASE as u8 + v as u8]));
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

/// Vectors that push an error code (#DF, #TS, #NP, #SS, #GP, #PF, #AC, #CP, #VC, #SX).
pub fn has_error_code(vector: u8) -> bool {
    matches!(vector, 8 | 10..=14 | 17 | 21 | 29 | 30)
}
