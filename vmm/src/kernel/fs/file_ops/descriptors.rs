//! The descriptor table: close, close_range, dup, dup2, dup3, fcntl and ioctl.

use crate::kernel::errno::*;
use crate::kernel::fs::vfs::Kind;
use crate::kernel::fs::*;
use crate::kernel::Kernel;

/// Close implements Linux syscall close(2).
pub fn sys_close(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (n, _) = k.fd(a[0])?;
    k.close_fd(n);
    Ok(0)
}

/// close_range(first, last, flags): CLOSE_RANGE_CLOEXEC marks instead of closing.
/// CloseRange implements Linux syscall close_range(2).
pub fn sys_close_range(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    const CLOSE_RANGE_UNSHARE: u64 = 2;
    const CLOSE_RANGE_CLOEXEC: u64 = 4;
    let (first, last, flags) = (a[0] as u32, a[1] as u32, a[2]);
    if flags & !(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC) != 0 || first > last {
        return Err(EINVAL);
    }
    let first = first.min(i32::MAX as u32) as i32;
    let last = last.min(i32::MAX as u32) as i32;
    let fds: Vec<i32> = k
        .cur_proc()
        .files
        .fds
        .range(first..=last)
        .map(|(n, _)| *n)
        .collect();
    for n in fds {
        if flags & CLOSE_RANGE_CLOEXEC != 0 {
            if let Some(f) = k.cur_proc().files.fds.get_mut(&n) {
                f.cloexec = true;
            }
        } else {
            k.close_fd(n);
        }
    }
    Ok(0)
}

/// Another reference to a description, for a new descriptor.
fn share(k: &mut Kernel, id: DescId) {
    if let Some(d) = k.vfs.descs.get_mut(&id) {
        d.refs += 1;
    }
}

/// Dup implements Linux syscall dup(2).
pub fn sys_dup(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, f) = k.fd(a[0])?;
    share(k, f.desc);
    Ok(k.install_fd(f.desc, 0, false)? as u64)
}

fn dup_to(k: &mut Kernel, old: u64, new: u64, cloexec: bool) -> SysResult<u64> {
    let (_, f) = k.fd(old)?;
    let new = i32::try_from(new as i64).map_err(|_| EBADF)?;
    if new < 0 || new as u64 >= crate::kernel::identity::NOFILE_LIMIT {
        return Err(EBADF);
    }
    share(k, f.desc);
    k.close_fd(new);
    k.cur_proc().files.fds.insert(
        new,
        Fd {
            desc: f.desc,
            cloexec,
        },
    );
    Ok(new as u64)
}

/// Dup2 implements Linux syscall dup2(2).
pub fn sys_dup2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (n, _) = k.fd(a[0])?;
    if n as i64 == a[1] as i64 {
        return Ok(a[1]);
    }
    dup_to(k, a[0], a[1], false)
}

/// Dup3 implements Linux syscall dup3(2).
pub fn sys_dup3(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[2] & !(O_CLOEXEC as u64) != 0 {
        return Err(EINVAL);
    }
    let (n, _) = k.fd(a[0])?;
    if n as i64 == a[1] as i64 {
        return Err(EINVAL);
    }
    dup_to(k, a[0], a[1], a[2] != 0)
}

const F_DUPFD: u64 = 0;
const F_GETFD: u64 = 1;
const F_SETFD: u64 = 2;
const F_GETFL: u64 = 3;
const F_SETFL: u64 = 4;
const F_SETOWN: u64 = 8;
const F_GETOWN: u64 = 9;
const F_SETOWN_EX: u64 = 15;
const F_GETOWN_EX: u64 = 16;
const F_DUPFD_CLOEXEC: u64 = 1030;
const F_SETPIPE_SZ: u64 = 1031;
const F_GETPIPE_SZ: u64 = 1032;
const FD_CLOEXEC: u64 = 1;
/// Flags F_SETFL may change.
const SETFL_FLAGS: u32 = O_APPEND | O_NONBLOCK | O_ASYNC | O_DIRECT | O_NOATIME;

