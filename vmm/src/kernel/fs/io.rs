//! Descriptors that are not files: pipes (`pipe`), sockets (`kernel/net`),
//! eventfds and timerfds (`eventfd`) and epoll instances (`epoll`). Each is
//! an object of [`Objects`], which the kernel's file state keeps (so
//! keyframes save it); an open file description refers to one with
//! `Target::Io`, and the last reference to it going closes it
//! ([`Objects::release`]: a pipe's end, a socket).
//!
//! **Blocking.** A call that cannot go on (a read of an empty pipe, an
//! accept with nothing queued, a poll with nothing ready) blocks its thread
//! in `Wait::Io`, watching the objects whose change could let it go on,
//! each with its change count as of then. Whatever changes an object bumps
//! its count ([`Objects::touch`]); before the scheduler picks the next
//! thread, every thread watching an object that changed since it looked is
//! restarted: it runs its call again from the start (`rip -= 2`), which
//! either completes or blocks again, as Linux's wait loops do. The
//! restarted call is the one recorded, at its own step. What a call had
//! done before it blocked (bytes of a long write, a poll's deadline) is kept
//! for it ([`Resume`]). A timeout restarts the call too, which then sees its
//! deadline passed. So blocking is deterministic, a thread is never woken
//! by its own change, and when every thread waits on descriptors no one
//! will change, the run is `deadlocked`, naming the calls.

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::{PendingCall, ThreadState, Tid, Wait};
use super::super::Kernel;
use super::epoll::Epoll;
use super::eventfd::{EventFd, TimerFd};
use super::pipe::Pipe;
use super::{Description, Target};
use crate::kernel::net::Socket;
use crate::kernel::signal::signalfd::SignalFd;
use crate::kernel::syscalls::nr;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

pub type ObjId = u64;

/// poll(2)'s bits, which epoll shares.
pub const POLLIN: u16 = 0x1;
pub const POLLPRI: u16 = 0x2;
pub const POLLOUT: u16 = 0x4;
pub const POLLERR: u16 = 0x8;
pub const POLLHUP: u16 = 0x10;
pub const POLLNVAL: u16 = 0x20;
pub const POLLRDNORM: u16 = 0x40;
pub const POLLWRNORM: u16 = 0x100;
pub const POLLRDHUP: u16 = 0x2000;

/// Readable, as poll says it.
pub const READABLE: u16 = POLLIN | POLLRDNORM;
/// Writable, as poll says it.
pub const WRITABLE: u16 = POLLOUT | POLLWRNORM;

/// Most objects alive at once in a run (each needs a descriptor, which
/// RLIMIT_NOFILE bounds per process; this bounds them across processes).
pub const MAX_OBJECTS: usize = 65_536;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Obj {
    Pipe(Pipe),
    Socket(Box<Socket>),
    EventFd(EventFd),
    TimerFd(TimerFd),
    Epoll(Epoll),
    SignalFd(SignalFd),
}

/// What a restarted call had done before it blocked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resume {
    /// The call it belongs to.
    pub nr: u32,
    /// Bytes already moved (a long write to a pipe or socket).
    pub done: u64,
    /// The absolute virtual deadline of a timed wait.
    pub deadline: Option<u64>,
}

impl Resume {
    /// The bytes the call moved before it waited, which it returns when a
    /// signal ends the wait. A FIFO's waiting open marks itself counted in
    /// `done` (`fifo::COUNTED`), and moved nothing.
    pub fn moved(&self) -> Option<u64> {
        (self.done > 0 && !super::fifo::OPENS.contains(&self.nr)).then_some(self.done)
    }
}

/// How a call that may block waits: on which objects, whether its
/// description is non-blocking, the call that is run again, and until when
/// it may wait (a socket's SO_RCVTIMEO or SO_SNDTIMEO; None: for ever).
#[derive(Clone, Copy)]
pub(crate) struct Blocking<'a> {
    pub watch: &'a [ObjId],
    pub nonblock: bool,
    pub call: PendingCall,
    pub deadline: Option<u64>,
}

