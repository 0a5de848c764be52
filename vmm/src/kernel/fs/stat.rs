//! What a file is: stat, lstat, fstat, newfstatat, statx, statfs, access,
//! faccessat, faccessat2, readlink, readlinkat, and the calls that change a
//! node's metadata (chmod, chown, utimensat).
//!
//! Every answer is deterministic: inode numbers come from the tree, times
//! are the run's epoch (or the virtual clock for what the guest changed),
//! the owner is root, sizes are the contents'.

use super::super::errno::*;
use super::super::Kernel;
use super::vfs::{Ino, Kind, Proc, MAX_OVERLAY, S_IFDIR, S_IFIFO, S_IFMT};
use super::*;

/// st_dev of every file of the tree (8:1).
const TREE_DEV: (u32, u32) = (8, 1);
/// st_dev of the console's pipes (0:12, pipefs).
const PIPE_DEV: (u32, u32) = (0, 12);

/// Link targets shorter than this take no block (ext4 keeps them in the inode).
const FAST_LINK: usize = 60;

/// One node's stat, in a form both `struct stat` and `struct statx` take.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct StatInfo {
    pub dev: (u32, u32),
    pub ino: u64,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: (u32, u32),
    pub size: u64,
    pub blksize: u32,
    pub blocks: u64,
    pub atime: u64,
    pub mtime: u64,
    pub ctime: u64,
    pub btime: u64,
}

/// Linux's new_encode_dev.
fn encode_dev((major, minor): (u32, u32)) -> u64 {
    let (major, minor) = (major as u64, minor as u64);
    (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)
}

impl Kernel<'_> {
    pub(crate) fn stat_of(&mut self, r: NodeRef) -> SysResult<StatInfo> {
        let epoch = self.vfs.tree.epoch_ns;
        let ino = match r {
            NodeRef::Console(n) => {
                return Ok(StatInfo {
                    dev: PIPE_DEV,
                    ino: 0x1000 + n as u64,
                    mode: S_IFIFO | 0o600,
                    nlink: 1,
                    blksize: 4096,
                    atime: epoch,
                    mtime: epoch,
                    ctime: epoch,
                    btime: epoch,
                    ..Default::default()
                })
            }
            NodeRef::Node(ino) => ino,
        };
        // The times stores through a shared mapping made due (a write-back
        // the full tree refuses is for read() and msync to report).
        let _ = self.settle_times(ino, false);
        if matches!(self.vfs.tree.node(ino)?.kind, Kind::Dir(_)) {
            // A directory's link count counts its subdirectories.
            self.vfs.tree.entries(ino)?;
        }
        let n = self.vfs.tree.node(ino)?;
        let size = match &n.kind {
            Kind::Proc(Proc::Text(t)) => t.len() as u64,
            Kind::Proc(Proc::File(..) | Proc::Exe(_)) => 0,
            _ => n.size,
        };
        let rdev = match &n.kind {
            Kind::Dev(d) => d.rdev(),
            _ => (0, 0),
        };
        Ok(StatInfo {
            dev: TREE_DEV,
            ino,
            mode: n.mode,
            nlink: n.nlink,
            uid: n.uid,
            gid: n.gid,
            rdev,
            size,
            blksize: 4096,
            // A short link's target lives in its inode (ext4's fast links).
            blocks: match &n.kind {
                Kind::Symlink(t) if t.len() < FAST_LINK => 0,
                _ => size.div_ceil(4096) * 8,
            },
            atime: n.atime,
            mtime: n.mtime,
            ctime: n.ctime,
            btime: n.ctime.min(n.mtime),
        })
    }

    /// What a descriptor is open on.
    pub(crate) fn fd_ref(&mut self, fd: u64) -> SysResult<NodeRef> {
        let (_, d) = self.desc(fd)?;
        Ok(match d.target {
            Target::Node(i) | Target::Gen { ino: i, .. } => NodeRef::Node(i),
            Target::Stdin => NodeRef::Console(0),
            Target::Stdout => NodeRef::Console(1),
            Target::Stderr => NodeRef::Console(2),
            Target::Io { obj, .. } => NodeRef::Console(super::io::console_number(obj)),
        })
    }
}

/// x86-64 `struct stat` (144 bytes).
fn stat_bytes(s: &StatInfo) -> Vec<u8> {
    let mut b = vec![0u8; 144];
    let mut put =
        |off: usize, v: u64, n: usize| b[off..off + n].copy_from_slice(&v.to_le_bytes()[..n]);
    put(0, encode_dev(s.dev), 8);
    put(8, s.ino, 8);
    put(16, s.nlink as u64, 8);
    put(24, s.mode as u64, 4);
    put(28, s.uid as u64, 4);
    put(32, s.gid as u64, 4);
    put(40, encode_dev(s.rdev), 8);
    put(48, s.size, 8);
    put(56, s.blksize as u64, 8);
    put(64, s.blocks, 8);
    for (i, t) in [s.atime, s.mtime, s.ctime].iter().enumerate() {
        put(72 + i * 16, t / 1_000_000_000, 8);
        put(80 + i * 16, t % 1_000_000_000, 8);
    }
    b
}

