//! What an x86-64 instruction does to memory, decoded with `iced-x86`: each
//! memory operand's address (from the registers before it runs), size, and
//! whether it is read, written, or both. Memory points name their accesses
//! with it, and a debugger matches the bytes an instruction touched against
//! its watched ranges.

use iced_x86::{
    Code, Decoder, DecoderOptions, InstructionInfoFactory, MemorySize, Mnemonic, OpAccess, OpKind,
    Register,
};
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

/// How a loaded value fills its register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extend {
    /// `mov`: the operand is the register's size.
    Same,
    /// `movzx`.
    Zero,
    /// `movsx`, `movsxd`.
    Sign,
}

/// What a plain move does with its memory operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// Memory into a general register.
    Load { dst: Register, extend: Extend },
    /// A register's value or an immediate (already read) into memory.
    Store { value: u64 },
}

/// A `mov`, `movzx`, `movsx` or `movsxd` between one memory operand and a
/// general register or an immediate: an instruction whose whole effect the
/// monitor can have in the guest's place (no flags, no other memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainMove {
    pub addr: u64,
    pub size: usize,
    /// The instruction's length: where the guest goes on.
    pub len: u64,
    pub what: Move,
}

/// The plain move at the start of `bytes` (at `rip`, with these registers),
/// or None for any other instruction, or one with a prefix that changes it
/// (`lock` is #UD on a `mov`: the guest must run it to fault).
pub fn plain_move(bytes: &[u8], rip: u64, regs: &AddrRegs) -> Option<PlainMove> {
    let mut d = Decoder::with_ip(64, bytes, rip, DecoderOptions::NONE);
    let insn = d.decode();
    if insn.is_invalid() || insn.has_lock_prefix() {
        return None;
    }
    let (load, extend) = match insn.code() {
        Code::Mov_r8_rm8 | Code::Mov_r16_rm16 | Code::Mov_r32_rm32 | Code::Mov_r64_rm64 => {
            (true, Extend::Same)
        }
        Code::Movzx_r16_rm8
        | Code::Movzx_r32_rm8
        | Code::Movzx_r64_rm8
        | Code::Movzx_r16_rm16
        | Code::Movzx_r32_rm16
        | Code::Movzx_r64_rm16 => (true, Extend::Zero),
        Code::Movsx_r16_rm8
        | Code::Movsx_r32_rm8
        | Code::Movsx_r64_rm8
        | Code::Movsx_r16_rm16
        | Code::Movsx_r32_rm16
        | Code::Movsx_r64_rm16
        | Code::Movsxd_r64_rm32 => (true, Extend::Sign),
        Code::Mov_rm8_r8
        | Code::Mov_rm16_r16
        | Code::Mov_rm32_r32
        | Code::Mov_rm64_r64
        | Code::Mov_rm8_imm8
        | Code::Mov_rm16_imm16
        | Code::Mov_rm32_imm32
        | Code::Mov_rm64_imm32 => (false, Extend::Same),
        _ => return None,
    };
    let (mem_op, other) = if load { (1, 0) } else { (0, 1) };
    if insn.op_kind(mem_op) != OpKind::Memory {
        return None;
    }
    let addr = insn.virtual_address(mem_op, 0, |reg, _, _| regs.value(reg))?;
    let size = insn.memory_size().size();
    let what = if load {
        Move::Load {
            dst: insn.op_register(other),
            extend,
        }
    } else {
        let value = match insn.op_kind(other) {
            OpKind::Register => gpr(&regs.regs, insn.op_register(other))?,
            // Sign-extended to 64 bits for `mov r/m64, imm32`, as the CPU does.
            _ => insn.immediate(other),
        };
        Move::Store { value }
    };
    Some(PlainMove {
        addr,
        size,
        len: insn.len() as u64,
        what,
    })
}

/// The full register holding `reg`, and the shift of `reg`'s bits in it
/// (8 for AH, CH, DH and BH).
fn gpr_slot(regs: &mut kvm_regs, reg: Register) -> Option<(&mut u64, u32)> {
    let shift = match reg {
        Register::AH | Register::CH | Register::DH | Register::BH => 8,
        _ => 0,
    };
    let r = regs;
    let full = match reg.full_register() {
        Register::RAX => &mut r.rax,
        Register::RBX => &mut r.rbx,
        Register::RCX => &mut r.rcx,
        Register::RDX => &mut r.rdx,
        Register::RSI => &mut r.rsi,
        Register::RDI => &mut r.rdi,
        Register::RBP => &mut r.rbp,
        Register::RSP => &mut r.rsp,
        Register::R8 => &mut r.r8,
        Register::R9 => &mut r.r9,
        Register::R10 => &mut r.r10,
        Register::R11 => &mut r.r11,
        Register::R12 => &mut r.r12,
        Register::R13 => &mut r.r13,
        Register::R14 => &mut r.r14,
        Register::R15 => &mut r.r15,
        _ => return None,
    };
    Some((full, shift))
}