/// What a blocked thread watches.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Watch {
    /// Each object with its change count when the thread looked.
    objs: Vec<(ObjId, u64)>,
    resume: Resume,
    /// Arrival order: woken threads queue in it.
    seq: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Objects {
    next: ObjId,
    pub objs: BTreeMap<ObjId, Obj>,
    /// Change counts; an object that is gone counts as changed.
    gens: BTreeMap<ObjId, u64>,
    changed: BTreeSet<ObjId>,
    waits: BTreeMap<Tid, Watch>,
    watchers: BTreeMap<ObjId, BTreeSet<Tid>>,
    seq: u64,
    /// Calls a change restarted: what each had done.
    resumes: BTreeMap<Tid, Resume>,
    /// Armed timerfds: (next expiry, object).
    pub(crate) timers: BTreeSet<(u64, ObjId)>,
    /// Addresses, ports and listeners of the run's sockets.
    pub net: crate::kernel::net::Names,
    /// The signalfds: a queued signal touches them all.
    pub(crate) signalfds: BTreeSet<ObjId>,
    /// The signals pending for the thread in the call being served, which
    /// is what signalfds are ready by (set as each call starts).
    #[serde(skip)]
    pub(crate) caller_signals: u64,
    /// The pipe of each FIFO node that has one.
    #[serde(default)]
    pub fifos: BTreeMap<super::vfs::Ino, ObjId>,
}

/// The number `fstat` shows a non-file descriptor's inode as (past the console's).
pub fn console_number(obj: ObjId) -> i32 {
    3 + (obj % (i32::MAX as u64 - 3)) as i32
}

impl Objects {
    /// Adds an object; EMFILE past [`MAX_OBJECTS`].
    pub fn add(&mut self, o: Obj) -> SysResult<ObjId> {
        if self.objs.len() >= MAX_OBJECTS {
            return Err(ENFILE);
        }
        let id = self.next;
        self.next += 1;
        if matches!(o, Obj::SignalFd(_)) {
            self.signalfds.insert(id);
        }
        self.objs.insert(id, o);
        self.gens.insert(id, 0);
        Ok(id)
    }

    /// Notes that `id` may have become ready (or is gone).
    pub fn touch(&mut self, id: ObjId) {
        if let Some(g) = self.gens.get_mut(&id) {
            *g += 1;
        }
        self.changed.insert(id);
    }

    /// The change count of `id` (an object that is gone counts as changed).
    pub fn gen_of(&self, id: ObjId) -> u64 {
        self.gen(id)
    }

    fn gen(&self, id: ObjId) -> u64 {
        self.gens.get(&id).copied().unwrap_or(u64::MAX)
    }

    pub fn pipe(&mut self, id: ObjId) -> SysResult<&mut Pipe> {
        match self.objs.get_mut(&id) {
            Some(Obj::Pipe(p)) => Ok(p),
            _ => Err(EBADF),
        }
    }

    pub fn socket(&mut self, id: ObjId) -> Option<&mut Socket> {
        match self.objs.get_mut(&id) {
            Some(Obj::Socket(s)) => Some(s),
            _ => None,
        }
    }

    /// Removes an object; its watchers see it changed.
    pub fn remove(&mut self, id: ObjId) -> Option<Obj> {
        let o = self.objs.remove(&id);
        self.gens.remove(&id);
        self.signalfds.remove(&id);
        self.changed.insert(id);
        o
    }

    /// The call thread `tid` is about to run again after a change, if any.
    pub fn restarting(&self, tid: Tid) -> Option<u32> {
        self.resumes.get(&tid).map(|r| r.nr)
    }

    /// Whether thread `tid` waits on `id`.
    pub fn watches(&self, tid: Tid, id: ObjId) -> bool {
        self.waits
            .get(&tid)
            .is_some_and(|w| w.objs.iter().any(|&(o, _)| o == id))
    }

