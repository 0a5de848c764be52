//! Sockets, served by the monitor: nothing reaches the host's network.
//!
//! - `socketpair`, AF_UNIX stream and datagram sockets, bound to paths in
//!   the run's file tree (`bind` makes the socket file) or to abstract names;
//! - AF_INET and AF_INET6 TCP and UDP between the threads and processes of
//!   the run, on the machine's own addresses (127.0.0.0/8, ::1, and the
//!   wildcards); any other address is ENETUNREACH (the call's event says so).
//!
//! A connection is made whole by `connect` when the listener's backlog has
//! room (the accepting side's socket waits in the backlog for `accept`), so
//! a non-blocking TCP connect says EINPROGRESS and is writable at once; with
//! no listener it is ECONNREFUSED (EINPROGRESS, then SO_ERROR, when
//! non-blocking, as Linux's loopback does). Each socket holds at most its
//! receive buffer (SO_RCVBUF) of bytes or datagrams not yet read; writers
//! block while the peer's is full. Ephemeral ports count up from 32768, so
//! they are the same in every run. Blocking is `fs::io`'s.

pub mod addr;
pub mod calls;
pub(crate) mod cmsg;

use super::errno::*;
use super::fs::io::{
    Obj, ObjId, Objects, POLLERR, POLLHUP, POLLOUT, POLLRDHUP, READABLE, WRITABLE,
};
use super::fs::DescId;
use addr::Addr;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

pub const SOCK_STREAM: u32 = 1;
pub const SOCK_DGRAM: u32 = 2;
pub const SOCK_SEQPACKET: u32 = 5;

/// What a message carrying rights costs of its receiver's buffer besides
/// its bytes (Linux charges a message's sk_buff, about this), so the
/// references a guest keeps in flight are bounded by the buffers it fills.
pub(crate) const RIGHTS_COST: usize = 1024;

/// A new stream socket's receive buffer (Linux's tcp_rmem default).
const STREAM_RCVBUF: usize = 131_072;
/// A new datagram socket's (Linux's rmem_default).
const DGRAM_RCVBUF: usize = 212_992;
/// The most SO_RCVBUF gives.
pub const MAX_RCVBUF: usize = 1 << 20;
/// The longest backlog (Linux's somaxconn).
const SOMAXCONN: usize = 4096;
/// Ephemeral ports (Linux's ip_local_port_range).
const EPHEMERAL: (u16, u16) = (32768, 60999);

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum State {
    /// Not connected, not listening.
    Fresh,
    Listening {
        backlog: usize,
        queue: VecDeque<ObjId>,
    },
    /// Connected to `peer` (a stream, or a datagram socketpair); a peer
    /// that is gone has closed.
    Connected { peer: ObjId },
}

/// Who sent a message, as SCM_CREDENTIALS shows it: the sender's pid,
/// uid and gid, or those it passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Creds {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

