//! POSIX timers: timer_create, timer_settime, timer_gettime,
//! timer_getoverrun and timer_delete, on the run's virtual clock.
//!
//! A timer belongs to its process (ids count from 0 in each process, as on
//! Linux); a fork's child has none and execve deletes them. When a timer
//! expires (`Kernel::fire_posix_timers`, with the other timers of the
//! clock) it queues its signal (SI_TIMER, si_timerid, si_value) to its
//! process or, with SIGEV_THREAD_ID, to one of its threads; SIGEV_NONE
//! queues nothing. While that signal is still queued, later expirations
//! only count as overruns, which the signal carries when it is taken
//! (`timer_dequeued`) and timer_getoverrun reports after. glibc's
//! SIGEV_THREAD is SIGEV_THREAD_ID to its helper thread. The CPU-time
//! clocks count virtual time, as CLOCK_PROCESS_CPUTIME_ID reads it. Every
//! timer is kernel state, so keyframes carry them.

use super::errno::*;
use super::signal::{SigInfo, Target, NSIG, SIGALRM, SI_TIMER};
use super::task::{Pid, Tid};
use super::time::{Timespec, CLOCK_BOOTTIME, CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID};
use super::time::{CLOCK_REALTIME, CLOCK_THREAD_CPUTIME_ID};
use super::Kernel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const SIGEV_SIGNAL: i32 = 0;
const SIGEV_NONE: i32 = 1;
const SIGEV_THREAD: i32 = 2;
const SIGEV_THREAD_ID: i32 = 4;
const TIMER_ABSTIME: u64 = 1;
const CLOCK_REALTIME_ALARM: u64 = 8;
const CLOCK_BOOTTIME_ALARM: u64 = 9;
/// Timers one process may hold (Linux bounds them by RLIMIT_SIGPENDING).
pub const MAX_TIMERS: usize = 4096;
/// Overruns saturate here (Linux's DELAYTIMER_MAX).
const DELAYTIMER_MAX: u64 = i32::MAX as u64;

/// What an expiry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Notify {
    None,
    Signal {
        signo: i32,
        value: u64,
        /// SIGEV_THREAD_ID: this thread; else the process.
        thread: Option<Tid>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PosixTimer {
    /// Its clock id (CLOCK_REALTIME's absolute times are wall-clock ones).
    pub clock: u64,
    pub notify: Notify,
    /// The next expiry, monotonic virtual ns; None: disarmed.
    pub deadline: Option<u64>,
    pub interval: u64,
    /// Its signal is queued and not yet taken.
    pub queued: bool,
    /// Expirations while it was queued.
    pub overrun: u64,
    /// The overrun of the last signal taken (timer_getoverrun).
    pub last_overrun: u64,
}

/// Every process's POSIX timers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PosixTimers {
    pub timers: BTreeMap<(Pid, i32), PosixTimer>,
    /// The id each process's next timer gets.
    next: BTreeMap<Pid, i32>,
}

impl PosixTimers {
    /// The earliest armed expiry.
    pub fn next_deadline(&self) -> Option<u64> {
        self.timers.values().filter_map(|t| t.deadline).min()
    }

    /// A process ends or execs: its timers go.
    pub fn forget_process(&mut self, pid: Pid) {
        self.timers.retain(|(p, _), _| *p != pid);
        self.next.remove(&pid);
    }

    fn count(&self, pid: Pid) -> usize {
        self.timers.range((pid, i32::MIN)..=(pid, i32::MAX)).count()
    }
}

/// `struct sigevent`'s fields the kernel reads.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct SigEvent {
    value: u64,
    signo: i32,
    notify: i32,
    tid: i32,
    pad: [u32; 11],
}

