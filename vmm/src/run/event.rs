//! What a step did that a person cares about.

use serde::{Deserialize, Serialize};

/// One event of a run, addressed by the step at which it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub step: u64,
    pub pid: u32,
    pub tid: u32,
    pub kind: EventKind,
}

/// Each kind is documented, as `rewind events --json` prints it, in
/// docs/events.md (`record::json` flattens it; a new kind gets the same flat
/// shape without code there: give it named fields, and document it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A system call and its result, rendered strace-style at record time
    /// (`write(1, "job 27 done\n") = 12`). Unimplemented calls are recorded
    /// here too, with `ret == -ENOSYS`.
    Syscall {
        nr: u32,
        name: String,
        text: String,
        ret: i64,
    },
    /// A thread began (the first thread of a process has `parent == 0`).
    ThreadStart { parent: u32 },
    /// A thread ended with `exit(code)`.
    ThreadExit { code: i32 },
    /// A signal was delivered to (or generated for) the thread.
    Signal { signo: i32, code: i32, addr: u64 },
    /// The process ended with this status.
    ProcessExit {
        #[serde(with = "status_string")]
        status: ExitStatus,
    },
    /// A call of the guest SDK: an assertion or a bookmark.
    Sdk {
        /// `what` in JSON: `kind` names the event kind there.
        #[serde(rename = "what")]
        kind: SdkKind,
        cond: bool,
        message: String,
    },
    /// An access to shared memory: a memory scheduling point (`--points
    /// memory`). `at` is the instruction, with its symbol when known.
    Access {
        pc: u64,
        addr: u64,
        size: u32,
        access: Access,
        at: String,
    },
}

impl EventKind {
    /// Whether this is a memory access (hidden from `rewind events` by default).
    pub fn is_access(&self) -> bool {
        matches!(self, EventKind::Access { .. })
    }
}

/// What an instruction did to shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
    /// A locked read-modify-write (`lock` prefix, or `xchg` with memory).
    Atomic,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Atomic => "atomic",
        })
    }
}

/// What an SDK call was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SdkKind {
    /// `always(cond, message)`: cond must hold every time.
    Always,
    /// `sometimes(cond, message)`: cond must hold at least once in a check.
    Sometimes,
    /// `bookmark(message)`: a named point in the run.
    Bookmark,
}

/// How a process or a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExitStatus {
    Exited(i32),
    Killed(i32),
    Deadlocked,
    TimedOut,
}

impl ExitStatus {
    /// The status a shell reports for it.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Exited(c) => c & 0xff,
            ExitStatus::Killed(s) => 128 + s,
            ExitStatus::TimedOut => 124,
            ExitStatus::Deadlocked => DEADLOCKED_EXIT_CODE,
        }
    }
}

/// The exit status of `rewind run` when every thread of the guest is blocked
/// forever. 125 is free: 124 is timed-out, 126/127 are the shell's own.
pub const DEADLOCKED_EXIT_CODE: i32 = 125;

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitStatus::Exited(c) => write!(f, "exited:{c}"),
            ExitStatus::Killed(s) => write!(f, "killed:{}", signal_name(*s)),
            ExitStatus::Deadlocked => write!(f, "deadlocked"),
            ExitStatus::TimedOut => write!(f, "timed-out"),
        }
    }
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:>8}  {}/{}  ", self.step, self.pid, self.tid)?;
        match &self.kind {
            EventKind::Syscall { text, .. } => write!(f, "{text}"),
            EventKind::ThreadStart { parent } => write!(f, "thread start (from {parent})"),
            EventKind::ThreadExit { code } => write!(f, "thread exit = {code}"),
            EventKind::Signal { signo, code, addr } => {
                write!(f, "{} code={code} addr={addr:#x}", signal_name(*signo))
            }
            EventKind::ProcessExit { status } => write!(f, "process {status}"),
            EventKind::Access {
                addr,
                size,
                access,
                at,
                ..
            } => write!(f, "{access} {addr:#x} ({size} bytes) at {at}"),
            EventKind::Sdk {
                kind: SdkKind::Bookmark,
                message,
                ..
            } => write!(f, "bookmark {message:?}"),
            EventKind::Sdk {
                kind,
                cond,
                message,
            } => write!(
                f,
                "{}({cond}, {message:?})",
                if *kind == SdkKind::Always {
                    "always"
                } else {
                    "sometimes"
                }
            ),
        }
    }
}

/// `ExitStatus` in JSON as `rewind ls` says it (`"exited:0"`, `"killed:SIGSEGV"`,
/// `"deadlocked"`, `"timed-out"`); in the binary trace, its derived encoding.
pub mod status_string {
    use super::ExitStatus;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(s: &ExitStatus, ser: S) -> Result<S::Ok, S::Error> {
        if ser.is_human_readable() {
            ser.collect_str(s)
        } else {
            s.serialize(ser)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<ExitStatus, D::Error> {
        if de.is_human_readable() {
            let s = String::deserialize(de)?;
            s.parse().map_err(serde::de::Error::custom)
        } else {
            ExitStatus::deserialize(de)
        }
    }
}

impl std::str::FromStr for ExitStatus {
    type Err = String;

    /// The inverse of `Display`: `exited:N`, `killed:SIGNAME`, `deadlocked`, `timed-out`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("`{s}` is not a status (exited:N, killed:SIGNAME, deadlocked, timed-out)");
        match s {
            "deadlocked" => Ok(ExitStatus::Deadlocked),
            "timed-out" => Ok(ExitStatus::TimedOut),
            _ => {
                if let Some(n) = s.strip_prefix("exited:") {
                    n.parse().map(ExitStatus::Exited).map_err(|_| bad())
                } else if let Some(name) = s.strip_prefix("killed:") {
                    (1..=64)
                        .find(|&sig| signal_name(sig) == name)
                        .map(ExitStatus::Killed)
                        .ok_or_else(bad)
                } else {
                    Err(bad())
                }
            }
        }
    }
}

const NAMES: [&str; 32] = [
    "0",
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

pub fn signal_name(sig: i32) -> String {
    match sig {
        1..=31 => NAMES[sig as usize].to_string(),
        32..=64 => format!("SIGRT{}", sig - 32),
        _ => format!("signal {sig}"),
    }
}
