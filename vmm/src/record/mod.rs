//! Recording: events, the manifest of inputs, the on-disk trace.

pub mod diff;
pub mod event;
pub mod manifest;
pub mod trace;

pub use event::{Event, EventKind, ExitStatus, SdkKind};
pub use manifest::{Manifest, Perturbation, Perturbed};

/// Where a running machine sends what it records.
pub trait Recorder {
    fn event(&mut self, event: &Event);
    /// Bytes the guest wrote to its standard output (fd 1) or error (fd 2).
    fn output(&mut self, fd: i32, bytes: &[u8]);
}
