//! Scheduling: one thread on the CPU at a time.
//!
//! Policy (schedule 0): the running thread keeps the CPU until it blocks,
//! exits or yields. The next thread is the front of a FIFO run queue; a
//! thread that becomes runnable (created, woken, yielding) joins the back.
//! When nothing is runnable, virtual time jumps to the earliest timer; when
//! no timer is armed either, the run is deadlocked. A thread that does
//! nothing but read the clock (`SPIN_CLOCK_READS` calls in a row) is waiting
//! for another thread: it yields, as a spinning thread on Linux loses its
//! core's time slice (Go's runtime spins on `nanotime` for another thread).

use super::errno::*;
use super::task::{Context, PendingCall, ThreadState, Tid, Wait};
use super::Kernel;
use crate::run::{EventKind, Perturbation};
use std::collections::{BTreeSet, VecDeque};

/// Clock reads in a row after which the running thread yields.
pub const SPIN_CLOCK_READS: u32 = 100;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Scheduler {
    pub current: Tid,
    pub runq: VecDeque<Tid>,
    /// Armed timeouts: (deadline in virtual ns, thread).
    pub timers: BTreeSet<(u64, Tid)>,
    /// The current thread asked to give up the CPU (sched_yield).
    pub yield_now: bool,
    /// System calls in a row of the current thread that only read the clock.
    #[serde(default)]
    pub clock_reads: u32,
    /// The schedule's perturbations; None for schedule 0.
    pub perturber: Option<crate::schedule::Perturber>,
    /// Interval timers (alarm, setitimer): (process, which) -> timer.
    #[serde(default)]
    pub itimers: std::collections::BTreeMap<(super::task::Pid, u32), super::time::ITimer>,
    /// POSIX timers (timer_create), of every process.
    pub posix: super::posix_timer::PosixTimers,
}

impl Scheduler {
    pub fn new(first: Tid) -> Scheduler {
        Scheduler {
            current: first,
            runq: VecDeque::new(),
            timers: BTreeSet::new(),
            yield_now: false,
            clock_reads: 0,
            perturber: None,
            itimers: Default::default(),
            posix: Default::default(),
        }
    }
}

/// What a blocking system call hands back to the dispatcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sys {
    /// Done: this goes to rax.
    Ret(u64),
    /// The thread is blocked; its result comes when it is woken.
    Blocked,
    /// The call does not return to its caller (exit, rt_sigreturn): rax is as the handler left it.
    NoReturn,
}

impl Scheduler {
    /// Counts the current thread's system call `nr` toward the clock-spin rule.
    pub fn note_call(&mut self, call: u32) {
        use super::syscalls::nr;
        if [nr::clock_gettime, nr::gettimeofday, nr::time].contains(&call) {
            self.clock_reads += 1;
        } else {
            self.clock_reads = 0;
        }
    }
}

