//! The monitor's own files: `/dev/null`, `/dev/zero`, `/dev/full`,
//! `/dev/random` and `/dev/urandom` (bytes of the run's seeded generator),
//! `/dev/tty` (ENXIO: no controlling terminal), `/proc/cpuinfo`, and
//! `/proc/<pid>/{exe,cwd,maps,cmdline,comm,environ,stat,status,fd/N,task/<tid>/}`
//! for every live process, made from the kernel's process table when
//! looked up (`/proc/self` links to the looking process's).

use super::super::errno::*;
use super::super::task::{Pid, Process, ThreadState, Tid, Zombie};
use super::super::Kernel;
use super::vfs::{
    Device, Ino, Kind, Node, Proc, ProcFile, Tree, S_IFDIR, S_IFLNK, S_IFMT, S_IFREG,
};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Most bytes one read of a device gives (a short read past it).
pub const DEVICE_READ_MAX: usize = 16 << 20;

/// The node of `/proc/<pid>/fd/N`.
pub fn fd_node(tree: &mut Tree, dir: Ino, pid: Pid, n: i32) -> Ino {
    tree.dyn_node(dir, &n.to_string(), || {
        Node::new(S_IFLNK | 0o700, 64, 0, Kind::Proc(Proc::Fd(pid, n)))
    })
}

/// The entries of `/proc/<pid>` (and of `/proc/<pid>/task/<tid>`, which
/// has no `fd`, `task`, `exe` or `cwd` here).
const PID_ENTRIES: [&str; 10] = [
    "cmdline", "comm", "cwd", "environ", "exe", "fd", "maps", "stat", "status", "task",
];
const TID_ENTRIES: [&str; 6] = ["cmdline", "comm", "environ", "maps", "stat", "status"];

/// The node of entry `name` of `/proc/<pid>` (`tid` None) or
/// `/proc/<pid>/task/<tid>`, if it has one.
fn entry_node(pid: Pid, tid: Option<Tid>, name: &str) -> Option<Node> {
    let file = |f| Some((S_IFREG | 0o444, Proc::File(pid, tid, f)));
    let (mode, p) = match name {
        "stat" => file(ProcFile::Stat),
        "status" => file(ProcFile::Status),
        "cmdline" => file(ProcFile::Cmdline),
        "comm" => file(ProcFile::Comm),
        "maps" => file(ProcFile::Maps),
        // Only its owner (root) reads another's environment, as on Linux.
        "environ" => Some((S_IFREG | 0o400, Proc::File(pid, tid, ProcFile::Environ))),
        _ if tid.is_some() => None,
        "exe" => Some((S_IFLNK | 0o777, Proc::Exe(pid))),
        "cwd" => Some((S_IFLNK | 0o777, Proc::Cwd(pid))),
        "fd" => Some((S_IFDIR | 0o500, Proc::FdDir(pid))),
        "task" => Some((S_IFDIR | 0o555, Proc::TaskDir(pid))),
        _ => None,
    }?;
    let mut n = Node::new(mode, 0, 0, Kind::Proc(p));
    if mode & S_IFMT == S_IFDIR {
        n.nlink = 2;
    }
    Some(n)
}

/// A directory node of `/proc/<pid>` or `/proc/<pid>/task/<tid>`.
fn dir_node(tree: &mut Tree, dir: Ino, name: &str, pid: Pid, tid: Option<Tid>) -> Ino {
    tree.dyn_node(dir, name, || {
        let mut n = Node::new(S_IFDIR | 0o555, 0, 0, Kind::Proc(Proc::Dir(pid, tid)));
        n.nlink = 2;
        n
    })
}

/// The process table as `/proc` shows it: live processes, and zombies
/// until they are reaped.
#[derive(Clone, Copy)]
pub struct Table<'a> {
    pub procs: &'a BTreeMap<Pid, Process>,
    pub zombies: &'a BTreeMap<Pid, Zombie>,
}

/// What a zombie's directory holds.
const ZOMBIE_ENTRIES: [&str; 5] = ["cmdline", "comm", "environ", "stat", "status"];

