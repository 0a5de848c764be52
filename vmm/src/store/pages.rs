//! The content-addressed page store: guest pages by BLAKE3, compressed
//! with zstd, shared by every run in `$REWIND_HOME/pages/`.
//!
//! A page file is `pages/<first two hex digits>/<hash>`; its contents are
//! the zstd frame of the 4 KiB page. A page is written to a temporary name
//! and renamed, so a reader never sees half a page; reading checks the hash.
//! A keyframe's many new pages go into one pack instead (`store::pack`).

use super::pack::{self, PackIndex, PACKS_DIR, PACK_MIN};
use super::{io, StoreError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::run::pages::{hash_page, hex, PageError, PageHash, PageSource, PAGE_BYTES};
/// zstd level: pages are small and written often.
const ZSTD_LEVEL: i32 = 1;

#[derive(Debug, Clone)]
pub struct PageStore {
    dir: PathBuf,
    packs: Arc<Mutex<PackIndex>>,
}

impl PageStore {
    pub fn at(dir: impl Into<PathBuf>) -> PageStore {
        PageStore {
            dir: dir.into(),
            packs: Default::default(),
        }
    }

    fn packs_dir(&self) -> PathBuf {
        self.dir.join(PACKS_DIR)
    }

    /// Where a page is in a pack; `always` reads the packs directory again
    /// even when it looks unchanged.
    fn packed(&self, h: &PageHash, always: bool) -> Option<pack::Packed> {
        let mut index = self.packs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = index.get(h) {
            return Some(p.clone());
        }
        index.refresh(&self.packs_dir(), always);
        index.get(h).cloned()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, h: &PageHash) -> PathBuf {
        let x = hex(h);
        self.dir.join(&x[..2]).join(x)
    }

    pub fn contains(&self, h: &PageHash) -> bool {
        self.path(h).exists() || self.packed(h, false).is_some()
    }

    /// Stores the pages not stored yet: in one pack when there are at least
    /// `PACK_MIN` of them (a fresh store's first keyframe), else one file each.
    pub fn put_all(&self, pages: &[(PageHash, &[u8])]) -> Result<(), StoreError> {
        let mut seen: std::collections::HashSet<PageHash, pack::PageHashing> =
            std::collections::HashSet::with_capacity_and_hasher(pages.len(), Default::default());
        // The packs directory is looked at once, not once a page (`contains`).
        let new: Vec<&(PageHash, &[u8])> = {
            let mut index = self.packs.lock().unwrap_or_else(|e| e.into_inner());
            index.refresh(&self.packs_dir(), false);
            pages
                .iter()
                .filter(|(h, _)| {
                    seen.insert(*h) && index.get(h).is_none() && !self.path(h).exists()
                })
                .collect()
        };
        if new.len() < PACK_MIN {
            return new.iter().try_for_each(|(h, b)| self.put_missing(h, b));
        }
        let dir = self.packs_dir();
        let frames = new
            .iter()
            .map(|(h, b)| compress(b).map(|f| (*h, f)).map_err(io(&dir)))
            .collect::<Result<Vec<_>, _>>()?;
        let (path, list) = pack::write(&dir, &frames)?;
        let mut index = self.packs.lock().unwrap_or_else(|e| e.into_inner());
        index.add(path, list);
        Ok(())
    }

    /// Stores a page (if it is not there yet) and returns its hash.
    pub fn put(&self, bytes: &[u8]) -> Result<PageHash, StoreError> {
        let h = hash_page(bytes);
        if !self.contains(&h) {
            self.put_missing(&h, bytes)?;
        }
        Ok(h)
    }

    /// Stores page `bytes` as a file of its own, whose hash `h` the caller
    /// has (`hash_page`), having found it missing (`contains`): neither is
    /// done again.
    fn put_missing(&self, h: &PageHash, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path(h);
        let parent = path.parent().expect("a page path has a parent");
        let packed = compress(bytes).map_err(io(&path))?;
        // One name per writer: two threads of a check (`--jobs`) may put
        // the same page at once, and one's rename must not find the other's
        // temporary file gone.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = parent.join(format!(".tmp-{}-{}-{n}", hex(h), std::process::id()));
        // The directory is made only when missing (once per 256 of them),
        // not asked after for every page.
        let written = match std::fs::write(&tmp, &packed) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
                std::fs::write(&tmp, &packed)
            }
            r => r,
        };
        let written = written
            .map_err(io(&tmp))
            .and_then(|_| std::fs::rename(&tmp, &path).map_err(io(&path)));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// Writes page `h` as `packed` (its zstd frame, as a page file holds
    /// it) straight to its name, with no temporary name: for a directory no
    /// one else reads yet (an import's, renamed into the store's once the
    /// whole file is verified). Its parent is made when missing.
    fn write_unshared(&self, h: &PageHash, packed: &[u8]) -> Result<(), StoreError> {
        use std::io::Write;
        let path = self.path(h);
        let create = || {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
        };
        let mut f = match create() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let parent = path.parent().expect("a page path has a parent");
                std::fs::create_dir_all(parent).map_err(io(parent))?;
                create()
            }
            f => f,
        }
        .map_err(io(&path))?;
        f.write_all(packed).map_err(io(&path))
    }

    /// Writes pages given as their zstd frames, checked by the caller, into
    /// a directory no one else reads yet (an import's): one pack when there
    /// are at least `PACK_MIN` of them, else a file each (`write_unshared`).
    pub fn write_frames_unshared(&self, frames: &[(PageHash, Vec<u8>)]) -> Result<(), StoreError> {
        if frames.len() < PACK_MIN {
            return frames
                .iter()
                .try_for_each(|(h, f)| self.write_unshared(h, f));
        }
        pack::write(&self.packs_dir(), frames).map(|_| ())
    }

    /// A page, checked against its hash.
    pub fn get(&self, h: &PageHash) -> Result<Vec<u8>, StoreError> {
        let (path, packed) = match std::fs::read(self.path(h)) {
            Ok(b) => (self.path(h), b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match self.packed(h, true) {
                Some(p) => self.read_packed(h, p)?,
                None => return Err(io(&self.path(h))(e)),
            },
            Err(e) => return Err(io(&self.path(h))(e)),
        };
        let corrupt = |what: &str| StoreError::Corrupt {
            path: path.clone(),
            what: what.to_string(),
        };
        // One decompression context a thread: making one costs more than a page.
        thread_local! {
            static DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
                std::cell::RefCell::new(zstd::bulk::Decompressor::new().ok());
        }
        let bytes = DCTX
            .with(|d| match d.borrow_mut().as_mut() {
                Some(d) => d.decompress(&packed, PAGE_BYTES),
                None => zstd::bulk::decompress(&packed, PAGE_BYTES),
            })
            .map_err(|_| corrupt("not a compressed page"))?;
        if bytes.len() != PAGE_BYTES || hash_page(&bytes) != *h {
            return Err(corrupt("page does not match its hash"));
        }
        Ok(bytes)
    }

    /// A packed page's frame. A pack gone since its index was read (`rewind
    /// gc` wrote its kept pages into a new one) is forgotten and the page
    /// looked for again.
    fn read_packed(&self, h: &PageHash, p: pack::Packed) -> Result<(PathBuf, Vec<u8>), StoreError> {
        match pack::read_frame(&p) {
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                let mut index = self.packs.lock().unwrap_or_else(|e| e.into_inner());
                index.forget(p.pack.as_path());
                drop(index);
                match self.packed(h, true) {
                    Some(again) => Ok((again.pack.to_path_buf(), pack::read_frame(&again)?)),
                    None => Err(io(p.pack.as_path())(source)),
                }
            }
            r => r.map(|frame| (p.pack.to_path_buf(), frame)),
        }
    }

    /// Every stored page's hash and file size (in a pack, its frame's).
    pub fn list(&self) -> Result<Vec<(PageHash, u64)>, StoreError> {
        let mut out = self.list_loose();
        let mut index = self.packs.lock().unwrap_or_else(|e| e.into_inner());
        index.refresh(&self.packs_dir(), true);
        for list in index.packs().into_values() {
            out.extend(list.into_iter().map(|(h, p)| (h, u64::from(p.len))));
        }
        out.sort();
        out.dedup_by_key(|(h, _)| *h);
        Ok(out)
    }

    /// The pages stored one file each, with their sizes.
    fn list_loose(&self) -> Vec<(PageHash, u64)> {
        let mut out = Vec::new();
        let Ok(dirs) = std::fs::read_dir(&self.dir) else {
            return out;
        };
        for d in dirs.flatten() {
            let Ok(files) = std::fs::read_dir(d.path()) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name();
                let Some(h) = name.to_str().and_then(|n| blake3::Hash::from_hex(n).ok()) else {
                    continue;
                };
                let size = f.metadata().map(|m| m.len()).unwrap_or(0);
                out.push((*h.as_bytes(), size));
            }
        }
        out
    }

    /// Removes every page `keep` says no to: (pages removed, bytes freed).
    /// A pack that keeps some is written anew with only those.
    pub fn retain(&self, keep: impl Fn(&PageHash) -> bool) -> Result<(u64, u64), StoreError> {
        let (mut removed, mut freed) = (0, 0);
        let packs = {
            let mut index = self.packs.lock().unwrap_or_else(|e| e.into_inner());
            index.refresh(&self.packs_dir(), true);
            index.packs()
        };
        let mut dropped = std::collections::HashSet::new();
        for (path, pages) in packs {
            let (kept, gone): (Vec<_>, Vec<_>) = pages.into_iter().partition(|(h, _)| keep(h));
            if gone.is_empty() {
                continue;
            }
            let size = std::fs::metadata(path.as_path()).map_or(0, |m| m.len());
            let frames = kept
                .iter()
                .map(|(h, p)| pack::read_frame(p).map(|f| (*h, f)))
                .collect::<Result<Vec<_>, _>>()?;
            let new = if frames.is_empty() {
                None
            } else {
                Some(pack::write(&self.packs_dir(), &frames)?)
            };
            std::fs::remove_file(path.as_path()).map_err(io(path.as_path()))?;
            let mut index = self.packs.lock().unwrap_or_else(|e| e.into_inner());
            index.forget(path.as_path());
            let new_size = match new {
                Some((p, list)) => {
                    let s = std::fs::metadata(&p).map_or(0, |m| m.len());
                    index.add(p, list);
                    s
                }
                None => 0,
            };
            freed += size.saturating_sub(new_size);
            dropped.extend(gone.into_iter().map(|(h, _)| h));
        }
        removed += dropped.len() as u64;
        for (h, _) in self.list_loose() {
            if !keep(&h) {
                freed += self.remove(&h)?;
                if !dropped.contains(&h) {
                    removed += 1;
                }
            }
        }
        Ok((removed, freed))
    }

    /// The packs whose index cannot be read (a damaged header): no page of
    /// theirs is known, so `retain` leaves them as they are.
    pub fn unreadable_packs(&self) -> Vec<(PathBuf, StoreError)> {
        let Ok(entries) = std::fs::read_dir(self.packs_dir()) else {
            return Vec::new();
        };
        let mut out: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pack"))
            .filter_map(|p| pack::read_index(&p).err().map(|e| (p, e)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Removes a page's own file; returns the bytes freed.
    pub fn remove(&self, h: &PageHash) -> Result<u64, StoreError> {
        let path = self.path(h);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(size),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }
}

/// A page's zstd frame, as a page file or a pack holds it, with one
/// compression context a thread: making one costs more than compressing a
/// page, and a first keyframe puts thousands.
pub fn compress(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    thread_local! {
        static CCTX: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            std::cell::RefCell::new(zstd::bulk::Compressor::new(ZSTD_LEVEL).ok());
    }
    CCTX.with(|c| match c.borrow_mut().as_mut() {
        Some(c) => c.compress(bytes),
        None => zstd::bulk::compress(bytes, ZSTD_LEVEL),
    })
}

impl PageSource for PageStore {
    fn page(&self, h: &PageHash) -> Result<Vec<u8>, PageError> {
        self.get(h).map_err(|e| PageError {
            hash: hex(h),
            why: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_list_remove() {
        let dir = std::env::temp_dir().join(format!("rewind-pages-{}", std::process::id()));
        let s = PageStore::at(&dir);
        let mut page = vec![0u8; PAGE_BYTES];
        page[7] = 42;
        let h = s.put(&page).unwrap();
        assert_eq!(s.put(&page).unwrap(), h);
        assert_eq!(s.get(&h).unwrap(), page);
        assert_eq!(s.list().unwrap().len(), 1);
        // A flipped byte in the stored file is reported, not trusted.
        let p = s.path(&h);
        let mut packed = std::fs::read(&p).unwrap();
        let last = packed.len() - 1;
        packed[last] ^= 0xff;
        std::fs::write(&p, packed).unwrap();
        assert!(s.get(&h).is_err());
        assert!(s.remove(&h).unwrap() > 0);
        assert!(s.list().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }

    fn numbered_pages(from: u32, n: usize) -> Vec<Vec<u8>> {
        (from..from + n as u32)
            .map(|i| {
                let mut p = vec![0u8; PAGE_BYTES];
                p[..4].copy_from_slice(&i.to_le_bytes());
                p
            })
            .collect()
    }

    #[test]
    fn an_index_kept_across_keyframes_sees_the_packs_another_writer_adds() {
        let dir = std::env::temp_dir().join(format!("rewind-packs-two-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (a, b) = (
            numbered_pages(0, PACK_MIN),
            numbered_pages(1000, PACK_MIN + 5),
        );
        let refs = |v: &[Vec<u8>]| -> Vec<(PageHash, Vec<u8>)> {
            v.iter().map(|p| (hash_page(p), p.clone())).collect()
        };
        let (a, b) = (refs(&a), refs(&b));
        let put = |s: &PageStore, v: &[(PageHash, Vec<u8>)]| {
            let r: Vec<(PageHash, &[u8])> = v.iter().map(|(h, b)| (*h, b.as_slice())).collect();
            s.put_all(&r).unwrap();
        };
        let packs = || std::fs::read_dir(dir.join(PACKS_DIR)).map_or(0, |d| d.count());
        // One writer's first keyframe reads the (empty) store, writes a pack.
        let one = PageStore::at(&dir);
        put(&one, &a);
        assert_eq!(packs(), 1);
        // Another writer, sharing the store, writes its own.
        let two = PageStore::at(&dir);
        put(&two, &b);
        put(&two, &a);
        assert_eq!(packs(), 2, "the second writer found the first's pages");
        // The first writer's next keyframe, with the index it kept, finds
        // the other's pack: it stores none of its pages again.
        put(&one, &b);
        assert_eq!(packs(), 2);
        for (h, p) in a.iter().chain(&b) {
            assert!(one.contains(h));
            assert_eq!(one.get(h).unwrap(), *p);
        }
        assert_eq!(one.list().unwrap().len(), a.len() + b.len());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_keyframes_many_pages_go_into_one_pack_that_gc_rewrites() {
        let dir = std::env::temp_dir().join(format!("rewind-packs-{}", std::process::id()));
        let s = PageStore::at(&dir);
        let pages = numbered_pages(0, PACK_MIN + 10);
        let refs: Vec<(PageHash, &[u8])> =
            pages.iter().map(|p| (hash_page(p), p.as_slice())).collect();
        s.put_all(&refs).unwrap();
        let files = |d: &Path| std::fs::read_dir(d).map_or(0, |d| d.count());
        assert_eq!(files(&dir.join(PACKS_DIR)), 1);
        assert_eq!(files(&dir), 1, "no page has a file of its own");
        // Another process's view: it reads the pack.
        let other = PageStore::at(&dir);
        for (h, b) in &refs {
            assert!(other.contains(h));
            assert_eq!(other.get(h).unwrap(), *b);
        }
        assert_eq!(other.list().unwrap().len(), refs.len());
        // Putting them again writes nothing.
        other.put_all(&refs).unwrap();
        assert_eq!(files(&dir.join(PACKS_DIR)), 1);
        // gc keeps the even ones: the pack is written anew with them.
        let keep: std::collections::HashSet<PageHash> =
            refs.iter().step_by(2).map(|(h, _)| *h).collect();
        let (removed, freed) = other.retain(|h| keep.contains(h)).unwrap();
        assert_eq!(removed as usize, refs.len() - keep.len());
        assert!(freed > 0);
        // A store that read the old pack's index finds the kept pages anew.
        let (h, b) = refs[0];
        assert_eq!(s.get(&h).unwrap(), b);
        let again = PageStore::at(&dir);
        assert_eq!(again.list().unwrap().len(), keep.len());
        for (h, b) in &refs {
            assert_eq!(again.get(h).ok().as_deref(), keep.contains(h).then_some(*b));
        }
        // A damaged frame is reported, not trusted; a pack cut short loses
        // its pages (an error to read them), never a panic.
        let pack = std::fs::read_dir(dir.join(PACKS_DIR))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut bytes = std::fs::read(&pack).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&pack, &bytes).unwrap();
        let fresh = PageStore::at(&dir);
        let errors = keep.iter().filter(|h| fresh.get(h).is_err()).count();
        assert_eq!(errors, 1);
        std::fs::write(&pack, &bytes[..20]).unwrap();
        let fresh = PageStore::at(&dir);
        assert!(keep.iter().all(|h| fresh.get(h).is_err()));
        assert!(fresh.list().unwrap().is_empty());
        // Nothing is left to keep: gc removes no damaged pack it cannot read.
        assert_eq!(fresh.retain(|_| false).unwrap(), (0, 0));
        let _ = std::fs::remove_dir_all(dir);
    }
}