impl Kernel<'_> {
    /// Blocks the current thread inside the call being served.
    pub fn block(&mut self, wait: Wait, deadline: Option<u64>, call: PendingCall) -> Sys {
        let tid = self.cur_tid();
        let t = self.cur_thread();
        t.state = ThreadState::Blocked { wait, deadline };
        t.pending_call = Some(call);
        if let Some(d) = deadline {
            self.sched.timers.insert((d, tid));
        }
        Sys::Blocked
    }

    /// Ends a blocked thread's call with `result`, records it and makes the thread runnable.
    pub fn wake(&mut self, tid: Tid, result: SysResult<u64>) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if let ThreadState::Blocked {
            deadline: Some(d), ..
        } = t.state
        {
            self.sched.timers.remove(&(d, tid));
        }
        t.state = ThreadState::Runnable;
        let call = t.pending_call.take();
        let rax = match result {
            Ok(v) => v,
            Err(e) => (-(e.0 as i64)) as u64,
        };
        self.set_rax(tid, rax);
        if let Some(call) = call {
            let text = super::render::call_text(self, tid, call);
            self.emit_for(
                tid,
                EventKind::Syscall {
                    nr: call.nr,
                    name: super::syscalls::name(call.nr).to_string(),
                    text: super::render::with_result(&text, rax as i64),
                    ret: rax as i64,
                },
            );
        }
        if tid != self.sched.current {
            self.sched.runq.push_back(tid);
        }
    }

    pub fn set_rax(&mut self, tid: Tid, v: u64) {
        if tid == self.sched.current {
            self.m.regs_mut().rax = v;
        } else if let Some(ctx) = self.threads.get_mut(&tid).and_then(|t| t.ctx.as_mut()) {
            ctx.regs.rax = v;
        }
    }

    /// Wakes every thread whose timeout has passed, with ETIMEDOUT (or 0 for a sleep).
    /// The earliest armed timer: a thread's timeout or an interval timer.
    fn next_deadline(&self) -> Option<u64> {
        let thread = self.sched.timers.first().map(|&(d, _)| d);
        let itimer = self.sched.itimers.values().map(|t| t.deadline).min();
        let timerfd = self.vfs.io.next_timer();
        let posix = self.sched.posix.next_deadline();
        thread
            .into_iter()
            .chain(itimer)
            .chain(timerfd)
            .chain(posix)
            .min()
    }

    pub fn fire_timers(&mut self) {
        self.fire_itimers();
        self.fire_posix_timers();
        self.fire_timerfds();
        while let Some(&(d, tid)) = self.sched.timers.first() {
            if d > self.clock.now() {
                break;
            }
            self.sched.timers.pop_first();
            let r = match &self.threads.get(&tid).map(|t| &t.state) {
                Some(ThreadState::Blocked {
                    wait: Wait::Stall, ..
                }) => {
                    self.threads.get_mut(&tid).unwrap().state = ThreadState::Runnable;
                    if tid != self.sched.current {
                        self.sched.runq.push_back(tid);
                    }
                    continue;
                }
                Some(ThreadState::Blocked {
                    wait: Wait::Sleep, ..
                }) => Ok(0),
                Some(ThreadState::Blocked {
                    wait: Wait::Futex { key, .. },
                    ..
                }) => {
                    let key = *key;
                    self.futexes.remove(key, tid);
                    Err(ETIMEDOUT)
                }
                Some(ThreadState::Blocked {
                    wait: Wait::Signal, ..
                }) => Err(EAGAIN),
                Some(ThreadState::Blocked { wait: Wait::Io, .. }) => {
                    // The call runs again and sees its deadline passed.
                    self.io_restart(tid);
                    continue;
                }
                _ => continue,
            };
            self.wake(tid, r);
        }
    }

    /// Puts the right thread on the CPU after a step. Err(lines) when deadlocked.
    pub fn schedule(&mut self) -> Result<(), Vec<String>> {
        // Threads blocked on descriptors that changed this step run again.
        self.io_wake();
        let cur = self.sched.current;
        let cur_alive = self.threads.contains_key(&cur);
        let mut cur_runnable = cur_alive && self.can_run(cur);
        self.points_change();
        // The spin rule first: a PCT schedule sees the spinning thread yield.
        if cur_runnable && self.points_yield() {
            self.sched.yield_now = true;
        }
        if cur_runnable && self.sched.clock_reads >= SPIN_CLOCK_READS {
            self.sched.yield_now = true;
        }
        cur_runnable = self.perturb(cur, cur_runnable);
        // Taken either way: a yield does not outlive the thread's step.
        let yielding = std::mem::take(&mut self.sched.yield_now);
        if cur_runnable && !yielding {
            return Ok(());
        }
        if cur_runnable {
            self.sched.runq.push_back(cur);
        }
        let next = loop {
            if let Some(n) = self.sched.runq.pop_front() {
                // A thread of a stopped process queues again when it continues.
                if self.can_run(n) {
                    break n;
                }
                continue;
            }
            if self.io_wake() {
                // As after a timer: a restarted current thread queues too.
                if self
                    .threads
                    .get(&cur)
                    .is_some_and(|t| t.state == ThreadState::Runnable)
                    && !self.sched.runq.contains(&cur)
                {
                    self.sched.runq.push_back(cur);
                }
                continue;
            }
            match self.next_deadline() {
                Some(d) => {
                    self.clock.advance_to(d);
                    self.fire_timers();
                    // A timer's signal may have ended the process (SIGALRM's default).
                    self.kill_doomed();
                    if self.is_finished() {
                        return Ok(());
                    }
                    // `wake` leaves the current thread out of the queue: it
                    // is off the CPU here (blocked), so it queues like any other.
                    if self.can_run(cur) && !self.sched.runq.contains(&cur) {
                        self.sched.runq.push_back(cur);
                    }
                }
                None => return Err(self.where_threads_are()),
            }
        };
        self.sched.clock_reads = 0;
        if next != cur {
            if let Err(e) = self.switch(cur_alive.then_some(cur), next) {
                self.engine_failure(e);
            }
        }
        Ok(())
    }

    /// Applies the schedule's perturbation at this step, if any. Returns
    /// whether the current thread is still runnable.
    fn perturb(&mut self, cur: Tid, cur_runnable: bool) -> bool {
        let step = self.step;
        let Some(p) = self.sched.perturber.as_mut() else {
            return cur_runnable;
        };
        let waiting: Vec<Tid> = self
            .sched
            .runq
            .iter()
            .copied()
            .filter(|t| {
                *t != cur
                    && self
                        .threads
                        .get(t)
                        .is_some_and(|t| t.state == ThreadState::Runnable)
            })
            .collect();
        let point = crate::schedule::Point {
            step,
            cur,
            cur_runnable,
            yielding: self.sched.yield_now,
            waiting: &waiting,
            made: self.points.made,
        };
        let Some(what) = p.planned(&point) else {
            return cur_runnable;
        };
        // As before PCT: any runnable thread in the queue counts.
        let others = self.sched.runq.iter().any(|t| {
            self.threads
                .get(t)
                .is_some_and(|t| t.state == ThreadState::Runnable)
        });
        match what {
            Perturbation::Switch { tid } => {
                // `tid` takes the CPU: to the front of the queue, and the
                // current thread (if runnable) behind the others.
                if !waiting.contains(&tid) {
                    return cur_runnable;
                }
                p.record(step, what);
                self.sched.runq.retain(|t| *t != tid);
                self.sched.runq.push_front(tid);
                self.sched.yield_now |= cur_runnable;
                cur_runnable
            }
            _ if !cur_runnable || !others => cur_runnable,
            Perturbation::Reschedule => {
                p.record(step, what);
                self.sched.yield_now = true;
                true
            }
            Perturbation::Stall { ns } => {
                p.record(step, what);
                let deadline = self.clock.now().saturating_add(ns);
                self.threads.get_mut(&cur).unwrap().state = ThreadState::Blocked {
                    wait: Wait::Stall,
                    deadline: Some(deadline),
                };
                self.sched.timers.insert((deadline, cur));
                false
            }
        }
    }

    /// Keeps the registers of the thread on the CPU in its context, as
    /// when it leaves the CPU.
    pub(super) fn save_current(&mut self) -> Result<(), crate::EngineError> {
        let ctx = Context {
            regs: self.m.regs(),
            fs_base: self.m.fs_base(),
            gs_base: self.m.gs_base(),
            xstate: self.m.save_xstate()?,
        };
        let cur = self.sched.current;
        if let Some(t) = self.threads.get_mut(&cur) {
            t.ctx = Some(ctx);
        }
        Ok(())
    }

    fn switch(&mut self, from: Option<Tid>, to: Tid) -> Result<(), crate::EngineError> {
        self.points_switch(from, to)?;
        if from.is_some() {
            self.save_current()?;
        }
        let from_pid = from.and_then(|f| self.threads.get(&f)).map(|t| t.pid);
        let t = self.threads.get_mut(&to).unwrap();
        let ctx = t.ctx.take().expect("a thread off the CPU has a context");
        let pid = t.pid;
        *self.m.regs_mut() = ctx.regs;
        self.m.set_segment_bases(ctx.fs_base, ctx.gs_base);
        if let Some(x) = &ctx.xstate {
            self.m.restore_xstate(x)?;
        }
        if from_pid != Some(pid) {
            let pt = self.procs[&pid].mm.pt;
            self.m.set_address_space(pt);
        }
        self.sched.current = to;
        // The switch happens after this step; the new thread's first exit is the next.
        self.recorded.switches += 1;
        self.rec.switch(self.step + 1, pid, to);
        Ok(())
    }
}

