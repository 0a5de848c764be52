//! Files: descriptor tables, open file descriptions, the console (stdin,
//! stdout, stderr), and the file tree (`vfs`: the root image under the
//! run's in-memory overlay).
//!
//! - `vfs`: the tree and path resolution;
//! - `file_ops`: open, read, write, seek, dup, fcntl, ioctl, truncate, mmap;
//! - `stat`: stat, statx, access, readlink, chmod, chown, utimensat, statfs;
//! - `dir`: getdents64, getcwd, chdir, mkdir, unlink, rmdir, rename, link, symlink;
//! - `special`: `/dev/*`, `/proc/self/*`;
//! - `poll`: poll, ppoll, select, pselect6;
//! - `io`: descriptors that are not files (pipes, sockets, eventfds,
//!   timerfds, epoll instances): the objects behind them, and how a thread
//!   blocks on them; `pipe`, `eventfd`, `epoll` and `kernel/net` serve them.
//! - `xattr`: the extended-attribute calls (none are kept).
//! - `shared_pages`: the pages of MAP_SHARED mappings (shared memory, files).
//!
//! A process's descriptor table maps numbers to open file descriptions,
//! which the kernel keeps (so that `dup` shares an offset, as on Linux);
//! descriptions refer to nodes of the tree, which outlive their names while
//! open.
//!
//! Standard input is a pipe holding the bytes the run was given; standard
//! output and error are pipes to the run's output. None is a terminal, so
//! what a program prints does not depend on where `rewind run` writes.

pub mod dir;
pub mod epoll;
pub mod eventfd;
pub mod fifo;
pub mod file_ops;
pub mod io;
pub mod locks;
pub mod pipe;
pub mod poll;
pub mod shared_pages;
pub mod show;
pub mod special;
pub mod splice;
pub mod stat;
pub mod vfs;
pub mod xattr;

pub use locks::{sys_fcntl_locks, sys_flock};

use super::errno::*;
use super::identity::NOFILE_LIMIT;
use super::task::{Pid, Process, Tid, Zombie};
use super::Kernel;
use crate::image::Image;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use vfs::resolve::{Links, Resolved};
use vfs::{Ino, Kind, Proc, Tree, ROOT_INO};

pub const AT_FDCWD: i32 = -100;
pub const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
pub const AT_REMOVEDIR: u64 = 0x200;
pub const AT_EACCESS: u64 = 0x200;
pub const AT_SYMLINK_FOLLOW: u64 = 0x400;
pub const AT_NO_AUTOMOUNT: u64 = 0x800;
pub const AT_EMPTY_PATH: u64 = 0x1000;
pub const AT_STATX_SYNC_TYPE: u64 = 0x6000;

pub const O_ACCMODE: u32 = 3;
pub const O_RDONLY: u32 = 0;
pub const O_WRONLY: u32 = 1;
pub const O_RDWR: u32 = 2;
pub const O_CREAT: u32 = 0o100;
pub const O_EXCL: u32 = 0o200;
pub const O_NOCTTY: u32 = 0o400;
pub const O_TRUNC: u32 = 0o1000;
pub const O_APPEND: u32 = 0o2000;
pub const O_NONBLOCK: u32 = 0o4000;
pub const O_DSYNC: u32 = 0o10000;
pub const O_ASYNC: u32 = 0o20000;
pub const O_DIRECT: u32 = 0o40000;
pub const O_LARGEFILE: u32 = 0o100000;
pub const O_DIRECTORY: u32 = 0o200000;
pub const O_NOFOLLOW: u32 = 0o400000;
pub const O_NOATIME: u32 = 0o1000000;
pub const O_CLOEXEC: u32 = 0o2000000;
pub const O_SYNC: u32 = 0o4010000;
pub const O_PATH: u32 = 0o10000000;
pub const O_TMPFILE: u32 = 0o20000000 | O_DIRECTORY;

/// Flags an open file description keeps (what F_GETFL reports).
const KEPT_FLAGS: u32 =
    O_ACCMODE | O_APPEND | O_NONBLOCK | O_DSYNC | O_ASYNC | O_DIRECT | O_NOATIME | O_SYNC | O_PATH;

/// Longest single read or write the monitor copies at once (Linux's MAX_RW_COUNT).
pub const MAX_IO: usize = 0x7fff_f000;

