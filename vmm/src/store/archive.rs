//! Exported runs: one `.rwd` file that carries a run to another store.
//!
//! # Format (version 1)
//!
//! ```text
//! magic      8 bytes  "\x89RWD\r\n\x1a\n"
//! version    u32 LE   1
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
//! file) or `image/root/<path>` (a root directory's files, directories and
//! links, as the image hash covers them), and `page/<hash>` for every page
//! the run's keyframes use (4 KiB, named by their BLAKE3).
//!
//! # Importing
//!
//! An import reads the whole file once to verify it (magic, version, every
//! header and data checksum, the whole-file checksum, that every path is one
//! of the names above with no `..`, no absolute path and nothing inside a
//! link, that the run's id is its manifest's hash) before it writes
//! anything. Then it extracts into a temporary directory inside `runs/`,
//! checks the image against the manifest's image hash and standard input
//! against its hash, and only then moves pages, the image (to
//! `images/<image hash>/`) and the run (to `runs/<id>`, its `meta.json`
//! pointing at the imported image) into place, each with one rename. Links
//! of a root image are created last and never followed.

use super::lock::StoreLock;
use super::maintain::{remove_tree, run_pages, IMAGES_DIR};
use super::meta::{ImageLocation, Meta};
use super::pages::{hex, PageHash, PageStore, PAGE_BYTES};
use super::{io, pending, Run, Store, StoreError};
use crate::image::{Image, HIDDEN_TOP};
use crate::record::Manifest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::{BufReader, BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"\x89RWD\r\n\x1a\n";
pub const FORMAT_VERSION: u32 = 1;
const END: u8 = 0xff;
const ZSTD_LEVEL: i32 = 3;
/// The run files an export without `--replayable` carries.
pub const PLAIN_RUN_FILES: &[&str] = &[
    "manifest.json",
    "meta.json",
    "events",
    super::output::OUTPUT_FILE,
    super::output::FDS_FILE,
    super::writer::SWITCHES_FILE,
    super::bookmarks::BOOKMARKS_FILE,
];
/// Small entries read into memory while verifying.
const MAX_JSON: u64 = 64 << 20;
const MAX_LINK: u64 = 4096;

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
    /// `program`, `root`, or none without `--replayable`.
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

fn refused<T>(what: impl Into<String>) -> Result<T, ArchiveError> {
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
    count: u64,
    bytes: u64,
}

impl<W: Write> ArchiveWriter<W> {
    pub fn new(out: W) -> std::io::Result<Self> {
        let mut w = ArchiveWriter {
            out,
            hasher: blake3::Hasher::new(),
            count: 0,
            bytes: 0,
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
            zstd::bulk::compress(data, ZSTD_LEVEL).ok()
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
    /// An entry's header, before its data: refuse it or get ready.
    fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError>;
    /// A stretch of the entry's decompressed data (not verified yet).
    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError>;
    /// The entry's data matched its checksum.
    fn end(&mut self, e: &Entry) -> Result<(), ArchiveError>;
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
    if version != FORMAT_VERSION {
        return refused(format!(
            "format version {version}; this rewind reads version {FORMAT_VERSION}{}",
            if version > FORMAT_VERSION {
                " (it was written by a newer rewind)"
            } else {
                ""
            }
        ));
    }
    let mut n = 0u64;
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
enum Name {
    Info,
    RunFile(String),
    Page(PageHash),
    Program,
    /// A path inside a root image, as components.
    Root(Vec<String>),
}

fn safe_component(c: &str) -> bool {
    !c.is_empty() && c != "." && c != ".." && !c.contains('\0') && !c.contains('/')
}

/// Parses and checks an entry's path: relative, no `.` or `..`, no empty
/// component, and one of the names the format has.
fn parse_name(path: &str) -> Result<Name, String> {
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
        ["image", "root", rest @ ..] if !rest.is_empty() => {
            Ok(Name::Root(rest.iter().map(|s| s.to_string()).collect()))
        }
        _ => Err(format!("unknown entry `{path}`")),
    }
}

const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;
const S_IFLNK: u32 = 0o120000;

// ---------------------------------------------------------------- export

/// What an export wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExportSummary {
    pub bytes: u64,
    pub entries: u64,
    pub replayable: bool,
    pub image_files: u64,
    pub pages: u64,
    /// Things left out, and why.
    pub warnings: Vec<String>,
}

/// A root image's entries in the order the image hash walks them.
fn walk_root(
    dir: &Path,
    rel: &str,
    out: &mut Vec<(String, Kind, u32, PathBuf)>,
) -> Result<(), StoreError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<_, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if rel.is_empty() && HIDDEN_TOP.contains(&name) {
            continue;
        }
        let path = if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        };
        let p = e.path();
        let meta = std::fs::symlink_metadata(&p).map_err(io(&p))?;
        let mode = meta.permissions().mode();
        let ft = meta.file_type();
        if ft.is_dir() {
            out.push((path.clone(), Kind::Dir, mode, p.clone()));
            walk_root(&p, &path, out)?;
        } else if ft.is_symlink() {
            out.push((path, Kind::Symlink, mode, p));
        } else if ft.is_file() {
            out.push((path, Kind::File, mode, p));
        }
    }
    Ok(())
}

