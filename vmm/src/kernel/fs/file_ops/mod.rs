//! Descriptors and their data: open, openat, creat, read, write (and their
//! positional and vector forms), lseek, close, dup, fcntl, ioctl, truncate,
//! fsync, and the bytes behind a file mapping. Reads and writes are in
//! `data`, the descriptor table's calls in `descriptors`.

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::PendingCall;
use super::super::Kernel;
use super::io;
use super::special;
use super::vfs::{self, FileData, Ino, Kind, Proc, MAX_FILE, S_IFDIR, S_IFREG};
use super::*;
use crate::kernel::syscalls::nr;
use std::sync::Arc;

pub mod data;
pub mod descriptors;
use data::span_at;

/// Most entries of one iovec array (IOV_MAX).
const IOV_MAX: u64 = 1024;

/// Open implements Linux syscall open(2).
pub fn sys_open(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let path = k.read_path(a[0])?;
    let how = (a[1] as u32, a[2] as u32);
    open(k, AT_FDCWD as u64, &path, how, io::call(nr::open, a))
}

/// Creat implements Linux syscall creat(2).
pub fn sys_creat(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let path = k.read_path(a[0])?;
    let how = (O_CREAT | O_WRONLY | O_TRUNC, a[1] as u32);
    open(k, AT_FDCWD as u64, &path, how, io::call(nr::creat, a))
}

/// Openat implements Linux syscall openat(2).
pub fn sys_openat(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let path = k.read_path(a[1])?;
    let how = (a[2] as u32, a[3] as u32);
    open(k, a[0], &path, how, io::call(nr::openat, a))
}

/// openat2(dirfd, path, how, size): the `resolve` restrictions are not enforced.
/// Openat2 implements Linux syscall openat2(2).
/// Partial (openat2): ignores `resolve`.
pub fn sys_openat2(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    if a[3] < 24 || a[3] > 4096 {
        return Err(EINVAL);
    }
    let how = k.read_user(a[2], 24)?;
    let word = |i: usize| u64::from_le_bytes(how[i * 8..i * 8 + 8].try_into().unwrap());
    let (flags, mode) = (word(0), word(1));
    if flags > u32::MAX as u64 || mode > 0o7777 {
        return Err(EINVAL);
    }
    let path = k.read_path(a[1])?;
    let how = (flags as u32, mode as u32);
    open(k, a[0], &path, how, io::call(nr::openat2, a))
}

/// The open of `path` with `(flags, mode)`, in call `c` (which a FIFO's
/// open waits in).
fn open(k: &mut Kernel, dirfd: u64, path: &str, how: (u32, u32), c: PendingCall) -> SysResult<Sys> {
    let (flags, mode) = how;
    let now = k.fs_now();
    let acc = flags & O_ACCMODE;
    if flags & O_TMPFILE == O_TMPFILE {
        return open_tmpfile(k, dirfd, path, flags, mode).map(Sys::Ret);
    }
    if acc == 3 && flags & O_PATH == 0 {
        return Err(EINVAL);
    }
    let creat = flags & O_CREAT != 0 && flags & O_PATH == 0;
    let excl = creat && flags & O_EXCL != 0;
    let follow = flags & O_NOFOLLOW == 0 && !excl;
    let r = k.resolve_at(dirfd, path, follow)?;
    let mut created = false;
    let ino = match r.ino {
        Some(ino) => {
            if excl {
                return Err(EEXIST);
            }
            ino
        }
        None if creat => {
            if r.want_dir || r.name.is_empty() {
                return Err(EISDIR);
            }
            let umask = k.cur_proc().umask;
            let kind = Kind::File(FileData::empty());
            created = true;
            k.vfs.tree.create(
                r.parent,
                &r.name,
                S_IFREG | (mode & 0o7777 & !umask),
                kind,
                now,
            )?
        }
        None => return Err(ENOENT),
    };
    let node = k.vfs.tree.node(ino)?;
    let ftype = node.file_type();
    if node.is_link() {
        // Only reached with O_NOFOLLOW (or O_CREAT|O_EXCL on a link).
        if flags & O_PATH == 0 {
            return Err(ELOOP);
        }
    } else if r.want_dir && ftype != S_IFDIR {
        return Err(ENOTDIR);
    }
    if flags & O_DIRECTORY != 0 && ftype != S_IFDIR {
        return Err(ENOTDIR);
    }
    if ftype == S_IFDIR && flags & O_PATH == 0 && (acc != O_RDONLY || creat) {
        return Err(EISDIR);
    }
    let path = if ftype == S_IFDIR && matches!(node.kind, Kind::Dir(_)) {
        k.vfs.tree.dir_path(ino)
    } else {
        k.path_of(r.parent, &r.name)
    };
    let target = match node.kind.clone() {
        _ if flags & O_PATH != 0 => Target::Node(ino),
        _ if ftype == vfs::S_IFIFO => return super::fifo::open(k, ino, flags, path, c),
        // A socket's node is connected to, never opened.
        _ if ftype == vfs::S_IFSOCK => return Err(ENXIO),
        Kind::Dev(vfs::Device::Tty) => return Err(ENXIO),
        Kind::Proc(p @ (Proc::File(..) | Proc::Text(_))) => {
            if acc != O_RDONLY {
                return Err(EACCES);
            }
            Target::Gen {
                ino,
                data: Arc::new(special::generate(k, &p)?),
            }
        }
        Kind::File(_) => {
            if flags & O_TRUNC != 0 && acc != O_RDONLY && !created {
                k.file_modify(ino, now, 0, |v| {
                    v.clear();
                    v.shrink_to_fit();
                    Ok(())
                })?;
            } else if acc == O_RDONLY || !created {
                // Read the image's file now: the guest sees it as of its open.
                k.file_data(ino)?;
            }
            Target::Node(ino)
        }
        _ => Target::Node(ino),
    };
    let desc = k.vfs.open_desc(target, flags, path);
    let fd = k.install_fd(desc, 0, flags & O_CLOEXEC != 0)?;
    Ok(Sys::Ret(fd as u64))
}

