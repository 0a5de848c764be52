//! The socket calls: socket, socketpair, bind, listen, accept, accept4,
//! connect, send/recv (sendto, recvfrom, sendmsg, recvmsg, and read/write
//! through `fs::io`), shutdown, getsockname, getpeername, setsockopt and
//! getsockopt.

use super::super::errno::*;
use super::super::fs::io::{self, call, Obj, ObjId};
use super::super::fs::{Description, Target, AT_FDCWD, O_CLOEXEC, O_NONBLOCK, O_RDWR};
use super::super::sched::Sys;
use super::super::signal::{self, SigInfo, SIGPIPE};
use super::super::task::PendingCall;
use super::super::time::Timeval;
use super::super::Kernel;
use super::addr::{self, Addr, AF_INET, AF_INET6, AF_UNIX, AF_UNSPEC};
use super::cmsg::{self, Sent, SOL_SOCKET};
use super::*;

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

const NR_CONNECT: u32 = 42;
const NR_ACCEPT: u32 = 43;
const NR_SENDTO: u32 = 44;
const NR_RECVFROM: u32 = 45;
const NR_SENDMSG: u32 = 46;
const NR_RECVMSG: u32 = 47;
const NR_ACCEPT4: u32 = 288;

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
    accept(k, NR_ACCEPT, a, 0)
}

/// Accept4 implements Linux syscall accept4(2).
pub fn sys_accept4(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    accept(k, NR_ACCEPT4, a, a[3])
}