    /// The last reference to a description on `id` went: a pipe's ends
    /// (`write`, and `read` too for a FIFO open for both) or the object close.
    pub fn release(&mut self, id: ObjId, write: bool, read: bool) {
        match self.objs.get_mut(&id) {
            Some(Obj::Pipe(p)) => {
                if write {
                    p.writers = p.writers.saturating_sub(1);
                }
                if read {
                    p.readers = p.readers.saturating_sub(1);
                }
                if p.readers == 0 && p.writers == 0 {
                    if let Some(f) = &p.fifo {
                        self.fifos.remove(&f.ino);
                    }
                    self.remove(id);
                } else {
                    self.touch(id);
                }
            }
            Some(Obj::Socket(_)) => crate::kernel::net::close(self, id),
            Some(_) => {
                self.remove(id);
            }
            None => {}
        }
        // Epoll instances forget what they watched through it.
        for o in self.objs.values_mut() {
            if let Obj::Epoll(e) = o {
                e.forget(id, write);
            }
        }
    }
}

/// The object a description is open on, and which end.
pub fn io_of(d: &Description) -> Option<(ObjId, bool)> {
    match d.target {
        Target::Io { obj, write } => Some((obj, write)),
        _ => None,
    }
}

impl Kernel<'_> {
    /// Blocks the current thread in `call` until one of `objs` changes or
    /// `resume.deadline` passes; the call is then run again.
    pub(crate) fn io_block(&mut self, objs: &[ObjId], resume: Resume, call: PendingCall) -> Sys {
        let tid = self.cur_tid();
        self.io_unwatch(tid);
        if self.has_deliverable(tid) {
            // A signal its own mask let in (ppoll's): Linux's wait loops
            // look for one before they sleep.
            return self.interrupted_now(call, Wait::Io, Some(resume));
        }
        let io = &mut self.vfs.io;
        io.seq += 1;
        let mut seen = Vec::with_capacity(objs.len());
        for &o in objs {
            seen.push((o, io.gen(o)));
            io.watchers.entry(o).or_default().insert(tid);
        }
        io.waits.insert(
            tid,
            Watch {
                objs: seen,
                resume,
                seq: io.seq,
            },
        );
        self.block(Wait::Io, resume.deadline, call)
    }

    pub(crate) fn io_unwatch(&mut self, tid: Tid) -> Option<Resume> {
        let io = &mut self.vfs.io;
        let w = io.waits.remove(&tid)?;
        for (o, _) in w.objs {
            if let Some(s) = io.watchers.get_mut(&o) {
                s.remove(&tid);
                if s.is_empty() {
                    io.watchers.remove(&o);
                }
            }
        }
        Some(w.resume)
    }

    /// A call that cannot go on now: with `nonblock` it ends (with the
    /// `done` bytes it moved, else EAGAIN); otherwise it waits on `objs` and
    /// is run again, keeping `done`, when one of them changes.
    pub(crate) fn io_wait(
        &mut self,
        objs: &[ObjId],
        nonblock: bool,
        done: usize,
        call: PendingCall,
    ) -> SysResult<Sys> {
        let on = Blocking {
            watch: objs,
            nonblock,
            call,
            deadline: None,
        };
        self.io_wait_on(on, done)
    }

    /// As `io_wait`, for a call that may wait only until `on.deadline` (a
    /// socket's SO_RCVTIMEO or SO_SNDTIMEO): once it has passed, the bytes
    /// moved, else EAGAIN (sock_sndtimeo's and sock_rcvtimeo's end).
    pub(crate) fn io_wait_on(&mut self, on: Blocking, done: usize) -> SysResult<Sys> {
        if on.nonblock || on.deadline.is_some_and(|d| d <= self.clock.now()) {
            return partial(done, EAGAIN);
        }
        let r = Resume {
            nr: on.call.nr,
            done: done as u64,
            deadline: on.deadline,
        };
        Ok(self.io_block(on.watch, r, on.call))
    }

    /// The rest of a stream write that has moved `done` bytes of `src`, with
    /// `room` bytes free where they go: `put` takes what fits, then the call
    /// ends or waits as `on` says for room for the rest.
    pub(crate) fn io_write_some(
        &mut self,
        on: Blocking,
        src: Source,
        done: usize,
        room: usize,
        put: impl FnOnce(&mut Self, Vec<u8>) -> SysResult<()>,
    ) -> SysResult<Sys> {
        let total = src.total();
        if done >= total {
            return Ok(Sys::Ret(done as u64));
        }
        if room == 0 {
            return self.io_wait_on(on, done);
        }
        let want = room.min(total - done);
        let bytes = match src.take(self, done, want) {
            Ok(b) => b,
            Err(e) => return partial(done, e),
        };
        let got = bytes.len();
        put(self, bytes)?;
        let done = done + got;
        if got < want || done == total || on.nonblock {
            return Ok(Sys::Ret(done as u64));
        }
        self.io_wait_on(on, done)
    }

    /// Keeps what `tid`'s call had done for when it runs again (a signal ended its wait).
    pub(crate) fn io_keep(&mut self, tid: Tid, r: Resume) {
        self.vfs.io.resumes.insert(tid, r);
    }

    /// What the current thread's call `nr` had done before a restart.
    pub(crate) fn io_resume(&mut self, nr: u32) -> Resume {
        let tid = self.cur_tid();
        match self.vfs.io.resumes.remove(&tid) {
            Some(r) if r.nr == nr => r,
            _ => Resume {
                nr,
                ..Default::default()
            },
        }
    }

    /// Restarts every thread watching an object that changed since it
    /// looked, in the order they blocked. Whether any was.
    pub fn io_wake(&mut self) -> bool {
        if self.vfs.io.changed.is_empty() {
            return false;
        }
        let changed = std::mem::take(&mut self.vfs.io.changed);
        let mut due = BTreeMap::new();
        for o in changed {
            let Some(tids) = self.vfs.io.watchers.get(&o) else {
                continue;
            };
            for &tid in tids {
                let Some(w) = self.vfs.io.waits.get(&tid) else {
                    continue;
                };
                let moved = w
                    .objs
                    .iter()
                    .any(|&(x, g)| x == o && self.vfs.io.gen(x) != g);
                if moved {
                    due.insert(w.seq, tid);
                }
            }
        }
        let any = !due.is_empty();
        for (_, tid) in due {
            self.io_restart(tid);
        }
        any
    }

    /// Runs `tid`'s blocked call again from its start (a change or its timeout).
    pub(crate) fn io_restart(&mut self, tid: Tid) {
        let resume = self.io_unwatch(tid);
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        let ThreadState::Blocked {
            wait: Wait::Io,
            deadline,
        } = t.state
        else {
            return;
        };
        t.state = ThreadState::Runnable;
        let call = t.pending_call.take();
        if let Some(d) = deadline {
            self.sched.timers.remove(&(d, tid));
        }
        if let Some(r) = resume {
            self.vfs.io.resumes.insert(tid, r);
        }
        let nr = call.map_or(0, |c| c.nr as u64);
        let regs = if tid == self.sched.current && t.ctx.is_none() {
            Some(self.m.regs_mut())
        } else {
            t.ctx.as_mut().map(|c| &mut c.regs)
        };
        if let Some(r) = regs {
            r.rip = r.rip.wrapping_sub(2);
            r.rax = nr;
        }
        if tid != self.sched.current {
            self.sched.runq.push_back(tid);
        }
    }

    /// The object behind descriptor `fd`, if it is one.
    pub(crate) fn io_fd(&mut self, fd: u64) -> SysResult<Option<(ObjId, bool, Description)>> {
        let (_, d) = self.desc(fd)?;
        Ok(io_of(&d).map(|(o, w)| (o, w, d)))
    }
}

