//! File locks that exclude: `flock` (whole-file, owned by the open file
//! description), POSIX record locks (`fcntl` F_SETLK/F_SETLKW/F_GETLK:
//! byte ranges owned by the process, so its threads share them, as on
//! Linux) and open-file-description locks (F_OFD_*: byte ranges owned by the
//! description, so two threads that each opened the file exclude each
//! other). A request that conflicts fails with EAGAIN, or, for the waiting
//! forms, blocks the thread (a futex wait on a key no memory word has, so
//! signals, deadlock reports and `rewind ps` treat it as any other wait)
//! until the locks in its way go: a description's last close drops its
//! locks, a process's close of any descriptor of the file drops its record
//! locks on it. Waiters are granted in arrival order after every step
//! (`Kernel::grant_locks`), so who gets a lock is part of the schedule.

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::{PendingCall, Pid, ThreadState, Tid, Wait};
use super::super::Kernel;
use super::vfs::Ino;
use super::DescId;
use crate::kernel::syscalls::nr;
use serde::{Deserialize, Serialize};

/// Who holds a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Owner {
    /// A POSIX record lock's process.
    Process(Pid),
    /// An open file description (flock, OFD locks).
    Desc(DescId),
}

/// Which family a lock belongs to: flock and record locks do not see each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Family {
    Flock,
    Record,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    pub family: Family,
    pub owner: Owner,
    /// Shared (read) or exclusive (write).
    pub write: bool,
    /// Bytes `start..end` (flock: the whole file).
    pub start: u64,
    pub end: u64,
}

impl Lock {
    fn conflicts(&self, o: &Lock) -> bool {
        self.family == o.family
            && self.owner != o.owner
            && (self.write || o.write)
            && self.start < o.end
            && o.start < self.end
    }
}

/// A request waiting for a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    pub tid: Tid,
    pub ino: Ino,
    /// The lock it asks for (never an unlock).
    pub lock: Lock,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Locks {
    /// Every lock held, by file.
    pub held: std::collections::BTreeMap<Ino, Vec<Lock>>,
    /// Waiting requests, in arrival order.
    pub waiting: Vec<Waiter>,
    /// Some lock went since the last grant pass.
    pub changed: bool,
}

/// The futex key a thread waiting for a lock on `ino` waits on: above every
/// physical address, so no FUTEX_WAKE reaches it.
pub fn wait_key(ino: Ino) -> u64 {
    (1 << 63) | ino
}

impl Locks {
    /// The first lock in the way of `l` on `ino`.
    pub fn conflict(&self, ino: Ino, l: &Lock) -> Option<Lock> {
        self.held
            .get(&ino)?
            .iter()
            .find(|h| h.conflicts(l))
            .copied()
    }

    /// Sets (or, with `lock` None, clears) `owner`'s locks of `family` on
    /// `start..end` of `ino`, splitting what it held there.
    pub fn set(
        &mut self,
        ino: Ino,
        family: Family,
        owner: Owner,
        start: u64,
        end: u64,
        write: Option<bool>,
    ) {
        let list = self.held.entry(ino).or_default();
        let mut out = Vec::with_capacity(list.len() + 2);
        for h in list.drain(..) {
            if h.family != family || h.owner != owner || h.end <= start || end <= h.start {
                out.push(h);
                continue;
            }
            self.changed = true;
            if h.start < start {
                out.push(Lock { end: start, ..h });
            }
            if end < h.end {
                out.push(Lock { start: end, ..h });
            }
        }
        if let Some(write) = write {
            out.push(Lock {
                family,
                owner,
                write,
                start,
                end,
            });
            out.sort_by_key(|l| (l.start, l.owner));
        }
        if out.is_empty() {
            self.held.remove(&ino);
        } else {
            *list_mut(&mut self.held, ino) = out;
        }
    }

    /// Drops every lock `owner` holds (on `ino` only, when given).
    pub fn drop_owner(&mut self, owner: Owner, ino: Option<Ino>) {
        let mut emptied = Vec::new();
        for (i, list) in self.held.iter_mut() {
            if ino.is_some_and(|x| x != *i) {
                continue;
            }
            let before = list.len();
            list.retain(|l| l.owner != owner);
            if list.len() != before {
                self.changed = true;
            }
            if list.is_empty() {
                emptied.push(*i);
            }
        }
        for i in emptied {
            self.held.remove(&i);
        }
    }
}