impl Store {
    /// Writes `run` to `out` as one file (see the module's doc). With
    /// `replayable`, also its standard input, image and keyframes with their
    /// pages, so that it replays in another store.
    pub fn export(
        &self,
        run: &Run,
        replayable: bool,
        out: &Path,
    ) -> Result<ExportSummary, StoreError> {
        // Nothing the export reads is removed while it reads.
        let _lock = self.lock_shared()?;
        if !run.dir.join("manifest.json").exists() {
            return Err(StoreError::NotFound(run.id.clone()));
        }
        let mut summary = ExportSummary {
            replayable,
            ..Default::default()
        };
        let inputs = if replayable {
            Some(run.inputs()?)
        } else {
            None
        };

        let dir = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "export.rwd".into());
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        pending::register_locked(&tmp, None);
        let result = (|| {
            let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
            let mut w = ArchiveWriter::new(BufWriter::new(file)).map_err(io(&tmp))?;
            self.write_entries(run, inputs.as_ref(), &mut w, &mut summary)
                .map_err(|e| match e {
                    Failure::Io(e) => io(&tmp)(e),
                    Failure::Store(e) => e,
                })?;
            summary.entries = w.count;
            let (buf, bytes) = w.finish().map_err(io(&tmp))?;
            let file = buf.into_inner().map_err(|e| io(&tmp)(e.into_error()))?;
            file.sync_all().map_err(io(&tmp))?;
            summary.bytes = bytes;
            std::fs::rename(&tmp, out).map_err(io(out))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        pending::unregister(&tmp);
        result.map(|_| summary)
    }

    fn write_entries<W: Write>(
        &self,
        run: &Run,
        inputs: Option<&crate::session::RunInputs>,
        w: &mut ArchiveWriter<W>,
        summary: &mut ExportSummary,
    ) -> Result<(), Failure> {
        let replayable = inputs.is_some();
        // Keyframes and their pages, if they can all be read.
        let mut pages: Vec<(PageHash, Vec<u8>)> = Vec::new();
        let mut keyframes_ok = true;
        if replayable {
            let store = self.pages();
            match run_pages(&run.dir) {
                Ok(hs) => {
                    for h in hs {
                        match store.get(&h) {
                            Ok(b) => pages.push((h, b)),
                            Err(e) => {
                                summary.warnings.push(format!(
                                    "the run's keyframes are left out: page {} is unreadable: {e}",
                                    &hex(&h)[..16]
                                ));
                                keyframes_ok = false;
                                pages.clear();
                                break;
                            }
                        }
                    }
                }
                Err(e) => {
                    summary
                        .warnings
                        .push(format!("the run's keyframes are left out: {e}"));
                    keyframes_ok = false;
                }
            }
        }
        let image_kind = inputs.map(|i| match &i.image {
            Image::Program { .. } => "program".to_string(),
            Image::Root { .. } => "root".to_string(),
        });
        let info = Info {
            format: FORMAT_VERSION,
            run: run.id.clone(),
            replayable,
            image: image_kind,
            rewind: env!("CARGO_PKG_VERSION").to_string(),
        };
        let json = serde_json::to_vec_pretty(&info).expect("info serializes");
        w.add(Kind::File, S_IFREG | 0o644, "rwd.json", &json)?;

        // The run's files.
        let mut names: Vec<String> = if replayable {
            let mut v = Vec::new();
            for e in std::fs::read_dir(&run.dir).map_err(|e| io(&run.dir)(e))? {
                let e = e.map_err(|e| io(&run.dir)(e))?;
                let name = e.file_name().to_string_lossy().into_owned();
                let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
                if is_file && !name.starts_with('.') && e.file_name().to_str().is_some() {
                    v.push(name);
                }
            }
            v
        } else {
            PLAIN_RUN_FILES.iter().map(|s| s.to_string()).collect()
        };
        names.sort();
        if !keyframes_ok {
            names.retain(|n| n != crate::record::keyframe::KEYFRAMES_FILE);
        }
        for name in names {
            let p = run.dir.join(&name);
            let bytes = match std::fs::read(&p) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if ["manifest.json", "meta.json", "events"].contains(&name.as_str()) {
                        return Err(Failure::Store(io(&p)(e)));
                    }
                    continue;
                }
                Err(e) => return Err(Failure::Store(io(&p)(e))),
            };
            w.add(Kind::File, S_IFREG | 0o644, &format!("run/{name}"), &bytes)?;
        }

