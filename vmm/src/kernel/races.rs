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
use crate::run::Access;
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
    /// Of each owned page: what it held when its owner took it, to tell
    /// the bytes the owner wrote since (`Kernel::race_prior`).
    #[serde(default)]
    before: BTreeMap<(Pid, u64), PageCopy>,
    /// Of each thread: the thread that created it, which its exit orders
    /// (`RaceState::exit_thread`).
    #[serde(default)]
    creators: BTreeMap<Tid, Tid>,
}

/// A page's bytes when its owner took it: most pages are fresh, all zeros.
/// In keyframes, copies are pages of the page store (`blobs::save_page`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "PageCopyRepr", try_from = "PageCopyRepr")]
pub enum PageCopy {
    Zero,
    Bytes(std::sync::Arc<Vec<u8>>),
}

#[derive(Serialize, Deserialize)]
enum PageCopyRepr {
    Zero,
    Bytes(super::blobs::Stored),
}

impl From<PageCopy> for PageCopyRepr {
    fn from(c: PageCopy) -> PageCopyRepr {
        match c {
            PageCopy::Zero => PageCopyRepr::Zero,
            PageCopy::Bytes(b) => PageCopyRepr::Bytes(super::blobs::save_page(&b)),
        }
    }
}

impl TryFrom<PageCopyRepr> for PageCopy {
    type Error = super::blobs::BlobError;
    fn try_from(r: PageCopyRepr) -> Result<PageCopy, Self::Error> {
        Ok(match r {
            PageCopyRepr::Zero => PageCopy::Zero,
            PageCopyRepr::Bytes(s) => PageCopy::Bytes(std::sync::Arc::new(super::blobs::load(s)?)),
        })
    }
}

impl PageCopy {
    fn of(bytes: &[u8]) -> PageCopy {
        if bytes.iter().all(|b| *b == 0) {
            PageCopy::Zero
        } else {
            PageCopy::Bytes(std::sync::Arc::new(bytes.to_vec()))
        }
    }

    fn byte(&self, i: usize) -> u8 {
        match self {
            PageCopy::Zero => 0,
            PageCopy::Bytes(b) => b.get(i).copied().unwrap_or(0),
        }
    }

    /// The byte ranges (offset, length) where `now` differs from the copy,
    /// at most `TOUCHED`: when more, the nearest are merged (a range then
    /// also covers bytes between two written ones).
    fn changed(&self, now: &[u8]) -> Vec<(u64, u64)> {
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (i, b) in now.iter().enumerate() {
            if *b == self.byte(i) {
                continue;
            }
            match ranges.last_mut() {
                Some((off, len)) if *off + *len == i as u64 => *len += 1,
                _ => ranges.push((i as u64, 1)),
            }
        }
        let mut gap = 1;
        while ranges.len() > TOUCHED {
            let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
            for (off, len) in ranges {
                match merged.last_mut() {
                    Some((o, l)) if off - (*o + *l) <= gap => *l = off + len - *o,
                    _ => merged.push((off, len)),
                }
            }
            ranges = merged;
            gap *= 2;
        }
        ranges
    }
}

/// Byte ranges a page remembers its points by (`RaceState::contested`).
const TOUCHED: usize = 64;

/// Bytes a point touched (address, length), the thread that made it and
/// its own epoch then.
type Touched = (u64, u64, Tid, u32);

/// A point made on a page on probation.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Seen {
    tid: Tid,
    addr: u64,
    len: u64,
    write: bool,
    /// The thread's own epoch when it made it.
    epoch: u32,
    /// Not a point: bytes the page's previous owner wrote in its tenure
    /// (told by the page's copy), at the epoch it took the page.
    #[serde(default)]
    prior: bool,
    /// Synchronisation, which never races: an atomic, or a plain access
    /// to a word atomics touched (a relaxed load is a plain `mov`).
    #[serde(default)]
    sync: bool,
}

/// Points a page stays on probation without two threads' unordered
/// accesses to the same bytes (one a write) before it goes back to being
/// owned: a page two threads use different parts of (the tail of one buffer
/// and the head of the next), or only read (a table both read), stops
/// trapping after this many.
pub const PROBATION: usize = 16;

