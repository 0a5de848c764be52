//! The file tree a run sees: the root image (read from the host lazily,
//! never written), under the run's own overlay (kept in memory, in the
//! kernel's state, never on the host).
//!
//! The tree is a graph of nodes keyed by inode number. A directory of the
//! image becomes a node whose entries are read from the host the first time
//! the guest looks into it; from then on its entries live in memory, so a
//! create, unlink, mkdir or rename simply edits them and a deletion shadows
//! the image for the rest of the run. A file of the image is read from the
//! host when the guest first opens it (a large one mapped, `bytes.rs`); a
//! write changes the in-memory copy only (copy-up).
//!
//! Determinism: entries are kept sorted by name, inode numbers are derived
//! from the parent's inode and the name (image files) or from a counter
//! (files the guest creates), times are the run's epoch for image files and
//! the virtual clock for what the guest changes, owners are root.
//!
//! `/dev`, `/proc` and `/sys` are the monitor's own (the image's are hidden),
//! and `/tmp` exists even when the image has none.
//!
//! The tree as a run first sees it is built in `image.rs`, paths are
//! resolved in `resolve.rs`, and what is read of the host is in `host.rs`.

use super::super::errno::*;
use crate::image::{Image, View};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

mod host;
mod image;
pub mod resolve;
pub use crate::image::bytes::{read_path, read_whole, FileBytes, HostMap, MAP_AT_LEAST};
use host::{read_host_dir, read_host_file, HostEntry};

pub type Ino = u64;

pub const S_IFMT: u32 = 0o170000;
pub const S_IFSOCK: u32 = 0o140000;
pub const S_IFLNK: u32 = 0o120000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFDIR: u32 = 0o040000;
pub const S_IFCHR: u32 = 0o020000;
pub const S_IFBLK: u32 = 0o060000;
pub const S_IFIFO: u32 = 0o010000;

/// The root directory's inode number (as on ext4).
pub const ROOT_INO: Ino = 2;
/// Largest file the overlay holds (EFBIG past it).
pub const MAX_FILE: u64 = 1 << 30;
/// Most bytes the overlay's files hold together (ENOSPC past it).
pub const MAX_OVERLAY: u64 = 2 << 30;

/// A character device the monitor serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Device {
    /// Reads end at once, writes vanish.
    Null,
    /// Reads give zeros.
    Zero,
    /// Reads give zeros, writes fail with ENOSPC.
    Full,
    /// Reads give bytes of the run's seeded generator (random, urandom).
    Random,
    /// `/dev/tty`: the run has no controlling terminal, so opening it is ENXIO.
    Tty,
}

impl Device {
    /// (major, minor) as on Linux.
    pub fn rdev(self) -> (u32, u32) {
        match self {
            Device::Null => (1, 3),
            Device::Zero => (1, 5),
            Device::Full => (1, 7),
            Device::Random => (1, 9),
            Device::Tty => (5, 0),
        }
    }
}

/// A file of `/proc` or `/sys`, made when it is opened or read. Those of
/// `/proc/<pid>` name their process (and thread) and are made on the fly
/// when looked up, from the kernel's process table (`ProcessView`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Proc {
    /// `/proc/self`: a link to the looking process's `/proc/<pid>`.
    SelfLink,
    /// `/proc/thread-self`: a link to `<pid>/task/<tid>` of the looking thread.
    ThreadSelfLink,
    /// `/proc/<pid>` (no thread) or `/proc/<pid>/task/<tid>`.
    Dir(u32, Option<u32>),
    /// `/proc/<pid>/task`: one directory per thread.
    TaskDir(u32),
    /// A generated file of such a directory.
    File(u32, Option<u32>, ProcFile),
    /// `/proc/<pid>/exe`: a link to the process's executable.
    Exe(u32),
    /// `/proc/<pid>/cwd`: a link to its working directory.
    Cwd(u32),
    /// `/proc/<pid>/fd`: one link per open descriptor.
    FdDir(u32),
    /// `/proc/<pid>/fd/N`: a link to what descriptor N is open on.
    Fd(u32, i32),
    /// Fixed text (`/sys/devices/system/cpu/online`, `/proc/cpuinfo`).
    Text(String),
}

/// The generated files of `/proc/<pid>` and `/proc/<pid>/task/<tid>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProcFile {
    Stat,
    Status,
    Cmdline,
    Comm,
    Maps,
    /// The environment, as the process's memory holds it.
    Environ,
}

