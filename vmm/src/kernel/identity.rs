//! Who and where the guest is: ids, uname, sysinfo, limits, randomness.
//! Every answer is fixed or derived from the run's inputs.

use super::elf::{thread_name, TASK_COMM_LEN};
use super::errno::*;
use super::Kernel;

/// Getpid implements Linux syscall getpid(2).
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

/// setuid and friends: root may become anyone; nothing changes (glibc's
/// posix_spawn with POSIX_SPAWN_RESETIDS, as make uses, calls setresuid).
/// SetIds implements Linux syscalls setuid(2), setgid(2), setreuid(2),
/// setregid(2), setresuid(2), setresgid(2).
/// Partial (setuid): accepted and ignored: the guest is root.
/// Partial (setgid): accepted and ignored: the guest is root.
/// Partial (setreuid): accepted and ignored: the guest is root.
/// Partial (setregid): accepted and ignored: the guest is root.
/// Partial (setresuid): accepted and ignored: the guest is root.
/// Partial (setresgid): accepted and ignored: the guest is root.
pub fn sys_set_ids(_: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(0)
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
pub const RLIMIT_CORE: u64 = 4;
pub const RLIMIT_NPROC: u64 = 6;
pub const RLIMIT_NOFILE: u64 = 7;
pub const RLIM_NLIMITS: usize = 16;
const RLIM_INFINITY: u64 = u64::MAX;
/// Most descriptors a process may hold.
pub const NOFILE_LIMIT: u64 = 1024;

/// A new run's limits, as a Debian login gets them: no core files, the
/// stack `STACK_MAX`, the descriptor and process caps the kernel enforces.
fn rlimit(resource: u64) -> [u64; 2] {
    match resource {
        RLIMIT_STACK => [crate::machine::layout::STACK_MAX, RLIM_INFINITY],
        RLIMIT_CORE => [0, RLIM_INFINITY],
        RLIMIT_NPROC => [super::process::MAX_PROCS as u64; 2],
        RLIMIT_NOFILE => [NOFILE_LIMIT, NOFILE_LIMIT],
        _ => [RLIM_INFINITY, RLIM_INFINITY],
    }
}

/// The first process's limits; later ones inherit their parent's.
pub fn default_rlimits() -> [[u64; 2]; RLIM_NLIMITS] {
    std::array::from_fn(|r| rlimit(r as u64))
}

/// Reads and sets a process's limit: the old value to `old` (when not 0),
/// then `new` (a soft limit above the hard one is EINVAL). The guest is
/// root, so it may raise a hard limit; the values are what programs read,
/// and RLIMIT_CORE decides the core flag of a wait status.
fn rlimit_call(
    k: &mut Kernel,
    pid: i32,
    resource: u64,
    new: Option<[u64; 2]>,
    old: u64,
) -> SysResult<u64> {
    if resource >= RLIM_NLIMITS as u64 {
        return Err(EINVAL);
    }
    let pid = match pid {
        0 => k.cur_pid(),
        p if p > 0 => p as u32,
        _ => return Err(ESRCH),
    };
    let was = k.procs.get(&pid).ok_or(ESRCH)?.rlimits[resource as usize];
    if new.is_some_and(|[cur, max]| cur > max) {
        return Err(EINVAL);
    }
    if old != 0 {
        k.write_u64(old, was[0])?;
        k.write_u64(old + 8, was[1])?;
    }
    if let Some(n) = new {
        k.procs.get_mut(&pid).unwrap().rlimits[resource as usize] = n;
    }
    Ok(0)
}

fn read_rlimit(k: &mut Kernel, at: u64) -> SysResult<[u64; 2]> {
    Ok([k.read_u64(at)?, k.read_u64(at.wrapping_add(8))?])
}

/// Prlimit64 implements Linux syscall prlimit64(2).
pub fn sys_prlimit64(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let new = match a[2] {
        0 => None,
        at => Some(read_rlimit(k, at)?),
    };
    rlimit_call(k, a[0] as i32, a[1], new, a[3])
}

/// Getrlimit implements Linux syscall getrlimit(2).
pub fn sys_getrlimit(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[1] == 0 {
        return Err(EFAULT);
    }
    rlimit_call(k, 0, a[0], None, a[1])
}

/// Setrlimit implements Linux syscall setrlimit(2).
pub fn sys_setrlimit(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[0] >= RLIM_NLIMITS as u64 {
        return Err(EINVAL);
    }
    let new = read_rlimit(k, a[1])?;
    rlimit_call(k, 0, a[0], Some(new), 0)
}

/// Getrusage implements Linux syscall getrusage(2).
/// Partial (getrusage): user time is the run's virtual time; system time and every other field are zero.
pub fn sys_getrusage(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let mut buf = [0u8; 144];
    let ns = k.clock.elapsed_ns();
    buf[0..8].copy_from_slice(&((ns / 1_000_000_000) as i64).to_le_bytes());
    buf[8..16].copy_from_slice(&(((ns % 1_000_000_000) / 1000) as i64).to_le_bytes());
    k.write_user(a[1], &buf)?;
    Ok(0)
}

const PR_SET_PDEATHSIG: u64 = 1;
const PR_GET_PDEATHSIG: u64 = 2;
const PR_SET_NAME: u64 = 15;
const PR_GET_NAME: u64 = 16;

/// Prctl implements Linux syscall prctl(2).
/// Partial (prctl): PR_SET_NAME, PR_GET_NAME, PR_SET_PDEATHSIG and PR_GET_PDEATHSIG only.
pub fn sys_prctl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    match a[0] {
        PR_SET_PDEATHSIG => {
            if a[1] > super::signal::NSIG as u64 {
                return Err(EINVAL);
            }
            k.cur_proc().pdeathsig = a[1] as i32;
            Ok(0)
        }
        PR_GET_PDEATHSIG => {
            let sig = k.cur_proc().pdeathsig as u32;
            k.write_u32(a[1], sig).map(|_| 0)
        }
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
