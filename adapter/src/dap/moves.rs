//! Moves inside steps, on the debug core: line and instruction steps both
//! ways, `stepOut`, `continue`/`reverseContinue` with source, function,
//! conditional, hit-count and data breakpoints, gotoTargets, logpoints.
//!
//! Every move is a scan of the machine with `int3`s at chosen addresses
//! (the statement starts of the functions on the thread's stack, the
//! breakpoints) that decides at each stop. The backward moves are in
//! `backward.rs`.

use super::breakpoints::{judge, At, Breakpoints, Counts};
use super::live::{Flow, Hit, Live};
use super::open::Stop;
use super::replies::{body, GotoTargetsReply};
use super::session::Session;
use super::view;
use super::wire;
use anyhow::{anyhow, bail, Result};
use dap::requests::GotoTargetsArguments;
use dap::types::{GotoTarget, SteppingGranularity, StoppedEventReason};
use serde_json::Value;
use std::collections::BTreeSet;
use vmm::debug::{DebugError, Position, Watch};

/// Which way a line step goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `next`: over calls.
    Over,
    /// `stepIn`: into calls to code with lines.
    In,
    /// `stepOut`: back to the caller.
    Out,
}

/// Goto target ids start here; smaller ids are steps.
pub const GOTO_BASE: i64 = 1 << 40;
/// At most this many gotoTargets or logpoint lines per request.
pub const MAX_HITS: usize = 1000;

/// Where a thread's line step starts: the innermost frame with a line.
pub(super) struct Start {
    pub(super) line: (String, u32),
    pub(super) cfa: u64,
    /// Statement starts of its function and its callers'.
    pub(super) stmts: BTreeSet<u64>,
    /// The return address into its caller.
    pub(super) ret: Option<u64>,
    /// Entries of the functions with lines its function calls directly.
    pub(super) callees: BTreeSet<u64>,
}

pub(super) fn line_key(live: &Live, pc: u64) -> Option<(String, u32)> {
    live.line_at(pc)
        .map(|(f, l)| (live.lines.file(f).to_string(), l))
}

/// The direct call targets in `lo..hi` (decoded with iced-x86).
fn call_targets(live: &mut Live, lo: u64, hi: u64) -> Vec<u64> {
    use iced_x86::{Decoder, DecoderOptions, FlowControl};
    let len = (hi - lo).min(1 << 20) as usize;
    let Ok(code) = live.core.read_memory(lo, len) else {
        return Vec::new();
    };
    let mut d = Decoder::with_ip(64, &code, lo, DecoderOptions::NONE);
    let mut out = Vec::new();
    for i in &mut d {
        if i.flow_control() == FlowControl::Call {
            let t = i.near_branch_target();
            if t != 0 {
                out.push(t);
            }
        }
    }
    out
}

/// The move requests: steps by line or instruction, continue both ways,
/// gotoTargets.
impl Session {
    /// next/stepIn/stepOut/stepBack.
    pub fn step_request(
        &mut self,
        tid: i64,
        kind: Kind,
        granularity: Option<SteppingGranularity>,
        forward: bool,
    ) -> Result<Option<Value>> {
        let instruction = matches!(granularity, Some(SteppingGranularity::Instruction));
        let o = self.open()?;
        // Without debug info anywhere on the thread's stack, and when asked
        // at launch, steps go from event to event as before.
        let lines = o
            .view
            .stacks
            .get(&(tid as u32))
            .is_some_and(|b| b.frames.iter().any(|f| f.location.is_some()));
        if self.options().event_steps || (!lines && !instruction) {
            return self.step_thread(tid, forward);
        }
        if forward {
            self.step_forward(tid, kind, instruction)?;
        } else {
            self.step_backward(tid, instruction, kind == Kind::In)?;
        }
        Ok(None)
    }