fn list_mut(m: &mut std::collections::BTreeMap<Ino, Vec<Lock>>, ino: Ino) -> &mut Vec<Lock> {
    m.entry(ino).or_default()
}

impl Kernel<'_> {
    /// Takes `lock` on `ino` for the current thread, or fails with EAGAIN
    /// (`wait`: blocks it until it can be granted).
    pub(crate) fn take_lock(
        &mut self,
        ino: Ino,
        lock: Lock,
        wait: Option<PendingCall>,
    ) -> SysResult<Sys> {
        if self.vfs.locks.conflict(ino, &lock).is_none() {
            let l = &mut self.vfs.locks;
            l.set(
                ino,
                lock.family,
                lock.owner,
                lock.start,
                lock.end,
                Some(lock.write),
            );
            return Ok(Sys::Ret(0));
        }
        let Some(call) = wait else {
            return Err(EAGAIN);
        };
        let tid = self.cur_tid();
        let key = wait_key(ino);
        self.futexes.enqueue(key, tid);
        self.vfs.locks.waiting.push(Waiter { tid, ino, lock });
        Ok(self.block(
            Wait::Futex {
                key,
                bitset: super::super::futex::FUTEX_BITSET_MATCH_ANY,
            },
            None,
            call,
        ))
    }

    /// Grants what waiting requests can now have, in arrival order, after
    /// locks went; drops requests whose thread no longer waits (a signal).
    pub fn grant_locks(&mut self) {
        // A grant may change locks too (a downgrade): until nothing moves.
        while self.vfs.locks.changed {
            self.vfs.locks.changed = false;
            self.grant_pass();
        }
    }

    fn grant_pass(&mut self) {
        let waiting = std::mem::take(&mut self.vfs.locks.waiting);
        let mut still = Vec::new();
        for w in waiting {
            let key = wait_key(w.ino);
            let waits = self.threads.get(&w.tid).is_some_and(|t| {
                matches!(&t.state, ThreadState::Blocked { wait: Wait::Futex { key: k, .. }, .. } if *k == key)
            });
            if !waits {
                continue;
            }
            if self.vfs.locks.conflict(w.ino, &w.lock).is_some() {
                still.push(w);
                continue;
            }
            let l = w.lock;
            self.vfs
                .locks
                .set(w.ino, l.family, l.owner, l.start, l.end, Some(l.write));
            self.futexes.remove(key, w.tid);
            self.wake(w.tid, Ok(0));
        }
        // Requests made while granting (none today) come after the older ones.
        still.append(&mut self.vfs.locks.waiting);
        self.vfs.locks.waiting = still;
    }
}

const LOCK_SH: u64 = 1;
const LOCK_EX: u64 = 2;
const LOCK_NB: u64 = 4;
const LOCK_UN: u64 = 8;

/// Flock implements Linux syscall flock(2).
pub fn sys_flock(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (id, d) = k.desc(a[0])?;
    let op = a[1];
    let write = match op & !LOCK_NB {
        LOCK_SH => Some(false),
        LOCK_EX => Some(true),
        LOCK_UN => None,
        _ => return Err(EINVAL),
    };
    let Some(ino) = d.ino() else {
        return Ok(Sys::Ret(0)); // the console's pipes: nobody else opens them
    };
    let owner = Owner::Desc(id);
    // A conversion drops the old lock first, as Linux does.
    k.vfs
        .locks
        .set(ino, Family::Flock, owner, 0, u64::MAX, None);
    let Some(write) = write else {
        return Ok(Sys::Ret(0));
    };
    let lock = Lock {
        family: Family::Flock,
        owner,
        write,
        start: 0,
        end: u64::MAX,
    };
    let wait = (op & LOCK_NB == 0).then_some(PendingCall {
        nr: nr::flock,
        args: a,
    });
    // EWOULDBLOCK is EAGAIN.
    k.take_lock(ino, lock, wait)
}

