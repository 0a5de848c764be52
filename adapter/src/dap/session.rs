//! What one debug session shares among its concerns: the run open in it
//! (`open.rs`), its breakpoints, the launch's options, and the messages a
//! request sends after its response; and the moves every concern makes:
//! to a step, to another run, to a stop. Requests reach it through
//! `dispatch.rs`.

use super::breakpoints::Breakpoints;
use super::conn::{Control, Out};
use super::launch::Options;
use super::open::{Open, Stop};
use super::view;
use super::wire;
use anyhow::{anyhow, bail, Result};
use dap::events::{Event, InvalidatedEventBody, StoppedEventBody};
use dap::types::{InvalidatedAreas, StoppedEventReason};
use serde_json::Value;
use std::sync::Arc;
use vmm::run::{Event as RunEvent, EventKind};
use vmm::store::Run;

pub struct Session {
    out: Out,
    control: Arc<Control>,
    /// The run open, once `launch` or `attach` opened one.
    pub open: Option<Open>,
    /// Messages to send after the current response.
    after: Vec<Value>,
    /// Function breakpoints: event names (syscalls, signals, event kinds).
    fn_breaks: Vec<(i64, String)>,
    /// Paths of sources sent by reference (`sourceReference` is index + 1).
    source_refs: Vec<String>,
    /// Source, symbol, instruction and data breakpoints.
    pub bps: Breakpoints,
    options: Options,
}

impl Session {
    pub fn new(out: Out, control: Arc<Control>) -> Session {
        Session {
            out,
            control,
            open: None,
            after: Vec::new(),
            fn_breaks: Vec::new(),
            bps: Breakpoints::default(),
            options: Options::default(),
            source_refs: Vec::new(),
        }
    }

    /// Where messages go now (progress of long work), not after the response.
    pub fn out(&self) -> &Out {
        &self.out
    }

    /// Whether the request `seq` or its progress was cancelled, or the client left.
    /// What the reader shares: cancellations, and whether the client left.
    pub fn control(&self) -> Arc<Control> {
        self.control.clone()
    }

    pub fn is_cancelled(&self, seq: i64, progress: &str) -> bool {
        self.control.is_cancelled(seq, progress)
    }

    /// Queues a message to send after the response.
    pub fn later(&mut self, v: Value) {
        self.after.push(v);
    }

