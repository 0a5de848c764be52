//! The `.rwd` format: one file that carries a run to another store. This
//! file writes and reads it and names its entries; `export.rs` makes one
//! from a run, `import.rs` checks one and adds its run to a store.
//!
//! # Format (version 2)
//!
//! ```text
//! magic      8 bytes  "\x89RWD\r\n\x1a\n"
//! version    u32 LE   2 (files of version 1 are read too)
//! entries, each:
//!   kind        u8      1 file, 2 directory, 3 symbolic link (its data is the target)
//!   compression u8      0 stored, 1 zstd
//!   mode        u32 LE  st_mode of the file (type and permission bits)
//!   path_len    u16 LE, then the path: UTF-8, relative, `/`-separated
//!   raw_len     u64 LE  bytes of data once decompressed
//!   stored_len  u64 LE  bytes of data that follow
//!   hash        32      BLAKE3 of the decompressed data
//!   check       8       the first 8 bytes of the BLAKE3 of this header so far
//!   data        stored_len bytes
//! end:
//!   0xff, the number of entries (u64 LE), and the BLAKE3 of every byte of
//!   the file before the 0xff; nothing may follow.
//! ```
//!
//! The first entry is `rwd.json` (what the file holds: the run id, whether
//! it is replayable, the kind of image). Then `run/<file>` for each file of
//! the run's directory; with `--replayable` also `image/program` (the program
//! file) with `image/deps/<path>` (a dynamically linked program's
//! interpreter, libraries and links, at their guest paths), or
//! `image/root/<path>` (a root directory's files, directories and links, as
//! the image hash covers them), or, for a `--root` run with an image view
//! (`run/image-view`: what it saw of its root), `image/files/<hash>` for
//! each file the view names (the bytes the run read, named by their
//! BLAKE3; rwd.json's image is then `view`), and `page/<hash>` for every
//! page the run's keyframes use (4 KiB, named by their BLAKE3).
//!
//! Version 2 added `image/files/` and the `view` image; a version 1 file
//! holds neither, and is read as it was written.

use super::super::StoreError;
use crate::run::pages::PageHash;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};

pub const MAGIC: &[u8; 8] = b"\x89RWD\r\n\x1a\n";
pub const FORMAT_VERSION: u32 = 2;
/// The oldest version this build reads.
pub const OLDEST_VERSION: u32 = 1;
const END: u8 = 0xff;
const ZSTD_LEVEL: i32 = 3;
/// Entries up to this size are decompressed whole, with one context.
const SMALL_ENTRY: u64 = 64 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File = 1,
    Dir = 2,
    Symlink = 3,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::File),
            2 => Some(Kind::Dir),
            3 => Some(Kind::Symlink),
            _ => None,
        }
    }
}

/// One entry's header.
#[derive(Debug, Clone)]
pub struct Entry {
    pub kind: Kind,
    pub mode: u32,
    pub path: String,
    pub raw_len: u64,
    pub hash: [u8; 32],
}

/// `rwd.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Info {
    pub format: u32,
    pub run: String,
    pub replayable: bool,
    /// `program`, `root`, `store`, `view` (a root run's image view and
    /// the files it read), or none without `--replayable`.
    pub image: Option<String>,
    /// The rewind that wrote it.
    pub rewind: String,
}

/// Why a file is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub(super) fn refused<T>(what: impl Into<String>) -> Result<T, ArchiveError> {
    Err(ArchiveError::Refused(Refused(what.into())))
}

#[derive(Debug)]
pub enum ArchiveError {
    /// The file is not acceptable: damaged, truncated, unsafe.
    Refused(Refused),
    Store(StoreError),
}

impl From<StoreError> for ArchiveError {
    fn from(e: StoreError) -> Self {
        ArchiveError::Store(e)
    }
}

// ---------------------------------------------------------------- writing

