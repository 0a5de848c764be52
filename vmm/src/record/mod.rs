//! Recording: the on-disk trace, thread switches, forks' manifests, diffs and
//! the JSON shapes. The events, the manifest and keyframes themselves sit
//! below the kernel, in `crate::run`, and are named there.

pub mod diff;
pub mod fork;
pub mod json;
pub mod switches;
pub mod trace;
