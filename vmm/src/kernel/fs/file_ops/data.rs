//! A descriptor's bytes: read, write, their positional and vector forms,
//! copy_file_range and lseek.

use super::IOV_MAX;
use crate::kernel::errno::*;
use crate::kernel::fs::io::Source;
use crate::kernel::fs::special;
use crate::kernel::fs::vfs::{Kind, MAX_FILE};
use crate::kernel::fs::*;
use crate::kernel::uaccess::IO_CHUNK;
use crate::kernel::Kernel;

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
    // Owned bytes or a file's (mapped or not): read alike.
    let data: Arc<dyn AsRef<[u8]> + Send + Sync> = match &d.target {
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
    let data: &[u8] = (*data).as_ref();
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

/// Where the `want` bytes of `data` from `at` are (fewer past its end).
pub(super) fn span_at(data: &[u8], at: u64, want: usize) -> std::ops::Range<usize> {
    let start = (at.min(data.len() as u64)) as usize;
    start..start + want.min(data.len() - start)
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

/// read(2) of a descriptor that is not a stream (a file, a directory, a
/// device): it never blocks. `io::sys_read`, the handler, serves pipes and
/// sockets and hands the rest here.
pub fn read_file(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    read_into(k, a[0], &[(a[1], len_arg(a[2]))], None)
}

/// write(2) of a descriptor that is not a stream; `io::sys_write`, the
/// handler, hands it here.
pub fn write_file(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
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

/// readv(2) of a descriptor that is not a stream; `io::sys_readv`, the
/// handler, hands it here.
pub fn readv_file(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.desc(a[0])?;
    let bufs = iovecs(k, a[1], a[2])?;
    read_into(k, a[0], &bufs, None)
}

/// writev(2) of a descriptor that is not a stream; `io::sys_writev`, the
/// handler, hands it here.
pub fn writev_file(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
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
