//! epoll: epoll_create, epoll_create1, epoll_ctl, epoll_wait, epoll_pwait
//! (its signal mask in force while it runs). An instance watches descriptions of
//! pipes, sockets, eventfds and timerfds (regular files are EPERM, as on
//! Linux; another epoll instance is EINVAL here); level-triggered entries
//! report while ready, edge-triggered ones (EPOLLET) when the object
//! changed since they last reported, EPOLLONESHOT ones once until
//! EPOLL_CTL_MOD. Ready entries are reported in (descriptor, object) order,
//! so the same run reports them the same way every time. A waiter blocks
//! watching the instance and everything it watches (`io`).

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::time::Timespec;
use super::super::Kernel;
use super::io::{self, Obj, ObjId, Objects, Resume, POLLERR, POLLHUP};
use super::{Target, O_CLOEXEC, O_RDWR};
use crate::kernel::syscalls::nr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const EPOLL_CTL_ADD: u64 = 1;
const EPOLL_CTL_DEL: u64 = 2;
const EPOLL_CTL_MOD: u64 = 3;
const EPOLLET: u32 = 1 << 31;
const EPOLLONESHOT: u32 = 1 << 30;
const EPOLLWAKEUP: u32 = 1 << 29;
const EPOLLEXCLUSIVE: u32 = 1 << 28;
/// Most entries one instance holds (Linux's max_user_watches is larger; ENOSPC past it).
const MAX_ENTRIES: usize = 65_536;
/// Most events one epoll_wait may ask for (Linux's EP_MAX_EVENTS).
const MAX_EVENTS: u64 = i32::MAX as u64 / 12;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub write: bool,
    pub events: u32,
    pub data: u64,
    /// The object's change count when an edge-triggered entry last reported.
    pub seen: Option<u64>,
    /// A one-shot entry that reported.
    pub disabled: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Epoll {
    /// Keyed by (descriptor, object), as Linux keys by (file, fd).
    pub entries: BTreeMap<(i32, ObjId), Entry>,
}

impl Epoll {
    /// Drops the entries on a pipe end or object that closed.
    pub fn forget(&mut self, obj: ObjId, write: bool) {
        self.entries
            .retain(|(_, o), e| *o != obj || e.write != write);
    }

    pub fn watched(&self) -> impl Iterator<Item = ObjId> + '_ {
        self.entries.keys().map(|(_, o)| *o)
    }

    /// Whether some entry would report now.
    pub fn any_ready(&self, io: &Objects) -> bool {
        self.entries
            .iter()
            .any(|((_, o), e)| report(io, *o, e).is_some())
    }
}

/// What entry `e` on `obj` reports now, if anything.
fn report(io: &Objects, obj: ObjId, e: &Entry) -> Option<u32> {
    if e.disabled {
        return None;
    }
    let r = io::ready(io, obj, e.write) as u32 & (e.events | (POLLERR | POLLHUP) as u32);
    if r == 0 {
        return None;
    }
    if e.events & EPOLLET != 0 && e.seen == Some(io.gen_of(obj)) {
        return None;
    }
    Some(r)
}

/// EpollCreate1 implements Linux syscall epoll_create1(2).
pub fn sys_epoll_create1(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[0] & !(O_CLOEXEC as u64) != 0 {
        return Err(EINVAL);
    }
    let obj = k.vfs.io.add(Obj::Epoll(Epoll::default()))?;
    let d = k.vfs.open_desc(
        Target::Io { obj, write: false },
        O_RDWR,
        "anon_inode:[eventpoll]".to_string(),
    );
    Ok(k.install_fd(d, 0, a[0] != 0)? as u64)
}

/// EpollCreate implements Linux syscall epoll_create(2).
pub fn sys_epoll_create(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if (a[0] as i32) <= 0 {
        return Err(EINVAL);
    }
    sys_epoll_create1(k, [0; 6])
}

/// The epoll instance behind `epfd`.
fn instance(k: &mut Kernel, epfd: u64) -> SysResult<ObjId> {
    let (_, d) = k.desc(epfd)?;
    match d.target {
        Target::Io { obj, .. } if matches!(k.vfs.io.objs.get(&obj), Some(Obj::Epoll(_))) => Ok(obj),
        _ => Err(EINVAL),
    }
}