        // The image.
        if let Some(inputs) = inputs {
            match &inputs.image {
                Image::Program { host_path, .. } => {
                    let meta = std::fs::metadata(host_path).map_err(|e| io(host_path)(e))?;
                    let bytes = std::fs::read(host_path).map_err(|e| io(host_path)(e))?;
                    w.add(
                        Kind::File,
                        meta.permissions().mode(),
                        "image/program",
                        &bytes,
                    )?;
                    summary.image_files = 1;
                }
                Image::Root { dir } => {
                    let mut entries = Vec::new();
                    walk_root(dir, "", &mut entries)?;
                    for (rel, kind, mode, p) in entries {
                        let data = match kind {
                            Kind::Dir => Vec::new(),
                            Kind::Symlink => std::fs::read_link(&p)
                                .map_err(|e| io(&p)(e))?
                                .as_os_str()
                                .as_bytes()
                                .to_vec(),
                            Kind::File => std::fs::read(&p).map_err(|e| io(&p)(e))?,
                        };
                        w.add(kind, mode, &format!("image/root/{rel}"), &data)?;
                        summary.image_files += 1;
                    }
                }
            }
        }
        for (h, bytes) in &pages {
            w.add(
                Kind::File,
                S_IFREG | 0o644,
                &format!("page/{}", hex(h)),
                bytes,
            )?;
        }
        summary.pages = pages.len() as u64;
        Ok(())
    }
}

