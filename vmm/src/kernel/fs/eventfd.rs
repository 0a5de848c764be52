//! eventfd and timerfd. An eventfd is a 64-bit counter: a write adds to it
//! (blocking while it would pass 2^64 - 2), a read takes it (or one, with
//! EFD_SEMAPHORE), blocking while it is 0. A timerfd counts the expirations
//! of a timer on the run's virtual clock: the scheduler's time jump goes to
//! its next expiry like to any other timer, and a read takes the count,
//! blocking while it is 0.

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::PendingCall;
use super::super::time::Timespec;
use super::super::Kernel;
use super::io::{self, Obj, ObjId, READABLE, WRITABLE};
use super::{Target, O_CLOEXEC, O_NONBLOCK, O_RDWR};
use serde::{Deserialize, Serialize};

const EFD_SEMAPHORE: u64 = 1;
const EVENTFD_MAX: u64 = u64::MAX - 1;
const TFD_TIMER_ABSTIME: u64 = 1;
const TFD_TIMER_CANCEL_ON_SET: u64 = 2;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EventFd {
    pub count: u64,
    pub semaphore: bool,
}

impl EventFd {
    pub fn ready(&self) -> u16 {
        let r = if self.count > 0 { READABLE } else { 0 };
        let w = if self.count < EVENTFD_MAX {
            WRITABLE
        } else {
            0
        };
        r | w
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimerFd {
    /// CLOCK_REALTIME (0) or a monotonic one.
    pub clock: u32,
    /// The next expiry, monotonic virtual ns; None: disarmed.
    pub next: Option<u64>,
    pub interval: u64,
    /// Expirations not yet read.
    pub expired: u64,
}

impl TimerFd {
    pub fn ready(&self) -> u16 {
        if self.expired > 0 {
            READABLE
        } else {
            0
        }
    }
}

/// Installs a new object's descriptor (read and write, as Linux's anon
/// inodes): eventfds, timerfds, signalfds.
pub(crate) fn install(k: &mut Kernel, o: Obj, flags: u64, name: &str) -> SysResult<u64> {
    let obj = k.vfs.io.add(o)?;
    let d = k.vfs.open_desc(
        Target::Io { obj, write: false },
        O_RDWR | (flags as u32 & O_NONBLOCK),
        format!("anon_inode:[{name}]"),
    );
    Ok(k.install_fd(d, 0, flags & O_CLOEXEC as u64 != 0)? as u64)
}

/// Eventfd2 implements Linux syscall eventfd2(2).
pub fn sys_eventfd2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let flags = a[1];
    if flags & !(EFD_SEMAPHORE | O_NONBLOCK as u64 | O_CLOEXEC as u64) != 0 {
        return Err(EINVAL);
    }
    let e = EventFd {
        count: a[0] as u32 as u64,
        semaphore: flags & EFD_SEMAPHORE != 0,
    };
    install(k, Obj::EventFd(e), flags, "eventfd")
}

/// Eventfd implements Linux syscall eventfd(2).
pub fn sys_eventfd(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sys_eventfd2(k, [a[0], 0, 0, 0, 0, 0])
}

/// A read of an eventfd or a timerfd: 8 bytes.
pub fn read(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    bufs: &[(u64, usize)],
    c: PendingCall,
) -> SysResult<Sys> {
    if io::total_len(bufs) < 8 {
        return Err(EINVAL);
    }
    let v = match k.vfs.io.objs.get_mut(&obj) {
        Some(Obj::EventFd(e)) if e.count > 0 => {
            let v = if e.semaphore { 1 } else { e.count };
            e.count -= v;
            v
        }
        Some(Obj::TimerFd(t)) if t.expired > 0 => std::mem::take(&mut t.expired),
        Some(Obj::EventFd(_)) | Some(Obj::TimerFd(_)) => return k.io_wait(&[obj], nonblock, 0, c),
        _ => return Err(EINVAL),
    };
    let put = |k: &mut Kernel, v: u64| {
        if let Some(Obj::EventFd(e)) = k.vfs.io.objs.get_mut(&obj) {
            e.count += v;
        } else if let Some(Obj::TimerFd(t)) = k.vfs.io.objs.get_mut(&obj) {
            t.expired += v;
        }
    };
    if let Err(e) = write_first(k, bufs, &v.to_le_bytes()) {
        put(k, v);
        return Err(e);
    }
    k.vfs.io.touch(obj);
    Ok(Sys::Ret(8))
}

/// Writes `bytes` where the first buffers say.
fn write_first(k: &mut Kernel, bufs: &[(u64, usize)], bytes: &[u8]) -> SysResult<()> {
    let n = io::copy_out(k, bufs, bytes.len(), |_, n| bytes[..n].to_vec(), |_, _| {})?;
    if n < bytes.len() {
        return Err(EFAULT);
    }
    Ok(())
}

/// A write to an eventfd: 8 bytes added to the counter.
pub fn write(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    bufs: &[(u64, usize)],
    c: PendingCall,
) -> SysResult<Sys> {
    if io::total_len(bufs) < 8 {
        return Err(EINVAL);
    }
    let raw = io::copy_in(k, bufs, 0, 8)?;
    let v = u64::from_le_bytes(raw.try_into().map_err(|_| EFAULT)?);
    if v == u64::MAX {
        return Err(EINVAL);
    }
    let Some(Obj::EventFd(e)) = k.vfs.io.objs.get_mut(&obj) else {
        return Err(EINVAL);
    };
    if e.count.checked_add(v).is_none_or(|sum| sum > EVENTFD_MAX) {
        return k.io_wait(&[obj], nonblock, 0, c);
    }
    e.count += v;
    k.vfs.io.touch(obj);
    Ok(Sys::Ret(8))
}

/// TimerfdCreate implements Linux syscall timerfd_create(2).
pub fn sys_timerfd_create(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (clock, flags) = (a[0], a[1]);
    // REALTIME, MONOTONIC, BOOTTIME, REALTIME_ALARM, BOOTTIME_ALARM.
    if ![0, 1, 7, 8, 9].contains(&clock) {
        return Err(EINVAL);
    }
    if flags & !(O_NONBLOCK as u64 | O_CLOEXEC as u64) != 0 {
        return Err(EINVAL);
    }
    let t = TimerFd {
        clock: clock as u32,
        next: None,
        interval: 0,
        expired: 0,
    };
    install(k, Obj::TimerFd(t), flags, "timerfd")
}

fn timer_of(k: &mut Kernel, fd: u64) -> SysResult<(ObjId, TimerFd)> {
    let (_, d) = k.desc(fd)?;
    if let Target::Io { obj, .. } = d.target {
        if let Some(Obj::TimerFd(t)) = k.vfs.io.objs.get(&obj) {
            return Ok((obj, t.clone()));
        }
    }
    Err(EINVAL)
}

/// `struct itimerspec` of a timer now: its interval and the time left.
fn itimerspec(k: &Kernel, t: &TimerFd) -> [Timespec; 2] {
    let left = t.next.map_or(0, |n| n.saturating_sub(k.clock.now()).max(1));
    [Timespec::from_ns(t.interval), Timespec::from_ns(left)]
}

/// TimerfdGettime implements Linux syscall timerfd_gettime(2).
pub fn sys_timerfd_gettime(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, t) = timer_of(k, a[0])?;
    let v = itimerspec(k, &t);
    k.write_struct(a[1], &v)?;
    Ok(0)
}

