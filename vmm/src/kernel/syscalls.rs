//! The one table from system call number to handler, and the dispatcher.
//! A reader finds `futex` here, then in `futex.rs`.

use super::errno::*;
use super::sched::Sys;
use super::task::PendingCall;
use super::{
    fs, futex, identity, mm, net, posix_timer, process, render, sched, sdk, signal, thread, time,
    Kernel,
};
use crate::run::EventKind;

/// How an argument is shown in events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    Int,
    Fd,
    Hex,
    Oct,
    /// A NUL-terminated string (a path).
    Str,
    /// Bytes the guest hands in; the next argument is their length (not shown).
    InBuf,
    /// Bytes the call fills; the next argument is the room (not shown), the result the count.
    OutBuf,
    FutexOp,
    Signal,
    /// A directory descriptor of an `*at` call (`AT_FDCWD`).
    DirFd,
    /// Open flags; with O_CREAT or O_TMPFILE the next argument is the mode (shown), else it is not shown.
    OpenFlags,
    /// `AT_*` flags.
    AtFlags,
    /// lseek's whence.
    Whence,
    /// A socket address; the next argument is its length (shown too).
    SockAddr,
    /// A `struct msghdr` (sendmsg, recvmsg): its ancillary records shown.
    MsgHdr,
}

type Simple = fn(&mut Kernel, [u64; 6]) -> SysResult<u64>;
type Blocking = fn(&mut Kernel, [u64; 6]) -> SysResult<Sys>;

#[derive(Clone, Copy)]
pub enum Handler {
    Simple(Simple),
    /// May block the thread, or not return to the caller.
    Blocking(Blocking),
}

pub struct Def {
    pub nr: u32,
    pub name: &'static str,
    pub handler: Handler,
    pub args: &'static [Arg],
    /// Recorded before it runs: it does not return (exit, rt_sigreturn).
    pub noreturn: bool,
}

use Arg::*;
use Handler::{Blocking as B, Simple as S};

const fn def(nr: u32, name: &'static str, handler: Handler, args: &'static [Arg]) -> Def {
    Def {
        nr,
        name,
        handler,
        args,
        noreturn: false,
    }
}

const fn noreturn(nr: u32, name: &'static str, handler: Handler, args: &'static [Arg]) -> Def {
    Def {
        nr,
        name,
        handler,
        args,
        noreturn: true,
    }
}

/// Calls that write to their first argument's file: write, pwrite64,
/// writev, pwritev, pwritev2 (for the single-writer property).
const WRITES_TO_FD: [u32; 5] = [1, 18, 20, 296, 328];