/// A call that moved `done` bytes before it met `e`: those bytes, or `e`.
pub(crate) fn partial(done: usize, e: Errno) -> SysResult<Sys> {
    if done > 0 {
        Ok(Sys::Ret(done as u64))
    } else {
        Err(e)
    }
}

/// The call being served, for a handler that may block.
pub fn call(nr: u32, args: [u64; 6]) -> PendingCall {
    PendingCall { nr, args }
}

/// Read implements Linux syscall read(2).
pub fn sys_read(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    match k.io_fd(a[0])? {
        Some((o, _, d)) => {
            let bufs = [(a[1], super::file_ops::data::len_arg(a[2]))];
            stream_read(k, o, &d, &bufs, call(nr::read, a))
        }
        None => super::file_ops::data::read_file(k, a).map(Sys::Ret),
    }
}

/// Write implements Linux syscall write(2).
pub fn sys_write(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    match k.io_fd(a[0])? {
        Some((o, w, d)) => {
            let bufs = [(a[1], super::file_ops::data::len_arg(a[2]))];
            stream_write(k, o, w, &d, &bufs, call(nr::write, a))
        }
        None => super::file_ops::data::write_file(k, a).map(Sys::Ret),
    }
}

/// Readv implements Linux syscall readv(2).
pub fn sys_readv(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    match k.io_fd(a[0])? {
        Some((o, _, d)) => {
            let bufs = super::file_ops::data::iovecs(k, a[1], a[2])?;
            stream_read(k, o, &d, &bufs, call(nr::readv, a))
        }
        None => super::file_ops::data::readv_file(k, a).map(Sys::Ret),
    }
}

