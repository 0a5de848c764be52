//! The content hashes of a root image's files, kept between runs so that an
//! image's identity costs a walk of its tree, not a read of every file.
//!
//! As git's index does, an entry is keyed by what `lstat` says of the file
//! (device, inode, size, modification and change times, to the
//! nanosecond): a file whose key is unchanged is taken to hold what it held.
//! A file is hashed again when it is new or any of these changed. Two rules
//! keep a wrong hash from being trusted:
//!
//! - racy files: a file changed less than [`RACY_MARGIN`] before it was
//!   read could change again within the file system's timestamp granularity
//!   and keep its key, so its hash is not kept (it is read again next time);
//!   the change time cannot be set by a user, so a later write shows;
//! - the file: one that is damaged (bad magic, length or checksum), not
//!   owned by this user, or writable by others is not read, and is written
//!   anew after the walk. It is only ever an optimization.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Changes this close to the read (or after it) leave a file uncached.
pub const RACY_MARGIN: Duration = Duration::from_secs(2);

/// What the file starts with.
const MAGIC: &[u8] = b"rewind file hashes 1\n";
/// One entry on disk: device, inode, size, mtime, ctime, then the hash.
const ENTRY: usize = 5 * 8 + 32;
/// Entries written at most: those of the last walk first.
const MAX_ENTRIES: usize = 2_000_000;

/// What `lstat` says of a file, as the cache knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    dev: u64,
    ino: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> (Key, Stamp) {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        (
            Key {
                dev: m.dev(),
                ino: m.ino(),
            },
            Stamp {
                size: m.size(),
                mtime_ns: ns(m.mtime(), m.mtime_nsec()),
                ctime_ns: ns(m.ctime(), m.ctime_nsec()),
            },
        )
    }
}

impl Stamp {
    /// A digest's words as an entry's key and stamp: the file keeps both
    /// kinds of entry alike (a digest that matched a real file's device,
    /// inode and stamp would need 40 equal bytes).
    fn of_digest(d: &Digest) -> (Key, Stamp) {
        let w = |i: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&d[i * 8..i * 8 + 8]);
            u64::from_le_bytes(b)
        };
        let key = Key {
            dev: w(0),
            ino: w(1),
        };
        let stamp = Stamp {
            size: w(2),
            mtime_ns: w(3) as i64,
            ctime_ns: w(4) as i64,
        };
        (key, stamp)
    }
}

/// Forty bytes that name several files as they stand (paths, `stat`
/// keys and stamps, modes), hashed: an entry's key and stamp together.
pub type Digest = [u8; ENTRY - 32];

#[derive(Debug)]
struct Entry {
    stamp: Stamp,
    hash: [u8; 32],
    /// Looked up or made by this walk (written first).
    used: AtomicBool,
}

/// Hashes a [`Key`] by mixing its words (SplitMix64's finalizer): inode
/// numbers need no defence against chosen collisions, and a walk looks up
/// hundreds of thousands.
#[derive(Debug, Default, Clone, Copy)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(29) ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type KeyMap<V> = HashMap<Key, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// File hashes by what `lstat` says, loaded from and saved to one file.
/// Shared by the threads of a walk: what they look up is only read, what
/// they hash is added beside it.
#[derive(Debug, Default)]
pub struct FileHashes {
    file: Option<PathBuf>,
    entries: KeyMap<Entry>,
    /// Hashed by this walk, to keep.
    added: Mutex<Vec<(Key, Stamp, [u8; 32])>>,
    /// Changes this close to a read leave the file uncached.
    margin: Duration,
    /// Files read and hashed by this walk, and their bytes.
    read: Arc<Progress>,
    /// Files found in the cache.
    reused: AtomicU64,
}

/// What a walk has read so far: files new or changed since the cache
/// last saw them, and their bytes (for a note while a walk takes long).
#[derive(Debug, Default)]
pub struct Progress {
    files: AtomicU64,
    bytes: AtomicU64,
}

