//! Virtual time: every step adds a fixed quantum; when every thread is
//! blocked, time jumps to the next timer. clock_gettime, gettimeofday, time,
//! nanosleep, clock_nanosleep.

use super::errno::*;
use super::sched::Sys;
use super::task::{PendingCall, Wait};
use super::Kernel;
use crate::kernel::syscalls::nr;

/// CLOCK_MONOTONIC at step 0: a machine that "booted" a second ago.
const MONOTONIC_START_NS: u64 = 1_000_000_000;
const NS_PER_SEC: u64 = 1_000_000_000;

pub const CLOCK_REALTIME: u64 = 0;
pub const CLOCK_MONOTONIC: u64 = 1;
pub const CLOCK_PROCESS_CPUTIME_ID: u64 = 2;
pub const CLOCK_THREAD_CPUTIME_ID: u64 = 3;
pub const CLOCK_MONOTONIC_RAW: u64 = 4;
pub const CLOCK_REALTIME_COARSE: u64 = 5;
pub const CLOCK_MONOTONIC_COARSE: u64 = 6;
pub const CLOCK_BOOTTIME: u64 = 7;
const TIMER_ABSTIME: u64 = 1;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Clock {
    now: u64,
    epoch_ns: u64,
    quantum: u64,
}

impl Clock {
    pub fn new(epoch_secs: u64, quantum_ns: u64) -> Clock {
        Clock {
            now: MONOTONIC_START_NS,
            epoch_ns: epoch_secs.saturating_mul(NS_PER_SEC),
            quantum: quantum_ns,
        }
    }
    /// CLOCK_MONOTONIC in ns.
    pub fn now(&self) -> u64 {
        self.now
    }
    pub fn realtime(&self) -> u64 {
        self.epoch_ns.saturating_add(self.elapsed_ns())
    }
    pub fn elapsed_ns(&self) -> u64 {
        self.now.saturating_sub(MONOTONIC_START_NS)
    }
    pub fn tick(&mut self) {
        // A sleep of u64::MAX ns may have jumped the clock to the end of time.
        self.now = self.now.saturating_add(self.quantum);
    }
    /// Whether a restored clock is one this code could have made.
    pub fn is_sane(&self) -> bool {
        self.now >= MONOTONIC_START_NS && (1..=1_000_000_000).contains(&self.quantum)
    }
    pub fn advance_to(&mut self, t: u64) {
        self.now = self.now.max(t);
    }
    pub fn realtime_to_monotonic(&self, rt: u64) -> u64 {
        (rt.saturating_sub(self.epoch_ns)).saturating_add(MONOTONIC_START_NS)
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Timespec {
    pub sec: i64,
    pub nsec: i64,
}

impl Timespec {
    pub fn from_ns(ns: u64) -> Timespec {
        Timespec {
            sec: (ns / NS_PER_SEC) as i64,
            nsec: (ns % NS_PER_SEC) as i64,
        }
    }
    /// None when invalid (negative, nsec out of range).
    pub fn to_ns(self) -> Option<u64> {
        if self.sec < 0 || !(0..NS_PER_SEC as i64).contains(&self.nsec) {
            return None;
        }
        (self.sec as u64)
            .checked_mul(NS_PER_SEC)?
            .checked_add(self.nsec as u64)
            .or(Some(u64::MAX))
    }
}

/// `struct timeval`: seconds and microseconds.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Timeval {
    pub sec: i64,
    pub usec: i64,
}

impl Timeval {
    pub fn from_ns(ns: u64) -> Timeval {
        Timeval {
            sec: (ns / NS_PER_SEC) as i64,
            usec: ((ns % NS_PER_SEC) / 1000) as i64,
        }
    }
    /// None when invalid (negative, usec out of range).
    pub fn to_ns(self) -> Option<u64> {
        if self.sec < 0 || !(0..1_000_000).contains(&self.usec) {
            return None;
        }
        Some(
            (self.sec as u64)
                .saturating_mul(NS_PER_SEC)
                .saturating_add(self.usec as u64 * 1000),
        )
    }
}

impl Kernel<'_> {
    fn clock_ns(&self, id: u64) -> SysResult<u64> {
        match id {
            CLOCK_REALTIME | CLOCK_REALTIME_COARSE => Ok(self.clock.realtime()),
            CLOCK_MONOTONIC | CLOCK_MONOTONIC_RAW | CLOCK_MONOTONIC_COARSE | CLOCK_BOOTTIME => {
                Ok(self.clock.now())
            }
            CLOCK_PROCESS_CPUTIME_ID | CLOCK_THREAD_CPUTIME_ID => Ok(self.clock.elapsed_ns()),
            _ => Err(EINVAL),
        }
    }
}

