//! A progress line on a terminal for commands that run a machine without
//! showing its output (replay, a quiet fork): the step reached against the
//! recorded run's steps, redrawn a few times a second. Quiet when stderr is
//! not a terminal.

use std::io::IsTerminal;
use std::time::Duration;
use vmm::machine::tsc::coarse_now;
use vmm::run::{Event, Recorder};

/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(250);

pub struct Progress<'a> {
    inner: &'a mut dyn Recorder,
    what: &'static str,
    total: u64,
    tty: bool,
    /// A coarse clock: read at every event, inside the engine's loop (`vmm::machine::tsc`).
    last: Duration,
    shown: bool,
}

impl<'a> Progress<'a> {
    /// `total`: the steps the run is expected to take.
    pub fn new(inner: &'a mut dyn Recorder, what: &'static str, total: u64) -> Progress<'a> {
        Progress {
            inner,
            what,
            total,
            tty: std::io::stderr().is_terminal(),
            last: coarse_now(),
            shown: false,
        }
    }
}

impl Drop for Progress<'_> {
    fn drop(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
        }
    }
}

impl Recorder for Progress<'_> {
    fn event(&mut self, event: &Event) {
        if self.tty && coarse_now().saturating_sub(self.last) >= EVERY {
            self.last = coarse_now();
            self.shown = true;
            let pct = event.step as f64 * 100.0 / self.total.max(1) as f64;
            eprint!(
                "\rrewind: {} step {} of {} ({pct:.0}%)\x1b[K",
                self.what, event.step, self.total
            );
        }
        self.inner.event(event);
    }

    fn output(&mut self, fd: i32, bytes: &[u8]) {
        self.inner.output(fd, bytes);
    }

    fn switch(&mut self, step: u64, pid: u32, tid: u32) {
        self.inner.switch(step, pid, tid);
    }

    fn keyframe(
        &mut self,
        kf: &vmm::run::keyframe::Keyframe,
        pages: &[(vmm::run::pages::PageHash, &[u8])],
    ) {
        self.inner.keyframe(kf, pages);
    }

    fn wants_keyframes(&self) -> bool {
        self.inner.wants_keyframes()
    }
}
