//! Runs being written by this process, so that a signal handler can remove
//! them before the process dies (see [`abandon_unfinished`]).
//!
//! A run being written also holds the store's lock shared (`store::lock`)
//! from [`register`] until it leaves this list (finished or dropped), so
//! that `rewind gc`, which holds it exclusive, never removes pages the run
//! has written before the run is in place.

use super::lock::StoreLock;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A run or file being written, and the store lock it holds.
pub(crate) struct Pending {
    path: PathBuf,
    _lock: Option<StoreLock>,
}

impl PartialEq<PathBuf> for Pending {
    fn eq(&self, other: &PathBuf) -> bool {
        &self.path == other
    }
}

static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());

pub(crate) fn lock() -> MutexGuard<'static, Vec<Pending>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers `dir`, a temporary directory in `<home>/runs/`, taking the
/// store's lock shared (waiting while a `gc`, `remove` or `prune` runs).
pub(crate) fn register(dir: &Path) {
    let home = dir.parent().and_then(Path::parent);
    let lock = home.and_then(|h| super::Store::at(h).lock_shared().ok());
    register_locked(dir, lock);
}

/// Registers a path to remove if the process is interrupted, with the lock
/// (if any) to hold until it is unregistered.
pub(crate) fn register_locked(path: &Path, held: Option<StoreLock>) {
    lock().push(Pending {
        path: path.to_path_buf(),
        _lock: held,
    });
}

/// Unregisters a path (it was finished, or removed).
pub(crate) fn unregister(path: &Path) {
    lock().retain(|p| p.path != path);
}

/// Removes every run this process is still writing, and keeps any of them
/// from completing afterwards: call it from a signal-handling thread just
/// before the process dies (Ctrl-C, SIGTERM). A run that completed before
/// this call stays; one that did not leaves nothing behind.
pub fn abandon_unfinished() {
    let guard = lock();
    for p in guard.iter() {
        if std::fs::remove_dir_all(&p.path).is_err() {
            let _ = std::fs::remove_file(&p.path);
        }
    }
    // Hold the lock for the rest of the process's short life: no run may be
    // renamed into place after its directory was removed.
    std::mem::forget(guard);
}
