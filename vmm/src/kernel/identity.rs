//! Who and where the guest is: ids, uname, sysinfo, limits, randomness.
//! Every answer is fixed or derived from the run's inputs.

use super::elf::{thread_name, TASK_COMM_LEN};
use super::errno::*;
use super::Kernel;

/// Getpid implements Linux syscalls getpid(2), getpgrp(2), getpgid(2), getsid(2).
pub fn sys_getpid(k: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(k.cur_pid() as u64)
}

/// Gettid implements Linux syscall gettid(2).
pub fn sys_gettid(k: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(k.cur_tid() as u64)
}

/// Getppid implements Linux syscall getppid(2).
pub fn sys_getppid(k: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(k.cur_proc().ppid as u64)
}

/// getuid, geteuid, getgid, getegid: the guest is root.
/// GetidRoot implements Linux syscalls getuid(2), getgid(2), geteuid(2), getegid(2).
pub fn sys_getid_root(_: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(0)
}

/// getresuid / getresgid: three zeros.
/// GetresIds implements Linux syscalls getresuid(2), getresgid(2).
pub fn sys_getres_ids(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    for p in &a[..3] {
        k.write_u32(*p, 0)?;
    }
    Ok(0)
}

/// Getgroups implements Linux syscall getgroups(2).
pub fn sys_getgroups(_: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(0)
}

/// setuid and friends: root may become anyone; nothing changes.
/// SetIds implements Linux syscalls setuid(2), setgid(2), setpgid(2).
/// Partial (setuid): accepted and ignored: the guest is root.
/// Partial (setgid): accepted and ignored: the guest is root.
/// Partial (setpgid): accepted and ignored: one process.
pub fn sys_set_ids(_: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(0)
}

/// Setsid implements Linux syscall setsid(2).
pub fn sys_setsid(k: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(k.cur_pid() as u64)
}

/// Umask implements Linux syscall umask(2).
pub fn sys_umask(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let p = k.cur_proc();
    let old = p.umask;
    p.umask = a[0] as u32 & 0o777;
    Ok(old as u64)
}

const UTS_FIELD: usize = 65;
pub const UTS_SYSNAME: &str = "Linux";
pub const UTS_NODENAME: &str = "rewind";
pub const UTS_RELEASE: &str = "6.1.0-rewind";
pub const UTS_VERSION: &str = "#1 SMP PREEMPT_DYNAMIC";
pub const UTS_MACHINE: &str = "x86_64";

