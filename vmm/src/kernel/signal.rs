//! Signals: dispositions, masks, generation, delivery, default actions, and
//! the calls rt_sigaction, rt_sigprocmask, rt_sigreturn, kill, tkill, tgkill,
//! sigaltstack, rt_sigpending, rt_sigsuspend, pause, rt_sigtimedwait,
//! rt_sigqueueinfo and rt_tgsigqueueinfo, and how a signal ends the wait
//! of every blocking call.
//!
//! The model is Linux's:
//! - **Generation** (`send_signal`): a signal ignored by its disposition and
//!   not blocked is dropped; otherwise it is queued on the thread (tgkill,
//!   faults) or on the process (kill). A standard signal (1..31) is pending
//!   at most once per queue, real-time ones queue. Then a thread that does
//!   not block it is chosen (for a process: the main thread if it takes it,
//!   else the first in creation order). A default action that kills marks the
//!   process, which dies at the end of the step; otherwise a chosen thread
//!   that is blocked in a call is interrupted (`interrupt`).
//! - **Delivery** (`deliver_current`) happens only to the thread on the CPU,
//!   after every step once the scheduler has chosen it: after a system call
//!   returns, after a fault, and when a thread is switched onto the CPU.
//!   Synchronous faults come first, then the lowest-numbered unblocked
//!   signal (the thread's own queue, then the process's). Every pending
//!   deliverable signal gets a frame before the thread resumes, each on top
//!   of the last, as Linux's exit-to-user loop does.
//! - **Interrupted calls** are settled in the thread's own context when it is
//!   next on the CPU, as Linux's handle_signal does (`restart_kind`, after
//!   signal(7)): a call on descriptors that moved bytes returns the count;
//!   a wait on descriptors, a child, a lock or a futex without a timeout is
//!   ERESTARTSYS (restarted under SA_RESTART, else EINTR); futex with a
//!   timeout and nanosleep/clock_nanosleep are ERESTART_RESTARTBLOCK (EINTR
//!   under a handler, with the remaining time written for a relative
//!   sleep); pause, rt_sigsuspend, poll, select, ppoll and pselect6 are
//!   ERESTARTNOHAND (EINTR under a handler); epoll_wait, rt_sigtimedwait and
//!   a socket wait bounded by SO_RCVTIMEO or SO_SNDTIMEO are EINTR even
//!   after a stop.
//!   Without a handler to run (a stop, or the signal was taken by another
//!   thread meanwhile) the call is restarted: a sleep keeps its deadline, a
//!   wait on descriptors what it had done (its deadline), a timed futex
//!   wait its deadline, any other call is re-executed (`rip -= 2`). A mask
//!   the call put in force (sigsuspend, ppoll, pselect6, epoll_pwait:
//!   `call_sigmask`) is the handler's, and the frame restores the one it
//!   replaced.
//! - **Default actions**: terminate and core end the process `killed:SIGxxx`;
//!   ignore does nothing; stop stops the process (job control, with its
//!   parent told), but for SIGTSTP, SIGTTIN and SIGTTOU in an orphaned
//!   process group, which are dropped; SIGCONT continues it when it is sent.
//! - **Faults** (`force_signal`) are synchronous: blocked or ignored, they are
//!   unblocked and reset to the default action, so they kill, as Linux's
//!   force_sig does. A frame that cannot be written, a handler without
//!   SA_RESTORER, or a bad rt_sigreturn frame gives the thread SIGSEGV (and a
//!   SIGSEGV that cannot be delivered kills), never a monitor error.
//!
//! The frame layout (rt_sigframe, ucontext, sigcontext, siginfo and the
//! XSAVE image with its fpx_sw_bytes) is in `frame.rs`.

mod calls;
mod frame;
pub mod signalfd;

pub use calls::*;

use super::errno::*;
use super::fs::io::Resume;
use super::render;
use super::sched::Sys;
use super::task::{PendingCall, Pid, ThreadState, Tid, Wait};
use super::time::Timespec;
use super::Kernel;
pub use crate::run::signal_name;
use crate::run::{EventKind, ExitStatus};

