//! Race-directed memory points (`--points races`): only the pages that can
//! race trap as points; every other data page belongs to one thread at a
//! time and changes hands at a fault (one exit per change of owner, not per
//! access).
//!
//! Whether a change of owner can be a race is judged by happens-before, as
//! FastTrack and TSan do, at page grain and at the moments the monitor sees:
//! each thread has a vector clock, advanced by the synchronisation the
//! kernel serves (`clone`, a futex wake to the waiter it wakes, which is
//! also how a join sees a thread's exit) and by atomic accesses on trapping
//! pages (a `lock`ed instruction acquires the page's last clock and
//! releases its own). A page keeps its owner's clock from when the owner
//! took it. When another thread touches it, the change is ordered when that
//! thread's clock has seen the owner's at that moment, and the access is a
//! plain one; otherwise (unordered, or an atomic access: a lock word or a
//! lock-free variable, where the interleaving is the question) the page
//! traps from then on, with the full memory-point semantics of
//! `points.rs`, and the access is the first point on it.
//!
//! The pages a run saw race are the pages of its `Access` events; a check
//! learns them from one such run and gives them to its schedules as
//! `race_pages`, which trap from the start. A page another schedule sees
//! race (heap layouts move with the schedule) starts trapping in that run
//! when it does: no site is lost, it only has no points before.
//!
//! A racing page often holds one thread's private data too (a thread's
//! compressor state beside its malloc arena's lock). A thread that makes
//! `OWN_POINTS` points in a row on a trapping page, one a write, none an
//! atomic and none on bytes another thread's points touched
//! (`contested`), takes the page back (`points.rs`): its own data stops
//! trapping until another thread touches the page, which is judged as
//! any change of owner.

use super::mm::page_down;
use super::points::Owner;
use super::task::{Pid, Tid};
use super::Kernel;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A vector clock: of each thread, the last epoch of it this one has seen.
type Clock = BTreeMap<Tid, u32>;

/// Race-directed state (`MemPoints::race`); kernel state, so keyframes carry it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RaceState {
    /// Pages that trap from the start (the manifest's `race_pages`).
    pages: BTreeSet<u64>,
    /// Each thread's clock (a thread not listed is at {itself: 1}).
    clocks: BTreeMap<Tid, Clock>,
    /// Of each owned page: its owner's clock when it took the page.
    grants: BTreeMap<(Pid, u64), Clock>,
    /// Of each address atomics touched on trapping pages: the clock the
    /// last one released.
    sync: BTreeMap<(Pid, u64), Clock>,
    /// Pages on probation (an unordered change of owner by a plain access):
    /// the points made on each since, judged byte by byte.
    probation: BTreeMap<(Pid, u64), Vec<Seen>>,
    /// Pages seen to race (their addresses): what a check's learning run
    /// gives its schedules as `race_pages`.
    confirmed: BTreeSet<u64>,
    /// Pages whose last probation saw only reads: a read that takes one
    /// unordered changes its owner without a point (two readers of a
    /// table do not race; a write puts it on probation again).
    quiet: BTreeSet<(Pid, u64)>,
    /// Of each trapping page: the bytes its points touched, each with the
    /// thread that last did (the last `TOUCHED` ranges), to tell the bytes
    /// threads contend for from a thread's private data on the same page.
    #[serde(default)]
    touched: BTreeMap<(Pid, u64), Vec<Touched>>,
}

/// Byte ranges a page remembers its points by (`RaceState::contested`).
const TOUCHED: usize = 64;

/// Bytes a point touched (address, length) and the thread that made it.
type Touched = (u64, u64, Tid);

/// A point made on a page on probation.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Seen {
    tid: Tid,
    addr: u64,
    len: u64,
    write: bool,
    /// The thread's own epoch when it made it.
    epoch: u32,
}

/// Points a page stays on probation without two threads' unordered
/// accesses to the same bytes (one a write) before it goes back to being
/// owned: a page two threads use different parts of (the tail of one buffer
/// and the head of the next), or only read (a table both read), stops
/// trapping after this many.
pub const PROBATION: usize = 16;

/// What a point on a page on probation decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// Still trapping (racing, or still on probation).
    Traps,
    /// No race seen in `PROBATION` points: the page is the thread's again.
    Owned,
}

impl RaceState {
    pub fn new(pages: &[u64]) -> RaceState {
        RaceState {
            pages: pages.iter().copied().collect(),
            ..Default::default()
        }
    }

