//! `rdtsc` and `rdtscp` from ring 3 fault, so the kernel can answer them
//! with a virtual time stamp counter (`Kernel::read_tsc`).
//!
//! The guest's CR4.TSD makes them a #GP on hardware KVM. PVM runs guest
//! ring 3 with the host's CR4, where TSD is clear, so there the host thread
//! that enters the guest also asks Linux for it (`PR_SET_TSC`,
//! `PR_TSC_SIGSEGV`): the CPU then faults, PVM's instruction emulator sees
//! the guest's CR4.TSD and gives the guest its #GP (`rdtscp`, which it does
//! not emulate, a #UD).
//!
//! That mode is inherited by every thread and process the thread starts,
//! across `execve` (gdb, nix, a check's property scripts, a test's next
//! `rewind`, which would die on their first `clock_gettime`). So it is in
//! effect only inside a [`Trap`]: a loop of the engine that runs the guest
//! holds one from its start until it returns to its caller (a `prctl` pair
//! a call, about 23 us on a nested host, not a step), and starts nothing
//! meanwhile. [`Machine::run`](super::Machine::run) takes the `Trap`, so no
//! guest runs outside one. The monitor's own `rdtsc` inside the loop (the
//! vDSO's `clock_gettime` of `Instant::now`) is served by a SIGSEGV handler
//! that gives the thread its counter back until its next guest entry; the
//! loops read coarse clocks ([`coarse_now`]), which need no `rdtsc`. A
//! thread started by mistake inside a `Trap` gets its counter back from the
//! same handler at its first read; a process would not, which is why none
//! is started there.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;
use std::time::Duration;

thread_local! {
    /// How many `Trap`s this thread holds.
    static HELD: Cell<u32> = const { Cell::new(0) };
    /// Whether this thread's `rdtsc` faults (PR_TSC_SIGSEGV is in effect).
    static TRAPPING: Cell<bool> = const { Cell::new(false) };
}

/// Set when Linux refused `PR_SET_TSC` (not asked again).
static REFUSED: AtomicBool = AtomicBool::new(false);

/// The si_code of a signal the kernel sent for a #GP.
const SI_KERNEL: libc::c_int = 0x80;

/// The SIGSEGV disposition found before ours, for faults that are not a
/// time stamp read of the monitor's own.
static mut PREVIOUS: Option<libc::sigaction> = None;

/// The engine runs the guest on this thread while one is held: the
/// thread's `rdtsc` faults from the next guest entry until the last `Trap`
/// is dropped. Not `Send`: it is this thread's. Start no thread or process
/// while one is held.
pub struct Trap {
    /// False only in a test that shows what the guest reads without it.
    arms: bool,
    _thread: PhantomData<*const ()>,
}

impl Trap {
    pub fn hold() -> Trap {
        HELD.with(|h| h.set(h.get() + 1));
        Trap {
            arms: true,
            _thread: PhantomData,
        }
    }

    /// Makes this thread's `rdtsc` fault, for the guest entry that follows;
    /// a no-op while it already does.
    pub(super) fn arm(&self) {
        if !self.arms || TRAPPING.with(Cell::get) || REFUSED.load(Ordering::Relaxed) {
            return;
        }
        install_handler();
        // SAFETY: prctl with integer arguments changes only this thread's TSC mode.
        let ok = unsafe { libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_SIGSEGV) } == 0;
        if !ok {
            REFUSED.store(true, Ordering::Relaxed);
        }
        TRAPPING.with(|t| t.set(ok));
    }
}

impl Drop for Trap {
    fn drop(&mut self) {
        let held = HELD.with(|h| {
            h.set(h.get() - 1);
            h.get()
        });
        if held == 0 {
            release();
        }
    }
}

/// Gives this thread its `rdtsc` back now (a no-op when it has it); a
/// `Trap` still held arms it again at the next guest entry.
pub fn release() {
    if TRAPPING.with(Cell::get) {
        // SAFETY: as in `arm`.
        unsafe { libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_ENABLE) };
        TRAPPING.with(|t| t.set(false));
    }
}

/// Whether this thread's `rdtsc` faults now (for tests).
pub fn trapping() -> bool {
    TRAPPING.with(Cell::get)
}

/// CLOCK_MONOTONIC_COARSE (a few ms fine): the monitor's clock inside a
/// `Trap`, which the vDSO answers without `rdtsc`.
pub fn coarse_now() -> Duration {
    clock(libc::CLOCK_MONOTONIC_COARSE)
}

/// CLOCK_MONOTONIC read by a system call, not the vDSO: precise, and
/// without `rdtsc`, so it may be read inside a `Trap` (about a system
/// call's cost: read it rarely there).
pub fn precise_now() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    unsafe { libc::syscall(libc::SYS_clock_gettime, libc::CLOCK_MONOTONIC, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The CPU time the calling thread has used (a system call, no `rdtsc`).
pub fn thread_cpu_time() -> Duration {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock(id: libc::clockid_t) -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the timespec it is given.
    unsafe { libc::clock_gettime(id, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The length of the instruction at the start of `bytes` when it reads the
/// time stamp counter, and whether it is `rdtscp`.
pub fn reads_tsc(bytes: &[u8]) -> Option<(u64, bool)> {
    match bytes {
        [0x0f, 0x31, ..] => Some((2, false)),
        [0x0f, 0x01, 0xf9, ..] => Some((3, true)),
        _ => None,
    }
}

fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: installs `on_segv` for SIGSEGV, keeping the previous
        // disposition (Rust's stack overflow report) for every other fault;
        // PREVIOUS is written once, before the handler can run.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_segv as extern "C" fn(_, _, _) as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGSEGV, &sa, &mut old) == 0 {
                PREVIOUS = Some(old);
            }
        }
    });
}