    /// The messages queued, to send after the response (or drop after an error).
    pub fn take_later(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.after)
    }

    /// The launch's options.
    pub fn options(&self) -> Options {
        self.options
    }

    /// Opens `open` with the launch's `options`, replacing nothing.
    pub fn set_open(&mut self, open: Open, options: Options) {
        self.open = Some(open);
        self.options = options;
    }

    /// Gives back the snapshots over this session's share of the process's
    /// budget (it shrinks as other sessions open).
    pub fn fit_snapshots(&mut self) {
        if let Some(live) = self.open.as_mut().and_then(|o| o.live.as_mut()) {
            live.core.fit_snapshot_budget();
        }
    }

    /// Closes the run (its machine stops; the store is as it was).
    pub fn close(&mut self) {
        self.open = None;
    }

    pub fn open(&self) -> Result<&Open> {
        self.open
            .as_ref()
            .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))
    }

    pub fn set_event_breaks(&mut self, b: Vec<(i64, String)>) {
        self.fn_breaks = b;
    }

    /// The `sourceReference` of a path the client cannot read itself.
    pub fn source_ref(&mut self, path: &str) -> i64 {
        match self.source_refs.iter().position(|p| p == path) {
            Some(i) => i as i64 + 1,
            None => {
                self.source_refs.push(path.to_string());
                self.source_refs.len() as i64
            }
        }
    }

    pub fn source_path(&self, r: i64) -> Option<String> {
        usize::try_from(r - 1)
            .ok()
            .and_then(|i| self.source_refs.get(i))
            .cloned()
    }

    pub fn clear_stepping(&mut self) {
        if let Some(o) = self.open.as_mut() {
            o.stepping = None;
        }
    }

    /// Queues `stopped` and `rewind/position` for the position.
    pub fn stopped(&mut self, s: Stop) {
        // What variables referred to is gone with the position.
        if let Some(o) = self.open.as_mut() {
            o.vars = Default::default();
        }
        let Some(o) = &self.open else { return };
        let tid = o.focus().map(|(_, t)| t as i64);
        let pos = o.position();
        self.later(wire::event(Event::Stopped(StoppedEventBody {
            reason: s.reason,
            description: Some(s.description),
            thread_id: tid,
            preserve_focus_hint: Some(false),
            text: None,
            all_threads_stopped: Some(true),
            hit_breakpoint_ids: s.hit,
        })));
        self.later(wire::custom_event("rewind/position", pos));
    }

    /// Moves to `step` (seeking there) and queues the stop.
    pub fn move_to(&mut self, step: u64, stop: Stop) -> Result<()> {
        let o = self
            .open
            .as_mut()
            .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))?;
        let budget = self.options.snapshot_budget;
        let view = match o.core_view(step, budget)? {
            Some(v) => v,
            None => {
                if let Some(l) = o.live.as_mut() {
                    l.synced = false;
                }
                view::seek(&o.run, step)?
            }
        };
        o.pos = step;
        o.view = view;
        o.at = None;
        o.focus_tid = None;
        self.refine_crash();
        self.stopped(stop);
        Ok(())
    }

    /// Switches the session to another run at `step`, telling the client
    /// everything it showed is stale.
    pub fn switch_to(&mut self, run: Run, step: u64, stop: Stop) -> Result<()> {
        let o = self.open()?;
        let (compare, deciding) = (o.compare.clone(), o.deciding);
        let store = crate::app::store()?;
        let open = Open::new(store, run, step, compare, deciding)?;
        self.open = Some(open);
        self.later(wire::event(Event::Invalidated(InvalidatedEventBody {
            areas: Some(vec![InvalidatedAreas::All]),
            ..Default::default()
        })));
        let tl = self.open()?.timeline();
        self.later(wire::custom_event("rewind/timeline", tl));
        self.stopped(stop);
        Ok(())
    }

    /// next/stepIn/stepOut (forward) and stepBack: to the thread's next
    /// (previous) event, else one step.
    pub fn step_thread(&mut self, tid: i64, forward: bool) -> Result<Option<Value>> {
        let o = self.open()?;
        let end = o.run.meta.steps;
        let pos = o.pos;
        let of_thread = |e: &&RunEvent| e.tid as i64 == tid;
        let to = if forward {
            if pos >= end {
                bail!("the run ends at step {end}: nothing after it");
            }
            o.events
                .iter()
                .filter(of_thread)
                .find(|e| e.step > pos)
                .map_or(pos + 1, |e| e.step)
        } else {
            if pos == 0 {
                bail!("already at step 0: nothing before it");
            }
            o.events
                .iter()
                .rev()
                .filter(of_thread)
                .find(|e| e.step < pos)
                .map_or(pos - 1, |e| e.step)
        };
        if let Some(o) = self.open.as_mut() {
            o.stepping = u32::try_from(tid).ok();
        }
        let stop = self
            .stop_at_end(to)
            .unwrap_or_else(|| Stop::new(StoppedEventReason::Step, format!("step {to}")));
        self.move_to(to, stop)?;
        Ok(None)
    }

    /// The stop at the run's end.
    pub fn end_stop(&self) -> Result<Stop> {
        let end = self.open()?.run.meta.steps;
        Ok(self.stop_at_end(end).expect("the end"))
    }

    /// The stop for the run's last step, when `to` is it.
    fn stop_at_end(&self, to: u64) -> Option<Stop> {
        let o = self.open.as_ref()?;
        (to >= o.run.meta.steps).then(|| {
            let reason = if o.run.meta.status.starts_with("killed") {
                StoppedEventReason::Exception
            } else {
                StoppedEventReason::Step
            };
            Stop::new(reason, format!("the run ended here: {}", o.run.meta.status))
        })
    }

    fn break_hit(&self, e: &RunEvent) -> Option<i64> {
        self.fn_breaks
            .iter()
            .find(|(_, n)| matches_break(n, e))
            .map(|(id, _)| *id)
    }

    pub fn forward_to_break(&self) -> Result<(u64, Stop)> {
        let o = self.open()?;
        let end = o.run.meta.steps;
        if o.pos >= end {
            bail!("the run ends at step {end}: nothing after it");
        }
        for e in o.events.iter().filter(|e| e.step > o.pos) {
            if let Some(id) = self.break_hit(e) {
                let mut s = Stop::new(function_breakpoint(), view::event_text(e));
                s.hit = Some(vec![id]);
                return Ok((e.step, s));
            }
        }
        let stop = self.stop_at_end(end).expect("the end");
        Ok((end, stop))
    }

    pub fn backward_to_break(&self) -> Result<(u64, Stop)> {
        let o = self.open()?;
        if o.pos == 0 {
            bail!("already at step 0: nothing before it");
        }
        for e in o.events.iter().rev().filter(|e| e.step < o.pos) {
            if let Some(id) = self.break_hit(e) {
                let mut s = Stop::new(function_breakpoint(), view::event_text(e));
                s.hit = Some(vec![id]);
                return Ok((e.step, s));
            }
        }
        Ok((
            0,
            Stop::new(StoppedEventReason::Entry, "the start of the run"),
        ))
    }
}

/// Whether a function breakpoint's name matches an event: a system call's
/// name (`write`), a signal (`SIGSEGV`, or `signal` for any), or an event
/// kind (`threadStart`, `threadExit`, `exit`, `sdk`).
pub fn matches_break(name: &str, e: &RunEvent) -> bool {
    let name = name.trim();
    let name = name.strip_prefix("syscall:").unwrap_or(name);
    match &e.kind {
        EventKind::Syscall { name: n, .. } => n == name,
        EventKind::Signal { signo, .. } => {
            name == "signal" || vmm::run::signal_name(*signo) == name
        }
        _ => view::kind_name(e) == name,
    }
}

/// DAP's `function breakpoint` (the crate's `Function` says `function`).
fn function_breakpoint() -> StoppedEventReason {
    StoppedEventReason::String("function breakpoint".into())
}
