//! What the kernel supports, for every x86-64 system call number, in one
//! table like gVisor's: implemented, partial (with what is missing), or not
//! implemented (with why). Whether a call is implemented at all comes from
//! the dispatcher's own table (`syscalls::lookup`), so the two cannot
//! disagree; this file adds only the notes. `rewind doctor --syscalls`
//! prints it, and the README's list is checked against it.

use super::syscall_names::NAMES;
use super::syscalls::lookup;

/// How far a system call is supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    Implemented,
    /// Served, with this missing.
    Partial(&'static str),
    /// Returns ENOSYS, for this reason.
    Missing(&'static str),
}

/// Implemented calls with something missing.
const PARTIAL: &[(&str, &str)] = &[
    (
        "clone",
        "threads only: a new process (fork, vfork, posix_spawn) gets ENOSYS",
    ),
    ("clone3", "threads only: a new process gets ENOSYS"),
    (
        "futex",
        "no priority-inheritance operations (FUTEX_LOCK_PI...): ENOSYS",
    ),
    ("mmap", "MAP_SHARED file mappings are private copies"),
    (
        "madvise",
        "only MADV_DONTNEED does anything; other advice is accepted and ignored",
    ),
    ("flock", "does nothing: one process holds every file"),
    ("openat2", "ignores `resolve`"),
    (
        "ioctl",
        "FIOCLEX, FIONCLEX, FIONBIO, FIONREAD; terminals' calls get ENOTTY",
    ),
    ("prctl", "PR_SET_NAME and PR_GET_NAME only"),
    (
        "sched_setaffinity",
        "accepted and ignored: one virtual CPU runs every thread",
    ),
    ("setuid", "accepted and ignored: the guest is root"),
    ("setgid", "accepted and ignored: the guest is root"),
    ("setpgid", "accepted and ignored: one process"),
];

/// Why families of calls are not implemented, by name.
const MISSING: &[(&[&str], &str)] = &[
    (
        &[
            "fork", "vfork", "execve", "execveat", "wait4", "waitid", "pipe", "pipe2",
        ],
        "processes and pipes come with a later issue",
    ),
    (
        &[
            "socket",
            "connect",
            "accept",
            "accept4",
            "sendto",
            "recvfrom",
            "sendmsg",
            "recvmsg",
            "shutdown",
            "bind",
            "listen",
            "getsockname",
            "getpeername",
            "socketpair",
            "setsockopt",
            "getsockopt",
            "recvmmsg",
            "sendmmsg",
        ],
        "no network: a run's only inputs are its files, arguments and standard input",
    ),
    (
        &[
            "timer_create",
            "timer_settime",
            "timer_gettime",
            "timer_getoverrun",
            "timer_delete",
            "timerfd_create",
            "timerfd_settime",
            "timerfd_gettime",
        ],
        "POSIX timers and timerfd are not implemented yet (alarm and setitimer are)",
    ),
    (
        &[
            "io_setup",
            "io_destroy",
            "io_getevents",
            "io_submit",
            "io_cancel",
            "io_pgetevents",
            "io_uring_setup",
            "io_uring_enter",
            "io_uring_register",
        ],
        "asynchronous I/O is not implemented",
    ),
    (
        &[
            "epoll_create",
            "epoll_create1",
            "epoll_ctl",
            "epoll_wait",
            "epoll_pwait",
            "epoll_pwait2",
            "select",
            "pselect6",
            "eventfd",
            "eventfd2",
            "signalfd",
            "signalfd4",
        ],
        "event descriptors are not implemented (poll and ppoll are)",
    ),
    (
        &[
            "mount",
            "umount2",
            "swapon",
            "swapoff",
            "reboot",
            "sethostname",
            "setdomainname",
            "iopl",
            "ioperm",
            "init_module",
            "delete_module",
            "finit_module",
            "kexec_load",
            "kexec_file_load",
            "pivot_root",
            "chroot",
            "acct",
            "settimeofday",
            "clock_settime",
            "adjtimex",
            "clock_adjtime",
            "quotactl",
            "bpf",
            "perf_event_open",
            "ptrace",
            "syslog",
        ],
        "privileged or host-facing: the machine has no devices, modules or host clock",
    ),
];

const MISSING_DEFAULT: &str = "not needed by the programs run so far";

/// How far call `nr` is supported; None when no call has that number.
pub fn support(nr: u32) -> Option<Support> {
    let name = NAMES.get(nr as usize).filter(|n| !n.is_empty())?;
    Some(match lookup(nr) {
        Some(_) => PARTIAL
            .iter()
            .find(|(n, _)| n == name)
            .map_or(Support::Implemented, |(_, what)| Support::Partial(what)),
        None => Support::Missing(
            MISSING
                .iter()
                .find(|(names, _)| names.contains(name))
                .map_or(MISSING_DEFAULT, |(_, why)| why),
        ),
    })
}

/// Every x86-64 system call: (number, name, support), by number.
pub fn table() -> Vec<(u32, &'static str, Support)> {
    (0..NAMES.len() as u32)
        .filter_map(|nr| support(nr).map(|s| (nr, NAMES[nr as usize], s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_note_names_a_call_in_its_state() {
        let implemented = |n: &str| {
            table()
                .iter()
                .any(|(_, name, s)| *name == n && !matches!(s, Support::Missing(_)))
        };
        for (name, _) in PARTIAL {
            assert!(
                implemented(name),
                "{name} is partial but not in the dispatcher's table"
            );
        }
        for (names, _) in MISSING {
            for name in *names {
                assert!(NAMES.contains(name), "{name} is no x86-64 system call");
                assert!(
                    !implemented(name),
                    "{name} is implemented but listed as missing"
                );
            }
        }
    }

    #[test]
    fn every_call_the_dispatcher_serves_is_implemented_and_named() {
        for nr in 0..NAMES.len() as u32 {
            if lookup(nr).is_some() {
                assert!(
                    matches!(
                        support(nr),
                        Some(Support::Implemented | Support::Partial(_))
                    ),
                    "call {nr}"
                );
            }
        }
    }
}
