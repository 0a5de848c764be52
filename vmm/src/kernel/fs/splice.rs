//! Bytes moved between descriptors by the monitor: `sendfile` (a regular
//! file's bytes to a file, a pipe, a socket or the run's output, a
//! socket's into a pipe), `splice` (a pipe's bytes to anything of those, or a file's or
//! a socket's into a pipe) and `tee`
//! (a pipe's bytes into another pipe, left in the first). Writes go through
//! the same paths as `write` (`io::Source::Bytes`), so a pipe's atomic
//! writes, a socket's buffer and SIGPIPE hold alike. `splice` and `tee`
//! move what the pipe holds and what fits now, as Linux's may: each waits
//! only while nothing can move (for bytes in its input pipe, or for room),
//! unless SPLICE_F_NONBLOCK, and a pipe's or a socket's bytes leave it
//! only once written.

use super::super::errno::*;
use super::super::net;
use super::super::sched::Sys;
use super::super::task::PendingCall;
use super::super::Kernel;
use super::io::{self, call, Obj, ObjId, Source};
use super::vfs::Kind;
use super::{Description, Target, MAX_IO, O_APPEND, O_NONBLOCK};
use crate::kernel::syscalls::nr;

/// SPLICE_F_MOVE, SPLICE_F_NONBLOCK, SPLICE_F_MORE, SPLICE_F_GIFT: all
/// accepted (the monitor copies; moving pages is no business of a guest's).
const SPLICE_FLAGS: u64 = 0xf;
const SPLICE_F_NONBLOCK: u64 = 2;

/// The pipe behind description `d`, if it is one's end `write`.
fn pipe_end(k: &Kernel, d: &Description, write: bool) -> Option<ObjId> {
    match d.target {
        Target::Io { obj, write: w }
            if (w == write || d.readable() && d.writable())
                && matches!(k.vfs.io.objs.get(&obj), Some(Obj::Pipe(_))) =>
        {
            Some(obj)
        }
        _ => None,
    }
}

/// Writes `src` to descriptor `fd` (description `d`): a pipe's or a
/// socket's write, which waits for room unless `nonblock`, or a file's or
/// the run's output's (at `pos`, else at its offset).
fn put(
    k: &mut Kernel,
    fd: u64,
    d: &Description,
    src: Source,
    pos: Option<u64>,
    nonblock: bool,
    c: PendingCall,
) -> SysResult<Sys> {
    match d.target {
        Target::Io { obj, write } => {
            if pos.is_some() {
                return Err(ESPIPE);
            }
            match k.vfs.io.objs.get(&obj) {
                Some(Obj::Pipe(_)) if write => super::pipe::write(k, obj, nonblock, src, c),
                Some(Obj::Socket(_)) => {
                    let ctl = net::cmsg::Control::NONE;
                    net::calls::transfer::send(k, obj, nonblock, 0, src, None, ctl, c)
                }
                _ => Err(EINVAL),
            }
        }
        _ => super::file_ops::data::write_source(k, fd, src, pos).map(Sys::Ret),
    }
}

/// What a move that wrote nothing now does: waits on `objs` for a change,
/// until `deadline` (a socket's SO_SNDTIMEO) if any (unless `nonblock`:
/// EAGAIN); what wrote something returns.
fn moved(
    k: &mut Kernel,
    r: SysResult<Sys>,
    objs: &[ObjId],
    nonblock: bool,
    deadline: Option<u64>,
    c: PendingCall,
) -> SysResult<Sys> {
    match r {
        Err(EAGAIN) => {
            let mut watch = Vec::new();
            for &o in objs {
                io::watch_set(&k.vfs.io, o, &mut watch);
            }
            let on = io::Blocking {
                watch: &watch,
                nonblock,
                call: c,
                deadline,
            };
            k.io_wait_on(on, 0)
        }
        r => r,
    }
}

/// The socket behind description `d`, if it is one.
fn socket_of(k: &mut Kernel, d: &Description) -> Option<ObjId> {
    match d.target {
        Target::Io { obj, .. } if k.vfs.io.socket(obj).is_some() => Some(obj),
        _ => None,
    }
}

/// A file offset argument: the one at `p`, or None for a null pointer.
fn offset_arg(k: &mut Kernel, p: u64) -> SysResult<Option<u64>> {
    if p == 0 {
        return Ok(None);
    }
    u64::try_from(k.read_u64(p)? as i64)
        .map(Some)
        .map_err(|_| EINVAL)
}