enum Failure {
    Io(std::io::Error),
    Store(StoreError),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

// ---------------------------------------------------------------- import

/// The first pass: checks every entry and keeps the small ones it needs.
#[derive(Default)]
struct Check {
    index: u64,
    seen: BTreeSet<String>,
    /// Paths inside a root image that are links, and that are files.
    links: BTreeSet<Vec<String>>,
    files: BTreeSet<Vec<String>>,
    root_paths: Vec<Vec<String>>,
    capture: Option<Vec<u8>>,
    info: Option<Info>,
    manifest: Option<Vec<u8>>,
    meta: Option<Vec<u8>>,
    run_files: BTreeSet<String>,
    program: bool,
    root: bool,
    pages: u64,
}

impl Visitor for Check {
    fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        self.index += 1;
        let name = parse_name(&e.path).or_else(|why| refused(format!("refused: {why}")))?;
        if !self.seen.insert(e.path.clone()) {
            return refused(format!("refused: `{}` appears twice", e.path));
        }
        if self.index == 1 && name != Name::Info {
            return refused("not a rewind export: it does not start with rwd.json");
        }
        let ty = e.mode & S_IFMT;
        let want_ty = match e.kind {
            Kind::File => S_IFREG,
            Kind::Dir => S_IFDIR,
            Kind::Symlink => S_IFLNK,
        };
        if ty != want_ty {
            return refused(format!("refused: `{}` has a mode of another kind", e.path));
        }
        if e.kind != Kind::File && !matches!(name, Name::Root(_)) {
            return refused(format!(
                "refused: `{}` must be a file (links and directories only belong in a root image)",
                e.path
            ));
        }
        self.capture = None;
        match &name {
            Name::Info => {
                if e.raw_len > MAX_JSON {
                    return refused("refused: rwd.json is too large");
                }
                self.capture = Some(Vec::new());
            }
            Name::RunFile(f) => {
                if (f == "manifest.json" || f == "meta.json") && e.raw_len > MAX_JSON {
                    return refused(format!("refused: `{}` is too large", e.path));
                }
                if f == "manifest.json" || f == "meta.json" {
                    self.capture = Some(Vec::new());
                }
                self.run_files.insert(f.clone());
            }
            Name::Page(h) => {
                if e.raw_len != PAGE_BYTES as u64 || &e.hash != h {
                    return refused(format!("damaged: `{}` is not the page it names", e.path));
                }
                self.pages += 1;
            }
            Name::Program => self.program = true,
            Name::Root(parts) => {
                self.root = true;
                if e.kind == Kind::Symlink && e.raw_len > MAX_LINK {
                    return refused(format!("refused: the link `{}` is too long", e.path));
                }
                match e.kind {
                    Kind::Symlink => {
                        self.links.insert(parts.clone());
                    }
                    Kind::File => {
                        self.files.insert(parts.clone());
                    }
                    Kind::Dir => {}
                }
                self.root_paths.push(parts.clone());
            }
        }
        Ok(())
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError> {
        if let Some(c) = &mut self.capture {
            c.extend_from_slice(chunk);
        }
        Ok(())
    }

