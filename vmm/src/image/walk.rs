//! A root image's tree walked for its hash by a few threads at once: they
//! list its directories and find their files' hashes (from the cache, or
//! read) in any order; the listings are then fed to the hash in path
//! order, so that it is what one thread walking the tree would make.
//!
//! A walk of a large tree (the host's `/`: hundreds of thousands of
//! entries) is a `stat` of each entry; each is made relative to its open
//! directory (`DirEntry::metadata`), without resolving the whole path again.

use super::{hash_entry_head, unless_gone, FileHashes, HIDDEN_TOP, STORE_MARKER};

/// `r` for entry `e`, or None when `e` was removed meanwhile.
fn or_gone<T>(r: std::io::Result<T>, e: &std::fs::DirEntry) -> Result<Option<T>, EngineError> {
    match r {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        r => r.map(Some).map_err(|err| EngineError::io(e.path())(err)),
    }
}
use crate::EngineError;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};

/// Threads that walk a tree at most.
const MAX_THREADS: usize = 4;

/// What the hash covers of one directory entry.
enum What {
    /// A directory: its mode and the index of its listing.
    Dir { mode: u32, at: usize },
    /// A symbolic link's target.
    Link(Vec<u8>),
    /// A regular file: its mode and the BLAKE3 of its contents.
    File { mode: u32, sum: [u8; 32] },
}

/// A directory's entries the hash covers, in name order.
type Listing = Vec<(String, What)>;

/// What listing a directory found.
enum Listed {
    /// Its entries.
    Dir(Listing),
    /// A Rewind store (`STORE_MARKER`): left out with all it holds.
    Store,
}

/// Directories to list (index of their listing, host path), and how many
/// are being listed.
#[derive(Default)]
struct Queue {
    todo: Vec<(usize, PathBuf)>,
    busy: usize,
    failed: Option<EngineError>,
}

struct Walk<'a> {
    cache: &'a FileHashes,
    queue: Mutex<Queue>,
    wake: Condvar,
    /// By index; `None` until listed (and for one gone meanwhile).
    listings: Mutex<Vec<Option<Listed>>>,
}

/// The tree under `root` into `h`, in name order, each file by its own
/// hash (from `cache` when unchanged); what is removed while it is walked
/// (a live tree) is left out.
pub(super) fn hash_tree(
    h: &mut blake3::Hasher,
    cache: &FileHashes,
    root: &Path,
) -> Result<(), EngineError> {
    let walk = Walk {
        cache,
        queue: Mutex::new(Queue {
            todo: vec![(0, root.to_path_buf())],
            ..Queue::default()
        }),
        wake: Condvar::new(),
        listings: Mutex::new(vec![None]),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(MAX_THREADS));
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(|| walk.work());
        }
        walk.work();
    });
    let queue = walk
        .queue
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = queue.failed {
        return Err(e);
    }
    let listings = walk
        .listings
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    feed(h, &listings, 0, &mut String::new());
    Ok(())
}

/// Listing `at`'s entries into `h` under guest path `guest`, depth first.
fn feed(h: &mut blake3::Hasher, listings: &[Option<Listed>], at: usize, guest: &mut String) {
    let Some(Some(Listed::Dir(listing))) = listings.get(at) else {
        return;
    };
    for (name, what) in listing {
        if let What::Dir { at, .. } = what {
            if let Some(Some(Listed::Store)) = listings.get(*at) {
                continue;
            }
        }
        let len = guest.len();
        guest.push('/');
        guest.push_str(name);
        match what {
            What::Dir { mode, at } => {
                h.update(guest.as_bytes());
                h.update(b"/\0");
                h.update(&mode.to_le_bytes());
                feed(h, listings, *at, guest);
            }
            What::Link(target) => {
                h.update(guest.as_bytes());
                h.update(b"@\0");
                h.update(target);
            }
            What::File { mode, sum } => {
                hash_entry_head(h, guest, *mode);
                h.update(sum);
            }
        }
        guest.truncate(len);
    }
}

