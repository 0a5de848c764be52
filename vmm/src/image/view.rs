//! What a run saw of a root image (`--root`): every `lstat` answer, every
//! directory listing and which files it read. A run's [`View`] notes them
//! while it is recorded (`Noting`), and answers from them once the host's
//! tree has changed (`Recorded`: a file's bytes from the store's copy), so
//! that the run stays readable. Anything the view lacks is as if absent,
//! but the bytes of a file the run looked at and never read: those are an
//! error ([`Recorded::missed`] tells which file).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The version an image view is written with (`Sight::version`).
pub const VIEW_VERSION: u32 = 1;

/// What `lstat` told of a path the guest may see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Seen {
    Dir {
        perm: u32,
    },
    File {
        perm: u32,
        size: u64,
    },
    /// A symbolic link with a UTF-8 target.
    Symlink(String),
}

impl Seen {
    /// What the host's `path` is (not followed), when the guest may see it:
    /// a directory, a regular file, or a link with a UTF-8 target.
    pub fn of(path: &Path) -> Option<Seen> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        let perm = meta.permissions().mode() & 0o7777;
        let ft = meta.file_type();
        if ft.is_dir() {
            Some(Seen::Dir { perm })
        } else if ft.is_file() {
            Some(Seen::File {
                perm,
                size: meta.len(),
            })
        } else if ft.is_symlink() {
            let t = std::fs::read_link(path).ok()?;
            Some(Seen::Symlink(t.into_os_string().into_string().ok()?))
        } else {
            None
        }
    }
}

/// Everything a run saw of its root, by absolute host path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sight {
    pub version: u32,
    /// The root directory's permission bits (followed, as `stat`).
    pub root_perm: Option<u32>,
    /// Each path looked at, and what it was (None: nothing the guest sees).
    pub entries: BTreeMap<PathBuf, Option<Seen>>,
    /// Each directory listed: its entries' names.
    pub listings: BTreeMap<PathBuf, Vec<String>>,
    /// Each file whose bytes were read, with their BLAKE3 (hex) once the
    /// run is written (empty while it is recorded).
    pub files: BTreeMap<PathBuf, String>,
}

/// A recorded view, with where the store keeps the read files' bytes.
#[derive(Debug)]
pub struct Recorded {
    pub sight: Sight,
    /// `files/` of the store: a file's bytes are `files/<xx>/<blake3>`.
    pub files_dir: PathBuf,
    /// The last file whose bytes were asked for and never read by the run.
    missed: Mutex<Option<PathBuf>>,
}

impl Recorded {
    pub fn new(sight: Sight, files_dir: PathBuf) -> Recorded {
        Recorded {
            sight,
            files_dir,
            missed: Mutex::new(None),
        }
    }

    /// The file whose bytes were last asked for though the run never read them.
    pub fn missed(&self) -> Option<PathBuf> {
        self.missed.lock().ok()?.clone()
    }
}

/// Where the host answers come from for a root image.
#[derive(Clone, Default)]
pub enum View {
    /// The host's tree, as it is now.
    #[default]
    Host,
    /// The host's tree, noting what is looked at (a run being recorded).
    Noting(Arc<Mutex<Sight>>),
    /// A recorded view: the host is not looked at.
    Recorded(Arc<Recorded>),
}

/// A view is not part of an image's identity.
impl PartialEq for View {
    fn eq(&self, _: &View) -> bool {
        true
    }
}
impl Eq for View {}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            View::Host => "Host",
            View::Noting(_) => "Noting",
            View::Recorded(_) => "Recorded",
        })
    }
}

impl View {
    /// A view that notes what a run looks at, from nothing.
    pub fn noting() -> View {
        View::Noting(Arc::new(Mutex::new(Sight {
            version: VIEW_VERSION,
            ..Sight::default()
        })))
    }

    /// What was noted so far (None unless noting).
    pub fn noted(&self) -> Option<Sight> {
        match self {
            View::Noting(s) => s.lock().ok().map(|s| s.clone()),
            _ => None,
        }
    }

    fn note(&self, f: impl FnOnce(&mut Sight)) {
        if let View::Noting(s) = self {
            if let Ok(mut s) = s.lock() {
                f(&mut s);
            }
        }
    }

    /// What `path` is (`Seen::of`, or the recorded answer).
    pub fn lstat(&self, path: &Path) -> Option<Seen> {
        if let View::Recorded(r) = self {
            return r.sight.entries.get(path).cloned().flatten();
        }
        let seen = Seen::of(path);
        self.note(|s| {
            s.entries.insert(path.to_path_buf(), seen.clone());
        });
        seen
    }

    /// Whether directory `dir` is a Rewind store (it holds a regular file
    /// `STORE_MARKER`), which a root image leaves out. Only a marker found
    /// is noted: a recorded view lacking it answers no, as it should.
    pub fn holds_store(&self, dir: &Path) -> bool {
        let marker = dir.join(super::STORE_MARKER);
        if let View::Recorded(r) = self {
            return matches!(r.sight.entries.get(&marker), Some(Some(Seen::File { .. })));
        }
        let seen = Seen::of(&marker);
        let found = matches!(seen, Some(Seen::File { .. }));
        if found {
            self.note(|s| {
                s.entries.insert(marker, seen);
            });
        }
        found
    }

    /// The names in directory `dir` (`host` lists them from the host).
    pub fn listing(&self, dir: &Path, host: impl FnOnce() -> Vec<String>) -> Vec<String> {
        if let View::Recorded(r) = self {
            return r.sight.listings.get(dir).cloned().unwrap_or_default();
        }
        let names = host();
        self.note(|s| {
            s.listings.insert(dir.to_path_buf(), names.clone());
        });
        names
    }

    /// The root directory's permission bits (`host` gives the host's).
    pub fn root_perm(&self, host: impl FnOnce() -> Option<u32>) -> Option<u32> {
        if let View::Recorded(r) = self {
            return r.sight.root_perm;
        }
        let perm = host();
        self.note(|s| s.root_perm = perm);
        perm
    }

    /// A recorded view's bytes of file `path`: None when the view is not a
    /// recorded one (the host is read); Err when the run never read it or
    /// the store's copy cannot be read.
    pub fn stored_file(&self, path: &Path) -> Option<Result<Vec<u8>, ()>> {
        let View::Recorded(r) = self else {
            return None;
        };
        let Some(hash) = r.sight.files.get(path) else {
            if let Ok(mut m) = r.missed.lock() {
                *m = Some(path.to_path_buf());
            }
            return Some(Err(()));
        };
        Some(std::fs::read(stored_path(&r.files_dir, hash)).map_err(|_| ()))
    }

    /// Notes that the bytes of `path` were read from the host.
    pub fn note_read(&self, path: &Path) {
        self.note(|s| {
            s.files.entry(path.to_path_buf()).or_default();
        });
    }

    /// The file whose bytes were asked for and never read by the recorded run.
    pub fn missed(&self) -> Option<PathBuf> {
        match self {
            View::Recorded(r) => r.missed(),
            _ => None,
        }
    }
}

/// Where `files_dir` keeps the bytes whose BLAKE3 is `hash`.
pub fn stored_path(files_dir: &Path, hash: &str) -> PathBuf {
    files_dir.join(hash.get(..2).unwrap_or("00")).join(hash)
}