/// Fcntl implements Linux syscall fcntl(2) (the locking commands are those of
/// `sys_fcntl_locks`, which hands every other command to this one).
/// Partial (fcntl): F_SETOWN and F_SETOWN_EX are accepted and do nothing, F_GETOWN and F_GETOWN_EX say there is no owner (O_ASYNC never sends SIGIO); leases, F_NOTIFY, F_SETSIG and seals get EINVAL.
pub fn sys_fcntl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (n, f) = k.fd(a[0])?;
    let (cmd, arg) = (a[1], a[2]);
    match cmd {
        F_DUPFD | F_DUPFD_CLOEXEC => {
            let min = i32::try_from(arg as i64).map_err(|_| EINVAL)?;
            if min < 0 || min as u64 >= crate::kernel::identity::NOFILE_LIMIT {
                return Err(EINVAL);
            }
            share(k, f.desc);
            Ok(k.install_fd(f.desc, min, cmd == F_DUPFD_CLOEXEC)? as u64)
        }
        F_GETFD => Ok(if f.cloexec { FD_CLOEXEC } else { 0 }),
        F_SETFD => {
            k.cur_proc().files.fds.get_mut(&n).unwrap().cloexec = arg & FD_CLOEXEC != 0;
            Ok(0)
        }
        F_GETFL => Ok(k.desc_mut(f.desc).flags as u64),
        F_SETFL => {
            let d = k.desc_mut(f.desc);
            d.flags = (d.flags & !SETFL_FLAGS) | (arg as u32 & SETFL_FLAGS);
            Ok(0)
        }
        F_SETOWN | F_SETOWN_EX => Ok(0),
        F_GETOWN => Ok(0),
        // glibc's fcntl(F_GETOWN) asks this; {type, pid} of no owner.
        F_GETOWN_EX => k.write_user(arg, &[0; 8]).map(|()| 0),
        F_GETPIPE_SZ => match k.desc_mut(f.desc).target {
            Target::Stdin | Target::Stdout | Target::Stderr => Ok(65536),
            Target::Io { obj, .. } => crate::kernel::fs::pipe::size(k, obj),
            _ => Err(EBADF),
        },
        F_SETPIPE_SZ => match k.desc_mut(f.desc).target {
            Target::Io { obj, .. } => crate::kernel::fs::pipe::set_size(k, obj, arg as u32 as u64),
            _ => Err(EBADF),
        },
        _ => Err(EINVAL),
    }
}

const TCGETS: u64 = 0x5401;
const TIOCGWINSZ: u64 = 0x5413;
const FIONREAD: u64 = 0x541b;
const FIONBIO: u64 = 0x5421;
const FIONCLEX: u64 = 0x5450;
const FIOCLEX: u64 = 0x5451;

/// No descriptor is a terminal (standard output is a pipe to the run's
/// output, whatever the host's is): TCGETS and TIOCGWINSZ are ENOTTY.
/// Ioctl implements Linux syscall ioctl(2).
/// Partial (ioctl): FIOCLEX, FIONCLEX, FIONBIO, FIONREAD; terminals' calls get ENOTTY.
pub fn sys_ioctl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (n, f) = k.fd(a[0])?;
    let d = k.vfs.descs.get(&f.desc).cloned().ok_or(EBADF)?;
    match a[1] {
        TCGETS | TIOCGWINSZ => Err(ENOTTY),
        FIOCLEX | FIONCLEX => {
            k.cur_proc().files.fds.get_mut(&n).unwrap().cloexec = a[1] == FIOCLEX;
            Ok(0)
        }
        FIONBIO => {
            let on = k.read_u32(a[2])? != 0;
            let d = k.desc_mut(f.desc);
            d.flags = if on {
                d.flags | O_NONBLOCK
            } else {
                d.flags & !O_NONBLOCK
            };
            Ok(0)
        }
        FIONREAD => {
            let avail = match &d.target {
                Target::Stdin => k.vfs.stdin.len() as u64 - d.offset.min(k.vfs.stdin.len() as u64),
                Target::Gen { data, .. } => (data.len() as u64).saturating_sub(d.offset),
                Target::Io { obj, .. } => crate::kernel::fs::io::unread(&k.vfs.io, *obj),
                Target::Node(ino) => match &k.vfs.tree.node(*ino)?.kind {
                    Kind::File(_) => k.vfs.tree.node(*ino)?.size.saturating_sub(d.offset),
                    _ => return Err(ENOTTY),
                },
                _ => return Err(ENOTTY),
            };
            k.write_u32(a[2], avail.min(i32::MAX as u64) as u32)?;
            Ok(0)
        }
        _ => Err(ENOTTY),
    }
}