    pub fn go_forward(&mut self) -> Result<()> {
        let (to, stop) = self.forward_to_break()?;
        if !self.bps.any() {
            return self.move_to(to, stop);
        }
        let until = stop.hit.is_some().then_some((to, stop));
        let end = self.end_stop()?;
        self.continue_forward(until, end)
    }

    pub fn go_backward(&mut self) -> Result<()> {
        let (to, stop) = self.backward_to_break()?;
        if !self.bps.any() {
            return self.move_to(to, stop);
        }
        let floor = stop.hit.is_some().then_some((to, stop));
        self.continue_backward(floor)
    }

    pub fn goto_targets(&mut self, a: GotoTargetsArguments) -> Result<Option<Value>> {
        let path = self.path_of(&a.source)?;
        let line =
            u32::try_from(a.line).map_err(|_| anyhow!("`line`: {} is not a line", a.line))?;
        let table = self.live()?.lines.lines_of(&path);
        let Some((at, addrs)) = table.iter().find(|(l, _)| *l == line).cloned() else {
            bail!(
                "`line`: no code at {}:{line}",
                path.rsplit('/').next().unwrap_or(&path)
            );
        };
        let addrs: BTreeSet<u64> = addrs.into_iter().collect();
        let (hits, total) = self.line_hits(&addrs, |_, _, _| true)?;
        let names = self.open()?.run.meta.thread_names.clone();
        let o = self.open.as_mut().expect("open");
        o.goto_targets = hits.clone();
        let n = hits.len();
        let targets = hits
            .iter()
            .enumerate()
            .map(|(i, (p, tid))| {
                let name = names.get(tid).cloned().unwrap_or_default();
                GotoTarget {
                    id: GOTO_BASE + i as i64,
                    label: format!("step {} · {tid} {name} · {} of {total}", p.step, i + 1),
                    line: i64::from(at),
                    instruction_pointer_reference: Some(format!("{:#x}", p.pc)),
                    ..Default::default()
                }
            })
            .collect();
        if total > n {
            self.later(wire::output(format!(
                "line {at} ran {total} times in the recording; gotoTargets lists the first {n}\n"
            )));
        }
        // The machine went through the whole run: back to the position.
        Ok(Some(body(&GotoTargetsReply { targets, total })))
    }
}