/// Writes the format above.
pub struct ArchiveWriter<W: Write> {
    out: W,
    hasher: blake3::Hasher,
    /// Entries written so far.
    pub(super) count: u64,
    bytes: u64,
    /// One compression context for every entry (thousands of pages).
    cctx: Option<zstd::bulk::Compressor<'static>>,
}

impl<W: Write> ArchiveWriter<W> {
    pub fn new(out: W) -> std::io::Result<Self> {
        let mut w = ArchiveWriter {
            out,
            hasher: blake3::Hasher::new(),
            count: 0,
            bytes: 0,
            cctx: zstd::bulk::Compressor::new(ZSTD_LEVEL).ok(),
        };
        w.put(MAGIC)?;
        w.put(&FORMAT_VERSION.to_le_bytes())?;
        Ok(w)
    }

    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.hasher.update(b);
        self.bytes += b.len() as u64;
        self.out.write_all(b)
    }

    pub fn add(&mut self, kind: Kind, mode: u32, path: &str, data: &[u8]) -> std::io::Result<()> {
        let packed = if data.len() >= 64 {
            match &mut self.cctx {
                Some(c) => c.compress(data).ok(),
                None => zstd::bulk::compress(data, ZSTD_LEVEL).ok(),
            }
        } else {
            None
        };
        let (compression, stored) = match &packed {
            Some(p) if p.len() < data.len() => (1u8, p.as_slice()),
            _ => (0u8, data),
        };
        let path_len: u16 = path
            .len()
            .try_into()
            .map_err(|_| std::io::Error::other(format!("path too long: {path}")))?;
        let mut h = Vec::with_capacity(64 + path.len());
        h.push(kind as u8);
        h.push(compression);
        h.extend_from_slice(&mode.to_le_bytes());
        h.extend_from_slice(&path_len.to_le_bytes());
        h.extend_from_slice(path.as_bytes());
        h.extend_from_slice(&(data.len() as u64).to_le_bytes());
        h.extend_from_slice(&(stored.len() as u64).to_le_bytes());
        h.extend_from_slice(blake3::hash(data).as_bytes());
        let check = blake3::hash(&h);
        h.extend_from_slice(&check.as_bytes()[..8]);
        self.put(&h)?;
        self.put(stored)?;
        self.count += 1;
        Ok(())
    }

    /// Writes the end record; returns the output and the file's size.
    pub fn finish(mut self) -> std::io::Result<(W, u64)> {
        let total = self.hasher.finalize();
        let mut end = vec![END];
        end.extend_from_slice(&self.count.to_le_bytes());
        end.extend_from_slice(total.as_bytes());
        self.out.write_all(&end)?;
        self.out.flush()?;
        Ok((self.out, self.bytes + end.len() as u64))
    }
}

// ---------------------------------------------------------------- reading

/// Told of each entry of a file being read.
pub trait Visitor {
    /// The file's format version, from its header (already in range).
    fn header(&mut self, _version: u32) -> Result<(), ArchiveError> {
        Ok(())
    }
    /// An entry's header, before its data: refuse it or get ready.
    fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError>;
    /// The entry's data as stored, when it is a zstd frame, before its
    /// decompressed data (neither verified yet).
    fn packed(&mut self, _frame: &[u8]) -> Result<(), ArchiveError> {
        Ok(())
    }
    /// A stretch of the entry's decompressed data (not verified yet).
    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError>;
    /// The entry's data matched its checksum.
    fn end(&mut self, e: &Entry) -> Result<(), ArchiveError>;
}

/// Keeps every entry whole, header and data: for small files (tests,
/// tools), as an import never does.
#[derive(Debug, Default)]
pub struct Entries(pub Vec<(Entry, Vec<u8>)>);

impl Visitor for Entries {
    fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        self.0.push((e.clone(), Vec::new()));
        Ok(())
    }
    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError> {
        if let Some((_, data)) = self.0.last_mut() {
            data.extend_from_slice(chunk);
        }
        Ok(())
    }
    fn end(&mut self, _: &Entry) -> Result<(), ArchiveError> {
        Ok(())
    }
}