pub const SIGHUP: i32 = 1;
pub const SIGINT: i32 = 2;
pub const SIGQUIT: i32 = 3;
pub const SIGILL: i32 = 4;
pub const SIGTRAP: i32 = 5;
pub const SIGABRT: i32 = 6;
pub const SIGBUS: i32 = 7;
pub const SIGFPE: i32 = 8;
pub const SIGKILL: i32 = 9;
pub const SIGUSR1: i32 = 10;
pub const SIGSEGV: i32 = 11;
pub const SIGUSR2: i32 = 12;
pub const SIGPIPE: i32 = 13;
pub const SIGALRM: i32 = 14;
pub const SIGTERM: i32 = 15;
pub const SIGSTKFLT: i32 = 16;
pub const SIGCHLD: i32 = 17;
pub const SIGCONT: i32 = 18;
pub const SIGSTOP: i32 = 19;
pub const SIGTSTP: i32 = 20;
pub const SIGTTIN: i32 = 21;
pub const SIGTTOU: i32 = 22;
pub const SIGURG: i32 = 23;
pub const SIGXCPU: i32 = 24;
pub const SIGXFSZ: i32 = 25;
pub const SIGVTALRM: i32 = 26;
pub const SIGPROF: i32 = 27;
pub const SIGWINCH: i32 = 28;
pub const SIGIO: i32 = 29;
pub const SIGPWR: i32 = 30;
pub const SIGSYS: i32 = 31;
/// The first real-time signal: from here on, signals queue.
pub const SIGRTMIN: i32 = 32;
pub const NSIG: usize = 64;

pub const SEGV_MAPERR: i32 = 1;
pub const SEGV_ACCERR: i32 = 2;

/// si_code: sent by kill().
pub const SI_USER: i32 = 0;
/// si_code: sent by the kernel (a #GP, a bad signal frame).
pub const SI_KERNEL: i32 = 0x80;
/// si_code: sent by sigqueue().
pub const SI_QUEUE: i32 = -1;
/// si_code: sent by a POSIX timer's expiry.
pub const SI_TIMER: i32 = -2;
/// si_code: sent by tkill()/tgkill().
pub const SI_TKILL: i32 = -6;

pub const SA_SIGINFO: u64 = 0x4;
pub const SA_RESTORER: u64 = 0x0400_0000;
pub const SA_ONSTACK: u64 = 0x0800_0000;
pub const SA_RESTART: u64 = 0x1000_0000;
pub const SA_NODEFER: u64 = 0x4000_0000;
pub const SA_RESETHAND: u64 = 0x8000_0000;

pub const SS_ONSTACK: i32 = 1;
pub const SS_DISABLE: i32 = 2;
pub const SS_AUTODISARM: i32 = i32::MIN;
/// Flag bits of ss_flags beside the mode.
const SS_FLAG_BITS: i32 = SS_AUTODISARM;
pub const MINSIGSTKSZ: u64 = 2048;

/// Signals a CPU fault raises; the kernel's ones are delivered before any other.
const SYNCHRONOUS: u64 = (1 << (SIGSEGV - 1))
    | (1 << (SIGBUS - 1))
    | (1 << (SIGILL - 1))
    | (1 << (SIGTRAP - 1))
    | (1 << (SIGFPE - 1))
    | (1 << (SIGSYS - 1));

/// At most this many signals wait in one queue (Linux's RLIMIT_SIGPENDING, smaller).
pub(crate) const MAX_QUEUED: usize = 1024;

const NR_POLL: u32 = 7;
const NR_SELECT: u32 = 23;
const NR_PAUSE: u32 = 34;
const NR_EPOLL_WAIT: u32 = 232;
const NR_PSELECT6: u32 = 270;
const NR_PPOLL: u32 = 271;
const NR_EPOLL_PWAIT: u32 = 281;
const NR_EPOLL_PWAIT2: u32 = 441;
const NR_NANOSLEEP: u32 = 35;
const NR_RT_SIGTIMEDWAIT: u32 = 128;
const NR_RT_SIGSUSPEND: u32 = 130;
const NR_CLOCK_NANOSLEEP: u32 = 230;
const TIMER_ABSTIME: u64 = 1;

/// What a signal does when nobody handles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum DefaultAction {
    Terminate,
    Core,
    Ignore,
    Stop,
    Continue,
}

pub fn default_action(sig: i32) -> DefaultAction {
    match sig {
        SIGCHLD | SIGURG | SIGWINCH => DefaultAction::Ignore,
        SIGCONT => DefaultAction::Continue,
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU => DefaultAction::Stop,
        SIGQUIT | SIGILL | SIGTRAP | SIGABRT | SIGBUS | SIGFPE | SIGSEGV | SIGXCPU | SIGXFSZ
        | SIGSYS => DefaultAction::Core,
        _ => DefaultAction::Terminate,
    }
}

pub const SIG_DFL: u64 = 0;
pub const SIG_IGN: u64 = 1;

/// `struct sigaction` as the kernel ABI has it (rt_sigaction).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SigAction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

