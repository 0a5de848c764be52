//! Recording: events, the manifest of inputs, the on-disk trace.

pub mod diff;
pub mod event;
pub mod fork;
pub mod json;
pub mod keyframe;
pub mod manifest;
pub mod pages;
pub mod switches;
pub mod trace;

pub use event::{Access, Event, EventKind, ExitStatus, SdkKind};
pub use manifest::{ForkOf, Manifest, Pct, Perturbation, Perturbed, Points};

/// Where a running machine sends what it records.
pub trait Recorder {
    fn event(&mut self, event: &Event);
    /// Bytes the guest wrote to its standard output (fd 1) or error (fd 2).
    fn output(&mut self, fd: i32, bytes: &[u8]);
    /// From `step` on, thread `tid` of process `pid` holds the CPU.
    fn switch(&mut self, _step: u64, _pid: u32, _tid: u32) {}
    /// Keep a keyframe; `pages` are the pages written since the previous one.
    /// Recorders that keep no keyframes say so, and the engine takes none.
    fn keyframe(&mut self, _kf: &keyframe::Keyframe, _pages: &[(pages::PageHash, &[u8])]) {}
    fn wants_keyframes(&self) -> bool {
        false
    }
}

/// A recorder that keeps nothing: for runs made only to look inside them.
pub struct Discard;

impl Recorder for Discard {
    fn event(&mut self, _: &Event) {}
    fn output(&mut self, _: i32, _: &[u8]) {}
}
