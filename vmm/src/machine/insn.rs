//! What an x86-64 instruction does to memory, decoded with `iced-x86`: each
//! memory operand's address (from the registers before it runs), size, and
//! whether it is read, written, or both. Memory points name their accesses
//! with it, and a debugger matches the bytes an instruction touched against
//! its watched ranges.

use iced_x86::{Decoder, DecoderOptions, InstructionInfoFactory, Mnemonic, OpAccess, Register};
use kvm_bindings::kvm_regs;

/// One memory operand of an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemAccess {
    /// Its first byte, when the registers give it (not for a vector index).
    pub addr: Option<u64>,
    pub size: u64,
    pub read: bool,
    pub write: bool,
}

impl MemAccess {
    /// Whether the operand's bytes meet `[start, start + len)`.
    pub fn meets(&self, start: u64, len: u64) -> bool {
        self.addr.is_some_and(|a| {
            a < start.saturating_add(len.max(1)) && start < a.saturating_add(self.size.max(1))
        })
    }
}

/// The instruction's memory operands, in decoding order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemOperands {
    pub accesses: Vec<MemAccess>,
    /// A `lock`ed instruction or an `xchg` with memory.
    pub atomic: bool,
}

/// The registers an address is computed from.
#[derive(Debug, Clone, Copy)]
pub struct AddrRegs {
    pub regs: kvm_regs,
    pub fs_base: u64,
    pub gs_base: u64,
}

impl AddrRegs {
    fn value(&self, reg: Register) -> Option<u64> {
        let r = &self.regs;
        let full = match reg.full_register() {
            Register::RAX => r.rax,
            Register::RBX => r.rbx,
            Register::RCX => r.rcx,
            Register::RDX => r.rdx,
            Register::RSI => r.rsi,
            Register::RDI => r.rdi,
            Register::RBP => r.rbp,
            Register::RSP => r.rsp,
            Register::R8 => r.r8,
            Register::R9 => r.r9,
            Register::R10 => r.r10,
            Register::R11 => r.r11,
            Register::R12 => r.r12,
            Register::R13 => r.r13,
            Register::R14 => r.r14,
            Register::R15 => r.r15,
            Register::FS => self.fs_base,
            Register::GS => self.gs_base,
            Register::ES | Register::CS | Register::SS | Register::DS => 0,
            _ => return None,
        };
        // An address is computed from 64-bit registers, or 32-bit ones (addr32).
        Some(if reg.size() == 4 {
            full & 0xffff_ffff
        } else {
            full
        })
    }
}

/// Decodes the instruction at the start of `bytes` (at `rip`): None when it
/// is not a valid instruction.
pub fn memory_operands(bytes: &[u8], rip: u64, regs: Option<&AddrRegs>) -> Option<MemOperands> {
    let mut d = Decoder::with_ip(64, bytes, rip, DecoderOptions::NONE);
    let insn = d.decode();
    if insn.is_invalid() {
        return None;
    }
    let mut factory = InstructionInfoFactory::new();
    let info = factory.info(&insn);
    let accesses = info
        .used_memory()
        .iter()
        .map(|m| {
            let (read, write) = match m.access() {
                OpAccess::Read | OpAccess::CondRead => (true, false),
                OpAccess::Write | OpAccess::CondWrite => (false, true),
                OpAccess::ReadWrite | OpAccess::ReadCondWrite => (true, true),
                _ => (false, false),
            };
            MemAccess {
                addr: regs.and_then(|r| m.virtual_address(0, |reg, _, _| r.value(reg))),
                size: m.memory_size().size() as u64,
                read,
                write,
            }
        })
        .collect();
    Some(MemOperands {
        accesses,
        atomic: insn.has_lock_prefix() || insn.mnemonic() == Mnemonic::Xchg,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs(rbx: u64, fs_base: u64) -> AddrRegs {
        AddrRegs {
            regs: kvm_regs {
                rbx,
                ..Default::default()
            },
            fs_base,
            gs_base: 0,
        }
    }

    #[test]
    fn a_load_its_address_size_and_kind() {
        // mov rax, [rbx+8]
        let ops =
            memory_operands(&[0x48, 0x8b, 0x43, 0x08], 0x1000, Some(&regs(0x5000, 0))).unwrap();
        let load = MemAccess {
            addr: Some(0x5008),
            size: 8,
            read: true,
            write: false,
        };
        assert_eq!(ops.accesses, [load]);
        assert!(!ops.atomic);
        // It starts below a watched upper half and runs into it.
        assert!(load.meets(0x500c, 4));
        assert!(!load.meets(0x5010, 4));
        assert!(!load.meets(0x5000, 8));
    }

    #[test]
    fn a_locked_add_and_a_thread_local_store() {
        // lock add dword [rbx], 1
        let ops = memory_operands(&[0xf0, 0x83, 0x03, 0x01], 0, Some(&regs(0x7000, 0))).unwrap();
        assert!(ops.atomic);
        assert_eq!(
            ops.accesses
                .iter()
                .map(|a| (a.addr, a.size, a.read, a.write))
                .collect::<Vec<_>>(),
            [(Some(0x7000), 4, true, true)]
        );
        // mov dword fs:[0x10], eax: the segment's base counts.
        let ops = memory_operands(
            &[0x64, 0x89, 0x04, 0x25, 0x10, 0, 0, 0],
            0,
            Some(&regs(0, 0x9000)),
        )
        .unwrap();
        assert_eq!(ops.accesses[0].addr, Some(0x9010));
        assert!(ops.accesses[0].write && !ops.accesses[0].read);
        // Without registers, no address; garbage is no instruction.
        let ops = memory_operands(&[0x48, 0x8b, 0x43, 0x08], 0, None).unwrap();
        assert_eq!(ops.accesses[0].addr, None);
        assert!(
            memory_operands(&[0x06], 0, None).is_none(),
            "push es is invalid in 64-bit mode"
        );
    }
}
