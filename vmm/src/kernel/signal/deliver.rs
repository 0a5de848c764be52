//! Generation, delivery and interrupted calls: how a signal reaches a
//! thread and what becomes of the call it was blocked in (the model is in
//! `signal.rs`'s header).

use super::*;
use crate::kernel::errno::*;
use crate::kernel::fs::io::Resume;
use crate::kernel::render;
use crate::kernel::sched::Sys;
use crate::kernel::syscalls::nr;
use crate::kernel::task::{PendingCall, Pid, ThreadState, Tid, Wait};
use crate::kernel::time::Timespec;
use crate::kernel::Kernel;
use crate::run::{EventKind, ExitStatus};

impl Kernel<'_> {
    /// The thread does not take `sig` now: its mask blocks it (less what rt_sigtimedwait waits for).
    fn blocks(&self, tid: Tid, sig: i32) -> bool {
        let Some(t) = self.threads.get(&tid) else {
            return true;
        };
        let mut mask = t.signals.mask;
        if matches!(
            t.state,
            ThreadState::Blocked {
                wait: Wait::Signal,
                ..
            }
        ) {
            mask &= !t.signals.waiting;
        }
        mask & sig_bit(sig) != 0
    }

    /// Sends a signal (Linux's send_signal and complete_signal). Whether it
    /// was queued (not dropped as ignored, a duplicate or past the limit).
    pub fn send_signal(&mut self, to: Target, info: SigInfo) -> bool {
        let sig = info.signo;
        let pid = match to {
            Target::Process(p) => p,
            Target::Thread(t) => match self.threads.get(&t) {
                Some(t) => t.pid,
                None => return false,
            },
        };
        if !self.procs.contains_key(&pid) {
            return false;
        }
        // Job control acts when the signal is sent, whatever its handler:
        // SIGCONT continues the process and drops pending stops; a stop
        // signal drops a pending SIGCONT.
        if sig == SIGCONT {
            self.continue_process(pid);
            self.discard_pending(pid, &[SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU]);
        } else if matches!(sig, SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU) {
            self.discard_pending(pid, &[SIGCONT]);
        }
        let p = &self.procs[&pid];
        let act = p.signals.actions[(sig - 1) as usize];
        let main = match to {
            Target::Thread(t) => t,
            Target::Process(_) => match p.threads.first() {
                Some(t) => *t,
                None => return false,
            },
        };
        // Blocked signals are never dropped: the handler may change before they are unblocked.
        let really_blocked = self.threads[&main].signals.mask & sig_bit(sig) != 0;
        if act.ignores(sig) && !really_blocked {
            return false;
        }
        let queue = match to {
            Target::Thread(t) => &mut self.threads.get_mut(&t).unwrap().signals.pending,
            Target::Process(_) => &mut self.procs.get_mut(&pid).unwrap().signals.shared,
        };
        if (sig < SIGRTMIN && queue.iter().any(|s| s.signo == sig)) || queue.len() >= MAX_QUEUED {
            return false;
        }
        queue.push(info);
        self.signalfds_changed();
        let target = match to {
            Target::Thread(t) => (!self.blocks(t, sig)).then_some(t),
            Target::Process(_) => self.procs[&pid]
                .threads
                .iter()
                .copied()
                .find(|t| !self.blocks(*t, sig)),
        };
        let Some(target) = target else {
            return true;
        };
        let real_mask = self.threads[&target].signals.mask;
        if act.kills(sig) && real_mask & sig_bit(sig) == 0 {
            self.procs
                .get_mut(&pid)
                .unwrap()
                .signals
                .fatal
                .get_or_insert((target, info));
            // It ends when one of its threads is next on the CPU, as a
            // group exit does on Linux: wake them all.
            for t in self.procs[&pid].threads.clone() {
                self.interrupt(t);
            }
            return true;
        }
        self.interrupt(target);
        true
    }

    /// Ends the call a blocked thread is inside, to take a signal. The call's
    /// result is settled when the thread is next on the CPU.
    fn interrupt(&mut self, tid: Tid) {
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        let ThreadState::Blocked { wait, deadline } = t.state.clone() else {
            return;
        };
        if wait == Wait::Stall || wait == Wait::Vfork {
            // Not inside a call (a stall), or one only the child ends (a
            // vfork, where Linux waits killably): it takes the signal when it runs.
            return;
        }
        t.state = ThreadState::Runnable;
        // Off its descriptors now: a later change must not restart it too.
        let resume = if wait == Wait::Io {
            self.io_unwatch(tid)
        } else {
            None
        };
        self.threads.get_mut(&tid).unwrap().signals.interrupted = Some(Interrupted {
            wait: wait.clone(),
            deadline,
            resume,
        });
        if let Some(d) = deadline {
            self.sched.timers.remove(&(d, tid));
        }
        if let Wait::Futex { key, .. } = wait {
            self.futexes.remove(key, tid);
        }
        if tid != self.sched.current {
            self.sched.runq.push_back(tid);
        }
    }

    /// A synchronous signal for the current thread (a fault, a bad signal
    /// frame). Blocked or ignored, it is unblocked and reset to its default,
    /// as Linux's force_sig does.
    pub fn force_signal(&mut self, info: SigInfo) {
        let sig = info.signo;
        let pid = self.cur_pid();
        let bit = sig_bit(sig);
        let blocked = self.cur_thread().signals.mask & bit != 0;
        let act = &mut self.procs.get_mut(&pid).unwrap().signals.actions[(sig - 1) as usize];
        if blocked || act.handler == SIG_IGN {
            act.handler = SIG_DFL;
        }
        let t = self.cur_thread();
        t.signals.mask &= !bit;
        if !t.signals.pending.iter().any(|s| s.signo == sig) {
            t.signals.pending.insert(0, info);
        }
    }

    /// A signal could not be delivered (bad frame): SIGSEGV, and a SIGSEGV
    /// that cannot be delivered kills (Linux's force_sigsegv).
    fn force_sigsegv(&mut self, sig: i32) {
        if sig == SIGSEGV {
            let pid = self.cur_pid();
            self.procs.get_mut(&pid).unwrap().signals.actions[(SIGSEGV - 1) as usize].handler =
                SIG_DFL;
        }
        self.force_signal(SigInfo::fault(SIGSEGV, SI_KERNEL, 0));
    }

    /// Ends the processes a signal's default action killed: the current
    /// one, and those none of whose threads can run (stopped, or waiting
    /// for a vfork child). Another process ends when one of its threads is
    /// next chosen to run (`signals_and_schedule`), as on Linux, where the
    /// killed process exits, and its parent hears of it, only once it runs.
    pub(in crate::kernel) fn kill_doomed(&mut self) {
        let cur = self.threads.get(&self.sched.current).map(|t| t.pid);
        let doomed: Vec<(Pid, Tid, SigInfo)> = self
            .procs
            .iter()
            // A fatal signal is rare: looked for first, before every thread's state.
            .filter_map(|(pid, p)| p.signals.fatal.map(|(t, i)| (*pid, p, t, i)))
            .filter(|(pid, p, ..)| Some(*pid) == cur || !p.threads.iter().any(|t| self.can_run(*t)))
            .map(|(pid, _, t, i)| (pid, t, i))
            .collect();
        for (pid, tid, info) in doomed {
            self.rec_event(pid, tid, signal_event(&info));
            self.exit_process(pid, ExitStatus::Killed(info.signo));
        }
    }

    /// After a step: kills what signals killed, puts the right thread on the
    /// CPU and delivers its signals. Err(lines) when deadlocked.
    pub fn signals_and_schedule(&mut self) -> Result<(), Vec<String>> {
        loop {
            self.kill_doomed();
            if self.is_finished() {
                return Ok(());
            }
            self.schedule()?;
            if self.is_finished() {
                return Ok(());
            }
            if self.procs[&self.cur_pid()].signals.fatal.is_some() {
                // Chosen to run, it ends instead (kill_doomed, above).
                continue;
            }
            self.deliver_current();
            if self.is_finished() {
                return Ok(());
            }
            if self.can_run(self.cur_tid()) {
                return Ok(());
            }
        }
    }

    /// Takes the next signal the current thread delivers, dropping ignored ones.
    fn next_delivery(&mut self) -> Option<Delivery> {
        let tid = self.cur_tid();
        let pid = self.cur_pid();
        loop {
            let t = &self.threads[&tid];
            let mask = t.signals.mask;
            let own = &t.signals.pending;
            let shared = &self.procs[&pid].signals.shared;
            let open = |s: &SigInfo| mask & sig_bit(s.signo) == 0;
            let lowest = |q: &[SigInfo]| {
                q.iter()
                    .enumerate()
                    .filter(|(_, s)| open(s))
                    .min_by_key(|(i, s)| (s.signo, *i))
                    .map(|(i, _)| i)
            };
            let mut info = if let Some(i) = own.iter().position(|s| s.synchronous() && open(s)) {
                self.cur_thread().signals.pending.remove(i)
            } else if let Some(i) = lowest(own) {
                self.cur_thread().signals.pending.remove(i)
            } else if let Some(i) = lowest(shared) {
                self.procs.get_mut(&pid).unwrap().signals.shared.remove(i)
            } else {
                return None;
            };
            self.timer_dequeued(pid, &mut info);
            let sig = info.signo;
            let act = &mut self.procs.get_mut(&pid).unwrap().signals.actions[(sig - 1) as usize];
            if act.kills(sig) {
                return Some(Delivery::Kill(info));
            }
            if act.stops(sig) {
                // Job control's stops do nothing in an orphaned process
                // group (no shell is left to continue it); SIGSTOP always
                // stops. As Linux's get_signal.
                let pgid = self.procs[&pid].pgid;
                if sig != SIGSTOP && self.orphaned_pgrp(pgid) {
                    continue;
                }
                return Some(Delivery::Stop(info));
            }
            if act.ignores(sig) {
                continue;
            }
            let taken = *act;
            if act.flags & SA_RESETHAND != 0 {
                act.handler = SIG_DFL;
            }
            return Some(Delivery::Handler(info, taken));
        }
    }

    /// Delivers the current thread's deliverable signals (Linux's
    /// arch_do_signal_or_restart, looped until none is left).
    fn deliver_current(&mut self) {
        let tid = self.cur_tid();
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        if t.state != ThreadState::Runnable {
            return;
        }
        let mut interrupted = t.signals.interrupted.take();
        let waited = std::mem::take(&mut t.signals.waiting);
        if let Some(i) = &interrupted {
            if i.wait == Wait::Signal
                && self.threads[&tid]
                    .pending_call
                    .is_some_and(|c| c.nr == nr::rt_sigtimedwait)
            {
                if let Some(info) = self.take_waited(waited) {
                    let call = self.cur_thread().pending_call.take().unwrap();
                    let r = self.finish_sigtimedwait(call, info);
                    self.end_call(call, r);
                    interrupted = None;
                }
            }
        }
        // Each signal gets a frame; a bound keeps a flood of queued
        // real-time signals (SA_NODEFER) from running the monitor long.
        for _ in 0..=MAX_QUEUED {
            let Some(d) = self.next_delivery() else {
                break;
            };
            match d {
                Delivery::Kill(info) => {
                    self.emit(signal_event(&info));
                    let pid = self.cur_pid();
                    self.exit_process(pid, ExitStatus::Killed(info.signo));
                    return;
                }
                Delivery::Stop(info) => {
                    // The call it interrupted restarts when the process continues.
                    self.emit(signal_event(&info));
                    if let Some(i) = interrupted.take() {
                        self.settle_interrupted(i, None);
                    }
                    let pid = self.cur_pid();
                    self.stop_process(pid, info.signo);
                    return;
                }
                Delivery::Handler(info, act) => {
                    if let Some(i) = interrupted.take() {
                        if !self.settle_interrupted(i, Some(&act)) {
                            return;
                        }
                    }
                    self.emit(signal_event(&info));
                    let oldmask = {
                        let t = self.cur_thread();
                        t.signals.saved_mask.take().unwrap_or(t.signals.mask)
                    };
                    match self.setup_frame(&info, &act, oldmask) {
                        Ok(()) => {
                            let t = self.cur_thread();
                            let mut m = t.signals.mask | act.mask;
                            if act.flags & SA_NODEFER == 0 {
                                m |= sig_bit(info.signo);
                            }
                            t.signals.mask = m & !UNBLOCKABLE;
                        }
                        Err(frame::FrameError::Fault) => {
                            // The frame's mask never reached the stack: keep it.
                            self.cur_thread().signals.mask = oldmask & !UNBLOCKABLE;
                            self.force_sigsegv(info.signo);
                        }
                        Err(frame::FrameError::Engine(e)) => {
                            self.engine_failure(e);
                            return;
                        }
                    }
                }
            }
        }
        if let Some(i) = interrupted {
            if !self.settle_interrupted(i, None) {
                return;
            }
        }
        let t = self.cur_thread();
        if let Some(m) = t.signals.saved_mask.take() {
            t.signals.mask = m;
        }
    }

    /// Ends the current thread's interrupted call with the handler about to
    /// run (or none). False when the thread went back to sleep.
    fn settle_interrupted(&mut self, i: Interrupted, handler: Option<&SigAction>) -> bool {
        let Some(call) = self.cur_thread().pending_call.take() else {
            return true;
        };
        // A call that moved bytes returns them, whatever ended its wait, as
        // Linux's pipe and socket loops break out with the count.
        if let Some(n) = i.resume.and_then(|r| r.moved()) {
            self.end_call(call, Ok(n));
            return true;
        }
        let kind = restart_kind(call.nr, &i);
        let restart = match (kind, handler) {
            (Restart::Intr, _) => false,
            (Restart::Sys, Some(a)) => a.flags & SA_RESTART != 0,
            (_, Some(_)) => false,
            (_, None) => true,
        };
        if !restart {
            let mut r = Err(EINTR);
            if i.wait == Wait::Sleep {
                if let Err(e) = self.write_remaining(call, i.deadline) {
                    r = Err(e);
                }
            } else {
                crate::kernel::fs::poll::write_time_left(self, call, i.deadline);
            }
            self.end_call(call, r);
            return true;
        }
        if i.wait == Wait::Sleep && kind == Restart::Block {
            // restart_syscall: the sleep goes on to its deadline.
            self.block(Wait::Sleep, i.deadline, call);
            return false;
        }
        // The mask the call put in force (sigsuspend, ppoll...) goes back;
        // run again, the call puts it in force again.
        let t = self.cur_thread();
        if let Some(m) = t.signals.saved_mask.take() {
            t.signals.mask = m;
        }
        // Run again, it keeps its deadline (poll's and futex's restart blocks).
        let timed_futex = matches!(i.wait, Wait::Futex { .. }) && i.deadline.is_some();
        let kept = i.resume.or_else(|| {
            timed_futex.then_some(Resume {
                nr: call.nr,
                done: 0,
                deadline: i.deadline,
            })
        });
        if let Some(r) = kept {
            self.io_keep(self.cur_tid(), r);
        }
        let (code, name) = kind.code();
        let text = render::call_text(self, self.cur_tid(), call);
        let r = self.m.regs_mut();
        r.rip = r.rip.wrapping_sub(2);
        r.rax = call.nr as u64;
        self.emit(EventKind::Syscall {
            nr: call.nr,
            name: crate::kernel::syscalls::name(call.nr).to_string(),
            text: format!("{text} = ? {name}"),
            ret: code,
        });
        true
    }

    /// Records the current thread's call as returning `r`, and sets rax.
    fn end_call(&mut self, call: PendingCall, r: SysResult<u64>) {
        let rax = match r {
            Ok(v) => v,
            Err(e) => (-(e.0 as i64)) as u64,
        };
        self.m.regs_mut().rax = rax;
        let text = render::call_text(self, self.cur_tid(), call);
        self.emit(EventKind::Syscall {
            nr: call.nr,
            name: crate::kernel::syscalls::name(call.nr).to_string(),
            text: render::with_result(&text, rax as i64),
            ret: rax as i64,
        });
    }

    /// An interrupted relative sleep tells the caller how much was left.
    fn write_remaining(&mut self, call: PendingCall, deadline: Option<u64>) -> SysResult<()> {
        let rem = match call.nr {
            nr::nanosleep => call.args[1],
            nr::clock_nanosleep if call.args[1] & TIMER_ABSTIME == 0 => call.args[3],
            _ => 0,
        };
        if rem == 0 {
            return Ok(());
        }
        let left = deadline.unwrap_or(0).saturating_sub(self.clock.now());
        self.write_struct(rem, &Timespec::from_ns(left))
    }

    /// Removes the lowest pending signal of `set` for the current thread.
    pub(super) fn take_waited(&mut self, set: u64) -> Option<SigInfo> {
        let pid = self.cur_pid();
        let pick = |q: &[SigInfo]| {
            q.iter()
                .enumerate()
                .filter(|(_, s)| set & sig_bit(s.signo) != 0)
                .min_by_key(|(i, s)| (s.signo, *i))
                .map(|(i, _)| i)
        };
        let mut info = if let Some(i) = pick(&self.cur_thread().signals.pending) {
            self.cur_thread().signals.pending.remove(i)
        } else {
            let shared = &mut self.procs.get_mut(&pid).unwrap().signals.shared;
            shared.remove(pick(shared)?)
        };
        self.timer_dequeued(pid, &mut info);
        Some(info)
    }

    /// rt_sigtimedwait's result: the signal, its siginfo written out.
    fn finish_sigtimedwait(&mut self, call: PendingCall, info: SigInfo) -> SysResult<u64> {
        if call.args[1] != 0 {
            self.write_user(call.args[1], &info.to_bytes())?;
        }
        Ok(info.signo as u64)
    }

    /// A signal the current thread would take now is pending.
    pub(crate) fn has_deliverable(&self, tid: Tid) -> bool {
        let t = &self.threads[&tid];
        let open = |s: &SigInfo| t.signals.mask & sig_bit(s.signo) == 0;
        t.signals.pending.iter().any(open) || self.procs[&t.pid].signals.shared.iter().any(open)
    }

    /// The call ends at once, as if a signal had interrupted its `wait`:
    /// settled by delivery.
    pub(crate) fn interrupted_now(
        &mut self,
        call: PendingCall,
        wait: Wait,
        resume: Option<Resume>,
    ) -> Sys {
        let t = self.cur_thread();
        t.pending_call = Some(call);
        t.signals.interrupted = Some(Interrupted {
            wait,
            deadline: resume.and_then(|r| r.deadline),
            resume,
        });
        Sys::Blocked
    }

    /// The mask ppoll, pselect6 and epoll_pwait put in force while they run
    /// (`uset`, `size` bytes; none at 0). It goes back when the call ends,
    /// or after the handler of the signal that ended it, as Linux's
    /// set_user_sigmask and restore_saved_sigmask_unless do.
    pub(crate) fn call_sigmask(&mut self, uset: u64, size: u64) -> SysResult<()> {
        if uset == 0 {
            return Ok(());
        }
        if size != 8 {
            return Err(EINVAL);
        }
        let m = self.read_u64(uset)?;
        let t = self.cur_thread();
        // Run again after a wait, the call keeps the mask it first replaced.
        let old = t.signals.saved_mask.unwrap_or(t.signals.mask);
        t.signals.saved_mask = Some(old);
        t.signals.mask = m & !UNBLOCKABLE;
        Ok(())
    }

    /// A call that ended puts back the mask it put in force.
    pub(crate) fn call_sigmask_done(&mut self, tid: Tid) {
        if let Some(t) = self.threads.get_mut(&tid) {
            if let Some(m) = t.signals.saved_mask.take() {
                t.signals.mask = m;
            }
        }
    }

    /// Drops pending instances of signals (one now ignored; stops a SIGCONT cancels).
    pub(super) fn discard_pending(&mut self, pid: Pid, sigs: &[i32]) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        p.signals.shared.retain(|s| !sigs.contains(&s.signo));
        let tids = p.threads.clone();
        for tid in tids {
            if let Some(t) = self.threads.get_mut(&tid) {
                t.signals.pending.retain(|s| !sigs.contains(&s.signo));
            }
        }
    }
}