impl SigAction {
    /// Nothing happens when the signal arrives: SIG_IGN, or a default of
    /// ignore or continue (SIGCONT does its work when it is sent).
    fn ignores(&self, sig: i32) -> bool {
        sig != SIGKILL
            && sig != SIGSTOP
            && (self.handler == SIG_IGN
                || self.handler == SIG_DFL
                    && matches!(
                        default_action(sig),
                        DefaultAction::Ignore | DefaultAction::Continue
                    ))
    }

    /// The default action stops the process (job control).
    fn stops(&self, sig: i32) -> bool {
        sig == SIGSTOP || self.handler == SIG_DFL && default_action(sig) == DefaultAction::Stop
    }

    /// The default action ends the process.
    fn kills(&self, sig: i32) -> bool {
        sig == SIGKILL
            || self.handler == SIG_DFL
                && matches!(
                    default_action(sig),
                    DefaultAction::Terminate | DefaultAction::Core
                )
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ProcessSignals {
    #[serde(with = "crate::kernel::snapshot::array_serde")]
    pub actions: [SigAction; NSIG],
    /// Process-directed signals (kill) no thread has taken yet.
    pub shared: Vec<SigInfo>,
    /// A signal whose default action kills the process: it dies at the end of the step.
    /// The thread it went to, for the event.
    pub fatal: Option<(Tid, SigInfo)>,
}

impl Default for ProcessSignals {
    fn default() -> Self {
        ProcessSignals {
            actions: [SigAction::default(); NSIG],
            shared: Vec::new(),
            fatal: None,
        }
    }
}

/// A signal waiting for delivery, with its siginfo fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SigInfo {
    pub signo: i32,
    pub code: i32,
    /// si_addr of a fault.
    pub addr: u64,
    /// si_pid and si_uid of a signal a process sent.
    pub pid: u32,
    pub uid: u32,
    /// si_value of sigqueue.
    pub value: u64,
    /// The CPU exception behind a fault (vector, error code): the sigcontext's trapno and err.
    pub trap: Option<(u8, u64)>,
}

impl SigInfo {
    /// A fault's signal (si_code > 0, si_addr).
    pub fn fault(signo: i32, code: i32, addr: u64) -> SigInfo {
        SigInfo {
            signo,
            code,
            addr,
            ..Default::default()
        }
    }

    /// With the exception that raised it.
    pub fn with_trap(self, vector: u8, error_code: u64) -> SigInfo {
        SigInfo {
            trap: Some((vector, error_code)),
            ..self
        }
    }

    /// A signal one process sent (kill, tgkill, sigqueue).
    pub fn sent(signo: i32, code: i32, pid: Pid) -> SigInfo {
        SigInfo {
            signo,
            code,
            pid,
            ..Default::default()
        }
    }

    /// Raised by the kernel for this thread: delivered before anything else.
    fn synchronous(&self) -> bool {
        self.code > 0 && SYNCHRONOUS & sig_bit(self.signo) != 0
    }

    /// The 128 bytes of `siginfo_t`.
    pub fn to_bytes(&self) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[0..4].copy_from_slice(&self.signo.to_le_bytes());
        b[8..12].copy_from_slice(&self.code.to_le_bytes());
        if self.code > 0 && SYNCHRONOUS & sig_bit(self.signo) != 0 {
            // _sigfault: si_addr.
            b[16..24].copy_from_slice(&self.addr.to_le_bytes());
        } else {
            // _kill / _rt: si_pid, si_uid, si_value.
            b[16..20].copy_from_slice(&self.pid.to_le_bytes());
            b[20..24].copy_from_slice(&self.uid.to_le_bytes());
            b[24..32].copy_from_slice(&self.value.to_le_bytes());
        }
        b
    }
}

/// A thread's alternate signal stack (sigaltstack).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AltStack {
    pub sp: u64,
    pub size: u64,
    pub flags: i32,
}

impl Default for AltStack {
    fn default() -> Self {
        AltStack {
            sp: 0,
            size: 0,
            flags: SS_DISABLE,
        }
    }
}

impl AltStack {
    /// `sp` is inside the stack (Linux's __on_sig_stack).
    fn contains(&self, sp: u64) -> bool {
        sp > self.sp && sp - self.sp <= self.size
    }

    /// The thread runs on it (never, with SS_AUTODISARM).
    fn on(&self, sp: u64) -> bool {
        self.flags & SS_AUTODISARM == 0 && self.contains(sp)
    }

    /// Linux's sas_ss_flags: SS_DISABLE, SS_ONSTACK or 0 (available).
    fn flags_at(&self, sp: u64) -> i32 {
        if self.size == 0 {
            SS_DISABLE
        } else if self.on(sp) {
            SS_ONSTACK
        } else {
            0
        }
    }
}