/// O_TMPFILE: a file no directory names, in the directory `path`.
fn open_tmpfile(k: &mut Kernel, dirfd: u64, path: &str, flags: u32, mode: u32) -> SysResult<u64> {
    if !matches!(flags & O_ACCMODE, O_WRONLY | O_RDWR) {
        return Err(EINVAL);
    }
    let dir = k.lookup_at(dirfd, path, true)?;
    let node = k.vfs.tree.node(dir)?;
    if node.file_type() != S_IFDIR {
        return Err(ENOTDIR);
    }
    if k.vfs.tree.is_fixed(dir) {
        return Err(EOPNOTSUPP);
    }
    let now = k.fs_now();
    let umask = k.cur_proc().umask;
    let node = vfs::Node::new(
        S_IFREG | (mode & 0o7777 & !umask),
        0,
        now,
        Kind::File(FileData::empty()),
    );
    let ino = k.vfs.tree.add_orphan(node);
    let path = format!(
        "{}/#{ino} (deleted)",
        k.vfs.tree.dir_path(dir).trim_end_matches('/')
    );
    let desc = k
        .vfs
        .open_desc(Target::Node(ino), flags & !O_DIRECTORY, path);
    let fd = k.install_fd(desc, 0, flags & O_CLOEXEC != 0)?;
    Ok(fd as u64)
}

/// Resizes a regular file.
fn truncate_node(k: &mut Kernel, ino: Ino, len: u64) -> SysResult<u64> {
    if (len as i64) < 0 {
        return Err(EINVAL);
    }
    match &k.vfs.tree.node(ino)?.kind {
        Kind::File(_) => {}
        Kind::Dir(_) => return Err(EISDIR),
        _ => return Err(EINVAL),
    }
    if len > MAX_FILE {
        return Err(EFBIG);
    }
    let now = k.fs_now();
    k.file_data(ino)?;
    k.file_modify(ino, now, len, |v| {
        v.resize(len as usize, 0);
        if v.capacity() > 2 * v.len() + 4096 {
            v.shrink_to_fit();
        }
        Ok(())
    })?;
    Ok(0)
}

/// Ftruncate implements Linux syscall ftruncate(2).
pub fn sys_ftruncate(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, d) = k.desc(a[0])?;
    if d.flags & O_PATH != 0 {
        return Err(EBADF);
    }
    let Target::Node(ino) = d.target else {
        return Err(EINVAL);
    };
    if !d.writable() {
        return Err(EINVAL);
    }
    truncate_node(k, ino, a[1])
}

