//! The socket calls: socket, socketpair, bind, listen, accept, accept4,
//! connect, send/recv (sendto, recvfrom, sendmsg, recvmsg, and read/write
//! through `fs::io`), shutdown, getsockname, getpeername, setsockopt and
//! getsockopt. Sending and receiving are in `transfer.rs`, the options in
//! `options.rs`.

use super::super::errno::*;
use super::super::fs::io::{self, call, Obj, ObjId};
use super::super::fs::{Description, Target, AT_FDCWD, O_CLOEXEC, O_NONBLOCK, O_RDWR};
use super::super::sched::Sys;
use super::super::Kernel;
use super::addr::{self, Addr, AF_INET, AF_INET6, AF_UNIX, AF_UNSPEC};
use super::cmsg::{self, SOL_SOCKET};
use super::*;
use crate::kernel::syscalls::nr;

pub mod options;
pub mod transfer;
use transfer::{timeo, timeo_deadline};

const SOCK_NONBLOCK: u64 = O_NONBLOCK as u64;
const SOCK_CLOEXEC: u64 = O_CLOEXEC as u64;
const SOCK_TYPE_MASK: u64 = 0xf;

const MSG_OOB: u64 = 0x1;
const MSG_PEEK: u64 = 0x2;
const MSG_TRUNC: u64 = 0x20;
const MSG_DONTWAIT: u64 = 0x40;
const MSG_NOSIGNAL: u64 = 0x4000;
const MSG_CMSG_CLOEXEC: u64 = 0x4000_0000;

const SO_PASSCRED: i32 = 16;
const SO_PEERCRED: i32 = 17;
const SO_TYPE: i32 = 3;
const SO_ERROR: i32 = 4;
const SO_SNDBUF: i32 = 7;
const SO_RCVBUF: i32 = 8;
const SO_LINGER: i32 = 13;
const SO_RCVTIMEO: i32 = 20;
const SO_SNDTIMEO: i32 = 21;
const SO_ACCEPTCONN: i32 = 30;
const SO_PROTOCOL: i32 = 38;
const SO_DOMAIN: i32 = 39;
/// Socket options kept as set: (level, name, size of the value).
const KEPT: &[(i32, i32, usize)] = &[
    (SOL_SOCKET, SO_REUSEADDR, 4),
    (SOL_SOCKET, 6, 4),  // SO_BROADCAST
    (SOL_SOCKET, 9, 4),  // SO_KEEPALIVE
    (SOL_SOCKET, 10, 4), // SO_OOBINLINE
    (SOL_SOCKET, 12, 4), // SO_PRIORITY
    (SOL_SOCKET, 15, 4), // SO_REUSEPORT
    (SOL_SOCKET, SO_PASSCRED, 4),
    (SOL_SOCKET, 18, 4), // SO_RCVLOWAT
    (SOL_SOCKET, SO_LINGER, 8),
    (SOL_SOCKET, SO_RCVTIMEO, 16),
    (SOL_SOCKET, SO_SNDTIMEO, 16),
    (IPPROTO_TCP, 1, 4),  // TCP_NODELAY
    (IPPROTO_TCP, 2, 4),  // TCP_MAXSEG
    (IPPROTO_TCP, 3, 4),  // TCP_CORK
    (IPPROTO_TCP, 4, 4),  // TCP_KEEPIDLE
    (IPPROTO_TCP, 5, 4),  // TCP_KEEPINTVL
    (IPPROTO_TCP, 6, 4),  // TCP_KEEPCNT
    (IPPROTO_TCP, 9, 4),  // TCP_DEFER_ACCEPT
    (IPPROTO_TCP, 12, 4), // TCP_QUICKACK
    (IPPROTO_TCP, 18, 4), // TCP_USER_TIMEOUT
    (IPPROTO_TCP, 23, 4), // TCP_FASTOPEN
    (IPPROTO_IP, 1, 4),   // IP_TOS
    (IPPROTO_IP, 2, 4),   // IP_TTL
    (IPPROTO_IPV6, IPV6_V6ONLY, 4),
];

/// The socket behind descriptor `fd`: ENOTSOCK for any other descriptor.
fn sock_fd(k: &mut Kernel, fd: u64) -> SysResult<(ObjId, Description)> {
    let (_, d) = k.desc(fd)?;
    match d.target {
        Target::Io { obj, .. } if k.vfs.io.socket(obj).is_some() => Ok((obj, d)),
        _ => Err(ENOTSOCK),
    }
}

