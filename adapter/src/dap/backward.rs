//! Moves backwards inside steps: `stepBack` by line or instruction,
//! `rewind/reverseStepIn` and `reverseContinue` with breakpoints. Each
//! scans a window of steps before the position, widening it until the stop
//! is found, then travels to it (`Session::go_to` of the core).

use super::breakpoints::{At, Counts};
use super::live::{Flow, Hit, Reach};
use super::moves::{line_key, log_hit, watch_stop, Kind};
use super::open::Stop;
use super::session::Session;
use anyhow::{anyhow, bail, Result};
use dap::types::StoppedEventReason;
use std::collections::BTreeSet;
use vmm::debug::{DebugError, Position};

/// A backward scan widens its window of steps by this factor.
const WIDEN: u64 = 32;
/// At most this many thread arrivals are kept by one backward line step.
const MAX_ARRIVALS: usize = 2_000_000;

/// What logpoints printed on the way back, each after how many hits.
type Logged = Vec<(usize, String)>;

/// A breakpoint hit a backward continue may stop at.
struct BackHit {
    reach: Reach,
    /// The hit's position, when it is a step's (not a data breakpoint's).
    pos: Option<Position>,
    stop: Stop,
    /// The breakpoint's id.
    id: i64,
}

/// A thread at a statement start, seen by a backward scan.
struct Arrival {
    pos: Position,
    line: Option<(u32, u32)>,
    cfa: u64,
}

/// For a reverse step in: the last line a callee of the frame at `cfa`
/// ran after arrival `from` (the start of the line stepped back to), as
/// the index of that line's first arrival in the callee's frame.
fn callee_line_start(arrivals: &[Arrival], from: usize, cfa: u64) -> Option<usize> {
    let k = (from + 1..arrivals.len())
        .rev()
        .find(|&k| arrivals[k].cfa < cfa)?;
    let (line, callee) = (arrivals[k].line, arrivals[k].cfa);
    let mut first = k;
    for m in (from + 1..k).rev() {
        let a = &arrivals[m];
        if a.cfa < callee {
            continue;
        }
        if a.cfa != callee || a.line != line {
            break;
        }
        first = m;
    }
    Some(first)
}

impl Session {
    /// The position as the core names it (the start of the position's step
    /// when it is not refined).
    fn here(&mut self) -> Result<Position> {
        if let Some(p) = self.open()?.at {
            return Ok(p);
        }
        let live = self.live()?;
        Ok(live.core.position()?)
    }

    /// `stepBack` by line (over calls), or by instruction; `into` (the
    /// `rewind/reverseStepIn` request): when a function with lines was
    /// called since the previous line began, into it, at the start of the
    /// last line it ran (gdb's `reverse-step`).
    pub fn step_backward(&mut self, tid: i64, instruction: bool, into: bool) -> Result<()> {
        let t = self.back_thread(tid)?;
        if instruction {
            return self.instruction_backward();
        }
        let p = self.here()?;
        let live = self.live()?;
        let start = Self::start_of(live, t, if into { Kind::In } else { Kind::Over })?;
        let p_mid_line =
            !live.lines.is_stmt_start(p.pc) || line_key(live, p.pc).as_ref() != Some(&start.line);
        let mut addrs = start.stmts.clone();
        for c in &start.callees {
            addrs.extend(live.function_stmts(*c));
        }
        addrs.insert(p.pc);
        let lines = live.lines.clone();
        let want_line = |a: &Arrival| -> Option<(String, u32)> {
            a.line.map(|(f, l)| (lines.file(f).to_string(), l))
        };
        let mut from = p.step;
        loop {
            let arrivals = self.arrivals_since(from, &addrs, p, t)?;
            // Back over deeper frames to the previous line of this frame (or
            // the caller's), then to that line's first statement.
            let target = arrivals.iter().rposition(|a| {
                a.cfa >= start.cfa
                    && (a.cfa != start.cfa
                        || want_line(a).as_ref() != Some(&start.line)
                        || p_mid_line)
            });
            if let Some(ti) = target.and_then(|ti| line_first(&arrivals, ti, from)) {
                let mut pos = arrivals[ti].pos;
                if into {
                    if let Some(k) = callee_line_start(&arrivals, ti, start.cfa) {
                        pos = arrivals[k].pos;
                    }
                }
                self.live_mut()?.core.go_to(pos)?;
                return self.settle(Stop::new(StoppedEventReason::Step, "step back"));
            }
            if from == 0 {
                if target.is_none() {
                    self.live_mut()?.core.go_to_step(0)?;
                    return self
                        .settle(Stop::new(StoppedEventReason::Entry, "the start of the run"));
                }
                continue;
            }
            let back = (p.step - from + 1).saturating_mul(WIDEN);
            from = p.step.saturating_sub(back);
        }
    }