    fn end(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        let Some(bytes) = self.capture.take() else {
            return Ok(());
        };
        match parse_name(&e.path) {
            Ok(Name::Info) => {
                let info: Info = serde_json::from_slice(&bytes)
                    .or_else(|err| refused(format!("damaged: rwd.json: {err}")))?;
                self.info = Some(info);
            }
            Ok(Name::RunFile(f)) if f == "manifest.json" => self.manifest = Some(bytes),
            Ok(Name::RunFile(f)) if f == "meta.json" => self.meta = Some(bytes),
            _ => {}
        }
        Ok(())
    }
}

/// What the first pass found, checked as a whole.
struct Checked {
    info: Info,
    manifest: Manifest,
    meta: Meta,
    pages: u64,
}

impl Check {
    fn finish(self) -> Result<Checked, ArchiveError> {
        // Nothing may lie inside a link or a file of a root image.
        for p in &self.root_paths {
            for k in 1..p.len() {
                let prefix = &p[..k];
                if self.links.contains(prefix) {
                    return refused(format!(
                        "refused: `image/root/{}` lies inside a link",
                        p.join("/")
                    ));
                }
                if self.files.contains(prefix) {
                    return refused(format!(
                        "refused: `image/root/{}` lies inside a file",
                        p.join("/")
                    ));
                }
            }
        }
        let info = self
            .info
            .ok_or_else(|| ArchiveError::Refused(Refused("refused: no rwd.json".into())))?;
        if info.format != FORMAT_VERSION {
            return refused(format!(
                "rwd.json says format {}; this rewind reads {FORMAT_VERSION}",
                info.format
            ));
        }
        for must in ["manifest.json", "meta.json", "events"] {
            if !self.run_files.contains(must) {
                return refused(format!("refused: it has no run/{must}"));
            }
        }
        let manifest: Manifest = serde_json::from_slice(self.manifest.as_deref().unwrap_or(b""))
            .or_else(|e| refused(format!("refused: run/manifest.json: {e}")))?;
        if let Err(e) = manifest.validate() {
            return refused(format!("refused: run/manifest.json: {e}"));
        }
        let meta: Meta = serde_json::from_slice(self.meta.as_deref().unwrap_or(b""))
            .or_else(|e| refused(format!("refused: run/meta.json: {e}")))?;
        let id = manifest.id();
        if id != info.run || meta.id != id {
            return refused(format!(
                "refused: the run's id {} is not its manifest's hash {id}",
                info.run
            ));
        }
        if info.replayable {
            let ok = match info.image.as_deref() {
                Some("program") => self.program && !self.root,
                Some("root") => !self.program,
                _ => false,
            };
            if !ok {
                return refused("refused: its image does not match what rwd.json says");
            }
            if manifest.stdin.is_some() && !self.run_files.contains("stdin.bin") {
                return refused("refused: it has no run/stdin.bin");
            }
        } else if self.program || self.root || self.pages > 0 {
            return refused("refused: an export without --replayable carries an image or pages");
        }
        Ok(Checked {
            info,
            manifest,
            meta,
            pages: self.pages,
        })
    }
}

/// The second pass: writes every entry under a temporary directory.
struct Extract {
    tmp: PathBuf,
    pages: PageStore,
    file: Option<std::fs::File>,
    page: Option<Vec<u8>>,
    link: Option<Vec<u8>>,
    /// Links to create and modes to set once every file is written.
    links: Vec<(PathBuf, Vec<u8>)>,
    modes: Vec<(PathBuf, u32, bool)>,
}

impl Extract {
    fn target(&self, name: &Name) -> Option<PathBuf> {
        match name {
            Name::Info | Name::Page(_) => None,
            Name::RunFile(f) => Some(self.tmp.join("run").join(f)),
            Name::Program => Some(self.tmp.join("image").join("program")),
            Name::Root(parts) => {
                let mut p = self.tmp.join("image");
                p.extend(parts);
                Some(p)
            }
        }
    }
}

fn write_err(p: &Path, e: std::io::Error) -> ArchiveError {
    ArchiveError::Store(StoreError::Io {
        path: p.to_path_buf(),
        source: e,
    })
}

impl Visitor for Extract {
    fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        let name = parse_name(&e.path).or_else(|why| refused(format!("refused: {why}")))?;
        self.file = None;
        self.page = None;
        self.link = None;
        if let Name::Page(_) = name {
            self.page = Some(Vec::with_capacity(PAGE_BYTES));
            return Ok(());
        }
        let Some(path) = self.target(&name) else {
            return Ok(());
        };
        let parent = path.parent().expect("under the temporary directory");
        std::fs::create_dir_all(parent).map_err(|err| write_err(parent, err))?;
        match e.kind {
            Kind::Dir => {
                match std::fs::create_dir(&path) {
                    Ok(()) => {}
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(err) => return Err(write_err(&path, err)),
                }
                self.modes.push((path, e.mode, true));
            }
            Kind::Symlink => self.link = Some(Vec::new()),
            Kind::File => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&path)
                    .map_err(|err| write_err(&path, err))?;
                self.file = Some(f);
                if matches!(name, Name::Program | Name::Root(_)) {
                    self.modes.push((path, e.mode, false));
                }
            }
        }
        Ok(())
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError> {
        if let Some(f) = &mut self.file {
            f.write_all(chunk)
                .map_err(|err| write_err(&self.tmp, err))?;
        } else if let Some(p) = &mut self.page {
            p.extend_from_slice(chunk);
        } else if let Some(l) = &mut self.link {
            l.extend_from_slice(chunk);
        }
        Ok(())
    }

    fn end(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        self.file = None;
        if let Some(bytes) = self.page.take() {
            let h = self.pages.put(&bytes)?;
            if h != e.hash {
                return refused(format!("damaged: `{}` is not the page it names", e.path));
            }
        }
        if let Some(target) = self.link.take() {
            if let Ok(Name::Root(parts)) = parse_name(&e.path) {
                let mut p = self.tmp.join("image");
                p.extend(parts);
                self.links.push((p, target));
            }
        }
        Ok(())
    }
}