/// Uname implements Linux syscall uname(2).
pub fn sys_uname(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let mut buf = vec![0u8; UTS_FIELD * 6];
    for (i, f) in [
        UTS_SYSNAME,
        UTS_NODENAME,
        UTS_RELEASE,
        UTS_VERSION,
        UTS_MACHINE,
        "(none)",
    ]
    .iter()
    .enumerate()
    {
        buf[i * UTS_FIELD..i * UTS_FIELD + f.len()].copy_from_slice(f.as_bytes());
    }
    k.write_user(a[0], &buf)?;
    Ok(0)
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Sysinfo {
    uptime: i64,
    loads: [u64; 3],
    totalram: u64,
    freeram: u64,
    sharedram: u64,
    bufferram: u64,
    totalswap: u64,
    freeswap: u64,
    procs: u16,
    pad: u16,
    totalhigh: u64,
    freehigh: u64,
    mem_unit: u32,
    _f: [u8; 4],
}

/// Sysinfo implements Linux syscall sysinfo(2).
pub fn sys_sysinfo(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let total = k.m.ram.size();
    let used = k.m.ram.frames_in_use() * crate::machine::layout::PAGE_SIZE;
    let info = Sysinfo {
        uptime: (k.clock.now() / 1_000_000_000) as i64,
        totalram: total,
        freeram: total.saturating_sub(used),
        procs: k.procs.len() as u16,
        mem_unit: 1,
        ..Default::default()
    };
    k.write_struct(a[0], &info)?;
    Ok(0)
}

const GRND_NONBLOCK: u64 = 1;
const GRND_RANDOM: u64 = 2;
const GRND_INSECURE: u64 = 4;
/// Linux returns at most this much per getrandom call.
const GETRANDOM_MAX: u64 = 33_554_431;

/// Bytes from the run's seeded stream.
/// Getrandom implements Linux syscall getrandom(2).
pub fn sys_getrandom(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[2] & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0 {
        return Err(EINVAL);
    }
    let n = a[1].min(GETRANDOM_MAX) as usize;
    // A chunk at a time, stopping at the first page that cannot be written.
    let mut done = 0usize;
    while done < n {
        let mut buf = vec![0u8; (n - done).min(super::uaccess::IO_CHUNK)];
        k.rng.fill(&mut buf);
        match k.write_user_some(a[0].wrapping_add(done as u64), &buf) {
            Ok(w) if w == buf.len() => done += w,
            Ok(w) => return Ok((done + w) as u64),
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done as u64)
}

pub const RLIMIT_STACK: u64 = 3;
pub const RLIMIT_NOFILE: u64 = 7;
const RLIM_NLIMITS: u64 = 16;
const RLIM_INFINITY: u64 = u64::MAX;
/// Most descriptors a process may hold.
pub const NOFILE_LIMIT: u64 = 1024;

fn rlimit(resource: u64) -> [u64; 2] {
    match resource {
        RLIMIT_STACK => [crate::machine::layout::STACK_MAX, RLIM_INFINITY],
        RLIMIT_NOFILE => [NOFILE_LIMIT, NOFILE_LIMIT],
        _ => [RLIM_INFINITY, RLIM_INFINITY],
    }
}

pub fn sys_prlimit64(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (pid, resource, old) = (a[0], a[1], a[3]);
    if pid != 0 && pid as u32 != k.cur_pid() {
        return Err(ESRCH);
    }
    if resource >= RLIM_NLIMITS {
        return Err(EINVAL);
    }
    if old != 0 {
        let [cur, max] = rlimit(resource);
        k.write_u64(old, cur)?;
        k.write_u64(old + 8, max)?;
    }
    Ok(0)
}

/// Getrlimit implements Linux syscall getrlimit(2).
pub fn sys_getrlimit(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sys_prlimit64(k, [0, a[0], 0, a[1], 0, 0])
}

/// Setrlimit implements Linux syscall setrlimit(2).
pub fn sys_setrlimit(_: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[0] >= RLIM_NLIMITS {
        return Err(EINVAL);
    }
    Ok(0)
}

/// getrusage: all zeros, with virtual time as user time.
/// Getrusage implements Linux syscall getrusage(2).
pub fn sys_getrusage(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let mut buf = [0u8; 144];
    let ns = k.clock.elapsed_ns();
    buf[0..8].copy_from_slice(&((ns / 1_000_000_000) as i64).to_le_bytes());
    buf[8..16].copy_from_slice(&(((ns % 1_000_000_000) / 1000) as i64).to_le_bytes());
    k.write_user(a[1], &buf)?;
    Ok(0)
}

const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;

/// Prctl implements Linux syscall prctl(2).
/// Partial (prctl): PR_SET_NAME and PR_GET_NAME only.
pub fn sys_prctl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    match a[0] {
        PR_SET_NAME => {
            let raw = k.read_user(a[1], TASK_COMM_LEN)?;
            let end = raw
                .iter()
                .position(|b| *b == 0)
                .unwrap_or(TASK_COMM_LEN - 1);
            let name = String::from_utf8_lossy(&raw[..end]).into_owned();
            k.cur_thread().name = thread_name(&name);
            Ok(0)
        }
        PR_GET_NAME => {
            let mut b = [0u8; TASK_COMM_LEN];
            let name = k.cur_thread().name.clone();
            b[..name.len()].copy_from_slice(name.as_bytes());
            k.write_user(a[1], &b).map(|_| 0)
        }
        _ => Err(EINVAL),
    }
}
