//! Stops a running vCPU from another thread when the wall-clock timeout
//! passes: a signal interrupts KVM_RUN with EINTR.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

/// How often a fired watchdog re-sends its signal, in case the first one
/// arrived between two KVM_RUNs.
const RESEND: Duration = Duration::from_millis(5);
/// How far CLOCK_MONOTONIC_COARSE may lag CLOCK_MONOTONIC: a tick (4 ms
/// at HZ=250, 10 ms at HZ=100).
const COARSE_SLACK: Duration = Duration::from_millis(10);

fn signal() -> libc::c_int {
    libc::SIGRTMIN() + 1
}

extern "C" fn ignore(_: libc::c_int) {}

fn install_handler() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: installs a handler that does nothing; no SA_RESTART so KVM_RUN returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(signal(), &sa, std::ptr::null_mut());
        }
    });
}

pub struct Watchdog {
    /// When the timeout passes (CLOCK_MONOTONIC); `fired` asks the clock
    /// too, so a loaded host that has not yet run the watchdog's thread
    /// still stops the run at its next exit. Not `Instant`: its `rdtsc`
    /// faults inside a `Trap` (`tsc.rs`).
    deadline: Option<Duration>,
    fired: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Watches the calling thread; `None` never fires.
    pub fn start(timeout: Option<Duration>) -> Watchdog {
        let fired = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let deadline = timeout.map(|t| super::tsc::precise_now() + t);
        let thread = timeout.map(|t| {
            install_handler();
            // The thread would inherit a trapped `rdtsc` (`tsc`).
            super::tsc::release();
            // SAFETY: pthread_self is always safe.
            let target = unsafe { libc::pthread_self() };
            let (fired, done) = (fired.clone(), done.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + t;
                while !done.load(Ordering::Acquire) {
                    let now = Instant::now();
                    if now >= deadline {
                        fired.store(true, Ordering::Release);
                        // SAFETY: the target thread outlives us: Drop joins before it returns.
                        unsafe { libc::pthread_kill(target, signal()) };
                        std::thread::park_timeout(RESEND);
                    } else {
                        // Drop unparks it, so a run that ends first does
                        // not wait for a sleep to end (a 20 ms sleep here
                        // added up to 20 ms to every run with a timeout:
                        // each of check's schedules after schedule 0).
                        std::thread::park_timeout(deadline - now);
                    }
                }
            })
        });
        Watchdog {
            deadline,
            fired,
            done,
            thread,
        }
    }

    /// Whether the timeout has passed (the thread's signal interrupts a
    /// guest that makes no exit; this answers between exits).
    pub fn fired(&self) -> bool {
        if self.fired.load(Ordering::Acquire) {
            return true;
        }
        // The coarse clock (no system call) every step; the precise one
        // only within a tick of the deadline.
        self.deadline.is_some_and(|d| {
            super::tsc::coarse_now() + COARSE_SLACK >= d && super::tsc::precise_now() >= d
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passed_timeout_is_fired_before_the_watchdog_thread_runs() {
        // On a loaded host the thread may not run for milliseconds; the
        // run loop must stop at its next exit all the same.
        let w = Watchdog::start(Some(Duration::ZERO));
        assert!(w.fired());
        assert!(!Watchdog::start(None).fired());
        assert!(!Watchdog::start(Some(Duration::from_secs(3600))).fired());
    }

    #[test]
    fn asking_a_watchdog_keeps_the_time_stamp_trap() {
        // `fired` is asked every step inside a `Trap`: a clock read there
        // that needs `rdtsc` would give the thread its counter back and
        // cost a prctl pair at the next guest entry, every step.
        let w = Watchdog::start(Some(Duration::from_secs(3600)));
        let trap = super::super::tsc::Trap::hold();
        trap.arm();
        if !super::super::tsc::trapping() {
            return; // this host refuses PR_SET_TSC: nothing to keep
        }
        for _ in 0..3 {
            assert!(!w.fired());
        }
        assert!(super::super::tsc::trapping(), "fired() read rdtsc");
        drop(trap);
        assert!(!super::super::tsc::trapping());
    }
}