impl Extract {
    /// Creates the links and sets the modes, directories deepest first.
    fn finish(&mut self) -> Result<(), ArchiveError> {
        for (p, target) in &self.links {
            if target.contains(&0) {
                return refused("refused: a link target holds a NUL byte");
            }
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), p)
                .map_err(|err| write_err(p, err))?;
        }
        self.modes.sort_by_key(|(p, _, dir)| {
            (*dir, std::cmp::Reverse(p.components().count()), p.clone())
        });
        for (p, mode, _) in &self.modes {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode & 0o7777))
                .map_err(|err| write_err(p, err))?;
        }
        Ok(())
    }
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    pub run: Run,
    pub replayable: bool,
    /// The run was in the store already: nothing was changed.
    pub already: bool,
    pub pages: u64,
}

impl Store {
    /// Verifies an exported file, then adds its run to the store (see the
    /// module's doc). A file that is refused leaves the store as it was.
    pub fn import(&self, file: &Path) -> Result<ImportSummary, ArchiveError> {
        let open = || {
            std::fs::File::open(file)
                .map(BufReader::new)
                .map_err(|e| ArchiveError::Store(io(file)(e)))
        };
        // Pass 1: verify everything, write nothing.
        let mut check = Check::default();
        read(open()?, &mut check)?;
        let checked = check.finish()?;
        let id = checked.manifest.id();
        let existing = self.runs_dir().join(&id);
        if existing.join("manifest.json").exists() {
            if let Ok(run) = Run::load(&existing) {
                return Ok(ImportSummary {
                    run,
                    replayable: checked.info.replayable,
                    already: true,
                    pages: 0,
                });
            }
        }

        // Pass 2: extract into a temporary directory, check, move into place.
        let had_runs = self.runs_dir().exists();
        self.prepare()?;
        let lock = self.lock_shared()?;
        let tmp = self
            .runs_dir()
            .join(format!(".tmp-import-{}", std::process::id()));
        let _ = remove_tree(&tmp);
        pending::register_locked(&tmp, None);
        let result = self.extract_and_install(open()?, &tmp, &checked, &lock);
        let _ = remove_tree(&tmp);
        pending::unregister(&tmp);
        if result.is_err() && !had_runs {
            // Leave a store that had no runs as it was (only when empty).
            let _ = std::fs::remove_dir(self.runs_dir());
        }
        result
    }

    fn extract_and_install(
        &self,
        src: impl Read,
        tmp: &Path,
        checked: &Checked,
        _lock: &StoreLock,
    ) -> Result<ImportSummary, ArchiveError> {
        std::fs::create_dir(tmp).map_err(|e| write_err(tmp, e))?;
        let mut x = Extract {
            tmp: tmp.to_path_buf(),
            pages: PageStore::at(tmp.join("pages")),
            file: None,
            page: None,
            link: None,
            links: Vec::new(),
            modes: Vec::new(),
        };
        read(src, &mut x)?;
        x.finish()?;

        let id = checked.manifest.id();
        let run_tmp = tmp.join("run");
        let staged = Run::load(&run_tmp).or_else(|e| refused(format!("refused: {e}")))?;
        if staged.manifest != checked.manifest {
            return refused("damaged: the file changed while it was read");
        }
        let mut meta = checked.meta.clone();
        let image_tmp = tmp.join("image");
        let images = self.home().join(IMAGES_DIR);
        let image_home = images.join(&checked.manifest.image);
        if checked.info.replayable {
            // Standard input and the image must be what the manifest hashed.
            staged
                .stdin()
                .or_else(|e| refused(format!("refused: {e}")))?;
            if !safe_component(&checked.manifest.image)
                || !checked
                    .manifest
                    .image
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit())
            {
                return refused("refused: the manifest's image hash is not a hash");
            }
            let (staged_image, final_location) = match checked.info.image.as_deref() {
                Some("program") => {
                    let guest_path = match &checked.meta.image {
                        ImageLocation::Program { guest_path, .. } => guest_path.clone(),
                        ImageLocation::Root { .. } => checked.manifest.program.clone(),
                    };
                    (
                        Image::Program {
                            guest_path: guest_path.clone(),
                            host_path: image_tmp.join("program"),
                        },
                        ImageLocation::Program {
                            guest_path,
                            host_path: image_home.join("program"),
                        },
                    )
                }
                _ => {
                    std::fs::create_dir_all(&image_tmp).map_err(|e| write_err(&image_tmp, e))?;
                    (
                        Image::Root {
                            dir: image_tmp.clone(),
                        },
                        ImageLocation::Root {
                            dir: image_home.clone(),
                        },
                    )
                }
            };
            let hash = staged_image
                .hash()
                .or_else(|e| refused(format!("refused: its image: {e}")))?;
            if hash != checked.manifest.image {
                return refused(
                    "damaged: its image does not match the image hash in the run's manifest",
                );
            }
            meta.image = final_location;
        }