fn sock<'a>(k: &'a mut Kernel<'_>, obj: ObjId) -> SysResult<&'a mut Socket> {
    k.vfs.io.socket(obj).ok_or(EBADF)
}

/// A description and descriptor for socket `obj`.
fn install(k: &mut Kernel, obj: ObjId, flags: u64) -> SysResult<i32> {
    let d = k.vfs.open_desc(
        Target::Io { obj, write: false },
        O_RDWR | (flags & SOCK_NONBLOCK) as u32,
        format!("socket:[{}]", 0x4000 + obj),
    );
    k.install_fd(d, 0, flags & SOCK_CLOEXEC != 0)
}

/// The type and flags of socket(2)'s second argument.
fn sock_type(domain: u64, ty: u64, proto: u64) -> SysResult<(u16, u32)> {
    if ty & !(SOCK_TYPE_MASK | SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(EINVAL);
    }
    let domain = match domain {
        1 => AF_UNIX,
        2 => AF_INET,
        10 => AF_INET6,
        _ => return Err(EAFNOSUPPORT),
    };
    let kind = (ty & SOCK_TYPE_MASK) as u32;
    let ok = match (domain, kind) {
        (AF_UNIX, SOCK_STREAM | SOCK_DGRAM | SOCK_SEQPACKET) => proto == 0,
        (_, SOCK_STREAM) if domain != AF_UNIX => proto == 0 || proto == IPPROTO_TCP as u64,
        (_, SOCK_DGRAM) if domain != AF_UNIX => proto == 0 || proto == IPPROTO_UDP as u64,
        (_, 1..=6) => return Err(ESOCKTNOSUPPORT),
        _ => return Err(EINVAL),
    };
    if !ok {
        return Err(EPROTONOSUPPORT);
    }
    Ok((domain, kind))
}

/// Socket implements Linux syscall socket(2).
/// Partial (socket): AF_UNIX, and AF_INET/AF_INET6 TCP and UDP on the machine's own addresses only (others are ENETUNREACH).
pub fn sys_socket(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (domain, kind) = sock_type(a[0], a[1], a[2])?;
    let obj = k
        .vfs
        .io
        .add(Obj::Socket(Box::new(Socket::new(domain, kind))))?;
    Ok(install(k, obj, a[1])? as u64)
}

/// Socketpair implements Linux syscall socketpair(2).
pub fn sys_socketpair(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (domain, kind) = sock_type(a[0], a[1], a[2])?;
    if domain != AF_UNIX {
        return Err(EOPNOTSUPP);
    }
    let x = k
        .vfs
        .io
        .add(Obj::Socket(Box::new(Socket::new(domain, kind))))?;
    let y = match k
        .vfs
        .io
        .add(Obj::Socket(Box::new(Socket::new(domain, kind))))
    {
        Ok(y) => y,
        Err(e) => {
            k.vfs.io.remove(x);
            return Err(e);
        }
    };
    let own = cmsg::own_creds(k);
    for (me, peer) in [(x, y), (y, x)] {
        let s = sock(k, me)?;
        s.state = State::Connected { peer };
        s.peercred = Some(own);
        s.local = Some(Addr::Unix(Vec::new()));
        s.remote = Some(Addr::Unix(Vec::new()));
    }
    let fx = match install(k, x, a[1]) {
        Ok(f) => f,
        Err(e) => {
            super::close(&mut k.vfs.io, y);
            return Err(e);
        }
    };
    let fy = match install(k, y, a[1]) {
        Ok(f) => f,
        Err(e) => {
            k.close_fd(fx);
            return Err(e);
        }
    };
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&fx.to_le_bytes());
    out[4..].copy_from_slice(&fy.to_le_bytes());
    if let Err(e) = k.write_user(a[3], &out) {
        k.close_fd(fx);
        k.close_fd(fy);
        return Err(e);
    }
    Ok(0)
}

/// The guest's address argument, parsed for a socket of `domain`.
fn read_addr(k: &mut Kernel, va: u64, len: u64, domain: u16) -> SysResult<Addr> {
    if len as i32 <= 1 || len > 128 {
        return Err(EINVAL);
    }
    let raw = k.read_user(va, len as usize)?;
    addr::parse(domain, &raw)
}

