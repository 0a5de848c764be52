//! The store's advisory lock: `$REWIND_HOME/lock`, taken with flock(2).
//!
//! Whatever adds to the store holds it shared for as long as it writes:
//! a run being recorded (from `Store::begin` until the recorder is finished
//! or dropped), an import, a bookmark, an export reading pages. Whatever
//! takes things away from the store holds it exclusive: `gc`, `remove`,
//! `prune`. So `gc` never removes a page that a run being recorded right now
//! has written but not yet made visible, and `remove` never races a fork of
//! the run it removes. The kernel drops the lock when its holder dies, so a
//! killed command never leaves the store locked.

use super::{Store, StoreError};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

/// The name of the lock file in `$REWIND_HOME`.
pub const LOCK_FILE: &str = "lock";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    Shared,
    Exclusive,
}

/// A held lock on the store; released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    file: File,
    kind: LockKind,
}

impl StoreLock {
    pub fn kind(&self) -> LockKind {
        self.kind
    }
}

impl Drop for StoreLock {
    fn drop(&mut self) {
        // SAFETY: unlocking our own open descriptor.
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

fn flock(file: &File, op: libc::c_int) -> std::io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own.
        let r = unsafe { libc::flock(file.as_raw_fd(), op) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

impl Store {
    fn lock_path(&self) -> PathBuf {
        self.home().join(LOCK_FILE)
    }

    fn open_lock(&self) -> Result<File, StoreError> {
        let path = self.lock_path();
        std::fs::create_dir_all(self.home()).map_err(|source| StoreError::Unwritable {
            path: self.home().to_path_buf(),
            source,
        })?;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| StoreError::Unwritable { path, source })
    }

    /// Takes the lock, waiting as long as it takes. `waiting` is called once
    /// if the lock is not free at once (to tell the user why nothing happens).
    pub fn lock(&self, kind: LockKind, waiting: &mut dyn FnMut()) -> Result<StoreLock, StoreError> {
        let file = self.open_lock()?;
        let op = match kind {
            LockKind::Shared => libc::LOCK_SH,
            LockKind::Exclusive => libc::LOCK_EX,
        };
        let io = |source| StoreError::Io {
            path: self.lock_path(),
            source,
        };
        match flock(&file, op | libc::LOCK_NB) {
            Ok(()) => return Ok(StoreLock { file, kind }),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => waiting(),
            Err(e) => return Err(io(e)),
        }
        flock(&file, op).map_err(io)?;
        Ok(StoreLock { file, kind })
    }

    /// The lock held shared: for whatever adds to the store.
    pub fn lock_shared(&self) -> Result<StoreLock, StoreError> {
        self.lock(LockKind::Shared, &mut || {})
    }

    /// The lock held exclusive: for whatever removes from the store.
    pub fn lock_exclusive(&self, waiting: &mut dyn FnMut()) -> Result<StoreLock, StoreError> {
        self.lock(LockKind::Exclusive, waiting)
    }

    /// The lock, if it can be had within `wait`.
    pub fn try_lock(
        &self,
        kind: LockKind,
        wait: Duration,
    ) -> Result<Option<StoreLock>, StoreError> {
        let file = self.open_lock()?;
        let op = match kind {
            LockKind::Shared => libc::LOCK_SH,
            LockKind::Exclusive => libc::LOCK_EX,
        } | libc::LOCK_NB;
        let until = std::time::Instant::now() + wait;
        loop {
            match flock(&file, op) {
                Ok(()) => return Ok(Some(StoreLock { file, kind })),
                Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {
                    if std::time::Instant::now() >= until {
                        return Ok(None);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(source) => {
                    return Err(StoreError::Io {
                        path: self.lock_path(),
                        source,
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_locks_coexist_and_exclude_the_exclusive_one() {
        let dir = std::env::temp_dir().join(format!("rewind-lock-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let s = Store::at(&dir);
        let a = s.lock_shared().unwrap();
        let b = s.lock_shared().unwrap();
        assert!(s
            .try_lock(LockKind::Exclusive, Duration::ZERO)
            .unwrap()
            .is_none());
        drop(a);
        drop(b);
        let x = s
            .try_lock(LockKind::Exclusive, Duration::ZERO)
            .unwrap()
            .expect("free");
        assert!(s
            .try_lock(LockKind::Shared, Duration::ZERO)
            .unwrap()
            .is_none());
        drop(x);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
