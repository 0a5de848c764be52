//! poll, ppoll, select and pselect6. Regular files, directories and
//! devices are always ready; standard input is readable while it holds
//! bytes and hung up (its writer is gone) always; standard output and error
//! are always writable; pipes, sockets, eventfds, timerfds and epoll
//! instances say what they are ready for (`io::ready`). With nothing ready
//! the thread blocks watching those objects (`io`), until one changes or
//! the timeout (virtual time) passes; with none that can change and no
//! timeout, that is a deadlock if nothing else runs. The signal mask of
//! ppoll and pselect6 is in force while they run (`Kernel::call_sigmask`).
//! select, pselect6 and ppoll write the time left on the virtual clock back
//! into their timeout however they end, as Linux's poll_select_finish does.

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::PendingCall;
use super::super::time::{Timespec, Timeval};
use super::super::Kernel;
use super::io::{self, ObjId, Resume, POLLERR, POLLHUP, POLLNVAL, POLLPRI, READABLE, WRITABLE};
use super::*;
use crate::kernel::syscalls::nr;

/// What descriptor `fd` is ready for now, and the object behind it.
pub(crate) fn ready(k: &mut Kernel, fd: i32) -> (u16, Option<ObjId>) {
    let Ok((_, d)) = k.desc(fd as u32 as u64) else {
        return (POLLNVAL, None);
    };
    match d.target {
        Target::Stdin => {
            let more = (d.offset as usize) < k.vfs.stdin.len();
            (POLLHUP | if more { READABLE } else { 0 }, None)
        }
        Target::Stdout | Target::Stderr => (WRITABLE, None),
        Target::Io { obj, write } => {
            // A FIFO open for both ends is ready for either.
            let both = write && d.readable();
            let r = io::ready(&k.vfs.io, obj, write)
                | if both {
                    io::ready(&k.vfs.io, obj, false)
                } else {
                    0
                };
            (r, Some(obj))
        }
        _ => (READABLE | WRITABLE, None),
    }
}

/// The deadline of a timed wait: the one it had before a restart, or
/// `timeout` (ns; None: none) from now.
fn deadline(k: &mut Kernel, nr: u32, timeout: Option<u64>) -> Resume {
    let r = k.io_resume(nr);
    if r.deadline.is_some() {
        return r;
    }
    Resume {
        nr,
        done: 0,
        deadline: timeout.map(|ns| k.clock.now().saturating_add(ns)),
    }
}

/// Writes the time left until `deadline` back into the timeout of `call`
/// (select's timeval, pselect6's and ppoll's timespec), as Linux does
/// whenever they return, a signal's EINTR included. A timeout that cannot
/// be written changes nothing, as on Linux.
pub(crate) fn write_time_left(k: &mut Kernel, call: PendingCall, deadline: Option<u64>) {
    let va = match call.nr {
        nr::select | nr::pselect6 => call.args[4],
        nr::ppoll => call.args[2],
        _ => return,
    };
    let Some(d) = deadline.filter(|_| va != 0) else {
        return;
    };
    let left = d.saturating_sub(k.clock.now());
    let _ = if call.nr == nr::select {
        k.write_struct(va, &Timeval::from_ns(left))
    } else {
        k.write_struct(va, &Timespec::from_ns(left))
    };
}

/// `r`, with the time left written back unless the call waits on.
fn finished(
    k: &mut Kernel,
    r: SysResult<Sys>,
    deadline: Option<u64>,
    call: PendingCall,
) -> SysResult<Sys> {
    if !matches!(r, Ok(Sys::Blocked)) {
        write_time_left(k, call, deadline);
    }
    r
}

/// Returns `n`, or blocks watching `objs` until the deadline.
fn finish(k: &mut Kernel, n: u64, objs: &[ObjId], r: Resume, call: PendingCall) -> Sys {
    let now = k.clock.now();
    match r.deadline {
        _ if n > 0 => Sys::Ret(n),
        Some(d) if d <= now => Sys::Ret(0),
        _ => {
            let mut watch = Vec::new();
            for &o in objs {
                io::watch_set(&k.vfs.io, o, &mut watch);
            }
            k.io_block(&watch, r, call)
        }
    }
}

/// Fills in `revents`; the number of descriptors with any, and the objects polled.
fn scan(k: &mut Kernel, fds: u64, nfds: u64) -> SysResult<(u64, Vec<ObjId>)> {
    // nfds is an unsigned int.
    let nfds = nfds as u32 as u64;
    if nfds > super::super::identity::NOFILE_LIMIT {
        return Err(EINVAL);
    }
    let mut raw = k.read_user(fds, nfds as usize * 8)?;
    let mut n = 0;
    let mut objs = Vec::new();
    for p in raw.chunks_mut(8) {
        let fd = i32::from_le_bytes(p[..4].try_into().unwrap());
        let events = u16::from_le_bytes(p[4..6].try_into().unwrap());
        let revents = if fd < 0 {
            0
        } else {
            let (r, obj) = ready(k, fd);
            objs.extend(obj);
            r & (events | POLLERR | POLLHUP | POLLNVAL)
        };
        p[6..8].copy_from_slice(&revents.to_le_bytes());
        if revents != 0 {
            n += 1;
        }
    }
    k.write_user(fds, &raw)?;
    Ok((n, objs))
}

/// poll(fds, nfds, timeout_ms).
/// Poll implements Linux syscall poll(2).
pub fn sys_poll(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let ms = a[2] as i32;
    let r = deadline(k, nr::poll, (ms >= 0).then(|| ms as u64 * 1_000_000));
    let (n, objs) = scan(k, a[0], a[1])?;
    Ok(finish(k, n, &objs, r, io::call(nr::poll, a)))
}