/// `name` as a number written the one way (`007` is no pid).
fn number<T: std::str::FromStr + ToString>(name: &str) -> Option<T> {
    name.parse::<T>().ok().filter(|n| n.to_string() == name)
}

/// The child `name` of `/proc` or of a directory under it made on the fly,
/// as the process table has it now: None for a process, thread or
/// descriptor that does not exist (any more).
pub fn proc_child(tree: &mut Tree, table: Table, dir: Ino, name: &str) -> SysResult<Option<Ino>> {
    let procs = table.procs;
    let threads = |pid: Pid| procs.get(&pid).map_or(&[][..], |p| &p.threads[..]);
    if tree.is_proc_root(dir) {
        return Ok(number::<Pid>(name)
            .filter(|pid| procs.contains_key(pid) || table.zombies.contains_key(pid))
            .map(|pid| dir_node(tree, dir, name, pid, None)));
    }
    let Kind::Proc(p) = tree.node(dir)?.kind.clone() else {
        return Ok(None);
    };
    Ok(match p {
        Proc::Dir(pid, tid) => {
            let live = procs.contains_key(&pid) && tid.is_none_or(|t| threads(pid).contains(&t));
            let zombie =
                tid.is_none() && table.zombies.contains_key(&pid) && ZOMBIE_ENTRIES.contains(&name);
            match entry_node(pid, tid, name) {
                Some(node) if live || zombie => Some(tree.dyn_node(dir, name, || node)),
                _ => None,
            }
        }
        Proc::TaskDir(pid) => number::<Tid>(name)
            .filter(|t| threads(pid).contains(t))
            .map(|t| dir_node(tree, dir, name, pid, Some(t))),
        Proc::FdDir(pid) => number::<i32>(name)
            .filter(|n| procs.get(&pid).is_some_and(|p| p.files.fds.contains_key(n)))
            .map(|n| fd_node(tree, dir, pid, n)),
        _ => None,
    })
}

/// The entries (name, node, DT_* type) of `/proc`'s processes, or of a
/// directory under it made on the fly, besides `.` and `..`.
pub fn proc_listing(tree: &mut Tree, table: Table, dir: Ino) -> SysResult<Vec<(String, Ino, u8)>> {
    let procs = table.procs;
    let names: Vec<String> = if tree.is_proc_root(dir) {
        let pids: std::collections::BTreeSet<Pid> =
            procs.keys().chain(table.zombies.keys()).copied().collect();
        pids.iter().map(|p| p.to_string()).collect()
    } else {
        match &tree.node(dir)?.kind {
            Kind::Proc(Proc::Dir(pid, None)) if !procs.contains_key(pid) => {
                ZOMBIE_ENTRIES.iter().map(|s| s.to_string()).collect()
            }
            Kind::Proc(Proc::Dir(_, None)) => PID_ENTRIES.iter().map(|s| s.to_string()).collect(),
            Kind::Proc(Proc::Dir(_, Some(_))) => {
                TID_ENTRIES.iter().map(|s| s.to_string()).collect()
            }
            Kind::Proc(Proc::TaskDir(pid)) => procs.get(pid).map_or(Vec::new(), |p| {
                p.threads.iter().map(|t| t.to_string()).collect()
            }),
            Kind::Proc(Proc::FdDir(pid)) => procs.get(pid).map_or(Vec::new(), |p| {
                p.files.fds.keys().map(|n| n.to_string()).collect()
            }),
            _ => return Err(ENOTDIR),
        }
    };
    let mut out = Vec::new();
    for name in names {
        if let Some(ino) = proc_child(tree, table, dir, &name)? {
            out.push((name, ino, tree.node(ino)?.dtype()));
        }
    }
    Ok(out)
}

