//! The state of a run open in a debug session: the run and its events,
//! the position (a step, and a place inside it), the view of the machine
//! there, and the debug core that reached it.

use super::live::Live;
use super::replies::{
    body, InStep, Perturbation, Position, PositionThread, Timeline, TimelineCompare,
};
use super::view::{self, View};
use anyhow::{bail, Result};
use dap::types::StoppedEventReason;
use serde_json::Value;
use vmm::record::switches::Switch;
use vmm::run::Event as RunEvent;
use vmm::store::{Run, Store};

/// A run opened in the session.
pub struct Open {
    pub store: Store,
    pub run: Run,
    pub events: Vec<RunEvent>,
    pub switches: Vec<Switch>,
    pub compare: Option<Run>,
    pub deciding: Option<u64>,
    pub pos: u64,
    pub view: View,
    /// The thread the last stepping request was for.
    pub stepping: Option<u32>,
    /// The position inside the step, when a move went inside one (at the
    /// run's fatal fault, inside the step before `pos`).
    pub at: Option<vmm::debug::Position>,
    /// The debug core, opened on first use.
    pub live: Option<Live>,
    /// The thread a stop inside a step is about.
    pub focus_tid: Option<u32>,
    /// The last gotoTargets' positions, by id - GOTO_BASE.
    pub goto_targets: Vec<(vmm::debug::Position, u32)>,
    /// Variables and values handed out at the position (variables.rs).
    pub vars: super::handles::Handles,
}

/// A stop to report.
pub struct Stop {
    pub reason: StoppedEventReason,
    pub description: String,
    pub hit: Option<Vec<i64>>,
}

impl Stop {
    pub fn new(reason: StoppedEventReason, description: impl Into<String>) -> Stop {
        Stop {
            reason,
            description: description.into(),
            hit: None,
        }
    }
}

impl Open {
    /// The machine at the start of `step` by the debug core (opened with
    /// `budget` for its snapshots when it is not yet), which stays there:
    /// its snapshots make a travel cheap. None when the process has ended
    /// by then (a seek shows the step before).
    pub fn core_view(&mut self, step: u64, budget: u64) -> Result<Option<View>> {
        if step >= self.run.meta.steps {
            return Ok(None);
        }
        if !self.run.dir.join("manifest.json").exists() {
            bail!("run {} was removed from the store", self.run.id);
        }
        // Written to: back to the recording.
        if self.live.as_ref().is_some_and(|l| l.core.is_modified()) {
            self.live = None;
        }
        let live = match &mut self.live {
            Some(l) => l,
            None => self
                .live
                .insert(Live::open(&self.run, &self.store, step, budget)?),
        };
        match live.core.go_to_step(step) {
            Ok(()) => {}
            Err(vmm::debug::DebugError::Ended(_)) => {
                live.synced = false;
                return Ok(None);
            }
            Err(e) => return Err(e.into()),
        }
        live.synced = true;
        Ok(Some(view::of_kernel(live.core.kernel(), step)))
    }

    pub fn new(
        store: Store,
        run: Run,
        step: u64,
        compare: Option<Run>,
        deciding: Option<u64>,
    ) -> Result<Open> {
        let events = run.events()?;
        let switches = run.switches()?;
        let view = view::seek(&run, step)?;
        Ok(Open {
            store,
            run,
            events,
            switches,
            compare,
            deciding,
            pos: step,
            view,
            stepping: None,
            at: None,
            live: None,
            focus_tid: None,
            goto_targets: Vec::new(),
            vars: Default::default(),
        })
    }

    /// The events recorded at `step`.
    pub fn events_at(&self, step: u64) -> &[RunEvent] {
        let a = self.events.partition_point(|e| e.step < step);
        let b = self.events.partition_point(|e| e.step <= step);
        &self.events[a..b]
    }

    /// The thread a stop at the position is about: the one whose event the
    /// step is, else the one on the CPU.
    pub fn focus(&self) -> Option<(u32, u32)> {
        if let (Some(_), Some(tid)) = (self.at, self.focus_tid) {
            if let Some(t) = self.view.threads.iter().find(|t| t.tid == tid) {
                return Some((t.pid, t.tid));
            }
        }
        let here = self.events_at(self.pos);
        if let Some(e) = here.iter().find(|e| Some(e.tid) == self.stepping) {
            return Some((e.pid, e.tid));
        }
        if let Some(e) = here.first() {
            return Some((e.pid, e.tid));
        }
        self.view
            .threads
            .iter()
            .find(|t| t.current)
            .or(self.view.threads.first())
            .map(|t| (t.pid, t.tid))
    }

    pub fn thread_name(&self, tid: u32) -> String {
        self.run
            .meta
            .thread_names
            .get(&tid)
            .cloned()
            .or_else(|| {
                self.view
                    .threads
                    .iter()
                    .find(|t| t.tid == tid)
                    .map(|t| t.name.clone())
            })
            .unwrap_or_default()
    }

    /// `rewind/position`.
    pub fn position(&self) -> Value {
        let thread = self.focus().map(|(pid, tid)| PositionThread {
            pid,
            tid,
            name: view::thread_label(pid, tid, &self.thread_name(tid)),
        });
        body(&Position {
            run: self.run.id.clone(),
            step: self.pos,
            steps: self.run.meta.steps,
            state_step: self.view.state_step,
            virtual_ns: self.view.virtual_ns,
            thread,
            events: self
                .events_at(self.pos)
                .iter()
                .map(view::run_event)
                .collect(),
            in_step: self.at.map(|p| InStep {
                step: p.step,
                pc: format!("{:#x}", p.pc),
                hit: p.hit,
            }),
        })
    }

    /// `rewind/timeline`.
    pub fn timeline(&self) -> Value {
        let bookmarks = self.run.bookmarks().unwrap_or_default();
        let compare = self.compare.as_ref().map(|c| {
            let other = c.events().unwrap_or_default();
            let d = vmm::record::diff::first_divergence(&self.events, &other, 1);
            TimelineCompare {
                run: c.id.clone(),
                identical: d.is_none(),
                step: d.as_ref().and_then(|d| d.left_step().or(d.right_step())),
                other_step: d.as_ref().and_then(|d| d.right_step()),
            }
        });
        let perturbations = self.run.meta.perturbed.iter().map(|p| Perturbation {
            step: p.step,
            what: p.what.to_string(),
        });
        body(&Timeline {
            run: self.run.id.clone(),
            name: self.run.meta.name.clone(),
            status: self.run.meta.status.clone(),
            steps: self.run.meta.steps,
            virtual_ns: self.run.meta.virtual_ns,
            fork_of: self.run.manifest.fork_of.clone(),
            events: self
                .events
                .iter()
                .filter(|e| view::of_interest(e))
                .map(view::run_event)
                .collect(),
            bookmarks,
            perturbations: perturbations.collect(),
            deciding: self.deciding,
            compare,
        })
    }
}

/// Thread `tid` at the position.
pub fn thread(o: &Open, tid: i64) -> Result<&vmm::inspect::ThreadAt> {
    o.view
        .threads
        .iter()
        .find(|t| t.tid as i64 == tid)
        .ok_or_else(|| anyhow::anyhow!("thread {tid} is not alive at step {}", o.pos))
}