/// An unordered change of owner (`RaceState::unordered`).
#[derive(Debug, Clone, Default)]
pub struct Unordered {
    pub atomic: bool,
    pub write: bool,
    /// The page's owner until now, and the bytes it wrote in its tenure.
    pub owner: Option<Tid>,
    pub prior: Vec<(u64, u64)>,
}

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
        self.creators.insert(child, parent);
        self.tick(parent);
    }

    /// The thread that created `tid`, if it was seen.
    pub fn creator(&self, tid: Tid) -> Option<Tid> {
        self.creators.get(&tid).copied()
    }

    /// A joinable thread ends: `joiner` (its creator, or the nearest one
    /// alive) has seen everything it did. The joiner may call
    /// `pthread_join` after the exit, when no futex wake is left to order
    /// them; what the joiner does after the exit, or after the join,
    /// comes after it either way. The ended thread stays the owner of its
    /// pages: a thread not ordered after it that touches one races it.
    pub fn exit_thread(&mut self, tid: Tid, joiner: Tid) {
        let c = self.clock(tid);
        self.join(joiner, &c);
    }

    /// `tid` took the page now, and it held `bytes` then.
    pub fn keep(&mut self, pid: Pid, page: u64, bytes: Option<&[u8]>) {
        let key = (pid, page_down(page));
        match bytes {
            Some(b) => self.before.insert(key, PageCopy::of(b)),
            None => self.before.remove(&key),
        };
    }

    /// The bytes of the page (absolute ranges) its owner wrote since it
    /// took it, from its copy, which this uses up; none without a copy.
    pub fn written(&mut self, pid: Pid, page: u64, now: Option<&[u8]>) -> Vec<(u64, u64)> {
        let page = page_down(page);
        match (self.before.remove(&(pid, page)), now) {
            (Some(copy), Some(now)) => copy
                .changed(now)
                .into_iter()
                .map(|(off, len)| (page + off, len))
                .collect(),
            _ => Vec::new(),
        }
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
    ///
    /// `prior` are the bytes the owner wrote in its tenure (`written`):
    /// the probation starts with them, so a thread that reads or writes
    /// them before the owner touches the page again (an owner that ended,
    /// or moved on) still confirms the race.
    pub fn unordered(&mut self, pid: Pid, page: u64, u: Unordered) -> bool {
        let page = page_down(page);
        if !u.write && self.quiet.contains(&(pid, page)) {
            return false;
        }
        self.quiet.remove(&(pid, page));
        if u.atomic || self.pages.contains(&page) {
            self.confirmed.insert(page);
            self.probation.remove(&(pid, page));
        } else if !self.confirmed.contains(&page) {
            let seen = match u.owner {
                Some(owner) => {
                    let epoch = self
                        .grants
                        .get(&(pid, page))
                        .and_then(|g| g.get(&owner).copied())
                        .unwrap_or(0);
                    u.prior
                        .iter()
                        .map(|&(addr, len)| Seen {
                            tid: owner,
                            addr,
                            len,
                            write: true,
                            epoch,
                            prior: true,
                            sync: false,
                        })
                        .collect()
                }
                None => Vec::new(),
            };
            self.probation.insert((pid, page), seen);
        }
        true
    }

    /// Whether `len` bytes at `addr` touch a word an atomic touched (at
    /// most 8 bytes from its address): synchronisation, as the lock word,
    /// or a condition variable's sequence read with a plain `mov`.
    fn sync_word(&self, pid: Pid, addr: u64, len: u64) -> bool {
        let from = (pid, addr.saturating_sub(7));
        let to = (pid, addr.saturating_add(len.max(1)));
        self.sync.range(from..to).next().is_some()
    }

    /// A point on a trapping page: on probation, whether two threads'
    /// unordered accesses met on the same bytes, one writing (the page then
    /// traps for good), or the probation is over (the page is `tid`'s).
    /// Atomics and accesses to their words are synchronisation: they
    /// order (`atomic`), count towards the probation, and never race.
    pub fn point(
        &mut self,
        pid: Pid,
        (addr, len): (u64, u64),
        tid: Tid,
        write: bool,
        atomic: bool,
    ) -> Judged {
        let key = (pid, page_down(addr));
        if !self.probation.contains_key(&key) {
            return Judged::Traps;
        }
        let mine = self.clock(tid);
        let len = len.max(1);
        let sync = atomic || self.sync_word(pid, addr, len);
        let seen = &self.probation[&key];
        let races = !sync
            && seen.iter().any(|s| {
                s.tid != tid
                    && !s.sync
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
            write: write && !sync,
            epoch,
            prior: false,
            sync,
        });
        if seen.iter().filter(|s| !s.prior).count() < PROBATION {
            return Judged::Traps;
        }
        if let Some(seen) = self.probation.remove(&key) {
            if seen.iter().all(|s| !s.write || s.prior) {
                self.quiet.insert(key);
            }
        }
        self.grant(pid, key.1, tid);
        Judged::Owned
    }

    /// A point by `tid` on `len` bytes at `addr`: whether another thread's
    /// point touched any of them with nothing ordering the two (they are
    /// contended for). A thread whose points on a racing page meet no other
    /// thread's bytes unordered for a while is using its own data there
    /// (a compressor's state beside the arena's lock), or data a lock on
    /// the page orders: `memory_point` gives it the page back. An atomic,
    /// or an access to a word atomics touched, is synchronisation: never
    /// contended, and not remembered.
    pub fn contested(&mut self, pid: Pid, addr: u64, len: u64, tid: Tid, atomic: bool) -> bool {
        let len = len.max(1);
        if atomic || self.sync_word(pid, addr, len) {
            return false;
        }
        let mine = self.clock(tid);
        let epoch = mine.get(&tid).copied().unwrap_or(1);
        let seen = self.touched.entry((pid, page_down(addr))).or_default();
        let end = addr.saturating_add(len);
        let met = seen.iter().any(|(a, l, t, e)| {
            *t != tid
                && *a < end
                && addr < a.saturating_add(*l)
                && mine.get(t).copied().unwrap_or(0) < *e
        });
        seen.retain(|(a, l, _, _)| (*a, *l) != (addr, len));
        if seen.len() >= TOUCHED {
            seen.remove(0);
        }
        seen.push((addr, len, tid, epoch));
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
        self.before.retain(|(p, _), _| *p != pid);
    }
}