/// Writev implements Linux syscall writev(2).
pub fn sys_writev(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    match k.io_fd(a[0])? {
        Some((o, w, d)) => {
            let bufs = super::file_ops::data::iovecs(k, a[1], a[2])?;
            stream_write(k, o, w, &d, &bufs, call(nr::writev, a))
        }
        None => super::file_ops::data::writev_file(k, a).map(Sys::Ret),
    }
}

/// A read of an object: a pipe's, a socket's, an eventfd's or a timerfd's.
fn stream_read(
    k: &mut Kernel,
    obj: ObjId,
    d: &Description,
    bufs: &[(u64, usize)],
    c: PendingCall,
) -> SysResult<Sys> {
    if !d.readable() {
        return Err(EBADF);
    }
    let nonblock = d.flags & super::O_NONBLOCK != 0;
    match k.vfs.io.objs.get(&obj) {
        Some(Obj::Pipe(_)) => super::pipe::read(k, obj, nonblock, bufs, c),
        Some(Obj::Socket(_)) => {
            crate::kernel::net::calls::transfer::read(k, obj, nonblock, bufs, c)
        }
        Some(Obj::EventFd(_)) | Some(Obj::TimerFd(_)) => {
            super::eventfd::read(k, obj, nonblock, bufs, c)
        }
        Some(Obj::SignalFd(_)) => crate::kernel::signal::signalfd::read(k, obj, nonblock, bufs, c),
        Some(Obj::Epoll(_)) | None => Err(EINVAL),
    }
}

/// A write to an object.
fn stream_write(
    k: &mut Kernel,
    obj: ObjId,
    write: bool,
    d: &Description,
    bufs: &[(u64, usize)],
    c: PendingCall,
) -> SysResult<Sys> {
    let nonblock = d.flags & super::O_NONBLOCK != 0;
    match k.vfs.io.objs.get(&obj) {
        Some(Obj::Pipe(_)) if write => super::pipe::write(k, obj, nonblock, Source::Guest(bufs), c),
        Some(Obj::Socket(_)) => {
            crate::kernel::net::calls::transfer::write(k, obj, nonblock, bufs, c)
        }
        Some(Obj::EventFd(_)) => super::eventfd::write(k, obj, nonblock, bufs, c),
        _ => Err(if d.writable() { EINVAL } else { EBADF }),
    }
}

/// What object `obj` (the end `write` of a pipe) is ready for now.
pub fn ready(io: &Objects, obj: ObjId, write: bool) -> u16 {
    match io.objs.get(&obj) {
        Some(Obj::Pipe(p)) => p.ready(write),
        Some(Obj::Socket(s)) => crate::kernel::net::ready(io, s),
        Some(Obj::EventFd(e)) => e.ready(),
        Some(Obj::TimerFd(t)) => t.ready(),
        Some(Obj::SignalFd(s)) => s.ready(io.caller_signals),
        Some(Obj::Epoll(e)) => {
            if e.any_ready(io) {
                READABLE
            } else {
                0
            }
        }
        None => POLLHUP | POLLERR,
    }
}

