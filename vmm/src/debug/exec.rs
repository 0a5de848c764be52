//! Running the debugged machine: every exit is first looked at here. Debug
//! traps (the monitor's `int3`s, single steps, watched pages) are served
//! here and are not steps; every other exit goes to the kernel as in the
//! recording.

use super::{DebugError, Op, Position, Session, Stop, Watch, WatchKind, PTE_ADDR};
use crate::kernel::signal::{SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP};
use crate::kernel::task::Tid;
use crate::machine::layout::PAGE_SIZE;
use crate::machine::paging::{PTE_PRESENT, PTE_USER, PTE_WRITE};
use crate::machine::{Exit, Perm};
use crate::record::ExitStatus;
use std::collections::BTreeMap;

/// RFLAGS.TF: a #DB after the next instruction.
const TF: u64 = 1 << 8;
const VEC_DEBUG: u8 = 1;
const VEC_BREAKPOINT: u8 = 3;
const VEC_PAGE_FAULT: u8 = 14;
const PF_PRESENT: u64 = 1;
const PF_WRITE: u64 = 2;
const PF_FETCH: u64 = 16;
const INT3: u8 = 0xcc;

/// How the machine came to be before an instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum How {
    /// An exit was just served (a new span).
    SpanStart,
    /// One instruction was single-stepped.
    Stepped,
    /// An `int3` of the monitor fired.
    Int3,
}

/// About to run the instruction at `pc`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Arrival {
    pub step: u64,
    pub pc: u64,
    /// Its hits since the span began, when counted.
    pub hit: Option<u64>,
    pub tid: Tid,
    pub how: How,
    /// A breakpoint of the user's is there.
    pub user_bp: bool,
}

impl Arrival {
    pub fn is(&self, p: &Position) -> bool {
        self.step == p.step && self.pc == p.pc && self.hit == Some(p.hit)
    }
}

/// What `drive` saw.
#[derive(Debug, Clone, Copy)]
pub(super) enum Ev {
    Arrive(Arrival),
    /// The instruction before this arrival touched a watched range.
    Watch(Arrival, Watch),
    /// The instruction at the arrival faults into this signal (pending).
    Signal(Arrival, i32),
    Ended(ExitStatus),
}

/// A watched page opened for one instruction.
struct Opened {
    page: u64,
    cr2: u64,
    error_code: u64,
    before: Vec<(Watch, Vec<u8>)>,
}

/// The byte at a physical address, when it is in guest memory.
fn byte_at(ram: &crate::machine::memory::GuestRam, pa: u64) -> Option<u8> {
    ram.slice(pa, 1).ok().map(|b| b[0])
}

fn perm_of(p: crate::kernel::mm::Prot) -> Perm {
    Perm {
        write: p.write,
        exec: p.exec,
    }
}

impl Session {
    fn rip(&self) -> u64 {
        self.live.k.m.regs().rip
    }

    fn set_tf(&mut self, on: bool) {
        let r = self.live.k.m.regs_mut();
        if on {
            r.rflags |= TF;
        } else {
            r.rflags &= !TF;
        }
    }

    /// The arrival at the current instruction, counted.
    fn arrive(&mut self, how: How) -> Arrival {
        let l = &mut self.live;
        let pc = l.k.m.regs().rip;
        let hit = if l.count_all {
            let c = l.counts.entry(pc).or_insert(0);
            *c += 1;
            Some(*c)
        } else {
            l.counts.get_mut(&pc).map(|c| {
                *c += 1;
                *c
            })
        };
        Arrival {
            step: l.k.step,
            pc,
            hit,
            tid: l.k.cur_tid(),
            how,
            user_bp: self.breakpoints.contains(&pc),
        }
    }

    /// The arrival the machine stands at, as last counted.
    pub(super) fn here(&self) -> Arrival {
        let l = &self.live;
        let pc = l.k.m.regs().rip;
        Arrival {
            step: l.k.step,
            pc,
            hit: l.counts.get(&pc).copied(),
            tid: l.k.cur_tid(),
            how: How::Stepped,
            user_bp: self.breakpoints.contains(&pc),
        }
    }

    /// A new span: counts start again, traps are put back where the kernel
    /// changed pages, and the first instruction is an arrival.
    pub(super) fn span_started(&mut self) -> Arrival {
        let l = &mut self.live;
        l.route.clear();
        l.ghosts.clear();
        l.counts = self
            .breakpoints
            .iter()
            .chain(l.tracked.iter())
            .map(|a| (*a, 0))
            .collect();
        self.sync_traps();
        self.arrive(How::SpanStart)
    }