    /// Whether the page traps from the start.
    pub fn listed(&self, page: u64) -> bool {
        self.pages.contains(&page_down(page))
    }

    fn clock(&self, tid: Tid) -> Clock {
        self.clocks
            .get(&tid)
            .cloned()
            .unwrap_or_else(|| Clock::from([(tid, 1)]))
    }

    /// `tid` makes a release: its later accesses are after it.
    fn tick(&mut self, tid: Tid) {
        let mut c = self.clock(tid);
        *c.entry(tid).or_insert(0) += 1;
        self.clocks.insert(tid, c);
    }

    fn join(&mut self, tid: Tid, other: &Clock) {
        let mut c = self.clock(tid);
        for (t, e) in other {
            let mine = c.entry(*t).or_insert(0);
            *mine = (*mine).max(*e);
        }
        self.clocks.insert(tid, c);
    }

    /// `tid` takes the page now: its clock is the page's.
    pub fn grant(&mut self, pid: Pid, page: u64, tid: Tid) {
        let c = self.clock(tid);

        self.grants.insert((pid, page_down(page)), c);
    }

    /// Whether `tid`'s access to the page `owner` holds is ordered after
    /// everything `owner` did with it: `tid` has seen the owner's epoch at
    /// which it took the page (a page with no clock, given out before the
    /// mode was on, counts as seen).
    pub fn ordered(&self, pid: Pid, page: u64, owner: Tid, tid: Tid) -> bool {
        let Some(g) = self.grants.get(&(pid, page_down(page))) else {
            return true;
        };
        let epoch = g.get(&owner).copied().unwrap_or(0);
        self.clock(tid).get(&owner).copied().unwrap_or(0) >= epoch
    }

    /// An atomic access by `tid` to a trapping page (`owner` held it until
    /// now, if anyone did): it acquires what the page last released and
    /// releases its own. The owner's own atomics on it made no point, so
    /// the first handover acquires the owner's clock now: its last release
    /// there (an unlock) is taken to be its latest.
    pub fn atomic(&mut self, pid: Pid, addr: u64, tid: Tid, owner: Option<Tid>) {
        // Synchronisation is per word: two locks on one page are two locks.
        let key = (pid, addr);
        let before = match owner {
            Some(o) => {
                self.grants.remove(&(pid, page_down(addr)));
                let c = self.clock(o);
                self.tick(o);
                Some(c)
            }
            None => self.sync.get(&key).cloned(),
        };
        if let Some(c) = before {
            self.join(tid, &c);
        }
        let mine = self.clock(tid);
        self.sync.insert(key, mine);
        self.tick(tid);
    }

    /// `clone`: the child has seen everything its parent did before it.
    pub fn clone_thread(&mut self, parent: Tid, child: Tid) {
        let mut c = self.clock(parent);
        c.insert(child, 1);
        self.clocks.insert(child, c);
        self.tick(parent);
    }

    /// A futex wake: the woken thread has seen everything the waker did.
    pub fn wake(&mut self, waker: Tid, woken: Tid) {
        if waker == woken {
            return;
        }
        let c = self.clock(waker);
        self.join(woken, &c);
        self.tick(waker);
    }

    /// An unordered change of owner by a plain access: the page traps, on
    /// probation; an atomic one, or a page listed, traps for good.
    /// False when the page needs no point: a read of a quiet page.
    /// The owner's accesses made no points: only those it makes on
    /// probation are judged against the others' (counting its whole tenure
    /// as a read of the page confirmed any write to it, as when another
    /// thread frees a block whose header shares the page with the owner's
    /// private state, which then trapped for good).
    pub fn unordered(&mut self, pid: Pid, page: u64, atomic: bool, write: bool) -> bool {
        let page = page_down(page);
        if !write && self.quiet.contains(&(pid, page)) {
            return false;
        }
        self.quiet.remove(&(pid, page));
        if atomic || self.pages.contains(&page) {
            self.confirmed.insert(page);
            self.probation.remove(&(pid, page));
        } else if !self.confirmed.contains(&page) {
            self.probation.insert((pid, page), Vec::new());
        }
        true
    }