/// EpollCtl implements Linux syscall epoll_ctl(2).
/// Partial (epoll_ctl): an epoll instance inside another is EINVAL; regular files are EPERM.
pub fn sys_epoll_ctl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (epfd, op, fd, ev) = (a[0], a[1], a[2], a[3]);
    let ep = instance(k, epfd)?;
    let (n, _) = k.fd(fd)?;
    let (_, d) = k.desc(fd)?;
    let (obj, write) = match d.target {
        Target::Io { obj, write } => (obj, write),
        _ => return Err(EPERM),
    };
    if obj == ep || matches!(k.vfs.io.objs.get(&obj), Some(Obj::Epoll(_))) {
        return Err(EINVAL);
    }
    let event = if op == EPOLL_CTL_DEL {
        None
    } else {
        let raw = k.read_user(ev, 12)?;
        let events = u32::from_le_bytes(raw[..4].try_into().unwrap());
        let data = u64::from_le_bytes(raw[4..12].try_into().unwrap());
        if events & EPOLLEXCLUSIVE != 0 && op == EPOLL_CTL_MOD {
            return Err(EINVAL);
        }
        Some((events & !(EPOLLWAKEUP | EPOLLEXCLUSIVE), data))
    };
    let Some(Obj::Epoll(e)) = k.vfs.io.objs.get_mut(&ep) else {
        return Err(EINVAL);
    };
    let key = (n, obj);
    match (op, event) {
        (EPOLL_CTL_ADD, Some((events, data))) => {
            if e.entries.contains_key(&key) {
                return Err(EEXIST);
            }
            if e.entries.len() >= MAX_ENTRIES {
                return Err(ENOSPC);
            }
            e.entries.insert(
                key,
                Entry {
                    write,
                    events,
                    data,
                    seen: None,
                    disabled: false,
                },
            );
        }
        (EPOLL_CTL_MOD, Some((events, data))) => {
            let en = e.entries.get_mut(&key).ok_or(ENOENT)?;
            *en = Entry {
                write,
                events,
                data,
                seen: None,
                disabled: false,
            };
        }
        (EPOLL_CTL_DEL, None) => {
            e.entries.remove(&key).ok_or(ENOENT)?;
        }
        _ => return Err(EINVAL),
    }
    k.vfs.io.touch(ep);
    Ok(0)
}

fn wait(k: &mut Kernel, nr: u32, a: [u64; 6], timeout: Option<u64>) -> SysResult<Sys> {
    let (events, max) = (a[1], a[2] as i32);
    if max <= 0 || max as u64 > MAX_EVENTS {
        return Err(EINVAL);
    }
    let ep = instance(k, a[0])?;
    let r = k.io_resume(nr);
    let r = if r.deadline.is_some() {
        r
    } else {
        Resume {
            nr,
            done: 0,
            deadline: timeout.map(|ns| k.clock.now().saturating_add(ns)),
        }
    };
    let Some(Obj::Epoll(e)) = k.vfs.io.objs.get(&ep) else {
        return Err(EINVAL);
    };
    let mut out: Vec<((i32, ObjId), u32, u64)> = Vec::new();
    for (key, en) in &e.entries {
        if out.len() >= max as usize {
            break;
        }
        if let Some(rev) = report(&k.vfs.io, key.1, en) {
            out.push((*key, rev, en.data));
        }
    }
    if out.is_empty() {
        if r.deadline.is_some_and(|d| d <= k.clock.now()) {
            return Ok(Sys::Ret(0));
        }
        let mut watch = Vec::new();
        io::watch_set(&k.vfs.io, ep, &mut watch);
        return Ok(k.io_block(&watch, r, io::call(nr, a)));
    }
    let mut bytes = Vec::with_capacity(out.len() * 12);
    for (_, rev, data) in &out {
        bytes.extend_from_slice(&rev.to_le_bytes());
        bytes.extend_from_slice(&data.to_le_bytes());
    }
    k.write_user(events, &bytes)?;
    let gens: Vec<u64> = out
        .iter()
        .map(|(key, _, _)| k.vfs.io.gen_of(key.1))
        .collect();
    if let Some(Obj::Epoll(e)) = k.vfs.io.objs.get_mut(&ep) {
        for ((key, _, _), g) in out.iter().zip(gens) {
            if let Some(en) = e.entries.get_mut(key) {
                if en.events & EPOLLET != 0 {
                    en.seen = Some(g);
                }
                if en.events & EPOLLONESHOT != 0 {
                    en.disabled = true;
                }
            }
        }
    }
    Ok(Sys::Ret(out.len() as u64))
}

fn ms_timeout(ms: u64) -> Option<u64> {
    let ms = ms as i32;
    (ms >= 0).then(|| ms as u64 * 1_000_000)
}

/// EpollWait implements Linux syscall epoll_wait(2).
pub fn sys_epoll_wait(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    wait(k, nr::epoll_wait, a, ms_timeout(a[3]))
}

/// epoll_pwait(epfd, events, maxevents, timeout, sigmask, sigsetsize): the
/// mask is in force while it runs.
/// EpollPwait implements Linux syscall epoll_pwait(2).
pub fn sys_epoll_pwait(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    k.call_sigmask(a[4], a[5])?;
    wait(k, nr::epoll_pwait, a, ms_timeout(a[3]))
}

/// epoll_pwait2(epfd, events, maxevents, timeout, sigmask, sigsetsize): the
/// mask is in force while it runs.
/// EpollPwait2 implements Linux syscall epoll_pwait2(2).
pub fn sys_epoll_pwait2(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let timeout = if a[3] == 0 {
        None
    } else {
        let ts: Timespec = k.read_struct(a[3])?;
        Some(ts.to_ns().ok_or(EINVAL)?)
    };
    k.call_sigmask(a[4], a[5])?;
    wait(k, nr::epoll_pwait2, a, timeout)
}