/// ClockGettime implements Linux syscall clock_gettime(2).
pub fn sys_clock_gettime(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let ns = k.clock_ns(a[0])?;
    k.write_struct(a[1], &Timespec::from_ns(ns))?;
    Ok(0)
}

/// ClockGetres implements Linux syscall clock_getres(2).
pub fn sys_clock_getres(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.clock_ns(a[0])?;
    if a[1] != 0 {
        k.write_struct(a[1], &Timespec { sec: 0, nsec: 1 })?;
    }
    Ok(0)
}

/// Gettimeofday implements Linux syscall gettimeofday(2).
pub fn sys_gettimeofday(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[0] != 0 {
        k.write_struct(a[0], &Timeval::from_ns(k.clock.realtime()))?;
    }
    if a[1] != 0 {
        k.write_user(a[1], &[0u8; 8])?;
    }
    Ok(0)
}

/// Time implements Linux syscall time(2).
pub fn sys_time(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let s = k.clock.realtime() / NS_PER_SEC;
    if a[0] != 0 {
        k.write_u64(a[0], s)?;
    }
    Ok(s)
}

/// Clock ticks a second (`sysconf(_SC_CLK_TCK)`), as /proc counts them too.
const CLK_TCK: u64 = 100;

/// Times implements Linux syscall times(2): the run's virtual time since
/// it started, in clock ticks, as the process's user time (its children's
/// are not counted).
pub fn sys_times(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let ticks = k.clock.elapsed_ns() / (NS_PER_SEC / CLK_TCK);
    if a[0] != 0 {
        let mut tms = [0u8; 32];
        tms[..8].copy_from_slice(&ticks.to_le_bytes());
        k.write_user(a[0], &tms)?;
    }
    Ok(ticks)
}

fn sleep_until(k: &mut Kernel, deadline: u64, call: PendingCall) -> Sys {
    k.block(Wait::Sleep, Some(deadline), call)
}

/// Nanosleep implements Linux syscall nanosleep(2).
pub fn sys_nanosleep(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let ts: Timespec = k.read_struct(a[0])?;
    let ns = ts.to_ns().ok_or(EINVAL)?;
    let deadline = k.clock.now().saturating_add(ns);
    Ok(sleep_until(
        k,
        deadline,
        PendingCall {
            nr: nr::nanosleep,
            args: a,
        },
    ))
}

/// ClockNanosleep implements Linux syscall clock_nanosleep(2).
pub fn sys_clock_nanosleep(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (id, flags) = (a[0], a[1]);
    let ts: Timespec = k.read_struct(a[2])?;
    let ns = ts.to_ns().ok_or(EINVAL)?;
    k.clock_ns(id)?;
    let deadline = if flags & TIMER_ABSTIME != 0 {
        if id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE {
            k.clock.realtime_to_monotonic(ns)
        } else {
            ns
        }
    } else {
        k.clock.now().saturating_add(ns)
    };
    Ok(sleep_until(
        k,
        deadline,
        PendingCall {
            nr: nr::clock_nanosleep,
            args: a,
        },
    ))
}

pub const ITIMER_REAL: u32 = 0;
pub const ITIMER_VIRTUAL: u32 = 1;
pub const ITIMER_PROF: u32 = 2;

/// An armed interval timer of a process. Virtual time is the only time, so
/// the real, virtual and profiling timers all count it; they differ in the
/// signal they send (SIGALRM, SIGVTALRM, SIGPROF).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ITimer {
    pub deadline: u64,
    /// Re-armed this much later when it fires; 0 fires once.
    pub interval: u64,
}