/// ppoll(fds, nfds, timeout, sigmask, sigsetsize): the mask is in force while it runs.
/// Ppoll implements Linux syscall ppoll(2).
pub fn sys_ppoll(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let timeout = if a[2] == 0 {
        None
    } else {
        let ts: Timespec = k.read_struct(a[2])?;
        Some(ts.to_ns().ok_or(EINVAL)?)
    };
    k.call_sigmask(a[3], a[4])?;
    let r = deadline(k, nr::ppoll, timeout);
    let c = io::call(nr::ppoll, a);
    let done = scan(k, a[0], a[1]).map(|(n, objs)| finish(k, n, &objs, r, c));
    finished(k, done, r.deadline, c)
}

/// Reads an fd_set of `nfds` bits (none at address 0).
fn read_set(k: &mut Kernel, va: u64, nfds: usize) -> SysResult<Option<Vec<u8>>> {
    if va == 0 {
        return Ok(None);
    }
    k.read_user(va, nfds.div_ceil(64) * 8).map(Some)
}

fn bit(set: &[u8], fd: usize) -> bool {
    set[fd / 8] & (1 << (fd % 8)) != 0
}

/// select's three fd_sets (None: not passed).
type Sets = [Option<Vec<u8>>; 3];

/// select's scan: the three sets narrowed to what is ready; the count.
fn select_scan(k: &mut Kernel, nfds: u64, sets: [u64; 3]) -> SysResult<(u64, Vec<ObjId>, Sets)> {
    // nfds is an int; past the table's size only the table counts, as on Linux.
    let nfds = nfds as i32;
    if nfds < 0 {
        return Err(EINVAL);
    }
    let n = (nfds as u64).min(super::super::identity::NOFILE_LIMIT) as usize;
    let ins = [
        read_set(k, sets[0], n)?,
        read_set(k, sets[1], n)?,
        read_set(k, sets[2], n)?,
    ];
    let mut outs: Sets = [
        ins[0].as_ref().map(|s| vec![0; s.len()]),
        ins[1].as_ref().map(|s| vec![0; s.len()]),
        ins[2].as_ref().map(|s| vec![0; s.len()]),
    ];
    // Linux's POLLIN_SET, POLLOUT_SET and POLLEX_SET.
    let wants = [READABLE | POLLHUP | POLLERR, WRITABLE | POLLERR, POLLPRI];
    let mut count = 0;
    let mut objs = Vec::new();
    for fd in 0..n {
        let asked: Vec<usize> = (0..3)
            .filter(|&i| ins[i].as_ref().is_some_and(|s| bit(s, fd)))
            .collect();
        if asked.is_empty() {
            continue;
        }
        let (r, obj) = ready(k, fd as i32);
        if r & POLLNVAL != 0 {
            return Err(EBADF);
        }
        objs.extend(obj);
        for i in asked {
            if r & wants[i] != 0 {
                outs[i].as_mut().unwrap()[fd / 8] |= 1 << (fd % 8);
                count += 1;
            }
        }
    }
    Ok((count, objs, outs))
}

/// The sets written back: only what is ready stays.
fn write_sets(k: &mut Kernel, sets: [u64; 3], outs: &Sets) -> SysResult<()> {
    for (va, out) in sets.iter().zip(outs) {
        if let Some(bytes) = out {
            k.write_user(*va, bytes)?;
        }
    }
    Ok(())
}

/// select and pselect6 once their timeout is read and their mask in force.
fn select_common(k: &mut Kernel, nr: u32, a: [u64; 6], timeout: Option<u64>) -> SysResult<Sys> {
    let r = deadline(k, nr, timeout);
    let c = io::call(nr, a);
    let sets = [a[1], a[2], a[3]];
    let done = select_scan(k, a[0], sets).and_then(|(n, objs, outs)| {
        let sys = finish(k, n, &objs, r, c);
        if sys != Sys::Blocked {
            write_sets(k, sets, &outs)?;
        }
        Ok(sys)
    });
    finished(k, done, r.deadline, c)
}

/// select(nfds, readfds, writefds, exceptfds, timeout): the timeout left is written back.
/// Select implements Linux syscall select(2).
pub fn sys_select(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let timeout = if a[4] == 0 {
        None
    } else {
        // Microseconds past a second carry into the seconds, as Linux's
        // select does (poll_select_set_timeout), before it checks them.
        let tv: Timeval = k.read_struct(a[4])?;
        let ts = Timespec {
            sec: tv.sec.saturating_add(tv.usec / 1_000_000),
            nsec: (tv.usec % 1_000_000) * 1000,
        };
        Some(ts.to_ns().ok_or(EINVAL)?)
    };
    select_common(k, nr::select, a, timeout)
}

/// pselect6(nfds, readfds, writefds, exceptfds, timeout, {sigmask, size}):
/// the mask is in force while it runs.
/// Pselect6 implements Linux syscall pselect6(2).
pub fn sys_pselect6(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let timeout = if a[4] == 0 {
        None
    } else {
        let ts: Timespec = k.read_struct(a[4])?;
        Some(ts.to_ns().ok_or(EINVAL)?)
    };
    if a[5] != 0 {
        let (set, size) = (k.read_u64(a[5])?, k.read_u64(a[5].wrapping_add(8))?);
        k.call_sigmask(set, size)?;
    }
    select_common(k, nr::pselect6, a, timeout)
}
