//! Descriptors and their data: open, openat, creat, read, write (and their
//! positional and vector forms), lseek, close, dup, fcntl, ioctl, truncate,
//! fsync, and the bytes behind a file mapping.

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::PendingCall;
use super::super::uaccess::IO_CHUNK;
use super::super::Kernel;
use super::io::{self, Source};
use super::special;
use super::vfs::{self, FileData, Ino, Kind, Proc, MAX_FILE, S_IFDIR, S_IFREG};
use super::*;
use std::sync::Arc;

/// Most entries of one iovec array (IOV_MAX).
const IOV_MAX: u64 = 1024;

/// Open implements Linux syscall open(2).
pub fn sys_open(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let path = k.read_path(a[0])?;
    let how = (a[1] as u32, a[2] as u32);
    open(k, AT_FDCWD as u64, &path, how, io::call(NR_OPEN, a))
}

/// Creat implements Linux syscall creat(2).
pub fn sys_creat(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let path = k.read_path(a[0])?;
    let how = (O_CREAT | O_WRONLY | O_TRUNC, a[1] as u32);
    open(k, AT_FDCWD as u64, &path, how, io::call(NR_CREAT, a))
}

/// Openat implements Linux syscall openat(2).
pub fn sys_openat(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let path = k.read_path(a[1])?;
    let how = (a[2] as u32, a[3] as u32);
    open(k, a[0], &path, how, io::call(NR_OPENAT, a))
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
    open(k, a[0], &path, how, io::call(NR_OPENAT2, a))
}

const NR_OPEN: u32 = 2;
const NR_CREAT: u32 = 85;
const NR_OPENAT: u32 = 257;
const NR_OPENAT2: u32 = 437;

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

/// The (address, length) pairs of an iovec array.
pub(crate) fn iovecs(k: &mut Kernel, va: u64, count: u64) -> SysResult<Vec<(u64, usize)>> {
    if count > IOV_MAX {
        return Err(EINVAL);
    }
    let raw = k.read_user(va, count as usize * 16)?;
    let mut total = 0usize;
    let mut out = Vec::new();
    for c in raw.chunks(16) {
        let base = u64::from_le_bytes(c[..8].try_into().unwrap());
        let len = u64::from_le_bytes(c[8..].try_into().unwrap());
        if len > isize::MAX as u64 {
            return Err(EINVAL);
        }
        let len = (len as usize).min(MAX_IO - total);
        total += len;
        out.push((base, len));
    }
    Ok(out)
}

/// Copies `want` bytes into the guest's buffers, [`IO_CHUNK`] at a time,
/// `chunk(k, off, n)` giving the `n` bytes at offset `off` of the read;
/// stops at the first page that cannot be written. How many were copied
/// (EFAULT when none could be).
fn scatter(
    k: &mut Kernel,
    bufs: &[(u64, usize)],
    want: usize,
    mut chunk: impl FnMut(&mut Kernel, usize, usize) -> Vec<u8>,
) -> SysResult<usize> {
    let mut done = 0usize;
    for &(va, len) in bufs {
        let mut off = 0usize;
        while off < len && done < want {
            let n = (len - off).min(want - done).min(IO_CHUNK);
            let bytes = chunk(k, done, n);
            let wrote = match k.write_user_some(va.wrapping_add(off as u64), &bytes) {
                Ok(w) => w,
                Err(e) if done == 0 => return Err(e),
                Err(_) => 0,
            };
            done += wrote;
            if wrote < n {
                return Ok(done);
            }
            off += n;
        }
    }
    Ok(done)
}

/// Hands the guest's buffers to `each`, [`IO_CHUNK`] bytes at a time,
/// copied from user memory; stops at the first page that cannot be read or
/// the first error of `each`. How many bytes `each` took (the error when
/// it took none).
fn gather(
    k: &mut Kernel,
    bufs: &[(u64, usize)],
    mut each: impl FnMut(&mut Kernel, &[u8]) -> SysResult<()>,
) -> SysResult<usize> {
    let mut done = 0usize;
    for &(va, len) in bufs {
        let mut off = 0usize;
        while off < len && done < MAX_IO {
            let n = (len - off).min(MAX_IO - done).min(IO_CHUNK);
            let step = k
                .read_user_some(va.wrapping_add(off as u64), n)
                .and_then(|bytes| each(k, &bytes).map(|()| bytes.len()));
            match step {
                Ok(got) => {
                    done += got;
                    if got < n {
                        return Ok(done);
                    }
                }
                Err(e) if done == 0 => return Err(e),
                Err(_) => return Ok(done),
            }
            off += n;
        }
    }
    Ok(done)
}

