//! Page packs: many pages of the page store in one file.
//!
//! A run's first keyframe in a fresh store puts every page of the machine,
//! about 1,800 for a small program. One file a page costs one inode each,
//! and creating them took 1 to 3.5 s on this project's hosts (ext4 inode
//! allocation, in `openat`), five to fifteen times the rest of the run:
//! a batch of at least `PACK_MIN` new pages goes into one pack instead,
//! `pages/packs/<hash>.pack` (written to a temporary name and renamed):
//!
//! ```text
//! "RWPK" version:u32 count:u32
//! count x (hash:[u8;32] offset:u64 len:u32)    offset from the file's start
//! the zstd frames of the pages
//! ```
//!
//! A pack is never changed: `rewind gc` writes the pages it keeps of a pack
//! into a new one and removes the old.

use super::{io, StoreError};
use crate::run::pages::{hex, PageHash};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: &[u8; 4] = b"RWPK";
const VERSION: u32 = 1;
const HEADER: usize = 12;
const ENTRY: usize = 44;
/// New pages a keyframe must bring for them to go into a pack.
pub const PACK_MIN: usize = 64;
/// More entries than this in a header is a damaged pack, not an allocation.
const MAX_ENTRIES: u64 = 1 << 22;
/// A page's frame is never this big (4 KiB compressed).
const MAX_FRAME: u32 = 1 << 16;
pub const PACKS_DIR: &str = "packs";

/// A pack's entry: a page's hash, and the offset and length of its frame.
pub type Entry = (PageHash, u64, u32);

/// Where a page is in a pack.
#[derive(Debug, Clone)]
pub struct Packed {
    pub pack: Arc<PathBuf>,
    pub offset: u64,
    pub len: u32,
}

/// Hashes a page's hash for a map: BLAKE3's output is uniform already, so
/// its first eight bytes are the map's hash. SipHash of each key, and the
/// map grown step by step, made reading a store's pack indexes (every
/// page a run's first keyframe may share) 8 % of a JVM's recording.
#[derive(Default)]
pub struct PageHasher(u64);

impl Hasher for PageHasher {
    fn write(&mut self, bytes: &[u8]) {
        for (i, b) in bytes.iter().take(8).enumerate() {
            self.0 ^= u64::from(*b) << (8 * i);
        }
    }

    /// The length an array's hash starts with says nothing.
    fn write_usize(&mut self, _: usize) {}

    fn finish(&self) -> u64 {
        self.0
    }
}

/// How maps and sets of page hashes hash them (`PageHasher`).
pub type PageHashing = BuildHasherDefault<PageHasher>;
/// A map keyed by page hashes.
pub type PageMap<V> = HashMap<PageHash, V, PageHashing>;

/// The pages of the packs read so far.
#[derive(Debug, Default)]
pub struct PackIndex {
    pages: PageMap<Packed>,
    /// Packs read (or found damaged, which are not read again).
    seen: HashSet<PathBuf>,
    /// The packs directory's modification time at the last look.
    stamp: Option<std::time::SystemTime>,
}

impl PackIndex {
    pub fn get(&self, h: &PageHash) -> Option<&Packed> {
        self.pages.get(h)
    }

    /// Reads the packs not read yet; with `always` false only when the
    /// directory changed since the last look (a page missed then is only
    /// stored again).
    pub fn refresh(&mut self, dir: &Path, always: bool) {
        let stamp = std::fs::metadata(dir).and_then(|m| m.modified()).ok();
        if !always && stamp.is_some() && stamp == self.stamp {
            return;
        }
        self.stamp = stamp;
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut lists = Vec::new();
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_none_or(|x| x != "pack") || self.seen.contains(&path) {
                continue;
            }
            self.seen.insert(path.clone());
            if let Ok(list) = read_index(&path) {
                lists.push((path, list));
            }
        }
        // The map grows once for all of them, not once a pack.
        self.pages.reserve(lists.iter().map(|(_, l)| l.len()).sum());
        for (path, list) in lists {
            self.add(path, list);
        }
    }

    pub fn add(&mut self, pack: PathBuf, list: Vec<Entry>) {
        self.seen.insert(pack.clone());
        let pack = Arc::new(pack);
        self.pages.reserve(list.len());
        for (h, offset, len) in list {
            self.pages.entry(h).or_insert(Packed {
                pack: pack.clone(),
                offset,
                len,
            });
        }
    }

    /// Every pack read, with its pages.
    pub fn packs(&self) -> HashMap<Arc<PathBuf>, Vec<(PageHash, Packed)>> {
        let mut out: HashMap<Arc<PathBuf>, Vec<(PageHash, Packed)>> = HashMap::new();
        for (h, p) in &self.pages {
            out.entry(p.pack.clone()).or_default().push((*h, p.clone()));
        }
        out
    }

    pub fn forget(&mut self, pack: &Path) {
        self.pages.retain(|_, p| p.pack.as_path() != pack);
        self.seen.remove(pack);
    }
}