impl Proc {
    /// Whether it is a directory (its entries made on the fly).
    pub fn is_dir(&self) -> bool {
        matches!(self, Proc::Dir(..) | Proc::TaskDir(_) | Proc::FdDir(_))
    }
}

/// A regular file's contents. Saved states (keyframes) carry the bytes of
/// files the guest changed; an image file it only read is read from the
/// image again after a restore.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "FileDataRepr", into = "FileDataRepr")]
pub struct FileData {
    /// The image's file behind this one, until its bytes are loaded.
    pub host: Option<PathBuf>,
    /// The contents once loaded (or created); shared so that a saved kernel state is cheap.
    pub bytes: Option<Arc<FileBytes>>,
    /// The guest changed (or made) it: the overlay owns the bytes.
    pub dirty: bool,
}

impl FileData {
    /// A file of the image, read when first needed.
    pub fn image(host: PathBuf) -> FileData {
        FileData {
            host: Some(host),
            bytes: None,
            dirty: false,
        }
    }

    /// A new empty file of the overlay.
    pub fn empty() -> FileData {
        FileData {
            host: None,
            bytes: Some(Arc::default()),
            dirty: true,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct FileDataRepr {
    host: Option<PathBuf>,
    /// Only the overlay's bytes (in keyframes, large ones as pages).
    bytes: Option<crate::kernel::blobs::Stored>,
}

impl From<FileData> for FileDataRepr {
    fn from(f: FileData) -> FileDataRepr {
        FileDataRepr {
            bytes: if f.dirty || f.host.is_none() {
                Some(crate::kernel::blobs::save(
                    f.bytes.as_deref().map_or(&[][..], |b| b.as_slice()),
                ))
            } else {
                None
            },
            host: f.host,
        }
    }
}

impl TryFrom<FileDataRepr> for FileData {
    type Error = crate::kernel::blobs::BlobError;
    fn try_from(r: FileDataRepr) -> Result<FileData, Self::Error> {
        Ok(FileData {
            dirty: r.bytes.is_some(),
            bytes: r
                .bytes
                .map(crate::kernel::blobs::load)
                .transpose()?
                .map(|v| Arc::new(FileBytes::Owned(v))),
            host: r.host,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DirData {
    pub parent: Ino,
    /// The name in the parent (empty for the root).
    pub name: String,
    /// The image's directory behind this one, for entries not read yet.
    pub host: Option<PathBuf>,
    /// None until read from the host.
    pub entries: Option<BTreeMap<String, Ino>>,
    /// The monitor's own directory (`/proc`, `/sys`): the guest cannot change it.
    pub fixed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Kind {
    File(FileData),
    Dir(DirData),
    Symlink(String),
    Dev(Device),
    Proc(Proc),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    /// Type and permission bits, as st_mode.
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Size in bytes (files: their contents; links: the target's length).
    pub size: u64,
    /// Realtime nanoseconds.
    pub atime: u64,
    pub mtime: u64,
    pub ctime: u64,
    /// Open descriptions that refer to it: an unlinked node lives while some do.
    pub opens: u32,
    pub kind: Kind,
}

impl Node {
    pub fn new(mode: u32, size: u64, now: u64, kind: Kind) -> Node {
        Node {
            mode,
            nlink: 1,
            uid: 0,
            gid: 0,
            size,
            atime: now,
            mtime: now,
            ctime: now,
            opens: 0,
            kind,
        }
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.kind, Kind::Dir(_))
    }

    pub fn file_type(&self) -> u32 {
        self.mode & S_IFMT
    }

    /// Whether a lookup follows it as a symbolic link.
    pub fn is_link(&self) -> bool {
        matches!(
            self.kind,
            Kind::Symlink(_)
                | Kind::Proc(
                    Proc::SelfLink
                        | Proc::ThreadSelfLink
                        | Proc::Exe(_)
                        | Proc::Cwd(_)
                        | Proc::Fd(..)
                )
        )
    }

    /// Directory type for getdents64 (DT_*).
    pub fn dtype(&self) -> u8 {
        match self.mode & S_IFMT {
            S_IFIFO => 1,
            S_IFCHR => 2,
            S_IFDIR => 4,
            S_IFREG => 8,
            S_IFLNK => 10,
            S_IFSOCK => 12,
            _ => 0,
        }
    }
}

/// The tree: every node, by inode number.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tree {
    pub nodes: BTreeMap<Ino, Node>,
    /// The image's files: what `Image` resolves guest paths with.
    pub image: Image,
    /// The run's epoch: the time of every image file.
    pub epoch_ns: u64,
    /// Bytes of file contents the overlay owns (what the guest wrote).
    pub bytes_held: u64,
    /// Counter for the inode numbers of created nodes.
    created: u64,
    /// Nodes made on the fly: (directory, name) of each.
    dyn_names: BTreeMap<Ino, (Ino, String)>,
    /// Host files a shell put in (`add_host_file`): read from the host,
    /// never through the run's image view, which knows only the run's root.
    #[serde(skip)]
    outside: std::collections::BTreeSet<PathBuf>,
}

/// A 64-bit mix of a word and a name (FNV-1a, then SplitMix64's finalizer).
fn mix(seed: u64, name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for b in seed.to_le_bytes().iter().chain(name) {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl Tree {
    pub fn node(&self, ino: Ino) -> SysResult<&Node> {
        self.nodes.get(&ino).ok_or(ENOENT)
    }

    pub fn node_mut(&mut self, ino: Ino) -> SysResult<&mut Node> {
        self.nodes.get_mut(&ino).ok_or(ENOENT)
    }

    /// A directory's entries, read from the image the first time.
    pub fn entries(&mut self, dir: Ino) -> SysResult<&BTreeMap<String, Ino>> {
        let host = match &self.node(dir)?.kind {
            Kind::Dir(d) if d.entries.is_some() => None,
            Kind::Dir(d) => Some(d.host.clone()),
            _ => return Err(ENOTDIR),
        };
        if let Some(host) = host {
            let view = self.image.view();
            let found = host.map(|h| read_host_dir(view, &h)).unwrap_or_default();
            if let Kind::Dir(d) = &mut self.node_mut(dir)?.kind {
                d.entries = Some(BTreeMap::new());
            }
            for (name, entry) in found {
                let node = entry.node(dir, &name, self.epoch_ns);
                self.insert_image_child(dir, &name, node);
            }
        }
        match &self.node(dir)?.kind {
            Kind::Dir(DirData {
                entries: Some(e), ..
            }) => Ok(e),
            _ => Err(ENOTDIR),
        }
    }

    /// The child `name` of directory `dir`, if there is one.
    pub fn lookup(&mut self, dir: Ino, name: &str) -> SysResult<Option<Ino>> {
        Ok(self.entries(dir)?.get(name).copied())
    }

    pub fn parent_of(&self, dir: Ino) -> Ino {
        match self.nodes.get(&dir).map(|n| &n.kind) {
            Some(Kind::Dir(d)) => d.parent,
            // A directory made on the fly (`/proc/<pid>/fd`).
            _ => self.dyn_names.get(&dir).map_or(ROOT_INO, |(d, _)| *d),
        }
    }

    /// Whether `dir` is `/proc`, whose `<pid>` entries are made on the fly.
    pub fn is_proc_root(&self, dir: Ino) -> bool {
        matches!(
            self.nodes.get(&dir).map(|n| &n.kind),
            Some(Kind::Dir(d)) if d.fixed && d.parent == ROOT_INO && d.name == "proc"
        )
    }

    /// Whether `dir` is the monitor's own (`/proc`, `/sys`): not changeable.
    pub fn is_fixed(&self, dir: Ino) -> bool {
        match self.nodes.get(&dir).map(|n| &n.kind) {
            Some(Kind::Dir(d)) => d.fixed,
            Some(Kind::Proc(_)) => true,
            _ => false,
        }
    }

    /// The node for a made-on-the-fly child (`/proc/self/fd/N`), made once.
    pub fn dyn_node(&mut self, dir: Ino, name: &str, make: impl FnOnce() -> Node) -> Ino {
        let h = mix(dir, name.as_bytes());
        let mut ino = (h >> 1).max(16);
        loop {
            match self.nodes.get(&ino) {
                None => {
                    let mut n = make();
                    n.atime = self.epoch_ns;
                    n.mtime = self.epoch_ns;
                    n.ctime = self.epoch_ns;
                    self.nodes.insert(ino, n);
                    self.dyn_names.insert(ino, (dir, name.to_string()));
                    return ino;
                }
                Some(_) if self.dyn_names.get(&ino) == Some(&(dir, name.to_string())) => {
                    return ino
                }
                Some(_) => ino = ((ino + 1) & (u64::MAX >> 1)).max(16),
            }
        }
    }

    /// The absolute path of a directory, from its parents' names.
    pub fn dir_path(&self, mut dir: Ino) -> String {
        let mut parts = Vec::new();
        for _ in 0..4096 {
            if dir == ROOT_INO {
                break;
            }
            match self.nodes.get(&dir).map(|n| &n.kind) {
                Some(Kind::Dir(d)) => {
                    parts.push(d.name.clone());
                    dir = d.parent;
                }
                _ => break,
            }
        }
        parts.reverse();
        format!("/{}", parts.join("/"))
    }

    /// Whether `anc` is `ino` or one of its ancestors.
    pub fn is_ancestor(&self, anc: Ino, mut ino: Ino) -> bool {
        for _ in 0..4096 {
            if ino == anc {
                return true;
            }
            if ino == ROOT_INO {
                return false;
            }
            ino = self.parent_of(ino);
        }
        false
    }

    /// Removes entry `name` of `dir` without touching the node it named.
    fn detach(&mut self, dir: Ino, name: &str) -> Option<Ino> {
        let child = match self.nodes.get_mut(&dir).map(|n| &mut n.kind) {
            Some(Kind::Dir(d)) => d.entries.as_mut()?.remove(name)?,
            _ => return None,
        };
        if self.nodes.get(&child).is_some_and(|n| n.is_dir()) {
            if let Some(p) = self.nodes.get_mut(&dir) {
                p.nlink = p.nlink.saturating_sub(1);
            }
        }
        Some(child)
    }

    /// Removes entry `name` of `dir`: the node goes when nothing uses it.
    pub fn unlink_entry(&mut self, dir: Ino, name: &str, now: u64) {
        if let Some(child) = self.detach(dir, name) {
            if let Some(n) = self.nodes.get_mut(&child) {
                n.nlink = if n.is_dir() {
                    0
                } else {
                    n.nlink.saturating_sub(1)
                };
                n.ctime = now;
            }
            self.collect(child);
        }
        self.touch_dir(dir, now);
    }

    /// Frees a node that no entry names and no description uses.
    pub fn collect(&mut self, ino: Ino) {
        let gone = self
            .nodes
            .get(&ino)
            .is_some_and(|n| n.nlink == 0 && n.opens == 0);
        if gone {
            if let Some(n) = self.nodes.remove(&ino) {
                if let Kind::File(FileData {
                    bytes: Some(b),
                    dirty: true,
                    ..
                }) = &n.kind
                {
                    self.bytes_held = self.bytes_held.saturating_sub(b.len() as u64);
                }
            }
        }
    }

    pub fn touch_dir(&mut self, dir: Ino, now: u64) {
        if let Some(n) = self.nodes.get_mut(&dir) {
            n.mtime = now;
            n.ctime = now;
        }
    }

    /// Adds a new node as `name` in `dir` (which must not have it).
    pub fn create(
        &mut self,
        dir: Ino,
        name: &str,
        mode: u32,
        kind: Kind,
        now: u64,
    ) -> SysResult<Ino> {
        if self.is_fixed(dir) {
            return Err(EACCES);
        }
        self.entries(dir)?;
        let ino = self.new_ino();
        let size = match &kind {
            Kind::Symlink(t) => t.len() as u64,
            Kind::Dir(_) => 4096,
            _ => 0,
        };
        let mut node = Node::new(mode, size, now, kind);
        if node.is_dir() {
            node.nlink = 2;
        }
        self.link_new(dir, name, ino, node);
        self.touch_dir(dir, now);
        Ok(ino)
    }

    /// Adds a node no directory names (O_TMPFILE); it lives while open.
    pub fn add_orphan(&mut self, mut node: Node) -> Ino {
        node.nlink = 0;
        let ino = self.new_ino();
        self.nodes.insert(ino, node);
        ino
    }

    /// Adds another name for an existing node.
    pub fn link_existing(&mut self, dir: Ino, name: &str, ino: Ino, now: u64) -> SysResult<()> {
        self.entries(dir)?;
        if let Kind::Dir(d) = &mut self.node_mut(dir)?.kind {
            d.entries
                .get_or_insert_with(BTreeMap::new)
                .insert(name.to_string(), ino);
        }
        let n = self.node_mut(ino)?;
        n.nlink += 1;
        n.ctime = now;
        self.touch_dir(dir, now);
        Ok(())
    }

    /// Moves entry `from_name` of `from` to `to_name` of `to`, replacing
    /// what was there (the caller has checked that it may).
    pub fn move_entry(
        &mut self,
        from: Ino,
        from_name: &str,
        to: Ino,
        to_name: &str,
        now: u64,
    ) -> SysResult<()> {
        let ino = self.detach(from, from_name).ok_or(ENOENT)?;
        if self.lookup(to, to_name)?.is_some() {
            self.unlink_entry(to, to_name, now);
        }
        let is_dir = self.node(ino)?.is_dir();
        if let Kind::Dir(d) = &mut self.node_mut(to)?.kind {
            d.entries
                .get_or_insert_with(BTreeMap::new)
                .insert(to_name.to_string(), ino);
        }
        if is_dir {
            self.node_mut(to)?.nlink += 1;
        }
        let n = self.node_mut(ino)?;
        n.ctime = now;
        if let Kind::Dir(d) = &mut n.kind {
            d.parent = to;
            d.name = to_name.to_string();
        }
        self.touch_dir(from, now);
        self.touch_dir(to, now);
        Ok(())
    }

    /// Swaps two entries (RENAME_EXCHANGE).
    pub fn exchange(
        &mut self,
        a: Ino,
        a_name: &str,
        b: Ino,
        b_name: &str,
        now: u64,
    ) -> SysResult<()> {
        let ia = self.lookup(a, a_name)?.ok_or(ENOENT)?;
        let ib = self.lookup(b, b_name)?.ok_or(ENOENT)?;
        for (dir, name, ino, other_dir) in [(a, a_name, ib, b), (b, b_name, ia, a)] {
            if let Kind::Dir(d) = &mut self.node_mut(dir)?.kind {
                d.entries
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name.to_string(), ino);
            }
            let moved_dir = self.node(ino)?.is_dir();
            if let Kind::Dir(d) = &mut self.node_mut(ino)?.kind {
                d.parent = dir;
                d.name = name.to_string();
            }
            if moved_dir && dir != other_dir {
                self.node_mut(dir)?.nlink += 1;
                let o = self.node_mut(other_dir)?;
                o.nlink = o.nlink.saturating_sub(1);
            }
            self.node_mut(ino)?.ctime = now;
            self.touch_dir(dir, now);
        }
        Ok(())
    }

    /// A file's contents, read from the image the first time.
    pub fn contents(&mut self, ino: Ino) -> SysResult<Arc<FileBytes>> {
        let host = match &self.node(ino)?.kind {
            Kind::File(FileData { bytes: Some(b), .. }) => return Ok(b.clone()),
            Kind::File(FileData { host, .. }) => host.clone(),
            _ => return Err(EINVAL),
        };
        let bytes = match host {
            Some(h) if self.outside.contains(&h) => read_host_file(&View::Host, &h)?,
            Some(h) => read_host_file(self.image.view(), &h)?,
            None => FileBytes::default(),
        };
        let arc = Arc::new(bytes);
        let n = self.node_mut(ino)?;
        n.size = arc.len() as u64;
        if let Kind::File(f) = &mut n.kind {
            f.bytes = Some(arc.clone());
        }
        Ok(arc)
    }

    /// Changes a file's contents in place, which will be at most `max_len`
    /// bytes long: `f` gets them, loaded and unshared. The overlay owns
    /// them from then on; ENOSPC when it would hold more than it may.
    pub fn modify<R>(
        &mut self,
        ino: Ino,
        now: u64,
        max_len: u64,
        f: impl FnOnce(&mut Vec<u8>) -> SysResult<R>,
    ) -> SysResult<R> {
        self.contents(ino)?;
        let held = self.bytes_held;
        let n = self.node_mut(ino)?;
        let Kind::File(FileData {
            bytes: Some(b),
            dirty,
            ..
        }) = &mut n.kind
        else {
            return Err(EINVAL);
        };
        // What the overlay holds of this file now.
        let owned = if *dirty { b.len() as u64 } else { 0 };
        if max_len > owned && held.saturating_add(max_len - owned) > MAX_OVERLAY {
            return Err(ENOSPC);
        }
        let v = Arc::make_mut(b).vec_mut();
        let r = f(v)?;
        let after = v.len() as u64;
        *dirty = true;
        n.size = after;
        n.mtime = now;
        n.ctime = now;
        self.bytes_held = (held + after).saturating_sub(owned);
        Ok(r)
    }
}

/// A new empty directory named `name` in `parent`.
pub fn empty_dir(parent: Ino, name: &str) -> Kind {
    Kind::Dir(DirData {
        parent,
        name: name.to_string(),
        host: None,
        entries: Some(BTreeMap::new()),
        fixed: false,
    })
}

fn symlink_node(target: &str, now: u64) -> Node {
    Node::new(
        S_IFLNK | 0o777,
        target.len() as u64,
        now,
        Kind::Symlink(target.to_string()),
    )
}
