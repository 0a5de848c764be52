//! Where another schedule can differ from schedule 0, read from schedule
//! 0's events: `bounded` and `pct` start there instead of at step 1.
//!
//! Before a second thread exists every schedule is schedule 0 (a
//! perturbation is applied only when another thread is runnable), so
//! reschedules and PCT change points there are wasted. With memory points a
//! run is hundreds of steps, most of them accesses no other thread's access
//! conflicts with; a reschedule before such an access only moves the other
//! threads' run ahead of steps that commute with it, so `bounded` tries the
//! steps that can reorder what threads share: system calls, and accesses
//! to bytes another thread of the same process also accesses, one of the
//! two a write. The conflicts are schedule 0's, so this is a heuristic for
//! the order of the search, not a proof about other schedules.

use crate::run::{Access, Event, EventKind};
use std::collections::HashMap;

/// The most bytes of one access looked at (a page: memory points trap
/// pages), so a corrupt event cannot make the scan long.
const MAX_ACCESS: u32 = 4096;

/// What schedule 0's events say about where concurrency is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The first step at which a second thread exists (the run's last step
    /// + 1 when it never does).
    pub from: u64,
    /// The steps from `from` on that are system calls or conflicting
    /// accesses, in order.
    pub points: Vec<u64>,
    /// The first of `points` that is an access (None when threads share
    /// only through system calls, or with syscall points): where threads
    /// are done setting themselves up and start sharing data.
    pub sharing_from: Option<u64>,
    /// The bytes two threads of a process access, one of them writing, as
    /// sorted (start, length) ranges: what PCT counts accesses to. Empty
    /// when there are none, or more than `MAX_SHARED` ranges.
    pub shared: Vec<(u64, u64)>,
    /// The steps from `from` on that are system calls or accesses to
    /// `shared`: the steps a PCT schedule counts.
    pub counted: Vec<u64>,
}

/// The most ranges of shared bytes a PCT schedule's manifest carries;
/// beyond it, PCT counts every step.
pub const MAX_SHARED: usize = 4096;

impl Window {
    pub fn of(events: &[Event], steps: u64) -> Window {
        let first = events.first().map(|e| e.tid);
        let from = events
            .iter()
            .find(|e| Some(e.tid) != first)
            .map_or(steps + 1, |e| e.step);
        // Per byte of shared memory (pid, address): the threads that
        // accessed it, and whether each wrote it.
        let span =
            |addr: u64, size: u32| addr..addr.saturating_add(u64::from(size.min(MAX_ACCESS)));
        let mut bytes: HashMap<(u32, u64), Vec<(u32, bool)>> = HashMap::new();
        for e in events {
            if let EventKind::Access {
                addr, size, access, ..
            } = &e.kind
            {
                let wrote = *access != Access::Read;
                for b in span(*addr, *size) {
                    let who = bytes.entry((e.pid, b)).or_default();
                    match who.iter_mut().find(|(t, _)| *t == e.tid) {
                        Some((_, w)) => *w |= wrote,
                        None => who.push((e.tid, wrote)),
                    }
                }
            }
        }
        let conflicts = |e: &Event, addr: u64, size: u32, wrote: bool| {
            span(addr, size).any(|b| {
                bytes[&(e.pid, b)]
                    .iter()
                    .any(|(t, w)| *t != e.tid && (wrote || *w))
            })
        };
        let mut points = Vec::new();
        let mut sharing_from = None;
        for e in events.iter().filter(|e| e.step >= from) {
            let point = match &e.kind {
                EventKind::Syscall { .. } => true,
                EventKind::Access {
                    addr, size, access, ..
                } if conflicts(e, *addr, *size, *access != Access::Read) => {
                    sharing_from.get_or_insert(e.step);
                    true
                }
                _ => false,
            };
            if point && points.last() != Some(&e.step) {
                points.push(e.step);
            }
        }
        let mut conflicting: Vec<u64> = bytes
            .iter()
            .filter(|(_, who)| who.len() > 1 && who.iter().any(|(_, w)| *w))
            .map(|((_, b), _)| *b)
            .collect();
        conflicting.sort_unstable();
        conflicting.dedup();
        let mut shared: Vec<(u64, u64)> = Vec::new();
        for b in conflicting {
            match shared.last_mut() {
                Some((s, l)) if *s + *l == b => *l += 1,
                _ => shared.push((b, 1)),
            }
        }
        if shared.len() > MAX_SHARED {
            shared.clear();
        }
        let pct = crate::run::Pct {
            depth: 0,
            steps: 0,
            shared,
        };
        let counted = events
            .iter()
            .filter(|e| e.step >= from)
            .filter(|e| match &e.kind {
                EventKind::Syscall { .. } => true,
                EventKind::Access { addr, size, .. } => pct.counts_access(*addr, u64::from(*size)),
                _ => false,
            })
            .map(|e| e.step)
            .fold(Vec::new(), |mut v, s| {
                if v.last() != Some(&s) {
                    v.push(s);
                }
                v
            });
        Window {
            from,
            points,
            sharing_from,
            shared: pct.shared,
            counted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(step: u64, tid: u32, addr: u64, access: Access) -> Event {
        Event {
            step,
            pid: 1000,
            tid,
            kind: EventKind::Access {
                pc: 0x401000,
                addr,
                size: 8,
                access,
                at: String::new(),
            },
        }
    }

    fn syscall(step: u64, tid: u32) -> Event {
        Event {
            step,
            pid: 1000,
            tid,
            kind: EventKind::Syscall {
                nr: 39,
                name: "getpid".into(),
                text: "getpid() = 1000".into(),
                ret: 1000,
            },
        }
    }

    #[test]
    fn starts_at_the_second_thread_and_keeps_system_calls_and_conflicts() {
        let events = vec![
            syscall(1, 1000),
            access(2, 1000, 0x5000, Access::Write),
            Event {
                step: 3,
                pid: 1000,
                tid: 1001,
                kind: EventKind::ThreadStart { parent: 1000 },
            },
            syscall(3, 1000),
            // Both only read 0x6000: no conflict.
            access(4, 1000, 0x6000, Access::Read),
            access(5, 1001, 0x6000, Access::Read),
            // 0x5000 was written by 1000 and is read by 1001.
            access(6, 1001, 0x5004, Access::Read),
            // Only 1001 touches 0x7000.
            access(7, 1001, 0x7000, Access::Atomic),
            // 1000 reads it: no conflict with 1001's read; then writes it.
            access(8, 1000, 0x5000, Access::Read),
            access(9, 1000, 0x5000, Access::Write),
        ];
        let w = Window::of(&events, 10);
        assert_eq!(w.from, 3);
        assert_eq!(w.points, vec![3, 6, 9]);
        assert_eq!(w.sharing_from, Some(6));
        // Only 0x5004..0x5008 is both threads', one writing it; PCT counts
        // the system call and every access overlapping it.
        assert_eq!(w.shared, vec![(0x5004, 4)]);
        assert_eq!(w.counted, vec![3, 6, 8, 9]);
    }

    #[test]
    fn one_thread_has_no_window() {
        let w = Window::of(&[syscall(1, 1000), syscall(2, 1000)], 2);
        assert_eq!(w.from, 3);
        assert!(w.points.is_empty());
        assert_eq!(w.sharing_from, None);
    }
}
