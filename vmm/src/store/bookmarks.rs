//! Bookmarks: notes at steps of a run, kept with it in `runs/<id>/bookmarks`
//! (JSON, written to a temporary name and renamed, so a reader sees the old
//! list or the new one, never half of one). They are not inputs: adding one
//! does not change the run's id. Exports carry them.

use super::{io, Run, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::path::Path;

pub const BOOKMARKS_FILE: &str = "bookmarks";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bookmark {
    pub step: u64,
    pub note: String,
    /// When it was added: seconds since the Unix epoch.
    pub created: u64,
}

/// The file's contents: versioned so that a later format can be told apart.
#[derive(Debug, Serialize, Deserialize)]
struct File {
    version: u32,
    bookmarks: Vec<Bookmark>,
}

const VERSION: u32 = 1;

/// A run's bookmarks in step order (then in the order they were added).
pub fn read(run_dir: &Path) -> Result<Vec<Bookmark>, StoreError> {
    let path = run_dir.join(BOOKMARKS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(StoreError::Io { path, source }),
    };
    parse(&bytes).map_err(|what| StoreError::Corrupt { path, what })
}

/// Parses a bookmarks file's bytes.
pub fn parse(bytes: &[u8]) -> Result<Vec<Bookmark>, String> {
    let f: File =
        serde_json::from_slice(bytes).map_err(|e| format!("not a bookmarks file: {e}"))?;
    if f.version != VERSION {
        return Err(format!(
            "bookmarks format version {} (this rewind reads {VERSION})",
            f.version
        ));
    }
    let mut b = f.bookmarks;
    b.sort_by_key(|b| b.step);
    Ok(b)
}

fn encode(bookmarks: &[Bookmark]) -> Vec<u8> {
    let f = File {
        version: VERSION,
        bookmarks: bookmarks.to_vec(),
    };
    let mut v = serde_json::to_vec_pretty(&f).expect("bookmarks serialize");
    v.push(b'\n');
    v
}

/// Writes `bytes` to `path` atomically: a temporary name beside it, synced,
/// then renamed over it.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    let r = f.write_all(bytes).and_then(|_| f.sync_all());
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&tmp)(e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(path)(e)
    })
}

impl Store {
    /// Adds a bookmark to a run. Bookmarks added at once by several
    /// processes are all kept: the run's directory is locked while its list
    /// is rewritten.
    pub fn add_bookmark(&self, run: &Run, step: u64, note: &str) -> Result<Bookmark, StoreError> {
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let b = Bookmark {
            step,
            note: note.to_string(),
            created,
        };
        self.edit_bookmarks(run, |list| {
            list.push(b.clone());
            list.sort_by_key(|b| b.step);
        })?;
        Ok(b)
    }

    /// Removes a run's bookmarks at `step` (only those with `note`, when
    /// given); returns how many were removed.
    pub fn remove_bookmarks(
        &self,
        run: &Run,
        step: u64,
        note: Option<&str>,
    ) -> Result<usize, StoreError> {
        self.edit_bookmarks(run, |list| {
            let before = list.len();
            list.retain(|b| b.step != step || note.is_some_and(|n| n != b.note));
            before - list.len()
        })
    }

    /// Rewrites a run's list under the run directory's lock.
    fn edit_bookmarks<R>(
        &self,
        run: &Run,
        edit: impl FnOnce(&mut Vec<Bookmark>) -> R,
    ) -> Result<R, StoreError> {
        let _store = self.lock_shared()?;
        let dir = std::fs::File::open(&run.dir).map_err(|source| StoreError::Io {
            path: run.dir.clone(),
            source,
        })?;
        // SAFETY: flock on a descriptor we own; released when `dir` closes.
        if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(StoreError::Io {
                path: run.dir.clone(),
                source: std::io::Error::last_os_error(),
            });
        }
        if !run.dir.join("manifest.json").exists() {
            // Removed meanwhile.
            return Err(StoreError::NotFound(run.id.clone()));
        }
        let mut list = read(&run.dir)?;
        let r = edit(&mut list);
        write_atomic(&run.dir.join(BOOKMARKS_FILE), &encode(&list))?;
        Ok(r)
    }
}

impl Run {
    pub fn bookmarks(&self) -> Result<Vec<Bookmark>, StoreError> {
        read(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_step_order() {
        let list = vec![
            Bookmark {
                step: 9,
                note: "b".into(),
                created: 2,
            },
            Bookmark {
                step: 3,
                note: "a \"quoted\"\nnote".into(),
                created: 1,
            },
        ];
        let back = parse(&encode(&list)).unwrap();
        assert_eq!(back[0], list[1]);
        assert_eq!(back[1], list[0]);
        assert!(parse(b"{\"version\":99,\"bookmarks\":[]}").is_err());
        assert!(parse(b"garbage").is_err());
    }
}