impl Kernel<'_> {
    /// Linux's good_sigevent: what an expiry of a new timer does.
    fn notify_of(&self, ev: SigEvent) -> SysResult<Notify> {
        let signal = |thread| {
            if ev.signo <= 0 || ev.signo as usize > NSIG {
                return Err(EINVAL);
            }
            Ok(Notify::Signal {
                signo: ev.signo,
                value: ev.value,
                thread,
            })
        };
        match ev.notify {
            SIGEV_NONE => Ok(Notify::None),
            SIGEV_SIGNAL | SIGEV_THREAD => signal(None),
            SIGEV_THREAD_ID => {
                let tid = ev.tid as Tid;
                match self.threads.get(&tid) {
                    Some(t) if ev.tid > 0 && t.pid == self.cur_pid() => signal(Some(tid)),
                    _ => Err(EINVAL),
                }
            }
            _ => Err(EINVAL),
        }
    }

    /// A CPU-time clock id as clock_getcpuclockid makes it (negative: the
    /// pid or tid, and whether it is a thread's): the process's or the
    /// thread's own CPU-time clock, which glibc's timer_create names with
    /// pid 0. Some(id) for one of the caller's own; None for a clock id
    /// that is not one; EINVAL for another process's or a bad one.
    fn cpu_clock(&self, id: i32) -> SysResult<Option<u64>> {
        if id >= 0 {
            return Ok(None);
        }
        let who = !(id >> 3) as u32;
        let thread = id & 4 != 0;
        if id & 3 == 3 {
            return Err(EINVAL);
        }
        let mine = who == 0
            || if thread {
                who == self.cur_tid()
            } else {
                who == self.cur_pid()
            };
        match (mine, thread) {
            (false, _) => Err(EINVAL),
            (true, true) => Ok(Some(CLOCK_THREAD_CPUTIME_ID)),
            (true, false) => Ok(Some(CLOCK_PROCESS_CPUTIME_ID)),
        }
    }

    /// `t` on `clock` as monotonic virtual ns.
    fn timer_clock_to_monotonic(&self, clock: u64, t: u64) -> u64 {
        match clock {
            CLOCK_REALTIME | CLOCK_REALTIME_ALARM => self.clock.realtime_to_monotonic(t),
            CLOCK_PROCESS_CPUTIME_ID | CLOCK_THREAD_CPUTIME_ID => {
                t.saturating_add(self.clock.now() - self.clock.elapsed_ns())
            }
            _ => t,
        }
    }

    fn timer_mut(&mut self, id: u64) -> SysResult<&mut PosixTimer> {
        let pid = self.cur_pid();
        let id = i32::try_from(id as i64).map_err(|_| EINVAL)?;
        self.sched.posix.timers.get_mut(&(pid, id)).ok_or(EINVAL)
    }

    /// The timer's (time left, interval), in ns.
    fn timer_left(&self, t: &PosixTimer) -> (u64, u64) {
        let left = t.deadline.map_or(0, |d| d.saturating_sub(self.clock.now()));
        (left, t.interval)
    }

    /// Queues the signal of every timer due by now, and re-arms the periodic ones.
    pub(super) fn fire_posix_timers(&mut self) {
        let now = self.clock.now();
        let due: Vec<(Pid, i32)> = self
            .sched
            .posix
            .timers
            .iter()
            .filter(|(_, t)| t.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| *k)
            .collect();
        for key in due {
            let t = self.sched.posix.timers.get_mut(&key).unwrap();
            let d = t.deadline.unwrap();
            // Periods that passed beyond the first (a late jump of the clock).
            let missed = match (now - d).checked_div(t.interval) {
                Some(m) => {
                    let next = d.saturating_add((m + 1).saturating_mul(t.interval));
                    t.deadline = (next > now).then_some(next);
                    m
                }
                None => {
                    t.deadline = None;
                    0
                }
            };
            let Notify::Signal {
                signo,
                value,
                thread,
            } = t.notify
            else {
                continue;
            };
            if t.queued {
                t.overrun = t.overrun.saturating_add(1 + missed).min(DELAYTIMER_MAX);
                continue;
            }
            t.overrun = missed.min(DELAYTIMER_MAX);
            let (pid, id) = key;
            let info = SigInfo {
                signo,
                code: SI_TIMER,
                pid: id as u32,
                value,
                ..Default::default()
            };
            let to = thread.map_or(Target::Process(pid), Target::Thread);
            let queued = self.send_signal(to, info);
            if let Some(t) = self.sched.posix.timers.get_mut(&key) {
                t.queued = queued;
            }
        }
    }

    /// A timer's signal is being taken: it carries the overruns counted
    /// while it waited, which timer_getoverrun reports from now on.
    pub(super) fn timer_dequeued(&mut self, pid: Pid, info: &mut SigInfo) {
        if info.code != SI_TIMER {
            return;
        }
        let Some(t) = self.sched.posix.timers.get_mut(&(pid, info.pid as i32)) else {
            return;
        };
        t.queued = false;
        t.last_overrun = std::mem::take(&mut t.overrun);
        info.uid = t.last_overrun as u32;
    }
}