/// SchedYield implements Linux syscall sched_yield(2).
pub fn sys_sched_yield(k: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    k.sched.yield_now = true;
    Ok(0)
}

/// Reports `--cores` CPUs.
/// SchedGetaffinity implements Linux syscall sched_getaffinity(2).
pub fn sys_sched_getaffinity(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (len, mask) = (a[1] as usize, a[2]);
    let cores = k.inputs.manifest.cores.max(1) as usize;
    let need = cores.div_ceil(64) * 8;
    if len < need || len % 8 != 0 {
        return Err(EINVAL);
    }
    let mut bytes = vec![0u8; need];
    for c in 0..cores {
        bytes[c / 8] |= 1 << (c % 8);
    }
    k.write_user(mask, &bytes)?;
    Ok(need as u64)
}

/// SchedSetaffinity implements Linux syscall sched_setaffinity(2).
/// Partial (sched_setaffinity): accepted and ignored: one virtual CPU runs every thread.
pub fn sys_sched_setaffinity(_: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(0)
}

const SCHED_OTHER: u64 = 0;
const SCHED_FIFO: u64 = 1;
const SCHED_RR: u64 = 2;
const SCHED_BATCH: u64 = 3;
const SCHED_IDLE: u64 = 5;

/// The thread a sched_* call names (0: the caller): EINVAL for a negative
/// id, ESRCH for one no thread has.
fn sched_target(k: &Kernel, tid: u64) -> SysResult<()> {
    match tid as i32 {
        t if t < 0 => Err(EINVAL),
        0 => Ok(()),
        t if k.threads.contains_key(&(t as Tid)) => Ok(()),
        _ => Err(ESRCH),
    }
}