/// At most `max` bytes of regular file `d` from `at`.
fn file_bytes(k: &mut Kernel, d: &Description, at: u64, max: u64) -> SysResult<Vec<u8>> {
    let Target::Node(ino) = d.target else {
        return Err(EINVAL);
    };
    match k.vfs.tree.node(ino)?.kind {
        Kind::File(_) => {}
        Kind::Dir(_) => return Err(EISDIR),
        _ => return Err(EINVAL),
    }
    let data = k.file_data(ino)?;
    let from = at.min(data.len() as u64) as usize;
    let n = (max as usize).min(data.len() - from).min(MAX_IO);
    Ok(data[from..from + n].to_vec())
}

/// Sendfile implements Linux syscall sendfile(2).
/// Partial (sendfile): from a regular file, or from a socket into a pipe (a pipe to read from, or a socket to anything else, is EINVAL, as on Linux); /proc's generated files to read from are EINVAL.
pub fn sys_sendfile(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (out_fd, in_fd, offp, count) = (a[0], a[1], a[2], a[3]);
    let (in_id, d) = k.desc(in_fd)?;
    if !d.readable() {
        return Err(EBADF);
    }
    let (_, out) = k.desc(out_fd)?;
    if !out.writable() {
        return Err(EBADF);
    }
    if out.flags & O_APPEND != 0 {
        return Err(EINVAL);
    }
    let nonblock = out.flags & O_NONBLOCK != 0;
    if let Some(sin) = socket_of(k, &d) {
        // A socket's bytes go into a pipe as splice's do; Linux's sendfile
        // to anything else reads only what can seek (EINVAL).
        if offp != 0 {
            return Err(ESPIPE);
        }
        let Some(pout) = pipe_end(k, &out, true) else {
            return Err(EINVAL);
        };
        let c = call(nr::sendfile, a);
        return socket_to_pipe(k, sin, &d, 0, pout, count, nonblock, c);
    }
    let start = offset_arg(k, offp)?.unwrap_or(d.offset);
    let bytes = file_bytes(k, &d, start, count)?;
    let r = put(
        k,
        out_fd,
        &out,
        Source::Bytes(&bytes),
        None,
        nonblock,
        call(nr::sendfile, a),
    )?;
    let Sys::Ret(sent) = r else {
        return Ok(r);
    };
    let end = start + sent;
    if offp == 0 {
        k.desc_mut(in_id).offset = end;
    } else {
        k.write_user(offp, &end.to_le_bytes())?;
    }
    Ok(Sys::Ret(sent))
}

/// The bytes pipe `obj` holds, at most `max`; None when it is empty: then
/// the call ends (0 at end of file, EAGAIN) or waits.
fn peek(k: &mut Kernel, obj: ObjId, max: u64) -> SysResult<Option<Vec<u8>>> {
    super::fifo::settle(k, obj);
    let p = k.vfs.io.pipe(obj)?;
    if p.buf.is_empty() {
        return if p.writers == 0 {
            Ok(Some(Vec::new()))
        } else {
            Ok(None)
        };
    }
    let n = (max as usize).min(p.buf.len()).min(MAX_IO);
    Ok(Some(p.buf.iter().take(n).copied().collect()))
}