impl Kernel<'_> {
    /// The owner a page gets when `tid` first makes it present (at its
    /// clock now): `tid`, or `Shared` when race-directed points list it.
    pub(super) fn first_owner(&mut self, pid: Pid, page: u64, tid: Tid) -> Owner {
        let owner = self.unlisted_owner(page, tid);
        if let Owner::Thread(_) = owner {
            self.race_grant(pid, page, tid);
        }
        owner
    }

    /// The bytes of the present page at `page` of `pid` (None: not present).
    fn page_now(&mut self, pid: Pid, page: u64) -> Option<&[u8]> {
        let pt = self.procs.get(&pid)?.mm.pt;
        let (frame, _) = pt.lookup(&mut self.m.ram, page_down(page))?;
        self.m
            .ram
            .slice(frame, crate::machine::layout::PAGE_SIZE as usize)
            .ok()
    }

    /// `tid` takes the page now (at its clock now), and the page's copy is
    /// what it holds now, to tell later what `tid` wrote.
    pub(super) fn race_grant(&mut self, pid: Pid, page: u64, tid: Tid) {
        if self.points.race.is_none() {
            return;
        }
        let now = self.page_now(pid, page).map(<[u8]>::to_vec);
        let Some(r) = self.points.race.as_mut() else {
            return;
        };
        r.grant(pid, page, tid);
        r.keep(pid, page, now.as_deref());
    }

    /// Whether `tid`'s access to the page now is ordered after `owner`'s
    /// tenure (`RaceState::ordered`); false without race-directed points.
    pub(super) fn race_ordered(&self, pid: Pid, page: u64, owner: Tid, tid: Tid) -> bool {
        (self.points.race.as_ref()).is_some_and(|r| r.ordered(pid, page, owner, tid))
    }

    /// A change of owner of the page, from `owner` to the running thread,
    /// by a plain access (`write`) not ordered after the owner's tenure:
    /// whether it is a point (`RaceState::unordered`), told the bytes the
    /// owner wrote since it took the page.
    pub(super) fn race_unordered(&mut self, pid: Pid, page: u64, owner: Tid, write: bool) -> bool {
        let now = self.page_now(pid, page).map(<[u8]>::to_vec);
        let Some(r) = self.points.race.as_mut() else {
            return false;
        };
        let mut prior = r.written(pid, page, now.as_deref());
        // A running owner's later points on the page are judged as they
        // come; what it wrote before is not counted, since its release of
        // a lock on a page it owned made no point (main filling a buffer,
        // then unlocking the mutex a consumer takes on a page the consumer
        // takes in order first). An ended owner makes no more points: its
        // writes are all there is to judge the page's next accesses by.
        if self.threads.contains_key(&owner) {
            prior.clear();
        }
        let u = super::races::Unordered {
            atomic: false,
            write,
            owner: Some(owner),
            prior,
        };
        r.unordered(pid, page, u)
    }

    /// Race-directed, a fault of the running thread at `addr` on a page
    /// `owner` holds (or that traps), by an `access` of the instruction at
    /// `rip`: true when the page is handed over in order (no point), false
    /// when the access is a point. A plain access unordered after the
    /// owner's tenure puts the page on probation (`RaceState::unordered`).
    /// An atomic of the C library's synchronisation (`sync_code`: a mutex,
    /// a condition variable, malloc's arena lock) is a handover too: in
    /// order, none; otherwise a point and a probation, where the lock's
    /// own accesses order the rest and do not race. Any other atomic (a
    /// lock-free variable, the program's own lock, where the interleaving
    /// is the question) makes the page trap for good.
    pub(super) fn race_fault(
        &mut self,
        pid: Pid,
        addr: u64,
        owner: Option<Owner>,
        access: Access,
        rip: u64,
    ) -> bool {
        if self.points.race.is_none() {
            return false;
        }
        let (page, tid) = (page_down(addr), self.cur_tid());
        let from = match owner {
            Some(Owner::Thread(t)) => Some(t),
            _ => None,
        };
        let atomic = access == Access::Atomic;
        match from {
            Some(t) if !atomic => {
                let write = access != Access::Read;
                return self.race_ordered(pid, page, t, tid)
                    || !self.race_unordered(pid, page, t, write);
            }
            Some(t) if self.sync_code(pid, rip) => {
                let ordered = self.race_ordered(pid, page, t, tid);
                if !ordered {
                    self.race_unordered(pid, page, t, true);
                }
                // The owner's last release there (its unlock, which made
                // no point) is taken to be its latest, in order or not.
                if let Some(r) = self.points.race.as_mut() {
                    r.atomic(pid, addr, tid, Some(t));
                }
                return ordered;
            }
            _ => {}
        }
        if let (Some(r), true) = (self.points.race.as_mut(), atomic) {
            if from.is_some() {
                let u = Unordered {
                    atomic: true,
                    write: true,
                    ..Default::default()
                };
                r.unordered(pid, page, u);
            }
            r.atomic(pid, addr, tid, from);
        }
        false
    }

    /// Thread `tid` ends: it stays the owner of its pages, and the nearest
    /// of its creators still running has seen all it did (a join).
    pub(super) fn race_exit(&mut self, tid: Tid) {
        let Some(r) = self.points.race.as_mut() else {
            return;
        };
        let mut joiner = r.creator(tid);
        while let Some(j) = joiner.filter(|j| !self.threads.contains_key(j)) {
            joiner = r.creator(j);
        }
        if let Some(j) = joiner {
            r.exit_thread(tid, j);
        }
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
            let listed = (self.points.race.as_ref()).is_some_and(|r| r.listed(page));
            match owner {
                None if !listed => {
                    self.race_grant(pid, page, tid);
                    self.points.owners.insert((pid, page), Owner::Thread(tid));
                }
                Some(Owner::Thread(t)) if t != tid => {
                    if self.race_ordered(pid, page, t, tid)
                        || !self.race_unordered(pid, page, t, write)
                    {
                        self.race_grant(pid, page, tid);
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

    fn plain(write: bool) -> Unordered {
        Unordered {
            write,
            ..Default::default()
        }
    }

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
        assert!(r.unordered(1, PAGE, plain(true)));
        assert_eq!(r.point(1, (PAGE + 8, 8), 3, true, false), Judged::Traps);
        // Other bytes: no race yet; the same bytes, by the other thread: one.
        assert_eq!(r.point(1, (PAGE + 16, 8), 2, false, false), Judged::Traps);
        assert!(r.confirmed().is_empty());
        assert_eq!(r.point(1, (PAGE + 12, 4), 2, false, false), Judged::Traps);
        assert_eq!(r.confirmed(), vec![PAGE]);

        let other = PAGE + 0x1000;
        r.grant(1, other, 2);
        assert!(r.unordered(1, other, plain(false)));
        for i in 0..PROBATION as u64 - 1 {
            assert_eq!(
                r.point(1, (other + i * 4, 4), 3, false, false),
                Judged::Traps
            );
        }
        assert_eq!(r.point(1, (other, 4), 3, false, false), Judged::Owned);
        // Quiet now: a read that takes it needs no probation; a write does.
        assert!(!r.unordered(1, other, plain(false)));
        assert!(r.unordered(1, other, plain(true)));
        assert_eq!(r.confirmed(), vec![PAGE]);
    }

    #[test]
    fn an_ended_owners_writes_race_a_thread_not_ordered_after_them() {
        let mut r = RaceState::new(&[]);
        r.clone_thread(1, 2);
        r.clone_thread(1, 3);
        r.grant(1, PAGE, 2);
        let mut page = vec![7u8; 4096];
        r.keep(1, PAGE, Some(&page));
        // Thread 2 writes bytes 8..16 and 100, then ends; 1 joins it.
        page[8..16].fill(1);
        page[100] = 1;
        r.exit_thread(2, 1);
        assert!(r.ordered(1, PAGE, 2, 1));
        assert!(!r.ordered(1, PAGE, 2, 3));
        let prior = r.written(1, PAGE, Some(&page));
        assert_eq!(prior, vec![(PAGE + 8, 8), (PAGE + 100, 1)]);
        let u = Unordered {
            owner: Some(2),
            prior,
            ..plain(false)
        };
        assert!(r.unordered(1, PAGE, u));
        // Thread 3 reads bytes 2 never wrote, then one it wrote.
        assert_eq!(r.point(1, (PAGE + 200, 8), 3, false, false), Judged::Traps);
        assert!(r.confirmed().is_empty());
        assert_eq!(r.point(1, (PAGE + 100, 1), 3, false, false), Judged::Traps);
        assert_eq!(r.confirmed(), vec![PAGE]);
    }

    #[test]
    fn a_copy_tells_at_most_touched_ranges() {
        let copy = PageCopy::of(&[0u8; 4096]);
        assert!(matches!(copy, PageCopy::Zero));
        let mut now = vec![0u8; 4096];
        for i in (0..4096).step_by(8) {
            now[i] = 1;
        }
        let ranges = copy.changed(&now);
        assert!(ranges.len() <= TOUCHED, "{}", ranges.len());
        // Every written byte is in a range.
        for i in (0..4096u64).step_by(8) {
            assert!(ranges.iter().any(|(o, l)| (*o..o + l).contains(&i)));
        }
    }

    #[test]
    fn bytes_are_contested_only_once_another_thread_touched_them() {
        let mut r = RaceState::new(&[PAGE]);
        r.clone_thread(1, 2);
        r.clone_thread(1, 3);
        assert!(!r.contested(1, PAGE + 8, 4, 2, false));
        assert!(!r.contested(1, PAGE + 8, 4, 2, false));
        // Beside them: not contested; on them: contested, for both threads.
        assert!(!r.contested(1, PAGE + 12, 4, 3, false));
        assert!(r.contested(1, PAGE + 10, 4, 3, false));
        assert!(r.contested(1, PAGE + 11, 1, 2, false));
        // Another page, another process: nothing touched there yet.
        assert!(!r.contested(1, PAGE + 0x1008, 4, 3, false));
        assert!(!r.contested(2, PAGE + 8, 4, 3, false));
        // Ordered after what 2 did (a wake): not contested.
        r.wake(2, 3);
        assert!(!r.contested(1, PAGE + 11, 1, 3, false));
        // An atomic, and the bytes of its word: synchronisation.
        r.atomic(1, PAGE + 64, 2, None);
        assert!(!r.contested(1, PAGE + 64, 4, 3, false));
        assert!(!r.contested(1, PAGE + 64, 4, 2, true));
    }

    #[test]
    fn listed_pages_are_confirmed() {
        let r = RaceState::new(&[PAGE]);
        assert!(r.listed(PAGE + 12));
        assert_eq!(r.confirmed(), vec![PAGE]);
    }
}