    /// The thread a backward step moves, once it is known the core can go
    /// back: not at step 0, not diverged, the thread alive here.
    fn back_thread(&mut self, tid: i64) -> Result<u32> {
        let o = self.open()?;
        if o.pos == 0 && o.at.is_none_or(|p| p.step == 0 && p.hit <= 1) {
            bail!("already at step 0: nothing before it");
        }
        let t = u32::try_from(tid).map_err(|_| anyhow!("`threadId`: no thread {tid}"))?;
        let live = self.live()?;
        if live.core.is_modified() {
            return Err(DebugError::Diverged.into());
        }
        if live.regs(t).is_none() {
            bail!("`threadId`: thread {tid} is not alive here");
        }
        Ok(t)
    }

    /// `stepBack` by one instruction.
    fn instruction_backward(&mut self) -> Result<()> {
        let live = self.live()?;
        live.synced = false;
        match live.core.reverse_step_instruction()? {
            vmm::debug::Stop::Beginning { .. } => {
                self.settle(Stop::new(StoppedEventReason::Entry, "the start of the run"))
            }
            _ => self.settle(Stop::new(StoppedEventReason::Step, "one instruction back")),
        }
    }

    /// Thread `t`'s arrivals at `addrs` from step `from` up to position
    /// `p` (at most `MAX_ARRIVALS`); an error when `p` is not met again.
    fn arrivals_since(
        &mut self,
        from: u64,
        addrs: &BTreeSet<u64>,
        p: Position,
        t: u32,
    ) -> Result<Vec<Arrival>> {
        let mut arrivals: Vec<Arrival> = Vec::new();
        let mut reached = false;
        let live = self.live()?;
        live.synced = false;
        live.scan(Some(from), addrs, None, |live, hit, _| match *hit {
            Hit::Bp { pos, tid, pc } => {
                if pos == Some(p) {
                    reached = true;
                    return Flow::Stop;
                }
                if tid == t && (pc != p.pc || live.lines.is_stmt_start(pc)) {
                    if let (Some(pos), Some(cfa)) = (pos, live.cfa(t)) {
                        if arrivals.len() < MAX_ARRIVALS {
                            arrivals.push(Arrival {
                                pos,
                                line: live.line_at(pc),
                                cfa,
                            });
                        }
                    }
                }
                Flow::Go
            }
            Hit::Watch { .. } | Hit::Signal { .. } => Flow::Go,
            _ => Flow::Stop,
        })?;
        if !reached {
            bail!("cannot find position {p} again in the recording");
        }
        Ok(arrivals)
    }

    /// `reverseContinue` with breakpoints that need the machine; `floor` is
    /// the previous event-name breakpoint's step and its stop.
    pub fn continue_backward(&mut self, floor: Option<(u64, Stop)>) -> Result<()> {
        let p = self.here()?;
        if self.live()?.core.is_modified() {
            return Err(DebugError::Diverged.into());
        }
        let low = floor.as_ref().map_or(0, |(s, _)| *s);
        let mut addrs = self.bps.stop_addrs();
        addrs.extend(self.bps.log_addrs());
        addrs.insert(p.pc);
        let mut from = p.step.max(low);
        loop {
            let (mut hits, logged) = self.hits_since(from, &addrs, p)?;
            if let Some(i) = self.latest_firing(&hits) {
                // The logpoints passed on the way back: from the stop on.
                self.print_logged(
                    logged
                        .into_iter()
                        .filter(|(n, _)| *n >= i)
                        .map(|l| l.1)
                        .collect(),
                );
                let h = hits.swap_remove(i);
                let live = self.live_mut()?;
                match h.pos {
                    Some(pos) => live.core.go_to(pos)?,
                    None => live.reach(&addrs, h.reach)?,
                }
                return self.settle(h.stop);
            }
            if from <= low {
                self.print_logged(logged.into_iter().map(|l| l.1).collect());
                let live = self.live_mut()?;
                live.core.go_to_step(low)?;
                let stop = match floor {
                    Some((_, s)) => s,
                    None => Stop::new(StoppedEventReason::Entry, "the start of the run"),
                };
                return self.settle_step(stop);
            }
            let back = (p.step - from + 1).saturating_mul(WIDEN);
            from = p.step.saturating_sub(back).max(low);
        }
    }