/// The value of general register `reg` (of any size), zero-extended.
pub fn gpr(regs: &kvm_regs, reg: Register) -> Option<u64> {
    let mut copy = *regs;
    let (full, shift) = gpr_slot(&mut copy, reg)?;
    Some((*full >> shift) & mask(reg.size()))
}

fn mask(size: usize) -> u64 {
    match size {
        8 => u64::MAX,
        n => (1u64 << (n * 8)) - 1,
    }
}

/// Writes `value` (the memory operand's `size` bytes, little-endian) into
/// the load's destination as the CPU does: a 32-bit destination clears the
/// upper half, an 8- or 16-bit one keeps the register's other bits. False
/// when `dst` is not a general register.
pub fn complete_load(
    regs: &mut kvm_regs,
    dst: Register,
    extend: Extend,
    size: usize,
    value: u64,
) -> bool {
    let value = value & mask(size);
    let value = match extend {
        Extend::Sign if size < 8 => {
            let shift = 64 - size as u32 * 8;
            (((value << shift) as i64) >> shift) as u64
        }
        _ => value,
    };
    let dst_size = dst.size();
    let Some((full, shift)) = gpr_slot(regs, dst) else {
        return false;
    };
    *full = match dst_size {
        8 => value,
        4 => value & 0xffff_ffff,
        n => {
            let m = mask(n) << shift;
            (*full & !m) | ((value << shift) & m)
        }
    };
    true
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
    fn far_transfers_through_memory_and_what_is_not_one() {
        use super::{privileged, Privileged};
        // jmp far [rax] (m16:64), call far [rax] (m16:32), jmp far [rbx+8]
        for bytes in [&[0x48, 0xff, 0x28][..], &[0xff, 0x18], &[0xff, 0x6b, 0x08]] {
            assert_eq!(
                privileged(bytes, 0),
                Some(Privileged::FarTransfer),
                "{bytes:x?}"
            );
        }
        // jmp rax, call [rax], jmp far with a register (no instruction)
        for bytes in [&[0xff, 0xe0][..], &[0xff, 0x10], &[0xff, 0xe8]] {
            assert_eq!(privileged(bytes, 0), None, "{bytes:x?}");
        }
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

    fn plain(bytes: &[u8], r: &AddrRegs) -> Option<PlainMove> {
        plain_move(bytes, 0x1000, r)
    }

    #[test]
    fn plain_moves_loads_stores_and_what_is_not_one() {
        let mut r = regs(0x5000, 0x9000);
        r.regs.rax = 0x1122_3344_5566_7788;
        // mov rax, [rbx+8]
        let m = plain(&[0x48, 0x8b, 0x43, 0x08], &r).unwrap();
        assert_eq!(
            m,
            PlainMove {
                addr: 0x5008,
                size: 8,
                len: 4,
                what: Move::Load {
                    dst: Register::RAX,
                    extend: Extend::Same
                }
            }
        );
        // mov [rbx], ah: the second byte of rax.
        let m = plain(&[0x88, 0x23], &r).unwrap();
        assert_eq!((m.size, m.what), (1, Move::Store { value: 0x77 }));
        // mov qword [rbx], -1: the immediate is sign-extended.
        let m = plain(&[0x48, 0xc7, 0x03, 0xff, 0xff, 0xff, 0xff], &r).unwrap();
        assert_eq!((m.size, m.what), (8, Move::Store { value: u64::MAX }));
        // mov dword fs:[0x10], eax
        let m = plain(&[0x64, 0x89, 0x04, 0x25, 0x10, 0, 0, 0], &r).unwrap();
        assert_eq!(
            (m.addr, m.size, m.what),
            (0x9010, 4, Move::Store { value: 0x5566_7788 })
        );
        // mov eax, [rip+0x10]: relative to the next instruction.
        let m = plain(&[0x8b, 0x05, 0x10, 0, 0, 0], &r).unwrap();
        assert_eq!((m.addr, m.len), (0x1000 + 6 + 0x10, 6));
        // movsx ecx, byte [rbx]
        let m = plain(&[0x0f, 0xbe, 0x0b], &r).unwrap();
        assert_eq!(
            m.what,
            Move::Load {
                dst: Register::ECX,
                extend: Extend::Sign
            }
        );
        // Not plain moves: add [rbx], 1; lock add; a register-to-register mov; movs.
        assert_eq!(plain(&[0x83, 0x03, 0x01], &r), None);
        assert_eq!(plain(&[0xf0, 0x83, 0x03, 0x01], &r), None);
        assert_eq!(plain(&[0x48, 0x89, 0xd8], &r), None);
        assert_eq!(plain(&[0x48, 0xa5], &r), None);
    }

    #[test]
    fn a_load_fills_its_register_as_the_cpu_does() {
        let mut r = kvm_regs {
            rax: u64::MAX,
            rcx: u64::MAX,
            ..Default::default()
        };
        // 32 bits clear the upper half.
        assert!(complete_load(
            &mut r,
            Register::EAX,
            Extend::Same,
            4,
            0x1234
        ));
        assert_eq!(r.rax, 0x1234);
        // 16 and 8 bits keep the rest; AH is bits 8 to 15.
        assert!(complete_load(&mut r, Register::CX, Extend::Same, 2, 0xabcd));
        assert_eq!(r.rcx, 0xffff_ffff_ffff_abcd);
        assert!(complete_load(&mut r, Register::AH, Extend::Same, 1, 0x5a));
        assert_eq!(r.rax, 0x5a34);
        // movsx r32 of 0x80: sign in the low half, the upper half cleared.
        assert!(complete_load(&mut r, Register::ECX, Extend::Sign, 1, 0x80));
        assert_eq!(r.rcx, 0xffff_ff80);
        // movsxd r64; movzx r64.
        assert!(complete_load(
            &mut r,
            Register::RCX,
            Extend::Sign,
            4,
            0x8000_0000
        ));
        assert_eq!(r.rcx, 0xffff_ffff_8000_0000);
        assert!(complete_load(
            &mut r,
            Register::RCX,
            Extend::Zero,
            2,
            0xffff
        ));
        assert_eq!(r.rcx, 0xffff);
        // Bytes above the operand's size are not the operand's.
        assert!(complete_load(&mut r, Register::R9L, Extend::Same, 1, 0x1ff));
        assert_eq!(r.r9, 0xff);
        assert!(!complete_load(&mut r, Register::XMM0, Extend::Same, 8, 1));
    }
}

/// What ring 3 tried, for the faults whose vector a paravirtual host (PVM)
/// reports differently from the hardware Linux runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privileged {
    /// `int N` (`CD nn`), and its length with prefixes.
    SoftwareInterrupt { vector: u8, len: u64 },
    /// `sysenter`, `xsaves` or `xrstors`: a #GP from ring 3 on Intel.
    KernelOnly,
    /// `mov` to or from a control register that does not exist (CR1, CR5-7,
    /// CR9-15): #UD before the privilege check.
    ReservedControlRegister,
    /// `jmp far` or `call far` through a memory pointer: valid in 64-bit
    /// mode, so a #UD there is not the hardware's (PVM reports a far
    /// transfer that faults as #UD; the CPU, and so Linux, as #GP).
    FarTransfer,
}