/// Sorted by number.
static TABLE: &[Def] = &[
    def(0, "read", B(fs::io::sys_read), &[Fd, OutBuf]),
    def(1, "write", B(fs::io::sys_write), &[Fd, InBuf]),
    def(2, "open", B(fs::sys_open), &[Str, OpenFlags]),
    def(3, "close", S(fs::sys_close), &[Fd]),
    def(4, "stat", S(fs::sys_stat), &[Str, Hex]),
    def(5, "fstat", S(fs::sys_fstat), &[Fd, Hex]),
    def(6, "lstat", S(fs::sys_lstat), &[Str, Hex]),
    def(7, "poll", B(fs::sys_poll), &[Hex, Int, Int]),
    def(8, "lseek", S(fs::sys_lseek), &[Fd, Int, Whence]),
    def(9, "mmap", S(mm::sys_mmap), &[Hex, Int, Hex, Hex, Fd, Hex]),
    def(10, "mprotect", S(mm::sys_mprotect), &[Hex, Int, Hex]),
    def(11, "munmap", S(mm::sys_munmap), &[Hex, Int]),
    def(12, "brk", S(mm::sys_brk), &[Hex]),
    def(
        13,
        "rt_sigaction",
        S(signal::sys_rt_sigaction),
        &[Signal, Hex, Hex, Int],
    ),
    def(
        14,
        "rt_sigprocmask",
        S(signal::sys_rt_sigprocmask),
        &[Int, Hex, Hex, Int],
    ),
    noreturn(15, "rt_sigreturn", B(signal::sys_rt_sigreturn), &[]),
    def(16, "ioctl", S(fs::sys_ioctl), &[Fd, Hex, Hex]),
    def(17, "pread64", S(fs::sys_pread64), &[Fd, OutBuf, Int]),
    def(18, "pwrite64", S(fs::sys_pwrite64), &[Fd, InBuf, Int]),
    def(19, "readv", B(fs::io::sys_readv), &[Fd, Hex, Int]),
    def(20, "writev", B(fs::io::sys_writev), &[Fd, Hex, Int]),
    def(21, "access", S(fs::sys_access), &[Str, Oct]),
    def(22, "pipe", S(fs::pipe::sys_pipe), &[Hex]),
    def(23, "select", B(fs::sys_select), &[Int, Hex, Hex, Hex, Hex]),
    def(24, "sched_yield", S(sched::sys_sched_yield), &[]),
    def(25, "mremap", S(mm::sys_mremap), &[Hex, Int, Int, Hex, Hex]),
    def(26, "msync", S(mm::sys_msync), &[Hex, Int, Hex]),
    def(27, "mincore", S(mm::sys_mincore), &[Hex, Int, Hex]),
    def(28, "madvise", S(mm::sys_madvise), &[Hex, Int, Int]),
    def(32, "dup", S(fs::sys_dup), &[Fd]),
    def(33, "dup2", S(fs::sys_dup2), &[Fd, Fd]),
    def(34, "pause", B(signal::sys_pause), &[]),
    def(35, "nanosleep", B(time::sys_nanosleep), &[Hex, Hex]),
    def(36, "getitimer", S(time::sys_getitimer), &[Int, Hex]),
    def(37, "alarm", S(time::sys_alarm), &[Int]),
    def(38, "setitimer", S(time::sys_setitimer), &[Int, Hex, Hex]),
    def(39, "getpid", S(identity::sys_getpid), &[]),
    def(
        40,
        "sendfile",
        B(fs::splice::sys_sendfile),
        &[Fd, Fd, Hex, Int],
    ),
    def(41, "socket", S(net::sys_socket), &[Int, Hex, Int]),
    def(42, "connect", B(net::sys_connect), &[Fd, SockAddr, Int]),
    def(43, "accept", B(net::sys_accept), &[Fd, Hex, Hex]),
    def(
        44,
        "sendto",
        B(net::sys_sendto),
        &[Fd, InBuf, Hex, SockAddr, Int],
    ),
    def(
        45,
        "recvfrom",
        B(net::sys_recvfrom),
        &[Fd, OutBuf, Hex, Hex, Hex],
    ),
    def(46, "sendmsg", B(net::sys_sendmsg), &[Fd, MsgHdr, Hex]),
    def(47, "recvmsg", B(net::sys_recvmsg), &[Fd, MsgHdr, Hex]),
    def(48, "shutdown", S(net::sys_shutdown), &[Fd, Int]),
    def(49, "bind", S(net::sys_bind), &[Fd, SockAddr, Int]),
    def(50, "listen", S(net::sys_listen), &[Fd, Int]),
    def(51, "getsockname", S(net::sys_getsockname), &[Fd, Hex, Hex]),
    def(52, "getpeername", S(net::sys_getpeername), &[Fd, Hex, Hex]),
    def(
        53,
        "socketpair",
        S(net::sys_socketpair),
        &[Int, Hex, Int, Hex],
    ),
    def(
        54,
        "setsockopt",
        S(net::sys_setsockopt),
        &[Fd, Int, Int, Hex, Int],
    ),
    def(
        55,
        "getsockopt",
        S(net::sys_getsockopt),
        &[Fd, Int, Int, Hex, Hex],
    ),
    def(
        56,
        "clone",
        B(thread::sys_clone),
        &[Hex, Hex, Hex, Hex, Hex],
    ),
    def(57, "fork", B(process::sys_fork), &[]),
    def(58, "vfork", B(process::sys_vfork), &[]),
    def(59, "execve", B(process::sys_execve), &[Str, Hex, Hex]),
    noreturn(60, "exit", B(thread::sys_exit), &[Int]),
    def(61, "wait4", B(process::sys_wait4), &[Int, Hex, Hex, Hex]),
    def(62, "kill", S(signal::sys_kill), &[Int, Signal]),
    def(63, "uname", S(identity::sys_uname), &[Hex]),
    def(72, "fcntl", B(fs::sys_fcntl_locks), &[Fd, Int, Hex]),
    def(73, "flock", B(fs::sys_flock), &[Fd, Int]),
    def(74, "fsync", S(fs::sys_fsync), &[Fd]),
    def(75, "fdatasync", S(fs::sys_fsync), &[Fd]),
    def(76, "truncate", S(fs::sys_truncate), &[Str, Int]),
    def(77, "ftruncate", S(fs::sys_ftruncate), &[Fd, Int]),
    def(78, "getdents", S(fs::sys_getdents), &[Fd, Hex, Int]),
    def(79, "getcwd", S(fs::sys_getcwd), &[Hex, Int]),
    def(80, "chdir", S(fs::sys_chdir), &[Str]),
    def(81, "fchdir", S(fs::sys_fchdir), &[Fd]),
    def(82, "rename", S(fs::sys_rename), &[Str, Str]),
    def(83, "mkdir", S(fs::sys_mkdir), &[Str, Oct]),
    def(84, "rmdir", S(fs::sys_rmdir), &[Str]),
    def(85, "creat", B(fs::sys_creat), &[Str, Oct]),
    def(86, "link", S(fs::sys_link), &[Str, Str]),
    def(87, "unlink", S(fs::sys_unlink), &[Str]),
    def(88, "symlink", S(fs::sys_symlink), &[Str, Str]),
    def(89, "readlink", S(fs::sys_readlink), &[Str, OutBuf]),
    def(90, "chmod", S(fs::sys_chmod), &[Str, Oct]),
    def(91, "fchmod", S(fs::sys_fchmod), &[Fd, Oct]),
    def(92, "chown", S(fs::sys_chown), &[Str, Int, Int]),
    def(93, "fchown", S(fs::sys_fchown), &[Fd, Int, Int]),
    def(94, "lchown", S(fs::sys_lchown), &[Str, Int, Int]),
    def(95, "umask", S(identity::sys_umask), &[Oct]),
    def(96, "gettimeofday", S(time::sys_gettimeofday), &[Hex, Hex]),
    def(97, "getrlimit", S(identity::sys_getrlimit), &[Int, Hex]),
    def(98, "getrusage", S(identity::sys_getrusage), &[Int, Hex]),
    def(99, "sysinfo", S(identity::sys_sysinfo), &[Hex]),
    def(100, "times", S(time::sys_times), &[Hex]),
    def(102, "getuid", S(identity::sys_getid_root), &[]),
    def(104, "getgid", S(identity::sys_getid_root), &[]),
    def(105, "setuid", S(identity::sys_set_ids), &[Int]),
    def(106, "setgid", S(identity::sys_set_ids), &[Int]),
    def(107, "geteuid", S(identity::sys_getid_root), &[]),
    def(108, "getegid", S(identity::sys_getid_root), &[]),
    def(109, "setpgid", S(process::sys_setpgid), &[Int, Int]),
    def(110, "getppid", S(identity::sys_getppid), &[]),
    def(111, "getpgrp", S(process::sys_getpgrp), &[]),
    def(112, "setsid", S(process::sys_setsid), &[]),
    def(113, "setreuid", S(identity::sys_set_ids), &[Int, Int]),
    def(114, "setregid", S(identity::sys_set_ids), &[Int, Int]),
    def(115, "getgroups", S(identity::sys_getgroups), &[Int, Hex]),
    def(117, "setresuid", S(identity::sys_set_ids), &[Int, Int, Int]),
    def(
        118,
        "getresuid",
        S(identity::sys_getres_ids),
        &[Hex, Hex, Hex],
    ),
    def(119, "setresgid", S(identity::sys_set_ids), &[Int, Int, Int]),
    def(
        120,
        "getresgid",
        S(identity::sys_getres_ids),
        &[Hex, Hex, Hex],
    ),
    def(121, "getpgid", S(process::sys_getpgid), &[Int]),
    def(124, "getsid", S(process::sys_getsid), &[Int]),
    def(
        127,
        "rt_sigpending",
        S(signal::sys_rt_sigpending),
        &[Hex, Int],
    ),
    def(
        128,
        "rt_sigtimedwait",
        B(signal::sys_rt_sigtimedwait),
        &[Hex, Hex, Hex, Int],
    ),
    def(
        129,
        "rt_sigqueueinfo",
        S(signal::sys_rt_sigqueueinfo),
        &[Int, Signal, Hex],
    ),
    def(
        130,
        "rt_sigsuspend",
        B(signal::sys_rt_sigsuspend),
        &[Hex, Int],
    ),
    def(131, "sigaltstack", S(signal::sys_sigaltstack), &[Hex, Hex]),
    def(132, "utime", S(fs::sys_utime), &[Str, Hex]),
    def(133, "mknod", S(fs::sys_mknod), &[Str, Oct, Hex]),
    def(137, "statfs", S(fs::sys_statfs), &[Str, Hex]),
    def(138, "fstatfs", S(fs::sys_fstatfs), &[Fd, Hex]),
    def(140, "getpriority", S(sched::sys_getpriority), &[Int, Int]),
    def(
        141,
        "setpriority",
        S(sched::sys_setpriority),
        &[Int, Int, Int],
    ),
    def(
        142,
        "sched_setparam",
        S(sched::sys_sched_setparam),
        &[Int, Hex],
    ),
    def(
        143,
        "sched_getparam",
        S(sched::sys_sched_getparam),
        &[Int, Hex],
    ),
    def(
        144,
        "sched_setscheduler",
        S(sched::sys_sched_setscheduler),
        &[Int, Int, Hex],
    ),
    def(
        145,
        "sched_getscheduler",
        S(sched::sys_sched_getscheduler),
        &[Int],
    ),
    def(
        146,
        "sched_get_priority_max",
        S(sched::sys_sched_get_priority_max),
        &[Int],
    ),
    def(
        147,
        "sched_get_priority_min",
        S(sched::sys_sched_get_priority_min),
        &[Int],
    ),
    def(
        148,
        "sched_rr_get_interval",
        S(sched::sys_sched_rr_get_interval),
        &[Int, Hex],
    ),
    def(149, "mlock", S(mm::sys_mlock), &[Hex, Int]),
    def(150, "munlock", S(mm::sys_munlock), &[Hex, Int]),
    def(151, "mlockall", S(mm::sys_mlockall), &[Hex]),
    def(152, "munlockall", S(mm::sys_munlockall), &[]),
    def(
        157,
        "prctl",
        S(identity::sys_prctl),
        &[Int, Hex, Hex, Hex, Hex],
    ),
    def(158, "arch_prctl", S(thread::sys_arch_prctl), &[Hex, Hex]),
    def(160, "setrlimit", S(identity::sys_setrlimit), &[Int, Hex]),
    def(162, "sync", S(fs::sys_sync), &[]),
    def(186, "gettid", S(identity::sys_gettid), &[]),
    def(
        188,
        "setxattr",
        S(fs::sys_setxattr),
        &[Str, Str, Hex, Int, Hex],
    ),
    def(
        189,
        "lsetxattr",
        S(fs::sys_lsetxattr),
        &[Str, Str, Hex, Int, Hex],
    ),
    def(
        190,
        "fsetxattr",
        S(fs::sys_fsetxattr),
        &[Fd, Str, Hex, Int, Hex],
    ),
    def(191, "getxattr", S(fs::sys_getxattr), &[Str, Str, Hex, Int]),
    def(
        192,
        "lgetxattr",
        S(fs::sys_lgetxattr),
        &[Str, Str, Hex, Int],
    ),
    def(193, "fgetxattr", S(fs::sys_fgetxattr), &[Fd, Str, Hex, Int]),
    def(194, "listxattr", S(fs::sys_listxattr), &[Str, Hex, Int]),
    def(195, "llistxattr", S(fs::sys_llistxattr), &[Str, Hex, Int]),
    def(196, "flistxattr", S(fs::sys_flistxattr), &[Fd, Hex, Int]),
    def(197, "removexattr", S(fs::sys_removexattr), &[Str, Str]),
    def(198, "lremovexattr", S(fs::sys_lremovexattr), &[Str, Str]),
    def(199, "fremovexattr", S(fs::sys_fremovexattr), &[Fd, Str]),
    def(200, "tkill", S(signal::sys_tkill), &[Int, Signal]),
    def(201, "time", S(time::sys_time), &[Hex]),
    def(
        202,
        "futex",
        B(futex::sys_futex),
        &[Hex, FutexOp, Int, Hex, Hex, Hex],
    ),
    def(
        203,
        "sched_setaffinity",
        S(sched::sys_sched_setaffinity),
        &[Int, Int, Hex],
    ),
    def(
        204,
        "sched_getaffinity",
        S(sched::sys_sched_getaffinity),
        &[Int, Int, Hex],
    ),
    def(213, "epoll_create", S(fs::epoll::sys_epoll_create), &[Int]),
    def(217, "getdents64", S(fs::sys_getdents64), &[Fd, Hex, Int]),
    def(
        218,
        "set_tid_address",
        S(thread::sys_set_tid_address),
        &[Hex],
    ),
    def(221, "fadvise64", S(fs::sys_fadvise64), &[Fd, Int, Int, Int]),
    def(
        222,
        "timer_create",
        S(posix_timer::sys_timer_create),
        &[Int, Hex, Hex],
    ),
    def(
        223,
        "timer_settime",
        S(posix_timer::sys_timer_settime),
        &[Int, Hex, Hex, Hex],
    ),
    def(
        224,
        "timer_gettime",
        S(posix_timer::sys_timer_gettime),
        &[Int, Hex],
    ),
    def(
        225,
        "timer_getoverrun",
        S(posix_timer::sys_timer_getoverrun),
        &[Int],
    ),
    def(
        226,
        "timer_delete",
        S(posix_timer::sys_timer_delete),
        &[Int],
    ),
    def(
        228,
        "clock_gettime",
        S(time::sys_clock_gettime),
        &[Int, Hex],
    ),
    def(229, "clock_getres", S(time::sys_clock_getres), &[Int, Hex]),
    def(
        230,
        "clock_nanosleep",
        B(time::sys_clock_nanosleep),
        &[Int, Int, Hex, Hex],
    ),
    noreturn(231, "exit_group", B(thread::sys_exit_group), &[Int]),
    def(
        232,
        "epoll_wait",
        B(fs::epoll::sys_epoll_wait),
        &[Fd, Hex, Int, Int],
    ),
    def(
        233,
        "epoll_ctl",
        S(fs::epoll::sys_epoll_ctl),
        &[Fd, Int, Fd, Hex],
    ),
    def(234, "tgkill", S(signal::sys_tgkill), &[Int, Int, Signal]),
    def(235, "utimes", S(fs::sys_utimes), &[Str, Hex]),
    def(
        247,
        "waitid",
        B(process::sys_waitid),
        &[Int, Int, Hex, Hex, Hex],
    ),
    def(257, "openat", B(fs::sys_openat), &[DirFd, Str, OpenFlags]),
    def(258, "mkdirat", S(fs::sys_mkdirat), &[DirFd, Str, Oct]),
    def(259, "mknodat", S(fs::sys_mknodat), &[DirFd, Str, Oct, Hex]),
    def(
        260,
        "fchownat",
        S(fs::sys_fchownat),
        &[DirFd, Str, Int, Int, AtFlags],
    ),
    def(261, "futimesat", S(fs::sys_futimesat), &[DirFd, Str, Hex]),
    def(
        262,
        "newfstatat",
        S(fs::sys_newfstatat),
        &[DirFd, Str, Hex, AtFlags],
    ),
    def(263, "unlinkat", S(fs::sys_unlinkat), &[DirFd, Str, Hex]),
    def(
        264,
        "renameat",
        S(fs::sys_renameat),
        &[DirFd, Str, DirFd, Str],
    ),
    def(
        265,
        "linkat",
        S(fs::sys_linkat),
        &[DirFd, Str, DirFd, Str, AtFlags],
    ),
    def(266, "symlinkat", S(fs::sys_symlinkat), &[Str, DirFd, Str]),
    def(
        267,
        "readlinkat",
        S(fs::sys_readlinkat),
        &[DirFd, Str, OutBuf],
    ),
    def(268, "fchmodat", S(fs::sys_fchmodat), &[DirFd, Str, Oct]),
    def(269, "faccessat", S(fs::sys_faccessat), &[DirFd, Str, Oct]),
    def(
        270,
        "pselect6",
        B(fs::sys_pselect6),
        &[Int, Hex, Hex, Hex, Hex, Hex],
    ),
    def(271, "ppoll", B(fs::sys_ppoll), &[Hex, Int, Hex, Hex, Int]),
    def(
        273,
        "set_robust_list",
        S(thread::sys_set_robust_list),
        &[Hex, Int],
    ),
    def(
        274,
        "get_robust_list",
        S(thread::sys_get_robust_list),
        &[Int, Hex, Hex],
    ),
    def(
        275,
        "splice",
        B(fs::splice::sys_splice),
        &[Fd, Hex, Fd, Hex, Int, Hex],
    ),
    def(276, "tee", B(fs::splice::sys_tee), &[Fd, Fd, Int, Hex]),
    def(
        277,
        "sync_file_range",
        S(fs::sys_sync_file_range),
        &[Fd, Int, Int, Hex],
    ),
    def(
        280,
        "utimensat",
        S(fs::sys_utimensat),
        &[DirFd, Str, Hex, AtFlags],
    ),
    def(
        281,
        "epoll_pwait",
        B(fs::epoll::sys_epoll_pwait),
        &[Fd, Hex, Int, Int, Hex, Int],
    ),
    def(
        282,
        "signalfd",
        S(signal::signalfd::sys_signalfd),
        &[Fd, Hex, Int],
    ),
    def(
        283,
        "timerfd_create",
        S(fs::eventfd::sys_timerfd_create),
        &[Int, Hex],
    ),
    def(284, "eventfd", S(fs::eventfd::sys_eventfd), &[Int]),
    def(285, "fallocate", S(fs::sys_fallocate), &[Fd, Int, Int, Int]),
    def(
        286,
        "timerfd_settime",
        S(fs::eventfd::sys_timerfd_settime),
        &[Fd, Hex, Hex, Hex],
    ),
    def(
        287,
        "timerfd_gettime",
        S(fs::eventfd::sys_timerfd_gettime),
        &[Fd, Hex],
    ),
    def(288, "accept4", B(net::sys_accept4), &[Fd, Hex, Hex, Hex]),
    def(
        289,
        "signalfd4",
        S(signal::signalfd::sys_signalfd4),
        &[Fd, Hex, Int, Hex],
    ),
    def(290, "eventfd2", S(fs::eventfd::sys_eventfd2), &[Int, Hex]),
    def(
        291,
        "epoll_create1",
        S(fs::epoll::sys_epoll_create1),
        &[Hex],
    ),
    def(292, "dup3", S(fs::sys_dup3), &[Fd, Fd, Hex]),
    def(293, "pipe2", S(fs::pipe::sys_pipe2), &[Hex, Hex]),
    def(295, "preadv", S(fs::sys_preadv), &[Fd, Hex, Int, Int]),
    def(296, "pwritev", S(fs::sys_pwritev), &[Fd, Hex, Int, Int]),
    def(
        297,
        "rt_tgsigqueueinfo",
        S(signal::sys_rt_tgsigqueueinfo),
        &[Int, Int, Signal, Hex],
    ),
    def(
        302,
        "prlimit64",
        S(identity::sys_prlimit64),
        &[Int, Int, Hex, Hex],
    ),
    def(306, "syncfs", S(fs::sys_syncfs), &[Fd]),
    def(309, "getcpu", S(sched::sys_getcpu), &[Hex, Hex, Hex]),
    def(
        316,
        "renameat2",
        S(fs::sys_renameat2),
        &[DirFd, Str, DirFd, Str, Hex],
    ),
    def(
        318,
        "getrandom",
        S(identity::sys_getrandom),
        &[Hex, Int, Hex],
    ),
    def(
        322,
        "execveat",
        B(process::sys_execveat),
        &[DirFd, Str, Hex, Hex, AtFlags],
    ),
    def(
        324,
        "membarrier",
        S(sched::sys_membarrier),
        &[Int, Hex, Int],
    ),
    def(325, "mlock2", S(mm::sys_mlock2), &[Hex, Int, Hex]),
    def(
        326,
        "copy_file_range",
        S(fs::sys_copy_file_range),
        &[Fd, Hex, Fd, Hex, Int, Hex],
    ),
    def(
        327,
        "preadv2",
        S(fs::sys_preadv2),
        &[Fd, Hex, Int, Int, Int, Hex],
    ),
    def(
        328,
        "pwritev2",
        S(fs::sys_pwritev2),
        &[Fd, Hex, Int, Int, Int, Hex],
    ),
    def(
        332,
        "statx",
        S(fs::sys_statx),
        &[DirFd, Str, AtFlags, Hex, Hex],
    ),
    def(435, "clone3", B(thread::sys_clone3), &[Hex, Int]),
    def(436, "close_range", S(fs::sys_close_range), &[Int, Int, Hex]),
    def(437, "openat2", B(fs::sys_openat2), &[DirFd, Str, Hex, Int]),
    def(
        439,
        "faccessat2",
        S(fs::sys_faccessat2),
        &[DirFd, Str, Oct, AtFlags],
    ),
    def(
        441,
        "epoll_pwait2",
        B(fs::epoll::sys_epoll_pwait2),
        &[Fd, Hex, Int, Hex, Hex, Int],
    ),
    def(
        sdk::SDK_SYSCALL,
        "rewind_sdk",
        S(sdk::sys_sdk),
        &[Int, Int, InBuf],
    ),
];

