//! Running the debugged machine: every exit is first looked at here. Debug
//! traps (the monitor's `int3`s, single steps, watched pages) are served
//! here and are not steps; every other exit goes to the kernel as in the
//! recording.

use super::{DebugCore, DebugError, Op, Position, Stop, Watch, WatchKind, PTE_ADDR};
use crate::kernel::signal::{SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP};
use crate::kernel::task::Tid;
use crate::machine::insn::{memory_operands, AddrRegs, MemAccess};
use crate::machine::layout::PAGE_SIZE;
use crate::machine::paging::{PTE_PRESENT, PTE_USER, PTE_WRITE};
use crate::machine::Exit;
use crate::run::ExitStatus;
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
const PTE_NX: u64 = 1 << 63;
/// The longest x86 instruction.
const MAX_INSN: usize = 15;

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

/// A watched page's protection, on top of the kernel's own view of it
/// (which memory points change: a page another thread touched is hidden
/// from ring 3). The kernel only ever sees `kernel`: the debugger lifts its
/// layer before the kernel serves an exit and lays it again after.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layer {
    /// The entry as the kernel keeps it.
    kernel: u64,
    /// The entry the debugger set: `kernel` less what the watches take.
    set: u64,
}

/// An instruction watched as it runs: one that faulted on a page the
/// debugger protected (opened for it), or that completes a memory point on a
/// watched page the kernel hides.
struct Opened {
    /// Pages given their kernel entries for the instruction.
    pages: Vec<u64>,
    /// The memory it touches, decoded before it ran.
    touches: Vec<MemAccess>,
    before: Vec<(Watch, Vec<u8>)>,
}

/// The byte at a physical address, when it is in guest memory.
fn byte_at(ram: &crate::machine::memory::GuestRam, pa: u64) -> Option<u8> {
    ram.slice(pa, 1).ok().map(|b| b[0])
}

/// Whether a present entry lets ring 3 make the access a #PF's error code says.
fn permits(pte: u64, error_code: u64) -> bool {
    pte & PTE_USER != 0
        && (error_code & PF_WRITE == 0 || pte & PTE_WRITE != 0)
        && (error_code & PF_FETCH == 0 || pte & PTE_NX == 0)
}

/// Whether `[addr, addr + len)` meets the page at `page`.
fn on_page(addr: u64, len: u64, page: u64) -> bool {
    addr < page + PAGE_SIZE && page <= addr.saturating_add(len.max(1) - 1)
}

