//! poll and ppoll over the descriptors this family has: regular files,
//! directories and devices are always ready; standard input is readable
//! while it holds bytes and hung up (its writer is gone) always; standard
//! output and error are always writable. With nothing ready the call sleeps
//! for its timeout (virtual time), or for ever (a deadlock if nothing else
//! runs: nothing here can become ready later).

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::{PendingCall, Wait};
use super::super::time::Timespec;
use super::super::Kernel;
use super::*;

const POLLIN: u16 = 0x1;
const POLLOUT: u16 = 0x4;
const POLLERR: u16 = 0x8;
const POLLHUP: u16 = 0x10;
const POLLNVAL: u16 = 0x20;
const POLLRDNORM: u16 = 0x40;
const POLLWRNORM: u16 = 0x100;

/// What descriptor `fd` is ready for now.
fn ready(k: &mut Kernel, fd: i32) -> u16 {
    let Ok((_, d)) = k.desc(fd as u32 as u64) else {
        return POLLNVAL;
    };
    match d.target {
        Target::Stdin => {
            let more = (d.offset as usize) < k.vfs.stdin.len();
            POLLHUP | if more { POLLIN | POLLRDNORM } else { 0 }
        }
        Target::Stdout | Target::Stderr => POLLOUT | POLLWRNORM,
        _ => POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM,
    }
}

/// Fills in `revents`; the number of descriptors with any.
fn scan(k: &mut Kernel, fds: u64, nfds: u64) -> SysResult<u64> {
    if nfds > super::super::identity::NOFILE_LIMIT {
        return Err(EINVAL);
    }
    let mut raw = k.read_user(fds, nfds as usize * 8)?;
    let mut n = 0;
    for p in raw.chunks_mut(8) {
        let fd = i32::from_le_bytes(p[..4].try_into().unwrap());
        let events = u16::from_le_bytes(p[4..6].try_into().unwrap());
        let revents = if fd < 0 {
            0
        } else {
            ready(k, fd) & (events | POLLERR | POLLHUP | POLLNVAL)
        };
        p[6..8].copy_from_slice(&revents.to_le_bytes());
        if revents != 0 {
            n += 1;
        }
    }
    k.write_user(fds, &raw)?;
    Ok(n)
}

/// Returns `n`, or sleeps until `timeout` (virtual ns; None: for ever).
fn finish(k: &mut Kernel, n: u64, timeout: Option<u64>, call: PendingCall) -> Sys {
    match timeout {
        _ if n > 0 => Sys::Ret(n),
        Some(0) => Sys::Ret(0),
        Some(ns) => {
            let deadline = k.clock.now().saturating_add(ns);
            k.block(Wait::Sleep, Some(deadline), call)
        }
        None => k.block(Wait::Sleep, None, call),
    }
}

/// poll(fds, nfds, timeout_ms).
/// Poll implements Linux syscall poll(2).
pub fn sys_poll(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let n = scan(k, a[0], a[1])?;
    let ms = a[2] as i32;
    let timeout = (ms >= 0).then(|| ms as u64 * 1_000_000);
    Ok(finish(k, n, timeout, PendingCall { nr: 7, args: a }))
}

/// ppoll(fds, nfds, timeout, sigmask, sigsetsize): the mask is not applied.
/// Ppoll implements Linux syscall ppoll(2).
pub fn sys_ppoll(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let timeout = if a[2] == 0 {
        None
    } else {
        let ts: Timespec = k.read_struct(a[2])?;
        Some(ts.to_ns().ok_or(EINVAL)?)
    };
    let n = scan(k, a[0], a[1])?;
    Ok(finish(k, n, timeout, PendingCall { nr: 271, args: a }))
}