/// Connect implements Linux syscall connect(2).
pub fn sys_connect(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (obj, d) = sock_fd(k, a[0])?;
    let kept = k.io_resume(NR_CONNECT).deadline;
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
            call: call(NR_CONNECT, a),
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

/// What a receive got: its bytes' count, the message's whole length,
/// whence, and what came with it.
struct Got {
    n: usize,
    full: usize,
    from: Option<Addr>,
    /// The sender's credentials (for a stream, its first run's).
    creds: Creds,
    /// Descriptions that came with it, one reference each: recvmsg makes
    /// them descriptors, any other receive closes them, as Linux's does.
    rights: Vec<DescId>,
}

impl Got {
    fn nothing(from: Option<Addr>) -> Got {
        Got {
            n: 0,
            full: 0,
            from,
            creds: Creds::default(),
            rights: Vec::new(),
        }
    }

    /// Closes the descriptions a receive with no control buffer got.
    fn drop_rights(&mut self, k: &mut Kernel) {
        cmsg::close(k, std::mem::take(&mut self.rights));
    }
}

enum Recv {
    Got(Got),
    Blocked(Sys),
}

/// Where a receive's bytes go: `put` takes them and says how many landed.
type Put<'a> = &'a mut dyn FnMut(&mut Kernel, &[u8]) -> SysResult<usize>;

/// Writes `bytes` to the guest's buffers; how many landed.
fn put_out(k: &mut Kernel, bufs: &[(u64, usize)], bytes: &[u8]) -> SysResult<usize> {
    let mut at = 0usize;
    io::copy_out(
        k,
        bufs,
        bytes.len(),
        |_, n| {
            let v = bytes[at..at + n].to_vec();
            at += n;
            v
        },
        |_, _| {},
    )
}

/// How many of a stream's unread bytes one receive of at most `want`
/// takes, and whose they are: up to the end of a run that carries rights,
/// and with SO_PASSCRED only the first sender's runs (unix_stream_read_generic).
fn stream_span(s: &Socket, want: usize, passcred: bool) -> (usize, Creds) {
    if s.segs.is_empty() {
        return (s.rx.len().min(want), Creds::default());
    }
    let mut take = 0usize;
    let mut creds: Option<Creds> = None;
    for seg in &s.segs {
        if take == want {
            break;
        }
        match creds {
            Some(c) if passcred && c != seg.creds => break,
            None => creds = Some(seg.creds),
            _ => {}
        }
        take += seg.len.min(want - take);
        if !seg.rights.is_empty() {
            break;
        }
    }
    (take, creds.unwrap_or_default())
}

/// A receive of at most `want` bytes from socket `obj`, handed to `put`.
fn recv(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    flags: u64,
    want: usize,
    put: Put,
    c: PendingCall,
) -> SysResult<Recv> {
    let kept = k.io_resume(c.nr).deadline;
    if flags & MSG_OOB != 0 {
        return Err(EOPNOTSUPP);
    }
    let nonblock = nonblock || flags & MSG_DONTWAIT != 0;
    let peek = flags & MSG_PEEK != 0;
    let s = sock(k, obj)?;
    if let Some(e) = s.error.take() {
        return Err(Errno(e));
    }
    let deadline = timeo_deadline(k, obj, SO_RCVTIMEO, kept);
    let blocked = |k: &mut Kernel, watch: &[ObjId]| -> SysResult<Recv> {
        let on = io::Blocking {
            watch,
            nonblock,
            call: c,
            deadline,
        };
        k.io_wait_on(on, 0).map(Recv::Blocked)
    };
    let s = sock(k, obj)?;
    if !s.stream() {
        let Some(m) = s.msgs.front().cloned() else {
            if s.shut_rd {
                return Ok(Recv::Got(Got::nothing(None)));
            }
            return blocked(k, &[obj]);
        };
        let n = put(k, &m.bytes[..m.bytes.len().min(want)])?;
        let rights = if peek {
            // A peek passes the rights too, and leaves them in flight.
            for &d in &m.rights {
                k.vfs.share(d);
            }
            m.rights
        } else {
            let taken = sock(k, obj)?.pop_datagram().map(|m| m.rights);
            k.vfs.io.touch(obj);
            taken.unwrap_or_default()
        };
        return Ok(Recv::Got(Got {
            n,
            full: m.bytes.len(),
            from: Some(m.from),
            creds: m.creds,
            rights,
        }));
    }
    let State::Connected { peer } = s.state else {
        return Err(ENOTCONN);
    };
    let remote = s.remote.clone();
    if s.rx.is_empty() {
        let eof = s.shut_rd
            || match k.vfs.io.socket(peer) {
                Some(p) => p.shut_wr,
                None => true,
            };
        if eof || want == 0 {
            return Ok(Recv::Got(Got::nothing(remote)));
        }
        return blocked(k, &[obj, peer]);
    }
    let passcred = s.opt_int(SOL_SOCKET, SO_PASSCRED) != 0;
    let (avail, creds) = stream_span(s, want, passcred);
    let bytes: Vec<u8> = s.rx.iter().take(avail).copied().collect();
    let n = put(k, &bytes)?;
    let rights = if peek {
        let s = sock(k, obj)?;
        let mut seen = 0usize;
        let mut rights = Vec::new();
        for seg in &s.segs {
            if seen >= n.max(1) {
                break;
            }
            rights.extend(&seg.rights);
            seen += seg.len;
        }
        for &d in &rights {
            k.vfs.share(d);
        }
        rights
    } else {
        let r = sock(k, obj)?.consume_stream(n);
        k.vfs.io.touch(obj);
        r
    };
    Ok(Recv::Got(Got {
        n,
        full: n,
        from: remote,
        creds,
        rights,
    }))
}

/// SO_RCVTIMEO or SO_SNDTIMEO (`name`) as set: the timeval, or None.
fn timeo(s: &Socket, name: i32) -> Option<Timeval> {
    let v = s.opts.get(&(SOL_SOCKET, name))?;
    let word = |o: usize| Some(i64::from_le_bytes(v.get(o..o + 8)?.try_into().ok()?));
    Some(Timeval {
        sec: word(0)?,
        usec: word(8)?,
    })
}

/// The deadline SO_RCVTIMEO or SO_SNDTIMEO (`name`) of socket `obj` puts
/// on a call's wait: from the call's first look, `kept` across its
/// restarts; None when unset or zero, which waits for ever. A negative one
/// waits not at all, as Linux's timeout of 0 jiffies.
fn timeo_deadline(k: &mut Kernel, obj: ObjId, name: i32, kept: Option<u64>) -> Option<u64> {
    if kept.is_some() {
        return kept;
    }
    let tv = timeo(sock(k, obj).ok()?, name)?;
    let ns = match tv.to_ns() {
        _ if tv.sec < 0 => 0,
        Some(0) | None => return None,
        Some(ns) => ns,
    };
    Some(k.clock.now().saturating_add(ns))
}

/// The deadline socket `obj`'s SO_SNDTIMEO puts on a send that waits
/// (`kept` from before its restart); None for any other object.
pub(crate) fn send_deadline(k: &mut Kernel, obj: ObjId, kept: Option<u64>) -> Option<u64> {
    timeo_deadline(k, obj, SO_SNDTIMEO, kept)
}

/// Moves at most `max` bytes (or one datagram, cut to `max`) out of socket
/// `obj` for splice and sendfile: `put` writes them and says how many it
/// took, and only those leave the socket, so nothing is half-moved across
/// a restart. Rights that come with them are closed, as Linux's splice
/// closes them. With nothing to move the call waits (EAGAIN with `nonblock`).
pub(crate) fn splice_out(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    max: usize,
    c: PendingCall,
    put: impl FnOnce(&mut Kernel, &[u8]) -> SysResult<Sys>,
) -> SysResult<Sys> {
    let mut bytes = Vec::new();
    let mut grab = |_: &mut Kernel, b: &[u8]| {
        bytes.extend_from_slice(b);
        Ok(b.len())
    };
    let mut g = match recv(k, obj, nonblock, MSG_PEEK, max, &mut grab, c)? {
        Recv::Blocked(s) => return Ok(s),
        Recv::Got(g) => g,
    };
    g.drop_rights(k);
    if g.n == 0 {
        // End of file, or an empty datagram, which a read takes.
        if let Some(m) = sock(k, obj)?.pop_datagram() {
            k.vfs.io.touch(obj);
            cmsg::close(k, m.rights);
        }
        return Ok(Sys::Ret(0));
    }
    let r = put(k, &bytes)?;
    let Sys::Ret(moved) = r else {
        return Ok(r);
    };
    let s = sock(k, obj)?;
    let rights = if s.stream() {
        s.consume_stream(moved as usize)
    } else {
        s.pop_datagram().map(|m| m.rights).unwrap_or_default()
    };
    k.vfs.io.touch(obj);
    cmsg::close(k, rights);
    Ok(Sys::Ret(moved))
}

/// A send of `src`'s bytes on socket `obj`, to `to` or its peer, carrying
/// the records of control buffer `ctl`. They are read as the send starts:
/// a stream send restarted after some of its bytes went has sent its
/// rights with them, so it reads them no more (its descriptors may be
/// closed by now, which Linux's, holding them, would not notice).
#[allow(clippy::too_many_arguments)]
pub(crate) fn send(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    flags: u64,
    src: io::Source,
    to: Option<Addr>,
    ctl: cmsg::Control,
    c: PendingCall,
) -> SysResult<Sys> {
    let kept = k.io_resume(c.nr);
    let done = kept.done as usize;
    let on = io::Blocking {
        watch: &[],
        nonblock: nonblock || flags & MSG_DONTWAIT != 0,
        call: c,
        deadline: timeo_deadline(k, obj, SO_SNDTIMEO, kept.deadline),
    };
    let mut anc = if done > 0 {
        Sent::default()
    } else {
        let unix = sock(k, obj)?.domain == AF_UNIX;
        cmsg::parse(k, ctl, unix)?
    };
    let r = send_with(k, obj, on, flags, src, to, &mut anc, done);
    // What it did not hand on (nothing sent, or no room yet) is given back.
    anc.drop_rights(k);
    r
}

/// `send`'s work, waiting as `on` says (its objects aside).
#[allow(clippy::too_many_arguments)]
fn send_with(
    k: &mut Kernel,
    obj: ObjId,
    on: io::Blocking,
    flags: u64,
    src: io::Source,
    to: Option<Addr>,
    anc: &mut Sent,
    done: usize,
) -> SysResult<Sys> {
    if flags & MSG_OOB != 0 {
        return Err(EOPNOTSUPP);
    }
    let s = sock(k, obj)?;
    if let Some(e) = s.error.take() {
        return Err(Errno(e));
    }
    if !s.stream() {
        return send_datagram(k, obj, on, src, to, anc);
    }
    let Some(Obj::Socket(me)) = k.vfs.io.objs.get(&obj) else {
        return Err(EBADF);
    };
    let peer = match stream_peer(&k.vfs.io, me) {
        Err(e) => return Err(e),
        Ok(Some(p)) => p,
        Ok(None) => {
            if flags & MSG_NOSIGNAL == 0 {
                let tid = k.cur_tid();
                let pid = k.cur_pid();
                k.send_signal(signal::Target::Thread(tid), SigInfo::sent(SIGPIPE, 0, pid));
            }
            return io::partial(done, EPIPE);
        }
    };
    let creds = message_creds(k, anc, obj, peer);
    let space = room(&k.vfs.io, peer);
    let on = io::Blocking {
        watch: &[obj, peer],
        ..on
    };
    // Rights go with the first bytes only.
    let mut rights = std::mem::take(&mut anc.rights);
    let r = k.io_write_some(on, src, done, space, |k, bytes| {
        let rights = std::mem::take(&mut rights);
        sock(k, peer)?.push_stream(bytes, creds, rights);
        k.vfs.io.touch(peer);
        Ok(())
    });
    anc.rights = rights;
    r
}

/// The credentials a message from socket `from` to `to` carries: those
/// passed, else the sender's own when either side has SO_PASSCRED, else
/// none (unix_maybe_add_creds).
fn message_creds(k: &mut Kernel, anc: &Sent, from: ObjId, to: ObjId) -> Creds {
    if let Some(c) = anc.creds {
        return c;
    }
    let passcred = |k: &mut Kernel, id| {
        k.vfs
            .io
            .socket(id)
            .is_some_and(|s| s.opt_int(SOL_SOCKET, SO_PASSCRED) != 0)
    };
    if passcred(k, from) || passcred(k, to) {
        cmsg::own_creds(k)
    } else {
        Creds::NONE
    }
}

/// Largest UDP payload.
const UDP_MAX: usize = 65_507;

fn send_datagram(
    k: &mut Kernel,
    obj: ObjId,
    on: io::Blocking,
    src: io::Source,
    to: Option<Addr>,
    anc: &mut Sent,
) -> SysResult<Sys> {
    let total = src.total();
    let s = sock(k, obj)?;
    let (domain, peer, remote, sndbuf) = (s.domain, s.peer(), s.remote.clone(), s.sndbuf);
    if s.shut_wr {
        return Err(EPIPE);
    }
    if (domain == AF_UNIX && total > sndbuf) || total > UDP_MAX {
        return Err(EMSGSIZE);
    }
    let target = match (to, peer) {
        (Some(_), Some(_)) if domain == AF_UNIX => return Err(EISCONN),
        (None, Some(p)) => {
            if k.vfs.io.socket(p).is_none() {
                return Err(ECONNREFUSED);
            }
            Some(p)
        }
        (to, _) => {
            let Some(dest) = to.or(remote) else {
                return Err(if domain == AF_UNIX {
                    ENOTCONN
                } else {
                    EDESTADDRREQ
                });
            };
            match &dest {
                Addr::Unix(_) => {
                    let key = unix_key(k, &dest)?;
                    let t = k.vfs.io.net.unix.get(&key).copied();
                    match t {
                        Some(t) if k.vfs.io.socket(t).is_some_and(|x| !x.stream()) => Some(t),
                        Some(_) => return Err(EPROTOTYPE),
                        None => return Err(ECONNREFUSED),
                    }
                }
                Addr::Inet { .. } => {
                    if !dest.is_local() {
                        return Err(ENETUNREACH);
                    }
                    if sock(k, obj)?.local.is_none() {
                        bind_inet(&mut k.vfs.io, obj, any_local(domain))?;
                    }
                    // Nobody bound there: the datagram is lost, as UDP's are.
                    find_inet(&k.vfs.io, SOCK_DGRAM, &dest)
                }
            }
        }
    };
    let from = sock(k, obj)?
        .local
        .clone()
        .unwrap_or(Addr::Unix(Vec::new()));
    let Some(t) = target else {
        return Ok(Sys::Ret(total as u64));
    };
    let creds = message_creds(k, anc, obj, t);
    let cost = total.max(1)
        + if anc.rights.is_empty() {
            0
        } else {
            RIGHTS_COST
        };
    if room(&k.vfs.io, t) < cost {
        if domain != AF_UNIX {
            // A full UDP receive buffer drops the datagram.
            return Ok(Sys::Ret(total as u64));
        }
        return k.io_wait_on(io::Blocking { watch: &[t], ..on }, 0);
    }
    let bytes = src.take(k, 0, total)?;
    let n = bytes.len();
    sock(k, t)?.push_datagram(Datagram {
        from,
        bytes,
        creds,
        rights: std::mem::take(&mut anc.rights),
    });
    k.vfs.io.touch(t);
    Ok(Sys::Ret(n as u64))
}

/// read(2) of a socket.
pub fn read(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    bufs: &[(u64, usize)],
    c: PendingCall,
) -> SysResult<Sys> {
    let want = io::total_len(bufs);
    let mut put = |k: &mut Kernel, b: &[u8]| put_out(k, bufs, b);
    Ok(match recv(k, obj, nonblock, 0, want, &mut put, c)? {
        Recv::Got(mut g) => {
            g.drop_rights(k);
            Sys::Ret(g.n as u64)
        }
        Recv::Blocked(s) => s,
    })
}

/// write(2) to a socket.
pub fn write(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    bufs: &[(u64, usize)],
    c: PendingCall,
) -> SysResult<Sys> {
    let src = io::Source::Guest(bufs);
    send(k, obj, nonblock, 0, src, None, cmsg::Control::NONE, c)
}

/// Sendto implements Linux syscall sendto(2).
pub fn sys_sendto(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (obj, d) = sock_fd(k, a[0])?;
    let domain = sock(k, obj)?.domain;
    let to = if a[4] != 0 {
        Some(read_addr(k, a[4], a[5], domain)?)
    } else {
        None
    };
    let bufs = [(a[1], (a[2] as usize).min(super::super::fs::MAX_IO))];
    let nonblock = d.flags & O_NONBLOCK != 0;
    let src = io::Source::Guest(&bufs);
    send(
        k,
        obj,
        nonblock,
        a[3],
        src,
        to,
        cmsg::Control::NONE,
        call(NR_SENDTO, a),
    )
}

/// Recvfrom implements Linux syscall recvfrom(2).
pub fn sys_recvfrom(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (obj, d) = sock_fd(k, a[0])?;
    let bufs = [(a[1], (a[2] as usize).min(super::super::fs::MAX_IO))];
    let nonblock = d.flags & O_NONBLOCK != 0;
    let want = io::total_len(&bufs);
    let mut put = |k: &mut Kernel, b: &[u8]| put_out(k, &bufs, b);
    match recv(k, obj, nonblock, a[3], want, &mut put, call(NR_RECVFROM, a))? {
        Recv::Blocked(s) => Ok(s),
        Recv::Got(mut g) => {
            g.drop_rights(k);
            if let (Some(from), true) = (&g.from, a[4] != 0) {
                write_addr(k, a[4], a[5], from)?;
            }
            let n = if a[3] & MSG_TRUNC != 0 { g.full } else { g.n };
            Ok(Sys::Ret(n as u64))
        }
    }
}

/// `struct msghdr`: name, namelen, iov, iovlen, control, controllen, flags.
struct MsgHdr {
    name: u64,
    namelen: u32,
    iov: u64,
    iovlen: u64,
    control: u64,
    controllen: u64,
}

fn read_msghdr(k: &mut Kernel, va: u64) -> SysResult<MsgHdr> {
    let raw = k.read_user(va, 56)?;
    let q = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().unwrap());
    Ok(MsgHdr {
        name: q(0),
        namelen: q(8) as u32,
        iov: q(16),
        iovlen: q(24),
        control: q(32),
        controllen: q(40),
    })
}