/// TimerCreate implements Linux syscall timer_create(2).
pub fn sys_timer_create(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (uev, uid) = (a[1], a[2]);
    let clock = k.cpu_clock(a[0] as i32)?.unwrap_or(a[0]);
    match clock {
        CLOCK_REALTIME
        | CLOCK_MONOTONIC
        | CLOCK_BOOTTIME
        | CLOCK_PROCESS_CPUTIME_ID
        | CLOCK_THREAD_CPUTIME_ID
        | CLOCK_REALTIME_ALARM
        | CLOCK_BOOTTIME_ALARM => {}
        _ => return Err(EINVAL),
    }
    let pid = k.cur_pid();
    let notify = if uev == 0 {
        None
    } else {
        let ev = k.read_struct::<SigEvent>(uev)?;
        Some(k.notify_of(ev)?)
    };
    if k.sched.posix.count(pid) >= MAX_TIMERS {
        return Err(EAGAIN);
    }
    let timers = &mut k.sched.posix;
    let mut id = timers.next.get(&pid).copied().unwrap_or(0);
    while timers.timers.contains_key(&(pid, id)) {
        id = id.checked_add(1).unwrap_or(0);
    }
    timers.next.insert(pid, id.checked_add(1).unwrap_or(0));
    // Without a sigevent: SIGALRM, with the timer's id as its value.
    let notify = notify.unwrap_or(Notify::Signal {
        signo: SIGALRM,
        value: id as u64,
        thread: None,
    });
    k.write_user(uid, &id.to_le_bytes())?;
    k.sched.posix.timers.insert(
        (pid, id),
        PosixTimer {
            clock,
            notify,
            deadline: None,
            interval: 0,
            queued: false,
            overrun: 0,
            last_overrun: 0,
        },
    );
    Ok(0)
}

/// TimerSettime implements Linux syscall timer_settime(2).
pub fn sys_timer_settime(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (id, flags, unew, uold) = (a[0], a[1], a[2], a[3]);
    k.timer_mut(id)?;
    if unew == 0 {
        return Err(EINVAL);
    }
    let spec: [Timespec; 2] = k.read_struct(unew)?;
    let interval = spec[0].to_ns().ok_or(EINVAL)?;
    let value = spec[1].to_ns().ok_or(EINVAL)?;
    let t = k.timer_mut(id)?.clone();
    if uold != 0 {
        let (left, every) = k.timer_left(&t);
        k.write_struct(uold, &[Timespec::from_ns(every), Timespec::from_ns(left)])?;
    }
    let deadline = match value {
        0 => None,
        v if flags & TIMER_ABSTIME != 0 => Some(k.timer_clock_to_monotonic(t.clock, v)),
        v => Some(k.clock.now().saturating_add(v)),
    };
    let t = k.timer_mut(id)?;
    t.deadline = deadline;
    t.interval = if deadline.is_some() { interval } else { 0 };
    t.overrun = 0;
    Ok(0)
}

/// TimerGettime implements Linux syscall timer_gettime(2).
pub fn sys_timer_gettime(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let t = k.timer_mut(a[0])?.clone();
    let (left, every) = k.timer_left(&t);
    k.write_struct(a[1], &[Timespec::from_ns(every), Timespec::from_ns(left)])?;
    Ok(0)
}

/// TimerGetoverrun implements Linux syscall timer_getoverrun(2).
pub fn sys_timer_getoverrun(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    Ok(k.timer_mut(a[0])?.last_overrun)
}

/// TimerDelete implements Linux syscall timer_delete(2): the timer goes,
/// and with it a signal of it still queued.
pub fn sys_timer_delete(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.timer_mut(a[0])?;
    let pid = k.cur_pid();
    let id = a[0] as i64 as i32;
    k.sched.posix.timers.remove(&(pid, id));
    let mine = |s: &SigInfo| s.code == SI_TIMER && s.pid == id as u32;
    let p = k.procs.get_mut(&pid).unwrap();
    p.signals.shared.retain(|s| !mine(s));
    for tid in p.threads.clone() {
        if let Some(t) = k.threads.get_mut(&tid) {
            t.signals.pending.retain(|s| !mine(s));
        }
    }
    Ok(0)
}
