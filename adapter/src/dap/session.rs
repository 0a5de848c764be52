//! One debug session: the run opened, the position (a step), and the
//! standard requests. Requests are served one at a time, in order, on the
//! session's own thread; what a request makes happen (stops, invalidation,
//! custom events) is sent after its response.

use super::breakpoints::Breakpoints;
use super::custom::ForkBy;
use super::launch::{self, FirstStop};
use super::live::Live;
use super::moves::{Kind, GOTO_BASE};
use super::view::{self, View};
use super::{wire, Control, Out};
use anyhow::{anyhow, bail, Result};
use dap::events::{Event, InvalidatedEventBody, StoppedEventBody};
use dap::requests::Command;
use dap::responses::{
    ContinueResponse, EvaluateResponse, ResponseBody, ScopesResponse, StackTraceResponse,
    ThreadsResponse, VariablesResponse,
};
use dap::types::{
    Capabilities, InvalidatedAreas, Scope, StackFrame, StackFramePresentationhint,
    StoppedEventReason, Thread, Variable,
};
use serde_json::{json, Value};
use std::sync::Arc;
use vmm::record::switches::Switch;
use vmm::record::{Event as RunEvent, EventKind};
use vmm::store::{Run, Store};

/// Variable references: kind in the high bits, thread id in the low.
const REGISTERS: i64 = 1 << 32;
const STEP_SCOPE: i64 = 2 << 32;

/// The answer to requests after `terminate`.
const TERMINATED: &str = "the session is terminated: send `disconnect`";

pub struct Session {
    pub out: Out,
    pub control: Arc<Control>,
    initialized: bool,
    configured: bool,
    pub open: Option<Open>,
    /// The first stop, sent once both launch and configurationDone came.
    first_stop: Option<Stop>,
    /// Messages to send after the current response.
    after: Vec<Value>,
    ended: bool,
    /// Function breakpoints: event names (syscalls, signals, event kinds).
    fn_breaks: Vec<(i64, String)>,
    /// Paths of sources sent by reference (`sourceReference` is index + 1).
    pub source_refs: Vec<String>,
    /// Source, symbol, instruction and data breakpoints.
    pub bps: Breakpoints,
    /// `stepping: "events"` at launch: next/stepIn/stepOut/stepBack move
    /// between the thread's events, as before line stepping.
    pub event_steps: bool,
    /// launch's `forkWith`: what `restartFrame` forks with.
    pub fork_by: ForkBy,
    /// launch's `snapshotMemory`: the debug core's snapshots' budget, bytes.
    pub snapshot_budget: u64,
    /// `terminate` came: the machine is stopped and only `disconnect` is left.
    terminated: bool,
}

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
    pub vars: super::variables::Handles,
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
    fn core_view(&mut self, step: u64, budget: u64) -> Result<Option<View>> {
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

    fn thread_name(&self, tid: u32) -> String {
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
        let thread = self.focus().map(|(pid, tid)| {
            json!({"pid": pid, "tid": tid, "name": view::thread_label(pid, tid, &self.thread_name(tid))})
        });
        let mut v = self.position_of_step(thread);
        if let Some(p) = self.at {
            v["inStep"] = json!({"step": p.step, "pc": format!("{:#x}", p.pc), "hit": p.hit});
        }
        v
    }

    fn position_of_step(&self, thread: Option<Value>) -> Value {
        json!({
            "run": self.run.id,
            "step": self.pos,
            "steps": self.run.meta.steps,
            "stateStep": self.view.state_step,
            "virtualNs": self.view.virtual_ns,
            "thread": thread,
            "events": self.events_at(self.pos).iter().map(view::event_json).collect::<Vec<_>>(),
        })
    }

    /// `rewind/timeline`.
    pub fn timeline(&self) -> Value {
        let bookmarks = self.run.bookmarks().unwrap_or_default();
        let divergence = self.compare.as_ref().map(|c| {
            let other = c.events().unwrap_or_default();
            let d = vmm::record::diff::first_divergence(&self.events, &other, 1);
            json!({
                "run": c.id,
                "identical": d.is_none(),
                "step": d.as_ref().and_then(|d| d.left_step().or(d.right_step())),
                "otherStep": d.as_ref().and_then(|d| d.right_step()),
            })
        });
        json!({
            "run": self.run.id,
            "name": self.run.meta.name,
            "status": self.run.meta.status,
            "steps": self.run.meta.steps,
            "virtualNs": self.run.meta.virtual_ns,
            "forkOf": self.run.manifest.fork_of,
            "events": self.events.iter().filter(|e| view::of_interest(e)).map(view::event_json).collect::<Vec<_>>(),
            "bookmarks": bookmarks,
            "perturbations": self.run.meta.perturbed.iter().map(|p| json!({"step": p.step, "what": p.what.to_string()})).collect::<Vec<_>>(),
            "deciding": self.deciding,
            "compare": divergence,
        })
    }
}