impl Session {
    pub(super) fn live_mut(&mut self) -> Result<&mut Live> {
        self.open
            .as_mut()
            .and_then(|o| o.live.as_mut())
            .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))
    }

    /// The debug core at the position (opened on first use).
    pub fn live(&mut self) -> Result<&mut Live> {
        let watches = self.bps.watches();
        let budget = self.options().snapshot_budget;
        let o = self
            .open
            .as_mut()
            .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))?;
        if !o.run.dir.join("manifest.json").exists() {
            bail!("run {} was removed from the store", o.run.id);
        }
        // Written to and moved away: back to the recording.
        if o.live
            .as_ref()
            .is_some_and(|l| !l.synced && l.core.is_modified())
        {
            o.live = None;
        }
        if o.live.is_none() {
            o.live = Some(Live::open(&o.run, &o.store, o.view.state_step, budget)?);
        }
        let at = o.at;
        let step = o.view.state_step;
        let live = o.live.as_mut().expect("just opened");
        for w in live.core.watches().to_vec() {
            if !watches.contains(&w) {
                live.core.remove_watch(w);
            }
        }
        for w in watches {
            live.core.add_watch(w);
        }
        if !live.synced {
            match at {
                Some(p) => live.core.go_to(p)?,
                // As `Live::open`: the step before when the run ended at it.
                None => match live.core.go_to_step(step) {
                    Err(DebugError::Ended(_)) if step > 0 => live.core.go_to_step(step - 1)?,
                    r => r?,
                },
            }
            live.synced = true;
        }
        live.follow();
        Ok(live)
    }

    /// Shows the machine where the core stands, and queues the stop.
    pub(super) fn settle(&mut self, stop: Stop) -> Result<()> {
        self.settle_with(stop, false)
    }

    /// As `settle`; `crash`: at the run's fatal fault, which is its last step.
    fn settle_with(&mut self, stop: Stop, crash: bool) -> Result<()> {
        let live = self.live_mut()?;
        let pos = match live.core.here_position() {
            Some(p) => p,
            None => match live.core.position() {
                Ok(p) => p,
                // Written to: not the recording, so no name from it.
                Err(DebugError::Diverged) => Position {
                    step: live.core.step(),
                    pc: live.pc(),
                    hit: 0,
                },
                Err(e) => return Err(e.into()),
            },
        };
        let tid = live.tid();
        live.follow();
        let view = view::of_kernel(live.core.kernel(), pos.step);
        live.synced = true;
        let o = self.open.as_mut().expect("live");
        o.pos = pos.step;
        if crash && pos.step + 1 == o.run.meta.steps && o.run.meta.status.starts_with("killed") {
            o.pos = o.run.meta.steps;
        }
        o.at = Some(pos);
        o.view = view;
        o.focus_tid = Some(tid);
        self.stopped(stop);
        Ok(())
    }

    /// At the end of a run killed by a signal, refines the position to the
    /// faulting instruction (the registers of the crash, not of the step
    /// before it). Quietly keeps the step's view when it cannot.
    pub fn refine_crash(&mut self) {
        let Some(o) = self.open.as_ref() else { return };
        if o.pos < o.run.meta.steps || !o.run.meta.status.starts_with("killed") || o.at.is_some() {
            return;
        }
        let found = (|| -> Result<bool> {
            let live = self.live()?;
            // At the fault already when the view's step is the fault's.
            while !live.core.signal_pending() {
                match live.core.cont()? {
                    vmm::debug::Stop::Signal { .. } => break,
                    vmm::debug::Stop::Exited(_) => return Ok(false),
                    _ => {}
                }
            }
            let pos = live.core.position()?;
            let tid = live.tid();
            let view = view::of_kernel(live.core.kernel(), pos.step);
            let o = self.open.as_mut().expect("live");
            o.at = Some(pos);
            o.view = view;
            o.focus_tid = Some(tid);
            o.pos = o.run.meta.steps;
            Ok(true)
        })();
        if !matches!(found, Ok(true)) {
            if let Some(l) = self.open.as_mut().and_then(|o| o.live.as_mut()) {
                l.synced = false;
            }
        }
    }

    /// The thread's starting frame for a line step.
    pub(super) fn start_of(live: &mut Live, tid: u32, kind: Kind) -> Result<Start> {
        let bt = live
            .core
            .kernel()
            .backtrace(tid)
            .ok_or_else(|| anyhow!("thread {tid} has no stack to step in"))?;
        let base = bt
            .frames
            .iter()
            .position(|f| f.location.is_some())
            .ok_or_else(|| {
                anyhow!("thread {tid} is in code without line information: step by instruction")
            })?;
        let f = &bt.frames[base];
        let loc = f.location.clone().expect("found with one");
        let cfa = f
            .cfa
            .ok_or_else(|| anyhow!("the frame of thread {tid} cannot be unwound"))?;
        // The physical frame `base` is in ends at the first frame not inlined.
        let last = (base..bt.frames.len())
            .find(|i| !bt.frames[*i].inlined)
            .unwrap_or(bt.frames.len() - 1);
        let ret = bt.frames.get(last + 1).map(|c| c.pc);
        let mut stmts = BTreeSet::new();
        for fr in &bt.frames[base..] {
            stmts.extend(live.function_stmts(fr.pc.saturating_sub((fr.pc != f.pc) as u64)));
        }
        let mut callees = BTreeSet::new();
        if kind == Kind::In {
            if let Some((lo, hi)) = live.function(f.pc) {
                for t in call_targets(live, lo, hi) {
                    if live.line_at(t).is_some() {
                        callees.insert(t);
                    }
                }
            }
        }
        Ok(Start {
            line: (symbols::lines::clean(&loc.file), loc.line),
            cfa,
            stmts,
            ret,
            callees,
        })
    }

    /// The session's core and breakpoints, apart.
    pub(super) fn parts(&mut self) -> Result<(&mut Live, &Breakpoints)> {
        self.live()?;
        let o = self.open.as_mut().expect("live");
        Ok((o.live.as_mut().expect("live"), &self.bps))
    }
}