    /// Puts the `int3`s and page protections where they belong now.
    pub(super) fn sync_traps(&mut self) {
        let pid = self.pid;
        let want: Vec<u64> = self
            .breakpoints
            .iter()
            .chain(self.live.tracked.iter())
            .chain(self.live.ghosts.iter())
            .copied()
            .collect();
        let l = &mut self.live;
        let Some(p) = l.k.procs.get(&pid) else {
            return;
        };
        let pt = p.mm.pt;
        let ram = &mut l.k.m.ram;
        // Take out the ones no longer wanted, where the byte is still ours.
        let gone: Vec<u64> = l
            .inserted
            .keys()
            .filter(|a| !want.contains(a))
            .copied()
            .collect();
        for a in gone {
            let (pa, orig) = l.inserted.remove(&a).unwrap();
            if pt.entry(ram, a & !(PAGE_SIZE - 1)).map(|e| e & PTE_ADDR) == Some(pa & PTE_ADDR)
                && byte_at(ram, pa) == Some(INT3)
            {
                // In memory: it was written there.
                let _ = ram.write(pa, &[orig]);
            }
        }
        for a in want {
            let page = a & !(PAGE_SIZE - 1);
            match pt.entry(ram, page) {
                Some(e) if e & PTE_PRESENT != 0 && p.mm.vma_at(a).is_some() => {
                    let pa = (e & PTE_ADDR) + (a - page);
                    if pa + 1 > ram.size() {
                        continue;
                    }
                    let ok = matches!(l.inserted.get(&a), Some((q, _)) if *q == pa)
                        && byte_at(ram, pa) == Some(INT3);
                    if !ok {
                        if let Some(orig) = byte_at(ram, pa) {
                            if ram.write(pa, &[INT3]).is_ok() {
                                l.inserted.insert(a, (pa, orig));
                            }
                        }
                    }
                }
                _ => {
                    // Not present: put in when the program faults the page in.
                    l.inserted.remove(&a);
                }
            }
        }
        // Watched pages: writes (and reads, for read and access watches) trap.
        let mut masks: BTreeMap<u64, u64> = BTreeMap::new();
        for w in &self.watches {
            let last = w.addr.saturating_add(w.len.max(1) - 1);
            let mut page = w.addr & !(PAGE_SIZE - 1);
            while page <= last {
                let m = masks.entry(page).or_insert(PTE_WRITE);
                if w.kind != WatchKind::Write {
                    *m |= PTE_USER;
                }
                page += PAGE_SIZE;
            }
        }
        let mut flush = false;
        let unwatched: Vec<u64> = l
            .protected
            .keys()
            .filter(|p| !masks.contains_key(p))
            .copied()
            .collect();
        for page in unwatched {
            l.protected.remove(&page);
            if let Some((_, v)) = p.mm.vma_at(page) {
                pt.protect(ram, page, perm_of(v.prot));
            }
        }
        for (page, mask) in masks {
            let Some((_, v)) = p.mm.vma_at(page) else {
                l.protected.remove(&page);
                continue;
            };
            if !(v.prot.read || v.prot.write || v.prot.exec) {
                continue;
            }
            let Some(cur) = pt.entry(ram, page).filter(|e| e & PTE_PRESENT != 0) else {
                l.protected.remove(&page);
                continue;
            };
            pt.protect(ram, page, perm_of(v.prot));
            let normal = pt.entry(ram, page).unwrap_or(cur);
            let want = normal & !mask;
            pt.set_entry(ram, page, want);
            l.protected.insert(page, want);
            if cur != want {
                flush = true;
            }
        }
        if flush {
            if let Err(e) = l.k.m.flush_tlb() {
                l.k.engine_failure(e);
            }
        }
    }

    /// Gives a watched page its program's permissions for one instruction.
    fn open_page(&mut self, page: u64) {
        let pid = self.pid;
        let l = &mut self.live;
        if let Some(p) = l.k.procs.get(&pid) {
            if let Some((_, v)) = p.mm.vma_at(page) {
                p.mm.pt.protect(&mut l.k.m.ram, page, perm_of(v.prot));
            }
        }
    }

    /// The watched bytes on `page`, before an instruction touches them.
    fn watched_bytes(&mut self, page: u64) -> Vec<(Watch, Vec<u8>)> {
        let ws: Vec<Watch> = self
            .watches
            .iter()
            .filter(|w| {
                w.addr < page + PAGE_SIZE && page <= w.addr.saturating_add(w.len.max(1) - 1)
            })
            .copied()
            .collect();
        ws.into_iter()
            .map(|w| {
                let b = self.read_memory(w.addr, w.len as usize).unwrap_or_default();
                (w, b)
            })
            .collect()
    }