/// Reads into the guest's buffers from descriptor `fd`, at `pos` or at
/// (and advancing) the description's offset.
fn read_into(k: &mut Kernel, fd: u64, bufs: &[(u64, usize)], pos: Option<u64>) -> SysResult<u64> {
    let (id, d) = k.desc(fd)?;
    if !d.readable() {
        return Err(EBADF);
    }
    let want: usize = bufs
        .iter()
        .fold(0usize, |t, b| t.saturating_add(b.1))
        .min(MAX_IO);
    let at = pos.unwrap_or(d.offset);
    let data = match &d.target {
        Target::Stdin => {
            if pos.is_some() {
                return Err(ESPIPE);
            }
            if at >= k.vfs.stdin.len() as u64 {
                k.live_input();
            }
            k.vfs.stdin.clone()
        }
        Target::Stdout | Target::Stderr => return Err(EBADF),
        // Pipes and sockets (`io::sys_read`): only a positional read gets here.
        Target::Io { .. } => return Err(ESPIPE),
        Target::Gen { data, .. } => data.clone(),
        Target::Node(ino) => match k.vfs.tree.node(*ino)?.kind.clone() {
            Kind::File(_) => k.file_data(*ino)?,
            Kind::Dir(_) => return Err(EISDIR),
            Kind::Proc(p) if p.is_dir() => return Err(EISDIR),
            Kind::Dev(dev) => {
                // Not seekable: the offset stays.
                let want = want.min(special::DEVICE_READ_MAX);
                return scatter(k, bufs, want, |k, _, n| special::device_read(k, dev, n))
                    .map(|n| n as u64);
            }
            _ => return Err(EINVAL),
        },
    };
    let start = at.min(data.len() as u64) as usize;
    let want = want.min(data.len() - start);
    let done = scatter(k, bufs, want, |_, off, n| {
        data[start + off..start + off + n].to_vec()
    })?;
    if pos.is_none() {
        k.desc_mut(id).offset = at + done as u64;
    }
    Ok(done as u64)
}

fn slice_at(data: &[u8], at: u64, want: usize) -> Vec<u8> {
    let start = (at.min(data.len() as u64)) as usize;
    let end = start + want.min(data.len() - start);
    data[start..end].to_vec()
}

/// Writes the guest's buffers to descriptor `fd`, at `pos` or at (and
/// advancing) the description's offset (its end with O_APPEND), a chunk at
/// a time: a write that faults part way is short, as on Linux.
fn write_from(k: &mut Kernel, fd: u64, bufs: &[(u64, usize)], pos: Option<u64>) -> SysResult<u64> {
    write_source(k, fd, Source::Guest(bufs), pos)
}

/// [`gather`] of a write's source: the guest's buffers, or the monitor's bytes.
fn gather_source(
    k: &mut Kernel,
    src: Source,
    mut each: impl FnMut(&mut Kernel, &[u8]) -> SysResult<()>,
) -> SysResult<usize> {
    match src {
        Source::Guest(bufs) => gather(k, bufs, each),
        Source::Bytes(b) => {
            let b = &b[..src.total()];
            for chunk in b.chunks(IO_CHUNK) {
                each(k, chunk)?;
            }
            Ok(b.len())
        }
    }
}

