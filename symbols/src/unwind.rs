//! One step of unwinding: from a frame's registers to its caller's, by the
//! call-frame information (`.eh_frame`, then `.debug_frame`), a Linux signal
//! frame (`rt_sigreturn` trampolines), or frame pointers as the fallback.

use crate::module::{Module, Reader};
use gimli::{CfaRule, RegisterRule, UnwindSection};

/// DWARF register numbers of x86-64 (the System V psABI's).
pub mod reg {
    pub const RAX: u16 = 0;
    pub const RDX: u16 = 1;
    pub const RCX: u16 = 2;
    pub const RBX: u16 = 3;
    pub const RSI: u16 = 4;
    pub const RDI: u16 = 5;
    pub const RBP: u16 = 6;
    pub const RSP: u16 = 7;
    pub const R8: u16 = 8;
    pub const R9: u16 = 9;
    pub const R10: u16 = 10;
    pub const R11: u16 = 11;
    pub const R12: u16 = 12;
    pub const R13: u16 = 13;
    pub const R14: u16 = 14;
    pub const R15: u16 = 15;
    /// The return address column: the instruction pointer.
    pub const RIP: u16 = 16;
}

/// General registers of one frame, by DWARF number; None where unknown
/// (a caller's caller-saved registers are not recoverable).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Registers(pub [Option<u64>; 17]);

impl Registers {
    /// A thread's registers as the monitor holds them.
    #[allow(clippy::too_many_arguments)]
    pub fn x86_64(
        rax: u64,
        rbx: u64,
        rcx: u64,
        rdx: u64,
        rsi: u64,
        rdi: u64,
        rbp: u64,
        rsp: u64,
        r8_to_r15: [u64; 8],
        rip: u64,
    ) -> Registers {
        let mut r = [None; 17];
        r[reg::RAX as usize] = Some(rax);
        r[reg::RDX as usize] = Some(rdx);
        r[reg::RCX as usize] = Some(rcx);
        r[reg::RBX as usize] = Some(rbx);
        r[reg::RSI as usize] = Some(rsi);
        r[reg::RDI as usize] = Some(rdi);
        r[reg::RBP as usize] = Some(rbp);
        r[reg::RSP as usize] = Some(rsp);
        for (i, v) in r8_to_r15.into_iter().enumerate() {
            r[reg::R8 as usize + i] = Some(v);
        }
        r[reg::RIP as usize] = Some(rip);
        Registers(r)
    }

    pub fn get(&self, reg: u16) -> Option<u64> {
        self.0.get(reg as usize).copied().flatten()
    }

    pub fn set(&mut self, reg: u16, v: Option<u64>) {
        if let Some(slot) = self.0.get_mut(reg as usize) {
            *slot = v;
        }
    }

    pub fn pc(&self) -> Option<u64> {
        self.get(reg::RIP)
    }

    pub fn sp(&self) -> Option<u64> {
        self.get(reg::RSP)
    }
}

/// The thread's memory, as the unwinder reads it (stack slots, signal
/// frames, code bytes of trampolines). False when it cannot be read.
pub trait Memory {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool;

    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let mut b = [0; 8];
        self.read(addr, &mut b).then(|| u64::from_le_bytes(b))
    }
}

impl<F: FnMut(u64, &mut [u8]) -> bool> Memory for F {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self(addr, buf)
    }
}

/// How a caller's registers were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The innermost frame: the registers given.
    Context,
    Cfi,
    FramePointer,
    /// Read back from the signal frame the kernel built.
    SignalFrame,
}

/// The code of `__restore_rt` (rt_sigreturn): glibc's `mov $15, %rax;
/// syscall` and musl's `mov $15, %eax; syscall`.
const SIGRETURN_GLIBC: &[u8] = &[0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];
const SIGRETURN_MUSL: &[u8] = &[0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

/// Whether `pc` is at a sigreturn trampoline: a handler returned there.
pub fn is_sigreturn(pc: u64, mem: &mut dyn Memory) -> bool {
    let mut code = [0u8; 9];
    if mem.read(pc, &mut code) {
        return code == SIGRETURN_GLIBC || code.starts_with(SIGRETURN_MUSL);
    }
    let mut short = [0u8; 7];
    mem.read(pc, &mut short) && short == SIGRETURN_MUSL
}

/// The interrupted registers saved in the signal frame whose ucontext is at
/// `sp` (where a handler's return to the trampoline leaves rsp): the
/// sigcontext's r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip.
pub fn from_signal_frame(sp: u64, mem: &mut dyn Memory) -> Option<Registers> {
    const UC_MCONTEXT: u64 = 40;
    let mut w = [0u64; 17];
    for (i, slot) in w.iter_mut().enumerate() {
        *slot = mem.read_u64(sp + UC_MCONTEXT + 8 * i as u64)?;
    }
    let r8_15 = [w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]];
    Some(Registers::x86_64(
        w[13], w[11], w[14], w[12], w[9], w[8], w[10], w[15], r8_15, w[16],
    ))
}