extern "C" fn on_segv(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo and ucontext. A #GP (the
    // kernel's SI_KERNEL, never a page fault) is raised by the instruction
    // at rip, so its bytes are readable; the third only for a 0f 01.
    let tsc = unsafe {
        let uc = &*(ctx as *const libc::ucontext_t);
        let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as *const u8;
        (*info).si_code == SI_KERNEL
            && *rip == 0x0f
            && (*rip.add(1) == 0x31 || (*rip.add(1) == 0x01 && *rip.add(2) == 0xf9))
    };
    if tsc {
        // SAFETY: prctl is async-signal-safe; the rdtsc runs again on return.
        unsafe { libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_ENABLE) };
        TRAPPING.with(|t| t.set(false));
        return;
    }
    // SAFETY: PREVIOUS was set before this handler was installed.
    let previous = unsafe { *std::ptr::addr_of!(PREVIOUS) };
    match previous {
        Some(old) if old.sa_flags & libc::SA_SIGINFO != 0 && old.sa_sigaction > 1 => {
            // SAFETY: the previous handler was installed for these arguments.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(old.sa_sigaction) };
            f(sig, info, ctx);
        }
        Some(old) if old.sa_sigaction > 1 => {
            // SAFETY: as above, a plain handler.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(old.sa_sigaction) };
            f(sig);
        }
        // The default: the fault repeats on return and ends the process.
        _ => unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
        },
    }
}

/// Whether a guest's `rdtsc` faults on this host, by running one: `rdtsc`
/// then `syscall` in ring 3, inside a `Trap` (`rewind doctor`).
pub fn guest_rdtsc_faults() -> Result<bool, crate::EngineError> {
    guest_rdtsc_in(Trap::hold())
}

fn guest_rdtsc_in(trap: Trap) -> Result<bool, crate::EngineError> {
    use super::{paging, Exit, Machine, Perm};
    const CODE: u64 = 0x40_0000;
    let mut m = Machine::new(super::memory::MIN_MEM)?;
    let pt = paging::PageTables::new(&mut m.ram).ok_or(crate::EngineError::OutOfMemory)?;
    let frame = m.ram.alloc_frame().ok_or(crate::EngineError::OutOfMemory)?;
    m.ram.write(frame, &[0x0f, 0x31, 0x0f, 0x05])?;
    let perm = Perm {
        write: false,
        exec: true,
    };
    if !pt.map(&mut m.ram, CODE, frame, perm) {
        return Err(crate::EngineError::OutOfMemory);
    }
    m.set_address_space(pt);
    let r = m.regs_mut();
    r.rip = CODE;
    r.rflags = super::regs::RFLAGS_DEFAULT;
    let exit = m.run(&trap)?;
    Ok(matches!(exit, Exit::Exception { vector, .. } if vector == 13 || vector == 6))
}

#[cfg(test)]
mod tests {
    use super::{guest_rdtsc_faults, guest_rdtsc_in, reads_tsc, release, trapping, Trap, HELD};

    #[test]
    fn time_stamp_reads_are_told_from_other_instructions() {
        assert_eq!(reads_tsc(&[0x0f, 0x31, 0x48]), Some((2, false)));
        assert_eq!(reads_tsc(&[0x0f, 0x01, 0xf9]), Some((3, true)));
        assert_eq!(reads_tsc(&[0x0f, 0x01, 0xd0]), None);
        assert_eq!(reads_tsc(&[0x0f, 0x0b]), None);
        assert_eq!(reads_tsc(&[0x0f]), None);
    }

    #[test]
    fn the_mode_lasts_while_a_trap_is_held_and_the_monitor_reads_its_counter() {
        let outer = Trap::hold();
        outer.arm();
        if !trapping() {
            return; // Linux refused PR_SET_TSC here (a seccomp sandbox).
        }
        // The monitor's own read: the handler gives the counter back.
        // SAFETY: rdtsc has no preconditions.
        let _ = unsafe { core::arch::x86_64::_rdtsc() };
        assert!(!trapping());
        outer.arm();
        let inner = Trap::hold();
        drop(inner);
        assert!(trapping(), "an inner trap's end keeps the outer one's mode");
        drop(outer);
        assert!(!trapping());
        // Nothing inherits it: a child reads the clock.
        let out = std::process::Command::new("date").output().unwrap();
        assert!(out.status.success());
        release();
    }

    #[test]
    fn the_probe_tells_a_trapped_rdtsc_from_one_that_is_not() {
        assert!(guest_rdtsc_faults().unwrap(), "rdtsc is trapped in a Trap");
        if std::path::Path::new("/sys/module/kvm_pvm").exists() {
            // PVM ignores the guest's CR4.TSD: without the thread's mode the
            // guest reads the host's counter, and the probe says so.
            let inert = Trap {
                arms: false,
                _thread: std::marker::PhantomData,
            };
            HELD.with(|h| h.set(h.get() + 1));
            assert!(!guest_rdtsc_in(inert).unwrap());
        }
        assert!(!trapping());
    }
}
