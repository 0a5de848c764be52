//! Runs being written by this process, so that a signal handler can remove
//! them before the process dies (see [`abandon_unfinished`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

pub(crate) fn lock() -> MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn register(dir: &Path) {
    lock().push(dir.to_path_buf());
}

/// Removes every run this process is still writing, and keeps any of them
/// from completing afterwards: call it from a signal-handling thread just
/// before the process dies (Ctrl-C, SIGTERM). A run that completed before
/// this call stays; one that did not leaves nothing behind.
pub fn abandon_unfinished() {
    let guard = lock();
    for dir in guard.iter() {
        let _ = std::fs::remove_dir_all(dir);
    }
    // Hold the lock for the rest of the process's short life: no run may be
    // renamed into place after its directory was removed.
    std::mem::forget(guard);
}
