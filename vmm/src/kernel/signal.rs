//! Signals: dispositions, masks, delivery, default actions.
//!
//! (Handler frames are built as Linux lays them out; see `deliver_to_handler`.)

use super::errno::*;
use super::Kernel;
use crate::record::{EventKind, ExitStatus};

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
pub const NSIG: usize = 64;

pub const SEGV_MAPERR: i32 = 1;
pub const SEGV_ACCERR: i32 = 2;

const NAMES: [&str; 32] = [
    "0", "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
    "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT",
    "SIGCHLD", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU",
    "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH", "SIGIO", "SIGPWR", "SIGSYS",
];

pub fn signal_name(sig: i32) -> String {
    match sig {
        1..=31 => NAMES[sig as usize].to_string(),
        32..=64 => format!("SIGRT{}", sig - 32),
        _ => format!("signal {sig}"),
    }
}

/// What a signal does when nobody handles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SigAction {
    pub handler: u64,
    pub flags: u64,
    pub restorer: u64,
    pub mask: u64,
}

#[derive(Debug, Clone)]
pub struct ProcessSignals {
    pub actions: [SigAction; NSIG],
}

impl Default for ProcessSignals {
    fn default() -> Self {
        ProcessSignals {
            actions: [SigAction::default(); NSIG],
        }
    }
}

/// A signal waiting for delivery, with its siginfo fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SigInfo {
    pub signo: i32,
    pub code: i32,
    pub addr: u64,
}

#[derive(Debug, Clone, Default)]
pub struct ThreadSignals {
    pub mask: u64,
    pub pending: Vec<SigInfo>,
    pub altstack: (u64, u64, i32),
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

impl Kernel<'_> {
    /// A synchronous fault of the current thread (SIGSEGV, SIGFPE, ...).
    pub fn force_signal(&mut self, info: SigInfo) {
        self.emit(EventKind::Signal {
            signo: info.signo,
            code: info.code,
            addr: info.addr,
        });
        let pid = self.cur_pid();
        let act = self.procs[&pid].signals.actions[(info.signo - 1) as usize];
        let blocked = self.cur_thread().signals.mask & sig_bit(info.signo) != 0;
        if act.handler == SIG_DFL || act.handler == SIG_IGN || blocked {
            self.exit_process(pid, ExitStatus::Killed(info.signo));
        } else {
            self.cur_thread().signals.pending.push(info);
        }
    }

    /// Delivers pending, unblocked signals of the current thread.
    pub fn deliver_signals(&mut self) {
        if self.is_finished() || !self.threads.contains_key(&self.cur_tid()) {
            return;
        }
        let t = self.cur_thread();
        let Some(i) = t.signals.pending.iter().position(|s| t.signals.mask & sig_bit(s.signo) == 0) else {
            return;
        };
        let info = t.signals.pending.remove(i);
        let pid = self.cur_pid();
        let act = self.procs[&pid].signals.actions[(info.signo - 1) as usize];
        match act.handler {
            SIG_IGN => {}
            SIG_DFL => match default_action(info.signo) {
                DefaultAction::Ignore | DefaultAction::Continue | DefaultAction::Stop => {}
                DefaultAction::Terminate | DefaultAction::Core => {
                    self.exit_process(pid, ExitStatus::Killed(info.signo))
                }
            },
            _ => {
                // Handler frames: not yet; a handled signal kills like its default.
                self.exit_process(pid, ExitStatus::Killed(info.signo))
            }
        }
    }
}

pub fn sys_rt_sigaction(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (sig, act, old, size) = (a[0] as i32, a[1], a[2], a[3]);
    if !(1..=NSIG as i32).contains(&sig) || size != 8 {
        return Err(EINVAL);
    }
    let new = if act != 0 {
        if sig == SIGKILL || sig == SIGSTOP {
            return Err(EINVAL);
        }
        Some(k.read_struct::<SigAction>(act)?)
    } else {
        None
    };
    let cur = k.cur_proc().signals.actions[(sig - 1) as usize];
    if old != 0 {
        k.write_struct(old, &cur)?;
    }
    if let Some(n) = new {
        k.cur_proc().signals.actions[(sig - 1) as usize] = n;
    }
    Ok(0)
}

const SIG_BLOCK: u64 = 0;
const SIG_UNBLOCK: u64 = 1;
const SIG_SETMASK: u64 = 2;
const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

pub fn sys_rt_sigprocmask(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (how, set, old, size) = (a[0], a[1], a[2], a[3]);
    if size != 8 {
        return Err(EINVAL);
    }
    let cur = k.cur_thread().signals.mask;
    let new = if set != 0 {
        let s = k.read_u64(set)?;
        Some(match how {
            SIG_BLOCK => cur | s,
            SIG_UNBLOCK => cur & !s,
            SIG_SETMASK => s,
            _ => return Err(EINVAL),
        })
    } else {
        None
    };
    if old != 0 {
        k.write_u64(old, cur)?;
    }
    if let Some(n) = new {
        k.cur_thread().signals.mask = n & !UNBLOCKABLE;
    }
    Ok(0)
}
