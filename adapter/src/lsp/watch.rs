//! Watching the store: a run or a check lands in `$REWIND_HOME` by a
//! rename into `runs/` or `checks/`, which changes that directory's
//! modification time, and so does a removal. Polling the two directories'
//! times (two `stat`s every [`INTERVAL`]) sees every landing, works before
//! the store exists and on any file system, and needs no crate; inotify
//! (the `notify` crate) would save the polling but must re-arm when the
//! directories are created or replaced.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How often the store is looked at: well under the 1 s the issue asks
/// from a check's end to its diagnostics.
pub const INTERVAL: Duration = Duration::from_millis(200);

/// What the store's directories looked like at one look.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stamp(Vec<Option<SystemTime>>);

/// The directories whose changes matter.
pub fn watched(home: &Path) -> Vec<PathBuf> {
    vec![home.join("runs"), home.join(vmm::store::checks::CHECKS_DIR)]
}

pub fn stamp(dirs: &[PathBuf]) -> Stamp {
    Stamp(
        dirs.iter()
            .map(|d| std::fs::metadata(d).and_then(|m| m.modified()).ok())
            .collect(),
    )
}
