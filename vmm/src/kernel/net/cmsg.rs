//! Ancillary data (`struct cmsghdr` records in msg_control), read by
//! sendmsg and written by recvmsg, as Linux's net/core/scm.c does:
//! SCM_RIGHTS (descriptions passed between processes: a reference each
//! while in flight, new descriptors in the receiver) and SCM_CREDENTIALS
//! (the sender's pid, uid and gid, shown to a receiver with SO_PASSCRED).

use super::super::errno::*;
use super::super::fs::DescId;
use super::super::Kernel;
use super::Creds;

pub const SOL_SOCKET: i32 = 1;
pub const SCM_RIGHTS: i32 = 1;
pub const SCM_CREDENTIALS: i32 = 2;
/// Most descriptors one message carries (Linux's SCM_MAX_FD).
const SCM_MAX_FD: usize = 253;
/// `sizeof(struct cmsghdr)`: cmsg_len (size_t), cmsg_level, cmsg_type.
const HDR: u64 = 16;
/// `sizeof(struct ucred)`.
const UCRED: u64 = 12;
/// The largest control buffer a sendmsg may pass (Linux's optmem_max):
/// longer is ENOBUFS.
const OPTMEM_MAX: u64 = 131_072;
/// recvmsg's flag that the control buffer was too short.
pub const MSG_CTRUNC: u32 = 0x8;

/// CMSG_ALIGN.
fn align(n: u64) -> u64 {
    n.saturating_add(7) & !7
}

/// A sendmsg's control buffer: where, and its length.
#[derive(Debug, Clone, Copy)]
pub struct Control {
    pub va: u64,
    pub len: u64,
}

impl Control {
    /// No control buffer (write, sendto, splice).
    pub const NONE: Control = Control { va: 0, len: 0 };
}

/// What a sendmsg's control buffer carries.
#[derive(Debug, Default)]
pub struct Sent {
    /// The descriptions of the descriptors passed, one reference each.
    pub rights: Vec<DescId>,
    /// Credentials the sender passed (else its own go).
    pub creds: Option<Creds>,
}

impl Sent {
    /// Gives back the references it holds (a send that failed or sent nothing).
    pub fn drop_rights(&mut self, k: &mut Kernel) {
        close(k, std::mem::take(&mut self.rights));
    }
}

/// Closes descriptions that were in flight (one reference each).
pub fn close(k: &mut Kernel, rights: impl IntoIterator<Item = DescId>) {
    for d in rights {
        k.vfs.release(d);
    }
}

/// The credentials a message from the current process carries: its pid,
/// and root's ids (the guest is root).
pub fn own_creds(k: &Kernel) -> Creds {
    Creds {
        pid: k.cur_pid() as i32,
        uid: 0,
        gid: 0,
    }
}

/// Reads the control buffer `ctl` of a sendmsg on a
/// socket (`unix`: an AF_UNIX one, which alone takes SCM_RIGHTS and
/// SCM_CREDENTIALS; others pass over what they know). Errors
/// are Linux's: ENOBUFS past optmem_max, EINVAL for a record whose length
/// does not fit or a type it does not know, EBADF for a descriptor that is
/// not open, EINVAL past SCM_MAX_FD descriptors, ESRCH for a pid that is no
/// process's. A record's references are given back on any error.
pub fn parse(k: &mut Kernel, ctl: Control, unix: bool) -> SysResult<Sent> {
    let (control, len) = (ctl.va, ctl.len);
    let mut sent = Sent::default();
    if len == 0 {
        return Ok(sent);
    }
    if len > i32::MAX as u64 || len >= OPTMEM_MAX {
        return Err(ENOBUFS);
    }
    let buf = k.read_user(control, len as usize)?;
    match records(k, &buf, unix, &mut sent) {
        Ok(()) => Ok(sent),
        Err(e) => {
            sent.drop_rights(k);
            Err(e)
        }
    }
}