/// The stop a user breakpoint makes at `pc` in thread `tid`, if any.
fn bp_stop(
    bps: &Breakpoints,
    live: &mut Live,
    pc: u64,
    tid: u32,
    counts: &mut Counts,
) -> Option<Stop> {
    let mut ids = Vec::new();
    let mut notes = Vec::new();
    for b in bps.at(pc) {
        let mut at = At { live, tid };
        if let Some(note) = judge(b, &mut at, counts) {
            ids.push(b.id);
            notes.extend(note);
        }
    }
    (!ids.is_empty()).then(|| {
        let place = live
            .sym
            .as_ref()
            .map_or_else(|| format!("{pc:#x}"), |s| s.place(pc));
        let mut s = Stop::new(StoppedEventReason::Breakpoint, place);
        if !notes.is_empty() {
            s.description = format!("{}; {}", s.description, notes.join("; "));
        }
        s.hit = Some(ids);
        s
    })
}

/// What the logpoints at `pc` print as thread `tid` passes it.
pub(super) fn log_hit(
    bps: &Breakpoints,
    live: &mut Live,
    pc: u64,
    tid: u32,
    names: &std::collections::BTreeMap<u32, String>,
    out: &mut Vec<String>,
) {
    if out.len() >= MAX_HITS {
        return;
    }
    let step = live.core.step();
    let name = names.get(&tid).cloned().unwrap_or_default();
    let mut at = At { live, tid };
    out.extend(bps.log_lines(&mut at, pc, step, &name));
}

/// The stop a data breakpoint makes, if its condition and count say so.
pub(super) fn watch_stop(
    bps: &Breakpoints,
    live: &mut Live,
    w: &Watch,
    tid: u32,
    counts: &mut Counts,
) -> Option<Stop> {
    let b = bps.data_for(w)?;
    let mut at = At { live, tid };
    let note = judge(b, &mut at, counts)?;
    let mut s = Stop::new(
        StoppedEventReason::String("data breakpoint".into()),
        format!("{:?} of {:#x} ({} bytes)", w.kind, w.addr, w.len).to_lowercase(),
    );
    if let Some(n) = note {
        s.description = format!("{}; {n}", s.description);
    }
    s.hit = Some(vec![b.id]);
    Some(s)
}

impl Session {
    /// A forward move ended at `hit`: show it.
    fn finish_forward(&mut self, hit: Hit, stop: Option<Stop>, end_stop: Stop) -> Result<()> {
        match hit {
            Hit::End => {
                if let Some(l) = self.open.as_mut().and_then(|o| o.live.as_mut()) {
                    l.synced = false;
                }
                let end = self.open()?.run.meta.steps;
                self.move_to(end, end_stop)?;
                self.refine_crash();
                Ok(())
            }
            Hit::Signal { signo, .. } => {
                let stop = stop.unwrap_or_else(|| {
                    Stop::new(
                        StoppedEventReason::Exception,
                        format!("{} is about to be delivered", vmm::run::signal_name(signo)),
                    )
                });
                self.settle_with(stop, true)
            }
            _ => self.settle(stop.unwrap_or_else(|| Stop::new(StoppedEventReason::Step, "step"))),
        }
    }