const STATX_BASIC_STATS: u32 = 0x7ff;
const STATX_BTIME: u32 = 0x800;
const STATX_RESERVED: u64 = 0x8000_0000;

/// `struct statx` (256 bytes).
fn statx_bytes(s: &StatInfo) -> Vec<u8> {
    let mut b = vec![0u8; 256];
    let mut put =
        |off: usize, v: u64, n: usize| b[off..off + n].copy_from_slice(&v.to_le_bytes()[..n]);
    put(0, (STATX_BASIC_STATS | STATX_BTIME) as u64, 4);
    put(4, s.blksize as u64, 4);
    put(16, s.nlink as u64, 4);
    put(20, s.uid as u64, 4);
    put(24, s.gid as u64, 4);
    put(28, s.mode as u64, 2);
    put(32, s.ino, 8);
    put(40, s.size, 8);
    put(48, s.blocks, 8);
    // atime, btime, ctime, mtime: { i64 sec; u32 nsec; i32 pad }.
    for (i, t) in [s.atime, s.btime, s.ctime, s.mtime].iter().enumerate() {
        put(64 + i * 16, t / 1_000_000_000, 8);
        put(72 + i * 16, t % 1_000_000_000, 4);
    }
    put(128, s.rdev.0 as u64, 4);
    put(132, s.rdev.1 as u64, 4);
    put(136, s.dev.0 as u64, 4);
    put(140, s.dev.1 as u64, 4);
    b
}

fn write_stat(k: &mut Kernel, r: NodeRef, buf: u64) -> SysResult<u64> {
    let s = k.stat_of(r)?;
    k.write_user(buf, &stat_bytes(&s))?;
    Ok(0)
}

/// Stat implements Linux syscall stat(2).
pub fn sys_stat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, true)?;
    write_stat(k, NodeRef::Node(ino), a[1])
}

/// Lstat implements Linux syscall lstat(2).
pub fn sys_lstat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, false)?;
    write_stat(k, NodeRef::Node(ino), a[1])
}

/// Fstat implements Linux syscall fstat(2).
pub fn sys_fstat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let r = k.fd_ref(a[0])?;
    write_stat(k, r, a[1])
}

/// Newfstatat implements Linux syscall newfstatat(2).
pub fn sys_newfstatat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let flags = a[3];
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT) != 0 {
        return Err(EINVAL);
    }
    let r = k.lookup_at_flags(a[0], a[1], flags)?;
    write_stat(k, r, a[2])
}

/// Statx implements Linux syscall statx(2).
pub fn sys_statx(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (dirfd, path, flags, mask, buf) = (a[0], a[1], a[2], a[3], a[4]);
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE) != 0
        || flags & AT_STATX_SYNC_TYPE == AT_STATX_SYNC_TYPE
        || mask & STATX_RESERVED != 0
    {
        return Err(EINVAL);
    }
    let r = if path == 0 && flags & AT_EMPTY_PATH != 0 {
        k.fd_ref(dirfd)?
    } else {
        k.lookup_at_flags(dirfd, path, flags)?
    };
    let s = k.stat_of(r)?;
    k.write_user(buf, &statx_bytes(&s))?;
    Ok(0)
}

const TMPFS_MAGIC: u64 = 0x0102_1994;
const PIPEFS_MAGIC: u64 = 0x5049_5045;

/// x86-64 `struct statfs` (120 bytes).
fn write_statfs(k: &mut Kernel, r: NodeRef, buf: u64) -> SysResult<u64> {
    let mut b = vec![0u8; 120];
    let mut put = |i: usize, v: u64| b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    let blocks = MAX_OVERLAY / 4096;
    let free = MAX_OVERLAY.saturating_sub(k.vfs.tree.bytes_held) / 4096;
    let files = 1u64 << 20;
    let used = k.vfs.tree.nodes.len() as u64;
    let magic = match r {
        NodeRef::Console(_) => PIPEFS_MAGIC,
        NodeRef::Node(_) => TMPFS_MAGIC,
    };
    put(0, magic);
    put(1, 4096);
    put(2, blocks);
    put(3, free);
    put(4, free);
    put(5, files);
    put(6, files.saturating_sub(used));
    put(7, 0x0801);
    put(8, 255);
    put(9, 4096);
    put(10, 0x20); // ST_VALID
    k.write_user(buf, &b)?;
    Ok(0)
}