struct Source<R: Read> {
    r: R,
    hasher: blake3::Hasher,
    pos: u64,
}

impl<R: Read> Source<R> {
    fn read(&mut self, buf: &mut [u8], hash: bool, what: &str) -> Result<(), ArchiveError> {
        match self.r.read_exact(buf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return refused(format!("truncated: it ends inside {what}"))
            }
            Err(e) => return refused(format!("unreadable at byte {}: {e}", self.pos)),
        }
        if hash {
            self.hasher.update(buf);
        }
        self.pos += buf.len() as u64;
        Ok(())
    }

    fn u16(&mut self, what: &str) -> Result<u16, ArchiveError> {
        let mut b = [0; 2];
        self.read(&mut b, true, what)?;
        Ok(u16::from_le_bytes(b))
    }

    fn u32(&mut self, what: &str) -> Result<u32, ArchiveError> {
        let mut b = [0; 4];
        self.read(&mut b, true, what)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self, what: &str) -> Result<u64, ArchiveError> {
        let mut b = [0; 8];
        self.read(&mut b, true, what)?;
        Ok(u64::from_le_bytes(b))
    }
}

/// Reads a whole file, verifying every checksum; the visitor sees each
/// entry. Returns the number of entries.
pub fn read(src: impl Read, visitor: &mut dyn Visitor) -> Result<u64, ArchiveError> {
    let mut s = Source {
        r: src,
        hasher: blake3::Hasher::new(),
        pos: 0,
    };
    let mut magic = [0u8; 8];
    match s.read(&mut magic, true, "the header") {
        Err(_) => return refused("not a rewind export (too short)"),
        Ok(()) if &magic != MAGIC => return refused("not a rewind export (.rwd)"),
        Ok(()) => {}
    }
    let version = s.u32("the header")?;
    if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
        return refused(format!(
            "format version {version}; this rewind reads versions {OLDEST_VERSION} to {FORMAT_VERSION}{}",
            if version > FORMAT_VERSION {
                " (it was written by a newer rewind)"
            } else {
                ""
            }
        ));
    }
    visitor.header(version)?;
    let mut n = 0u64;
    let mut small = zstd::bulk::Decompressor::new().ok();
    loop {
        let what = format!("entry {}", n + 1);
        let mut kind = [0u8; 1];
        s.read(&mut kind, false, &what)?;
        if kind[0] == END {
            let total = s.hasher.finalize();
            let mut rest = [0u8; 40];
            s.read(&mut rest, false, "the end record")?;
            let count = u64::from_le_bytes(rest[..8].try_into().unwrap());
            if count != n {
                return refused(format!(
                    "damaged: the end record counts {count} entries, the file has {n}"
                ));
            }
            if &rest[8..] != total.as_bytes() {
                return refused("damaged: the file does not match its checksum");
            }
            let mut extra = [0u8; 1];
            match s.r.read(&mut extra) {
                Ok(0) => {}
                Ok(_) => return refused("damaged: bytes after the end record"),
                Err(e) => return refused(format!("unreadable: {e}")),
            }
            return Ok(n);
        }
        s.hasher.update(&kind);
        let mut header = vec![kind[0]];
        let mut compression = [0u8; 1];
        s.read(&mut compression, true, &what)?;
        header.push(compression[0]);
        let mode = s.u32(&what)?;
        header.extend_from_slice(&mode.to_le_bytes());
        let path_len = s.u16(&what)?;
        header.extend_from_slice(&path_len.to_le_bytes());
        let mut path = vec![0u8; path_len as usize];
        s.read(&mut path, true, &what)?;
        header.extend_from_slice(&path);
        let raw_len = s.u64(&what)?;
        header.extend_from_slice(&raw_len.to_le_bytes());
        let stored_len = s.u64(&what)?;
        header.extend_from_slice(&stored_len.to_le_bytes());
        let mut hash = [0u8; 32];
        s.read(&mut hash, true, &what)?;
        header.extend_from_slice(&hash);
        let mut check = [0u8; 8];
        s.read(&mut check, true, &what)?;
        if blake3::hash(&header).as_bytes()[..8] != check {
            return refused(format!("damaged: the header of {what} is corrupt"));
        }
        let Some(kind) = Kind::from_u8(kind[0]) else {
            return refused(format!("damaged: {what} has an unknown kind {}", kind[0]));
        };
        let Ok(path) = String::from_utf8(path) else {
            return refused(format!("refused: {what} has a path that is not UTF-8"));
        };
        let what = format!("{what} ({path})");
        if compression[0] > 1 {
            return refused(format!("damaged: {what} has an unknown compression"));
        }
        if compression[0] == 0 && stored_len != raw_len {
            return refused(format!("damaged: {what} has inconsistent lengths"));
        }
        let e = Entry {
            kind,
            mode,
            path,
            raw_len,
            hash,
        };
        visitor.begin(&e)?;
        // The stored bytes, read as far as the file has them.
        let mut stored = Vec::new();
        let got = (&mut s.r)
            .take(stored_len)
            .read_to_end(&mut stored)
            .or_else(|e| refused(format!("unreadable: {e}")))?;
        if (got as u64) < stored_len {
            return refused(format!("truncated: it ends inside {what}"));
        }
        s.hasher.update(&stored);
        s.pos += stored_len;
        if compression[0] == 1 {
            visitor.packed(&stored)?;
        }
        let mut h = blake3::Hasher::new();
        let mut total = 0u64;
        let mut feed = |chunk: &[u8]| -> Result<(), ArchiveError> {
            total += chunk.len() as u64;
            if total > raw_len {
                return refused(format!("damaged: {what} holds more data than it says"));
            }
            h.update(chunk);
            visitor.data(chunk)
        };
        if compression[0] == 0 {
            for c in stored.chunks(1 << 16) {
                feed(c)?;
            }
        } else if let (true, Some(d)) = (raw_len <= SMALL_ENTRY, small.as_mut()) {
            // One context for every small entry (pages): making one costs
            // more than decompressing a page.
            let out = d
                .decompress(&stored, raw_len as usize)
                .or_else(|_| refused(format!("damaged: {what} does not decompress")))?;
            feed(&out)?;
        } else {
            let mut dec = zstd::stream::read::Decoder::new(&stored[..])
                .or_else(|e| refused(format!("damaged: {what}: {e}")))?;
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let k = match dec.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => k,
                    Err(_) => return refused(format!("damaged: {what} does not decompress")),
                };
                feed(&buf[..k])?;
            }
        }
        if total != raw_len || h.finalize().as_bytes() != &hash {
            return refused(format!("damaged: {what} does not match its checksum"));
        }
        visitor.end(&e)?;
        n += 1;
    }
}