impl Progress {
    /// Files and bytes read so far.
    pub fn so_far(&self) -> (u64, u64) {
        (self.files.load(Relaxed), self.bytes.load(Relaxed))
    }
}

impl FileHashes {
    /// No cache: every file is read.
    pub fn none() -> FileHashes {
        FileHashes {
            margin: RACY_MARGIN,
            ..FileHashes::default()
        }
    }

    /// The cache kept in `file` (none yet, or one that cannot be trusted:
    /// an empty one that `save` writes anew).
    pub fn open(file: PathBuf) -> FileHashes {
        let entries = load(&file).unwrap_or_default();
        FileHashes {
            file: Some(file),
            margin: RACY_MARGIN,
            entries,
            ..FileHashes::default()
        }
    }

    /// Files read and hashed so far, and found in the cache.
    pub fn counts(&self) -> (u64, u64) {
        (self.read.files.load(Relaxed), self.reused.load(Relaxed))
    }

    /// The cache, counting what it reads in `read` (shared with whoever
    /// waits for the walk).
    pub fn counting_in(self, read: Arc<Progress>) -> FileHashes {
        FileHashes { read, ..self }
    }

    /// The kept BLAKE3 of the file whose `lstat` is `meta`, if its key is
    /// unchanged.
    pub fn known(&self, meta: &std::fs::Metadata) -> Option<[u8; 32]> {
        let (key, stamp) = Stamp::of(meta);
        self.known_entry(key, stamp)
    }

    /// The hash kept for `digest`, a key that names several files as they
    /// stood (a program image's, `Image::hash_with`) rather than one file.
    pub fn known_digest(&self, digest: &Digest) -> Option<[u8; 32]> {
        let (key, stamp) = Stamp::of_digest(digest);
        self.known_entry(key, stamp)
    }

    fn known_entry(&self, key: Key, stamp: Stamp) -> Option<[u8; 32]> {
        let e = self.entries.get(&key).filter(|e| e.stamp == stamp)?;
        e.used.store(true, Relaxed);
        self.reused.fetch_add(1, Relaxed);
        Some(e.hash)
    }

    /// Keeps `hash` for `digest`, saved with the files' hashes. The caller
    /// keeps only what it found settled (`FileHashes::settled`), as `hash`
    /// does for a file.
    pub fn keep_digest(&self, digest: &Digest, hash: [u8; 32]) {
        if self.file.is_some() {
            let (key, stamp) = Stamp::of_digest(digest);
            let mut added = self.added.lock().unwrap_or_else(|e| e.into_inner());
            added.push((key, stamp, hash));
        }
    }

    /// Whether the file `meta` describes, read from `read_at` on, changed
    /// long enough before to keep its hash (not racy).
    pub fn settled(&self, meta: &std::fs::Metadata, read_at: SystemTime) -> bool {
        !racy(Stamp::of(meta).1, read_at, self.margin)
    }

    /// The BLAKE3 of the regular file at `path`, whose `lstat` is `meta`:
    /// from the cache when its key is unchanged, else read (and kept when
    /// it did not change while read and is not racy). None when it was
    /// removed meanwhile or is no longer a regular file.
    pub fn hash(&self, path: &Path, meta: &std::fs::Metadata) -> std::io::Result<Option<[u8; 32]>> {
        if let Some(hash) = self.known(meta) {
            return Ok(Some(hash));
        }
        let read_at = SystemTime::now();
        let mut f = match File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
        {
            Err(e) if gone(&e) => return Ok(None),
            r => r?,
        };
        let before = f.metadata()?;
        if !before.is_file() {
            return Ok(None);
        }
        let mut h = blake3::Hasher::new();
        h.update_reader(&mut f)?;
        let hash: [u8; 32] = h.finalize().into();
        self.read.files.fetch_add(1, Relaxed);
        self.read.bytes.fetch_add(before.len(), Relaxed);
        let (k1, s1) = Stamp::of(&before);
        let (k2, s2) = Stamp::of(&f.metadata()?);
        if k1 == k2 && s1 == s2 && !racy(s1, read_at, self.margin) && self.file.is_some() {
            let mut added = self.added.lock().unwrap_or_else(|e| e.into_inner());
            added.push((k1, s1, hash));
        }
        Ok(Some(hash))
    }

