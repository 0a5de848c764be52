//! The system call table, in the manner of gVisor's `linux64.go`: one row
//! per x86-64 system call number, with its name, its handler, how far it is
//! supported (implemented, partial with what is missing, or missing: ENOSYS,
//! with why) and how events show its arguments. It is the one source: the
//! kernel dispatches from it (`dispatch.rs`), the numbers in `nr` are made
//! from it, `rewind doctor --syscalls` prints it and a test keeps the
//! README's list equal to it. A reader finds `futex` here, then in
//! `futex.rs`.

pub mod dispatch;
pub mod row;

use super::{fs, futex, identity, mm, net, posix_timer, process, sched, sdk, signal, thread, time};
use row::Arg::*;
use row::Handler::{Blocking as B, Simple as S};
use row::{full, missing, partial, Handler, Row};

/// `NR NAME = ROW;` rows, sorted by number: makes `TABLE` and, in `nr`, a
/// constant a call (`nr::futex` is 202).
macro_rules! table {
    ($($nr:tt $name:ident = $row:expr;)*) => {
        /// Every call, sorted by number.
        pub static TABLE: &[Row] = &[$($row.at($nr, stringify!($name)),)*];

        /// The system call numbers, by the calls' Linux names.
        #[allow(non_upper_case_globals, dead_code)]
        pub mod nr {
            $(pub const $name: u32 = $nr;)*
        }
    };
}

// Notes that several rows share.
const ROOT: &str = "accepted and ignored: the guest is root";
const EXEC: &str = "ELF executables and `#!` scripts; a dynamic one whose interpreter is not in \
    the image is killed (SIGSEGV) past the point of no return";
const DEVICE_NODES: &str = "device nodes are EPERM (the machine has only its own few devices)";
const NO_XATTR_DATA: &str = "no extended attributes are kept: ENODATA";
const NO_XATTR_LIST: &str = "no extended attributes are kept: an empty list";
const NO_XATTR_SET: &str = "no extended attributes are kept: EOPNOTSUPP";
const NOT_NEEDED: &str = "not needed by the programs run so far";
const ASYNC_IO: &str = "asynchronous I/O is not implemented";
const PRIVILEGED: &str =
    "privileged or host-facing: the machine has no devices, modules or host clock";
const ONE_MESSAGE: &str = "one message at a time: sendmsg and recvmsg are implemented";

