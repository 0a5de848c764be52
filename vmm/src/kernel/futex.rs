//! futex(2): WAIT, WAKE, WAIT_BITSET, WAKE_BITSET, REQUEUE, CMP_REQUEUE,
//! WAKE_OP, with timeouts in virtual time. Waiters are keyed by the guest
//! physical address of the word, so private and shared futexes both work.

use super::errno::*;
use super::sched::Sys;
use super::task::{PendingCall, Tid, Wait};
use super::time::Timespec;
use super::Kernel;
use crate::kernel::syscalls::nr;
use std::collections::{BTreeMap, VecDeque};

pub const FUTEX_WAIT: u32 = 0;
pub const FUTEX_WAKE: u32 = 1;
pub const FUTEX_REQUEUE: u32 = 3;
pub const FUTEX_CMP_REQUEUE: u32 = 4;
pub const FUTEX_WAKE_OP: u32 = 5;
pub const FUTEX_WAIT_BITSET: u32 = 9;
pub const FUTEX_WAKE_BITSET: u32 = 10;
pub const FUTEX_PRIVATE_FLAG: u32 = 128;
pub const FUTEX_CLOCK_REALTIME: u32 = 256;
const FUTEX_CMD_MASK: u32 = !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
pub const FUTEX_BITSET_MATCH_ANY: u32 = 0xffff_ffff;

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Futexes {
    /// Waiters of each word, in arrival order, with their bitsets.
    queues: BTreeMap<u64, VecDeque<(Tid, u32)>>,
}

impl Futexes {
    /// Adds a waiter on `key` that any bitset wakes (a thread waiting for a file lock).
    pub fn enqueue(&mut self, key: u64, tid: Tid) {
        self.queues
            .entry(key)
            .or_default()
            .push_back((tid, FUTEX_BITSET_MATCH_ANY));
    }

    pub fn remove(&mut self, key: u64, tid: Tid) {
        if let Some(q) = self.queues.get_mut(&key) {
            q.retain(|(t, _)| *t != tid);
            if q.is_empty() {
                self.queues.remove(&key);
            }
        }
    }
}

impl Kernel<'_> {
    /// The key of the futex word at `uaddr`: its physical address.
    fn futex_key(&mut self, uaddr: u64) -> SysResult<u64> {
        if !uaddr.is_multiple_of(4) {
            return Err(EINVAL);
        }
        let pid = self.cur_pid();
        let p = self.procs.get_mut(&pid).unwrap();
        p.mm.translate(&mut self.m.ram, &mut self.vfs, uaddr, false)
            .map_err(|_| EFAULT)
    }

    /// Wakes up to `n` waiters of `uaddr` whose bitset meets `bitset`.
    pub fn futex_wake(&mut self, uaddr: u64, n: u32, bitset: u32) -> SysResult<u64> {
        let key = self.futex_key(uaddr)?;
        Ok(self.wake_key(key, n, bitset) as u64)
    }

    fn wake_key(&mut self, key: u64, n: u32, bitset: u32) -> u32 {
        let mut woken = Vec::new();
        if let Some(q) = self.futexes.queues.get_mut(&key) {
            q.retain(|(tid, bs)| {
                if woken.len() < n as usize && bs & bitset != 0 {
                    woken.push(*tid);
                    false
                } else {
                    true
                }
            });
            if q.is_empty() {
                self.futexes.queues.remove(&key);
            }
        }
        for tid in &woken {
            self.race_wake(*tid);
            self.wake(*tid, Ok(0));
        }
        woken.len() as u32
    }
}

