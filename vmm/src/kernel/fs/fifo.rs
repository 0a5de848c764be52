//! FIFOs (named pipes, `mknod` with S_IFIFO): a node of the tree whose
//! opens share one pipe (`pipe.rs`) while any end is open. As on Linux, an
//! open for reading waits until a writer opens and one for writing until a
//! reader does (a waiting open counts for the other side, so two waiting
//! opens meet); with O_NONBLOCK a read-only open goes on at once and a
//! write-only one without a reader is ENXIO; O_RDWR never waits and holds
//! both ends. Once open, a FIFO is a pipe: end of file when the last writer
//! closes, EPIPE and SIGPIPE without a reader; what is left unread when the
//! last end closes is gone. The node is the overlay's, so keyframes keep
//! it, and the pipe is a kernel object, so they keep that too.

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::{PendingCall, ThreadState, Tid, Wait};
use super::super::Kernel;
use super::io::{Obj, ObjId};
use super::pipe::{Pipe, PIPE_DEFAULT};
use super::vfs::Ino;
use super::{Target, O_ACCMODE, O_CLOEXEC, O_NONBLOCK, O_RDONLY, O_RDWR, O_WRONLY};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// What makes a pipe a FIFO's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Fifo {
    pub ino: Ino,
    /// Opens so far of the read end and of the write end: an open waiting
    /// for the other side goes on once the other's count moves, even if
    /// that end has closed again since (Linux's r_counter and w_counter).
    pub opened: [u64; 2],
    /// Threads waiting in an open: for which end (true: writing), and the
    /// other end's open count when they began.
    pub waiting: BTreeMap<Tid, (bool, u64)>,
}

/// What a waiting open has done, for its restart: counted as its end.
const COUNTED: u64 = 1;

/// The calls that open a path, which alone wait for a FIFO's other side.
pub(super) const OPENS: [u32; 4] = [2, 85, 257, 437];

/// The FIFO's pipe, made when the first open of node `ino` begins.
fn pipe_of(k: &mut Kernel, ino: Ino) -> SysResult<ObjId> {
    if let Some(&obj) = k.vfs.io.fifos.get(&ino) {
        if matches!(k.vfs.io.objs.get(&obj), Some(Obj::Pipe(_))) {
            return Ok(obj);
        }
    }
    let obj = k.vfs.io.add(Obj::Pipe(Pipe {
        buf: VecDeque::new(),
        cap: PIPE_DEFAULT,
        readers: 0,
        writers: 0,
        fifo: Some(Box::new(Fifo {
            ino,
            ..Default::default()
        })),
    }))?;
    k.vfs.io.fifos.insert(ino, obj);
    Ok(obj)
}

/// Whether thread `tid` still waits in an open of `obj`, or is about to
/// run it again after a change (one a signal took out of its open, or
/// that ended, is not).
fn waits_in_open(k: &Kernel, tid: Tid, obj: ObjId) -> bool {
    let Some(t) = k.threads.get(&tid) else {
        return false;
    };
    let blocked = matches!(t.state, ThreadState::Blocked { wait: Wait::Io, .. })
        && t.pending_call.is_some_and(|c| OPENS.contains(&c.nr))
        && k.vfs.io.watches(tid, obj);
    blocked
        || k.vfs
            .io
            .restarting(tid)
            .is_some_and(|nr| OPENS.contains(&nr))
}

/// Forgets the waiting opens of pipe `obj` that no longer wait (a signal
/// ended them, or their thread): each counted as an end, as on Linux,
/// and no longer does.
pub(crate) fn settle(k: &mut Kernel, obj: ObjId) {
    let gone: Vec<(Tid, bool)> = match k.vfs.io.objs.get(&obj) {
        Some(Obj::Pipe(Pipe { fifo: Some(f), .. })) => f
            .waiting
            .iter()
            .filter(|(&tid, _)| !waits_in_open(k, tid, obj))
            .map(|(&tid, &(w, _))| (tid, w))
            .collect(),
        _ => return,
    };
    if gone.is_empty() {
        return;
    }
    let Ok(p) = k.vfs.io.pipe(obj) else {
        return;
    };
    for (tid, write) in gone {
        if let Some(f) = p.fifo.as_mut() {
            f.waiting.remove(&tid);
        }
        if write {
            p.writers = p.writers.saturating_sub(1);
        } else {
            p.readers = p.readers.saturating_sub(1);
        }
    }
    k.vfs.io.touch(obj);
}

/// The FIFO of pipe `obj`.
fn fifo<'a>(k: &'a mut Kernel<'_>, obj: ObjId) -> SysResult<&'a mut Fifo> {
    k.vfs.io.pipe(obj)?.fifo.as_deref_mut().ok_or(ENXIO)
}

/// Opens FIFO node `ino` (`path` as /proc shows it) with open's `flags`.
/// An open that waits counts as its end from the start (a writer may write
/// to a reader still in its open), as Linux's does.
pub(crate) fn open(
    k: &mut Kernel,
    ino: Ino,
    flags: u32,
    path: String,
    c: PendingCall,
) -> SysResult<Sys> {
    let acc = flags & O_ACCMODE;
    let obj = pipe_of(k, ino)?;
    let tid = k.cur_tid();
    // Run again after a change, it is counted already; a stale entry of its
    // own (from an open a signal ended) is settled like any other.
    let began = match k.io_resume(c.nr).done {
        COUNTED => fifo(k, obj)?.waiting.remove(&tid),
        _ => None,
    };
    settle(k, obj);
    let (read, write) = (acc != O_WRONLY, acc != O_RDONLY);
    if acc == O_RDWR || began.is_none() {
        let p = k.vfs.io.pipe(obj)?;
        let other = if write { p.readers } else { p.writers };
        if acc == O_WRONLY && other == 0 && flags & O_NONBLOCK != 0 {
            return Err(ENXIO);
        }
        p.readers += u32::from(read);
        p.writers += u32::from(write);
        let f = fifo(k, obj)?;
        f.opened[0] += u64::from(read);
        f.opened[1] += u64::from(write);
        k.vfs.io.touch(obj);
    }
    if acc != O_RDWR && flags & O_NONBLOCK == 0 {
        let other = usize::from(!write);
        let p = k.vfs.io.pipe(obj)?;
        let open_now = if write { p.readers } else { p.writers } > 0;
        let f = fifo(k, obj)?;
        let seen = began.map_or(f.opened[other], |(_, n)| n);
        if !open_now && f.opened[other] == seen {
            f.waiting.insert(tid, (write, seen));
            return k.io_wait(&[obj], false, COUNTED as usize, c);
        }
    }
    let d = k.vfs.open_desc(Target::Io { obj, write }, flags, path);
    Ok(Sys::Ret(k.install_fd(d, 0, flags & O_CLOEXEC != 0)? as u64))
}