fn corrupt(path: &Path, what: &str) -> StoreError {
    StoreError::Corrupt {
        path: path.to_path_buf(),
        what: what.to_string(),
    }
}

/// A pack's entries: (hash, offset, length).
pub fn read_index(path: &Path) -> Result<Vec<Entry>, StoreError> {
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let size = f.metadata().map_err(io(path))?.len();
    let mut head = [0u8; HEADER];
    f.read_exact(&mut head)
        .map_err(|_| corrupt(path, "not a page pack"))?;
    if &head[..4] != MAGIC || u32::from_le_bytes(head[4..8].try_into().unwrap()) != VERSION {
        return Err(corrupt(path, "not a page pack"));
    }
    let count = u64::from(u32::from_le_bytes(head[8..12].try_into().unwrap()));
    let table = HEADER as u64 + count * ENTRY as u64;
    if count > MAX_ENTRIES || table > size {
        return Err(corrupt(path, "a page pack's index is cut short"));
    }
    let mut raw = vec![0u8; count as usize * ENTRY];
    f.read_exact(&mut raw)
        .map_err(|_| corrupt(path, "a page pack's index is cut short"))?;
    let mut out = Vec::with_capacity(count as usize);
    for e in raw.chunks_exact(ENTRY) {
        let h: PageHash = e[..32].try_into().unwrap();
        let offset = u64::from_le_bytes(e[32..40].try_into().unwrap());
        let len = u32::from_le_bytes(e[40..44].try_into().unwrap());
        if offset < table || len > MAX_FRAME || offset.saturating_add(u64::from(len)) > size {
            return Err(corrupt(path, "a page pack's index points outside it"));
        }
        out.push((h, offset, len));
    }
    Ok(out)
}

/// The compressed frame of a packed page.
pub fn read_frame(p: &Packed) -> Result<Vec<u8>, StoreError> {
    let path = p.pack.as_path();
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    f.seek(SeekFrom::Start(p.offset)).map_err(io(path))?;
    let mut buf = vec![0u8; p.len as usize];
    f.read_exact(&mut buf)
        .map_err(|_| corrupt(path, "a page pack is cut short"))?;
    Ok(buf)
}

/// Writes `frames` (hash and compressed page) as a new pack in `dir`;
/// returns its path and entries.
pub fn write(
    dir: &Path,
    frames: &[(PageHash, Vec<u8>)],
) -> Result<(PathBuf, Vec<Entry>), StoreError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut out = Vec::with_capacity(HEADER + frames.len() * ENTRY);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(frames.len() as u32).to_le_bytes());
    let mut offset = (HEADER + frames.len() * ENTRY) as u64;
    let mut list = Vec::with_capacity(frames.len());
    for (h, frame) in frames {
        out.extend_from_slice(h);
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        list.push((*h, offset, frame.len() as u32));
        offset += frame.len() as u64;
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update(&out);
    for (_, frame) in frames {
        out.extend_from_slice(frame);
    }
    let name = hex(hasher.finalize().as_bytes());
    let path = dir.join(format!("{name}.pack"));
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".tmp-{name}-{}-{n}", std::process::id()));
    let written = std::fs::write(&tmp, &out)
        .map_err(io(&tmp))
        .and_then(|_| std::fs::rename(&tmp, &path).map_err(io(&path)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|_| (path, list))
}
