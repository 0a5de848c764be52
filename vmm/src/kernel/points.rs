//! Memory scheduling points (`--points memory`): every access to a page more
//! than one thread has touched is an exit, and so a step at which the
//! schedule may hand the CPU to another thread.
//!
//! Which pages are shared is learned as the run goes, from its own history:
//!
//! - Each writable data page of a process has an owner: the thread that
//!   first touched it, or `Shared` once a second thread has.
//! - Only the running thread's own pages are user-accessible. At every switch
//!   the monitor walks the present pages of the process and takes ring-3
//!   access (the PTE's U bit) away from every writable data page the incoming
//!   thread does not own, then drops KVM's cached translations (a host-side
//!   PTE edit is not seen otherwise). Its own pages it gives back.
//! - A thread touching a page it cannot reach faults (#PF, present). A page
//!   with no owner (never attributed, or its owner exited) becomes its own,
//!   silently. A page of another thread, or a shared one, becomes `Shared`
//!   and the access is a point: recorded as an `Access` event, then
//!   completed when the thread next runs (`Kernel::run_guest`).
//! - Completing an access: the monitor gives the page back to ring 3 (a
//!   host-side PTE write that grants access needs no flush), sets RFLAGS.TF,
//!   and resumes. The instruction completes; its #DB goes to the in-guest
//!   handler (`machine::trampoline::debug_handler`), which clears U in the
//!   PTE itself (a guest ring-0 PTE write, which KVM sees) and returns to
//!   ring 3: one exit per shared access. An instruction that needs more than
//!   one hidden page (a page-crossing access, `movs` between two shared
//!   pages) exits at its #DB instead, and the monitor re-protects its pages.
//!
//! - At `clone`, every data page the creator has touched but its own stack
//!   becomes shared, so that the new thread's first window already has
//!   points (and a creator spinning on a flag yields). Pages faulted in
//!   afterwards belong to the thread that touched them first.
//!
//! Code and read-only pages never trap (nothing races on them), nor do a
//! thread's own stack and TLS: at `clone` the new thread owns the pages
//! around its thread pointer (glibc and musl put its TCB there, which its
//! creator wrote). A single-threaded process never switches, so it pays
//! nothing. The state is part of the kernel's, so keyframes carry it.

