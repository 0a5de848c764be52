//! A socket's data: send and receive on streams and datagrams, with their
//! ancillary data and timeouts, and sendto, recvfrom, sendmsg and recvmsg.

use super::*;
use crate::kernel::fs::io::{self, call, Obj, ObjId};
use crate::kernel::fs::O_NONBLOCK;
use crate::kernel::net::addr::{Addr, AF_UNIX};
use crate::kernel::net::cmsg::{self, Sent, SOL_SOCKET};
use crate::kernel::sched::Sys;
use crate::kernel::signal::{self, SigInfo, SIGPIPE};
use crate::kernel::syscalls::nr;
use crate::kernel::task::PendingCall;
use crate::kernel::time::Timeval;
use crate::kernel::Kernel;

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
pub(super) fn timeo(s: &Socket, name: i32) -> Option<Timeval> {
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
pub(super) fn timeo_deadline(
    k: &mut Kernel,
    obj: ObjId,
    name: i32,
    kept: Option<u64>,
) -> Option<u64> {
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
    let bufs = [(a[1], (a[2] as usize).min(crate::kernel::fs::MAX_IO))];
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
        call(nr::sendto, a),
    )
}

/// Recvfrom implements Linux syscall recvfrom(2).
pub fn sys_recvfrom(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (obj, d) = sock_fd(k, a[0])?;
    let bufs = [(a[1], (a[2] as usize).min(crate::kernel::fs::MAX_IO))];
    let nonblock = d.flags & O_NONBLOCK != 0;
    let want = io::total_len(&bufs);
    let mut put = |k: &mut Kernel, b: &[u8]| put_out(k, &bufs, b);
    match recv(
        k,
        obj,
        nonblock,
        a[3],
        want,
        &mut put,
        call(nr::recvfrom, a),
    )? {
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
    let bufs = crate::kernel::fs::file_ops::data::iovecs(k, m.iov, m.iovlen)?;
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
    send(k, obj, nonblock, a[2], src, to, ctl, call(nr::sendmsg, a))
}

/// Recvmsg implements Linux syscall recvmsg(2).
/// Partial (recvmsg): AF_UNIX sockets' SCM_RIGHTS and SCM_CREDENTIALS (SO_PASSCRED); no SCM_PIDFD or SCM_SECURITY, and internet sockets receive no ancillary data (timestamps, IP_PKTINFO...).
pub fn sys_recvmsg(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (obj, d) = sock_fd(k, a[0])?;
    let m = read_msghdr(k, a[1])?;
    let bufs = crate::kernel::fs::file_ops::data::iovecs(k, m.iov, m.iovlen)?;
    let nonblock = d.flags & O_NONBLOCK != 0;
    let want = io::total_len(&bufs);
    let mut put = |k: &mut Kernel, b: &[u8]| put_out(k, &bufs, b);
    let g = match recv(k, obj, nonblock, a[2], want, &mut put, call(nr::recvmsg, a))? {
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