/// Bytes waiting to be read from `obj` (FIONREAD).
pub fn unread(io: &Objects, obj: ObjId) -> u64 {
    match io.objs.get(&obj) {
        Some(Obj::Pipe(p)) => p.buf.len() as u64,
        Some(Obj::Socket(s)) if s.stream() => s.rx.len() as u64,
        Some(Obj::Socket(s)) => s.msgs.front().map_or(0, |m| m.bytes.len() as u64),
        _ => 0,
    }
}

/// The objects a thread waiting on `obj` watches (an epoll instance: what
/// it watches too; a socket: its peer as well).
pub fn watch_set(io: &Objects, obj: ObjId, out: &mut Vec<ObjId>) {
    out.push(obj);
    match io.objs.get(&obj) {
        Some(Obj::Epoll(e)) => out.extend(e.watched()),
        Some(Obj::Socket(s)) => out.extend(s.peer()),
        _ => {}
    }
}

/// Copies `avail` bytes out to the guest's buffers: `take(k, n)` hands the
/// next `n` bytes, `give_back(k, bytes)` returns those the guest's memory
/// refused. How many landed (EFAULT when none could).
pub(crate) fn copy_out(
    k: &mut Kernel,
    bufs: &[(u64, usize)],
    avail: usize,
    mut take: impl FnMut(&mut Kernel, usize) -> Vec<u8>,
    mut give_back: impl FnMut(&mut Kernel, Vec<u8>),
) -> SysResult<usize> {
    let mut done = 0usize;
    for &(va, len) in bufs {
        let mut off = 0usize;
        while off < len && done < avail {
            let n = (len - off)
                .min(avail - done)
                .min(super::super::uaccess::IO_CHUNK);
            let bytes = take(k, n);
            let wrote = match k.write_user_some(va.wrapping_add(off as u64), &bytes) {
                Ok(w) => w,
                Err(e) if done == 0 => {
                    give_back(k, bytes);
                    return Err(e);
                }
                Err(_) => 0,
            };
            done += wrote;
            if wrote < bytes.len() {
                give_back(k, bytes[wrote..].to_vec());
                return Ok(done);
            }
            off += n;
        }
    }
    Ok(done)
}

/// The bytes of the guest's buffers from offset `skip`, at most `max`.
pub(crate) fn copy_in(
    k: &mut Kernel,
    bufs: &[(u64, usize)],
    skip: usize,
    max: usize,
) -> SysResult<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    for &(va, len) in bufs {
        if out.len() >= max {
            break;
        }
        let end = pos.saturating_add(len);
        if end <= skip {
            pos = end;
            continue;
        }
        let from = skip.saturating_sub(pos);
        let n = (len - from).min(max - out.len());
        let got = match k.read_user_some(va.wrapping_add(from as u64), n) {
            Ok(b) => b,
            Err(e) if out.is_empty() => return Err(e),
            Err(_) => break,
        };
        let short = got.len() < n;
        out.extend_from_slice(&got);
        if short {
            break;
        }
        pos = end;
    }
    Ok(out)
}

/// The total length of the guest's buffers (at most Linux's MAX_RW_COUNT).
/// Where a write's bytes come from: the guest's buffers, or bytes the
/// monitor read from a file (sendfile, copy_file_range).
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Guest(&'a [(u64, usize)]),
    Bytes(&'a [u8]),
}

impl Source<'_> {
    pub(crate) fn total(&self) -> usize {
        match self {
            Source::Guest(bufs) => total_len(bufs),
            Source::Bytes(b) => b.len().min(super::MAX_IO),
        }
    }

    /// At most `max` of its bytes after the first `skip`.
    pub(crate) fn take(&self, k: &mut Kernel, skip: usize, max: usize) -> SysResult<Vec<u8>> {
        match self {
            Source::Guest(bufs) => copy_in(k, bufs, skip, max),
            Source::Bytes(b) => {
                let from = skip.min(b.len());
                Ok(b[from..from + max.min(b.len() - from)].to_vec())
            }
        }
    }
}

pub(crate) fn total_len(bufs: &[(u64, usize)]) -> usize {
    bufs.iter()
        .fold(0usize, |t, b| t.saturating_add(b.1))
        .min(super::MAX_IO)
}