/// What a read of `len` bytes of a device gives.
pub fn device_read(k: &mut Kernel, d: Device, len: usize) -> Vec<u8> {
    let n = len.min(DEVICE_READ_MAX);
    match d {
        Device::Null => Vec::new(),
        Device::Zero | Device::Full | Device::Tty => vec![0; n],
        Device::Random => {
            let mut v = vec![0; n];
            k.rng.fill(&mut v);
            v
        }
    }
}

/// What a write of `len` bytes to a device returns.
pub fn device_write(d: Device, len: usize) -> SysResult<u64> {
    match d {
        Device::Full => Err(ENOSPC),
        _ => Ok(len as u64),
    }
}

/// The contents of a generated file, as of now: ESRCH when its process
/// (or thread) has ended since it was looked up.
pub fn generate(k: &mut Kernel, p: &Proc) -> SysResult<Vec<u8>> {
    let (pid, tid, f) = match p {
        Proc::Text(t) => return Ok(t.clone().into_bytes()),
        Proc::File(pid, tid, f) => (*pid, *tid, *f),
        _ => return Err(EINVAL),
    };
    if let (false, Some(z)) = (k.procs.contains_key(&pid), k.zombies.get(&pid)) {
        if f == ProcFile::Environ {
            // No memory to read it from: Linux's open fails as for one gone.
            return Err(ESRCH);
        }
        return Ok(zombie(pid, z, f).into_bytes());
    }
    let proc_ = k.procs.get(&pid).ok_or(ESRCH)?;
    // The thread a file of the process describes: the leader, while it lives.
    let tid = match tid {
        Some(t) if proc_.threads.contains(&t) => t,
        Some(_) => return Err(ESRCH),
        None if proc_.threads.contains(&pid) => pid,
        None => proc_.threads.first().copied().ok_or(ESRCH)?,
    };
    Ok(match f {
        ProcFile::Maps => maps(k, pid).into_bytes(),
        ProcFile::Cmdline => cmdline(k, pid),
        ProcFile::Environ => {
            // The range its execve's stack gave the strings, read from its
            // memory now: what the program has written there since shows.
            let (start, end) = k.procs[&pid].strings.env;
            k.read_user_of(pid, start, end.saturating_sub(start) as usize)
        }
        ProcFile::Comm => format!("{}\n", comm(k, tid)).into_bytes(),
        ProcFile::Stat => stat(k, pid, tid).into_bytes(),
        ProcFile::Status => status(k, pid, tid).into_bytes(),
    })
}

/// A file of a zombie's directory: its name, state Z and ids; no memory,
/// no arguments.
fn zombie(pid: Pid, z: &Zombie, f: ProcFile) -> String {
    let name = &z.name;
    match f {
        ProcFile::Comm => format!("{name}\n"),
        ProcFile::Stat => format!(
            "{pid} ({name}) Z {} {} {} 0 -1 4227084 0 0 0 0 0 0 0 0 20 0 1 0 0 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 {}\n",
            z.ppid,
            z.pgid,
            z.sid,
            z.wstatus()
        ),
        ProcFile::Status => format!(
            "Name:\t{name}\nState:\tZ (zombie)\nTgid:\t{pid}\nPid:\t{pid}\nPPid:\t{}\n\
             Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nThreads:\t1\n",
            z.ppid
        ),
        ProcFile::Cmdline | ProcFile::Maps | ProcFile::Environ => String::new(),
    }
}

/// `/proc/<pid>/cmdline`, read from the process's memory as Linux's
/// get_mm_cmdline reads it: its argument strings, or, when the byte that
/// ended them is no longer NUL (setproctitle wrote over them), one string
/// from their start to its first NUL (with it), running on into the
/// environment's.
fn cmdline(k: &mut Kernel, pid: Pid) -> Vec<u8> {
    let s = k.procs[&pid].strings;
    let ((start, end), env_end) = (s.args, s.env.1);
    if end <= start {
        return Vec::new();
    }
    if k.read_user_of(pid, end - 1, 1)
        .first()
        .is_some_and(|&c| c != 0)
    {
        let all = k.read_user_of(pid, start, env_end.saturating_sub(start) as usize);
        // Up to and with the NUL, if there is one.
        let n = all
            .iter()
            .position(|&b| b == 0)
            .map_or(all.len(), |i| i + 1);
        return all[..n].to_vec();
    }
    k.read_user_of(pid, start, (end - start) as usize)
}