impl Walk<'_> {
    /// Lists directories from the queue until none is left or one failed.
    fn work(&self) {
        loop {
            let (at, dir) = {
                let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    if q.failed.is_some() {
                        return;
                    }
                    if let Some(job) = q.todo.pop() {
                        q.busy += 1;
                        break job;
                    }
                    if q.busy == 0 {
                        return;
                    }
                    q = self.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
                }
            };
            let listed = self.list(at, &dir);
            let mut q = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            q.busy -= 1;
            match listed {
                Ok(more) => q.todo.extend(more),
                Err(e) => {
                    q.failed.get_or_insert(e);
                }
            }
            drop(q);
            self.wake.notify_all();
        }
    }

    /// Lists directory `dir` as listing `at`; returns its subdirectories
    /// to list, each with the index its listing will have.
    fn list(&self, at: usize, dir: &Path) -> Result<Vec<(usize, PathBuf)>, EngineError> {
        let mut named = Vec::new();
        if let Some(entries) = unless_gone(std::fs::read_dir(dir), dir)? {
            for e in entries {
                let Some(e) = unless_gone(e, dir)? else {
                    continue;
                };
                let Ok(name) = e.file_name().into_string() else {
                    continue; // the guest cannot name it
                };
                if at == 0 && HIDDEN_TOP.contains(&name.as_str()) {
                    continue;
                }
                if at != 0 && name == STORE_MARKER && e.file_type().is_ok_and(|t| t.is_file()) {
                    self.set(at, Listed::Store);
                    return Ok(Vec::new());
                }
                named.push((name, e));
            }
        }
        let mut listing = Vec::with_capacity(named.len());
        for (name, e) in named {
            if let Some(what) = self.entry(&e)? {
                listing.push((name, what));
            }
        }
        listing.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut listings = self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        let mut todo = Vec::new();
        for (name, what) in &mut listing {
            if let What::Dir { at, .. } = what {
                *at = listings.len() + todo.len();
                todo.push((*at, dir.join(name.as_str())));
            }
        }
        let len = listings.len() + todo.len();
        listings.resize_with(len, || None);
        listings[at] = Some(Listed::Dir(listing));
        Ok(todo)
    }

    /// Listing `at` is `listed`.
    fn set(&self, at: usize, listed: Listed) {
        let mut listings = self.listings.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = listings.get_mut(at) {
            *slot = Some(listed);
        }
    }

    /// What the hash covers of entry `e` (None: not covered, or gone); a
    /// directory's listing index is given by the caller.
    fn entry(&self, e: &std::fs::DirEntry) -> Result<Option<What>, EngineError> {
        use std::os::unix::fs::PermissionsExt;
        // The path is made only for an error, a link or a file to read.
        let Some(ft) = or_gone(e.file_type(), e)? else {
            return Ok(None);
        };
        if ft.is_symlink() {
            let target = or_gone(std::fs::read_link(e.path()), e)?;
            return Ok(target.map(|t| What::Link(t.into_os_string().into_encoded_bytes())));
        }
        if !ft.is_dir() && !ft.is_file() {
            return Ok(None);
        }
        // lstat, relative to the open directory.
        let Some(meta) = or_gone(e.metadata(), e)? else {
            return Ok(None);
        };
        let mode = meta.permissions().mode();
        if ft.is_dir() {
            return Ok(Some(What::Dir { mode, at: 0 }));
        }
        let sum = match self.cache.known(&meta) {
            Some(sum) => Some(sum),
            None => or_gone(self.cache.hash(&e.path(), &meta), e)?.flatten(),
        };
        Ok(sum.map(|sum| What::File { mode, sum }))
    }
}

#[cfg(test)]
mod tests {
    use crate::image::{Image, STORE_MARKER};
    use std::fs;

    #[test]
    fn a_store_in_the_tree_is_left_out_of_its_hash_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("var/lib")).unwrap();
        fs::write(root.join("var/lib/data"), b"data").unwrap();
        let image = Image::root(root.to_path_buf());
        let plain = image.hash().unwrap();

        let store = root.join("var/lib/rewind");
        fs::create_dir_all(store.join("runs/a")).unwrap();
        fs::write(store.join("runs/a/events"), b"one").unwrap();
        fs::write(store.join(STORE_MARKER), b"").unwrap();
        assert_eq!(image.hash().unwrap(), plain, "a store is left out");
        fs::write(store.join("runs/a/events"), b"two").unwrap();
        fs::create_dir_all(store.join("runs/b")).unwrap();
        assert_eq!(image.hash().unwrap(), plain, "what it holds is too");

        // A marker that is not a regular file marks nothing.
        fs::remove_file(store.join(STORE_MARKER)).unwrap();
        fs::create_dir(store.join(STORE_MARKER)).unwrap();
        assert_ne!(image.hash().unwrap(), plain);
        // The root itself is never left out: its marker is a file like any.
        fs::remove_dir_all(&store).unwrap();
        assert_eq!(image.hash().unwrap(), plain);
        fs::write(root.join(STORE_MARKER), b"").unwrap();
        assert_ne!(image.hash().unwrap(), plain);
    }
}
