//! setsockopt and getsockopt.

use super::*;
use crate::kernel::net::addr::AF_UNIX;
use crate::kernel::net::cmsg::SOL_SOCKET;
use crate::kernel::time::Timeval;
use crate::kernel::Kernel;

/// Setsockopt implements Linux syscall setsockopt(2).
pub fn sys_setsockopt(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (obj, _) = sock_fd(k, a[0])?;
    let (level, name, val, len) = (a[1] as i32, a[2] as i32, a[3], a[4] as i32);
    if len < 0 {
        return Err(EINVAL);
    }
    let int = |k: &mut Kernel| -> SysResult<i32> {
        if len < 4 {
            return Err(EINVAL);
        }
        Ok(k.read_u32(val)? as i32)
    };
    match (level, name) {
        (SOL_SOCKET, SO_RCVBUF) | (SOL_SOCKET, SO_SNDBUF) => {
            let v = int(k)?;
            let size = (v.max(0) as usize)
                .saturating_mul(2)
                .clamp(4608, MAX_RCVBUF);
            let s = sock(k, obj)?;
            if name == SO_RCVBUF {
                s.rcvbuf = size;
            } else {
                s.sndbuf = size;
            }
            k.vfs.io.touch(obj);
            Ok(0)
        }
        (SOL_SOCKET, SO_RCVTIMEO | SO_SNDTIMEO) => {
            // sock_set_timeout: a whole timeval, its microseconds in range.
            if len < 16 {
                return Err(EINVAL);
            }
            let tv: Timeval = k.read_struct(val)?;
            if !(0..1_000_000).contains(&tv.usec) {
                return Err(EDOM);
            }
            let v = [tv.sec.to_le_bytes(), tv.usec.to_le_bytes()].concat();
            sock(k, obj)?.opts.insert((level, name), v);
            Ok(0)
        }
        _ => {
            let Some(&(_, _, size)) = KEPT.iter().find(|(l, n, _)| *l == level && *n == name)
            else {
                return Err(ENOPROTOOPT);
            };
            if (len as usize) < size.min(4) {
                return Err(EINVAL);
            }
            let bytes = k.read_user(val, size.min(len as usize))?;
            let mut v = vec![0u8; size];
            v[..bytes.len()].copy_from_slice(&bytes);
            sock(k, obj)?.opts.insert((level, name), v);
            Ok(0)
        }
    }
}

/// Getsockopt implements Linux syscall getsockopt(2).
pub fn sys_getsockopt(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (obj, _) = sock_fd(k, a[0])?;
    let (level, name, val, lenp) = (a[1] as i32, a[2] as i32, a[3], a[4]);
    let room = k.read_u32(lenp)? as i32;
    if room < 0 {
        return Err(EINVAL);
    }
    let s = sock(k, obj)?;
    let int = |v: i64| (v as i32).to_le_bytes().to_vec();
    let bytes = match (level, name) {
        (SOL_SOCKET, SO_TYPE) => int(s.kind as i64),
        (SOL_SOCKET, SO_ERROR) => int(s.error.take().unwrap_or(0) as i64),
        (SOL_SOCKET, SO_RCVBUF) => int(s.rcvbuf as i64),
        (SOL_SOCKET, SO_SNDBUF) => int(s.sndbuf as i64),
        (SOL_SOCKET, SO_DOMAIN) => int(s.domain as i64),
        (SOL_SOCKET, SO_PEERCRED) => {
            // No peer: pid 0, ids -1.
            let c = s.peercred.unwrap_or(Creds {
                pid: 0,
                uid: u32::MAX,
                gid: u32::MAX,
            });
            [
                c.pid.to_le_bytes(),
                c.uid.to_le_bytes(),
                c.gid.to_le_bytes(),
            ]
            .concat()
        }
        (SOL_SOCKET, SO_RCVTIMEO | SO_SNDTIMEO) => {
            // A negative one reads back as none, as Linux's 0 jiffies do.
            let tv = timeo(s, name).filter(|t| t.sec >= 0).unwrap_or_default();
            [tv.sec.to_le_bytes(), tv.usec.to_le_bytes()].concat()
        }
        (SOL_SOCKET, SO_ACCEPTCONN) => int(matches!(s.state, State::Listening { .. }) as i64),
        (SOL_SOCKET, SO_PROTOCOL) => int(match (s.domain, s.kind) {
            (AF_UNIX, _) => 0,
            (_, SOCK_DGRAM) => IPPROTO_UDP as i64,
            _ => IPPROTO_TCP as i64,
        }),
        _ => match KEPT.iter().find(|(l, n, _)| *l == level && *n == name) {
            Some(&(_, _, size)) => s
                .opts
                .get(&(level, name))
                .cloned()
                .unwrap_or_else(|| vec![0; size]),
            None => return Err(ENOPROTOOPT),
        },
    };
    let n = bytes.len().min(room as usize);
    k.write_user(val, &bytes[..n])?;
    k.write_u32(lenp, n as u32)?;
    Ok(0)
}
