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
        "a new process gets a copy of its parent's memory, CLONE_VM without CLONE_THREAD only with CLONE_VFORK (vfork, posix_spawn); namespaces, pidfds and CLONE_FILES/CLONE_FS between processes get EINVAL",
    ),
    (
        "clone3",
        "as clone; no pidfds, set_tid or cgroups (EINVAL)",
    ),
    (
        "vfork",
        "the child runs in a copy of its parent's memory (the parent waits until it execs or ends, as on Linux)",
    ),
    ("execve", "ELF executables and `#!` scripts; a dynamic one whose interpreter is not in the image is killed (SIGSEGV) past the point of no return"),
    ("execveat", "ELF executables and `#!` scripts; a dynamic one whose interpreter is not in the image is killed (SIGSEGV) past the point of no return"),
    ("wait4", "rusage is zeros"),
    ("getrusage", "user time is the run's virtual time; system time and every other field are zero"),
    (
        "waitid",
        "P_ALL, P_PID and P_PGID (no pidfds); rusage is zeros",
    ),
    (
        "futex",
        "no priority-inheritance operations (FUTEX_LOCK_PI...): ENOSYS, as from a Linux built without them (CONFIG_FUTEX_PI), and as Linux answers an operation it does not know",
    ),
    (
        "mmap",
        "MAP_SHARED of a generated file (/proc) is a private copy; a private file mapping copies the file's pages present at mmap, so it does not see later writes to them (Linux shows them until the page's first store); a store through a shared file mapping gives the file its times when the guest next looks (stat, msync, fsync, munmap), and only the first store to a page since the last sync or mmap of the file does, where Linux counts each mapping's first; MAP_DROPPABLE is EINVAL, as before Linux 6.11",
    ),
    (
        "madvise",
        "only MADV_DONTNEED does anything; other advice is accepted and ignored",
    ),
    ("openat2", "ignores `resolve`"),
    (
        "mknod",
        "device nodes are EPERM (the machine has only its own few devices)",
    ),
    (
        "mknodat",
        "device nodes are EPERM (the machine has only its own few devices)",
    ),
    (
        "sendfile",
        "from a regular file, or from a socket into a pipe (a pipe to read from, or a socket to anything else, is EINVAL, as on Linux); /proc's generated files to read from are EINVAL",
    ),
    (
        "splice",
        "between a pipe and a pipe, a file, a socket or the run's output, and from a socket into a pipe; devices and /proc's files are EINVAL",
    ),
    (
        "mincore",
        "every page of a mapping is reported resident (the monitor never swaps)",
    ),
    (
        "sched_setscheduler",
        "SCHED_OTHER, SCHED_BATCH and SCHED_IDLE are accepted and run alike; real-time policies get EPERM",
    ),
    (
        "setpriority",
        "the nice value is kept and inherited, but does not change the schedule",
    ),
    ("fcntl", "F_SETOWN and F_SETOWN_EX are accepted and do nothing, F_GETOWN and F_GETOWN_EX say there is no owner (O_ASYNC never sends SIGIO); leases, F_NOTIFY, F_SETSIG and seals get EINVAL"),
    (
        "ioctl",
        "FIOCLEX, FIONCLEX, FIONBIO, FIONREAD; terminals' calls get ENOTTY",
    ),
    (
        "prctl",
        "PR_SET_NAME, PR_GET_NAME, PR_SET_PDEATHSIG and PR_GET_PDEATHSIG only",
    ),
    (
        "sched_setaffinity",
        "accepted and ignored: one virtual CPU runs every thread",
    ),
    ("setuid", "accepted and ignored: the guest is root"),
    ("setgid", "accepted and ignored: the guest is root"),
    ("setreuid", "accepted and ignored: the guest is root"),
    ("setregid", "accepted and ignored: the guest is root"),
    ("setresuid", "accepted and ignored: the guest is root"),
    ("setresgid", "accepted and ignored: the guest is root"),
    (
        "socket",
        "AF_UNIX, and AF_INET/AF_INET6 TCP and UDP on the machine's own addresses only (others are ENETUNREACH)",
    ),
    (
        "sendmsg",
        "AF_UNIX sockets' SCM_RIGHTS and SCM_CREDENTIALS; no SCM_PIDFD; internet sockets pass over the records they know (SCM_RIGHTS, SO_MARK, IP_TTL...), which change nothing",
    ),
    (
        "recvmsg",
        "AF_UNIX sockets' SCM_RIGHTS and SCM_CREDENTIALS (SO_PASSCRED); no SCM_PIDFD or SCM_SECURITY, and internet sockets receive no ancillary data (timestamps, IP_PKTINFO...)",
    ),
    (
        "epoll_ctl",
        "an epoll instance inside another is EINVAL; regular files are EPERM",
    ),
    ("getxattr", "no extended attributes are kept: ENODATA"),
    ("lgetxattr", "no extended attributes are kept: ENODATA"),
    ("fgetxattr", "no extended attributes are kept: ENODATA"),
    (
        "listxattr",
        "no extended attributes are kept: an empty list",
    ),
    (
        "llistxattr",
        "no extended attributes are kept: an empty list",
    ),
    (
        "flistxattr",
        "no extended attributes are kept: an empty list",
    ),
    ("setxattr", "no extended attributes are kept: EOPNOTSUPP"),
    ("lsetxattr", "no extended attributes are kept: EOPNOTSUPP"),
    ("fsetxattr", "no extended attributes are kept: EOPNOTSUPP"),
    ("removexattr", "no extended attributes are kept: ENODATA"),
    ("lremovexattr", "no extended attributes are kept: ENODATA"),
    ("fremovexattr", "no extended attributes are kept: ENODATA"),
];

/// Families of calls numbered from one name to another (both included),
/// not implemented, and why.
const MISSING_SPANS: &[(&str, &str, &str)] = &[];

/// Why families of calls are not implemented, by name.
const MISSING: &[(&[&str], &str)] = &[
    (
        &["recvmmsg", "sendmmsg"],
        "one message at a time: sendmsg and recvmsg are implemented",
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
        None => {
            let number = |n: &str| NAMES.iter().position(|x| *x == n);
            let span = MISSING_SPANS.iter().find(|(first, last, _)| {
                number(first).is_some_and(|f| f <= nr as usize)
                    && number(last).is_some_and(|l| nr as usize <= l)
            });
            let named = || MISSING.iter().find(|(names, _)| names.contains(name));
            Support::Missing(match (span, named()) {
                (Some((_, _, why)), _) | (None, Some((_, why))) => why,
                (None, None) => MISSING_DEFAULT,
            })
        }
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
        for (first, last, why) in MISSING_SPANS {
            let at = |n: &str| NAMES.iter().position(|x| *x == n).unwrap();
            assert!(at(first) < at(last), "{first}..{last}");
            for name in &NAMES[at(first)..=at(last)] {
                assert!(!implemented(name), "{name} is implemented but in a span");
                let nr = at(name) as u32;
                assert_eq!(support(nr), Some(Support::Missing(why)), "{name}");
            }
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