/// [`write_from`], of any source.
pub(crate) fn write_source(
    k: &mut Kernel,
    fd: u64,
    src: Source,
    pos: Option<u64>,
) -> SysResult<u64> {
    let (id, d) = k.desc(fd)?;
    if !d.writable() {
        return Err(EBADF);
    }
    let total = || src.total();
    match &d.target {
        Target::Stdout | Target::Stderr => {
            if pos.is_some() {
                return Err(ESPIPE);
            }
            let to = if matches!(d.target, Target::Stdout) {
                1
            } else {
                2
            };
            let n = gather_source(k, src, |k, bytes| {
                k.output(to, bytes);
                Ok(())
            })?;
            Ok(n as u64)
        }
        Target::Stdin | Target::Gen { .. } => Err(EBADF),
        Target::Io { .. } => Err(ESPIPE),
        Target::Node(ino) => {
            let ino = *ino;
            match k.vfs.tree.node(ino)?.kind.clone() {
                Kind::File(_) => {}
                // Like Linux's, the devices do not look at the bytes.
                Kind::Dev(dev) => return special::device_write(dev, total()),
                Kind::Dir(_) => return Err(EISDIR),
                _ => return Err(EINVAL),
            }
            let at = if d.flags & O_APPEND != 0 {
                k.file_data(ino)?.len() as u64
            } else {
                pos.unwrap_or(d.offset)
            };
            if at.checked_add(total() as u64).is_none() {
                return Err(EFBIG);
            }
            let mut end = at;
            gather_source(k, src, |k, bytes| {
                let (from, to) = (end, end + bytes.len() as u64);
                if to > MAX_FILE {
                    return Err(EFBIG);
                }
                let now = k.fs_now();
                let max = to.max(k.vfs.tree.node(ino)?.size);
                k.file_modify(ino, now, max, |v| {
                    if (v.len() as u64) < to {
                        v.resize(to as usize, 0);
                    }
                    v[from as usize..to as usize].copy_from_slice(bytes);
                    Ok(())
                })?;
                end = to;
                Ok(())
            })?;
            if pos.is_none() {
                k.desc_mut(id).offset = end;
            }
            Ok(end - at)
        }
    }
}

/// Copy_file_range implements Linux syscall copy_file_range(2).
pub fn sys_copy_file_range(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (fd_in, off_in, fd_out, off_out, len, flags) = (a[0], a[1], a[2], a[3], a[4], a[5]);
    if flags != 0 {
        return Err(EINVAL);
    }
    let (in_id, din) = k.desc(fd_in)?;
    let (out_id, dout) = k.desc(fd_out)?;
    if !din.readable() || !dout.writable() || dout.flags & O_APPEND != 0 {
        return Err(EBADF);
    }
    let (Target::Node(from), Target::Node(to)) = (&din.target, &dout.target) else {
        return Err(EINVAL);
    };
    let (from, to) = (*from, *to);
    for ino in [from, to] {
        match k.vfs.tree.node(ino)?.kind {
            Kind::File(_) => {}
            Kind::Dir(_) => return Err(EISDIR),
            _ => return Err(EINVAL),
        }
    }
    let offset = |k: &mut Kernel, p: u64, own: u64| -> SysResult<u64> {
        if p == 0 {
            return Ok(own);
        }
        u64::try_from(k.read_u64(p)? as i64).map_err(|_| EINVAL)
    };
    let start_in = offset(k, off_in, din.offset)?;
    let start_out = offset(k, off_out, dout.offset)?;
    let data = k.file_data(from)?;
    let at = start_in.min(data.len() as u64) as usize;
    let n = (len as usize).min(data.len() - at).min(MAX_IO);
    let overlap = start_in < start_out.saturating_add(n as u64)
        && start_out < start_in.saturating_add(n as u64);
    if from == to && n > 0 && overlap {
        return Err(EINVAL);
    }
    let wrote = write_source(k, fd_out, Source::Bytes(&data[at..at + n]), Some(start_out))?;
    for (p, id, start) in [(off_in, in_id, start_in), (off_out, out_id, start_out)] {
        if p == 0 {
            k.desc_mut(id).offset = start + wrote;
        } else {
            k.write_user(p, &(start + wrote).to_le_bytes())?;
        }
    }
    Ok(wrote)
}

pub(crate) fn len_arg(n: u64) -> usize {
    (n as usize).min(MAX_IO)
}

fn pos_arg(p: u64) -> SysResult<u64> {
    if (p as i64) < 0 {
        return Err(EINVAL);
    }
    Ok(p)
}

/// Read implements Linux syscall read(2).
pub fn sys_read(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    read_into(k, a[0], &[(a[1], len_arg(a[2]))], None)
}

/// Write implements Linux syscall write(2).
pub fn sys_write(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    write_from(k, a[0], &[(a[1], len_arg(a[2]))], None)
}

/// Pread64 implements Linux syscall pread64(2).
pub fn sys_pread64(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    read_into(k, a[0], &[(a[1], len_arg(a[2]))], Some(pos_arg(a[3])?))
}

/// Pwrite64 implements Linux syscall pwrite64(2).
pub fn sys_pwrite64(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    write_from(k, a[0], &[(a[1], len_arg(a[2]))], Some(pos_arg(a[3])?))
}

