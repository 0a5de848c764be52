//! The content-addressed page store: guest pages by BLAKE3, compressed
//! with zstd, shared by every run in `$REWIND_HOME/pages/`.
//!
//! A page file is `pages/<first two hex digits>/<hash>`; its contents are
//! the zstd frame of the 4 KiB page. A page is written to a temporary name
//! and renamed, so a reader never sees half a page; reading checks the hash.

use super::{io, StoreError};
use std::path::{Path, PathBuf};

use crate::run::pages::{hash_page, hex, PageError, PageHash, PageSource, PAGE_BYTES};
/// zstd level: pages are small and written often.
const ZSTD_LEVEL: i32 = 1;

#[derive(Debug, Clone)]
pub struct PageStore {
    dir: PathBuf,
}

impl PageStore {
    pub fn at(dir: impl Into<PathBuf>) -> PageStore {
        PageStore { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, h: &PageHash) -> PathBuf {
        let x = hex(h);
        self.dir.join(&x[..2]).join(x)
    }

    pub fn contains(&self, h: &PageHash) -> bool {
        self.path(h).exists()
    }

    /// Stores a page (if it is not there yet) and returns its hash.
    pub fn put(&self, bytes: &[u8]) -> Result<PageHash, StoreError> {
        let h = hash_page(bytes);
        let path = self.path(&h);
        if path.exists() {
            return Ok(h);
        }
        let parent = path.parent().expect("a page path has a parent");
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        // One compression context a thread: making one costs more than
        // compressing a page, and a first keyframe puts thousands.
        thread_local! {
            static CCTX: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
                std::cell::RefCell::new(zstd::bulk::Compressor::new(ZSTD_LEVEL).ok());
        }
        let packed = CCTX
            .with(|c| match c.borrow_mut().as_mut() {
                Some(c) => c.compress(bytes),
                None => zstd::bulk::compress(bytes, ZSTD_LEVEL),
            })
            .map_err(io(&path))?;
        // One name per writer: two threads of a check (`--jobs`) may put
        // the same page at once, and one's rename must not find the other's
        // temporary file gone.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = parent.join(format!(".tmp-{}-{}-{n}", hex(&h), std::process::id()));
        let written = std::fs::write(&tmp, &packed)
            .map_err(io(&tmp))
            .and_then(|_| std::fs::rename(&tmp, &path).map_err(io(&path)));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map(|_| h)
    }

    /// Writes page `h` as `packed` (its zstd frame, as a page file holds
    /// it) straight to its name, with no temporary name: for a directory no
    /// one else reads yet (an import's, renamed into the store's once the
    /// whole file is verified). Its parent is made when missing.
    pub fn write_unshared(&self, h: &PageHash, packed: &[u8]) -> Result<(), StoreError> {
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

    /// `bytes`, packed as a page file holds a page.
    pub fn pack(bytes: &[u8]) -> Result<Vec<u8>, std::io::Error> {
        zstd::bulk::compress(bytes, ZSTD_LEVEL)
    }

    /// A page, checked against its hash.
    pub fn get(&self, h: &PageHash) -> Result<Vec<u8>, StoreError> {
        let path = self.path(h);
        let packed = std::fs::read(&path).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
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

    /// Every stored page's hash and file size.
    pub fn list(&self) -> Result<Vec<(PageHash, u64)>, StoreError> {
        let mut out = Vec::new();
        let Ok(dirs) = std::fs::read_dir(&self.dir) else {
            return Ok(out);
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
        out.sort();
        Ok(out)
    }

    /// Removes a page; returns the bytes freed.
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
}