pub fn lookup(nr: u32) -> Option<&'static Def> {
    TABLE
        .binary_search_by_key(&nr, |d| d.nr)
        .ok()
        .map(|i| &TABLE[i])
}

/// The call's Linux name, implemented or not.
pub fn name(nr: u32) -> &'static str {
    match super::syscall_names::NAMES.get(nr as usize) {
        Some(n) if !n.is_empty() => n,
        _ => "unknown",
    }
}

impl Kernel<'_> {
    /// Serves the system call the current thread just made.
    pub(super) fn syscall(&mut self) {
        let r = self.m.regs();
        let args = [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9];
        let tid = self.cur_tid();
        let nr = u32::try_from(r.rax).unwrap_or(u32::MAX);
        let call = PendingCall { nr, args };
        let Some(def) = lookup(nr) else {
            let ret = -(ENOSYS.0 as i64);
            self.m.regs_mut().rax = ret as u64;
            let text = format!(
                "{}({:#x}, {:#x}, {:#x}, ...)",
                name(nr),
                args[0],
                args[1],
                args[2]
            );
            self.emit(EventKind::Syscall {
                nr,
                name: name(nr).to_string(),
                text: render::with_result(&text, ret),
                ret,
            });
            return;
        };
        if def.noreturn {
            let text = render::call_text(self, tid, call);
            self.emit(EventKind::Syscall {
                nr,
                name: def.name.to_string(),
                text,
                ret: 0,
            });
        }
        self.note_caller_signals();
        let result = match def.handler {
            Handler::Simple(f) => f(self, args).map(Sys::Ret),
            Handler::Blocking(f) => f(self, args),
        };
        let ret = match result {
            Ok(Sys::Ret(v)) => v as i64,
            Err(e) => -(e.0 as i64),
            Ok(Sys::Blocked) | Ok(Sys::NoReturn) => return,
        };
        self.call_sigmask_done(tid);
        self.set_rax(tid, ret as u64);
        if ret > 0 && WRITES_TO_FD.contains(&nr) {
            self.note_file_write(args[0]);
        }
        let text = render::call_text_with(self, tid, call, Some(ret));
        self.emit(EventKind::Syscall {
            nr,
            name: def.name.to_string(),
            text: render::with_result(&text, ret),
            ret,
        });
    }
}

#[cfg(test)]
mod sorted {
    /// `lookup` searches the table by halves: a row out of place hides calls.
    #[test]
    fn the_table_is_sorted_by_number() {
        for w in super::TABLE.windows(2) {
            assert!(w[0].nr < w[1].nr, "{} before {}", w[0].name, w[1].name);
        }
    }
}