/// An AF_UNIX address's key: its socket file's node, or its abstract name.
fn unix_key(k: &mut Kernel, a: &Addr) -> SysResult<UnixKey> {
    let Addr::Unix(p) = a else {
        return Err(EINVAL);
    };
    if p.first() == Some(&0) {
        return Ok(UnixKey::Abstract(p.clone()));
    }
    let path = std::str::from_utf8(p).map_err(|_| ENOENT)?.to_string();
    let ino = k.lookup_at(AT_FDCWD as u64, &path, true)?;
    if k.vfs.tree.node(ino)?.file_type() != super::super::fs::vfs::S_IFSOCK {
        return Err(ECONNREFUSED);
    }
    Ok(UnixKey::Node(ino))
}

/// Bind implements Linux syscall bind(2).
pub fn sys_bind(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (obj, _) = sock_fd(k, a[0])?;
    let domain = sock(k, obj)?.domain;
    let addr =
        read_addr(k, a[1], a[2], domain).map_err(|e| if e == EAFNOSUPPORT { EINVAL } else { e })?;
    if sock(k, obj)?.local.is_some() {
        return Err(EINVAL);
    }
    match &addr {
        Addr::Inet { .. } => bind_inet(&mut k.vfs.io, obj, addr)?,
        Addr::Unix(p) => {
            let key = if p.is_empty() {
                // Autobind: an abstract name of five hex digits, as Linux's.
                let name = format!("\0{:05x}", obj & 0xfffff).into_bytes();
                UnixKey::Abstract(name)
            } else if p[0] == 0 {
                UnixKey::Abstract(p.clone())
            } else {
                let path = std::str::from_utf8(p).map_err(|_| EINVAL)?.to_string();
                let r = k.resolve_at(AT_FDCWD as u64, &path, false)?;
                if r.ino.is_some() {
                    return Err(EADDRINUSE);
                }
                if r.name.is_empty() || r.want_dir {
                    return Err(EINVAL);
                }
                let umask = k.cur_proc().umask;
                let now = k.fs_now();
                let ino = k.vfs.tree.create(
                    r.parent,
                    &r.name,
                    super::super::fs::vfs::S_IFSOCK | (0o777 & !umask),
                    super::super::fs::vfs::Kind::File(super::super::fs::vfs::FileData::empty()),
                    now,
                )?;
                UnixKey::Node(ino)
            };
            if k.vfs.io.net.unix.contains_key(&key) {
                return Err(EADDRINUSE);
            }
            let shown = match &key {
                UnixKey::Abstract(n) => Addr::Unix(n.clone()),
                UnixKey::Node(_) => addr.clone(),
            };
            k.vfs.io.net.unix.insert(key.clone(), obj);
            k.vfs.io.net.unix_of.insert(obj, key);
            sock(k, obj)?.local = Some(shown);
        }
    }
    Ok(0)
}

/// Listen implements Linux syscall listen(2).
pub fn sys_listen(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (obj, _) = sock_fd(k, a[0])?;
    let backlog = (a[1] as i32).clamp(0, SOMAXCONN as i32) as usize;
    let s = sock(k, obj)?;
    if !s.stream() {
        return Err(EOPNOTSUPP);
    }
    match &mut s.state {
        State::Connected { .. } => return Err(EINVAL),
        State::Listening { backlog: b, .. } => {
            *b = backlog;
            return Ok(0);
        }
        State::Fresh => {}
    }
    if s.local.is_none() {
        if s.domain == AF_UNIX {
            return Err(EINVAL);
        }
        let any = Addr::Inet {
            v6: s.domain == AF_INET6,
            ip: [0; 16],
            port: 0,
        };
        bind_inet(&mut k.vfs.io, obj, any)?;
    }
    let own = cmsg::own_creds(k);
    let s = sock(k, obj)?;
    s.state = State::Listening {
        backlog,
        queue: VecDeque::new(),
    };
    // What its connections' clients see as SO_PEERCRED (Unix sockets').
    if s.domain == AF_UNIX {
        s.peercred = Some(own);
    }
    Ok(0)
}

/// Writes an address where `va` says, with its length at `lenp` (in and out).
fn write_addr(k: &mut Kernel, va: u64, lenp: u64, a: &Addr) -> SysResult<()> {
    if va == 0 {
        return Ok(());
    }
    let room = k.read_u32(lenp)? as i32;
    if room < 0 {
        return Err(EINVAL);
    }
    let bytes = a.to_bytes();
    let n = bytes.len().min(room as usize);
    k.write_user(va, &bytes[..n])?;
    k.write_u32(lenp, bytes.len() as u32)
}