table! {
    0 read = full(B(fs::io::sys_read), &[Fd, OutBuf]);
    1 write = full(B(fs::io::sys_write), &[Fd, InBuf]);
    2 open = full(B(fs::file_ops::sys_open), &[Str, OpenFlags]);
    3 close = full(S(fs::file_ops::descriptors::sys_close), &[Fd]);
    4 stat = full(S(fs::stat::sys_stat), &[Str, Hex]);
    5 fstat = full(S(fs::stat::sys_fstat), &[Fd, Hex]);
    6 lstat = full(S(fs::stat::sys_lstat), &[Str, Hex]);
    7 poll = full(B(fs::poll::sys_poll), &[Hex, Int, Int]);
    8 lseek = full(S(fs::file_ops::data::sys_lseek), &[Fd, Int, Whence]);
    9 mmap = partial(S(mm::calls::sys_mmap), &[Hex, Int, Hex, Hex, Fd, Hex],
        "MAP_SHARED of a generated file (/proc) is a private copy; a private file mapping \
            copies the file's pages present at mmap, so it does not see later writes to them \
            (Linux shows them until the page's first store); a store through a shared file \
            mapping gives the file its times when the guest next looks (stat, msync, fsync, \
            munmap), and only the first store to a page since the last sync or mmap of the \
            file does, where Linux counts each mapping's first; MAP_DROPPABLE is EINVAL, as \
            before Linux 6.11");
    10 mprotect = full(S(mm::calls::sys_mprotect), &[Hex, Int, Hex]);
    11 munmap = full(S(mm::calls::sys_munmap), &[Hex, Int]);
    12 brk = full(S(mm::calls::sys_brk), &[Hex]);
    13 rt_sigaction = full(S(signal::calls::sys_rt_sigaction), &[Signal, Hex, Hex, Int]);
    14 rt_sigprocmask = full(S(signal::calls::sys_rt_sigprocmask), &[Int, Hex, Hex, Int]);
    15 rt_sigreturn = full(B(signal::calls::sys_rt_sigreturn), &[]).noreturn();
    16 ioctl = partial(S(fs::file_ops::descriptors::sys_ioctl), &[Fd, Hex, Hex],
        "FIOCLEX, FIONCLEX, FIONBIO, FIONREAD; terminals' calls get ENOTTY");
    17 pread64 = full(S(fs::file_ops::data::sys_pread64), &[Fd, OutBuf, Int]);
    18 pwrite64 = full(S(fs::file_ops::data::sys_pwrite64), &[Fd, InBuf, Int]);
    19 readv = full(B(fs::io::sys_readv), &[Fd, Hex, Int]);
    20 writev = full(B(fs::io::sys_writev), &[Fd, Hex, Int]);
    21 access = full(S(fs::stat::sys_access), &[Str, Oct]);
    22 pipe = full(S(fs::pipe::sys_pipe), &[Hex]);
    23 select = full(B(fs::poll::sys_select), &[Int, Hex, Hex, Hex, Hex]);
    24 sched_yield = full(S(sched::sys_sched_yield), &[]);
    25 mremap = full(S(mm::calls::sys_mremap), &[Hex, Int, Int, Hex, Hex]);
    26 msync = full(S(mm::calls::sys_msync), &[Hex, Int, Hex]);
    27 mincore = partial(S(mm::calls::sys_mincore), &[Hex, Int, Hex],
        "every page of a mapping is reported resident (the monitor never swaps)");
    28 madvise = partial(S(mm::calls::sys_madvise), &[Hex, Int, Int],
        "only MADV_DONTNEED does anything; other advice is accepted and ignored");
    29 shmget = missing(NOT_NEEDED);
    30 shmat = missing(NOT_NEEDED);
    31 shmctl = missing(NOT_NEEDED);
    32 dup = full(S(fs::file_ops::descriptors::sys_dup), &[Fd]);
    33 dup2 = full(S(fs::file_ops::descriptors::sys_dup2), &[Fd, Fd]);
    34 pause = full(B(signal::calls::sys_pause), &[]);
    35 nanosleep = full(B(time::sys_nanosleep), &[Hex, Hex]);
    36 getitimer = full(S(time::sys_getitimer), &[Int, Hex]);
    37 alarm = full(S(time::sys_alarm), &[Int]);
    38 setitimer = full(S(time::sys_setitimer), &[Int, Hex, Hex]);
    39 getpid = full(S(identity::sys_getpid), &[]);
    40 sendfile = partial(B(fs::splice::sys_sendfile), &[Fd, Fd, Hex, Int],
        "from a regular file, or from a socket into a pipe (a pipe to read from, or a \
            socket to anything else, is EINVAL, as on Linux); /proc's generated files to \
            read from are EINVAL");
    41 socket = partial(S(net::calls::sys_socket), &[Int, Hex, Int],
        "AF_UNIX, and AF_INET/AF_INET6 TCP and UDP on the machine's own addresses only \
            (others are ENETUNREACH)");
    42 connect = full(B(net::calls::sys_connect), &[Fd, SockAddr, Int]);
    43 accept = full(B(net::calls::sys_accept), &[Fd, Hex, Hex]);
    44 sendto = full(B(net::calls::transfer::sys_sendto), &[Fd, InBuf, Hex, SockAddr, Int]);
    45 recvfrom = full(B(net::calls::transfer::sys_recvfrom), &[Fd, OutBuf, Hex, Hex, Hex]);
    46 sendmsg = partial(B(net::calls::transfer::sys_sendmsg), &[Fd, MsgHdr, Hex],
        "AF_UNIX sockets' SCM_RIGHTS and SCM_CREDENTIALS; no SCM_PIDFD; internet sockets \
            pass over the records they know (SCM_RIGHTS, SO_MARK, IP_TTL...), which change \
            nothing");
    47 recvmsg = partial(B(net::calls::transfer::sys_recvmsg), &[Fd, MsgHdr, Hex],
        "AF_UNIX sockets' SCM_RIGHTS and SCM_CREDENTIALS (SO_PASSCRED); no SCM_PIDFD or \
            SCM_SECURITY, and internet sockets receive no ancillary data (timestamps, \
            IP_PKTINFO...)");
    48 shutdown = full(S(net::calls::sys_shutdown), &[Fd, Int]);
    49 bind = full(S(net::calls::sys_bind), &[Fd, SockAddr, Int]);
    50 listen = full(S(net::calls::sys_listen), &[Fd, Int]);
    51 getsockname = full(S(net::calls::sys_getsockname), &[Fd, Hex, Hex]);
    52 getpeername = full(S(net::calls::sys_getpeername), &[Fd, Hex, Hex]);
    53 socketpair = full(S(net::calls::sys_socketpair), &[Int, Hex, Int, Hex]);
    54 setsockopt = full(S(net::calls::options::sys_setsockopt), &[Fd, Int, Int, Hex, Int]);
    55 getsockopt = full(S(net::calls::options::sys_getsockopt), &[Fd, Int, Int, Hex, Hex]);
    56 clone = partial(B(thread::sys_clone), &[Hex, Hex, Hex, Hex, Hex],
        "a new process gets a copy of its parent's memory, CLONE_VM without CLONE_THREAD \
            only with CLONE_VFORK (vfork, posix_spawn); namespaces, pidfds and \
            CLONE_FILES/CLONE_FS between processes get EINVAL");
    57 fork = full(B(process::sys_fork), &[]);
    58 vfork = partial(B(process::sys_vfork), &[],
        "the child runs in a copy of its parent's memory (the parent waits until it execs \
            or ends, as on Linux)");
    59 execve = partial(B(process::exec::sys_execve), &[Str, Hex, Hex], EXEC);
    60 exit = full(B(thread::sys_exit), &[Int]).noreturn();
    61 wait4 = partial(B(process::sys_wait4), &[Int, Hex, Hex, Hex], "rusage is zeros");
    62 kill = full(S(signal::calls::sys_kill), &[Int, Signal]);
    63 uname = full(S(identity::sys_uname), &[Hex]);
    64 semget = missing(NOT_NEEDED);
    65 semop = missing(NOT_NEEDED);
    66 semctl = missing(NOT_NEEDED);
    67 shmdt = missing(NOT_NEEDED);
    68 msgget = missing(NOT_NEEDED);
    69 msgsnd = missing(NOT_NEEDED);
    70 msgrcv = missing(NOT_NEEDED);
    71 msgctl = missing(NOT_NEEDED);
    72 fcntl = partial(B(fs::locks::sys_fcntl_locks), &[Fd, Int, Hex],
        "F_SETOWN and F_SETOWN_EX are accepted and do nothing, F_GETOWN and F_GETOWN_EX \
            say there is no owner (O_ASYNC never sends SIGIO); leases, F_NOTIFY, F_SETSIG \
            and seals get EINVAL");
    73 flock = full(B(fs::locks::sys_flock), &[Fd, Int]);
    74 fsync = full(S(fs::file_ops::sys_fsync), &[Fd]);
    75 fdatasync = full(S(fs::file_ops::sys_fsync), &[Fd]);
    76 truncate = full(S(fs::file_ops::sys_truncate), &[Str, Int]);
    77 ftruncate = full(S(fs::file_ops::sys_ftruncate), &[Fd, Int]);
    78 getdents = full(S(fs::dir::sys_getdents), &[Fd, Hex, Int]);
    79 getcwd = full(S(fs::dir::sys_getcwd), &[Hex, Int]);
    80 chdir = full(S(fs::dir::sys_chdir), &[Str]);
    81 fchdir = full(S(fs::dir::sys_fchdir), &[Fd]);
    82 rename = full(S(fs::dir::sys_rename), &[Str, Str]);
    83 mkdir = full(S(fs::dir::sys_mkdir), &[Str, Oct]);
    84 rmdir = full(S(fs::dir::sys_rmdir), &[Str]);
    85 creat = full(B(fs::file_ops::sys_creat), &[Str, Oct]);
    86 link = full(S(fs::dir::sys_link), &[Str, Str]);
    87 unlink = full(S(fs::dir::sys_unlink), &[Str]);
    88 symlink = full(S(fs::dir::sys_symlink), &[Str, Str]);
    89 readlink = full(S(fs::stat::sys_readlink), &[Str, OutBuf]);
    90 chmod = full(S(fs::stat::sys_chmod), &[Str, Oct]);
    91 fchmod = full(S(fs::stat::sys_fchmod), &[Fd, Oct]);
    92 chown = full(S(fs::stat::sys_chown), &[Str, Int, Int]);
    93 fchown = full(S(fs::stat::sys_fchown), &[Fd, Int, Int]);
    94 lchown = full(S(fs::stat::sys_lchown), &[Str, Int, Int]);
    95 umask = full(S(identity::sys_umask), &[Oct]);
    96 gettimeofday = full(S(time::sys_gettimeofday), &[Hex, Hex]);
    97 getrlimit = full(S(identity::sys_getrlimit), &[Int, Hex]);
    98 getrusage = partial(S(identity::sys_getrusage), &[Int, Hex],
        "user time is the run's virtual time; system time and every other field are zero");
    99 sysinfo = full(S(identity::sys_sysinfo), &[Hex]);
    100 times = full(S(time::sys_times), &[Hex]);
    101 ptrace = missing(PRIVILEGED);
    102 getuid = full(S(identity::sys_getid_root), &[]);
    103 syslog = missing(PRIVILEGED);
    104 getgid = full(S(identity::sys_getid_root), &[]);
    105 setuid = partial(S(identity::sys_set_ids), &[Int], ROOT);
    106 setgid = partial(S(identity::sys_set_ids), &[Int], ROOT);
    107 geteuid = full(S(identity::sys_getid_root), &[]);
    108 getegid = full(S(identity::sys_getid_root), &[]);
    109 setpgid = full(S(process::jobs::sys_setpgid), &[Int, Int]);
    110 getppid = full(S(identity::sys_getppid), &[]);
    111 getpgrp = full(S(process::jobs::sys_getpgrp), &[]);
    112 setsid = full(S(process::jobs::sys_setsid), &[]);
    113 setreuid = partial(S(identity::sys_set_ids), &[Int, Int], ROOT);
    114 setregid = partial(S(identity::sys_set_ids), &[Int, Int], ROOT);
    115 getgroups = full(S(identity::sys_getgroups), &[Int, Hex]);
    116 setgroups = missing(NOT_NEEDED);
    117 setresuid = partial(S(identity::sys_set_ids), &[Int, Int, Int], ROOT);
    118 getresuid = full(S(identity::sys_getres_ids), &[Hex, Hex, Hex]);
    119 setresgid = partial(S(identity::sys_set_ids), &[Int, Int, Int], ROOT);
    120 getresgid = full(S(identity::sys_getres_ids), &[Hex, Hex, Hex]);
    121 getpgid = full(S(process::jobs::sys_getpgid), &[Int]);
    122 setfsuid = missing(NOT_NEEDED);
    123 setfsgid = missing(NOT_NEEDED);
    124 getsid = full(S(process::jobs::sys_getsid), &[Int]);
    125 capget = missing(NOT_NEEDED);
    126 capset = missing(NOT_NEEDED);
    127 rt_sigpending = full(S(signal::calls::sys_rt_sigpending), &[Hex, Int]);
    128 rt_sigtimedwait = full(B(signal::calls::sys_rt_sigtimedwait), &[Hex, Hex, Hex, Int]);
    129 rt_sigqueueinfo = full(S(signal::calls::sys_rt_sigqueueinfo), &[Int, Signal, Hex]);
    130 rt_sigsuspend = full(B(signal::calls::sys_rt_sigsuspend), &[Hex, Int]);
    131 sigaltstack = full(S(signal::calls::sys_sigaltstack), &[Hex, Hex]);
    132 utime = full(S(fs::stat::sys_utime), &[Str, Hex]);
    133 mknod = partial(S(fs::dir::sys_mknod), &[Str, Oct, Hex], DEVICE_NODES);
    134 uselib = missing(NOT_NEEDED);
    135 personality = missing(NOT_NEEDED);
    136 ustat = missing(NOT_NEEDED);
    137 statfs = full(S(fs::stat::sys_statfs), &[Str, Hex]);
    138 fstatfs = full(S(fs::stat::sys_fstatfs), &[Fd, Hex]);
    139 sysfs = missing(NOT_NEEDED);
    140 getpriority = full(S(sched::sys_getpriority), &[Int, Int]);
    141 setpriority = partial(S(sched::sys_setpriority), &[Int, Int, Int],
        "the nice value is kept and inherited, but does not change the schedule");
    142 sched_setparam = full(S(sched::sys_sched_setparam), &[Int, Hex]);
    143 sched_getparam = full(S(sched::sys_sched_getparam), &[Int, Hex]);
    144 sched_setscheduler = partial(S(sched::sys_sched_setscheduler), &[Int, Int, Hex],
        "SCHED_OTHER, SCHED_BATCH and SCHED_IDLE are accepted and run alike; real-time \
            policies get EPERM");
    145 sched_getscheduler = full(S(sched::sys_sched_getscheduler), &[Int]);
    146 sched_get_priority_max = full(S(sched::sys_sched_get_priority_max), &[Int]);
    147 sched_get_priority_min = full(S(sched::sys_sched_get_priority_min), &[Int]);
    148 sched_rr_get_interval = full(S(sched::sys_sched_rr_get_interval), &[Int, Hex]);
    149 mlock = full(S(mm::calls::sys_mlock), &[Hex, Int]);
    150 munlock = full(S(mm::calls::sys_munlock), &[Hex, Int]);
    151 mlockall = full(S(mm::calls::sys_mlockall), &[Hex]);
    152 munlockall = full(S(mm::calls::sys_munlockall), &[]);
    153 vhangup = missing(NOT_NEEDED);
    154 modify_ldt = missing(NOT_NEEDED);
    155 pivot_root = missing(PRIVILEGED);
    156 _sysctl = missing(NOT_NEEDED);
    157 prctl = partial(S(identity::sys_prctl), &[Int, Hex, Hex, Hex, Hex],
        "PR_SET_NAME, PR_GET_NAME, PR_SET_PDEATHSIG and PR_GET_PDEATHSIG only");
    158 arch_prctl = full(S(thread::sys_arch_prctl), &[Hex, Hex]);
    159 adjtimex = missing(PRIVILEGED);
    160 setrlimit = full(S(identity::sys_setrlimit), &[Int, Hex]);
    161 chroot = missing(PRIVILEGED);
    162 sync = full(S(fs::file_ops::sys_sync), &[]);
    163 acct = missing(PRIVILEGED);
    164 settimeofday = missing(PRIVILEGED);
    165 mount = missing(PRIVILEGED);
    166 umount2 = missing(PRIVILEGED);
    167 swapon = missing(PRIVILEGED);
    168 swapoff = missing(PRIVILEGED);
    169 reboot = missing(PRIVILEGED);
    170 sethostname = missing(PRIVILEGED);
    171 setdomainname = missing(PRIVILEGED);
    172 iopl = missing(PRIVILEGED);
    173 ioperm = missing(PRIVILEGED);
    174 create_module = missing(NOT_NEEDED);
    175 init_module = missing(PRIVILEGED);
    176 delete_module = missing(PRIVILEGED);
    177 get_kernel_syms = missing(NOT_NEEDED);
    178 query_module = missing(NOT_NEEDED);
    179 quotactl = missing(PRIVILEGED);
    180 nfsservctl = missing(NOT_NEEDED);
    181 getpmsg = missing(NOT_NEEDED);
    182 putpmsg = missing(NOT_NEEDED);
    183 afs_syscall = missing(NOT_NEEDED);
    184 tuxcall = missing(NOT_NEEDED);
    185 security = missing(NOT_NEEDED);
    186 gettid = full(S(identity::sys_gettid), &[]);
    187 readahead = missing(NOT_NEEDED);
    188 setxattr = partial(S(fs::xattr::sys_setxattr), &[Str, Str, Hex, Int, Hex], NO_XATTR_SET);
    189 lsetxattr = partial(S(fs::xattr::sys_lsetxattr), &[Str, Str, Hex, Int, Hex], NO_XATTR_SET);
    190 fsetxattr = partial(S(fs::xattr::sys_fsetxattr), &[Fd, Str, Hex, Int, Hex], NO_XATTR_SET);
    191 getxattr = partial(S(fs::xattr::sys_getxattr), &[Str, Str, Hex, Int], NO_XATTR_DATA);
    192 lgetxattr = partial(S(fs::xattr::sys_lgetxattr), &[Str, Str, Hex, Int], NO_XATTR_DATA);
    193 fgetxattr = partial(S(fs::xattr::sys_fgetxattr), &[Fd, Str, Hex, Int], NO_XATTR_DATA);
    194 listxattr = partial(S(fs::xattr::sys_listxattr), &[Str, Hex, Int], NO_XATTR_LIST);
    195 llistxattr = partial(S(fs::xattr::sys_llistxattr), &[Str, Hex, Int], NO_XATTR_LIST);
    196 flistxattr = partial(S(fs::xattr::sys_flistxattr), &[Fd, Hex, Int], NO_XATTR_LIST);
    197 removexattr = partial(S(fs::xattr::sys_removexattr), &[Str, Str], NO_XATTR_DATA);
    198 lremovexattr = partial(S(fs::xattr::sys_lremovexattr), &[Str, Str], NO_XATTR_DATA);
    199 fremovexattr = partial(S(fs::xattr::sys_fremovexattr), &[Fd, Str], NO_XATTR_DATA);
    200 tkill = full(S(signal::calls::sys_tkill), &[Int, Signal]);
    201 time = full(S(time::sys_time), &[Hex]);
    202 futex = partial(B(futex::sys_futex), &[Hex, FutexOp, Int, Hex, Hex, Hex],
        "no priority-inheritance operations (FUTEX_LOCK_PI...): ENOSYS, as from a Linux \
            built without them (CONFIG_FUTEX_PI), and as Linux answers an operation it does \
            not know");
    203 sched_setaffinity = partial(S(sched::sys_sched_setaffinity), &[Int, Int, Hex],
        "accepted and ignored: one virtual CPU runs every thread");
    204 sched_getaffinity = full(S(sched::sys_sched_getaffinity), &[Int, Int, Hex]);
    205 set_thread_area = missing(NOT_NEEDED);
    206 io_setup = missing(ASYNC_IO);
    207 io_destroy = missing(ASYNC_IO);
    208 io_getevents = missing(ASYNC_IO);
    209 io_submit = missing(ASYNC_IO);
    210 io_cancel = missing(ASYNC_IO);
    211 get_thread_area = missing(NOT_NEEDED);
    212 lookup_dcookie = missing(NOT_NEEDED);
    213 epoll_create = full(S(fs::epoll::sys_epoll_create), &[Int]);
    214 epoll_ctl_old = missing(NOT_NEEDED);
    215 epoll_wait_old = missing(NOT_NEEDED);
    216 remap_file_pages = missing(NOT_NEEDED);
    217 getdents64 = full(S(fs::dir::sys_getdents64), &[Fd, Hex, Int]);
    218 set_tid_address = full(S(thread::sys_set_tid_address), &[Hex]);
    219 restart_syscall = missing(NOT_NEEDED);
    220 semtimedop = missing(NOT_NEEDED);
    221 fadvise64 = full(S(fs::file_ops::sys_fadvise64), &[Fd, Int, Int, Int]);
    222 timer_create = full(S(posix_timer::sys_timer_create), &[Int, Hex, Hex]);
    223 timer_settime = full(S(posix_timer::sys_timer_settime), &[Int, Hex, Hex, Hex]);
    224 timer_gettime = full(S(posix_timer::sys_timer_gettime), &[Int, Hex]);
    225 timer_getoverrun = full(S(posix_timer::sys_timer_getoverrun), &[Int]);
    226 timer_delete = full(S(posix_timer::sys_timer_delete), &[Int]);
    227 clock_settime = missing(PRIVILEGED);
    228 clock_gettime = full(S(time::sys_clock_gettime), &[Int, Hex]);
    229 clock_getres = full(S(time::sys_clock_getres), &[Int, Hex]);
    230 clock_nanosleep = full(B(time::sys_clock_nanosleep), &[Int, Int, Hex, Hex]);
    231 exit_group = full(B(thread::sys_exit_group), &[Int]).noreturn();
    232 epoll_wait = full(B(fs::epoll::sys_epoll_wait), &[Fd, Hex, Int, Int]);
    233 epoll_ctl = partial(S(fs::epoll::sys_epoll_ctl), &[Fd, Int, Fd, Hex],
        "an epoll instance inside another is EINVAL; regular files are EPERM");
    234 tgkill = full(S(signal::calls::sys_tgkill), &[Int, Int, Signal]);
    235 utimes = full(S(fs::stat::sys_utimes), &[Str, Hex]);
    236 vserver = missing(NOT_NEEDED);
    237 mbind = missing(NOT_NEEDED);
    238 set_mempolicy = missing(NOT_NEEDED);
    239 get_mempolicy = missing(NOT_NEEDED);
    240 mq_open = missing(NOT_NEEDED);
    241 mq_unlink = missing(NOT_NEEDED);
    242 mq_timedsend = missing(NOT_NEEDED);
    243 mq_timedreceive = missing(NOT_NEEDED);
    244 mq_notify = missing(NOT_NEEDED);
    245 mq_getsetattr = missing(NOT_NEEDED);
    246 kexec_load = missing(PRIVILEGED);
    247 waitid = partial(B(process::sys_waitid), &[Int, Int, Hex, Hex, Hex],
        "P_ALL, P_PID and P_PGID (no pidfds); rusage is zeros");
    248 add_key = missing(NOT_NEEDED);
    249 request_key = missing(NOT_NEEDED);
    250 keyctl = missing(NOT_NEEDED);
    251 ioprio_set = missing(NOT_NEEDED);
    252 ioprio_get = missing(NOT_NEEDED);
    253 inotify_init = missing(NOT_NEEDED);
    254 inotify_add_watch = missing(NOT_NEEDED);
    255 inotify_rm_watch = missing(NOT_NEEDED);
    256 migrate_pages = missing(NOT_NEEDED);
    257 openat = full(B(fs::file_ops::sys_openat), &[DirFd, Str, OpenFlags]);
    258 mkdirat = full(S(fs::dir::sys_mkdirat), &[DirFd, Str, Oct]);
    259 mknodat = partial(S(fs::dir::sys_mknodat), &[DirFd, Str, Oct, Hex], DEVICE_NODES);
    260 fchownat = full(S(fs::stat::sys_fchownat), &[DirFd, Str, Int, Int, AtFlags]);
    261 futimesat = full(S(fs::stat::sys_futimesat), &[DirFd, Str, Hex]);
    262 newfstatat = full(S(fs::stat::sys_newfstatat), &[DirFd, Str, Hex, AtFlags]);
    263 unlinkat = full(S(fs::dir::sys_unlinkat), &[DirFd, Str, Hex]);
    264 renameat = full(S(fs::dir::sys_renameat), &[DirFd, Str, DirFd, Str]);
    265 linkat = full(S(fs::dir::sys_linkat), &[DirFd, Str, DirFd, Str, AtFlags]);
    266 symlinkat = full(S(fs::dir::sys_symlinkat), &[Str, DirFd, Str]);
    267 readlinkat = full(S(fs::stat::sys_readlinkat), &[DirFd, Str, OutBuf]);
    268 fchmodat = full(S(fs::stat::sys_fchmodat), &[DirFd, Str, Oct]);
    269 faccessat = full(S(fs::stat::sys_faccessat), &[DirFd, Str, Oct]);
    270 pselect6 = full(B(fs::poll::sys_pselect6), &[Int, Hex, Hex, Hex, Hex, Hex]);
    271 ppoll = full(B(fs::poll::sys_ppoll), &[Hex, Int, Hex, Hex, Int]);
    272 unshare = missing(NOT_NEEDED);
    273 set_robust_list = full(S(thread::sys_set_robust_list), &[Hex, Int]);
    274 get_robust_list = full(S(thread::sys_get_robust_list), &[Int, Hex, Hex]);
    275 splice = partial(B(fs::splice::sys_splice), &[Fd, Hex, Fd, Hex, Int, Hex],
        "between a pipe and a pipe, a file, a socket or the run's output, and from a \
            socket into a pipe; devices and /proc's files are EINVAL");
    276 tee = full(B(fs::splice::sys_tee), &[Fd, Fd, Int, Hex]);
    277 sync_file_range = full(S(fs::file_ops::sys_sync_file_range), &[Fd, Int, Int, Hex]);
    278 vmsplice = missing(NOT_NEEDED);
    279 move_pages = missing(NOT_NEEDED);
    280 utimensat = full(S(fs::stat::sys_utimensat), &[DirFd, Str, Hex, AtFlags]);
    281 epoll_pwait = full(B(fs::epoll::sys_epoll_pwait), &[Fd, Hex, Int, Int, Hex, Int]);
    282 signalfd = full(S(signal::signalfd::sys_signalfd), &[Fd, Hex, Int]);
    283 timerfd_create = full(S(fs::eventfd::sys_timerfd_create), &[Int, Hex]);
    284 eventfd = full(S(fs::eventfd::sys_eventfd), &[Int]);
    285 fallocate = full(S(fs::file_ops::sys_fallocate), &[Fd, Int, Int, Int]);
    286 timerfd_settime = full(S(fs::eventfd::sys_timerfd_settime), &[Fd, Hex, Hex, Hex]);
    287 timerfd_gettime = full(S(fs::eventfd::sys_timerfd_gettime), &[Fd, Hex]);
    288 accept4 = full(B(net::calls::sys_accept4), &[Fd, Hex, Hex, Hex]);
    289 signalfd4 = full(S(signal::signalfd::sys_signalfd4), &[Fd, Hex, Int, Hex]);
    290 eventfd2 = full(S(fs::eventfd::sys_eventfd2), &[Int, Hex]);
    291 epoll_create1 = full(S(fs::epoll::sys_epoll_create1), &[Hex]);
    292 dup3 = full(S(fs::file_ops::descriptors::sys_dup3), &[Fd, Fd, Hex]);
    293 pipe2 = full(S(fs::pipe::sys_pipe2), &[Hex, Hex]);
    294 inotify_init1 = missing(NOT_NEEDED);
    295 preadv = full(S(fs::file_ops::data::sys_preadv), &[Fd, Hex, Int, Int]);
    296 pwritev = full(S(fs::file_ops::data::sys_pwritev), &[Fd, Hex, Int, Int]);
    297 rt_tgsigqueueinfo = full(S(signal::calls::sys_rt_tgsigqueueinfo), &[Int, Int, Signal, Hex]);
    298 perf_event_open = missing(PRIVILEGED);
    299 recvmmsg = missing(ONE_MESSAGE);
    300 fanotify_init = missing(NOT_NEEDED);
    301 fanotify_mark = missing(NOT_NEEDED);
    302 prlimit64 = full(S(identity::sys_prlimit64), &[Int, Int, Hex, Hex]);
    303 name_to_handle_at = missing(NOT_NEEDED);
    304 open_by_handle_at = missing(NOT_NEEDED);
    305 clock_adjtime = missing(PRIVILEGED);
    306 syncfs = full(S(fs::file_ops::sys_syncfs), &[Fd]);
    307 sendmmsg = missing(ONE_MESSAGE);
    308 setns = missing(NOT_NEEDED);
    309 getcpu = full(S(sched::sys_getcpu), &[Hex, Hex, Hex]);
    310 process_vm_readv = missing(NOT_NEEDED);
    311 process_vm_writev = missing(NOT_NEEDED);
    312 kcmp = missing(NOT_NEEDED);
    313 finit_module = missing(PRIVILEGED);
    314 sched_setattr = missing(NOT_NEEDED);
    315 sched_getattr = missing(NOT_NEEDED);
    316 renameat2 = full(S(fs::dir::sys_renameat2), &[DirFd, Str, DirFd, Str, Hex]);
    317 seccomp = missing(NOT_NEEDED);
    318 getrandom = full(S(identity::sys_getrandom), &[Hex, Int, Hex]);
    319 memfd_create = missing(NOT_NEEDED);
    320 kexec_file_load = missing(PRIVILEGED);
    321 bpf = missing(PRIVILEGED);
    322 execveat = partial(B(process::exec::sys_execveat), &[DirFd, Str, Hex, Hex, AtFlags], EXEC);
    323 userfaultfd = missing(NOT_NEEDED);
    324 membarrier = full(S(sched::sys_membarrier), &[Int, Hex, Int]);
    325 mlock2 = full(S(mm::calls::sys_mlock2), &[Hex, Int, Hex]);
    326 copy_file_range = full(S(fs::file_ops::data::sys_copy_file_range), &[Fd, Hex, Fd, Hex, Int, Hex]);
    327 preadv2 = full(S(fs::file_ops::data::sys_preadv2), &[Fd, Hex, Int, Int, Int, Hex]);
    328 pwritev2 = full(S(fs::file_ops::data::sys_pwritev2), &[Fd, Hex, Int, Int, Int, Hex]);
    329 pkey_mprotect = missing(NOT_NEEDED);
    330 pkey_alloc = missing(NOT_NEEDED);
    331 pkey_free = missing(NOT_NEEDED);
    332 statx = full(S(fs::stat::sys_statx), &[DirFd, Str, AtFlags, Hex, Hex]);
    333 io_pgetevents = missing(ASYNC_IO);
    334 rseq = missing(NOT_NEEDED);
    424 pidfd_send_signal = missing(NOT_NEEDED);
    425 io_uring_setup = missing(ASYNC_IO);
    426 io_uring_enter = missing(ASYNC_IO);
    427 io_uring_register = missing(ASYNC_IO);
    428 open_tree = missing(NOT_NEEDED);
    429 move_mount = missing(NOT_NEEDED);
    430 fsopen = missing(NOT_NEEDED);
    431 fsconfig = missing(NOT_NEEDED);
    432 fsmount = missing(NOT_NEEDED);
    433 fspick = missing(NOT_NEEDED);
    434 pidfd_open = missing(NOT_NEEDED);
    435 clone3 = partial(B(thread::sys_clone3), &[Hex, Int],
        "as clone; no pidfds, set_tid or cgroups (EINVAL)");
    436 close_range = full(S(fs::file_ops::descriptors::sys_close_range), &[Int, Int, Hex]);
    437 openat2 = partial(B(fs::file_ops::sys_openat2), &[DirFd, Str, Hex, Int], "ignores `resolve`");
    438 pidfd_getfd = missing(NOT_NEEDED);
    439 faccessat2 = full(S(fs::stat::sys_faccessat2), &[DirFd, Str, Oct, AtFlags]);
    440 process_madvise = missing(NOT_NEEDED);
    441 epoll_pwait2 = full(B(fs::epoll::sys_epoll_pwait2), &[Fd, Hex, Int, Hex, Hex, Int]);
    442 mount_setattr = missing(NOT_NEEDED);
    443 quotactl_fd = missing(NOT_NEEDED);
    444 landlock_create_ruleset = missing(NOT_NEEDED);
    445 landlock_add_rule = missing(NOT_NEEDED);
    446 landlock_restrict_self = missing(NOT_NEEDED);
    447 memfd_secret = missing(NOT_NEEDED);
    448 process_mrelease = missing(NOT_NEEDED);
    449 futex_waitv = missing(NOT_NEEDED);
    450 set_mempolicy_home_node = missing(NOT_NEEDED);
    // The guest SDK's own call ("RW" in ASCII, guest/sdk/rewind.h), no Linux call.
    0x5257 rewind_sdk = full(S(sdk::sys_sdk), &[Int, Int, InBuf]);
}

/// The row of call `nr`, served or not; None when no call has the number.
pub fn lookup(nr: u32) -> Option<&'static Row> {
    // Linux's numbers run from 0 without a gap up to 334: every step's
    // call is found at its own index, without a search.
    if let Some(row) = TABLE.get(nr as usize).filter(|r| r.nr == nr) {
        return Some(row);
    }
    TABLE
        .binary_search_by_key(&nr, |r| r.nr)
        .ok()
        .map(|i| &TABLE[i])
}

/// The row of call `nr` and its handler, when the kernel serves it.
pub fn served(nr: u32) -> Option<(&'static Row, Handler)> {
    lookup(nr).and_then(|r| Some((r, r.handler()?)))
}

/// The call's Linux name, implemented or not.
pub fn name(nr: u32) -> &'static str {
    lookup(nr).map_or("unknown", |r| r.name)
}

/// Every x86-64 system call Linux has (not Rewind's own), by number.
pub fn linux_calls() -> impl Iterator<Item = &'static Row> {
    TABLE.iter().filter(|r| r.nr != nr::rewind_sdk)
}

#[cfg(test)]
mod tests;
