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
    #[serde(with = "crate::machine::snapshot::regs_serde")]
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
}