    /// `next`, `stepIn`, `stepOut` by line; `next`/`stepIn` by instruction.
    pub fn step_forward(&mut self, tid: i64, kind: Kind, instruction: bool) -> Result<()> {
        let o = self.open()?;
        let end = o.run.meta.steps;
        if o.pos >= end {
            bail!("the run ends at step {end}: nothing after it");
        }
        let t = u32::try_from(tid).map_err(|_| anyhow!("`threadId`: no thread {tid}"))?;
        let end_stop = self.end_stop()?;
        let live = self.live()?;
        if live.regs(t).is_none() {
            bail!("`threadId`: thread {tid} is not alive here");
        }
        if instruction && kind != Kind::Out {
            return self.instruction_forward(t, end_stop);
        }
        let live = self.live()?;
        let start = Self::start_of(live, t, kind)?;
        let user = self.bps.stop_addrs();
        let mut addrs: BTreeSet<u64> = user.clone();
        if kind == Kind::Out {
            addrs.extend(start.ret);
            if start.ret.is_none() {
                bail!("thread {tid} is in its outermost frame: nothing to step out to");
            }
        } else {
            addrs.extend(start.stmts.iter().copied());
            addrs.extend(start.ret);
            addrs.extend(start.callees.iter().copied());
        }
        let mut counts = Counts::default();
        let mut stop: Option<Stop> = None;
        // Inside a callee stepped into: its frame and its first line.
        let mut callee: Option<(u64, Option<(String, u32)>)> = None;
        let (l, bps) = self.parts()?;
        l.synced = false;
        let result = l.scan(None, &addrs, None, |live, hit, _| match *hit {
            Hit::Bp {
                tid: at_tid, pc, ..
            } => {
                if user.contains(&pc) {
                    if let Some(s) = bp_stop(bps, live, pc, at_tid, &mut counts) {
                        stop = Some(s);
                        return Flow::Stop;
                    }
                }
                if at_tid != t {
                    return Flow::Go;
                }
                let sp = live.regs(t).map_or(0, |r| r.rsp);
                if Some(pc) == start.ret && sp >= start.cfa {
                    return Flow::Stop;
                }
                if kind == Kind::Out {
                    return Flow::Go;
                }
                if start.callees.contains(&pc) && sp < start.cfa && callee.is_none() {
                    let cfa = live.cfa(t).unwrap_or(sp + 8);
                    callee = Some((cfa, line_key(live, pc)));
                    return Flow::Track(live.function_stmts(pc));
                }
                if !live.lines.is_stmt_start(pc) {
                    return Flow::Go;
                }
                let Some(cfa) = live.cfa(t) else {
                    return Flow::Go;
                };
                let line = line_key(live, pc);
                if let Some((c1, first)) = &callee {
                    if cfa == *c1 && line != *first {
                        return Flow::Stop;
                    }
                }
                if cfa < start.cfa {
                    return Flow::Go;
                }
                if cfa > start.cfa || line.as_ref() != Some(&start.line) {
                    return Flow::Stop;
                }
                Flow::Go
            }
            Hit::Watch { tid: at_tid, watch } => {
                match watch_stop(bps, live, &watch, at_tid, &mut counts) {
                    Some(s) => {
                        stop = Some(s);
                        Flow::Stop
                    }
                    None => Flow::Go,
                }
            }
            Hit::Signal { .. } => Flow::Stop,
            Hit::Span | Hit::End => Flow::Stop,
        });
        if let Some(o) = self.open.as_mut() {
            o.stepping = Some(t);
        }
        let hit = result?;
        self.finish_forward(hit, stop, end_stop)
    }

    fn instruction_forward(&mut self, t: u32, end_stop: Stop) -> Result<()> {
        let live = self.live()?;
        live.synced = false;
        if live.tid() == t {
            match live.core.step_instruction()? {
                vmm::debug::Stop::Exited(_) => {
                    return self.finish_forward(Hit::End, None, end_stop)
                }
                vmm::debug::Stop::Signal { signo, .. } => {
                    return self.finish_forward(Hit::Signal { signo }, None, end_stop)
                }
                _ => {}
            }
            return self.settle(Stop::new(StoppedEventReason::Step, "one instruction"));
        }
        // Another thread holds the CPU: run until this one is back.
        let pc = live.regs(t).map_or(0, |r| r.rip);
        let addrs: BTreeSet<u64> = [pc].into();
        let hit = live.scan(None, &addrs, None, |_, hit, _| match *hit {
            Hit::Bp { tid, .. } if tid == t => Flow::Stop,
            Hit::Bp { .. } | Hit::Watch { .. } => Flow::Go,
            _ => Flow::Stop,
        })?;
        self.finish_forward(hit, None, end_stop)
    }
}