/// The caller's registers by the CFI row covering `probe` (`pc`, or `pc - 1`
/// for a return address). None when no FDE covers it or a rule fails.
pub fn by_cfi(
    module: &Module,
    probe: u64,
    bias: u64,
    regs: &Registers,
    mem: &mut dyn Memory,
) -> Option<Registers> {
    let addr = probe.wrapping_sub(bias);
    if let (Some(fde), Some(section)) = (module.fde(addr, true), &module.eh_frame) {
        if let Some(r) = apply(section, fde, module, addr, regs, mem) {
            return Some(r);
        }
    }
    if let (Some(fde), Some(section)) = (module.fde(addr, false), &module.debug_frame) {
        return apply(section, fde, module, addr, regs, mem);
    }
    None
}

fn apply<S: UnwindSection<Reader>>(
    section: &S,
    fde: &gimli::FrameDescriptionEntry<Reader>,
    module: &Module,
    addr: u64,
    regs: &Registers,
    mem: &mut dyn Memory,
) -> Option<Registers> {
    let mut ctx = Box::new(gimli::UnwindContext::new());
    let row = fde
        .unwind_info_for_address(section, &module.bases, &mut ctx, addr)
        .ok()?;
    let encoding = fde.cie().encoding();
    let cfa = match row.cfa() {
        CfaRule::RegisterAndOffset { register, offset } => {
            regs.get(register.0)?.wrapping_add(*offset as u64)
        }
        CfaRule::Expression(e) => evaluate(&e.get(section).ok()?, encoding, regs, mem, None)?,
    };
    // Callee-saved registers keep their values unless a rule says otherwise;
    // the others are not known in the caller.
    let mut out = Registers::default();
    for r in [reg::RBX, reg::RBP, reg::R12, reg::R13, reg::R14, reg::R15] {
        out.set(r, regs.get(r));
    }
    out.set(reg::RSP, Some(cfa));
    out.set(reg::RIP, None);
    let ra = fde.cie().return_address_register().0;
    for (register, rule) in row.registers() {
        let value = match rule {
            RegisterRule::Undefined => None,
            RegisterRule::SameValue => regs.get(register.0),
            RegisterRule::Offset(n) => mem.read_u64(cfa.wrapping_add(*n as u64)),
            RegisterRule::ValOffset(n) => Some(cfa.wrapping_add(*n as u64)),
            RegisterRule::Register(r) => regs.get(r.0),
            RegisterRule::Expression(e) => {
                let at = evaluate(&e.get(section).ok()?, encoding, regs, mem, Some(cfa))?;
                mem.read_u64(at)
            }
            RegisterRule::ValExpression(e) => {
                evaluate(&e.get(section).ok()?, encoding, regs, mem, Some(cfa))
            }
            RegisterRule::Constant(c) => Some(*c),
            _ => None,
        };
        let target = if register.0 == ra {
            reg::RIP
        } else {
            register.0
        };
        out.set(target, value);
    }
    out.pc().map(|_| out)
}

/// Evaluates a DWARF expression with the frame's registers and memory.
pub fn evaluate(
    expr: &gimli::Expression<Reader>,
    encoding: gimli::Encoding,
    regs: &Registers,
    mem: &mut dyn Memory,
    initial: Option<u64>,
) -> Option<u64> {
    let mut eval = expr.clone().evaluation(encoding);
    // A hostile program's CFI may loop: bound the work.
    eval.set_max_iterations(10_000);
    if let Some(v) = initial {
        eval.set_initial_value(v);
    }
    let mut result = eval.evaluate().ok()?;
    for _ in 0..1000 {
        result = match result {
            gimli::EvaluationResult::Complete => break,
            gimli::EvaluationResult::RequiresMemory { address, size, .. } => {
                let mut b = [0u8; 8];
                let n = (size as usize).min(8);
                if !mem.read(address, &mut b[..n]) {
                    return None;
                }
                eval.resume_with_memory(gimli::Value::Generic(u64::from_le_bytes(b)))
                    .ok()?
            }
            gimli::EvaluationResult::RequiresRegister { register, .. } => eval
                .resume_with_register(gimli::Value::Generic(regs.get(register.0)?))
                .ok()?,
            _ => return None,
        };
    }
    match eval.result().first()?.location {
        gimli::Location::Address { address } => Some(address),
        gimli::Location::Value { value } => value.to_u64(u64::MAX).ok(),
        gimli::Location::Register { register } => regs.get(register.0),
        _ => None,
    }
}

/// The caller of a PLT stub: a stub only jumps, so the return address its
/// caller pushed is still at [rsp] and every other register is the caller's.
pub fn from_plt_stub(regs: &Registers, mem: &mut dyn Memory) -> Option<Registers> {
    let sp = regs.sp()?;
    let mut out = *regs;
    out.set(reg::RIP, Some(mem.read_u64(sp)?));
    out.set(reg::RSP, Some(sp + 8));
    Some(out)
}

/// The caller by the frame-pointer chain: saved rbp at [rbp], return
/// address at [rbp + 8].
pub fn by_frame_pointer(regs: &Registers, mem: &mut dyn Memory) -> Option<Registers> {
    let rbp = regs.get(reg::RBP)?;
    if rbp == 0 || rbp % 8 != 0 || rbp < regs.sp()? {
        return None;
    }
    let mut out = Registers::default();
    for r in [reg::RBX, reg::R12, reg::R13, reg::R14, reg::R15] {
        out.set(r, regs.get(r));
    }
    out.set(reg::RBP, Some(mem.read_u64(rbp)?));
    out.set(reg::RIP, Some(mem.read_u64(rbp + 8)?));
    out.set(reg::RSP, Some(rbp + 16));
    Some(out)
}