/// Futex implements Linux syscall futex(2).
/// Partial (futex): no priority-inheritance operations (FUTEX_LOCK_PI...): ENOSYS, as from a Linux built without them (CONFIG_FUTEX_PI), and as Linux answers an operation it does not know.
pub fn sys_futex(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (uaddr, op, val, utime, uaddr2, val3) =
        (a[0], a[1] as u32, a[2] as u32, a[3], a[4], a[5] as u32);
    let call = PendingCall {
        nr: nr::futex,
        args: a,
    };
    match op & FUTEX_CMD_MASK {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            // Restarted after a stop, a timed wait keeps the deadline it had
            // (Linux's futex_wait_restart, with the absolute expiry).
            let kept = k.io_resume(call.nr).deadline;
            let bitset = if op & FUTEX_CMD_MASK == FUTEX_WAIT {
                FUTEX_BITSET_MATCH_ANY
            } else {
                val3
            };
            if bitset == 0 {
                return Err(EINVAL);
            }
            let key = k.futex_key(uaddr)?;
            if k.read_u32(uaddr)? != val {
                return Err(EAGAIN);
            }
            let deadline = if utime == 0 {
                None
            } else if kept.is_some() {
                kept
            } else {
                let ts: Timespec = k.read_struct(utime)?;
                let ns = ts.to_ns().ok_or(EINVAL)?;
                Some(if op & FUTEX_CMD_MASK == FUTEX_WAIT {
                    k.clock.now().saturating_add(ns)
                } else if op & FUTEX_CLOCK_REALTIME != 0 {
                    k.clock.realtime_to_monotonic(ns)
                } else {
                    ns
                })
            };
            let tid = k.cur_tid();
            k.futexes
                .queues
                .entry(key)
                .or_default()
                .push_back((tid, bitset));
            Ok(k.block(Wait::Futex { key, bitset }, deadline, call))
        }
        FUTEX_WAKE => k
            .futex_wake(uaddr, val, FUTEX_BITSET_MATCH_ANY)
            .map(Sys::Ret),
        FUTEX_WAKE_BITSET => {
            if val3 == 0 {
                return Err(EINVAL);
            }
            k.futex_wake(uaddr, val, val3).map(Sys::Ret)
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => {
            let key = k.futex_key(uaddr)?;
            let key2 = k.futex_key(uaddr2)?;
            if op & FUTEX_CMD_MASK == FUTEX_CMP_REQUEUE && k.read_u32(uaddr)? != val3 {
                return Err(EAGAIN);
            }
            let woken = k.wake_key(key, val, FUTEX_BITSET_MATCH_ANY);
            let limit = utime as u32; // val2 travels in the timeout slot
            let mut moved = 0u32;
            let mut movers = Vec::new();
            if let Some(q) = k.futexes.queues.get_mut(&key) {
                while moved < limit {
                    let Some(w) = q.pop_front() else { break };
                    movers.push(w);
                    moved += 1;
                }
                if q.is_empty() {
                    k.futexes.queues.remove(&key);
                }
            }
            for (tid, bs) in movers {
                k.futexes
                    .queues
                    .entry(key2)
                    .or_default()
                    .push_back((tid, bs));
                if let Some(t) = k.threads.get_mut(&tid) {
                    if let super::task::ThreadState::Blocked {
                        wait: Wait::Futex { key: kk, .. },
                        ..
                    } = &mut t.state
                    {
                        *kk = key2;
                    }
                }
            }
            Ok(Sys::Ret((woken + moved) as u64))
        }
        FUTEX_WAKE_OP => {
            let key2 = k.futex_key(uaddr2)?;
            let old = k.read_u32(uaddr2)?;
            let (opcode, cmp) = ((val3 >> 28) & 0xf, (val3 >> 24) & 0xf);
            let mut oparg = (val3 >> 12) & 0xfff;
            let cmparg = val3 & 0xfff;
            if opcode & 8 != 0 {
                oparg = 1u32.checked_shl(oparg).unwrap_or(0);
            }
            let new = match opcode & 7 {
                0 => oparg,
                1 => old.wrapping_add(oparg),
                2 => old | oparg,
                3 => old & !oparg,
                4 => old ^ oparg,
                _ => return Err(ENOSYS),
            };
            k.write_u32(uaddr2, new)?;
            let mut n = k.futex_wake(uaddr, val, FUTEX_BITSET_MATCH_ANY)? as u32;
            let hit = match cmp {
                0 => old == cmparg,
                1 => old != cmparg,
                2 => (old as i32) < cmparg as i32,
                3 => (old as i32) <= cmparg as i32,
                4 => (old as i32) > cmparg as i32,
                5 => (old as i32) >= cmparg as i32,
                _ => return Err(ENOSYS),
            };
            if hit {
                n += k.wake_key(key2, utime as u32, FUTEX_BITSET_MATCH_ANY);
            }
            Ok(Sys::Ret(n as u64))
        }
        _ => Err(ENOSYS),
    }
}