use super::mm::{page_down, Prot};
use super::task::{Pid, Tid};
use super::Kernel;
use crate::machine::layout::{MONITOR_END, PAGE_SIZE, USER_END};
use crate::machine::tsc::Trap;
use crate::machine::{insn, Exit};
use crate::run::{Access, EventKind};
use crate::schedule::Made;
use crate::EngineError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Points in a row (reads and atomics, without a system call or a plain
/// write between them) after which schedule 0 lets the other threads run: a
/// thread spinning on a shared flag or lock word must let its writer run.
pub const SPIN_POINTS: u32 = 64;

/// Points in a row one thread makes on a shared page of its own stack, no
/// other thread's between them, after which a write of that thread takes
/// the page back as its own (it stops trapping for it; the next access of
/// another thread makes it shared again, and is a point). Only a write
/// takes it: a thread spinning on a flag by reading it keeps making points,
/// and yields. Race-directed points (`races.rs`) take any page so, when
/// none of the points was an atomic or on bytes another thread touched.
pub const OWN_POINTS: u32 = 32;

/// Pages around a new thread's thread pointer that it owns from the start.
const TLS_PAGES_BELOW: u64 = 2;
const TLS_PAGES_ABOVE: u64 = 1;

const PF_PRESENT: u64 = 1;
const PF_WRITE: u64 = 2;
const VECTOR_DEBUG: u8 = crate::machine::trampoline::VECTOR_DEBUG;

/// Who has touched a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Owner {
    Thread(Tid),
    Shared,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MemPoints {
    /// Memory points are on (the manifest says `points: memory`).
    pub on: bool,
    /// Owner of each writable data page that has one: (process, page).
    pub(super) owners: BTreeMap<(Pid, u64), Owner>,
    /// A thread's access at these pages waits to complete when it next runs.
    pending: Option<(Tid, Vec<u64>)>,
    /// Pages open to ring 3 for the instruction in flight.
    armed: Vec<u64>,
    /// Points in a row of the running thread: reads and atomics, without a
    /// system call or a plain write.
    pub streak: u32,
    /// Of each shared page: the thread that made the last point on it, and
    /// how many it has made in a row, no other thread's between.
    #[serde(default)]
    runs: BTreeMap<(Pid, u64), (Tid, u32)>,
    /// Of each shared page: the address of its run's last point, and how
    /// many of the run's last points were each at a higher address than
    /// the one before (a scan, which reads no byte twice: not a spin).
    #[serde(default)]
    scans: BTreeMap<(Pid, u64), (u64, u32)>,
    /// What the step being served is (PCT counts system calls and some accesses).
    #[serde(default)]
    pub made: Made,
    /// Race-directed points (`--points races`): which pages trap is judged
    /// at each change of owner (`races.rs`); None for `--points memory`.
    #[serde(default)]
    pub race: Option<super::races::RaceState>,
}

/// Whether accesses to pages of this protection can race: data that can be
/// written. Code never traps (a fetch would be a point).
fn traps(prot: Prot) -> bool {
    prot.read && prot.write && !prot.exec
}

impl MemPoints {
    pub fn new(on: bool) -> MemPoints {
        MemPoints {
            on,
            ..Default::default()
        }
    }

    /// The points a manifest asks for.
    pub fn of(points: crate::run::Points, race_pages: &[u64]) -> MemPoints {
        MemPoints {
            on: !points.is_syscalls(),
            race: (points == crate::run::Points::Races)
                .then(|| super::races::RaceState::new(race_pages)),
            ..Default::default()
        }
    }

    /// The pages of the access of `tid` that waits to complete when it
    /// next runs (a point made, its instruction not yet run).
    pub fn pending_pages(&self, tid: Tid) -> &[u64] {
        match &self.pending {
            Some((t, pages)) if *t == tid => pages,
            _ => &[],
        }
    }

    /// Pages known shared, for reports and tests.
    pub fn shared_pages(&self) -> usize {
        self.owners
            .values()
            .filter(|o| **o == Owner::Shared)
            .count()
    }
}

impl Kernel<'_> {
    /// Runs the guest to its next exit that is a step, completing memory
    /// points on the way. Every way of running the guest goes through here,
    /// inside a `trap` its caller holds until it returns (`machine::tsc`).
    pub fn run_guest(&mut self, trap: &Trap) -> Result<Exit, EngineError> {
        self.points.made = Made::Other;
        loop {
            self.arm_pending();
            let exit = self.m.run(trap)?;
            if exit == Exit::Syscall {
                self.points.streak = 0;
                self.points.made = Made::Syscall;
            }
            if self.points.armed.is_empty() {
                return Ok(exit);
            }
            let one = self.points.armed.len() == 1;
            if one && !self.m.point_armed() {
                // The handler re-protected the page: the access completed.
                self.points.armed.clear();
                return Ok(exit);
            }
            if !one && matches!(exit, Exit::Exception { vector, .. } if vector == VECTOR_DEBUG) {
                // Several pages: the #DB came to the monitor. Part of the point, not a step.
                let pages = std::mem::take(&mut self.points.armed);
                self.hide(&pages)?;
                if self.m.debug_exits() {
                    // A debugger single-stepping: the #DB ends its step too.
                    return Ok(exit);
                }
                self.m.disarm_point();
                continue;
            }
            // The instruction stopped before completing (a fault on another
            // page, a timeout): undo, and complete it when the thread runs again.
            let pages = std::mem::take(&mut self.points.armed);
            self.hide(&pages)?;
            self.m.disarm_point();
            let tid = self.cur_tid();
            self.points.pending = Some((tid, pages));
            return Ok(exit);
        }
    }

    /// Opens the pages of the running thread's pending access for one instruction.
    fn arm_pending(&mut self) {
        let tid = self.cur_tid();
        if !matches!(&self.points.pending, Some((t, _)) if *t == tid) {
            return;
        }
        let (_, pages) = self.points.pending.take().unwrap();
        if self.perform_access(&pages) {
            return;
        }
        let pid = self.cur_pid();
        let pt = self.procs[&pid].mm.pt;
        let mut armed = Vec::new();
        for page in pages {
            // Unmapped meanwhile: the instruction faults again, as it should.
            if pt.user_access(&mut self.m.ram, page).is_some() {
                pt.set_user_access(&mut self.m.ram, page, true);
                armed.push(page);
            }
        }
        match armed.as_slice() {
            [] => {}
            [page] => {
                let pte = pt.leaf_of_present(&mut self.m.ram, *page);
                self.m.arm_point(pte);
            }
            _ => self.m.arm_point(None),
        }
        self.points.armed = armed;
    }

    /// Completes the running thread's access in its place when the
    /// instruction is a plain move within one page of `pages`: the monitor
    /// loads or stores the bytes, writes the register and moves rip past it,
    /// and the page stays hidden. Same effect as running it, without the
    /// in-guest #DB handler, whose emulated PTE write and `iretq` cost more
    /// than the exit itself on PVM (docs/design.md). False (nothing done)
    /// for every other instruction, and while a debugger steps or watches
    /// (`debug_exits`) or the program's own TF is set: they need it run.
    fn perform_access(&mut self, pages: &[u64]) -> bool {
        if self.m.debug_exits() || self.m.regs().rflags & crate::machine::regs::RFLAGS_TF != 0 {
            return false;
        }
        let regs = self.m.regs();
        let Ok(bytes) = self.read_user_some(regs.rip, 15) else {
            return false;
        };
        let at = insn::AddrRegs {
            regs,
            fs_base: self.m.fs_base(),
            gs_base: self.m.gs_base(),
        };
        let Some(mv) = insn::plain_move(&bytes, regs.rip, &at) else {
            return false;
        };
        let last = mv.addr.wrapping_add(mv.size as u64 - 1);
        if page_down(mv.addr) != page_down(last) || !pages.contains(&page_down(mv.addr)) {
            return false;
        }
        let mut new = regs;
        match mv.what {
            insn::Move::Load { dst, extend } => {
                let Ok(b) = self.read_user(mv.addr, mv.size) else {
                    return false;
                };
                let mut word = [0u8; 8];
                word[..mv.size].copy_from_slice(&b);
                if !insn::complete_load(&mut new, dst, extend, mv.size, u64::from_le_bytes(word)) {
                    return false;
                }
            }
            insn::Move::Store { value } => {
                let b = value.to_le_bytes();
                if self.write_user(mv.addr, &b[..mv.size]).is_err() {
                    return false;
                }
            }
        }
        new.rip = regs.rip.wrapping_add(mv.len);
        *self.m.regs_mut() = new;
        true
    }

    /// Takes ring-3 access away from the current process's `pages` again.
    fn hide(&mut self, pages: &[u64]) -> Result<(), EngineError> {
        let pid = self.cur_pid();
        let pt = self.procs[&pid].mm.pt;
        let mut hidden = Vec::new();
        for page in pages {
            if pt.set_user_access(&mut self.m.ram, *page, false) {
                hidden.extend(pt.leaf_of_present(&mut self.m.ram, *page));
            }
        }
        self.hidden(&hidden)
    }

    /// Makes KVM see that the pages whose entries are at `ptes` lost ring-3
    /// access: the hide routine clears them again from guest ring 0 on the
    /// next entry (a few emulated instructions each), or, when its list is
    /// full, the memory slot is re-registered (which waits for an RCU grace
    /// period: 8 ms and more on a loaded host).
    fn hidden(&mut self, ptes: &[u64]) -> Result<(), EngineError> {
        if ptes.is_empty() || self.m.hide_on_entry(ptes) {
            return Ok(());
        }
        self.m.flush_tlb()
    }

    /// A #PF from ring 3 that memory points explain: a page hidden from the
    /// running thread. True when handled (the thread goes on, or waits to
    /// complete its access as a point).
    pub(super) fn memory_point(&mut self, error_code: u64, cr2: u64) -> bool {
        if !self.points.on || error_code & PF_PRESENT == 0 {
            return false;
        }
        let (pid, tid, page) = (self.cur_pid(), self.cur_tid(), page_down(cr2));
        let p = &self.procs[&pid];
        if !p.mm.vma_at(cr2).is_some_and(|(_, v)| traps(v.prot)) {
            return false;
        }
        let pt = p.mm.pt;
        if pt.user_access(&mut self.m.ram, page) != Some(false) {
            return false;
        }
        let rip = self.m.regs().rip;
        let owner = self.points.owners.get(&(pid, page)).copied();
        match owner {
            None if self.first_owner(pid, page, tid) != Owner::Shared => {
                self.points.owners.insert((pid, page), Owner::Thread(tid));
                pt.set_user_access(&mut self.m.ram, page, true);
                return true;
            }
            Some(Owner::Thread(t)) if t == tid => {
                pt.set_user_access(&mut self.m.ram, page, true);
                return true;
            }
            _ => {}
        }
        let (size, access) = self.decode_access(rip, error_code);
        if self.race_fault(pid, cr2, owner, access, rip) {
            // Handed over in order: the page is the new thread's, no point.
            self.race_grant(pid, page, tid);
            self.points.owners.insert((pid, page), Owner::Thread(tid));
            pt.set_user_access(&mut self.m.ram, page, true);
            return true;
        }
        // On probation and no race seen in its points: the page is the thread's again.
        let released = self.points.race.as_mut().is_some_and(|r| {
            let write = access != Access::Read;
            let atomic = access == Access::Atomic;
            r.point(pid, (cr2, u64::from(size)), tid, write, atomic) == super::races::Judged::Owned
        });
        // Race-directed: an atomic, or bytes another thread's points
        // touched, are what threads contend for; the run starts again there.
        let atomic = access == Access::Atomic;
        let sync = atomic && self.points.race.is_some() && self.sync_code(pid, rip);
        let contended = self.points.race.as_mut().is_some_and(|r| {
            (atomic && !sync) || r.contested(pid, cr2, u64::from(size), tid, atomic)
        });
        let race = self.points.race.is_some();
        let run = self.points.runs.entry((pid, page)).or_insert((tid, 0));
        if run.0 != tid || contended {
            *run = (tid, 0);
        }
        run.1 += 1;
        let count = run.1;
        let scan = self.points.scans.entry((pid, page)).or_insert((cr2, 0));
        let rising = count > 1 && !atomic && cr2 > scan.0;
        *scan = (cr2, if rising { scan.1 + 1 } else { 1 });
        let scanned = scan.1 >= OWN_POINTS;
        // Seen to use the page alone for a while: it is its own again. With
        // memory points only a page of its stack: a thread that took back a
        // page of data it then spins on, reading a flag another thread will
        // set, would make no point and never yield. Race-directed, a run
        // that met no other thread's bytes is the thread's own data beside
        // what races (the next thread to touch the page is judged again),
        // taken at a write, or after a scan of `OWN_POINTS` reads each
        // above the last (libbz2 reading its input block): a spin reads its
        // flag again, so a scan is not one.
        let own = released
            || race && scanned
            || count >= OWN_POINTS
                && access == Access::Write
                && (race || {
                    let rsp = self.m.regs().rsp;
                    self.procs[&pid]
                        .mm
                        .vma_at(rsp)
                        .is_some_and(|(start, v)| (start..v.end).contains(&page))
                });
        if own {
            self.points.runs.remove(&(pid, page));
            self.points.scans.remove(&(pid, page));
            self.race_grant(pid, page, tid);
        }
        let owner = if own {
            Owner::Thread(tid)
        } else {
            Owner::Shared
        };
        self.points.owners.insert((pid, page), owner);
        self.points.made = Made::Access {
            addr: cr2,
            len: u64::from(size),
        };
        let at = self.describe_in(pid, rip);
        self.emit(EventKind::Access {
            pc: rip,
            addr: cr2,
            size,
            access,
            at,
        });
        // A plain write ends a spin: counting only reads and atomics lets a
        // thread spinning on a flag or a lock word yield, and never splits a
        // thread's own read-modify-write sequence under schedule 0.
        if access == Access::Write {
            self.points.streak = 0;
        } else {
            self.points.streak += 1;
        }
        if own {
            // Still a point (the schedule may switch here); the access then
            // completes as any access to the thread's own page does.
            pt.set_user_access(&mut self.m.ram, page, true);
            return true;
        }
        match &mut self.points.pending {
            Some((t, pages)) if *t == tid => {
                if !pages.contains(&page) {
                    pages.push(page);
                }
            }
            pending => *pending = Some((tid, vec![page])),
        }
        true
    }

    /// The access the instruction at `rip` makes: its size, and whether it
    /// reads, writes or is atomic (from the #PF's error code when the
    /// instruction cannot be read or decoded).
    fn decode_access(&mut self, rip: u64, error_code: u64) -> (u32, Access) {
        let fallback = if error_code & PF_WRITE != 0 {
            Access::Write
        } else {
            Access::Read
        };
        // Up to 15 bytes, not past the end of a mapping.
        let bytes = self.read_user_some(rip, 15).unwrap_or_default();
        let Some(ops) = insn::memory_operands(&bytes, rip, None) else {
            return (0, fallback);
        };
        let Some(mem) = ops.accesses.first() else {
            return (0, fallback);
        };
        let access = match mem {
            _ if ops.atomic => Access::Atomic,
            m if m.write => Access::Write,
            m if m.read => Access::Read,
            _ => fallback,
        };
        (mem.size as u32, access)
    }

    /// Before `to` runs: only its own pages of its process stay open to ring 3.
    pub(super) fn points_switch(&mut self, from: Option<Tid>, to: Tid) -> Result<(), EngineError> {
        self.points.streak = 0;
        if !self.points.on {
            return Ok(());
        }
        let pid = self.threads[&to].pid;
        let from = from.filter(|f| self.threads.get(f).is_some_and(|t| t.pid == pid));
        let pt = self.procs[&pid].mm.pt;
        let mut hidden = Vec::new();
        for page in pt.present(&self.m.ram, MONITOR_END, USER_END) {
            let mm = &self.procs[&pid].mm;
            if !mm.vma_at(page).is_some_and(|(_, v)| traps(v.prot)) {
                continue;
            }
            let owner = match self.points.owners.get(&(pid, page)) {
                Some(o) => Some(*o),
                // Made present while `from` ran (by it, or the monitor for it).
                None => from.map(|f| self.unlisted_owner(page, f)),
            };
            if let Some(o) = owner {
                self.points.owners.insert((pid, page), o);
            }
            // Only a page the outgoing thread reached since its grant can
            // have a translation KVM caches: the others are hidden by the
            // edit alone, not by the hide routine (one emulated write each;
            // a compressor of pbzip2 owns hundreds of pages and reaches few
            // between two switches).
            if owner == Some(Owner::Thread(to)) {
                pt.grant_user(&mut self.m.ram, page);
            } else if pt.revoke_user(&mut self.m.ram, page) == Some(true) {
                hidden.extend(pt.leaf_of_present(&mut self.m.ram, page));
            }
        }
        self.hidden(&hidden)
    }

    /// At `clone`: every data page the creator has touched, but its own
    /// stack, is shared from now on (and trapping, at once), since the new
    /// thread may reach any of it; the new thread owns the pages around its
    /// thread pointer (TCB, static TLS), which its creator wrote.
    ///
    /// Without the first part a thread would run free on a page until a
    /// second thread touched it: a creator spinning on a flag its new thread
    /// has yet to set would never yield, and the first window of a race
    /// would have no points.
    pub(super) fn points_clone(&mut self, parent: Tid, child: Tid, pid: Pid, tls: u64) {
        if !self.points.on {
            return;
        }
        let rsp = self.m.regs().rsp;
        let race = self.points.race.as_mut();
        // Race-directed: the child has seen all its creator did; the
        // creator's pages trap only if a later change of owner is unordered.
        let share = race.is_none();
        if let Some(r) = race {
            r.clone_thread(parent, child);
        }
        let mm = &self.procs[&pid].mm;
        let pt = mm.pt;
        let stack = mm.vma_at(rsp).map(|(s, v)| s..v.end);
        let mut hidden = Vec::new();
        for page in pt
            .present(&self.m.ram, MONITOR_END, USER_END)
            .into_iter()
            .filter(|_| share)
        {
            if stack.as_ref().is_some_and(|s| s.contains(&page))
                || !mm.vma_at(page).is_some_and(|(_, v)| traps(v.prot))
            {
                continue;
            }
            let owner = self
                .points
                .owners
                .entry((pid, page))
                .or_insert(Owner::Shared);
            if *owner == Owner::Thread(parent) {
                *owner = Owner::Shared;
            }
            if *owner == Owner::Shared && pt.set_user_access(&mut self.m.ram, page, false) {
                hidden.extend(pt.leaf_of_present(&mut self.m.ram, page));
            }
        }
        if tls != 0 {
            let at = page_down(tls);
            let first = at.saturating_sub(TLS_PAGES_BELOW * PAGE_SIZE);
            let last = at.saturating_add(TLS_PAGES_ABOVE * PAGE_SIZE);
            for page in (first..=last).step_by(PAGE_SIZE as usize) {
                if mm.vma_at(page).is_some_and(|(_, v)| traps(v.prot)) {
                    self.points.owners.insert((pid, page), Owner::Thread(child));
                    if let Some(r) = self.points.race.as_mut() {
                        r.grant(pid, page, child);
                    }
                    if pt.set_user_access(&mut self.m.ram, page, false) {
                        hidden.extend(pt.leaf_of_present(&mut self.m.ram, page));
                    }
                }
            }
        }
        if let Err(e) = self.hidden(&hidden) {
            self.engine_failure(e);
        }
    }

    /// A page the running thread just faulted in is its own (or, listed by
    /// race-directed points, shared and hidden: the access, made again,
    /// is a point).
    pub(super) fn points_fresh_page(&mut self, va: u64) {
        if !self.points.on {
            return;
        }
        let (pid, tid, page) = (self.cur_pid(), self.cur_tid(), page_down(va));
        let owner = self.first_owner(pid, page, tid);
        self.points.owners.insert((pid, page), owner);
        if owner == Owner::Shared {
            let pt = self.procs[&pid].mm.pt;
            pt.set_user_access(&mut self.m.ram, page, false);
            let pte: Vec<u64> = pt
                .leaf_of_present(&mut self.m.ram, page)
                .into_iter()
                .collect();
            if let Err(e) = self.hidden(&pte) {
                self.engine_failure(e);
            }
        }
    }

    /// A forked child's pages (copies of its parent's) are its one thread's.
    pub(super) fn points_fork(&mut self, pid: Pid, tid: Tid) {
        if !self.points.on {
            return;
        }
        let mm = &self.procs[&pid].mm;
        for page in mm.pt.present(&self.m.ram, MONITOR_END, USER_END) {
            if mm.vma_at(page).is_some_and(|(_, v)| traps(v.prot)) {
                self.points.owners.insert((pid, page), Owner::Thread(tid));
            }
        }
    }

    /// A process's address space is gone (exit, execve): its pages' owners too.
    pub(super) fn points_forget_process(&mut self, pid: Pid) {
        self.points.owners.retain(|(p, _), _| *p != pid);
        if let Some(r) = self.points.race.as_mut() {
            r.forget_process(pid);
        }
    }

    /// An exited thread's pages have no owner: the next thread to touch one
    /// (glibc reuses thread stacks) takes it.
    pub(super) fn points_forget(&mut self, tid: Tid) {
        if !self.points.on {
            return;
        }
        // Race-directed, an ended thread stays the owner of its pages
        // (`races.rs`): the next thread to touch one is judged against it.
        if self.points.race.is_none() {
            self.points.owners.retain(|_, o| *o != Owner::Thread(tid));
        }
        self.points.runs.retain(|_, (t, _)| *t != tid);
        if matches!(&self.points.pending, Some((t, _)) if *t == tid) {
            self.points.pending = None;
        }
        // The last thread left of its process owns every page: no other
        // thread can touch them (a `clone` shares them again).
        let Some(pid) = self.threads.get(&tid).map(|t| t.pid) else {
            return;
        };
        let left: Vec<Tid> = self.procs[&pid]
            .threads
            .iter()
            .copied()
            .filter(|t| *t != tid)
            .collect();
        let [alone] = left[..] else {
            return;
        };
        for (_, o) in self.points.owners.range_mut((pid, 0)..=(pid, u64::MAX)) {
            *o = Owner::Thread(alone);
        }
        self.points.runs.retain(|(p, _), _| *p != pid);
    }

    /// After a step where the manifest changes the points (a fork's
    /// `--points`): memory points go on or off from the next step.
    pub(super) fn points_change(&mut self) {
        let changes = &self.inputs.manifest.points_after;
        if changes.is_empty() {
            return;
        }
        let step = self.step;
        let Some(&(_, to)) = changes.iter().find(|(s, _)| *s == step) else {
            return;
        };
        let on = !to.is_syscalls();
        if on == self.points.on {
            return;
        }
        let r = if on {
            let pages = &self.inputs.manifest.race_pages;
            let race =
                (to == crate::run::Points::Races).then(|| super::races::RaceState::new(pages));
            self.points_on().map(|()| self.points.race = race)
        } else {
            self.points_off()
        };
        if let Err(e) = r {
            self.engine_failure(e);
        }
    }

    /// Memory points from now on. Who touched which page before is not
    /// known: in a process with more than one thread every data page is
    /// shared but each thread's stack and the pages around its thread
    /// pointer, which are its own (as at `clone`); a single thread owns all
    /// of its process's pages.
    fn points_on(&mut self) -> Result<(), EngineError> {
        self.points.on = true;
        self.points.streak = 0;
        let cur = self.cur_tid();
        let (cur_rsp, cur_fs) = (self.m.regs().rsp, self.m.fs_base());
        for (&pid, p) in &self.procs {
            let mm = &p.mm;
            let mut own: BTreeMap<u64, Tid> = BTreeMap::new();
            for &tid in &p.threads {
                let (rsp, fs) = match self.threads.get(&tid) {
                    _ if tid == cur => (cur_rsp, cur_fs),
                    Some(t) => match &t.ctx {
                        Some(c) => (c.regs.rsp, c.fs_base),
                        None => continue,
                    },
                    None => continue,
                };
                if let Some((start, v)) = mm.vma_at(rsp) {
                    for page in (start..v.end).step_by(PAGE_SIZE as usize) {
                        own.insert(page, tid);
                    }
                }
                if fs != 0 {
                    let at = page_down(fs);
                    let first = at.saturating_sub(TLS_PAGES_BELOW * PAGE_SIZE);
                    let last = at.saturating_add(TLS_PAGES_ABOVE * PAGE_SIZE);
                    for page in (first..=last).step_by(PAGE_SIZE as usize) {
                        own.insert(page, tid);
                    }
                }
            }
            let alone = match p.threads.as_slice() {
                [t] => Some(*t),
                _ => None,
            };
            for page in mm.pt.present(&self.m.ram, MONITOR_END, USER_END) {
                if !mm.vma_at(page).is_some_and(|(_, v)| traps(v.prot)) {
                    continue;
                }
                let owner = match alone.or_else(|| own.get(&page).copied()) {
                    Some(t) => Owner::Thread(t),
                    None => Owner::Shared,
                };
                self.points.owners.insert((pid, page), owner);
            }
        }
        // The running thread keeps only its own pages, as after a switch.
        if !self.threads.contains_key(&cur) {
            return Ok(());
        }
        self.points_switch(None, cur)
    }

    /// System-call points from now on: every page is open to ring 3 again.
    fn points_off(&mut self) -> Result<(), EngineError> {
        self.points = MemPoints::new(false);
        for p in self.procs.values() {
            let mm = &p.mm;
            for page in mm.pt.present(&self.m.ram, MONITOR_END, USER_END) {
                if mm.vma_at(page).is_some_and(|(_, v)| traps(v.prot)) {
                    mm.pt.set_user_access(&mut self.m.ram, page, true);
                }
            }
        }
        self.m.flush_tlb()
    }

    /// Schedule 0 in memory-points mode: after `SPIN_POINTS` points in a row
    /// without a system call, the running thread yields.
    pub(super) fn points_yield(&mut self) -> bool {
        if self.points.on && self.points.streak >= SPIN_POINTS {
            self.points.streak = 0;
            return true;
        }
        false
    }
}