pub type DescId = u64;

/// What an open file description is open on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Target {
    Stdin,
    Stdout,
    Stderr,
    /// A node of the tree: a file, directory, device or link (O_PATH).
    Node(Ino),
    /// A generated file (`/proc/self/maps`): its contents as of the open.
    Gen {
        ino: Ino,
        #[serde(with = "arc_bytes")]
        data: Arc<Vec<u8>>,
    },
    /// An object of `io::Objects` (a pipe's end when `write` says which).
    Io {
        obj: io::ObjId,
        write: bool,
    },
}

/// An open file description: what `open` makes and `dup` shares.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Description {
    pub target: Target,
    /// Access mode and status flags (F_GETFL).
    pub flags: u32,
    pub offset: u64,
    /// The path it was opened by, resolved (for `/proc/self/fd` and events).
    pub path: String,
    refs: u32,
}

impl Description {
    pub fn readable(&self) -> bool {
        self.flags & O_PATH == 0 && self.flags & O_ACCMODE != O_WRONLY
    }
    pub fn writable(&self) -> bool {
        self.flags & O_PATH == 0 && matches!(self.flags & O_ACCMODE, O_WRONLY | O_RDWR)
    }
    /// The node it is open on, if any.
    pub fn ino(&self) -> Option<Ino> {
        match &self.target {
            Target::Node(i) | Target::Gen { ino: i, .. } => Some(*i),
            _ => None,
        }
    }
}

/// One descriptor: its description and its close-on-exec flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fd {
    pub desc: DescId,
    pub cloexec: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FdTable {
    pub fds: BTreeMap<i32, Fd>,
}

/// The descriptions of standard input, output and error (made by `Vfs::new`).
const STDIN_DESC: DescId = 0;
const STDOUT_DESC: DescId = 1;
const STDERR_DESC: DescId = 2;

impl FdTable {
    /// 0, 1 and 2 open on the console, for the first process.
    pub fn with_console() -> FdTable {
        let fd = |desc| Fd {
            desc,
            cloexec: false,
        };
        FdTable {
            fds: BTreeMap::from([
                (0, fd(STDIN_DESC)),
                (1, fd(STDOUT_DESC)),
                (2, fd(STDERR_DESC)),
            ]),
        }
    }
}

/// The kernel's file state: the tree, every open file description, and
/// standard input's bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Vfs {
    pub tree: Tree,
    pub descs: BTreeMap<DescId, Description>,
    next_desc: DescId,
    #[serde(with = "arc_bytes")]
    pub stdin: Arc<Vec<u8>>,
    /// Pipes, sockets, eventfds, timerfds and epoll instances.
    #[serde(default)]
    pub io: io::Objects,
    /// flock, record and open-file-description locks.
    #[serde(default)]
    pub locks: locks::Locks,
    /// The pages of MAP_SHARED mappings.
    #[serde(default)]
    pub shared: shared_pages::SharedPages,
}

/// Shared bytes, saved as plain bytes.
mod arc_bytes {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(v: &Arc<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        v.as_slice().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<Vec<u8>>, D::Error> {
        Vec::<u8>::deserialize(d).map(Arc::new)
    }
}

impl Vfs {
    pub fn new(image: &Image, stdin: Vec<u8>, epoch_secs: u64, cores: u32) -> Vfs {
        let console = |target, flags, path: &str| Description {
            target,
            flags: flags | O_LARGEFILE,
            offset: 0,
            path: path.to_string(),
            refs: 1,
        };
        Vfs {
            tree: Tree::new(image, epoch_secs, cores),
            descs: BTreeMap::from([
                (STDIN_DESC, console(Target::Stdin, O_RDONLY, "pipe:[0]")),
                (STDOUT_DESC, console(Target::Stdout, O_WRONLY, "pipe:[1]")),
                (STDERR_DESC, console(Target::Stderr, O_WRONLY, "pipe:[2]")),
            ]),
            next_desc: 3,
            stdin: Arc::new(stdin),
            io: io::Objects::default(),
            locks: locks::Locks::default(),
            shared: shared_pages::SharedPages::default(),
        }
    }