/// Decodes the instruction at `rip` into one of the [`Privileged`] kinds.
pub fn privileged(bytes: &[u8], rip: u64) -> Option<Privileged> {
    if reserved_control_register(bytes) {
        return Some(Privileged::ReservedControlRegister);
    }
    let insn = Decoder::with_ip(64, bytes, rip, DecoderOptions::NONE).decode();
    if insn.is_invalid() {
        return None;
    }
    match insn.mnemonic() {
        Mnemonic::Int => Some(Privileged::SoftwareInterrupt {
            vector: insn.immediate8(),
            len: insn.len() as u64,
        }),
        // On AMD, `sysenter` in long mode is #UD on the hardware too.
        Mnemonic::Sysenter if intel() => Some(Privileged::KernelOnly),
        Mnemonic::Xsaves | Mnemonic::Xsaves64 | Mnemonic::Xrstors | Mnemonic::Xrstors64 => {
            Some(Privileged::KernelOnly)
        }
        Mnemonic::Jmp | Mnemonic::Call if insn.op0_kind() == OpKind::Memory && is_far(&insn) => {
            Some(Privileged::FarTransfer)
        }
        _ => None,
    }
}

/// Whether a `jmp` or `call` through memory reads a far pointer.
fn is_far(insn: &iced_x86::Instruction) -> bool {
    matches!(
        insn.memory_size(),
        MemorySize::SegPtr16 | MemorySize::SegPtr32 | MemorySize::SegPtr64
    )
}

/// Whether this CPU is Intel's (the guest runs `cpuid` natively, so it sees
/// the same).
fn intel() -> bool {
    let r = std::arch::x86_64::__cpuid(0);
    (r.ebx, r.edx, r.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e)
}

/// `mov` to or from CR1, CR5-7 or CR9-15 (`0F 20`/`0F 22`, the register in
/// ModRM.reg and REX.R), which a decoder takes for no instruction at all.
fn reserved_control_register(bytes: &[u8]) -> bool {
    let mut rex_r = 0;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            0x66 | 0x67 | 0xf0 | 0xf2 | 0xf3 | 0x26 | 0x2e | 0x36 | 0x3e | 0x64 | 0x65 => {}
            0x40..=0x4f => rex_r = (b >> 2 & 1) << 3,
            _ => break,
        }
        i += 1;
    }
    match bytes.get(i..i + 3) {
        Some(&[0x0f, 0x20 | 0x22, modrm]) => {
            let cr = (modrm >> 3 & 7) | rex_r;
            !matches!(cr, 0 | 2 | 3 | 4 | 8)
        }
        _ => false,
    }
}
