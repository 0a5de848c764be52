//! CPU exceptions from ring 3: demand paging, or a signal for the thread.

use super::signal::*;
use super::Kernel;
use crate::kernel::mm::Fault;
use crate::run::ExitStatus;

const VEC_DIVIDE: u8 = 0;
const VEC_DEBUG: u8 = 1;
const VEC_BREAKPOINT: u8 = 3;
const VEC_OVERFLOW: u8 = 4;
const VEC_BOUND: u8 = 5;
const VEC_INVALID_OPCODE: u8 = 6;
const VEC_STACK: u8 = 12;
const VEC_GENERAL_PROTECTION: u8 = 13;
const VEC_PAGE_FAULT: u8 = 14;
const VEC_X87: u8 = 16;
const VEC_ALIGNMENT: u8 = 17;
const VEC_SIMD: u8 = 19;

const PF_WRITE: u64 = 2;
const PF_FETCH: u64 = 16;

const FPE_INTDIV: i32 = 1;
const FPE_FLTINV: i32 = 7;
const ILL_ILLOPN: i32 = 2;
const TRAP_BRKPT: i32 = 1;
const TRAP_TRACE: i32 = 2;
const BUS_ADRALN: i32 = 1;
const BUS_ADRERR: i32 = 2;
/// si_code of a signal the kernel sent (a #GP has no address).
const SI_KERNEL: i32 = 0x80;

impl Kernel<'_> {
    pub(super) fn exception(&mut self, vector: u8, error_code: u64, cr2: u64) {
        if (vector == VEC_GENERAL_PROTECTION || vector == VEC_INVALID_OPCODE) && self.read_tsc() {
            return;
        }
        let (vector, error_code) = self.hardware_vector(vector, error_code);
        let rip = self.m.regs().rip;
        let (signo, code, addr) = match vector {
            VEC_PAGE_FAULT => {
                if self.memory_point(error_code, cr2) {
                    return;
                }
                let pid = self.cur_pid();
                let p = self.procs.get_mut(&pid).unwrap();
                let write = error_code & PF_WRITE != 0;
                let exec = error_code & PF_FETCH != 0;
                match p
                    .mm
                    .fault_in(&mut self.m.ram, &mut self.vfs, cr2, write, exec)
                {
                    Ok(_) => {
                        self.points_fresh_page(cr2);
                        return;
                    }
                    // No mapping is MAPERR even where the monitor's own pages are present.
                    Err(Fault::Unmapped) => (SIGSEGV, SEGV_MAPERR, cr2),
                    Err(Fault::Denied) => (SIGSEGV, SEGV_ACCERR, cr2),
                    Err(Fault::PastEnd) => (SIGBUS, BUS_ADRERR, cr2),
                    Err(Fault::NoMemory) => {
                        // Guest memory is exhausted: Linux's OOM killer.
                        self.exit_process(pid, ExitStatus::Killed(SIGKILL));
                        return;
                    }
                }
            }
            VEC_DIVIDE => (SIGFPE, FPE_INTDIV, rip),
            VEC_X87 | VEC_SIMD => (SIGFPE, FPE_FLTINV, rip),
            VEC_INVALID_OPCODE => (SIGILL, ILL_ILLOPN, rip),
            VEC_BREAKPOINT => (SIGTRAP, TRAP_BRKPT, rip),
            VEC_DEBUG => (SIGTRAP, TRAP_TRACE, rip),
            VEC_ALIGNMENT => (SIGBUS, BUS_ADRALN, cr2),
            // A stack fault (a non-canonical rsp) is SIGBUS on Linux, not SIGSEGV.
            VEC_STACK => (SIGBUS, SI_KERNEL, 0),
            VEC_GENERAL_PROTECTION | VEC_OVERFLOW | VEC_BOUND => (SIGSEGV, SI_KERNEL, 0),
            _ => (SIGSEGV, SI_KERNEL, 0),
        };
        self.force_signal(SigInfo::fault(signo, code, addr).with_trap(vector, error_code));
    }

    /// Answers an `rdtsc` or `rdtscp` at rip, which fault here
    /// (`machine::tsc`), with the virtual time stamp counter: one tick a
    /// virtual nanosecond of CLOCK_MONOTONIC, and TSC_AUX (`rdtscp`'s ecx)
    /// the cpu `getcpu` names, 0. False when the instruction is another.
    fn read_tsc(&mut self) -> bool {
        let rip = self.m.regs().rip;
        let Some((len, rdtscp)) = self.tsc_read_at_rip() else {
            return false;
        };
        let tsc = self.clock.now();
        let r = self.m.regs_mut();
        r.rax = tsc & 0xffff_ffff;
        r.rdx = tsc >> 32;
        if rdtscp {
            r.rcx = 0;
        }
        r.rip = rip.wrapping_add(len);
        true
    }

    /// The length of the `rdtsc` (false) or `rdtscp` (true) at the current
    /// thread's rip, when it is one: its #GP or #UD is no signal.
    pub fn tsc_read_at_rip(&mut self) -> Option<(u64, bool)> {
        let rip = self.m.regs().rip;
        let bytes = self.read_user_some(rip, 3).ok()?;
        crate::machine::tsc::reads_tsc(&bytes)
    }

    /// The vector and error code the hardware Linux runs on gives for the
    /// instruction at rip, where PVM's paravirtual delivery differs (found
    /// by the instruction fuzzer, guest/tests/insn-fuzz.c): there, `int N`,
    /// `sysenter`, `xsaves` and `xrstors` from ring 3 raise #UD (Linux: #GP,
    /// SIGSEGV; `int 3` a breakpoint), and `mov` with CR1 or CR5-15 a #GP
    /// (Linux: #UD, SIGILL). On hardware virtualization they already agree.
    fn hardware_vector(&mut self, vector: u8, error_code: u64) -> (u8, u64) {
        use crate::machine::insn::{privileged, Privileged};
        if vector != VEC_INVALID_OPCODE && vector != VEC_GENERAL_PROTECTION {
            return (vector, error_code);
        }
        let rip = self.m.regs().rip;
        let Ok(bytes) = self.read_user_some(rip, 15) else {
            return (vector, error_code);
        };
        match (vector, privileged(&bytes, rip)) {
            // A trap: the thread resumes after it, as after `int3`.
            (VEC_INVALID_OPCODE, Some(Privileged::SoftwareInterrupt { vector: 3, len })) => {
                self.m.regs_mut().rip = rip.wrapping_add(len);
                (VEC_BREAKPOINT, 0)
            }
            // The gate's selector in the IDT, as the hardware's #GP reports it.
            (VEC_INVALID_OPCODE, Some(Privileged::SoftwareInterrupt { vector, .. })) => {
                (VEC_GENERAL_PROTECTION, (vector as u64) << 3 | 2)
            }
            (VEC_INVALID_OPCODE, Some(Privileged::KernelOnly)) => (VEC_GENERAL_PROTECTION, 0),
            // The hardware's #GP(selector); the selector is not read back.
            (VEC_INVALID_OPCODE, Some(Privileged::FarTransfer)) => (VEC_GENERAL_PROTECTION, 0),
            (VEC_GENERAL_PROTECTION, Some(Privileged::ReservedControlRegister)) => {
                (VEC_INVALID_OPCODE, 0)
            }
            _ => (vector, error_code),
        }
    }
}