    /// Writes the cache back (under a temporary name, renamed whole) when
    /// the walk added to it: the entries this walk used first, then older
    /// ones, and those another walk saved since this one loaded the file
    /// (a run's image-hash thread and its writer both save), up to a bound.
    /// One save at a time in a process; across processes the last rename
    /// may drop what another saved meanwhile, which costs a read.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let added = self.added.lock().unwrap_or_else(|e| e.into_inner());
        if added.is_empty() {
            return Ok(());
        }
        let dir = file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        static SAVING: Mutex<()> = Mutex::new(());
        let _one = SAVING.lock().unwrap_or_else(|e| e.into_inner());
        let since = load(file).unwrap_or_default();
        // The walk's own first: what it added, what it found, then the rest.
        let mut order: Vec<(Key, Stamp, [u8; 32], bool)> =
            added.iter().map(|&(k, s, h)| (k, s, h, true)).collect();
        let mut seen: KeyMap<()> = order.iter().map(|e| (e.0, ())).collect();
        let first = order.len();
        order.extend(
            self.entries
                .iter()
                .filter(|(k, _)| seen.insert(**k, ()).is_none())
                .map(|(k, e)| (*k, e.stamp, e.hash, e.used.load(Relaxed))),
        );
        order.extend(
            since
                .iter()
                .filter(|(k, _)| seen.insert(**k, ()).is_none())
                .map(|(k, e)| (*k, e.stamp, e.hash, false)),
        );
        order[first..].sort_by_key(|e| !e.3);
        order.truncate(MAX_ENTRIES);
        let mut bytes = Vec::with_capacity(MAGIC.len() + order.len() * ENTRY + 32);
        bytes.extend_from_slice(MAGIC);
        for (k, stamp, hash, _) in order {
            for w in [k.dev, k.ino, stamp.size] {
                bytes.extend_from_slice(&w.to_le_bytes());
            }
            for w in [stamp.mtime_ns, stamp.ctime_ns] {
                bytes.extend_from_slice(&w.to_le_bytes());
            }
            bytes.extend_from_slice(&hash);
        }
        let sum = blake3::hash(&bytes);
        bytes.extend_from_slice(sum.as_bytes());
        let tmp = dir.join(format!(
            ".{}-{}",
            file.file_name().and_then(|n| n.to_str()).unwrap_or("cache"),
            std::process::id()
        ));
        let written = File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&bytes))
            .and_then(|()| std::fs::rename(&tmp, file));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

fn gone(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::NotFound) || e.raw_os_error() == Some(libc::ELOOP)
}

/// Whether a file with this stamp, read at `read_at`, may have changed
/// within the timestamp granularity without its stamp showing it.
fn racy(s: Stamp, read_at: SystemTime, margin: Duration) -> bool {
    let Ok(at) = read_at.duration_since(SystemTime::UNIX_EPOCH) else {
        return true;
    };
    let limit = at.saturating_sub(margin).as_nanos();
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    s.mtime_ns >= limit || s.ctime_ns >= limit
}