/// Readv implements Linux syscall readv(2).
pub fn sys_readv(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.desc(a[0])?;
    let bufs = iovecs(k, a[1], a[2])?;
    read_into(k, a[0], &bufs, None)
}

/// Writev implements Linux syscall writev(2).
pub fn sys_writev(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.desc(a[0])?;
    let bufs = iovecs(k, a[1], a[2])?;
    write_from(k, a[0], &bufs, None)
}

/// Preadv implements Linux syscall preadv(2).
pub fn sys_preadv(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.desc(a[0])?;
    let pos = pos_arg(a[3])?;
    let bufs = iovecs(k, a[1], a[2])?;
    read_into(k, a[0], &bufs, Some(pos))
}

/// Pwritev implements Linux syscall pwritev(2).
pub fn sys_pwritev(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.desc(a[0])?;
    let pos = pos_arg(a[3])?;
    let bufs = iovecs(k, a[1], a[2])?;
    write_from(k, a[0], &bufs, Some(pos))
}

/// preadv2/pwritev2: offset -1 is the current one; the RWF_ flags are hints.
fn pos2(p: u64) -> SysResult<Option<u64>> {
    match p as i64 {
        -1 => Ok(None),
        n if n < 0 => Err(EINVAL),
        n => Ok(Some(n as u64)),
    }
}

/// Preadv2 implements Linux syscall preadv2(2).
pub fn sys_preadv2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.desc(a[0])?;
    let pos = pos2(a[3])?;
    let bufs = iovecs(k, a[1], a[2])?;
    read_into(k, a[0], &bufs, pos)
}

/// Pwritev2 implements Linux syscall pwritev2(2).
pub fn sys_pwritev2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.desc(a[0])?;
    let pos = pos2(a[3])?;
    let bufs = iovecs(k, a[1], a[2])?;
    write_from(k, a[0], &bufs, pos)
}

const SEEK_SET: u64 = 0;
const SEEK_CUR: u64 = 1;
const SEEK_END: u64 = 2;
const SEEK_DATA: u64 = 3;
const SEEK_HOLE: u64 = 4;

/// Lseek implements Linux syscall lseek(2).
pub fn sys_lseek(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (id, d) = k.desc(a[0])?;
    let (off, whence) = (a[1] as i64, a[2]);
    if whence > SEEK_HOLE {
        return Err(EINVAL);
    }
    if d.flags & O_PATH != 0 {
        return Err(EBADF);
    }
    let size = match &d.target {
        Target::Stdin | Target::Stdout | Target::Stderr | Target::Io { .. } => return Err(ESPIPE),
        Target::Gen { data, .. } => data.len() as u64,
        Target::Node(ino) => {
            let n = k.vfs.tree.node(*ino)?;
            match &n.kind {
                Kind::Dev(_) => return Ok(0),
                Kind::Proc(p) if !p.is_dir() => n.size,
                Kind::Dir(_) | Kind::Proc(_) => {
                    if !matches!(whence, SEEK_SET | SEEK_CUR) {
                        return Err(EINVAL);
                    }
                    u64::MAX >> 1
                }
                _ => n.size,
            }
        }
    };
    let cur = d.offset as i64;
    let new = match whence {
        SEEK_SET => Some(off),
        SEEK_CUR => cur.checked_add(off),
        SEEK_END => (size as i64).checked_add(off),
        SEEK_DATA | SEEK_HOLE => {
            if off < 0 || off as u64 >= size {
                return Err(ENXIO);
            }
            Some(if whence == SEEK_DATA {
                off
            } else {
                size as i64
            })
        }
        _ => None,
    };
    let new = new.filter(|n| *n >= 0).ok_or(EINVAL)?;
    k.desc_mut(id).offset = new as u64;
    Ok(new as u64)
}

/// Close implements Linux syscall close(2).
pub fn sys_close(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (n, _) = k.fd(a[0])?;
    k.close_fd(n);
    Ok(0)
}