/// Unbound sockets' own address: the family's wildcard, or an unnamed one.
fn unbound(domain: u16) -> Addr {
    match domain {
        AF_UNIX => Addr::Unix(Vec::new()),
        _ => Addr::Inet {
            v6: domain == AF_INET6,
            ip: [0; 16],
            port: 0,
        },
    }
}

/// Getsockname implements Linux syscall getsockname(2).
pub fn sys_getsockname(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (obj, _) = sock_fd(k, a[0])?;
    let s = sock(k, obj)?;
    let local = s.local.clone().unwrap_or_else(|| unbound(s.domain));
    write_addr(k, a[1], a[2], &local)?;
    Ok(0)
}

/// Getpeername implements Linux syscall getpeername(2).
pub fn sys_getpeername(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (obj, _) = sock_fd(k, a[0])?;
    let s = sock(k, obj)?;
    let remote = match (&s.state, &s.remote) {
        (State::Connected { .. }, Some(r)) => r.clone(),
        (_, Some(r)) if !s.stream() => r.clone(),
        _ => return Err(ENOTCONN),
    };
    write_addr(k, a[1], a[2], &remote)?;
    Ok(0)
}

fn accept(k: &mut Kernel, nr: u32, a: [u64; 6], flags: u64) -> SysResult<Sys> {
    if flags & !(SOCK_NONBLOCK | SOCK_CLOEXEC) != 0 {
        return Err(EINVAL);
    }
    let (obj, d) = sock_fd(k, a[0])?;
    // Taken at once, so that it never outlives the restarted call.
    let kept = k.io_resume(nr).deadline;
    let s = sock(k, obj)?;
    let State::Listening { queue, .. } = &mut s.state else {
        return Err(EINVAL);
    };
    let Some(conn) = queue.pop_front() else {
        let on = io::Blocking {
            watch: &[obj],
            nonblock: d.flags & O_NONBLOCK != 0,
            call: call(nr, a),
            deadline: timeo_deadline(k, obj, SO_RCVTIMEO, kept),
        };
        return k.io_wait_on(on, 0);
    };
    k.vfs.io.touch(obj);
    let fd = install(k, conn, flags)?;
    let remote = sock(k, conn)?.remote.clone();
    if let Some(r) = remote {
        if let Err(e) = write_addr(k, a[1], a[2], &r) {
            k.close_fd(fd);
            return Err(e);
        }
    }
    Ok(Sys::Ret(fd as u64))
}

/// Accept implements Linux syscall accept(2).
pub fn sys_accept(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    accept(k, nr::accept, a, 0)
}

/// Accept4 implements Linux syscall accept4(2).
pub fn sys_accept4(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    accept(k, nr::accept4, a, a[3])
}