/// The entries of a cache file this user alone could have written, whole
/// and with its checksum; None otherwise.
fn load(file: &Path) -> Option<KeyMap<Entry>> {
    let f = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(file)
        .ok()?;
    let meta = f.metadata().ok()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return None;
    }
    let most = (MAGIC.len() + MAX_ENTRIES * ENTRY + 32) as u64;
    if meta.len() > most {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(f, most), &mut bytes).ok()?;
    let body = bytes.len().checked_sub(32).filter(|&n| n >= MAGIC.len())?;
    let (data, sum) = bytes.split_at(body);
    if blake3::hash(data).as_bytes() != sum || !data.starts_with(MAGIC) {
        return None;
    }
    let data = &data[MAGIC.len()..];
    if data.len() % ENTRY != 0 {
        return None;
    }
    let word = |c: &[u8], i: usize| -> [u8; 8] {
        let mut w = [0; 8];
        w.copy_from_slice(&c[i * 8..i * 8 + 8]);
        w
    };
    let mut entries = KeyMap::with_capacity_and_hasher(data.len() / ENTRY, Default::default());
    for c in data.chunks_exact(ENTRY) {
        let mut hash = [0; 32];
        hash.copy_from_slice(&c[40..]);
        entries.insert(
            Key {
                dev: u64::from_le_bytes(word(c, 0)),
                ino: u64::from_le_bytes(word(c, 1)),
            },
            Entry {
                stamp: Stamp {
                    size: u64::from_le_bytes(word(c, 2)),
                    mtime_ns: i64::from_le_bytes(word(c, 3)),
                    ctime_ns: i64::from_le_bytes(word(c, 4)),
                },
                hash,
                used: AtomicBool::new(false),
            },
        );
    }
    Some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn hash(c: &FileHashes, p: &Path) -> [u8; 32] {
        let meta = std::fs::symlink_metadata(p).unwrap();
        c.hash(p, &meta).unwrap().unwrap()
    }

    /// A cache in `dir` whose files count as settled at once.
    fn settled(file: &Path) -> FileHashes {
        FileHashes {
            margin: Duration::ZERO,
            ..FileHashes::open(file.to_path_buf())
        }
    }

    #[test]
    fn an_unchanged_file_is_not_read_again_and_a_changed_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let (f, cache) = (dir.path().join("f"), dir.path().join("cache"));
        std::fs::write(&f, b"one").unwrap();
        let c = settled(&cache);
        assert_eq!(hash(&c, &f), *blake3::hash(b"one").as_bytes());
        c.save().unwrap();
        let c = settled(&cache);
        assert_eq!(hash(&c, &f), *blake3::hash(b"one").as_bytes());
        assert_eq!(c.counts(), (0, 1));
        // Same size, a later time: read again.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&f, b"two").unwrap();
        assert_eq!(hash(&c, &f), *blake3::hash(b"two").as_bytes());
        assert_eq!(c.counts().0, 1);
    }

    #[test]
    fn a_file_changed_just_before_it_was_read_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let (f, cache) = (dir.path().join("f"), dir.path().join("cache"));
        std::fs::write(&f, b"one").unwrap();
        let c = FileHashes::open(cache.clone());
        hash(&c, &f);
        c.save().unwrap();
        // Racy: a write within the timestamps' granularity could keep its
        // stamp, so nothing was kept and the file is read again.
        let c = FileHashes::open(cache);
        hash(&c, &f);
        assert_eq!(c.counts(), (1, 0));
    }

    #[test]
    fn a_damaged_or_foreign_cache_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let (f, cache) = (dir.path().join("f"), dir.path().join("cache"));
        std::fs::write(&f, b"one").unwrap();
        let c = settled(&cache);
        hash(&c, &f);
        c.save().unwrap();
        let good = std::fs::read(&cache).unwrap();
        // A wrong hash for the file, with a checksum that fits.
        let mut forged = good[..good.len() - 32].to_vec();
        let at = forged.len() - 32;
        forged[at..].copy_from_slice(blake3::hash(b"forged").as_bytes());
        let sum = blake3::hash(&forged);
        forged.extend_from_slice(sum.as_bytes());
        let mut flipped = good.clone();
        flipped[MAGIC.len() + 3] ^= 1;
        for (bytes, mode) in [
            (&good[..good.len() - 1], 0o600),
            (&flipped[..], 0o600),
            (&b"rewind file hashes 1\n"[..], 0o600),
            (&forged[..], 0o666),
        ] {
            std::fs::write(&cache, bytes).unwrap();
            std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(mode)).unwrap();
            let c = settled(&cache);
            assert_eq!(hash(&c, &f), *blake3::hash(b"one").as_bytes());
            assert_eq!(c.counts().1, 0);
            // Written anew, whole, and this user's alone.
            c.save().unwrap();
            let mode = std::fs::metadata(&cache).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0);
            assert_eq!(settled(&cache).entries.len(), 1);
        }
    }

    /// Two walks that loaded the same file (the image-hash thread and the
    /// run's writer) both keep what they hashed, whichever saves last.
    #[test]
    fn two_saves_of_one_cache_keep_both_walks_hashes() {
        let dir = tempfile::tempdir().unwrap();
        let (f, g, cache) = (
            dir.path().join("f"),
            dir.path().join("g"),
            dir.path().join("cache"),
        );
        std::fs::write(&f, b"one").unwrap();
        std::fs::write(&g, b"two").unwrap();
        let (a, b) = (settled(&cache), settled(&cache));
        hash(&a, &f);
        hash(&b, &g);
        a.save().unwrap();
        b.save().unwrap();
        let c = settled(&cache);
        hash(&c, &f);
        hash(&c, &g);
        assert_eq!(c.counts(), (0, 2));
    }

    /// A program image (a program, a library, a link): the same hash read
    /// whole or found in the cache, which spares every read while no file
    /// changed; a changed library is read again. Files changed just before
    /// the read are not kept.
    #[test]
    fn a_program_image_hashes_the_same_with_and_without_the_cache() {
        use crate::image::{Dep, DepKind, Image};
        let dir = tempfile::tempdir().unwrap();
        let (prog, lib) = (dir.path().join("prog"), dir.path().join("lib.so"));
        std::fs::write(&prog, b"\x7fELF program").unwrap();
        std::fs::write(&lib, b"\x7fELF library").unwrap();
        let deps = vec![
            Dep {
                guest: "/lib/lib.so".into(),
                kind: DepKind::File { host: lib.clone() },
            },
            Dep {
                guest: "/lib/link.so".into(),
                kind: DepKind::Symlink {
                    target: "lib.so".into(),
                },
            },
        ];
        let image = Image::Program {
            guest_path: "/bin/prog".into(),
            host_path: prog,
            deps,
        };
        let plain = image.hash().unwrap();
        let cache = dir.path().join("cache");
        let racy = FileHashes::open(cache.clone());
        assert_eq!(image.hash_with(&racy).unwrap(), plain);
        racy.save().unwrap();
        assert!(!cache.exists(), "files written just now are not kept");
        for reused in [0, 1] {
            let c = settled(&cache);
            assert_eq!(image.hash_with(&c).unwrap(), plain);
            assert_eq!(c.counts().1, reused);
            c.save().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&lib, b"\x7fELF library 2").unwrap();
        let changed = image.hash().unwrap();
        assert_ne!(changed, plain);
        let c = settled(&cache);
        assert_eq!(image.hash_with(&c).unwrap(), changed);
        assert_eq!(c.counts().1, 0);
    }

    #[test]
    fn a_root_hashes_the_same_with_and_without_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::fs::write(root.join("usr/bin/tool"), b"x").unwrap();
        std::os::unix::fs::symlink("usr/bin", root.join("bin")).unwrap();
        let image = crate::image::Image::root(root.clone());
        let plain = image.hash().unwrap();
        let cache = dir.path().join("cache");
        for _ in 0..2 {
            let c = settled(&cache);
            assert_eq!(image.hash_with(&c).unwrap(), plain);
            c.save().unwrap();
        }
        std::fs::write(root.join("usr/bin/tool"), b"y").unwrap();
        assert_ne!(image.hash_with(&settled(&cache)).unwrap(), plain);
    }
}
