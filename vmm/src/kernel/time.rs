//! Virtual time: every step adds a fixed quantum; when every thread is
//! blocked, time jumps to the next timer. clock_gettime, gettimeofday, time,
//! nanosleep, clock_nanosleep.

use super::errno::*;
use super::sched::Sys;
use super::task::{PendingCall, Wait};
use super::Kernel;

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
        self.epoch_ns + (self.now - MONOTONIC_START_NS)
    }
    pub fn elapsed_ns(&self) -> u64 {
        self.now - MONOTONIC_START_NS
    }
    pub fn tick(&mut self) {
        self.now += self.quantum;
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

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Timeval {
    sec: i64,
    usec: i64,
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

pub fn sys_clock_gettime(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let ns = k.clock_ns(a[0])?;
    k.write_struct(a[1], &Timespec::from_ns(ns))?;
    Ok(0)
}

pub fn sys_clock_getres(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.clock_ns(a[0])?;
    if a[1] != 0 {
        k.write_struct(a[1], &Timespec { sec: 0, nsec: 1 })?;
    }
    Ok(0)
}

pub fn sys_gettimeofday(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[0] != 0 {
        let ns = k.clock.realtime();
        let tv = Timeval {
            sec: (ns / NS_PER_SEC) as i64,
            usec: ((ns % NS_PER_SEC) / 1000) as i64,
        };
        k.write_struct(a[0], &tv)?;
    }
    if a[1] != 0 {
        k.write_user(a[1], &[0u8; 8])?;
    }
    Ok(0)
}

pub fn sys_time(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let s = k.clock.realtime() / NS_PER_SEC;
    if a[0] != 0 {
        k.write_u64(a[0], s)?;
    }
    Ok(s)
}

fn sleep_until(k: &mut Kernel, deadline: u64, call: PendingCall) -> Sys {
    k.block(Wait::Sleep, Some(deadline), call)
}

pub fn sys_nanosleep(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let ts: Timespec = k.read_struct(a[0])?;
    let ns = ts.to_ns().ok_or(EINVAL)?;
    let deadline = k.clock.now().saturating_add(ns);
    Ok(sleep_until(k, deadline, PendingCall { nr: 35, args: a }))
}

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
    Ok(sleep_until(k, deadline, PendingCall { nr: 230, args: a }))
}