    /// A new description with one reference.
    pub fn open_desc(&mut self, target: Target, flags: u32, path: String) -> DescId {
        let id = self.next_desc;
        self.next_desc += 1;
        if let Target::Node(ino) | Target::Gen { ino, .. } = &target {
            if let Some(n) = self.tree.nodes.get_mut(ino) {
                n.opens += 1;
            }
        }
        self.descs.insert(
            id,
            Description {
                target,
                flags: (flags & KEPT_FLAGS) | O_LARGEFILE,
                offset: 0,
                path,
                refs: 1,
            },
        );
        id
    }

    /// Another reference to a description (a new descriptor, or one in
    /// flight in a socket's message).
    pub fn share(&mut self, id: DescId) {
        if let Some(d) = self.descs.get_mut(&id) {
            d.refs += 1;
        }
    }

    /// Drops one reference to a description; the last one closes it, and
    /// a socket that closes drops the descriptions in flight to it too
    /// (a worklist, so a chain of sockets in flight is no deep recursion).
    pub fn release(&mut self, id: DescId) {
        let mut work = vec![id];
        while let Some(id) = work.pop() {
            self.release_one(id);
            work.append(&mut self.io.net.orphans);
        }
    }

    fn release_one(&mut self, id: DescId) {
        let Some(d) = self.descs.get_mut(&id) else {
            return;
        };
        d.refs -= 1;
        if d.refs > 0 {
            return;
        }
        let d = self.descs.remove(&id).unwrap();
        if let Target::Io { obj, write } = d.target {
            // The last reference to a pipe's end or a socket: it closes.
            self.io.release(obj, write, d.readable());
        }
        self.locks.drop_owner(locks::Owner::Desc(id), None);
        if let Some(ino) = d.ino() {
            self.drop_open(ino);
        }
    }

    /// Gives back one open of a node (a description's, a shared mapping's).
    pub fn drop_open(&mut self, ino: Ino) {
        if let Some(n) = self.tree.nodes.get_mut(&ino) {
            n.opens = n.opens.saturating_sub(1);
            // An image file nobody has open and the guest never changed:
            // its bytes are read from the image again when next needed.
            if let (0, Kind::File(f)) = (n.opens, &mut n.kind) {
                if !f.dirty && f.host.is_some() {
                    f.bytes = None;
                }
            }
        }
        self.tree.collect(ino);
    }

    /// A copy of a table for a new process: every description gains a reference.
    pub fn share_table(&mut self, t: &FdTable) -> FdTable {
        for fd in t.fds.values() {
            if let Some(d) = self.descs.get_mut(&fd.desc) {
                d.refs += 1;
            }
        }
        t.clone()
    }

    /// Closes every descriptor of a table (a process ending).
    pub fn close_table(&mut self, t: &mut FdTable) {
        for (_, fd) in std::mem::take(&mut t.fds) {
            self.release(fd.desc);
        }
    }
}

/// Magic links and `/proc`'s directories, as the current thread sees them.
pub(crate) struct ProcessView<'a> {
    pub pid: Pid,
    pub tid: Tid,
    pub procs: &'a BTreeMap<Pid, Process>,
    pub zombies: &'a BTreeMap<Pid, Zombie>,
    pub descs: &'a BTreeMap<DescId, Description>,
}

impl Links for ProcessView<'_> {
    fn link_target(&mut self, tree: &Tree, ino: Ino) -> SysResult<String> {
        let proc_ = |pid: &Pid| self.procs.get(pid).ok_or(ENOENT);
        match &tree.node(ino)?.kind {
            Kind::Symlink(t) => Ok(t.clone()),
            Kind::Proc(Proc::SelfLink) => Ok(self.pid.to_string()),
            Kind::Proc(Proc::ThreadSelfLink) => Ok(format!("{}/task/{}", self.pid, self.tid)),
            Kind::Proc(Proc::Exe(pid)) => Ok(proc_(pid)?.exe.clone()),
            Kind::Proc(Proc::Cwd(pid)) => Ok(proc_(pid)?.cwd.clone()),
            Kind::Proc(Proc::Fd(pid, n)) => {
                let fd = proc_(pid)?.files.fds.get(n).ok_or(ENOENT)?;
                Ok(self.descs.get(&fd.desc).ok_or(ENOENT)?.path.clone())
            }
            _ => Err(EINVAL),
        }
    }

    fn dyn_child(&mut self, tree: &mut Tree, dir: Ino, name: &str) -> SysResult<Option<Ino>> {
        let table = special::Table {
            procs: self.procs,
            zombies: self.zombies,
        };
        special::proc_child(tree, table, dir, name)
    }
}