/// Sendmsg implements Linux syscall sendmsg(2).
/// Partial (sendmsg): AF_UNIX sockets' SCM_RIGHTS and SCM_CREDENTIALS; no SCM_PIDFD; internet sockets pass over the records they know (SCM_RIGHTS, SO_MARK, IP_TTL...), which change nothing.
pub fn sys_sendmsg(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (obj, d) = sock_fd(k, a[0])?;
    let m = read_msghdr(k, a[1])?;
    let domain = sock(k, obj)?.domain;
    let bufs = super::super::fs::file_ops::iovecs(k, m.iov, m.iovlen)?;
    let to = if m.name != 0 && m.namelen != 0 {
        Some(read_addr(k, m.name, m.namelen as u64, domain)?)
    } else {
        None
    };
    let nonblock = d.flags & O_NONBLOCK != 0;
    let src = io::Source::Guest(&bufs);
    let ctl = cmsg::Control {
        va: m.control,
        len: m.controllen,
    };
    send(k, obj, nonblock, a[2], src, to, ctl, call(NR_SENDMSG, a))
}

/// Recvmsg implements Linux syscall recvmsg(2).
/// Partial (recvmsg): AF_UNIX sockets' SCM_RIGHTS and SCM_CREDENTIALS (SO_PASSCRED); no SCM_PIDFD or SCM_SECURITY, and internet sockets receive no ancillary data (timestamps, IP_PKTINFO...).
pub fn sys_recvmsg(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (obj, d) = sock_fd(k, a[0])?;
    let m = read_msghdr(k, a[1])?;
    let bufs = super::super::fs::file_ops::iovecs(k, m.iov, m.iovlen)?;
    let nonblock = d.flags & O_NONBLOCK != 0;
    let want = io::total_len(&bufs);
    let mut put = |k: &mut Kernel, b: &[u8]| put_out(k, &bufs, b);
    let g = match recv(k, obj, nonblock, a[2], want, &mut put, call(NR_RECVMSG, a))? {
        Recv::Blocked(s) => return Ok(s),
        Recv::Got(g) => g,
    };
    let (passcred, unix) = {
        let s = sock(k, obj)?;
        (s.opt_int(SOL_SOCKET, SO_PASSCRED) != 0, s.domain == AF_UNIX)
    };
    let mut out = cmsg::Out::new(m.control, m.controllen);
    if passcred && unix {
        out.creds(k, g.creds);
    }
    out.rights(k, g.rights, a[2] & MSG_CMSG_CLOEXEC != 0);
    if m.name != 0 {
        let bytes = g.from.as_ref().map(|f| f.to_bytes()).unwrap_or_default();
        let n = bytes.len().min(m.namelen as usize);
        k.write_user(m.name, &bytes[..n])?;
        k.write_u32(a[1] + 8, bytes.len() as u32)?;
    }
    // As Linux's: MSG_CMSG_CLOEXEC stays in msg_flags.
    let mut flags = (a[2] & MSG_CMSG_CLOEXEC) as u32;
    if g.full > g.n {
        flags |= MSG_TRUNC as u32;
    }
    if out.truncated {
        flags |= cmsg::MSG_CTRUNC;
    }
    k.write_u32(a[1] + 48, flags)?;
    k.write_u64(a[1] + 40, out.used())?;
    let n = if a[2] & MSG_TRUNC != 0 { g.full } else { g.n };
    Ok(Sys::Ret(n as u64))
}

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