/// Statfs implements Linux syscall statfs(2).
pub fn sys_statfs(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, true)?;
    write_statfs(k, NodeRef::Node(ino), a[1])
}

/// Fstatfs implements Linux syscall fstatfs(2).
pub fn sys_fstatfs(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let r = k.fd_ref(a[0])?;
    write_statfs(k, r, a[1])
}

const X_OK: u64 = 1;

/// The guest is root: reading and writing are allowed; executing needs an
/// execute bit (or a directory).
fn access_check(k: &mut Kernel, r: NodeRef, mode: u64) -> SysResult<u64> {
    if mode & !7 != 0 {
        return Err(EINVAL);
    }
    if let NodeRef::Node(ino) = r {
        let n = k.vfs.tree.node(ino)?;
        if mode & X_OK != 0 && n.mode & S_IFMT != S_IFDIR && n.mode & 0o111 == 0 {
            return Err(EACCES);
        }
    }
    Ok(0)
}

/// Access implements Linux syscall access(2).
pub fn sys_access(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, true)?;
    access_check(k, NodeRef::Node(ino), a[1])
}

/// Faccessat implements Linux syscall faccessat(2).
pub fn sys_faccessat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[1])?;
    let ino = k.lookup_at(a[0], &path, true)?;
    access_check(k, NodeRef::Node(ino), a[2])
}

/// Faccessat2 implements Linux syscall faccessat2(2).
pub fn sys_faccessat2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let flags = a[3];
    if flags & !(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(EINVAL);
    }
    let r = k.lookup_at_flags(a[0], a[1], flags)?;
    access_check(k, r, a[2])
}

/// The target of link `ino` (magic links included), into the guest's buffer.
fn readlink_node(k: &mut Kernel, ino: Ino, buf: u64, size: u64) -> SysResult<u64> {
    if (size as i32) <= 0 {
        return Err(EINVAL);
    }
    if !k.vfs.tree.node(ino)?.is_link() {
        return Err(EINVAL);
    }
    let mut view = ProcessView {
        pid: k.cur_pid(),
        tid: k.cur_tid(),
        procs: &k.procs,
        zombies: &k.zombies,
        descs: &k.vfs.descs,
    };
    let target = vfs::resolve::Links::link_target(&mut view, &k.vfs.tree, ino)?;
    let n = target.len().min(size as i32 as usize);
    k.write_user(buf, &target.as_bytes()[..n])?;
    Ok(n as u64)
}

/// Readlink implements Linux syscall readlink(2).
pub fn sys_readlink(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, false)?;
    readlink_node(k, ino, a[1], a[2])
}

/// Readlinkat implements Linux syscall readlinkat(2).
pub fn sys_readlinkat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[1])?;
    let ino = if path.is_empty() {
        match k.lookup_at_flags(a[0], a[1], AT_EMPTY_PATH)? {
            NodeRef::Node(i) if k.vfs.tree.node(i)?.is_link() => i,
            _ => return Err(ENOENT),
        }
    } else {
        k.lookup_at(a[0], &path, false)?
    };
    readlink_node(k, ino, a[2], a[3])
}

/// Changes a node's metadata (not in `/proc` or `/sys`).
fn change(k: &mut Kernel, r: NodeRef, f: impl FnOnce(&mut vfs::Node, u64)) -> SysResult<u64> {
    let NodeRef::Node(ino) = r else {
        return Ok(0);
    };
    let now = k.fs_now();
    let n = k.vfs.tree.node_mut(ino)?;
    if matches!(n.kind, Kind::Proc(_)) || matches!(&n.kind, Kind::Dir(d) if d.fixed) {
        return Err(EPERM);
    }
    f(n, now);
    Ok(0)
}

fn chmod(k: &mut Kernel, r: NodeRef, mode: u64) -> SysResult<u64> {
    change(k, r, |n, now| {
        n.mode = (n.mode & S_IFMT) | (mode as u32 & 0o7777);
        n.ctime = now;
    })
}

/// Chmod implements Linux syscall chmod(2).
pub fn sys_chmod(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, true)?;
    chmod(k, NodeRef::Node(ino), a[1])
}

/// Fchmod implements Linux syscall fchmod(2).
pub fn sys_fchmod(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let r = k.fd_ref(a[0])?;
    chmod(k, r, a[1])
}

/// Fchmodat implements Linux syscall fchmodat(2).
pub fn sys_fchmodat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[1])?;
    let ino = k.lookup_at(a[0], &path, true)?;
    chmod(k, NodeRef::Node(ino), a[2])
}