impl Kernel<'_> {
    /// Notes that the current thread wrote to the regular file behind `fd`.
    pub(crate) fn note_file_write(&mut self, fd: u64) {
        let Ok((_, d)) = self.desc(fd) else { return };
        let Target::Node(ino) = d.target else { return };
        if self
            .vfs
            .tree
            .node(ino)
            .is_ok_and(|n| n.file_type() == vfs::S_IFREG)
        {
            let who = (self.cur_pid(), self.cur_tid());
            self.writers.entry(d.path).or_default().insert(who);
        }
    }

    /// The descriptor `fd` of the current process.
    pub(crate) fn fd(&mut self, fd: u64) -> SysResult<(i32, Fd)> {
        let n = i32::try_from(fd as i64).map_err(|_| EBADF)?;
        let f = self.cur_proc().files.fds.get(&n).copied().ok_or(EBADF)?;
        Ok((n, f))
    }

    /// The description behind descriptor `fd` (a copy) and its id.
    pub(crate) fn desc(&mut self, fd: u64) -> SysResult<(DescId, Description)> {
        let (_, f) = self.fd(fd)?;
        let d = self.vfs.descs.get(&f.desc).cloned().ok_or(EBADF)?;
        Ok((f.desc, d))
    }

    pub(crate) fn desc_mut(&mut self, id: DescId) -> &mut Description {
        self.vfs.descs.get_mut(&id).expect("an open description")
    }

    /// Puts `desc` (whose reference the caller hands over) at the lowest
    /// free descriptor at or above `min`.
    pub(crate) fn install_fd(&mut self, desc: DescId, min: i32, cloexec: bool) -> SysResult<i32> {
        let limit = NOFILE_LIMIT as i32;
        let files = &self.cur_proc().files.fds;
        let mut n = min.max(0);
        for (&k, _) in files.range(n..) {
            if k != n {
                break;
            }
            n += 1;
        }
        if n >= limit {
            self.vfs.release(desc);
            return Err(EMFILE);
        }
        self.cur_proc().files.fds.insert(n, Fd { desc, cloexec });
        Ok(n)
    }

    /// Closes descriptor `n` if it is open.
    pub(crate) fn close_fd(&mut self, n: i32) -> bool {
        match self.cur_proc().files.fds.remove(&n) {
            Some(f) => {
                // A process's record locks on a file go with any of its descriptors.
                if let Some(ino) = self.vfs.descs.get(&f.desc).and_then(Description::ino) {
                    let owner = locks::Owner::Process(self.cur_pid());
                    self.vfs.locks.drop_owner(owner, Some(ino));
                }
                self.vfs.release(f.desc);
                true
            }
            None => false,
        }
    }

    /// Realtime now, for the times of what the guest changes.
    pub(crate) fn fs_now(&self) -> u64 {
        self.clock.realtime()
    }

    /// Resolves `path` relative to `dirfd` (AT_FDCWD: the working directory).
    pub(crate) fn resolve_at(
        &mut self,
        dirfd: u64,
        path: &str,
        follow: bool,
    ) -> SysResult<Resolved> {
        if path.is_empty() {
            return Err(ENOENT);
        }
        let start = if path.starts_with('/') {
            ROOT_INO
        } else {
            self.dir_ino(dirfd)?
        };
        self.resolve_from(start, path, follow)
    }

    pub(crate) fn resolve_from(
        &mut self,
        start: Ino,
        path: &str,
        follow: bool,
    ) -> SysResult<Resolved> {
        let mut view = ProcessView {
            pid: self.cur_pid(),
            tid: self.cur_tid(),
            procs: &self.procs,
            zombies: &self.zombies,
            descs: &self.vfs.descs,
        };
        self.vfs.tree.resolve(&mut view, start, path, follow)
    }

    /// The directory a relative path starts from.
    pub(crate) fn dir_ino(&mut self, dirfd: u64) -> SysResult<Ino> {
        if dirfd as i32 == AT_FDCWD {
            let cwd = self.cur_proc().cwd.clone();
            let r = self.resolve_from(ROOT_INO, &cwd, true)?;
            return r.ino.ok_or(ENOENT);
        }
        let (_, d) = self.desc(dirfd)?;
        match d.ino() {
            Some(ino) if self.vfs.tree.node(ino)?.file_type() == vfs::S_IFDIR => Ok(ino),
            _ => Err(ENOTDIR),
        }
    }

    /// The existing node a path names.
    pub(crate) fn lookup_at(&mut self, dirfd: u64, path: &str, follow: bool) -> SysResult<Ino> {
        let r = self.resolve_at(dirfd, path, follow)?;
        let ino = r.ino.ok_or(ENOENT)?;
        if r.want_dir && self.vfs.tree.node(ino)?.file_type() != vfs::S_IFDIR {
            return Err(ENOTDIR);
        }
        Ok(ino)
    }

    /// The node for an `*at` call: the path's, or with AT_EMPTY_PATH and an
    /// empty path, `dirfd`'s own (the working directory for AT_FDCWD).
    pub(crate) fn lookup_at_flags(
        &mut self,
        dirfd: u64,
        path_va: u64,
        flags: u64,
    ) -> SysResult<NodeRef> {
        let path = self.read_path(path_va)?;
        if path.is_empty() && flags & AT_EMPTY_PATH != 0 {
            if dirfd as i32 == AT_FDCWD {
                return Ok(NodeRef::Node(self.dir_ino(dirfd)?));
            }
            let (_, d) = self.desc(dirfd)?;
            return Ok(match d.target {
                Target::Node(i) | Target::Gen { ino: i, .. } => NodeRef::Node(i),
                Target::Stdin => NodeRef::Console(0),
                Target::Stdout => NodeRef::Console(1),
                Target::Stderr => NodeRef::Console(2),
                Target::Io { obj, .. } => NodeRef::Console(io::console_number(obj)),
            });
        }
        let follow = flags & AT_SYMLINK_NOFOLLOW == 0;
        Ok(NodeRef::Node(self.lookup_at(dirfd, &path, follow)?))
    }

    /// The tree at absolute path `guest` (its last component not followed
    /// when a link), as the file system holds it now; None when there is
    /// nothing there or a component on the way is a link.
    pub fn file_tree(&mut self, guest: &str) -> Option<crate::run::FileTree> {
        let mut ino = vfs::ROOT_INO;
        for name in guest.split('/').filter(|c| !c.is_empty()) {
            ino = self.vfs.tree.lookup(ino, name).ok()??;
        }
        self.tree_at(ino)
    }

    fn tree_at(&mut self, ino: Ino) -> Option<crate::run::FileTree> {
        use crate::run::FileTree;
        let node = self.vfs.tree.node(ino).ok()?;
        match (&node.kind, node.mode) {
            (vfs::Kind::Symlink(t), _) => Some(FileTree::Symlink(t.clone())),
            (vfs::Kind::File(_), mode) => Some(FileTree::File {
                executable: mode & 0o100 != 0,
                bytes: self.file_data(ino).ok()?.to_vec(),
            }),
            (vfs::Kind::Dir(_), _) => {
                let entries: Vec<(String, Ino)> = self
                    .vfs
                    .tree
                    .entries(ino)
                    .ok()?
                    .iter()
                    .map(|(n, i)| (n.clone(), *i))
                    .collect();
                let mut out = std::collections::BTreeMap::new();
                for (name, child) in entries {
                    // What a store path cannot hold (devices, fifos) is left out.
                    if let Some(t) = self.tree_at(child) {
                        out.insert(name, t);
                    }
                }
                Some(FileTree::Dir(out))
            }
            _ => None,
        }
    }

    /// The resolved path of a node in directory `parent` named `name`.
    pub(crate) fn path_of(&self, parent: Ino, name: &str) -> String {
        let dir = self.vfs.tree.dir_path(parent);
        if name.is_empty() {
            dir
        } else if dir == "/" {
            format!("/{name}")
        } else {
            format!("{dir}/{name}")
        }
    }
}

/// What a call that takes a descriptor or a path acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NodeRef {
    Node(Ino),
    /// Standard input, output or error (pipes with no node).
    Console(i32),
}