    /// A point on a trapping page: on probation, whether two threads'
    /// unordered accesses met on the same bytes, one writing (the page then
    /// traps for good), or the probation is over (the page is `tid`'s).
    pub fn point(&mut self, pid: Pid, addr: u64, len: u64, tid: Tid, write: bool) -> Judged {
        let key = (pid, page_down(addr));
        if !self.probation.contains_key(&key) {
            return Judged::Traps;
        }
        let mine = self.clock(tid);
        let len = len.max(1);
        let seen = &self.probation[&key];
        let races = seen.iter().any(|s| {
            s.tid != tid
                && (s.write || write)
                && s.addr < addr.saturating_add(len)
                && addr < s.addr.saturating_add(s.len)
                && mine.get(&s.tid).copied().unwrap_or(0) < s.epoch
        });
        if races {
            self.probation.remove(&key);
            self.confirmed.insert(key.1);
            return Judged::Traps;
        }
        let epoch = mine.get(&tid).copied().unwrap_or(1);
        let seen = self.probation.get_mut(&key).unwrap();
        seen.push(Seen {
            tid,
            addr,
            len,
            write,
            epoch,
        });
        if seen.len() < PROBATION {
            return Judged::Traps;
        }
        if let Some(seen) = self.probation.remove(&key) {
            if seen.iter().all(|s| !s.write) {
                self.quiet.insert(key);
            }
        }
        self.grant(pid, key.1, tid);
        Judged::Owned
    }

    /// A point by `tid` on `len` bytes at `addr`: whether another thread's
    /// point touched any of them (they are contended for). A thread whose
    /// points on a racing page meet no other thread's bytes for a while is
    /// using its own data there (a compressor's state beside the arena's
    /// lock): `memory_point` gives it the page back.
    pub fn contested(&mut self, pid: Pid, addr: u64, len: u64, tid: Tid) -> bool {
        let len = len.max(1);
        let seen = self.touched.entry((pid, page_down(addr))).or_default();
        let end = addr.saturating_add(len);
        let met = seen
            .iter()
            .any(|(a, l, t)| *t != tid && *a < end && addr < a.saturating_add(*l));
        seen.retain(|(a, l, _)| (*a, *l) != (addr, len));
        if seen.len() >= TOUCHED {
            seen.remove(0);
        }
        seen.push((addr, len, tid));
        met
    }

    /// The pages seen to race, sorted.
    pub fn confirmed(&self) -> Vec<u64> {
        self.confirmed.union(&self.pages).copied().collect()
    }

    /// A process's address space is gone: its pages' clocks too.
    pub fn forget_process(&mut self, pid: Pid) {
        self.grants.retain(|(p, _), _| *p != pid);
        self.probation.retain(|(p, _), _| *p != pid);
        self.quiet.retain(|(p, _)| *p != pid);
        self.touched.retain(|(p, _), _| *p != pid);
        self.sync.retain(|(p, _), _| *p != pid);
    }
}