fn records(k: &mut Kernel, buf: &[u8], unix: bool, sent: &mut Sent) -> SysResult<()> {
    let len = buf.len() as u64;
    let word = |at: u64| u64::from_le_bytes(buf[at as usize..at as usize + 8].try_into().unwrap());
    let int = |at: u64| i32::from_le_bytes(buf[at as usize..at as usize + 4].try_into().unwrap());
    let mut at = 0u64;
    while at + HDR <= len {
        let (cmsg_len, level, kind) = (word(at), int(at + 8), int(at + 12));
        // CMSG_OK: at least a header, and within the buffer.
        if cmsg_len < HDR || cmsg_len > len - at {
            return Err(EINVAL);
        }
        if level == SOL_SOCKET && !unix {
            // Internet sockets pass over SCM_RIGHTS, SCM_CREDENTIALS and the
            // options they take (SO_PRIORITY, SO_MARK, SO_TIMESTAMPING,
            // SCM_TXTIME); any other is EINVAL (__sock_cmsg_send).
            if !matches!(kind, SCM_RIGHTS | SCM_CREDENTIALS | 12 | 36 | 37 | 61) {
                return Err(EINVAL);
            }
        } else if level == SOL_SOCKET {
            let data = at + HDR;
            match kind {
                SCM_RIGHTS => {
                    let num = ((cmsg_len - HDR) / 4) as usize;
                    if num > SCM_MAX_FD || sent.rights.len() + num > SCM_MAX_FD {
                        return Err(EINVAL);
                    }
                    for i in 0..num {
                        let fd = int(data + 4 * i as u64);
                        if fd < 0 {
                            return Err(EBADF);
                        }
                        let (_, f) = k.fd(fd as u64)?;
                        k.vfs.share(f.desc);
                        sent.rights.push(f.desc);
                    }
                }
                SCM_CREDENTIALS => {
                    if cmsg_len != HDR + UCRED {
                        return Err(EINVAL);
                    }
                    let c = Creds {
                        pid: int(data),
                        uid: int(data + 4) as u32,
                        gid: int(data + 8) as u32,
                    };
                    sent.creds = Some(check_creds(k, c)?);
                }
                _ => return Err(EINVAL),
            }
        }
        // CMSG_NXTHDR: the next record's header must fit too.
        at += align(cmsg_len);
    }
    Ok(())
}

/// Credentials a sender may pass (scm_check_creds): ids other than -1, and,
/// the guest being root (CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID), any pid
/// that is a process's or thread's, its own or another's (ESRCH for none).
fn check_creds(k: &Kernel, c: Creds) -> SysResult<Creds> {
    if c.uid == u32::MAX || c.gid == u32::MAX {
        return Err(EINVAL);
    }
    let pid = c.pid as super::super::task::Pid;
    let known =
        k.procs.contains_key(&pid) || k.zombies.contains_key(&pid) || k.threads.contains_key(&pid);
    if c.pid <= 0 || !known {
        return Err(ESRCH);
    }
    Ok(c)
}

/// Where a recvmsg writes its ancillary data: the guest's control buffer
/// and the room left in it, as put_cmsg and scm_detach_fds move them.
pub struct Out {
    start: u64,
    at: u64,
    room: u64,
    /// MSG_CTRUNC: something did not fit.
    pub truncated: bool,
}

impl Out {
    pub fn new(control: u64, len: u64) -> Out {
        Out {
            start: control,
            at: control,
            room: len,
            truncated: false,
        }
    }

    /// Bytes of the control buffer used (the msg_controllen written back).
    pub fn used(&self) -> u64 {
        self.at.wrapping_sub(self.start)
    }

    /// Moves past a record of `cmlen` bytes of data `data_len` (CMSG_SPACE, or what is left).
    fn advance(&mut self, data_len: u64) {
        let step = align(HDR + data_len).min(self.room);
        self.at = self.at.wrapping_add(step);
        self.room -= step;
    }

    /// put_cmsg: one record, cut short (MSG_CTRUNC) when the room is; a
    /// fault writing it is ignored, as Linux's callers ignore it.
    fn put(&mut self, k: &mut Kernel, kind: i32, data: &[u8]) {
        if self.start == 0 || self.room < HDR {
            self.truncated = true;
            return;
        }
        let mut cmlen = HDR + data.len() as u64;
        if self.room < cmlen {
            self.truncated = true;
            cmlen = self.room;
        }
        let mut rec = header(cmlen, kind);
        rec.extend_from_slice(&data[..(cmlen - HDR) as usize]);
        if k.write_user(self.at, &rec).is_ok() {
            self.advance(data.len() as u64);
        }
    }

    /// The sender's credentials (SCM_CREDENTIALS), for a receiver with SO_PASSCRED.
    pub fn creds(&mut self, k: &mut Kernel, c: Creds) {
        let mut data = Vec::with_capacity(UCRED as usize);
        data.extend_from_slice(&c.pid.to_le_bytes());
        data.extend_from_slice(&c.uid.to_le_bytes());
        data.extend_from_slice(&c.gid.to_le_bytes());
        self.put(k, SCM_CREDENTIALS, &data);
    }

