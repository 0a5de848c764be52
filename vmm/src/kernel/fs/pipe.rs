//! Pipes: pipe and pipe2. A pipe holds at most its capacity (64 KiB as on
//! Linux, F_GETPIPE_SZ; F_SETPIPE_SZ up to 1 MiB), kept only as the bytes
//! written and not yet read. A read of an empty pipe blocks (EAGAIN with
//! O_NONBLOCK) until a writer writes or the last writer closes (then 0,
//! end of file); a write blocks while the pipe is full, writes of at most
//! PIPE_BUF bytes go in whole (never interleaved with another writer's),
//! longer ones as room comes; a write with no reader left is EPIPE and
//! SIGPIPE. The ends are open file descriptions, shared by `dup` and by a
//! process's children: an end closes when its last reference goes.

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::signal::{self, SigInfo, SIGPIPE};
use super::super::task::PendingCall;
use super::super::Kernel;
use super::io::{self, Obj, ObjId, POLLERR, POLLHUP, READABLE, WRITABLE};
use super::{Target, O_CLOEXEC, O_DIRECT, O_NONBLOCK, O_RDONLY, O_WRONLY};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Writes of at most this many bytes are atomic.
pub const PIPE_BUF: usize = 4096;
/// A new pipe's capacity.
pub const PIPE_DEFAULT: usize = 64 << 10;
/// The most F_SETPIPE_SZ gives (Linux's /proc/sys/fs/pipe-max-size).
pub const PIPE_MAX: usize = 1 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pipe {
    pub buf: VecDeque<u8>,
    pub cap: usize,
    pub readers: u32,
    pub writers: u32,
    /// Set for a FIFO's pipe.
    #[serde(default)]
    pub fifo: Option<Box<super::fifo::Fifo>>,
}

impl Pipe {
    /// What the end `write` is ready for.
    pub fn ready(&self, write: bool) -> u16 {
        if write {
            if self.readers == 0 {
                return WRITABLE | POLLERR;
            }
            if self.cap.saturating_sub(self.buf.len()) >= PIPE_BUF.min(self.cap) {
                WRITABLE
            } else {
                0
            }
        } else {
            let data = if self.buf.is_empty() { 0 } else { READABLE };
            let hup = if self.writers == 0 { POLLHUP } else { 0 };
            data | hup
        }
    }
}

/// Makes a pipe; its two descriptors are written to `fds`.
fn make(k: &mut Kernel, fds: u64, flags: u64) -> SysResult<u64> {
    if flags & !((O_CLOEXEC | O_NONBLOCK | O_DIRECT) as u64) != 0 {
        return Err(EINVAL);
    }
    let flags = flags as u32;
    let obj = k.vfs.io.add(Obj::Pipe(Pipe {
        buf: VecDeque::new(),
        cap: PIPE_DEFAULT,
        readers: 1,
        writers: 1,
        fifo: None,
    }))?;
    let path = format!("pipe:[{}]", 0x2000 + obj);
    let keep = flags & O_NONBLOCK;
    let r = k.vfs.open_desc(
        Target::Io { obj, write: false },
        O_RDONLY | keep,
        path.clone(),
    );
    let w = k
        .vfs
        .open_desc(Target::Io { obj, write: true }, O_WRONLY | keep, path);
    let cloexec = flags & O_CLOEXEC != 0;
    let rfd = match k.install_fd(r, 0, cloexec) {
        Ok(n) => n,
        Err(e) => {
            k.vfs.release(w);
            return Err(e);
        }
    };
    let wfd = match k.install_fd(w, 0, cloexec) {
        Ok(n) => n,
        Err(e) => {
            k.close_fd(rfd);
            return Err(e);
        }
    };
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&rfd.to_le_bytes());
    out[4..].copy_from_slice(&wfd.to_le_bytes());
    if let Err(e) = k.write_user(fds, &out) {
        k.close_fd(rfd);
        k.close_fd(wfd);
        return Err(e);
    }
    Ok(0)
}

/// Pipe implements Linux syscall pipe(2).
pub fn sys_pipe(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    make(k, a[0], 0)
}

/// Pipe2 implements Linux syscall pipe2(2).
pub fn sys_pipe2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    make(k, a[0], a[1])
}

/// A read of the pipe's read end.
pub fn read(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    bufs: &[(u64, usize)],
    c: PendingCall,
) -> SysResult<Sys> {
    let want = io::total_len(bufs);
    super::fifo::settle(k, obj);
    let p = k.vfs.io.pipe(obj)?;
    if want == 0 {
        return Ok(Sys::Ret(0));
    }
    if p.buf.is_empty() {
        if p.writers == 0 {
            return Ok(Sys::Ret(0));
        }
        return k.io_wait(&[obj], nonblock, 0, c);
    }
    let avail = p.buf.len().min(want);
    let n = io::copy_out(
        k,
        bufs,
        avail,
        |k, n| match k.vfs.io.pipe(obj) {
            Ok(p) => p.buf.drain(..n.min(p.buf.len())).collect(),
            Err(_) => Vec::new(),
        },
        |k, back| {
            if let Ok(p) = k.vfs.io.pipe(obj) {
                for b in back.into_iter().rev() {
                    p.buf.push_front(b);
                }
            }
        },
    )?;
    k.vfs.io.touch(obj);
    Ok(Sys::Ret(n as u64))
}

/// A write to the pipe's write end.
pub(crate) fn write(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    src: io::Source,
    c: PendingCall,
) -> SysResult<Sys> {
    let done = k.io_resume(c.nr).done as usize;
    let total = src.total();
    super::fifo::settle(k, obj);
    let p = k.vfs.io.pipe(obj)?;
    if p.readers == 0 {
        let tid = k.cur_tid();
        k.send_signal(
            signal::Target::Thread(tid),
            SigInfo::sent(SIGPIPE, 0, k.cur_pid()),
        );
        return io::partial(done, EPIPE);
    }
    let mut room = p.cap.saturating_sub(p.buf.len());
    // Up to PIPE_BUF bytes go in whole or wait.
    if total <= PIPE_BUF && room < total.saturating_sub(done) {
        room = 0;
    }
    let on = io::Blocking {
        watch: &[obj],
        nonblock,
        call: c,
        deadline: None,
    };
    k.io_write_some(on, src, done, room, |k, bytes| {
        k.vfs.io.pipe(obj)?.buf.extend(bytes);
        k.vfs.io.touch(obj);
        Ok(())
    })
}

/// F_GETPIPE_SZ.
pub fn size(k: &mut Kernel, obj: ObjId) -> SysResult<u64> {
    Ok(k.vfs.io.pipe(obj)?.cap as u64)
}

/// F_SETPIPE_SZ: a power of two of pages, at least one, at most [`PIPE_MAX`].
pub fn set_size(k: &mut Kernel, obj: ObjId, want: u64) -> SysResult<u64> {
    if want > PIPE_MAX as u64 {
        return Err(EPERM);
    }
    let size = (want as usize).max(4096).next_power_of_two();
    let p = k.vfs.io.pipe(obj)?;
    if p.buf.len() > size {
        return Err(EBUSY);
    }
    p.cap = size;
    k.vfs.io.touch(obj);
    Ok(size as u64)
}