fn itimer_signal(which: u32) -> i32 {
    use super::signal::{SIGALRM, SIGPROF, SIGVTALRM};
    match which {
        ITIMER_VIRTUAL => SIGVTALRM,
        ITIMER_PROF => SIGPROF,
        _ => SIGALRM,
    }
}

impl Kernel<'_> {
    /// Sends the signal of every interval timer that expired, and re-arms it.
    pub(super) fn fire_itimers(&mut self) {
        let now = self.clock.now();
        let due: Vec<((super::task::Pid, u32), ITimer)> = self
            .sched
            .itimers
            .iter()
            .filter(|(_, t)| t.deadline <= now)
            .map(|(k, t)| (*k, *t))
            .collect();
        for ((pid, which), t) in due {
            match (now - t.deadline).checked_div(t.interval) {
                // One-shot: gone once fired.
                None => {
                    self.sched.itimers.remove(&(pid, which));
                }
                // Periodic: the next multiple of the interval after now.
                Some(missed) => {
                    let next = t
                        .deadline
                        .saturating_add((missed + 1).saturating_mul(t.interval));
                    self.sched.itimers.get_mut(&(pid, which)).unwrap().deadline = next;
                }
            }
            let info =
                super::signal::SigInfo::sent(itimer_signal(which), super::signal::SI_KERNEL, 0);
            self.send_signal(super::signal::Target::Process(pid), info);
        }
    }

    /// Arms (or with a zero value disarms) a timer; returns the old one's
    /// (remaining, interval) in ns.
    fn set_itimer(&mut self, which: u32, value: u64, interval: u64) -> (u64, u64) {
        let pid = self.cur_pid();
        let now = self.clock.now();
        let old = match self.sched.itimers.get(&(pid, which)) {
            Some(t) => (t.deadline.saturating_sub(now), t.interval),
            None => (0, 0),
        };
        if value == 0 {
            self.sched.itimers.remove(&(pid, which));
        } else {
            self.sched.itimers.insert(
                (pid, which),
                ITimer {
                    deadline: now.saturating_add(value),
                    interval,
                },
            );
        }
        old
    }

    fn get_itimer(&mut self, which: u32) -> (u64, u64) {
        let pid = self.cur_pid();
        let now = self.clock.now();
        self.sched
            .itimers
            .get(&(pid, which))
            .map_or((0, 0), |t| (t.deadline.saturating_sub(now), t.interval))
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct ITimerVal {
    interval: Timeval,
    value: Timeval,
}

/// alarm(seconds): the seconds left of the previous alarm, rounded up.
/// Alarm implements Linux syscall alarm(2).
pub fn sys_alarm(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let secs = a[0] & 0xffff_ffff;
    let (left, _) = k.set_itimer(ITIMER_REAL, secs * NS_PER_SEC, 0);
    Ok(left.div_ceil(NS_PER_SEC))
}

/// Setitimer implements Linux syscall setitimer(2).
pub fn sys_setitimer(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let which = a[0] as u32;
    if which > ITIMER_PROF {
        return Err(EINVAL);
    }
    let new = if a[1] == 0 {
        ITimerVal::default()
    } else {
        k.read_struct::<ITimerVal>(a[1])?
    };
    let (value, interval) = (
        new.value.to_ns().ok_or(EINVAL)?,
        new.interval.to_ns().ok_or(EINVAL)?,
    );
    let (left, every) = k.set_itimer(which, value, interval);
    if a[2] != 0 {
        let old = ITimerVal {
            interval: Timeval::from_ns(every),
            value: Timeval::from_ns(left),
        };
        k.write_struct(a[2], &old)?;
    }
    Ok(0)
}

/// Getitimer implements Linux syscall getitimer(2).
pub fn sys_getitimer(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let which = a[0] as u32;
    if which > ITIMER_PROF {
        return Err(EINVAL);
    }
    let (left, every) = k.get_itimer(which);
    let v = ITimerVal {
        interval: Timeval::from_ns(every),
        value: Timeval::from_ns(left),
    };
    k.write_struct(a[1], &v)?;
    Ok(0)
}