// ---------------------------------------------------------------- names

/// What an entry's path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Name {
    Info,
    RunFile(String),
    Page(PageHash),
    Program,
    /// A path inside a root image, as components.
    Root(Vec<String>),
    /// A dynamically linked program's interpreter, library or link, by its
    /// guest path's components.
    Dep(Vec<String>),
    /// A file a root run's image view names, by its BLAKE3 (hex).
    ViewFile(String),
}

pub(super) fn safe_component(c: &str) -> bool {
    !c.is_empty() && c != "." && c != ".." && !c.contains('\0') && !c.contains('/')
}

/// Parses and checks an entry's path: relative, no `.` or `..`, no empty
/// component, and one of the names the format has.
pub(super) fn parse_name(path: &str) -> Result<Name, String> {
    if path.starts_with('/') {
        return Err(format!("absolute path `{path}`"));
    }
    let parts: Vec<&str> = path.split('/').collect();
    if let Some(bad) = parts.iter().find(|c| !safe_component(c)) {
        return Err(format!("path `{path}` has the component `{bad}`"));
    }
    match parts.as_slice() {
        ["rwd.json"] => Ok(Name::Info),
        ["run", name] if !name.starts_with('.') => Ok(Name::RunFile(name.to_string())),
        ["page", h] => blake3::Hash::from_hex(h)
            .map(|h| Name::Page(*h.as_bytes()))
            .map_err(|_| format!("`{path}` is not a page name")),
        ["image", "program"] => Ok(Name::Program),
        // Lower-case hex only: one name for one file.
        ["image", "files", h] => match blake3::Hash::from_hex(h) {
            Ok(hash) if hash.to_hex().as_str() == *h => Ok(Name::ViewFile(h.to_string())),
            _ => Err(format!("`{path}` is not a file's hash")),
        },
        ["image", "root", rest @ ..] if !rest.is_empty() => {
            Ok(Name::Root(rest.iter().map(|s| s.to_string()).collect()))
        }
        ["image", "deps", rest @ ..] if !rest.is_empty() => {
            Ok(Name::Dep(rest.iter().map(|s| s.to_string()).collect()))
        }
        _ => Err(format!("unknown entry `{path}`")),
    }
}