/// Sched_getscheduler implements Linux syscall sched_getscheduler(2):
/// every thread is SCHED_OTHER.
pub fn sys_sched_getscheduler(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sched_target(k, a[0])?;
    Ok(SCHED_OTHER)
}

/// Sched_setscheduler implements Linux syscall sched_setscheduler(2).
/// Partial (sched_setscheduler): SCHED_OTHER, SCHED_BATCH and SCHED_IDLE are accepted and run alike; real-time policies get EPERM.
pub fn sys_sched_setscheduler(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sched_target(k, a[0])?;
    let prio = k.read_u32(a[2])? as i32;
    // SCHED_RESET_ON_FORK may be or-ed in.
    match a[1] & !0x4000_0000 {
        SCHED_OTHER | SCHED_BATCH | SCHED_IDLE if prio == 0 => Ok(0),
        SCHED_FIFO | SCHED_RR if (1..=99).contains(&prio) => Err(EPERM),
        _ => Err(EINVAL),
    }
}

/// Sched_getparam implements Linux syscall sched_getparam(2): priority 0.
pub fn sys_sched_getparam(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sched_target(k, a[0])?;
    k.write_u32(a[1], 0)?;
    Ok(0)
}

/// Sched_setparam implements Linux syscall sched_setparam(2): SCHED_OTHER
/// takes priority 0 only.
pub fn sys_sched_setparam(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sched_target(k, a[0])?;
    match k.read_u32(a[1])? {
        0 => Ok(0),
        _ => Err(EINVAL),
    }
}

/// The priorities a policy takes, as Linux gives them.
fn priority_range(policy: u64) -> SysResult<(u64, u64)> {
    match policy {
        SCHED_FIFO | SCHED_RR => Ok((1, 99)),
        SCHED_OTHER | SCHED_BATCH | SCHED_IDLE => Ok((0, 0)),
        _ => Err(EINVAL),
    }
}