impl Session {
    pub fn new(out: Out, control: Arc<Control>) -> Session {
        Session {
            out,
            control,
            initialized: false,
            configured: false,
            open: None,
            first_stop: None,
            after: Vec::new(),
            ended: false,
            fn_breaks: Vec::new(),
            bps: Breakpoints::default(),
            event_steps: false,
            fork_by: ForkBy::default(),
            snapshot_budget: vmm::debug::DEFAULT_SNAPSHOT_BUDGET,
            terminated: false,
            source_refs: Vec::new(),
        }
    }

    pub fn serve(mut self, rx: std::sync::mpsc::Receiver<wire::Incoming>) {
        while let Ok(msg) = rx.recv() {
            self.handle(msg);
            if self.ended {
                break;
            }
        }
    }

    /// Queues a message to send after the response.
    pub fn later(&mut self, v: Value) {
        self.after.push(v);
    }

    fn handle(&mut self, msg: wire::Incoming) {
        let profile = super::profile::Profile::start(self);
        let (seq, name, result) = match msg {
            wire::Incoming::Ignored => return,
            wire::Incoming::Invalid { seq, name, why } => (seq, name, Err(anyhow!(why))),
            wire::Incoming::Custom { seq, name, args } => {
                let r = if !self.initialized {
                    Err(anyhow!("send `initialize` first"))
                } else if self.terminated {
                    Err(anyhow!(TERMINATED))
                } else {
                    super::custom::handle(self, seq, &name, &args).map(Some)
                };
                (seq, name, r)
            }
            wire::Incoming::Standard { seq, name, command } => {
                let r = self.standard(seq, &name, *command);
                (seq, name, r)
            }
        };
        let name = if name.is_empty() {
            "unknown".to_string()
        } else {
            name
        };
        match result {
            Ok(body) => self.out.send(wire::response(seq, &name, body)),
            Err(e) => {
                self.after.clear();
                self.out
                    .send(wire::error_response(seq, &name, &crate::util::one_line(&e)))
            }
        }
        for v in std::mem::take(&mut self.after) {
            self.out.send(v);
        }
        if let Some(p) = profile {
            p.report(self, &name);
        }
    }