/// How Linux ends call `nr` when a signal ends its wait `i` (signal(7),
/// "Interruption of system calls and library functions by signal handlers").
fn restart_kind(nr: u32, i: &Interrupted) -> Restart {
    match i.wait {
        // poll, select, ppoll, pselect6: EINTR under a handler, SA_RESTART
        // or not; restarted (with the time left) after a stop.
        _ if matches!(nr, nr::poll | nr::select | nr::pselect6 | nr::ppoll) => Restart::NoHand,
        // ep_poll returns EINTR itself, so even a stop and SIGCONT end it.
        _ if matches!(nr, nr::epoll_wait | nr::epoll_pwait | nr::epoll_pwait2) => Restart::Intr,
        Wait::Futex { .. } if i.deadline.is_none() => Restart::Sys,
        Wait::Futex { .. } | Wait::Sleep => Restart::Block,
        Wait::Signal if nr == nr::rt_sigtimedwait => Restart::Intr,
        Wait::Signal if nr == nr::pause || nr == nr::rt_sigsuspend => Restart::NoHand,
        // A socket call with SO_RCVTIMEO or SO_SNDTIMEO: sock_intr_errno's EINTR.
        Wait::Io if i.deadline.is_some() => Restart::Intr,
        _ => Restart::Sys,
    }
}

fn signal_event(info: &SigInfo) -> EventKind {
    EventKind::Signal {
        signo: info.signo,
        code: info.code,
        addr: info.addr,
    }
}
