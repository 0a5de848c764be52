//! Recording: the on-disk trace, thread switches, forks' manifests, diffs and
//! the JSON shapes. The events, the manifest and keyframes themselves sit
//! below the kernel, in `crate::run`, and are re-exported here.

pub mod diff;
pub mod fork;
pub mod json;
pub mod switches;
pub mod trace;

pub use crate::run::{event, keyframe, manifest, pages, Discard, Recorder};
pub use crate::run::{Access, Event, EventKind, ExitStatus, SdkKind};
pub use crate::run::{ForkOf, Manifest, Pct, Perturbation, Perturbed, Points};