impl Creds {
    /// A message that carries none (no side had SO_PASSCRED when it was
    /// sent): pid 0 and the overflow ids, as Linux shows an invalid id.
    pub const NONE: Creds = Creds {
        pid: 0,
        uid: 65534,
        gid: 65534,
    };
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Datagram {
    pub from: Addr,
    pub bytes: Vec<u8>,
    #[serde(default)]
    pub creds: Creds,
    /// Descriptions in flight (SCM_RIGHTS), one reference each.
    #[serde(default)]
    pub rights: Vec<DescId>,
}

impl Datagram {
    /// What it takes of its receiver's buffer.
    fn cost(&self) -> usize {
        self.bytes.len().max(1)
            + if self.rights.is_empty() {
                0
            } else {
                RIGHTS_COST
            }
    }
}

/// A run of a stream's unread bytes from one sender: a receive does not
/// go past one that carries rights, nor (with SO_PASSCRED) join runs of
/// different senders, as Linux's does not.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Seg {
    pub len: usize,
    pub creds: Creds,
    /// Descriptions in flight, one reference each; they go with the
    /// receive that reads the run's first byte.
    pub rights: Vec<DescId>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Socket {
    pub domain: u16,
    pub kind: u32,
    pub state: State,
    pub local: Option<Addr>,
    /// The peer's address (a stream's peer, a datagram socket's default destination).
    pub remote: Option<Addr>,
    /// Stream bytes received and not yet read.
    pub rx: VecDeque<u8>,
    /// `rx` in runs by sender (their lengths add up to its length).
    #[serde(default)]
    pub segs: VecDeque<Seg>,
    /// What the runs carrying rights take of the buffer besides their bytes.
    #[serde(default)]
    pub charge: usize,
    /// Datagrams received and not yet read.
    pub msgs: VecDeque<Datagram>,
    /// Bytes held in `msgs`.
    pub msg_bytes: usize,
    pub rcvbuf: usize,
    pub sndbuf: usize,
    /// shutdown(SHUT_RD), shutdown(SHUT_WR).
    pub shut_rd: bool,
    pub shut_wr: bool,
    /// A pending error (SO_ERROR): a refused non-blocking connect.
    pub error: Option<i32>,
    /// Options set and read back as they were (SO_REUSEADDR, TCP_NODELAY...).
    pub opts: BTreeMap<(i32, i32), Vec<u8>>,
    /// SO_PEERCRED: who made the other end (a socketpair's maker, a
    /// listener's listen, a connect), as the kernel took them then.
    #[serde(default)]
    pub peercred: Option<Creds>,
}

impl Socket {
    pub fn new(domain: u16, kind: u32) -> Socket {
        Socket {
            domain,
            kind,
            state: State::Fresh,
            local: None,
            remote: None,
            rx: VecDeque::new(),
            segs: VecDeque::new(),
            charge: 0,
            msgs: VecDeque::new(),
            msg_bytes: 0,
            rcvbuf: if kind == SOCK_DGRAM {
                DGRAM_RCVBUF
            } else {
                STREAM_RCVBUF
            },
            sndbuf: 212_992,
            shut_rd: false,
            shut_wr: false,
            error: None,
            opts: BTreeMap::new(),
            peercred: None,
        }
    }

    pub fn peer(&self) -> Option<ObjId> {
        match self.state {
            State::Connected { peer } => Some(peer),
            _ => None,
        }
    }

    pub fn stream(&self) -> bool {
        self.kind != SOCK_DGRAM
    }

    /// Appends stream bytes from a sender, with the rights they carry.
    pub fn push_stream(&mut self, bytes: Vec<u8>, creds: Creds, rights: Vec<DescId>) {
        let len = bytes.len();
        self.rx.extend(bytes);
        if !rights.is_empty() {
            self.charge += RIGHTS_COST;
        }
        match self.segs.back_mut() {
            Some(last) if last.creds == creds && last.rights.is_empty() && rights.is_empty() => {
                last.len += len;
            }
            _ => self.segs.push_back(Seg { len, creds, rights }),
        }
    }

    /// Drops the first `n` stream bytes; the rights of every run they
    /// reach, which the caller now holds.
    pub fn consume_stream(&mut self, n: usize) -> Vec<DescId> {
        let n = n.min(self.rx.len());
        self.rx.drain(..n);
        let mut left = n;
        let mut rights = Vec::new();
        while left > 0 {
            let Some(seg) = self.segs.front_mut() else {
                break;
            };
            if !seg.rights.is_empty() {
                self.charge = self.charge.saturating_sub(RIGHTS_COST);
            }
            rights.append(&mut seg.rights);
            let k = left.min(seg.len);
            seg.len -= k;
            left -= k;
            if seg.len == 0 {
                self.segs.pop_front();
            }
        }
        rights
    }

    /// Queues a datagram.
    pub fn push_datagram(&mut self, d: Datagram) {
        self.msg_bytes += d.cost();
        self.msgs.push_back(d);
    }

    /// Takes the first datagram (its rights go to the caller).
    pub fn pop_datagram(&mut self) -> Option<Datagram> {
        let d = self.msgs.pop_front()?;
        self.msg_bytes = self.msg_bytes.saturating_sub(d.cost());
        Some(d)
    }

    /// Bytes of its receive buffer in use.
    pub fn held(&self) -> usize {
        if self.stream() {
            self.rx.len() + self.charge
        } else {
            self.msg_bytes
        }
    }