    /// Every breakpoint hit from step `from` up to position `p` whose
    /// condition holds (hit counts are judged later, backwards), and what
    /// the logpoints printed on the way, after how many hits; an error when
    /// `p` is not met again.
    fn hits_since(
        &mut self,
        from: u64,
        addrs: &BTreeSet<u64>,
        p: Position,
    ) -> Result<(Vec<BackHit>, Logged)> {
        let names = self.open()?.run.meta.thread_names.clone();
        let mut hits: Vec<BackHit> = Vec::new();
        let mut logged: Logged = Vec::new();
        let mut reached = false;
        let (l, bps) = self.parts()?;
        l.synced = false;
        l.scan(Some(from), addrs, None, |live, hit, reach| {
            let mut counts = Counts::default();
            match *hit {
                Hit::Bp { pos, tid, pc } => {
                    if pos == Some(p) {
                        reached = true;
                        return Flow::Stop;
                    }
                    let mut lines = Vec::new();
                    log_hit(bps, live, pc, tid, &names, &mut lines);
                    logged.extend(lines.into_iter().map(|l| (hits.len(), l)));
                    for b in bps.at(pc) {
                        let mut at = At { live, tid };
                        let holds = b.condition.as_ref().is_none_or(|c| at.eval(c) != Ok(0));
                        if holds {
                            let place = live
                                .sym
                                .as_ref()
                                .map_or_else(|| format!("{pc:#x}"), |s| s.place(pc));
                            let mut stop = Stop::new(StoppedEventReason::Breakpoint, place);
                            stop.hit = Some(vec![b.id]);
                            hits.push(BackHit {
                                reach,
                                pos,
                                stop,
                                id: b.id,
                            });
                        }
                    }
                    Flow::Go
                }
                Hit::Watch { tid, watch } => {
                    // The position itself can be a data breakpoint's
                    // stop: just after the write, at its pc.
                    if live.core.here_position() == Some(p) {
                        reached = true;
                        return Flow::Stop;
                    }
                    if let Some(stop) = watch_stop(bps, live, &watch, tid, &mut counts) {
                        let id = stop.hit.as_ref().map_or(0, |h| h[0]);
                        hits.push(BackHit {
                            reach,
                            pos: None,
                            stop,
                            id,
                        });
                    }
                    Flow::Go
                }
                Hit::Signal { .. } => Flow::Go,
                _ => Flow::Stop,
            }
        })?;
        if !reached {
            bail!("cannot find position {p} again in the recording");
        }
        Ok((hits, logged))
    }

    /// The latest hit whose hit condition, counted from the position
    /// backwards, fires.
    fn latest_firing(&self, hits: &[BackHit]) -> Option<usize> {
        let mut n: std::collections::HashMap<i64, u64> = Default::default();
        for (i, h) in hits.iter().enumerate().rev() {
            let c = n.entry(h.id).or_insert(0);
            *c += 1;
            let fires = self
                .bps
                .data
                .iter()
                .chain(self.bps.source.values().flatten())
                .chain(&self.bps.symbols)
                .chain(&self.bps.instructions)
                .find(|b| b.id == h.id)
                .and_then(|b| b.hit)
                .is_none_or(|hc| hc.fires(*c));
            if fires {
                return Some(i);
            }
        }
        None
    }
}

/// The first arrival of the line that arrival `ti` is on, in its frame
/// (deeper frames passed over); None when a scan from step `from` (not the
/// run's start) may have missed the line's beginning.
fn line_first(arrivals: &[Arrival], mut ti: usize, from: u64) -> Option<usize> {
    let (tl, tc) = (arrivals[ti].line, arrivals[ti].cfa);
    let mut j = ti;
    loop {
        if j == 0 {
            return (from == 0).then_some(ti);
        }
        j -= 1;
        let a = &arrivals[j];
        if a.cfa < tc {
            continue;
        }
        if a.cfa != tc || a.line != tl {
            return Some(ti);
        }
        ti = j;
    }
}
