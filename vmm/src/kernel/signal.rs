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
//! XSAVE image with its fpx_sw_bytes) is in `frame.rs`; generation,
//! delivery and interrupted calls in `deliver.rs`; the calls in `calls.rs`.

pub mod calls;
mod frame;
pub mod signalfd;

mod deliver;

use super::errno::*;
use super::fs::io::Resume;
use super::sched::Sys;
use super::task::{PendingCall, Pid, Tid, Wait};
use super::time::Timespec;
use super::Kernel;

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
    #[serde(with = "crate::kernel::save_restore::array_serde")]
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