impl Kernel<'_> {
    /// The owner a page gets when `tid` first makes it present (at its
    /// clock now): `tid`, or `Shared` when race-directed points list it.
    pub(super) fn first_owner(&mut self, pid: Pid, page: u64, tid: Tid) -> Owner {
        let owner = self.unlisted_owner(page, tid);
        if let (Some(r), Owner::Thread(_)) = (self.points.race.as_mut(), owner) {
            r.grant(pid, page, tid);
        }
        owner
    }

    /// The owner of a page found present at a switch with none: made
    /// present by the monitor (the program's image, its first stack)
    /// before anything could order it, so no clock: any thread's access
    /// is ordered after it.
    pub(super) fn unlisted_owner(&self, page: u64, tid: Tid) -> Owner {
        match &self.points.race {
            Some(r) if r.listed(page) => Owner::Shared,
            _ => Owner::Thread(tid),
        }
    }

    /// The monitor reads or writes `len` bytes at `va` for the running
    /// thread (a system call's buffer): an access of that thread to each
    /// page, which it takes when ordered after its owner (a page made
    /// present now is its own, at its clock now); unordered, the page
    /// traps from now on as after a fault.
    pub(super) fn race_monitor_access(&mut self, va: u64, len: u64, write: bool) {
        if self.points.race.is_none() || len == 0 {
            return;
        }
        let (pid, tid) = (self.cur_pid(), self.cur_tid());
        let last = page_down(va.saturating_add(len - 1));
        let mut page = page_down(va);
        while page <= last {
            let owner = self.points.owners.get(&(pid, page)).copied();
            let r = self.points.race.as_mut().unwrap();
            match owner {
                None if !r.listed(page) => {
                    r.grant(pid, page, tid);
                    self.points.owners.insert((pid, page), Owner::Thread(tid));
                }
                Some(Owner::Thread(t)) if t != tid => {
                    if r.ordered(pid, page, t, tid) || !r.unordered(pid, page, false, write) {
                        r.grant(pid, page, tid);
                        self.points.owners.insert((pid, page), Owner::Thread(tid));
                    } else {
                        self.points.owners.insert((pid, page), Owner::Shared);
                    }
                }
                _ => {}
            }
            page = page.saturating_add(crate::machine::layout::PAGE_SIZE);
            if page == 0 {
                break;
            }
        }
    }

    /// The futex wake of `woken` by the running thread orders them.
    pub(super) fn race_wake(&mut self, woken: Tid) {
        let waker = self.cur_tid();
        if let Some(r) = self.points.race.as_mut() {
            r.wake(waker, woken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: u64 = 0x4000;

    #[test]
    fn a_wake_orders_a_handover_and_nothing_else_does() {
        let mut r = RaceState::new(&[]);
        r.clone_thread(1, 2);
        r.clone_thread(1, 3);
        r.grant(1, PAGE, 2);
        // Thread 3 has seen nothing of 2 since it took the page.
        assert!(!r.ordered(1, PAGE, 2, 3));
        r.wake(2, 3);
        assert!(r.ordered(1, PAGE, 2, 3));
        // What 2 takes after the wake is not ordered before 3.
        r.grant(1, PAGE + 0x1000, 2);
        assert!(!r.ordered(1, PAGE + 0x1000, 2, 3));
    }

    #[test]
    fn an_atomic_releases_to_the_next_atomic_on_the_same_word_only() {
        let mut r = RaceState::new(&[]);
        r.clone_thread(1, 2);
        r.clone_thread(1, 3);
        r.grant(1, PAGE, 2);
        r.atomic(1, 0x9000, 2, None);
        // Another word on the same page: another lock.
        r.atomic(1, 0x9008, 3, None);
        assert!(!r.ordered(1, PAGE, 2, 3));
        r.atomic(1, 0x9000, 3, None);
        assert!(r.ordered(1, PAGE, 2, 3));
    }

    #[test]
    fn probation_confirms_unordered_bytes_and_forgives_readers() {
        let mut r = RaceState::new(&[]);
        r.clone_thread(1, 2);
        r.clone_thread(1, 3);
        r.grant(1, PAGE, 2);
        assert!(r.unordered(1, PAGE, false, true));
        assert_eq!(r.point(1, PAGE + 8, 8, 3, true), Judged::Traps);
        // Other bytes: no race yet; the same bytes, by the other thread: one.
        assert_eq!(r.point(1, PAGE + 16, 8, 2, false), Judged::Traps);
        assert!(r.confirmed().is_empty());
        assert_eq!(r.point(1, PAGE + 12, 4, 2, false), Judged::Traps);
        assert_eq!(r.confirmed(), vec![PAGE]);

        let other = PAGE + 0x1000;
        r.grant(1, other, 2);
        assert!(r.unordered(1, other, false, false));
        for i in 0..PROBATION as u64 - 1 {
            assert_eq!(r.point(1, other + i * 4, 4, 3, false), Judged::Traps);
        }
        assert_eq!(r.point(1, other, 4, 3, false), Judged::Owned);
        // Quiet now: a read that takes it needs no probation; a write does.
        assert!(!r.unordered(1, other, false, false));
        assert!(r.unordered(1, other, false, true));
        assert_eq!(r.confirmed(), vec![PAGE]);
    }

    #[test]
    fn bytes_are_contested_only_once_another_thread_touched_them() {
        let mut r = RaceState::new(&[PAGE]);
        assert!(!r.contested(1, PAGE + 8, 4, 2));
        assert!(!r.contested(1, PAGE + 8, 4, 2));
        // Beside them: not contested; on them: contested, for both threads.
        assert!(!r.contested(1, PAGE + 12, 4, 3));
        assert!(r.contested(1, PAGE + 10, 4, 3));
        assert!(r.contested(1, PAGE + 11, 1, 2));
        // Another page, another process: nothing touched there yet.
        assert!(!r.contested(1, PAGE + 0x1008, 4, 3));
        assert!(!r.contested(2, PAGE + 8, 4, 3));
    }

    #[test]
    fn listed_pages_are_confirmed() {
        let r = RaceState::new(&[PAGE]);
        assert!(r.listed(PAGE + 12));
        assert_eq!(r.confirmed(), vec![PAGE]);
    }
}
