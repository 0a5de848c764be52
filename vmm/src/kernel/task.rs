//! Processes and threads: what each owns.

use super::fs::FdTable;
use super::mm::Mm;
use super::signal::{ProcessSignals, ThreadSignals};
use crate::machine::ExtendedState;
use kvm_bindings::kvm_regs;
use serde::{Deserialize, Serialize};

pub type Pid = u32;
pub type Tid = u32;

/// A thread's CPU state while it is off the CPU.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Context {
    #[serde(with = "crate::machine::vcpu_state::regs_serde")]
    pub regs: kvm_regs,
    pub fs_base: u64,
    pub gs_base: u64,
    pub xstate: Option<ExtendedState>,
}

/// What a blocked thread waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wait {
    /// On a futex word (keyed by its guest physical address).
    Futex { key: u64, bitset: u32 },
    /// A sleep that only its deadline ends.
    Sleep,
    /// For a signal (pause, sigsuspend, rt_sigtimedwait).
    Signal,
    /// Stalled by the schedule; not inside any call.
    Stall,
    /// For a child to change state (wait4, waitid).
    Child,
    /// A vfork parent, until its child execs or ends.
    Vfork,
    /// On descriptors (pipes, sockets, poll, epoll...): a change to one of
    /// them restarts the call (`fs::io`).
    Io,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ThreadState {
    Runnable,
    Blocked {
        wait: Wait,
        /// Virtual time at which the wait ends with a timeout.
        deadline: Option<u64>,
    },
}

/// A system call a blocked thread is inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCall {
    pub nr: u32,
    pub args: [u64; 6],
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Thread {
    pub tid: Tid,
    pub pid: Pid,
    /// Saved state; `None` while the thread is on the CPU.
    pub ctx: Option<Context>,
    pub state: ThreadState,
    pub clear_child_tid: u64,
    pub robust_list: u64,
    pub signals: ThreadSignals,
    pub pending_call: Option<PendingCall>,
    /// What `prctl(PR_SET_NAME)` last said (the program's name at first).
    pub name: String,
}

impl Thread {
    /// The first thread of a new program's process (its id is the pid),
    /// about to take the CPU: its registers are the machine's.
    pub fn first_of(pid: Pid, program: &str) -> Thread {
        Thread {
            tid: pid,
            pid,
            ctx: None,
            state: ThreadState::Runnable,
            clear_child_tid: 0,
            robust_list: 0,
            signals: super::signal::ThreadSignals::default(),
            pending_call: None,
            name: super::elf::thread_name(program),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Process {
    pub pid: Pid,
    pub ppid: Pid,
    pub mm: Mm,
    pub files: FdTable,
    pub signals: ProcessSignals,
    /// Threads in creation order.
    pub threads: Vec<Tid>,
    /// The executable's guest path (/proc/self/exe).
    pub exe: String,
    pub cwd: String,
    pub umask: u32,
    /// Process group and session (`setpgid`, `setsid`).
    pub pgid: Pid,
    pub sid: Pid,
    /// The signal the parent gets when this process ends (clone's low
    /// byte: SIGCHLD for fork; 0 for none).
    pub exit_signal: i32,
    /// `prctl(PR_SET_PDEATHSIG)`: sent to this process when its parent ends.
    pub pdeathsig: i32,
    /// It has called execve (its parent's setpgid then fails with EACCES).
    pub execed: bool,
    /// The thread a vfork holds until this process execs or ends.
    pub vfork_parent: Option<Tid>,
    /// Resource limits, [soft, hard] by resource (getrlimit, setrlimit, prlimit64).
    pub rlimits: [[u64; 2]; super::identity::RLIM_NLIMITS],
    /// Stopped by this signal (job control): none of its threads runs
    /// until a SIGCONT.
    pub stopped: Option<i32>,
    /// A stop or continue its parent has yet to see with WUNTRACED or
    /// WCONTINUED.
    pub report: Option<JobReport>,
    /// The arguments its program was started with (`/proc/<pid>/cmdline`).
    #[serde(default)]
    pub argv: Vec<String>,
    /// The environment its program was started with (by the run, or by
    /// its execve): what `rewind shell --pid` gives the shell.
    #[serde(default)]
    pub env: Vec<String>,
    /// Its nice value (getpriority, setpriority; inherited by a fork).
    #[serde(default)]
    pub nice: i32,
    /// Where its initial stack holds its arguments' and environment's
    /// strings (`/proc/<pid>/cmdline` and `environ` read that memory).
    #[serde(default)]
    pub strings: StackStrings,
    /// Reparented to the first process when its parent ended: as a child
    /// of Linux's init, it links no group to its session (`orphaned_pgrp`).
    #[serde(default)]
    pub adopted: bool,
}

/// The ranges `[start, end)` of the initial stack's argument strings and,
/// right after them, its environment strings, as Linux's mm keeps them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackStrings {
    pub args: (u64, u64),
    pub env: (u64, u64),
}

/// A job-control change a parent's wait reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobReport {
    Stopped(i32),
    Continued,
}

/// A process that has ended and that its parent has not reaped yet.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Zombie {
    pub ppid: Pid,
    pub pgid: Pid,
    pub sid: Pid,
    pub status: crate::run::ExitStatus,
    /// A core-dumping signal killed it while RLIMIT_CORE was not 0 (WCOREDUMP).
    pub core: bool,
    /// Its exit signal (wait4 without __WALL sees only SIGCHLD children).
    pub exit_signal: i32,
    /// Its leader thread's name (`/proc/<pid>/comm` until it is reaped).
    #[serde(default)]
    pub name: String,
}