    /// Which watch the instruction that faulted on an opened page hit.
    fn watch_hit(&mut self, o: &Opened) -> Option<Watch> {
        if o.error_code & PF_FETCH != 0 {
            return None;
        }
        let write = o.error_code & PF_WRITE != 0;
        for (w, before) in &o.before {
            let after = self.read_memory(w.addr, w.len as usize).unwrap_or_default();
            let inside = (w.addr..w.addr.saturating_add(w.len)).contains(&o.cr2);
            let hit = match w.kind {
                WatchKind::Write => write && (inside || after != *before),
                WatchKind::Read => !write && inside,
                WatchKind::Access => inside || after != *before,
            };
            if hit {
                return Some(*w);
            }
        }
        None
    }

    /// The signal a fault becomes, or None for one the kernel serves
    /// silently (a page faulted in).
    fn fatal_signal(&self, exit: &Exit) -> Option<i32> {
        let Exit::Exception {
            vector,
            error_code,
            cr2,
        } = *exit
        else {
            return None;
        };
        Some(match vector {
            VEC_PAGE_FAULT => {
                let p = self.live.k.procs.get(&self.live.k.cur_pid())?;
                let write = error_code & PF_WRITE != 0;
                let exec = error_code & PF_FETCH != 0;
                match p.mm.vma_at(cr2) {
                    Some((_, v)) if v.prot.allows(write, exec) => return None,
                    _ => SIGSEGV,
                }
            }
            0 | 16 | 19 => SIGFPE,
            6 => SIGILL,
            VEC_DEBUG | VEC_BREAKPOINT => SIGTRAP,
            17 => SIGBUS,
            _ => SIGSEGV,
        })
    }

    /// Hands an exit to the kernel: it is the next step.
    fn serve_exit(&mut self, exit: Exit) -> Result<Ev, DebugError> {
        let k = &mut self.live.k;
        k.serve(exit);
        if let Some(e) = k.take_failure() {
            return Err(e.into());
        }
        if k.status().is_none() && k.schedule_next().is_err() {
            k.finish(ExitStatus::Deadlocked);
        }
        if let Some(e) = k.take_failure() {
            return Err(e.into());
        }
        if let Some(st) = k.status() {
            self.live.ended = Some(st);
            return Ok(Ev::Ended(st));
        }
        Ok(Ev::Arrive(self.span_started()))
    }

    /// Runs the machine, one instruction at a time when `stepping`, and
    /// asks `on` after everything it sees whether to stop there.
    pub(super) fn drive(
        &mut self,
        stepping: bool,
        mut on: impl FnMut(&Ev) -> bool,
    ) -> Result<Ev, DebugError> {
        loop {
            if let Some(st) = self.live.ended {
                return Ok(Ev::Ended(st));
            }
            if let Some(exit) = self.live.pending.take() {
                let ev = self.serve_exit(exit)?;
                if on(&ev) {
                    return Ok(ev);
                }
                continue;
            }
            let rip = self.rip();
            // Stepping over an int3 of ours: the program's byte for one instruction.
            let lifted = self.live.inserted.get(&rip).copied();
            if let Some((pa, orig)) = lifted {
                let _ = self.live.k.m.ram.write(pa, &[orig]);
            }
            let tf = stepping || lifted.is_some();
            if tf {
                self.set_tf(true);
            }
            // A memory point's #DB handler exits to us while we single-step.
            self.live.k.m.set_debug_exits(tf);
            let mut opened: Option<Opened> = None;
            let exit = loop {
                let exit = self.live.k.run_guest()?;
                match exit {
                    Exit::Exception {
                        vector: VEC_PAGE_FAULT,
                        error_code,
                        cr2,
                    } if error_code & PF_PRESENT != 0
                        && self.live.protected.contains_key(&(cr2 & !(PAGE_SIZE - 1)))
                        && self.fatal_signal(&exit).is_none() =>
                    {
                        let page = cr2 & !(PAGE_SIZE - 1);
                        if opened.is_none() {
                            let before = self.watched_bytes(page);
                            opened = Some(Opened {
                                page,
                                cr2,
                                error_code,
                                before,
                            });
                        }
                        self.open_page(page);
                        self.set_tf(true);
                        self.live.k.m.set_debug_exits(true);
                    }
                    other => break other,
                }
            };
            let relift = |s: &mut Session| {
                if let Some((pa, _)) = lifted {
                    let _ = s.live.k.m.ram.write(pa, &[INT3]);
                }
            };
            match exit {
                Exit::Interrupted => {
                    relift(self);
                    self.set_tf(false);
                    if opened.is_some() {
                        self.sync_traps();
                    }
                }
                Exit::Exception {
                    vector: VEC_DEBUG, ..
                } if tf || opened.is_some() => {
                    self.set_tf(false);
                    relift(self);
                    let hit = match &opened {
                        Some(o) => {
                            let h = self.watch_hit(o);
                            // Protect the page again (the permission taken away needs a flush).
                            self.live.protected.remove(&o.page);
                            self.sync_traps();
                            h
                        }
                        None => None,
                    };
                    let a = self.arrive(How::Stepped);
                    let ev = match hit {
                        Some(w) => Ev::Watch(a, w),
                        None => Ev::Arrive(a),
                    };
                    if on(&ev) {
                        return Ok(ev);
                    }
                }
                Exit::Exception {
                    vector: VEC_BREAKPOINT,
                    ..
                } if self.live.inserted.contains_key(&self.rip().wrapping_sub(1)) => {
                    relift(self);
                    self.set_tf(false);
                    self.live.k.m.regs_mut().rip -= 1;
                    let a = self.arrive(How::Int3);
                    let ev = Ev::Arrive(a);
                    if on(&ev) {
                        return Ok(ev);
                    }
                }
                real => {
                    // The program never sees the debugger's TF.
                    {
                        let r = self.live.k.m.regs_mut();
                        r.rflags &= !TF;
                        if real == Exit::Syscall {
                            r.r11 &= !TF;
                        }
                    }
                    relift(self);
                    if opened.is_some() {
                        self.live.protected.clear();
                        self.sync_traps();
                    }
                    if let Some(signo) = self.fatal_signal(&real) {
                        self.live.pending = Some(real);
                        let ev = Ev::Signal(self.here(), signo);
                        if on(&ev) {
                            return Ok(ev);
                        }
                        continue;
                    }
                    let ev = self.serve_exit(real)?;
                    if on(&ev) {
                        return Ok(ev);
                    }
                }
            }
        }
    }