/// TimerfdSettime implements Linux syscall timerfd_settime(2).
pub fn sys_timerfd_settime(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (fd, flags, new, old) = (a[0], a[1], a[2], a[3]);
    if flags & !(TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET) != 0 {
        return Err(EINVAL);
    }
    let (obj, t) = timer_of(k, fd)?;
    let spec: [Timespec; 2] = k.read_struct(new)?;
    let interval = spec[0].to_ns().ok_or(EINVAL)?;
    let value = spec[1].to_ns().ok_or(EINVAL)?;
    if old != 0 {
        let v = itimerspec(k, &t);
        k.write_struct(old, &v)?;
    }
    let now = k.clock.now();
    let next = match value {
        0 => None,
        v if flags & TFD_TIMER_ABSTIME == 0 => Some(now.saturating_add(v)),
        v if t.clock == 0 || t.clock == 8 => Some(k.clock.realtime_to_monotonic(v)),
        v => Some(v),
    };
    k.vfs.io.set_timer(obj, next, interval);
    // An expiry already due counts at once.
    k.fire_timerfds();
    Ok(0)
}

impl io::Objects {
    /// Arms (or with None disarms) timerfd `obj`; its unread count restarts.
    pub fn set_timer(&mut self, obj: ObjId, next: Option<u64>, interval: u64) {
        let Some(Obj::TimerFd(t)) = self.objs.get_mut(&obj) else {
            return;
        };
        if let Some(n) = t.next {
            self.timers.remove(&(n, obj));
        }
        let Some(Obj::TimerFd(t)) = self.objs.get_mut(&obj) else {
            return;
        };
        t.next = next;
        t.interval = interval;
        t.expired = 0;
        if let Some(n) = next {
            self.timers.insert((n, obj));
        }
        self.touch(obj);
    }

    /// The earliest armed timerfd expiry.
    pub fn next_timer(&self) -> Option<u64> {
        self.timers.first().map(|&(d, _)| d)
    }
}

impl Kernel<'_> {
    /// Counts the expirations of every timerfd due by now.
    pub fn fire_timerfds(&mut self) {
        let now = self.clock.now();
        let io = &mut self.vfs.io;
        while let Some(&(d, obj)) = io.timers.first() {
            if d > now {
                break;
            }
            io.timers.pop_first();
            let Some(Obj::TimerFd(t)) = io.objs.get_mut(&obj) else {
                continue;
            };
            let late = now - d;
            match late.checked_div(t.interval) {
                Some(more) => {
                    t.expired = t.expired.saturating_add(1 + more);
                    let n = d.saturating_add((more + 1).saturating_mul(t.interval));
                    // At the end of time (a saturated clock) it fires no more.
                    t.next = (n > now).then_some(n);
                    if n > now {
                        io.timers.insert((n, obj));
                    }
                }
                None => {
                    t.expired = t.expired.saturating_add(1);
                    t.next = None;
                }
            }
            io.touch(obj);
        }
    }
}