impl Session {
    /// `continue` with breakpoints that need the machine; `until` is the
    /// next event-name breakpoint's step and its stop.
    pub fn continue_forward(&mut self, until: Option<(u64, Stop)>, end_stop: Stop) -> Result<()> {
        let mut addrs = self.bps.stop_addrs();
        addrs.extend(self.bps.log_addrs());
        let names = self.open()?.run.meta.thread_names.clone();
        let mut counts = Counts::default();
        let mut stop: Option<Stop> = None;
        let mut logged: Vec<String> = Vec::new();
        let until_step = until.as_ref().map(|(s, _)| *s);
        let (l, bps) = self.parts()?;
        l.synced = false;
        let result = l.scan(None, &addrs, until_step, |live, hit, _| match *hit {
            Hit::Bp { tid, pc, .. } => {
                log_hit(bps, live, pc, tid, &names, &mut logged);
                match bp_stop(bps, live, pc, tid, &mut counts) {
                    Some(s) => {
                        stop = Some(s);
                        Flow::Stop
                    }
                    None => Flow::Go,
                }
            }
            Hit::Watch { tid, watch } => match watch_stop(bps, live, &watch, tid, &mut counts) {
                Some(s) => {
                    stop = Some(s);
                    Flow::Stop
                }
                None => Flow::Go,
            },
            _ => Flow::Stop,
        });
        let hit = result?;
        self.print_logged(logged);
        if let (Hit::Span, Some((_, s))) = (hit, until) {
            return self.settle_step(s);
        }
        self.finish_forward(hit, stop, end_stop)
    }

    /// Prints what the logpoints a move passed said, in the order they ran.
    pub(super) fn print_logged(&mut self, lines: Vec<String>) {
        for l in lines {
            self.later(wire::output(l));
        }
    }

    /// The core stands at the start of a step: show it as that step.
    pub(super) fn settle_step(&mut self, stop: Stop) -> Result<()> {
        self.settle(stop)?;
        let o = self.open.as_mut().expect("open");
        o.focus_tid = None;
        Ok(())
    }

    /// Every time a line ran in the whole recording: (position, thread),
    /// at most `MAX_HITS`, and how many there were.
    pub fn line_hits(
        &mut self,
        addrs: &BTreeSet<u64>,
        mut each: impl FnMut(&mut Live, Position, u32) -> bool,
    ) -> Result<(Vec<(Position, u32)>, usize)> {
        let mut out = Vec::new();
        let mut total = 0usize;
        let live = self.live()?;
        live.synced = false;
        live.scan(Some(0), addrs, None, |live, hit, _| {
            if let Hit::Bp {
                pos: Some(pos),
                tid,
                ..
            } = *hit
            {
                if each(live, pos, tid) {
                    total += 1;
                    if out.len() < MAX_HITS {
                        out.push((pos, tid));
                    }
                }
            }
            match hit {
                Hit::Bp { .. } | Hit::Watch { .. } | Hit::Signal { .. } => Flow::Go,
                _ => Flow::Stop,
            }
        })?;
        Ok((out, total))
    }

    /// Travels to a position found by `line_hits`.
    pub fn go_to_position(&mut self, pos: Position, stop: Stop) -> Result<()> {
        if let Some(l) = self.open.as_mut().and_then(|o| o.live.as_mut()) {
            if l.core.is_modified() {
                // Back to the recording.
                l.synced = false;
            }
        }
        let live = self.live()?;
        live.core.go_to(pos)?;
        self.settle(stop)
    }
}