    /// scm_detach_fds: as many of `rights` as the room holds become the
    /// receiver's lowest free descriptors (close-on-exec with `cloexec`);
    /// the rest are closed and MSG_CTRUNC set, as are any past EMFILE.
    pub fn rights(&mut self, k: &mut Kernel, rights: Vec<DescId>, cloexec: bool) {
        if rights.is_empty() {
            return;
        }
        let fit = if self.start == 0 || self.room <= HDR {
            0
        } else {
            ((self.room - HDR) / 4) as usize
        };
        let count = rights.len();
        let mut fds: Vec<i32> = Vec::new();
        let mut rest = rights.into_iter();
        for d in rest.by_ref().take(fit) {
            let Ok(fd) = k.install_fd(d, 0, cloexec) else {
                // install_fd gave the reference back.
                break;
            };
            let slot = self.at.wrapping_add(HDR + 4 * fds.len() as u64);
            if k.write_user(slot, &fd.to_le_bytes()).is_err() {
                k.close_fd(fd);
                break;
            }
            fds.push(fd);
        }
        close(k, rest);
        if !fds.is_empty() {
            let data_len = 4 * fds.len() as u64;
            if k.write_user(self.at, &header(HDR + data_len, SCM_RIGHTS))
                .is_ok()
            {
                self.advance(data_len);
            }
        }
        if fds.len() < count {
            self.truncated = true;
        }
    }
}

/// A record's header: its length, SOL_SOCKET and its type.
fn header(cmlen: u64, kind: i32) -> Vec<u8> {
    let mut h = Vec::with_capacity(HDR as usize);
    h.extend_from_slice(&cmlen.to_le_bytes());
    h.extend_from_slice(&SOL_SOCKET.to_le_bytes());
    h.extend_from_slice(&kind.to_le_bytes());
    h
}

/// Records shown in an event, at most.
const SHOWN_RECORDS: usize = 8;
/// Descriptors of a record shown, at most.
const SHOWN_FDS: usize = 16;

/// A `struct msghdr` at `va` as an event shows it: its iovec count and its
/// control buffer's records (`SCM_RIGHTS[4, 5]`, `SCM_CREDENTIALS{pid=2,
/// uid=0, gid=0}`); a recvmsg's, once it returned, what it received. The
/// address alone when it cannot be read.
pub fn show(k: &mut Kernel, va: u64) -> String {
    let Ok(raw) = k.read_user(va, 56) else {
        return format!("{va:#x}");
    };
    let q = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().unwrap());
    let (iovlen, control, len) = (q(24), q(32), q(40));
    let mut parts = vec![format!("msg_iovlen={iovlen}")];
    let buf = match len {
        0 => Vec::new(),
        n if n < OPTMEM_MAX => k.read_user_some(control, n as usize).unwrap_or_default(),
        n => {
            parts.push(format!("msg_controllen={n}"));
            Vec::new()
        }
    };
    let mut at = 0usize;
    while buf.len().saturating_sub(at) >= HDR as usize && parts.len() <= SHOWN_RECORDS {
        let word = u64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
        let int = |i: usize| i32::from_le_bytes(buf[i..i + 4].try_into().unwrap());
        let (level, kind) = (int(at + 8), int(at + 12));
        let end = (at as u64).saturating_add(word).min(buf.len() as u64) as usize;
        let data = &buf[(at + HDR as usize).min(end)..end];
        let ints: Vec<i32> = data
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        parts.push(match (level, kind) {
            (SOL_SOCKET, SCM_RIGHTS) => {
                let fds: Vec<String> = ints.iter().take(SHOWN_FDS).map(i32::to_string).collect();
                let more = if ints.len() > SHOWN_FDS { ", ..." } else { "" };
                format!("SCM_RIGHTS[{}{more}]", fds.join(", "))
            }
            (SOL_SOCKET, SCM_CREDENTIALS) if ints.len() >= 3 => format!(
                "SCM_CREDENTIALS{{pid={}, uid={}, gid={}}}",
                ints[0], ints[1] as u32, ints[2] as u32
            ),
            _ => format!("cmsg{{len={word}, level={level}, type={kind}}}"),
        });
        if word < HDR {
            break;
        }
        at = at.saturating_add(align(word) as usize);
    }
    format!("{{{}}}", parts.join(", "))
}
