//! Threads, stacks and the session's own scopes: `threads`, `stackTrace`,
//! `scopes`, the Step and Registers scopes' `variables`, and what
//! `evaluate` finds there when the program's variables do not have it.

use super::open::{thread, Open};
use super::replies::page;
use super::session::Session;
use super::view;
use anyhow::{bail, Result};
use dap::requests::{EvaluateArguments, ScopesArguments, StackTraceArguments, VariablesArguments};
use dap::responses::{
    EvaluateResponse, ResponseBody, ScopesResponse, StackTraceResponse, ThreadsResponse,
    VariablesResponse,
};
use dap::types::{Scope, StackFrame, StackFramePresentationhint, Thread, Variable};
use serde_json::Value;

/// Variable references: kind in the high bits, thread id in the low.
const REGISTERS: i64 = 1 << 32;
const STEP_SCOPE: i64 = 2 << 32;

/// A typed response's body.
pub fn body(b: ResponseBody) -> Result<Option<Value>> {
    let v = serde_json::to_value(b)?;
    Ok(v.get("body").cloned())
}

impl Session {
    pub fn threads(&self) -> Result<Option<Value>> {
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

    pub fn stack_trace(&mut self, a: StackTraceArguments) -> Result<Option<Value>> {
        let o = self.open()?;
        let t = thread(o, a.thread_id)?;
        let mut frames = match o.view.stacks.get(&t.tid).filter(|b| !b.frames.is_empty()) {
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
        for f in &mut frames {
            if let Some(src) = f.source.as_mut() {
                if let Some(p) = src.path.clone() {
                    if !std::path::Path::new(&p).exists() {
                        src.source_reference = Some(self.source_ref(&p) as i32);
                    }
                }
            }
        }
        let total = frames.len() as i64;
        let frames = page(frames, a.start_frame, a.levels);
        body(ResponseBody::StackTrace(StackTraceResponse {
            stack_frames: frames,
            total_frames: Some(total),
        }))
    }

    pub fn scopes(&self, a: ScopesArguments) -> Result<Option<Value>> {
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

    /// The Step and Registers scopes' variables.
    pub fn own_variables(&self, a: VariablesArguments) -> Result<Option<Value>> {
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

    /// `evaluate`: the program's variables first, then the step's names.
    pub fn evaluate(&mut self, a: EvaluateArguments) -> Result<Option<Value>> {
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

fn registers(t: &vmm::inspect::ThreadAt) -> Vec<Variable> {
    view::named_registers(t)
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