/// Truncate implements Linux syscall truncate(2).
pub fn sys_truncate(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, true)?;
    truncate_node(k, ino, a[1])
}

/// fallocate(fd, mode, offset, len): mode 0 (extend) only.
/// Fallocate implements Linux syscall fallocate(2).
pub fn sys_fallocate(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, d) = k.desc(a[0])?;
    let (mode, off, len) = (a[1], a[2] as i64, a[3] as i64);
    if off < 0 || len <= 0 {
        return Err(EINVAL);
    }
    if !d.writable() {
        return Err(EBADF);
    }
    let Target::Node(ino) = d.target else {
        return Err(ESPIPE);
    };
    if mode != 0 {
        return Err(EOPNOTSUPP);
    }
    let end = (off as u64).checked_add(len as u64).ok_or(EFBIG)?;
    let size = match &k.vfs.tree.node(ino)?.kind {
        Kind::File(_) => k.file_data(ino)?.len() as u64,
        Kind::Dir(_) => return Err(EISDIR),
        _ => return Err(ENODEV),
    };
    if end > size {
        truncate_node(k, ino, end)?;
    }
    Ok(0)
}

/// fsync, fdatasync, syncfs: the overlay is memory, always in sync; fsync
/// cleans the file's shared pages as a writeback does (`settle_times`).
/// Fsync implements Linux syscalls fsync(2), fdatasync(2).
pub fn sys_fsync(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, d) = k.desc(a[0])?;
    match d.target {
        Target::Stdin | Target::Stdout | Target::Stderr | Target::Io { .. } => Err(EINVAL),
        // Its shared mappings' pages are written back, clean again.
        Target::Node(ino) => k.settle_times(ino, true).map(|_| 0),
        _ => Ok(0),
    }
}

/// Sync_file_range implements Linux syscall sync_file_range(2): the
/// overlay is memory, so only the arguments are checked.
pub fn sys_sync_file_range(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, d) = k.desc(a[0])?;
    if (a[1] as i64) < 0 || (a[2] as i64) < 0 || a[3] & !7 != 0 {
        return Err(EINVAL);
    }
    match d.target {
        Target::Stdin | Target::Stdout | Target::Stderr | Target::Io { .. } => Err(ESPIPE),
        _ => Ok(0),
    }
}

/// Syncfs implements Linux syscall syncfs(2): the run has one filesystem
/// to write back, the overlay.
pub fn sys_syncfs(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.desc(a[0])?;
    k.sync_shared();
    Ok(0)
}

/// Sync implements Linux syscall sync(2).
pub fn sys_sync(k: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    k.sync_shared();
    Ok(0)
}

/// fadvise64(fd, offset, len, advice): advice only.
/// Fadvise64 implements Linux syscall fadvise64(2).
pub fn sys_fadvise64(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, d) = k.desc(a[0])?;
    if a[3] > 5 {
        return Err(EINVAL);
    }
    match d.target {
        Target::Stdin | Target::Stdout | Target::Stderr | Target::Io { .. } => Err(ESPIPE),
        _ => Ok(0),
    }
}

/// The bytes a private file mapping of `fd` starts with, from `off`, at
/// most `len` (the rest of the mapping is zeros): the file's bytes and the
/// span of them, not a copy (the caller copies them into the mapping's
/// pages). Changes to the mapping never reach the file.
pub fn mmap_contents(
    k: &mut Kernel,
    fd: i32,
    off: u64,
    len: u64,
) -> SysResult<(Arc<vfs::FileBytes>, std::ops::Range<usize>)> {
    let (_, d) = k.desc(fd as i64 as u64)?;
    if d.flags & O_PATH != 0 {
        return Err(EBADF);
    }
    if !d.readable() {
        return Err(EACCES);
    }
    let len = len.min(MAX_FILE) as usize;
    match &d.target {
        Target::Gen { data, .. } => Ok((Arc::new(data.to_vec().into()), span_at(data, off, len))),
        Target::Node(ino) => match k.vfs.tree.node(*ino)?.kind.clone() {
            Kind::File(_) => {
                let data = k.file_data(*ino)?;
                let span = span_at(&data, off, len);
                Ok((data, span))
            }
            Kind::Dev(vfs::Device::Zero) => Ok((Arc::default(), 0..0)),
            _ => Err(ENODEV),
        },
        _ => Err(ENODEV),
    }
}