/// Sched_get_priority_max implements Linux syscall sched_get_priority_max(2).
pub fn sys_sched_get_priority_max(_: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    priority_range(a[0]).map(|r| r.1)
}

/// Sched_get_priority_min implements Linux syscall sched_get_priority_min(2).
pub fn sys_sched_get_priority_min(_: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    priority_range(a[0]).map(|r| r.0)
}

/// Sched_rr_get_interval implements Linux syscall sched_rr_get_interval(2):
/// a step's quantum of virtual time.
pub fn sys_sched_rr_get_interval(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sched_target(k, a[0])?;
    let q = k.inputs.manifest.quantum_ns;
    let ts = super::time::Timespec {
        sec: (q / 1_000_000_000) as i64,
        nsec: (q % 1_000_000_000) as i64,
    };
    k.write_struct(a[1], &ts)?;
    Ok(0)
}

const PRIO_PROCESS: u64 = 0;
const PRIO_PGRP: u64 = 1;
const PRIO_USER: u64 = 2;

/// The processes getpriority/setpriority name: a process, a group or a
/// user's (every process is root's), 0 meaning the caller's.
fn prio_targets(k: &Kernel, which: u64, who: u64) -> SysResult<Vec<super::task::Pid>> {
    let me = k.threads[&k.sched.current].pid;
    let who = who as u32;
    let found: Vec<_> = match which {
        PRIO_PROCESS => {
            let pid = if who == 0 { me } else { who };
            k.procs.keys().copied().filter(|p| *p == pid).collect()
        }
        PRIO_PGRP => {
            let pgid = if who == 0 { k.procs[&me].pgid } else { who };
            k.procs
                .iter()
                .filter(|(_, p)| p.pgid == pgid)
                .map(|(pid, _)| *pid)
                .collect()
        }
        PRIO_USER if who == 0 => k.procs.keys().copied().collect(),
        PRIO_USER => Vec::new(),
        _ => return Err(EINVAL),
    };
    if found.is_empty() {
        return Err(ESRCH);
    }
    Ok(found)
}

/// Getpriority implements Linux syscall getpriority(2): 20 - nice of the
/// highest-priority process named.
pub fn sys_getpriority(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let pids = prio_targets(k, a[0], a[1])?;
    let nice = pids.iter().map(|p| k.procs[p].nice).min().unwrap_or(0);
    Ok((20 - nice) as u64)
}

/// Setpriority implements Linux syscall setpriority(2).
/// Partial (setpriority): the nice value is kept and inherited, but does not change the schedule.
pub fn sys_setpriority(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let pids = prio_targets(k, a[0], a[1])?;
    let nice = (a[2] as i32).clamp(-20, 19);
    for p in pids {
        k.procs.get_mut(&p).unwrap().nice = nice;
    }
    Ok(0)
}

const MEMBARRIER_CMD_QUERY: u64 = 0;
/// GLOBAL, GLOBAL_EXPEDITED and its registration, PRIVATE_EXPEDITED and
/// its registration, and the SYNC_CORE pair.
const MEMBARRIER_SUPPORTED: u64 = 1 | 2 | 4 | 8 | 16 | 32 | 64;

/// Membarrier implements Linux syscall membarrier(2): one virtual CPU runs
/// every thread, so every barrier is already there.
pub fn sys_membarrier(_: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[1] != 0 {
        return Err(EINVAL);
    }
    match a[0] {
        MEMBARRIER_CMD_QUERY => Ok(MEMBARRIER_SUPPORTED),
        c if c & MEMBARRIER_SUPPORTED == c && c.is_power_of_two() => Ok(0),
        _ => Err(EINVAL),
    }
}

/// Getcpu implements Linux syscall getcpu(2).
pub fn sys_getcpu(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[0] != 0 {
        k.write_u32(a[0], 0)?;
    }
    if a[1] != 0 {
        k.write_u32(a[1], 0)?;
    }
    Ok(0)
}