    /// Every description in flight to this socket (its rights, as it closes).
    fn take_rights(&mut self) -> Vec<DescId> {
        self.charge = 0;
        let mut out = Vec::new();
        for s in self.segs.iter_mut() {
            out.append(&mut s.rights);
        }
        for m in self.msgs.iter_mut() {
            out.append(&mut m.rights);
        }
        out
    }

    fn opt_int(&self, level: i32, name: i32) -> i32 {
        self.opts
            .get(&(level, name))
            .and_then(|v| v.get(..4))
            .map_or(0, |b| i32::from_le_bytes(b.try_into().unwrap()))
    }
}

/// Which socket an address names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum UnixKey {
    /// The socket file's node.
    Node(u64),
    Abstract(Vec<u8>),
}

/// The run's socket names: what is bound where, and the next ephemeral port.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Names {
    /// Internet sockets bound to each (type, port).
    pub inet: BTreeMap<(u32, u16), Vec<ObjId>>,
    pub unix: BTreeMap<UnixKey, ObjId>,
    /// Where each bound AF_UNIX socket is, to unbind it.
    pub unix_of: BTreeMap<ObjId, UnixKey>,
    pub next_port: u16,
    /// Descriptions that were in flight to sockets that closed: the file
    /// state releases them (`Vfs::release`).
    #[serde(default)]
    pub orphans: Vec<DescId>,
}

/// The last reference to socket `id` went: it closes, unbinds, and its
/// peer sees end of file (a listener's queued connections close too).
pub fn close(io: &mut Objects, id: ObjId) {
    let Some(Obj::Socket(mut s)) = io.remove(id) else {
        return;
    };
    unbind(&mut io.net, id, &s);
    let rights = s.take_rights();
    io.net.orphans.extend(rights);
    match s.state {
        State::Listening { queue, .. } => {
            for q in queue {
                close(io, q);
            }
        }
        State::Connected { peer } => io.touch(peer),
        State::Fresh => {}
    }
}

fn unbind(names: &mut Names, id: ObjId, s: &Socket) {
    if let Some(Addr::Inet { port, .. }) = &s.local {
        let key = (s.kind, *port);
        if let Some(v) = names.inet.get_mut(&key) {
            v.retain(|x| *x != id);
            if v.is_empty() {
                names.inet.remove(&key);
            }
        }
    }
    if let Some(k) = names.unix_of.remove(&id) {
        names.unix.remove(&k);
    }
}

/// What socket `s` is ready for.
pub fn ready(io: &Objects, s: &Socket) -> u16 {
    if s.error.is_some() {
        return POLLOUT | POLLERR | POLLHUP;
    }
    if !s.stream() {
        let r = if s.msgs.is_empty() { 0 } else { READABLE };
        return r | WRITABLE;
    }
    match &s.state {
        State::Fresh => POLLOUT | POLLHUP,
        State::Listening { queue, .. } => {
            if queue.is_empty() {
                0
            } else {
                READABLE
            }
        }
        State::Connected { peer } => {
            let p = match io.objs.get(peer) {
                Some(Obj::Socket(p)) => Some(p),
                _ => None,
            };
            let mut r = 0;
            let eof = p.is_none_or(|p| p.shut_wr) || s.shut_rd;
            if !s.rx.is_empty() || eof {
                r |= READABLE;
            }
            if eof {
                r |= POLLRDHUP;
            }
            match p {
                None => r |= WRITABLE | POLLHUP,
                Some(p) => {
                    if !s.shut_wr && !p.shut_rd && p.held() < p.rcvbuf {
                        r |= WRITABLE;
                    }
                    if s.shut_wr && (p.shut_wr || s.shut_rd) {
                        r |= POLLHUP;
                    }
                }
            }
            r
        }
    }
}

/// An ephemeral port free for sockets of `kind`.
fn ephemeral(names: &mut Names, kind: u32) -> SysResult<u16> {
    let span = (EPHEMERAL.1 - EPHEMERAL.0) as u32 + 1;
    for _ in 0..span {
        if !(EPHEMERAL.0..=EPHEMERAL.1).contains(&names.next_port) {
            names.next_port = EPHEMERAL.0;
        }
        let p = names.next_port;
        names.next_port = names.next_port.wrapping_add(1);
        if !names.inet.contains_key(&(kind, p)) {
            return Ok(p);
        }
    }
    Err(EADDRNOTAVAIL)
}