    pub(super) fn stop_of(&self, ev: &Ev) -> Stop {
        match *ev {
            Ev::Arrive(a) if a.user_bp && a.how != How::Stepped => Stop::Breakpoint {
                tid: a.tid,
                pc: a.pc,
            },
            Ev::Arrive(a) => Stop::Stepped { tid: a.tid },
            Ev::Watch(a, w) => Stop::Watch {
                tid: a.tid,
                watch: w,
                addr: w.addr,
            },
            Ev::Signal(a, signo) => Stop::Signal { tid: a.tid, signo },
            Ev::Ended(st) => Stop::Exited(st),
        }
    }

    /// Runs one instruction of the thread on the CPU (a system call is one
    /// instruction: the step it is is served, and another thread may run next).
    pub fn step_instruction(&mut self) -> Result<Stop, DebugError> {
        let from = (self.live.k.cur_tid(), self.rip());
        let ev = self.drive(true, |ev| match ev {
            // A page faulted in: the same instruction again, not done yet.
            Ev::Arrive(a) if a.how == How::SpanStart => (a.tid, a.pc) != from,
            _ => true,
        })?;
        self.note_route(&ev, Op::Step);
        Ok(self.stop_of(&ev))
    }

    /// Runs until a breakpoint, a watchpoint, a fault or the end.
    pub fn cont(&mut self) -> Result<Stop, DebugError> {
        self.cont_until(None)
    }

    /// Runs until a breakpoint, a watchpoint, a fault, the end, or the
    /// start of span `until` (then `Stop::Stepped`, at the span's start).
    pub fn cont_until(&mut self, until: Option<u64>) -> Result<Stop, DebugError> {
        let ev = self.drive(false, |ev| match ev {
            Ev::Arrive(a) => {
                a.user_bp || (a.how == How::SpanStart && until.is_some_and(|u| a.step >= u))
            }
            _ => true,
        })?;
        if let Ev::Arrive(a) = ev {
            if a.how == How::SpanStart && !a.user_bp {
                return Ok(Stop::Stepped { tid: a.tid });
            }
        }
        self.note_route(
            &ev,
            Op::Continue(self.breakpoints.clone(), self.watches.clone()),
        );
        let stop = self.stop_of(&ev);
        Ok(match stop {
            // A breakpoint reached by stepping over the one before it.
            Stop::Stepped { tid } => Stop::Breakpoint {
                tid,
                pc: self.rip(),
            },
            s => s,
        })
    }

    fn note_route(&mut self, ev: &Ev, op: Op) {
        let span_start = matches!(ev, Ev::Arrive(a) if a.how == How::SpanStart);
        if !span_start {
            self.live.route.push(op);
        }
    }

    /// Runs on until the position (in the current span, ahead).
    pub(super) fn run_to_arrival(&mut self, p: Position) -> Result<bool, DebugError> {
        if self.here().is(&p) {
            return Ok(true);
        }
        let ev = self.drive(false, |ev| match ev {
            Ev::Arrive(a) => a.is(&p) || a.how == How::SpanStart,
            Ev::Watch(a, _) => a.is(&p),
            Ev::Signal(..) => false,
            Ev::Ended(_) => true,
        })?;
        let found = matches!(ev, Ev::Arrive(a) | Ev::Watch(a, _) if a.is(&p));
        if found {
            self.live.route.push(Op::Arrive(p));
        }
        Ok(found)
    }
}