        // Into place: pages, then the image, then the run.
        let pages = self.pages();
        if let Ok(dirs) = std::fs::read_dir(tmp.join("pages")) {
            for d in dirs.flatten() {
                for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
                    let name = f.file_name();
                    if name.to_string_lossy().starts_with('.') {
                        continue;
                    }
                    let dest_dir = pages.dir().join(d.file_name());
                    let dest = dest_dir.join(&name);
                    if dest.exists() {
                        continue;
                    }
                    std::fs::create_dir_all(&dest_dir).map_err(|e| write_err(&dest_dir, e))?;
                    std::fs::rename(f.path(), &dest).map_err(|e| write_err(&dest, e))?;
                }
            }
        }
        if checked.info.replayable {
            std::fs::create_dir_all(&images).map_err(|e| write_err(&images, e))?;
            let usable = || {
                let img = meta.image.to_image();
                img.hash().ok().as_deref() == Some(checked.manifest.image.as_str())
            };
            if !usable() {
                if image_home.exists() {
                    // Damaged or partial: replace it.
                    let aside = images.join(format!(
                        ".old-{}-{}",
                        checked.manifest.image,
                        std::process::id()
                    ));
                    let _ = remove_tree(&aside);
                    std::fs::rename(&image_home, &aside).map_err(|e| write_err(&image_home, e))?;
                    let _ = remove_tree(&aside);
                }
                std::fs::rename(&image_tmp, &image_home).map_err(|e| write_err(&image_home, e))?;
            }
            let json = serde_json::to_vec_pretty(&meta).expect("meta serializes");
            super::bookmarks::write_atomic(&run_tmp.join("meta.json"), &json)?;
        }
        let dest = self.runs_dir().join(&id);
        let already = match std::fs::rename(&run_tmp, &dest) {
            Ok(()) => false,
            Err(e)
                if e.raw_os_error() == Some(libc::ENOTEMPTY)
                    || e.raw_os_error() == Some(libc::EEXIST) =>
            {
                true
            }
            Err(e) => return Err(write_err(&dest, e)),
        };
        let run = Run::load(&dest)?;
        Ok(ImportSummary {
            run,
            replayable: checked.info.replayable,
            already,
            pages: checked.pages,
        })
    }
}

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
        assert_eq!(
            parse_name("image/root/usr/bin/sh"),
            Ok(Name::Root(vec!["usr".into(), "bin".into(), "sh".into()]))
        );
    }

    struct Collect(Vec<(String, Vec<u8>)>);

    impl Visitor for Collect {
        fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError> {
            self.0.push((e.path.clone(), Vec::new()));
            Ok(())
        }
        fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError> {
            self.0.last_mut().unwrap().1.extend_from_slice(chunk);
            Ok(())
        }
        fn end(&mut self, _: &Entry) -> Result<(), ArchiveError> {
            Ok(())
        }
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
        let mut c = Collect(Vec::new());
        assert_eq!(read(&bytes[..], &mut c).unwrap(), 2);
        assert_eq!(c.0[0], ("a".to_string(), b"hello".to_vec()));
        assert_eq!(c.0[1].1.len(), 100_000);
        // Every truncation.
        for n in 0..bytes.len() {
            assert!(
                read(&bytes[..n], &mut Collect(Vec::new())).is_err(),
                "truncated at {n}"
            );
        }
        // Every flipped bit of every byte.
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(
                    read(&b[..], &mut Collect(Vec::new())).is_err(),
                    "bit {bit} of byte {i}"
                );
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read(&longer[..], &mut Collect(Vec::new())).is_err());
    }
}