/// A thread's name (`comm`, PR_SET_NAME).
fn comm(k: &Kernel, tid: Tid) -> String {
    k.threads
        .get(&tid)
        .map_or_else(String::new, |t| t.name.clone())
}

/// A thread's state as /proc writes it: running (or runnable), sleeping in
/// a call, or its process stopped.
fn state(k: &Kernel, pid: Pid, tid: Tid) -> (char, &'static str) {
    if k.procs[&pid].stopped.is_some() {
        return ('T', "stopped");
    }
    match k.threads.get(&tid).map(|t| &t.state) {
        Some(ThreadState::Blocked { .. }) => ('S', "sleeping"),
        _ => ('R', "running"),
    }
}

/// `/proc/<pid>/maps`, from the process's mappings.
fn maps(k: &mut Kernel, pid: Pid) -> String {
    let p = &k.procs[&pid];
    let exe = p.exe.clone();
    let mut out = String::new();
    for (start, v) in p.mm.vmas() {
        let p = v.prot;
        let mut line = format!(
            "{:08x}-{:08x} {}{}{}{} 00000000 00:00 0",
            start,
            v.end,
            if p.read { 'r' } else { '-' },
            if p.write { 'w' } else { '-' },
            if p.exec { 'x' } else { '-' },
            if v.maps_shared() { 's' } else { 'p' },
        );
        // The program, the files mapped (the interpreter, libraries), and
        // Linux's bracketed names.
        let name = match v.name.as_str() {
            "[anon]" | "[file]" => "",
            n if n == exe || n.starts_with('/') || n.starts_with('[') => n,
            _ => "",
        };
        if !name.is_empty() {
            while line.len() < 73 {
                line.push(' ');
            }
            line.push_str(name);
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// `/proc/<pid>/stat`: the fields Linux gives, from the process's state
/// (times in clock ticks of the virtual clock; no page faults counted).
fn stat(k: &mut Kernel, pid: Pid, tid: Tid) -> String {
    let ticks = k.clock.elapsed_ns() / 10_000_000;
    let name = comm(k, tid);
    let (state, _) = state(k, pid, tid);
    let p = &k.procs[&pid];
    let threads = p.threads.len();
    let vsize: u64 = p.mm.vmas().map(|(s, v)| v.end - s).sum();
    let (brk_start, brk) = (p.mm.brk_start, p.mm.brk);
    let stack = crate::machine::layout::STACK_TOP;
    // pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
    // majflt cmajflt utime stime cutime cstime priority nice num_threads
    // itrealvalue starttime vsize rss rsslim, then addresses and signals.
    format!(
        "{tid} ({name}) {state} {} {} {} 0 -1 4194304 0 0 0 0 {ticks} 0 0 0 20 0 {threads} 0 0 \
         {vsize} 0 18446744073709551615 0 0 {stack} 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 \
         {brk_start} {brk} {stack} {stack} {stack} {stack} 0\n",
        p.ppid, p.pgid, p.sid
    )
}

/// `/proc/<pid>/status`: the lines programs read (name, state, ids,
/// threads, umask).
fn status(k: &mut Kernel, pid: Pid, tid: Tid) -> String {
    let name = comm(k, tid);
    let (state, state_name) = state(k, pid, tid);
    let p = &k.procs[&pid];
    let vm_kb: u64 = p.mm.vmas().map(|(s, v)| v.end - s).sum::<u64>() / 1024;
    format!(
        "Name:\t{name}\nUmask:\t{:04o}\nState:\t{state} ({state_name})\nTgid:\t{pid}\nNgid:\t0\n\
         Pid:\t{tid}\nPPid:\t{}\nTracerPid:\t0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n\
         FDSize:\t64\nGroups:\t\nNSpid:\t{tid}\nNSpgid:\t{}\nNSsid:\t{}\nVmSize:\t{vm_kb:8} kB\n\
         Threads:\t{}\nSigQ:\t0/63459\nCpus_allowed_list:\t0-{}\n",
        p.umask,
        p.ppid,
        p.pgid,
        p.sid,
        p.threads.len(),
        k.inputs.manifest.cores.max(1) - 1
    )
}

/// `/proc/cpuinfo` for `cores` processors, from this CPU's CPUID (which
/// the guest reads itself too): vendor, family, model, name and the flags
/// of the common features.
pub fn cpuinfo(cores: u32) -> String {
    use std::arch::x86_64::__cpuid;
    let l0 = __cpuid(0);
    let vendor: Vec<u8> = [l0.ebx, l0.edx, l0.ecx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    let vendor = String::from_utf8_lossy(&vendor).into_owned();
    let l1 = __cpuid(1);
    let family = ((l1.eax >> 8) & 0xf) + ((l1.eax >> 20) & 0xff);
    let model = ((l1.eax >> 4) & 0xf) | ((l1.eax >> 12) & 0xf0);
    let stepping = l1.eax & 0xf;
    let brand = if __cpuid(0x8000_0000).eax >= 0x8000_0004 {
        let b: Vec<u8> = (0x8000_0002u32..=0x8000_0004)
            .flat_map(|leaf| {
                let r = __cpuid(leaf);
                [r.eax, r.ebx, r.ecx, r.edx]
            })
            .flat_map(|r| r.to_le_bytes())
            .collect();
        String::from_utf8_lossy(&b)
            .trim_matches(char::from(0))
            .trim()
            .to_string()
    } else {
        String::new()
    };
    let l7 = if l0.eax >= 7 { __cpuid(7).ebx } else { 0 };
    let flags: Vec<&str> = [
        (l1.edx, 0, "fpu"),
        (l1.edx, 4, "tsc"),
        (l1.edx, 15, "cmov"),
        (l1.edx, 23, "mmx"),
        (l1.edx, 24, "fxsr"),
        (l1.edx, 25, "sse"),
        (l1.edx, 26, "sse2"),
        (l1.ecx, 0, "pni"),
        (l1.ecx, 1, "pclmulqdq"),
        (l1.ecx, 9, "ssse3"),
        (l1.ecx, 12, "fma"),
        (l1.ecx, 13, "cx16"),
        (l1.ecx, 19, "sse4_1"),
        (l1.ecx, 20, "sse4_2"),
        (l1.ecx, 22, "movbe"),
        (l1.ecx, 23, "popcnt"),
        (l1.ecx, 25, "aes"),
        (l1.ecx, 26, "xsave"),
        (l1.ecx, 28, "avx"),
        (l1.ecx, 29, "f16c"),
        (l1.ecx, 30, "rdrand"),
        (l7, 3, "bmi1"),
        (l7, 5, "avx2"),
        (l7, 8, "bmi2"),
        (l7, 16, "avx512f"),
        (l7, 18, "rdseed"),
        (l7, 19, "adx"),
        (l7, 29, "sha_ni"),
    ]
    .iter()
    .filter(|(reg, bit, _)| reg >> bit & 1 == 1)
    .map(|(_, _, name)| *name)
    .collect();
    let mut out = String::new();
    for n in 0..cores.max(1) {
        let _ = write!(
            out,
            "processor\t: {n}\nvendor_id\t: {vendor}\ncpu family\t: {family}\n\
             model\t\t: {model}\nmodel name\t: {brand}\nstepping\t: {stepping}\n\
             physical id\t: 0\nsiblings\t: {cores}\ncore id\t\t: {n}\ncpu cores\t: {cores}\n\
             apicid\t\t: {n}\nfpu\t\t: yes\nflags\t\t: {}\nclflush size\t: 64\n\
             cache_alignment\t: 64\naddress sizes\t: 48 bits physical, 48 bits virtual\n\n",
            flags.join(" "),
            cores = cores.max(1)
        );
    }
    out
}