/// close_range(first, last, flags): CLOSE_RANGE_CLOEXEC marks instead of closing.
/// CloseRange implements Linux syscall close_range(2).
pub fn sys_close_range(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    const CLOSE_RANGE_UNSHARE: u64 = 2;
    const CLOSE_RANGE_CLOEXEC: u64 = 4;
    let (first, last, flags) = (a[0] as u32, a[1] as u32, a[2]);
    if flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 || first > last {
        return Err(EINVAL);
    }
    let first = first.min(i32::MAX as u32) as i32;
    let last = last.min(i32::MAX as u32) as i32;
    let fds: Vec<i32> = k
        .cur_proc()
        .files
        .fds
        .range(first..=last)
        .map(|(n, _)| *n)
        .collect();
    for n in fds {
        if flags & CLOSE_RANGE_CLOEXEC != 0 {
            if let Some(f) = k.cur_proc().files.fds.get_mut(&n) {
                f.cloexec = true;
            }
        } else {
            k.close_fd(n);
        }
    }
    Ok(0)
}

/// Another reference to a description, for a new descriptor.
fn share(k: &mut Kernel, id: DescId) {
    if let Some(d) = k.vfs.descs.get_mut(&id) {
        d.refs += 1;
    }
}

/// Dup implements Linux syscall dup(2).
pub fn sys_dup(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, f) = k.fd(a[0])?;
    share(k, f.desc);
    Ok(k.install_fd(f.desc, 0, false)? as u64)
}

fn dup_to(k: &mut Kernel, old: u64, new: u64, cloexec: bool) -> SysResult<u64> {
    let (_, f) = k.fd(old)?;
    let new = i32::try_from(new as i64).map_err(|_| EBADF)?;
    if new < 0 || new as u64 >= super::super::identity::NOFILE_LIMIT {
        return Err(EBADF);
    }
    share(k, f.desc);
    k.close_fd(new);
    k.cur_proc().files.fds.insert(
        new,
        Fd {
            desc: f.desc,
            cloexec,
        },
    );
    Ok(new as u64)
}

/// Dup2 implements Linux syscall dup2(2).
pub fn sys_dup2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (n, _) = k.fd(a[0])?;
    if n as i64 == a[1] as i64 {
        return Ok(a[1]);
    }
    dup_to(k, a[0], a[1], false)
}

/// Dup3 implements Linux syscall dup3(2).
pub fn sys_dup3(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[2] & !(O_CLOEXEC as u64) != 0 {
        return Err(EINVAL);
    }
    let (n, _) = k.fd(a[0])?;
    if n as i64 == a[1] as i64 {
        return Err(EINVAL);
    }
    dup_to(k, a[0], a[1], a[2] != 0)
}

const F_DUPFD: u64 = 0;
const F_GETFD: u64 = 1;
const F_SETFD: u64 = 2;
const F_GETFL: u64 = 3;
const F_SETFL: u64 = 4;
const F_SETOWN: u64 = 8;
const F_GETOWN: u64 = 9;
const F_SETOWN_EX: u64 = 15;
const F_GETOWN_EX: u64 = 16;
const F_DUPFD_CLOEXEC: u64 = 1030;
const F_SETPIPE_SZ: u64 = 1031;
const F_GETPIPE_SZ: u64 = 1032;
const FD_CLOEXEC: u64 = 1;
/// Flags F_SETFL may change.
const SETFL_FLAGS: u32 = O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME;

/// Fcntl implements Linux syscall fcntl(2) (the locking commands are those of
/// `sys_fcntl_locks`, which hands every other command to this one).
/// Partial (fcntl): F_SETOWN and F_SETOWN_EX are accepted and do nothing, F_GETOWN and F_GETOWN_EX say there is no owner (O_ASYNC never sends SIGIO); leases, F_NOTIFY, F_SETSIG and seals get EINVAL.
pub fn sys_fcntl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (n, f) = k.fd(a[0])?;
    let (cmd, arg) = (a[1], a[2]);
    match cmd {
        F_DUPFD | F_DUPFD_CLOEXEC => {
            let min = i32::try_from(arg as i64).map_err(|_| EINVAL)?;
            if min < 0 || min as u64 >= super::super::identity::NOFILE_LIMIT {
                return Err(EINVAL);
            }
            share(k, f.desc);
            Ok(k.install_fd(f.desc, min, cmd == F_DUPFD_CLOEXEC)? as u64)
        }
        F_GETFD => Ok(if f.cloexec { FD_CLOEXEC } else { 0 }),
        F_SETFD => {
            k.cur_proc().files.fds.get_mut(&n).unwrap().cloexec = arg & FD_CLOEXEC != 0;
            Ok(0)
        }
        F_GETFL => Ok(k.desc_mut(f.desc).flags as u64),
        F_SETFL => {
            let d = k.desc_mut(f.desc);
            d.flags = (d.flags & !SETFL_FLAGS) | (arg as u32 & SETFL_FLAGS);
            Ok(0)
        }
        F_SETOWN | F_SETOWN_EX => Ok(0),
        F_GETOWN => Ok(0),
        // glibc's fcntl(F_GETOWN) asks this; {type, pid} of no owner.
        F_GETOWN_EX => k.write_user(arg, &[0; 8]).map(|()| 0),
        F_GETPIPE_SZ => match k.desc_mut(f.desc).target {
            Target::Stdin | Target::Stdout | Target::Stderr => Ok(65536),
            Target::Io { obj, .. } => super::pipe::size(k, obj),
            _ => Err(EBADF),
        },
        F_SETPIPE_SZ => match k.desc_mut(f.desc).target {
            Target::Io { obj, .. } => super::pipe::set_size(k, obj, arg as u32 as u64),
            _ => Err(EBADF),
        },
        _ => Err(EINVAL),
    }
}

