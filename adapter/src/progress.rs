//! Watching a run as it is recorded: [`Watched`], a recorder that shows a
//! [`Watch`] each event and each write of the guest before it hands them to
//! the recorder underneath (the debug adapter's `output` events are one);
//! and [`Progress`], a progress line on a terminal for commands that run a
//! machine without showing its output (replay, a quiet fork): the step
//! reached against the recorded run's steps, redrawn a few times a second.
//! Quiet when stderr is not a terminal.

use std::io::IsTerminal;
use std::time::Duration;
use vmm::machine::tsc::coarse_now;
use vmm::run::{Event, Recorder};

/// What sees a run as it is recorded, before the recorder underneath.
pub trait Watch {
    fn event(&mut self, _event: &Event) {}
    /// Bytes the guest wrote to its standard output (fd 1) or error (fd 2).
    fn output(&mut self, _fd: i32, _bytes: &[u8]) {}
}

/// A recorder that shows `watch` the events and the guest's writes, and
/// hands everything to `inner`.
pub struct Watched<'a, W: Watch> {
    pub inner: &'a mut dyn Recorder,
    pub watch: W,
}

impl<W: Watch> Recorder for Watched<'_, W> {
    fn event(&mut self, event: &Event) {
        self.watch.event(event);
        self.inner.event(event);
    }

    fn output(&mut self, fd: i32, bytes: &[u8]) {
        self.watch.output(fd, bytes);
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

    fn more_input(&mut self) -> Option<Vec<u8>> {
        self.inner.more_input()
    }
}

/// How often the line is redrawn.
const EVERY: Duration = Duration::from_millis(250);

/// The progress line, watching a run: `Watched { inner, watch: Progress::new(..) }`.
pub struct Progress {
    what: &'static str,
    total: u64,
    tty: bool,
    /// A coarse clock: read at every event, inside the engine's loop (`vmm::machine::tsc`).
    last: Duration,
    shown: bool,
}

impl Progress {
    /// `total`: the steps the run is expected to take.
    pub fn new(what: &'static str, total: u64) -> Progress {
        Progress {
            what,
            total,
            tty: std::io::stderr().is_terminal(),
            last: coarse_now(),
            shown: false,
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
        }
    }
}

impl Watch for Progress {
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
    }
}