const F_GETLK: u64 = 5;
const F_SETLK: u64 = 6;
const F_SETLKW: u64 = 7;
const F_OFD_GETLK: u64 = 36;
const F_OFD_SETLK: u64 = 37;
const F_OFD_SETLKW: u64 = 38;
const F_RDLCK: u16 = 0;
const F_WRLCK: u16 = 1;
const F_UNLCK: u16 = 2;

/// x86-64 `struct flock`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Flock {
    l_type: u16,
    l_whence: u16,
    _pad: u32,
    l_start: i64,
    l_len: i64,
    l_pid: i32,
    _pad2: u32,
}

/// The locking commands of fcntl; every other command is `sys_fcntl`'s.
/// Fcntl implements Linux syscall fcntl(2) (its locking commands, F_GETLK,
/// F_SETLK, F_SETLKW and the F_OFD_ ones; `sys_fcntl` serves the rest).
pub fn sys_fcntl_locks(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let cmd = a[1];
    if ![
        F_GETLK,
        F_SETLK,
        F_SETLKW,
        F_OFD_GETLK,
        F_OFD_SETLK,
        F_OFD_SETLKW,
    ]
    .contains(&cmd)
    {
        return super::file_ops::descriptors::sys_fcntl(k, a).map(Sys::Ret);
    }
    let (id, d) = k.desc(a[0])?;
    let fl: Flock = k.read_struct(a[2])?;
    let ofd = matches!(cmd, F_OFD_GETLK | F_OFD_SETLK | F_OFD_SETLKW);
    if ofd && fl.l_pid != 0 {
        return Err(EINVAL);
    }
    let Some(ino) = d.ino() else {
        return Err(EINVAL); // the console's pipes take no record locks
    };
    let base: i64 = match fl.l_whence {
        0 => 0,
        1 => d.offset as i64,
        2 => k.vfs.tree.node(ino)?.size as i64,
        _ => return Err(EINVAL),
    };
    let start = base.checked_add(fl.l_start).ok_or(EOVERFLOW)?;
    let (start, end) = match fl.l_len {
        0 => (start, u64::MAX as i128),
        n if n > 0 => (start, start as i128 + n as i128),
        n => (start + n, start as i128),
    };
    if start < 0 {
        return Err(EINVAL);
    }
    let (start, end) = (start as u64, end.min(u64::MAX as i128) as u64);
    let owner = if ofd {
        Owner::Desc(id)
    } else {
        Owner::Process(k.cur_pid())
    };
    let write = match fl.l_type {
        F_RDLCK => Some(false),
        F_WRLCK => Some(true),
        F_UNLCK => None,
        _ => return Err(EINVAL),
    };
    if matches!(cmd, F_GETLK | F_OFD_GETLK) {
        let Some(write) = write else {
            return Err(EINVAL);
        };
        let want = Lock {
            family: Family::Record,
            owner,
            write,
            start,
            end,
        };
        let mut out = fl;
        match k.vfs.locks.conflict(ino, &want) {
            None => out.l_type = F_UNLCK,
            Some(h) => {
                out.l_type = if h.write { F_WRLCK } else { F_RDLCK };
                out.l_whence = 0;
                out.l_start = h.start as i64;
                out.l_len = if h.end == u64::MAX {
                    0
                } else {
                    (h.end - h.start) as i64
                };
                out.l_pid = match h.owner {
                    Owner::Process(p) => p as i32,
                    Owner::Desc(_) => -1,
                };
            }
        }
        k.write_struct(a[2], &out)?;
        return Ok(Sys::Ret(0));
    }
    let Some(write) = write else {
        k.vfs
            .locks
            .set(ino, Family::Record, owner, start, end, None);
        return Ok(Sys::Ret(0));
    };
    if (write && !d.writable()) || (!write && !d.readable()) {
        return Err(EBADF);
    }
    let lock = Lock {
        family: Family::Record,
        owner,
        write,
        start,
        end,
    };
    let wait = matches!(cmd, F_SETLKW | F_OFD_SETLKW).then_some(PendingCall {
        nr: nr::fcntl,
        args: a,
    });
    k.take_lock(ino, lock, wait)
}
