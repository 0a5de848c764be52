//! Serving a debug session: each request, in order, to its handler, and
//! what the handler queued sent after its response. The session's
//! lifecycle (initialize, launch, configurationDone, terminate,
//! disconnect) is here; each concern's requests are in its own module:
//! `stack.rs` (threads, frames, scopes), `variables.rs`, `moves.rs`
//! (stepping, continuing, gotoTargets), `set_breakpoints.rs`, `memory.rs`
//! (memory, disassembly), `sources.rs` (sources, modules), `custom.rs` (the
//! `rewind/` requests).

use super::conn::{Control, Out};
use super::launch::{self, FirstStop, Options};
use super::moves::{Kind, GOTO_BASE};
use super::open::{Open, Stop};
use super::session::Session;
use super::stack::body;
use super::wire;
use anyhow::{anyhow, bail, Result};
use dap::events::Event;
use dap::requests::{Command, GotoArguments};
use dap::responses::{ContinueResponse, ResponseBody};
use dap::types::{Capabilities, StoppedEventReason};
use serde_json::Value;
use std::sync::Arc;

/// The answer to requests after `terminate`.
const TERMINATED: &str = "the session is terminated: send `disconnect`";

/// How often an idle session gives back snapshots over its share.
const FIT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A session and where it is in its lifecycle.
pub struct Server {
    s: Session,
    initialized: bool,
    configured: bool,
    /// The first stop, sent once both launch and configurationDone came.
    first_stop: Option<Stop>,
    /// `disconnect` came: serve nothing more.
    ended: bool,
    /// `terminate` came: the machine is stopped and only `disconnect` is left.
    terminated: bool,
}

impl Server {
    pub fn new(out: Out, control: Arc<Control>) -> Server {
        Server {
            s: Session::new(out, control),
            initialized: false,
            configured: false,
            first_stop: None,
            ended: false,
            terminated: false,
        }
    }