/// The listening (or, for datagrams, bound) socket an internet address reaches.
fn find_inet(io: &Objects, kind: u32, to: &Addr) -> Option<ObjId> {
    let ids = io.net.inet.get(&(kind, to.port()))?;
    let mut best = None;
    for &id in ids {
        let Some(Obj::Socket(s)) = io.objs.get(&id) else {
            continue;
        };
        if kind != SOCK_DGRAM && !matches!(s.state, State::Listening { .. }) {
            continue;
        }
        let Some(l) = &s.local else { continue };
        let v6only = s.opt_int(IPPROTO_IPV6, IPV6_V6ONLY) != 0;
        let family_ok = match (l, to) {
            (Addr::Inet { v6: a, .. }, Addr::Inet { v6: b, .. }) => {
                a == b || (*a && !v6only && to.ipv4().is_some())
            }
            _ => false,
        };
        if !family_ok {
            continue;
        }
        if l.same_host(to) || (to.is_wildcard() && l.is_local()) {
            return Some(id);
        }
        if l.is_wildcard() {
            best.get_or_insert(id);
        }
    }
    best
}

pub const IPPROTO_IP: i32 = 0;
pub const IPPROTO_TCP: i32 = 6;
pub const IPPROTO_UDP: i32 = 17;
pub const IPPROTO_IPV6: i32 = 41;
pub const IPV6_V6ONLY: i32 = 26;

/// Binds socket `id` to internet address `a` (port 0: an ephemeral one).
fn bind_inet(io: &mut Objects, id: ObjId, a: Addr) -> SysResult<()> {
    if !a.is_local() {
        return Err(EADDRNOTAVAIL);
    }
    let (kind, reuse) = match io.socket(id) {
        Some(s) => (s.kind, s.opt_int(1, SO_REUSEADDR) != 0),
        None => return Err(EBADF),
    };
    let port = match a.port() {
        0 => ephemeral(&mut io.net, kind)?,
        p => {
            let taken = io.net.inet.get(&(kind, p)).is_some_and(|ids| {
                ids.iter().any(|o| match io.objs.get(o) {
                    Some(Obj::Socket(s)) => {
                        let overlap = s
                            .local
                            .as_ref()
                            .is_some_and(|l| l.is_wildcard() || a.is_wildcard() || l.same_host(&a));
                        let both_reuse = reuse
                            && s.opt_int(1, SO_REUSEADDR) != 0
                            && !matches!(s.state, State::Listening { .. });
                        overlap && !both_reuse
                    }
                    _ => false,
                })
            });
            if taken {
                return Err(EADDRINUSE);
            }
            p
        }
    };
    io.net.inet.entry((kind, port)).or_default().push(id);
    if let Some(s) = io.socket(id) {
        s.local = Some(a.with_port(port));
    }
    Ok(())
}

pub const SO_REUSEADDR: i32 = 2;

/// A loopback address of the family of socket `s`, for an unbound socket
/// that connects or sends.
fn any_local(domain: u16) -> Addr {
    if domain == addr::AF_INET6 {
        let mut ip = [0u8; 16];
        ip[15] = 1;
        Addr::Inet {
            v6: true,
            ip,
            port: 0,
        }
    } else {
        Addr::v4([127, 0, 0, 1], 0)
    }
}

/// The socket a stream's write goes to and whether it is broken.
fn stream_peer(io: &Objects, s: &Socket) -> SysResult<Option<ObjId>> {
    match s.state {
        State::Connected { peer } => match io.objs.get(&peer) {
            Some(Obj::Socket(p)) if !p.shut_rd && !s.shut_wr => Ok(Some(peer)),
            _ => Ok(None),
        },
        _ => Err(ENOTCONN),
    }
}

/// Bytes socket `id` may take into its receive buffer now.
fn room(io: &Objects, id: ObjId) -> usize {
    match io.objs.get(&id) {
        Some(Obj::Socket(s)) => s.rcvbuf.saturating_sub(s.held()),
        _ => 0,
    }
}
