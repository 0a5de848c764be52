//! `rdtsc` and `rdtscp` from ring 3 fault, so the kernel can answer them
//! with a virtual time stamp counter.
//!
//! The guest's CR4.TSD makes them a #GP on hardware KVM. PVM runs guest
//! ring 3 with the host's CR4, where TSD is clear, so there the host thread
//! that enters the guest also asks Linux for it (`PR_SET_TSC`,
//! `PR_TSC_SIGSEGV`): the CPU then faults, PVM's instruction emulator sees
//! the guest's CR4.TSD and gives the guest its #GP (`rdtscp`, which it does
//! not emulate, a #UD).
//!
//! A change of the host's CR4 costs about 11 us on a nested host, so the
//! thread keeps the setting between exits, and the monitor's own `rdtsc`
//! (the vDSO's `clock_gettime`) is served by a SIGSEGV handler that gives
//! the thread its counter back until its next guest entry.

use std::cell::Cell;
use std::sync::Once;

thread_local! {
    /// Whether this thread's `rdtsc` faults (PR_TSC_SIGSEGV is in effect).
    static TRAPPING: Cell<bool> = const { Cell::new(false) };
}

/// The si_code of a signal the kernel sent for a #GP.
const SI_KERNEL: libc::c_int = 0x80;

/// The SIGSEGV disposition found before ours, for faults that are not a
/// time stamp read of the monitor's own.
static mut PREVIOUS: Option<libc::sigaction> = None;

/// Makes the calling thread's `rdtsc` fault until the monitor reads the
/// counter itself; a no-op while it already does.
pub fn trap_on_this_thread() {
    if TRAPPING.with(Cell::get) {
        return;
    }
    install_handler();
    // SAFETY: prctl with integer arguments changes only this thread's TSC mode.
    let ok = unsafe { libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_SIGSEGV) } == 0;
    TRAPPING.with(|t| t.set(ok));
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

#[cfg(test)]
mod tests {
    use super::reads_tsc;

    #[test]
    fn time_stamp_reads_are_told_from_other_instructions() {
        assert_eq!(reads_tsc(&[0x0f, 0x31, 0x48]), Some((2, false)));
        assert_eq!(reads_tsc(&[0x0f, 0x01, 0xf9]), Some((3, true)));
        assert_eq!(reads_tsc(&[0x0f, 0x01, 0xd0]), None);
        assert_eq!(reads_tsc(&[0x0f, 0x0b]), None);
        assert_eq!(reads_tsc(&[0x0f]), None);
    }
}