pub(super) const S_IFMT: u32 = 0o170000;
pub(super) const S_IFREG: u32 = 0o100000;
pub(super) const S_IFDIR: u32 = 0o040000;
pub(super) const S_IFLNK: u32 = 0o120000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(parse_name("rwd.json"), Ok(Name::Info));
        assert_eq!(parse_name("run/events"), Ok(Name::RunFile("events".into())));
        assert!(parse_name("run/../../etc/passwd").is_err());
        assert!(parse_name("/etc/passwd").is_err());
        assert!(parse_name("run/.hidden").is_err());
        assert!(parse_name("run/a/b").is_err());
        assert!(parse_name("image/root").is_err());
        assert!(parse_name("image/root/a//b").is_err());
        assert!(parse_name("image/root/a/./b").is_err());
        assert!(parse_name("page/xyz").is_err());
        assert!(parse_name("image/files/xyz").is_err());
        assert!(parse_name("image/files").is_err());
        let h = blake3::hash(b"x").to_hex().to_string();
        assert!(parse_name(&format!("image/files/{}", h.to_uppercase())).is_err());
        assert_eq!(
            parse_name(&format!("image/files/{h}")),
            Ok(Name::ViewFile(h))
        );
        assert_eq!(
            parse_name("image/root/usr/bin/sh"),
            Ok(Name::Root(vec!["usr".into(), "bin".into(), "sh".into()]))
        );
    }

    fn sample() -> Vec<u8> {
        let mut w = ArchiveWriter::new(Vec::new()).unwrap();
        w.add(Kind::File, S_IFREG | 0o644, "a", b"hello").unwrap();
        w.add(Kind::File, S_IFREG | 0o644, "b", &vec![7u8; 100_000])
            .unwrap();
        w.finish().unwrap().0
    }

    #[test]
    fn round_trip_and_every_damage_is_refused() {
        let bytes = sample();
        let mut c = Entries::default();
        assert_eq!(read(&bytes[..], &mut c).unwrap(), 2);
        assert_eq!(
            (c.0[0].0.path.as_str(), &c.0[0].1[..]),
            ("a", &b"hello"[..])
        );
        assert_eq!(c.0[1].1.len(), 100_000);
        // Every truncation.
        for n in 0..bytes.len() {
            assert!(
                read(&bytes[..n], &mut Entries::default()).is_err(),
                "truncated at {n}"
            );
        }
        // Every flipped bit of every byte.
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(
                    read(&b[..], &mut Entries::default()).is_err(),
                    "bit {bit} of byte {i}"
                );
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read(&longer[..], &mut Entries::default()).is_err());
    }
}
