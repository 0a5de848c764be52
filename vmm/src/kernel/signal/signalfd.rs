//! signalfd and signalfd4: a descriptor that reads the caller's pending
//! signals of a set as `struct signalfd_siginfo` records, instead of
//! having them delivered.
//!
//! As on Linux, the descriptor holds only its set: what a read takes, and
//! what poll or epoll see as readable, are the pending signals of the thread
//! that reads or polls (its own queue first, then its process's), so a
//! forked child reading an inherited signalfd reads its own signals. A read
//! takes as many records as fit (at least one 128-byte record, else EINVAL);
//! with none pending it blocks (or EAGAIN with SFD_NONBLOCK) until a signal
//! of the set is queued: queueing one touches every signalfd, which restarts
//! the calls blocked on them (`fs::io`). A signal the reader does not block
//! is delivered as usual and interrupts the read (ERESTARTSYS). Calling
//! signalfd again on one of its descriptors replaces its set.

use super::*;
use crate::kernel::fs::io::{self, Obj, ObjId, READABLE};
use crate::kernel::fs::{Target as FdTarget, O_CLOEXEC, O_NONBLOCK};

const SFD_CLOEXEC: u64 = O_CLOEXEC as u64;
const SFD_NONBLOCK: u64 = O_NONBLOCK as u64;
/// Size of `struct signalfd_siginfo`.
pub const RECORD: usize = 128;

/// The object behind a signalfd: the set it reads.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SignalFd {
    pub mask: u64,
}

impl SignalFd {
    /// Readable while one of its signals is pending for the caller.
    pub fn ready(&self, caller_pending: u64) -> u16 {
        if caller_pending & self.mask != 0 {
            READABLE
        } else {
            0
        }
    }
}

impl SigInfo {
    /// `struct signalfd_siginfo` (Linux's signalfd_copyinfo).
    pub fn to_signalfd_bytes(&self) -> [u8; RECORD] {
        let mut b = [0u8; RECORD];
        let mut put = |at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
        put(0, &(self.signo as u32).to_le_bytes());
        put(8, &self.code.to_le_bytes());
        if self.synchronous() {
            put(72, &self.addr.to_le_bytes());
            if let Some((vector, _)) = self.trap {
                put(36, &(vector as u32).to_le_bytes());
            }
        } else if self.code == SI_TIMER {
            // _timer: si_tid and si_overrun where _kill has si_pid and si_uid.
            put(24, &self.pid.to_le_bytes());
            put(32, &self.uid.to_le_bytes());
            put(44, &(self.value as u32).to_le_bytes());
            put(48, &self.value.to_le_bytes());
        } else {
            put(12, &self.pid.to_le_bytes());
            put(16, &self.uid.to_le_bytes());
            if self.signo == SIGCHLD && self.code > 0 {
                // _sigchld: si_status where _rt has si_value.
                put(40, &(self.value as u32).to_le_bytes());
            } else {
                put(44, &(self.value as u32).to_le_bytes());
                put(48, &self.value.to_le_bytes());
            }
        }
        b
    }
}

/// Signalfd4 implements Linux syscall signalfd4(2).
pub fn sys_signalfd4(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (fd, umask, size, flags) = (a[0] as i32, a[1], a[2], a[3]);
    if size != 8 || flags & !(SFD_CLOEXEC | SFD_NONBLOCK) != 0 {
        return Err(EINVAL);
    }
    let mask = k.read_u64(umask)? & !UNBLOCKABLE;
    if fd == -1 {
        let obj = Obj::SignalFd(SignalFd { mask });
        return crate::kernel::fs::eventfd::install(k, obj, flags, "signalfd");
    }
    let (_, d) = k.desc(fd as u32 as u64)?;
    let FdTarget::Io { obj, .. } = d.target else {
        return Err(EINVAL);
    };
    let Some(Obj::SignalFd(s)) = k.vfs.io.objs.get_mut(&obj) else {
        return Err(EINVAL);
    };
    s.mask = mask;
    k.vfs.io.touch(obj);
    Ok(fd as u64)
}

/// Signalfd implements Linux syscall signalfd(2).
pub fn sys_signalfd(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sys_signalfd4(k, [a[0], a[1], a[2], 0, 0, 0])
}

/// A read of signalfd `obj`: the caller's pending signals of its set.
pub fn read(
    k: &mut Kernel,
    obj: ObjId,
    nonblock: bool,
    bufs: &[(u64, usize)],
    c: PendingCall,
) -> SysResult<Sys> {
    let room = io::total_len(bufs) / RECORD;
    if room == 0 {
        return Err(EINVAL);
    }
    let Some(Obj::SignalFd(s)) = k.vfs.io.objs.get(&obj) else {
        return Err(EINVAL);
    };
    let mask = s.mask;
    let mut done = 0;
    // One record at a time, as Linux's signalfd_read: a record the guest's
    // memory refuses is lost, and the ones after it stay pending.
    while done < room {
        let Some(info) = k.take_waited(mask) else {
            break;
        };
        if let Err(e) = write_at(k, bufs, done * RECORD, &info.to_signalfd_bytes()) {
            return if done == 0 {
                Err(e)
            } else {
                Ok(Sys::Ret((done * RECORD) as u64))
            };
        }
        done += 1;
    }
    if done > 0 {
        return Ok(Sys::Ret((done * RECORD) as u64));
    }
    k.io_wait(&[obj], nonblock, 0, c)
}

/// Writes `bytes` at offset `at` of the guest's buffers, all or EFAULT.
fn write_at(k: &mut Kernel, bufs: &[(u64, usize)], at: usize, bytes: &[u8]) -> SysResult<()> {
    let (mut skip, mut left) = (at, bytes);
    for &(va, len) in bufs {
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = (len - skip).min(left.len());
        k.write_user(va.wrapping_add(skip as u64), &left[..n])?;
        left = &left[n..];
        skip = 0;
        if left.is_empty() {
            return Ok(());
        }
    }
    Err(EFAULT)
}

impl Kernel<'_> {
    /// Every signal pending for thread `tid`: its own and its process's.
    pub(crate) fn pending_set(&self, tid: Tid) -> u64 {
        let Some(t) = self.threads.get(&tid) else {
            return 0;
        };
        let shared = self
            .procs
            .get(&t.pid)
            .map_or(&[][..], |p| &p.signals.shared[..]);
        t.signals
            .pending
            .iter()
            .chain(shared)
            .fold(0, |m, s| m | sig_bit(s.signo))
    }

    /// Before a call: what the calling thread has pending, which is what
    /// its polls see of signalfds (only kept while a signalfd exists).
    pub(crate) fn note_caller_signals(&mut self) {
        if !self.vfs.io.signalfds.is_empty() {
            self.vfs.io.caller_signals = self.pending_set(self.cur_tid());
        }
    }

    /// A signal was queued: readers and pollers of signalfds look again.
    pub(super) fn signalfds_changed(&mut self) {
        let io = &mut self.vfs.io;
        for obj in io.signalfds.clone() {
            io.touch(obj);
        }
    }
}