/// A blocked call a signal ended; settled when its thread is next on the CPU.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Interrupted {
    pub wait: Wait,
    pub deadline: Option<u64>,
    /// What a call waiting on descriptors had done (bytes moved, its
    /// deadline): the count it returns, or what its restart keeps.
    #[serde(default)]
    pub resume: Option<Resume>,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ThreadSignals {
    pub mask: u64,
    /// Thread-directed signals, in arrival order.
    pub pending: Vec<SigInfo>,
    pub altstack: AltStack,
    /// The mask rt_sigsuspend replaced: the handler's frame restores it.
    pub saved_mask: Option<u64>,
    /// The set rt_sigtimedwait waits for, while blocked in it.
    pub waiting: u64,
    pub interrupted: Option<Interrupted>,
}

impl ThreadSignals {
    /// A new thread inherits the mask, nothing else.
    pub fn for_new_thread(&self) -> ThreadSignals {
        ThreadSignals {
            mask: self.mask,
            ..Default::default()
        }
    }
}

fn sig_bit(sig: i32) -> u64 {
    1u64 << (sig - 1)
}

fn valid_signal(sig: i32) -> bool {
    (1..=NSIG as i32).contains(&sig)
}

const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

/// Where a signal is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Target {
    Process(Pid),
    Thread(Tid),
}

/// What the thread on the CPU does with its next signal.
enum Delivery {
    Handler(SigInfo, SigAction),
    Kill(SigInfo),
    Stop(SigInfo),
}

/// How an interrupted call ends (Linux's -ERESTART* codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Restart {
    /// ERESTARTSYS: restarted under SA_RESTART, EINTR otherwise.
    Sys,
    /// ERESTARTNOHAND: EINTR under a handler.
    NoHand,
    /// ERESTART_RESTARTBLOCK: EINTR under a handler, resumed otherwise.
    Block,
    /// EINTR in any case.
    Intr,
}

impl Restart {
    fn code(self) -> (i64, &'static str) {
        match self {
            Restart::Sys => (-512, "ERESTARTSYS"),
            Restart::NoHand => (-514, "ERESTARTNOHAND"),
            Restart::Block => (-516, "ERESTART_RESTARTBLOCK"),
            Restart::Intr => (-(EINTR.0 as i64), "EINTR"),
        }
    }
}

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
    pub(super) fn kill_doomed(&mut self) {
        let cur = self.threads.get(&self.sched.current).map(|t| t.pid);
        let doomed: Vec<(Pid, Tid, SigInfo)> = self
            .procs
            .iter()
            .filter(|(pid, p)| Some(**pid) == cur || !p.threads.iter().any(|t| self.can_run(*t)))
            .filter_map(|(pid, p)| p.signals.fatal.map(|(t, i)| (*pid, t, i)))
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
                    .is_some_and(|c| c.nr == NR_RT_SIGTIMEDWAIT)
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
                super::fs::poll::write_time_left(self, call, i.deadline);
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
            name: super::syscalls::name(call.nr).to_string(),
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
            name: super::syscalls::name(call.nr).to_string(),
            text: render::with_result(&text, rax as i64),
            ret: rax as i64,
        });
    }

    /// An interrupted relative sleep tells the caller how much was left.
    fn write_remaining(&mut self, call: PendingCall, deadline: Option<u64>) -> SysResult<()> {
        let rem = match call.nr {
            NR_NANOSLEEP => call.args[1],
            NR_CLOCK_NANOSLEEP if call.args[1] & TIMER_ABSTIME == 0 => call.args[3],
            _ => 0,
        };
        if rem == 0 {
            return Ok(());
        }
        let left = deadline.unwrap_or(0).saturating_sub(self.clock.now());
        self.write_struct(rem, &Timespec::from_ns(left))
    }

    /// Removes the lowest pending signal of `set` for the current thread.
    fn take_waited(&mut self, set: u64) -> Option<SigInfo> {
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
    fn discard_pending(&mut self, pid: Pid, sigs: &[i32]) {
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
        _ if matches!(nr, NR_POLL | NR_SELECT | NR_PSELECT6 | NR_PPOLL) => Restart::NoHand,
        // ep_poll returns EINTR itself, so even a stop and SIGCONT end it.
        _ if matches!(nr, NR_EPOLL_WAIT | NR_EPOLL_PWAIT | NR_EPOLL_PWAIT2) => Restart::Intr,
        Wait::Futex { .. } if i.deadline.is_none() => Restart::Sys,
        Wait::Futex { .. } | Wait::Sleep => Restart::Block,
        Wait::Signal if nr == NR_RT_SIGTIMEDWAIT => Restart::Intr,
        Wait::Signal if nr == NR_PAUSE || nr == NR_RT_SIGSUSPEND => Restart::NoHand,
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