/// Splice implements Linux syscall splice(2).
/// Partial (splice): between a pipe and a pipe, a file, a socket or the run's output, and from a socket into a pipe; devices and /proc's files are EINVAL.
pub fn sys_splice(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (fd_in, off_in, fd_out, off_out, len, flags) = (a[0], a[1], a[2], a[3], a[4], a[5]);
    if flags & !SPLICE_FLAGS != 0 {
        return Err(EINVAL);
    }
    let c = call(nr::splice, a);
    let nonblock = flags & SPLICE_F_NONBLOCK != 0;
    let (in_id, din) = k.desc(fd_in)?;
    let (_, dout) = k.desc(fd_out)?;
    if !din.readable() || !dout.writable() {
        return Err(EBADF);
    }
    let (pin, pout) = (pipe_end(k, &din, false), pipe_end(k, &dout, true));
    if len == 0 {
        return Ok(Sys::Ret(0));
    }
    if let Some(pin) = pin {
        if off_in != 0 || (pout.is_some() && off_out != 0) {
            return Err(ESPIPE);
        }
        if pout == Some(pin) {
            return Err(EINVAL);
        }
        if dout.flags & O_APPEND != 0 && pout.is_none() {
            return Err(EINVAL);
        }
        let Some(bytes) = peek(k, pin, len)? else {
            return k.io_wait(&[pin], nonblock, 0, c);
        };
        if bytes.is_empty() {
            return Ok(Sys::Ret(0));
        }
        let pos = offset_arg(k, off_out)?;
        // Into a socket, the wait for room ends at its SO_SNDTIMEO.
        let kept = k.io_resume(c.nr).deadline;
        let r = put(k, fd_out, &dout, Source::Bytes(&bytes), pos, true, c);
        let out_obj = io::io_of(&dout).map(|(o, _)| o);
        let deadline = out_obj.and_then(|o| net::calls::transfer::send_deadline(k, o, kept));
        let objs: Vec<ObjId> = out_obj.into_iter().collect();
        let r = moved(k, r, &objs, nonblock, deadline, c)?;
        let Sys::Ret(n) = r else {
            return Ok(r);
        };
        k.vfs.io.pipe(pin)?.buf.drain(..n as usize);
        k.vfs.io.touch(pin);
        if let Some(p) = pos {
            k.write_user(off_out, &(p + n).to_le_bytes())?;
        }
        return Ok(Sys::Ret(n));
    }
    let Some(pout) = pout else {
        return Err(EINVAL);
    };
    if off_out != 0 {
        return Err(ESPIPE);
    }
    if let Some(sin) = socket_of(k, &din) {
        return socket_to_pipe(k, sin, &din, off_in, pout, len, nonblock, c);
    }
    let pos = offset_arg(k, off_in)?;
    let start = pos.unwrap_or(din.offset);
    let bytes = file_bytes(k, &din, start, len)?;
    if bytes.is_empty() {
        return Ok(Sys::Ret(0));
    }
    let r = super::pipe::write(k, pout, true, Source::Bytes(&bytes), c);
    let r = moved(k, r, &[pout], nonblock, None, c)?;
    let Sys::Ret(n) = r else {
        return Ok(r);
    };
    match pos {
        Some(p) => k.write_user(off_in, &(p + n).to_le_bytes())?,
        None => k.desc_mut(in_id).offset = start + n,
    }
    Ok(Sys::Ret(n))
}

/// splice from socket `sin` (description `din`) into pipe `pout`: at most
/// what the pipe has room for, once it has some (Linux's wait_for_space),
/// then what the socket holds, waiting for bytes unless either side's
/// call is non-blocking.
#[allow(clippy::too_many_arguments)]
fn socket_to_pipe(
    k: &mut Kernel,
    sin: ObjId,
    din: &Description,
    off_in: u64,
    pout: ObjId,
    len: u64,
    nonblock: bool,
    c: PendingCall,
) -> SysResult<Sys> {
    if off_in != 0 {
        // A socket cannot pread.
        return Err(EINVAL);
    }
    let p = k.vfs.io.pipe(pout)?;
    let room = p.cap.saturating_sub(p.buf.len());
    if room == 0 && p.readers > 0 {
        return k.io_wait(&[pout], nonblock, 0, c);
    }
    let max = (len as usize).min(room.max(1)).min(MAX_IO);
    let in_nonblock = nonblock || din.flags & O_NONBLOCK != 0;
    net::calls::transfer::splice_out(k, sin, in_nonblock, max, c, |k, bytes| {
        super::pipe::write(k, pout, true, Source::Bytes(bytes), c)
    })
}

/// Tee implements Linux syscall tee(2).
pub fn sys_tee(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (fd_in, fd_out, len, flags) = (a[0], a[1], a[2], a[3]);
    if flags & !SPLICE_FLAGS != 0 {
        return Err(EINVAL);
    }
    let c = call(nr::tee, a);
    let nonblock = flags & SPLICE_F_NONBLOCK != 0;
    let (_, din) = k.desc(fd_in)?;
    let (_, dout) = k.desc(fd_out)?;
    if !din.readable() || !dout.writable() {
        return Err(EBADF);
    }
    let (Some(pin), Some(pout)) = (pipe_end(k, &din, false), pipe_end(k, &dout, true)) else {
        return Err(EINVAL);
    };
    if pin == pout {
        return Err(EINVAL);
    }
    if len == 0 {
        return Ok(Sys::Ret(0));
    }
    let Some(bytes) = peek(k, pin, len)? else {
        return k.io_wait(&[pin], nonblock, 0, c);
    };
    if bytes.is_empty() {
        return Ok(Sys::Ret(0));
    }
    let r = super::pipe::write(k, pout, true, Source::Bytes(&bytes), c);
    moved(k, r, &[pout], nonblock, None, c)
}