    pub(super) fn open(&self) -> Result<&Open> {
        self.open
            .as_ref()
            .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))
    }

    fn standard(&mut self, seq: i64, name: &str, command: Command) -> Result<Option<Value>> {
        if !self.initialized && !matches!(command, Command::Initialize(_)) {
            bail!("send `initialize` first");
        }
        let after_terminate = matches!(
            command,
            Command::Disconnect(_) | Command::Terminate(_) | Command::Threads | Command::Cancel(_)
        );
        if self.terminated && !after_terminate {
            bail!(TERMINATED);
        }
        match command {
            Command::Initialize(_) => {
                if self.initialized {
                    bail!("the session is already initialized");
                }
                self.initialized = true;
                self.later(wire::event(Event::Initialized));
                body(ResponseBody::Initialize(capabilities()))
            }
            Command::Launch(a) => self.launch(seq, a.additional_data.unwrap_or(Value::Null)),
            Command::Attach(a) => self.launch(seq, a.additional_data.unwrap_or(Value::Null)),
            Command::ConfigurationDone => {
                self.configured = true;
                if let Some(s) = self.first_stop.take() {
                    self.stopped(s);
                }
                Ok(None)
            }
            Command::SetFunctionBreakpoints(a) => self.set_function_breakpoints(a),
            Command::SetBreakpoints(a) => self.set_breakpoints(a),
            Command::SetInstructionBreakpoints(a) => self.set_instruction_breakpoints(a),
            Command::SetExceptionBreakpoints(_) => Ok(None),
            Command::DataBreakpointInfo(a) => self.data_breakpoint_info(a),
            Command::SetDataBreakpoints(a) => self.set_data_breakpoints(a),
            Command::ReadMemory(a) => self.read_memory(a),
            Command::WriteMemory(a) => self.write_memory(a),
            Command::Disassemble(a) => self.disassemble(a),
            Command::LoadedSources => self.loaded_sources(),
            Command::Modules(a) => self.modules(a),
            Command::Source(a) => self.source(a),
            Command::Threads => {
                let threads = match &self.open {
                    None => Vec::new(),
                    Some(o) => o
                        .view
                        .threads
                        .iter()
                        .map(|t| Thread {
                            id: t.tid as i64,
                            name: view::thread_label(t.pid, t.tid, &o.thread_name(t.tid)),
                        })
                        .collect(),
                };
                body(ResponseBody::Threads(ThreadsResponse { threads }))
            }
            Command::StackTrace(a) => {
                let o = self.open()?;
                let t = thread(o, a.thread_id)?;
                let frames = match o.view.stacks.get(&t.tid).filter(|b| !b.frames.is_empty()) {
                    Some(bt) => stack_frames(a.thread_id, bt),
                    None => {
                        let (ip, name) = split_place(&t.place);
                        vec![StackFrame {
                            id: a.thread_id << 8,
                            name,
                            line: 0,
                            column: 0,
                            instruction_pointer_reference: Some(ip),
                            can_restart: Some(true),
                            presentation_hint: Some(StackFramePresentationhint::Normal),
                            ..Default::default()
                        }]
                    }
                };
                let mut frames = frames;
                for f in &mut frames {
                    if let Some(src) = f.source.as_mut() {
                        if let Some(p) = src.path.clone() {
                            if !std::path::Path::new(&p).exists() {
                                src.source_reference = Some(self.source_ref(&p) as i32);
                            }
                        }
                    }
                }
                let o = self.open()?;
                let _ = o;
                let total = frames.len() as i64;
                let start = a.start_frame.unwrap_or(0).max(0) as usize;
                let levels = a
                    .levels
                    .filter(|l| *l > 0)
                    .map_or(usize::MAX, |l| l as usize);
                let frames = frames.into_iter().skip(start).take(levels).collect();
                body(ResponseBody::StackTrace(StackTraceResponse {
                    stack_frames: frames,
                    total_frames: Some(total),
                }))
            }
            Command::Scopes(a) => {
                let o = self.open()?;
                let tid = a.frame_id >> 8;
                thread(o, tid)?;
                let scope = |name: &str, r: i64, n: i64| Scope {
                    name: name.into(),
                    variables_reference: r,
                    named_variables: Some(n),
                    expensive: false,
                    ..Default::default()
                };
                let mut scopes = super::variables::scopes(a.frame_id);
                scopes.push(scope("Step", STEP_SCOPE | tid, 4));
                scopes.push(scope("Registers", REGISTERS | tid, 20));
                body(ResponseBody::Scopes(ScopesResponse { scopes }))
            }
            Command::Variables(a) if super::variables::owns(a.variables_reference) => {
                self.variables_request(&a)
            }
            Command::SetVariable(a) => self.set_variable_request(&a),
            Command::Variables(a) => {
                let o = self.open()?;
                let tid = a.variables_reference & 0xffff_ffff;
                let t = thread(o, tid)?;
                let vars = match a.variables_reference & !0xffff_ffff {
                    REGISTERS => registers(t),
                    STEP_SCOPE => step_vars(o, t),
                    _ => bail!("no variables with reference {}", a.variables_reference),
                };
                body(ResponseBody::Variables(VariablesResponse {
                    variables: vars,
                }))
            }
            Command::Evaluate(a) => {
                // The program's variables first, then the step's names.
                let program = self.evaluate_request(&a);
                if program.is_ok() {
                    return program;
                }
                let o = self.open()?;
                let tid = a
                    .frame_id
                    .map(|f| f >> 8)
                    .or(o.focus().map(|(_, t)| t as i64));
                let expr = a.expression.trim();
                let found = tid.and_then(|tid| thread(o, tid).ok()).and_then(|t| {
                    registers(t)
                        .into_iter()
                        .chain(step_vars(o, t))
                        .find(|v| v.name == expr.trim_start_matches('$'))
                });
                match found {
                    Some(v) => body(ResponseBody::Evaluate(EvaluateResponse {
                        result: v.value,
                        variables_reference: 0,
                        ..Default::default()
                    })),
                    None => program,
                }
            }
            Command::Continue(_) => {
                self.clear_stepping();
                self.go_forward()?;
                body(ResponseBody::Continue(ContinueResponse {
                    all_threads_continued: Some(true),
                }))
            }
            Command::Next(a) => self.step_request(a.thread_id, Kind::Over, a.granularity, true),
            Command::StepIn(a) => self.step_request(a.thread_id, Kind::In, a.granularity, true),
            Command::StepOut(a) => self.step_request(a.thread_id, Kind::Out, a.granularity, true),
            Command::StepBack(a) => {
                self.step_request(a.thread_id, Kind::Over, a.granularity, false)
            }
            Command::ReverseContinue(_) => {
                self.clear_stepping();
                self.go_backward()?;
                Ok(None)
            }
            Command::Goto(a) => {
                if a.target_id >= GOTO_BASE {
                    let o = self.open()?;
                    let i = (a.target_id - GOTO_BASE) as usize;
                    let (pos, _) = *o.goto_targets.get(i).ok_or_else(|| {
                        anyhow!(
                            "`targetId`: no goto target {} (ask gotoTargets again)",
                            a.target_id
                        )
                    })?;
                    self.go_to_position(
                        pos,
                        Stop::new(
                            StoppedEventReason::Goto,
                            format!("step {} {}", pos.step, pos),
                        ),
                    )?;
                    return Ok(None);
                }
                let o = self.open()?;
                let step = u64::try_from(a.target_id)
                    .ok()
                    .filter(|s| *s <= o.run.meta.steps)
                    .ok_or_else(|| anyhow!("`targetId`: no goto target {}", a.target_id))?;
                self.move_to(
                    step,
                    Stop::new(StoppedEventReason::Goto, format!("step {step}")),
                )?;
                Ok(None)
            }
            Command::GotoTargets(a) => self.goto_targets(a),
            Command::RestartFrame(_) => {
                let o = self.open()?;
                let step = o.pos;
                super::custom::fork_and_switch(self, step, None)?;
                Ok(None)
            }
            Command::Pause(_) => Ok(None),
            Command::Terminate(_) => {
                // Dropping the run stops its machine; the store is as it was.
                self.open = None;
                self.first_stop = None;
                if !std::mem::replace(&mut self.terminated, true) {
                    self.later(wire::event(Event::Terminated(None)));
                }
                Ok(None)
            }
            Command::Disconnect(_) => {
                self.ended = true;
                self.open = None;
                Ok(None)
            }
            Command::Cancel(_) => Ok(None),
            _ => bail!("`{name}` is not supported by rewind dap (see docs/dap.md)"),
        }
    }

    fn launch(&mut self, seq: i64, args: Value) -> Result<Option<Value>> {
        if let Some(o) = &self.open {
            bail!("run {} is already open in this session", o.run.id);
        }
        // Checked before anything is recorded.
        let fork_by = ForkBy::of_launch(&args)?;
        let snapshot_budget = match args.get("snapshotMemory") {
            None => vmm::debug::DEFAULT_SNAPSHOT_BUDGET,
            Some(v) => v
                .as_u64()
                .and_then(|mib| mib.checked_mul(1 << 20))
                .ok_or_else(|| {
                    anyhow!("launch argument `snapshotMemory`: {v} is not a size in MiB")
                })?,
        };
        let store = crate::app::store()?;
        let opened = launch::open(&store, &args, &self.out, seq)?;
        let stop = match opened.first {
            FirstStop::Exception => Stop::new(
                StoppedEventReason::Exception,
                format!("{} at step {}", opened.run.meta.status, opened.step),
            ),
            FirstStop::Entry => match opened.deciding {
                Some(s) => Stop::new(StoppedEventReason::Entry, format!("the deciding step, {s}")),
                None => Stop::new(StoppedEventReason::Entry, format!("step {}", opened.step)),
            },
        };
        let open = Open::new(
            store,
            opened.run,
            opened.step,
            opened.compare,
            opened.deciding,
        )?;
        self.later(wire::custom_event("rewind/timeline", open.timeline()));
        for line in opened.said {
            self.later(super::requests::output(format!("{line}\n")));
        }
        self.open = Some(open);
        self.event_steps = args.get("stepping").and_then(Value::as_str) == Some("events");
        self.fork_by = fork_by;
        self.snapshot_budget = snapshot_budget;
        self.refine_crash();
        self.resolve_pending();
        if self.configured {
            self.stopped(stop);
        } else {
            self.first_stop = Some(stop);
        }
        Ok(None)
    }

    pub(super) fn set_event_breaks(&mut self, b: Vec<(i64, String)>) {
        self.fn_breaks = b;
    }

    /// The `sourceReference` of a path the client cannot read itself.
    pub(super) fn source_ref(&mut self, path: &str) -> i64 {
        match self.source_refs.iter().position(|p| p == path) {
            Some(i) => i as i64 + 1,
            None => {
                self.source_refs.push(path.to_string());
                self.source_refs.len() as i64
            }
        }
    }

    pub(super) fn source_path(&self, r: i64) -> Option<String> {
        usize::try_from(r - 1)
            .ok()
            .and_then(|i| self.source_refs.get(i))
            .cloned()
    }

    fn clear_stepping(&mut self) {
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
        let budget = self.snapshot_budget;
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
    pub(super) fn step_thread(&mut self, tid: i64, forward: bool) -> Result<Option<Value>> {
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
    pub(super) fn end_stop(&self) -> Result<Stop> {
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

    pub(super) fn forward_to_break(&self) -> Result<(u64, Stop)> {
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

    pub(super) fn backward_to_break(&self) -> Result<(u64, Stop)> {
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
            name == "signal" || vmm::kernel::signal_name(*signo) == name
        }
        _ => view::kind_name(e) == name,
    }
}

/// DAP's `function breakpoint` (the crate's `Function` says `function`).
fn function_breakpoint() -> StoppedEventReason {
    StoppedEventReason::String("function breakpoint".into())
}

fn body(b: ResponseBody) -> Result<Option<Value>> {
    let v = serde_json::to_value(b)?;
    Ok(v.get("body").cloned())
}

fn capabilities() -> Capabilities {
    Capabilities {
        supports_configuration_done_request: Some(true),
        supports_function_breakpoints: Some(true),
        supports_step_back: Some(true),
        supports_restart_frame: Some(true),
        supports_terminate_request: Some(true),
        supports_cancel_request: Some(true),
        supports_evaluate_for_hovers: Some(true),
        supports_goto_targets_request: Some(true),
        supports_data_breakpoints: Some(true),
        supports_conditional_breakpoints: Some(true),
        supports_hit_conditional_breakpoints: Some(true),
        supports_log_points: Some(true),
        supports_stepping_granularity: Some(true),
        supports_instruction_breakpoints: Some(true),
        supports_read_memory_request: Some(true),
        supports_write_memory_request: Some(true),
        supports_disassemble_request: Some(true),
        supports_loaded_sources_request: Some(true),
        supports_modules_request: Some(true),
        supports_set_variable: Some(true),
        ..Default::default()
    }
}

fn thread(o: &Open, tid: i64) -> Result<&vmm::inspect::ThreadAt> {
    o.view
        .threads
        .iter()
        .find(|t| t.tid as i64 == tid)
        .ok_or_else(|| anyhow!("thread {tid} is not alive at step {}", o.pos))
}

/// A backtrace as DAP frames: innermost first, ids `tid << 8 | index`,
/// frames outside the user's own code shown subtle.
fn stack_frames(tid: i64, bt: &symbols::Backtrace) -> Vec<StackFrame> {
    bt.frames
        .iter()
        .take(256)
        .enumerate()
        .map(|(i, f)| {
            let name = f
                .function
                .clone()
                .or_else(|| f.symbol.clone())
                .unwrap_or_else(|| format!("{:#x}", f.pc));
            let source = f.location.as_ref().map(|l| dap::types::Source {
                name: l.file.rsplit('/').next().map(str::to_string),
                path: Some(l.file.clone()),
                ..Default::default()
            });
            StackFrame {
                id: (tid << 8) | i as i64,
                name,
                source,
                line: f.location.as_ref().map_or(0, |l| l.line as i64),
                column: f
                    .location
                    .as_ref()
                    .and_then(|l| l.column)
                    .map_or(0, |c| c as i64),
                instruction_pointer_reference: Some(format!("{:#x}", f.pc)),
                can_restart: Some(true),
                presentation_hint: Some(if f.own {
                    StackFramePresentationhint::Normal
                } else {
                    StackFramePresentationhint::Subtle
                }),
                ..Default::default()
            }
        })
        .collect()
}

/// `0x401136 in worker+0x16` -> (`0x401136`, `worker+0x16`).
fn split_place(place: &str) -> (String, String) {
    match place.split_once(" in ") {
        Some((ip, name)) => (ip.to_string(), name.to_string()),
        None => (place.to_string(), place.to_string()),
    }
}

fn var(name: &str, value: String) -> Variable {
    Variable {
        name: name.into(),
        value,
        variables_reference: 0,
        ..Default::default()
    }
}

/// A thread's registers by name, in the order the Registers scope shows them.
pub(super) fn named_registers(t: &vmm::inspect::ThreadAt) -> [(&'static str, u64); 20] {
    let r = &t.regs;
    [
        ("rip", r.rip),
        ("rsp", r.rsp),
        ("rbp", r.rbp),
        ("rax", r.rax),
        ("rbx", r.rbx),
        ("rcx", r.rcx),
        ("rdx", r.rdx),
        ("rsi", r.rsi),
        ("rdi", r.rdi),
        ("r8", r.r8),
        ("r9", r.r9),
        ("r10", r.r10),
        ("r11", r.r11),
        ("r12", r.r12),
        ("r13", r.r13),
        ("r14", r.r14),
        ("r15", r.r15),
        ("rflags", r.rflags),
        ("fs_base", t.fs_base),
        ("gs_base", t.gs_base),
    ]
}

fn registers(t: &vmm::inspect::ThreadAt) -> Vec<Variable> {
    named_registers(t)
        .iter()
        .map(|(n, v)| var(n, format!("{v:#x}")))
        .collect()
}

fn step_vars(o: &Open, t: &vmm::inspect::ThreadAt) -> Vec<Variable> {
    let events: Vec<String> = o
        .events_at(o.pos)
        .iter()
        .map(|e| format!("{}/{} {}", e.pid, e.tid, view::event_text(e)))
        .collect();
    vec![
        var("step", o.pos.to_string()),
        var(
            "thread",
            format!(
                "{} ({})",
                view::thread_label(t.pid, t.tid, &t.name),
                t.doing
            ),
        ),
        var("place", t.place.clone()),
        var("events", events.join("; ")),
    ]
}