const TCGETS: u64 = 0x5401;
const TIOCGWINSZ: u64 = 0x5413;
const FIONREAD: u64 = 0x541b;
const FIONBIO: u64 = 0x5421;
const FIONCLEX: u64 = 0x5450;
const FIOCLEX: u64 = 0x5451;

/// No descriptor is a terminal (standard output is a pipe to the run's
/// output, whatever the host's is): TCGETS and TIOCGWINSZ are ENOTTY.
/// Ioctl implements Linux syscall ioctl(2).
/// Partial (ioctl): FIOCLEX, FIONCLEX, FIONBIO, FIONREAD; terminals' calls get ENOTTY.
pub fn sys_ioctl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (n, f) = k.fd(a[0])?;
    let d = k.vfs.descs.get(&f.desc).cloned().ok_or(EBADF)?;
    match a[1] {
        TCGETS | TIOCGWINSZ => Err(ENOTTY),
        FIOCLEX | FIONCLEX => {
            k.cur_proc().files.fds.get_mut(&n).unwrap().cloexec = a[1] == FIOCLEX;
            Ok(0)
        }
        FIONBIO => {
            let on = k.read_u32(a[2])? != 0;
            let d = k.desc_mut(f.desc);
            d.flags = if on {
                d.flags | O_NONBLOCK
            } else {
                d.flags & !O_NONBLOCK
            };
            Ok(0)
        }
        FIONREAD => {
            let avail = match &d.target {
                Target::Stdin => k.vfs.stdin.len() as u64 - d.offset.min(k.vfs.stdin.len() as u64),
                Target::Gen { data, .. } => (data.len() as u64).saturating_sub(d.offset),
                Target::Io { obj, .. } => super::io::unread(&k.vfs.io, *obj),
                Target::Node(ino) => match &k.vfs.tree.node(*ino)?.kind {
                    Kind::File(_) => k.vfs.tree.node(*ino)?.size.saturating_sub(d.offset),
                    _ => return Err(ENOTTY),
                },
                _ => return Err(ENOTTY),
            };
            k.write_u32(a[2], avail.min(i32::MAX as u64) as u32)?;
            Ok(0)
        }
        _ => Err(ENOTTY),
    }
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
/// most `len` (the rest of the mapping is zeros). Changes to the mapping
/// never reach the file.
pub fn mmap_contents(k: &mut Kernel, fd: i32, off: u64, len: u64) -> SysResult<Vec<u8>> {
    let (_, d) = k.desc(fd as i64 as u64)?;
    if d.flags & O_PATH != 0 {
        return Err(EBADF);
    }
    if !d.readable() {
        return Err(EACCES);
    }
    let len = len.min(MAX_FILE) as usize;
    match &d.target {
        Target::Gen { data, .. } => Ok(slice_at(data, off, len)),
        Target::Node(ino) => match k.vfs.tree.node(*ino)?.kind.clone() {
            Kind::File(_) => {
                let data = k.file_data(*ino)?;
                Ok(slice_at(&data, off, len))
            }
            Kind::Dev(vfs::Device::Zero) => Ok(Vec::new()),
            _ => Err(ENODEV),
        },
        _ => Err(ENODEV),
    }
}