/// Connect implements Linux syscall connect(2).
pub fn sys_connect(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (obj, d) = sock_fd(k, a[0])?;
    let kept = k.io_resume(nr::connect).deadline;
    let nonblock = d.flags & O_NONBLOCK != 0;
    let (domain, kind) = {
        let s = sock(k, obj)?;
        (s.domain, s.kind)
    };
    if a[2] >= 2 && k.read_user(a[1], 2)? == AF_UNSPEC.to_le_bytes() && kind == SOCK_DGRAM {
        // Dissolves a datagram socket's association.
        sock(k, obj)?.remote = None;
        return Ok(Sys::Ret(0));
    }
    let to = read_addr(k, a[1], a[2], domain)?;
    if let Addr::Inet { .. } = to {
        if !to.is_local() {
            return Err(ENETUNREACH);
        }
    }
    if kind == SOCK_DGRAM {
        if let Addr::Unix(_) = to {
            let key = unix_key(k, &to)?;
            if !k.vfs.io.net.unix.contains_key(&key) {
                return Err(ECONNREFUSED);
            }
        } else if sock(k, obj)?.local.is_none() {
            bind_inet(&mut k.vfs.io, obj, any_local(domain))?;
        }
        sock(k, obj)?.remote = Some(to);
        return Ok(Sys::Ret(0));
    }
    match sock(k, obj)?.state {
        State::Connected { .. } => return Err(EISCONN),
        State::Listening { .. } => return Err(EINVAL),
        State::Fresh => {}
    }
    let listener = match &to {
        Addr::Unix(_) => {
            let key = unix_key(k, &to)?;
            k.vfs.io.net.unix.get(&key).copied()
        }
        Addr::Inet { .. } => find_inet(&k.vfs.io, kind, &to),
    };
    let refused = || {
        if nonblock && domain != AF_UNIX {
            Err(EINPROGRESS)
        } else {
            Err(ECONNREFUSED)
        }
    };
    let Some(l) = listener else {
        if nonblock && domain != AF_UNIX {
            sock(k, obj)?.error = Some(ECONNREFUSED.0);
            k.vfs.io.touch(obj);
        }
        return refused();
    };
    let (ldomain, lkind, llocal, lrcvbuf, full) = {
        let ls = sock(k, l)?;
        let full = match &ls.state {
            State::Listening { backlog, queue } => queue.len() > *backlog,
            _ => {
                // Bound but not listening.
                if nonblock && domain != AF_UNIX {
                    sock(k, obj)?.error = Some(ECONNREFUSED.0);
                    k.vfs.io.touch(obj);
                }
                return refused();
            }
        };
        (ls.domain, ls.kind, ls.local.clone(), ls.rcvbuf, full)
    };
    if lkind != kind {
        return Err(EPROTOTYPE);
    }
    if full {
        let on = io::Blocking {
            watch: &[l],
            nonblock,
            call: call(nr::connect, a),
            deadline: timeo_deadline(k, obj, SO_SNDTIMEO, kept),
        };
        return match k.io_wait_on(on, 0) {
            // A TCP connect whose SO_SNDTIMEO passed is still in progress
            // on Linux (SYN_SENT); here the socket stays unconnected.
            Err(EAGAIN) if !nonblock && domain != AF_UNIX => Err(EINPROGRESS),
            r => r,
        };
    }
    if domain != AF_UNIX && sock(k, obj)?.local.is_none() {
        let me = if to.ipv4().is_some() && domain == AF_INET {
            Addr::v4([127, 0, 0, 1], 0)
        } else {
            any_local(domain)
        };
        bind_inet(&mut k.vfs.io, obj, me)?;
    }
    // The accepting side's socket, queued for accept.
    let mut srv = Socket::new(ldomain, lkind);
    srv.rcvbuf = lrcvbuf;
    // Each side's SO_PEERCRED is the other's (the listener's from its
    // listen), and the new socket has the listener's SO_PASSCRED.
    let (lcred, lpass) = {
        let ls = sock(k, l)?;
        (
            ls.peercred,
            ls.opts.get(&(SOL_SOCKET, SO_PASSCRED)).cloned(),
        )
    };
    if ldomain == AF_UNIX {
        srv.peercred = Some(cmsg::own_creds(k));
        sock(k, obj)?.peercred = lcred;
    }
    if let Some(v) = lpass {
        srv.opts.insert((SOL_SOCKET, SO_PASSCRED), v);
    }
    srv.local = match (&to, llocal) {
        (Addr::Inet { .. }, Some(l)) if l.is_wildcard() || to.is_wildcard() => {
            Some(any_local(ldomain).with_port(to.port()))
        }
        (Addr::Inet { .. }, _) => Some(to.clone()),
        (_, l) => l,
    };
    srv.remote = Some(
        sock(k, obj)?
            .local
            .clone()
            .unwrap_or(Addr::Unix(Vec::new())),
    );
    srv.state = State::Connected { peer: obj };
    let srv_local = srv.local.clone();
    let s_id = k.vfs.io.add(Obj::Socket(Box::new(srv)))?;
    let c = sock(k, obj)?;
    c.state = State::Connected { peer: s_id };
    c.error = None;
    c.remote = srv_local;
    if let Some(Obj::Socket(ls)) = k.vfs.io.objs.get_mut(&l) {
        if let State::Listening { queue, .. } = &mut ls.state {
            queue.push_back(s_id);
        }
    }
    k.vfs.io.touch(l);
    k.vfs.io.touch(obj);
    if nonblock && domain != AF_UNIX {
        return Err(EINPROGRESS);
    }
    Ok(Sys::Ret(0))
}

/// Shutdown implements Linux syscall shutdown(2).
pub fn sys_shutdown(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (obj, _) = sock_fd(k, a[0])?;
    if a[1] > 2 {
        return Err(EINVAL);
    }
    let s = sock(k, obj)?;
    let peer = s.peer();
    if s.stream() && peer.is_none() {
        return Err(ENOTCONN);
    }
    if a[1] != 1 {
        s.shut_rd = true;
    }
    if a[1] != 0 {
        s.shut_wr = true;
    }
    k.vfs.io.touch(obj);
    if let Some(p) = peer {
        k.vfs.io.touch(p);
    }
    Ok(0)
}