impl DebugCore {
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
        l.moved |= how != How::SpanStart;
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
        l.moved = false;
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
            let layer = l.protected.remove(&page).unwrap();
            if pt.entry(ram, page) == Some(layer.set) {
                pt.set_entry(ram, page, layer.kernel);
            }
        }
        for (page, mask) in masks {
            let Some(cur) = pt.entry(ram, page).filter(|e| e & PTE_PRESENT != 0) else {
                l.protected.remove(&page);
                continue;
            };
            // What the kernel keeps, and what the guest may have cached.
            let (kernel, ran) = match l.protected.get(&page) {
                Some(layer) if layer.set == cur => (layer.kernel, layer.set),
                Some(layer) => (cur, layer.set),
                None => (cur, cur),
            };
            if kernel & PTE_USER == 0 {
                // Hidden by the kernel (a memory point's page, PROT_NONE):
                // every access of ring 3 faults into the kernel already, and
                // a point's access is watched as it completes.
                l.protected.remove(&page);
                continue;
            }
            let want = kernel & !mask;
            if want != cur {
                pt.set_entry(ram, page, want);
            }
            if ran & !want & (PTE_USER | PTE_WRITE) != 0 {
                flush = true;
            }
            l.protected.insert(page, Layer { kernel, set: want });
        }
        if flush {
            if let Err(e) = l.k.m.flush_tlb() {
                l.k.engine_failure(e);
            }
        }
    }

    /// Gives the kernel its view of every watched page back, before it
    /// serves an exit (granting access needs no flush).
    fn lift_watches(&mut self) {
        let pid = self.pid;
        let l = &mut self.live;
        let Some(p) = l.k.procs.get(&pid) else {
            return;
        };
        for (page, layer) in &l.protected {
            if p.mm.pt.entry(&mut l.k.m.ram, *page) == Some(layer.set) {
                p.mm.pt.set_entry(&mut l.k.m.ram, *page, layer.kernel);
            }
        }
    }

    /// Whether a present-page fault is the debugger's: on a page it
    /// protected, for an access the kernel's own view allows.
    fn watch_fault(&self, cr2: u64, error_code: u64) -> bool {
        error_code & PF_PRESENT != 0
            && self
                .live
                .protected
                .get(&(cr2 & !(PAGE_SIZE - 1)))
                .is_some_and(|l| permits(l.kernel, error_code))
    }

    /// Gives a watched page its kernel entry for one instruction.
    fn open_page(&mut self, page: u64) {
        let pid = self.pid;
        let l = &mut self.live;
        if let (Some(p), Some(layer)) = (l.k.procs.get(&pid), l.protected.get(&page)) {
            p.mm.pt.set_entry(&mut l.k.m.ram, page, layer.kernel);
        }
    }

    /// Protects the pages an instruction had open again: the guest may have
    /// cached them open, so they are laid again as new (with a flush).
    fn reprotect(&mut self, o: &Opened) {
        for p in &o.pages {
            self.live.protected.remove(p);
        }
        self.sync_traps();
    }

    /// Every watched range's bytes, before an instruction touches them.
    fn watched_bytes(&mut self) -> Vec<(Watch, Vec<u8>)> {
        let ws = self.watches.clone();
        ws.into_iter()
            .map(|w| {
                let b = self.read_memory(w.addr, w.len as usize).unwrap_or_default();
                (w, b)
            })
            .collect()
    }

    /// The memory the instruction at rip touches, from its registers now
    /// (before it runs); without a decoding, the fault's address and kind.
    fn touches(&mut self, fault: Option<(u64, u64)>) -> Vec<MemAccess> {
        let rip = self.rip();
        let to_page_end = (PAGE_SIZE - (rip & (PAGE_SIZE - 1))) as usize;
        let bytes = self
            .read_memory(rip, MAX_INSN)
            .or_else(|_| self.read_memory(rip, to_page_end.min(MAX_INSN)))
            .unwrap_or_default();
        let m = &self.live.k.m;
        let regs = AddrRegs {
            regs: m.regs(),
            fs_base: m.fs_base(),
            gs_base: m.gs_base(),
        };
        let decoded = memory_operands(&bytes, rip, Some(&regs))
            .map(|ops| ops.accesses)
            .filter(|a| !a.is_empty() && a.iter().all(|a| a.addr.is_some()));
        match (decoded, fault) {
            (Some(a), _) => a,
            (None, Some((cr2, error_code))) if error_code & PF_FETCH == 0 => {
                let write = error_code & PF_WRITE != 0;
                vec![MemAccess {
                    addr: Some(cr2),
                    size: 1,
                    read: !write,
                    write,
                }]
            }
            (None, _) => Vec::new(),
        }
    }

    /// The running thread's access of a memory point on a watched page,
    /// about to complete: it is watched as it runs.
    fn completing_point(&mut self) -> Option<Opened> {
        let tid = self.live.k.cur_tid();
        let pages = self.live.k.points.pending_pages(tid);
        let watched = pages
            .iter()
            .any(|p| self.watches.iter().any(|w| on_page(w.addr, w.len, *p)));
        if !watched {
            return None;
        }
        Some(Opened {
            pages: Vec::new(),
            touches: self.touches(None),
            before: self.watched_bytes(),
        })
    }

    /// Which watch the instruction just run hit: bytes of it read or
    /// written (a read that starts below the range and runs into it too),
    /// or its value changed.
    fn watch_hit(&mut self, o: &Opened) -> Option<Watch> {
        for (w, before) in &o.before {
            let after = self.read_memory(w.addr, w.len as usize).unwrap_or_default();
            let changed = after != *before;
            let on = |f: fn(&MemAccess) -> bool| {
                o.touches.iter().any(|a| f(a) && a.meets(w.addr, w.len))
            };
            let (read, write) = (on(|a| a.read), on(|a| a.write));
            let hit = match w.kind {
                WatchKind::Write => write || changed,
                WatchKind::Read => read,
                WatchKind::Access => read || write || changed,
            };
            if hit {
                return Some(*w);
            }
        }
        None
    }

    /// The signal a fault becomes, or None for one the kernel serves
    /// silently (a page faulted in, a time stamp read).
    fn fatal_signal(&mut self, exit: &Exit) -> Option<i32> {
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
            6 | 13 if self.live.k.tsc_read_at_rip().is_some() => return None,
            0 | 16 | 19 => SIGFPE,
            6 => SIGILL,
            VEC_DEBUG | VEC_BREAKPOINT => SIGTRAP,
            17 => SIGBUS,
            _ => SIGSEGV,
        })
    }

    /// Hands an exit to the kernel: it is the next step.
    fn serve_exit(&mut self, exit: Exit) -> Result<Ev, DebugError> {
        self.lift_watches();
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
        self.offer_snapshot()?;
        Ok(Ev::Arrive(self.span_started()))
    }

    /// Runs the machine, one instruction at a time when `stepping`, and
    /// asks `on` after everything it sees whether to stop there.
    pub(super) fn drive(
        &mut self,
        stepping: bool,
        mut on: impl FnMut(&Ev) -> bool,
    ) -> Result<Ev, DebugError> {
        // Until this returns (`on` starts nothing).
        let trap = crate::machine::tsc::Trap::hold();
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
            let mut opened = self.completing_point();
            let tf = stepping || lifted.is_some() || opened.is_some();
            if tf {
                self.set_tf(true);
            }
            // A memory point's #DB handler exits to us while we single-step.
            self.live.k.m.set_debug_exits(tf);
            let exit = loop {
                let exit = self.live.k.run_guest(&trap)?;
                match exit {
                    Exit::Exception {
                        vector: VEC_PAGE_FAULT,
                        error_code,
                        cr2,
                    } if self.watch_fault(cr2, error_code) => {
                        let page = cr2 & !(PAGE_SIZE - 1);
                        match &mut opened {
                            Some(o) => o.pages.push(page),
                            None => {
                                opened = Some(Opened {
                                    pages: vec![page],
                                    touches: self.touches(Some((cr2, error_code))),
                                    before: self.watched_bytes(),
                                })
                            }
                        }
                        self.open_page(page);
                        self.set_tf(true);
                        self.live.k.m.set_debug_exits(true);
                    }
                    other => break other,
                }
            };
            let relift = |s: &mut DebugCore| {
                if let Some((pa, _)) = lifted {
                    let _ = s.live.k.m.ram.write(pa, &[INT3]);
                }
            };
            match exit {
                Exit::Interrupted => {
                    relift(self);
                    self.set_tf(false);
                    if let Some(o) = &opened {
                        self.reprotect(o);
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
                            self.reprotect(o);
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
                    if let Some(o) = &opened {
                        // Laid again (with a flush) after the exit is served.
                        for p in &o.pages {
                            self.live.protected.remove(p);
                        }
                    }
                    if let Some(signo) = self.fatal_signal(&real) {
                        relift(self);
                        self.sync_traps();
                        self.live.pending = Some(real);
                        let ev = Ev::Signal(self.here(), signo);
                        if on(&ev) {
                            return Ok(ev);
                        }
                        continue;
                    }
                    // The kernel serves it with the program's byte under an
                    // `int3` of ours lifted (it decodes the instruction of a
                    // memory point): the new span puts the `int3` back.
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