fn chown(k: &mut Kernel, r: NodeRef, uid: u64, gid: u64) -> SysResult<u64> {
    let (uid, gid) = (uid as u32, gid as u32);
    change(k, r, |n, now| {
        if uid != u32::MAX {
            n.uid = uid;
        }
        if gid != u32::MAX {
            n.gid = gid;
        }
        n.ctime = now;
    })
}

/// Chown implements Linux syscall chown(2).
pub fn sys_chown(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, true)?;
    chown(k, NodeRef::Node(ino), a[1], a[2])
}

/// Lchown implements Linux syscall lchown(2).
pub fn sys_lchown(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, false)?;
    chown(k, NodeRef::Node(ino), a[1], a[2])
}

/// Fchown implements Linux syscall fchown(2).
pub fn sys_fchown(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let r = k.fd_ref(a[0])?;
    chown(k, r, a[1], a[2])
}

/// Fchownat implements Linux syscall fchownat(2).
pub fn sys_fchownat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[4] & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(EINVAL);
    }
    let r = k.lookup_at_flags(a[0], a[1], a[4])?;
    chown(k, r, a[2], a[3])
}

const UTIME_NOW: i64 = (1 << 30) - 1;
const UTIME_OMIT: i64 = (1 << 30) - 2;

/// utimensat(dirfd, path, times, flags); a NULL path is `dirfd` itself (futimens).
/// Utimensat implements Linux syscall utimensat(2).
pub fn sys_utimensat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (dirfd, path, times, flags) = (a[0], a[1], a[2], a[3]);
    if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(EINVAL);
    }
    let now = k.fs_now();
    let mut set = [Some(now), Some(now)];
    if times != 0 {
        let raw = k.read_user(times, 32)?;
        for (i, slot) in set.iter_mut().enumerate() {
            let sec = i64::from_le_bytes(raw[i * 16..i * 16 + 8].try_into().unwrap());
            let nsec = i64::from_le_bytes(raw[i * 16 + 8..i * 16 + 16].try_into().unwrap());
            *slot = match nsec {
                UTIME_NOW => Some(now),
                UTIME_OMIT => None,
                0..=999_999_999 => {
                    Some((sec.max(0) as u64).saturating_mul(1_000_000_000) + nsec as u64)
                }
                _ => return Err(EINVAL),
            };
        }
    }
    let r = if path == 0 {
        k.fd_ref(dirfd)?
    } else {
        k.lookup_at_flags(dirfd, path, flags)?
    };
    set_times(k, r, set)
}

/// Sets a node's access and modification times (None: leaves it).
fn set_times(k: &mut Kernel, r: NodeRef, set: [Option<u64>; 2]) -> SysResult<u64> {
    change(k, r, |n, now| {
        if let Some(t) = set[0] {
            n.atime = t;
        }
        if let Some(t) = set[1] {
            n.mtime = t;
        }
        n.ctime = now;
    })
}

/// The times of utimes and futimesat: two `timeval`s (NULL: now).
fn timevals(k: &mut Kernel, times: u64) -> SysResult<[Option<u64>; 2]> {
    let now = k.fs_now();
    if times == 0 {
        return Ok([Some(now); 2]);
    }
    let raw = k.read_user(times, 32)?;
    let mut set = [None; 2];
    for (i, slot) in set.iter_mut().enumerate() {
        let sec = i64::from_le_bytes(raw[i * 16..i * 16 + 8].try_into().unwrap());
        let usec = i64::from_le_bytes(raw[i * 16 + 8..i * 16 + 16].try_into().unwrap());
        if !(0..1_000_000).contains(&usec) {
            return Err(EINVAL);
        }
        *slot = Some((sec.max(0) as u64).saturating_mul(1_000_000_000) + usec as u64 * 1000);
    }
    Ok(set)
}

/// Utimes implements Linux syscall utimes(2).
pub fn sys_utimes(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sys_futimesat(k, [AT_FDCWD as u64, a[0], a[1], 0, 0, 0])
}

/// Futimesat implements Linux syscall futimesat(2).
pub fn sys_futimesat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let set = timevals(k, a[2])?;
    let r = k.lookup_at_flags(a[0], a[1], 0)?;
    set_times(k, r, set)
}

/// Utime implements Linux syscall utime(2): a `utimbuf` of whole seconds
/// (NULL: now).
pub fn sys_utime(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let set = if a[1] == 0 {
        [Some(k.fs_now()); 2]
    } else {
        let raw = k.read_user(a[1], 16)?;
        let secs = |i: usize| i64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
        [0, 1].map(|i| Some((secs(i).max(0) as u64).saturating_mul(1_000_000_000)))
    };
    let r = k.lookup_at_flags(AT_FDCWD as u64, a[0], 0)?;
    set_times(k, r, set)
}