    pub fn serve(mut self, rx: std::sync::mpsc::Receiver<wire::Incoming>) {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            match rx.recv_timeout(FIT_EVERY) {
                Ok(msg) => self.handle(msg),
                // Idle: other sessions may have opened since, shrinking
                // this one's share of the snapshots' budget.
                Err(RecvTimeoutError::Timeout) => self.s.fit_snapshots(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self.ended {
                break;
            }
        }
    }

    fn handle(&mut self, msg: wire::Incoming) {
        let profile = super::profile::Profile::start(&self.s);
        let (seq, name, result) = match msg {
            wire::Incoming::Ignored => return,
            wire::Incoming::Invalid { seq, name, why } => (seq, name, Err(anyhow!(why))),
            wire::Incoming::Custom { seq, name, args } => {
                let r = if !self.initialized {
                    Err(anyhow!("send `initialize` first"))
                } else if self.terminated {
                    Err(anyhow!(TERMINATED))
                } else {
                    super::custom::handle(&mut self.s, seq, &name, &args).map(Some)
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
        let after = self.s.take_later();
        match result {
            Ok(body) => {
                self.s.out().send(wire::response(seq, &name, body));
                for v in after {
                    self.s.out().send(v);
                }
            }
            Err(e) => {
                self.s
                    .out()
                    .send(wire::error_response(seq, &name, &crate::util::one_line(&e)))
            }
        }
        if let Some(p) = profile {
            p.report(&self.s, &name);
        }
    }

    /// A standard request to its handler.
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
        let s = &mut self.s;
        match command {
            Command::Initialize(_) => self.initialize(),
            Command::Launch(a) => self.launch(seq, a.additional_data.unwrap_or(Value::Null)),
            Command::Attach(a) => self.launch(seq, a.additional_data.unwrap_or(Value::Null)),
            Command::ConfigurationDone => self.configuration_done(),
            Command::Terminate(_) => self.terminate(),
            Command::Disconnect(_) => self.disconnect(),
            Command::SetFunctionBreakpoints(a) => s.set_function_breakpoints(a),
            Command::SetBreakpoints(a) => s.set_breakpoints(a),
            Command::SetInstructionBreakpoints(a) => s.set_instruction_breakpoints(a),
            Command::SetExceptionBreakpoints(_) => Ok(None),
            Command::DataBreakpointInfo(a) => s.data_breakpoint_info(a),
            Command::SetDataBreakpoints(a) => s.set_data_breakpoints(a),
            Command::ReadMemory(a) => s.read_memory(a),
            Command::WriteMemory(a) => s.write_memory(a),
            Command::Disassemble(a) => s.disassemble(a),
            Command::LoadedSources => s.loaded_sources(),
            Command::Modules(a) => s.modules(a),
            Command::Source(a) => s.source(a),
            Command::Threads => s.threads(),
            Command::StackTrace(a) => s.stack_trace(a),
            Command::Scopes(a) => s.scopes(a),
            Command::Variables(a) if super::variables::owns(a.variables_reference) => {
                s.variables_request(&a)
            }
            Command::Variables(a) => s.own_variables(a),
            Command::SetVariable(a) => s.set_variable_request(&a),
            Command::Evaluate(a) => s.evaluate(a),
            Command::Continue(_) => continue_(s),
            Command::Next(a) => s.step_request(a.thread_id, Kind::Over, a.granularity, true),
            Command::StepIn(a) => s.step_request(a.thread_id, Kind::In, a.granularity, true),
            Command::StepOut(a) => s.step_request(a.thread_id, Kind::Out, a.granularity, true),
            Command::StepBack(a) => s.step_request(a.thread_id, Kind::Over, a.granularity, false),
            Command::ReverseContinue(_) => reverse_continue(s),
            Command::Goto(a) => goto(s, a),
            Command::GotoTargets(a) => s.goto_targets(a),
            Command::RestartFrame(_) => restart_frame(s),
            Command::Pause(_) | Command::Cancel(_) => Ok(None),
            _ => bail!("`{name}` is not supported by rewind dap (see docs/dap.md)"),
        }
    }

    fn initialize(&mut self) -> Result<Option<Value>> {
        if self.initialized {
            bail!("the session is already initialized");
        }
        self.initialized = true;
        self.s.later(wire::event(Event::Initialized));
        body(ResponseBody::Initialize(capabilities()))
    }

    fn configuration_done(&mut self) -> Result<Option<Value>> {
        self.configured = true;
        if let Some(s) = self.first_stop.take() {
            self.s.stopped(s);
        }
        Ok(None)
    }

    fn terminate(&mut self) -> Result<Option<Value>> {
        // Dropping the run stops its machine; the store is as it was.
        self.s.close();
        self.first_stop = None;
        if !std::mem::replace(&mut self.terminated, true) {
            self.s.later(wire::event(Event::Terminated(None)));
        }
        Ok(None)
    }

    fn disconnect(&mut self) -> Result<Option<Value>> {
        self.ended = true;
        self.s.close();
        Ok(None)
    }

    fn launch(&mut self, seq: i64, args: Value) -> Result<Option<Value>> {
        if let Some(o) = &self.s.open {
            bail!("run {} is already open in this session", o.run.id);
        }
        // Checked before anything is recorded.
        let options = Options::of_launch(&args)?;
        let store = crate::app::store()?;
        let opened = launch::open(&store, &args, self.s.out(), seq, self.s.control())?;
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
        self.s
            .later(wire::custom_event("rewind/timeline", open.timeline()));
        for line in opened.said {
            self.s.later(wire::output(format!("{line}\n")));
        }
        self.s.set_open(open, options);
        self.s.refine_crash();
        self.s.resolve_pending();
        if self.configured {
            self.s.stopped(stop);
        } else {
            self.first_stop = Some(stop);
        }
        Ok(None)
    }
}

fn continue_(s: &mut Session) -> Result<Option<Value>> {
    s.clear_stepping();
    s.go_forward()?;
    body(ResponseBody::Continue(ContinueResponse {
        all_threads_continued: Some(true),
    }))
}

fn reverse_continue(s: &mut Session) -> Result<Option<Value>> {
    s.clear_stepping();
    s.go_backward()?;
    Ok(None)
}

/// `goto`: a step, or (from `GOTO_BASE` on) a place inside one that
/// `gotoTargets` gave.
fn goto(s: &mut Session, a: GotoArguments) -> Result<Option<Value>> {
    let o = s.open()?;
    if a.target_id >= GOTO_BASE {
        let i = (a.target_id - GOTO_BASE) as usize;
        let (pos, _) = *o.goto_targets.get(i).ok_or_else(|| {
            anyhow!(
                "`targetId`: no goto target {} (ask gotoTargets again)",
                a.target_id
            )
        })?;
        let stop = Stop::new(
            StoppedEventReason::Goto,
            format!("step {} {}", pos.step, pos),
        );
        s.go_to_position(pos, stop)?;
        return Ok(None);
    }
    let step = u64::try_from(a.target_id)
        .ok()
        .filter(|s| *s <= o.run.meta.steps)
        .ok_or_else(|| anyhow!("`targetId`: no goto target {}", a.target_id))?;
    s.move_to(
        step,
        Stop::new(StoppedEventReason::Goto, format!("step {step}")),
    )?;
    Ok(None)
}

fn restart_frame(s: &mut Session) -> Result<Option<Value>> {
    let step = s.open()?.pos;
    super::custom::fork_and_switch(s, step, None)?;
    Ok(None)
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
