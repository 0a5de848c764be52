//! Program variables in the debug adapter: the Locals and Arguments
//! scopes, `variables` (children by reference, paged), `evaluate` (hover,
//! watch, REPL) and `setVariable`, over the symbols crate's values and the
//! debug core's memory at the position.
//!
//! References are valid until the position changes (every stop clears
//! them): scopes are `LOCALS | frameId`, `ARGUMENTS | frameId` and
//! `GLOBALS | frameId`, values `VALUE | n`. Conditions and logpoints read
//! the variables of the thread that stopped (`live::at_stop`).

use super::handles::{Node, ARGUMENTS, GLOBALS, KIND, LOCALS, VALUE};
use super::live::CoreMemory;
use super::replies::body;
use super::session::Session;
use super::wire;
use anyhow::{anyhow, bail, Result};
use dap::requests::{EvaluateArguments, SetVariableArguments, VariablesArguments};
use dap::responses::{EvaluateResponse, SetVariableResponse, VariablesResponse};
use dap::types::{Scope, ScopePresentationhint, Variable, VariablesArgumentsFilter};
use serde_json::Value as Json;
use std::sync::Arc;
use symbols::values::expr::{self, Env, Evaluated};
use symbols::{Backtrace, FrameVariables, Shown, Value};

/// Children sent for one `variables` request without a `count`.
const PAGE: u64 = 1000;
/// Globals a scope lists, at most.
const MAX_GLOBALS: usize = 1000;
/// `frameId` is `tid << 8 | index`.
fn split_frame(frame_id: i64) -> (i64, usize) {
    (frame_id >> 8, (frame_id & 0xff) as usize)
}

/// The Locals, Arguments and Globals (of the frame's compilation unit)
/// scopes of a frame, beside the session's own.
pub fn scopes(frame_id: i64) -> Vec<Scope> {
    let scope = |name: &str, r: i64, hint| Scope {
        name: name.into(),
        presentation_hint: Some(hint),
        variables_reference: r,
        expensive: false,
        ..Default::default()
    };
    vec![
        scope("Locals", LOCALS | frame_id, ScopePresentationhint::Locals),
        scope(
            "Arguments",
            ARGUMENTS | frame_id,
            ScopePresentationhint::Arguments,
        ),
        Scope {
            name: "Globals".into(),
            variables_reference: GLOBALS | frame_id,
            expensive: false,
            ..Default::default()
        },
    ]
}

/// Whether a variables reference is one of this module's.
pub fn owns(reference: i64) -> bool {
    matches!(reference & KIND, LOCALS | ARGUMENTS | GLOBALS | VALUE)
}

impl Session {
    /// A frame's stack: the thread's backtrace at the position.
    fn backtrace_of(&self, tid: i64) -> Result<Backtrace> {
        let o = self
            .open
            .as_ref()
            .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))?;
        u32::try_from(tid)
            .ok()
            .and_then(|t| o.view.stacks.get(&t))
            .cloned()
            .ok_or_else(|| anyhow!("`frameId`: thread {tid} has no stack at step {}", o.pos))
    }

    /// Runs `f` with the symbolizer and the memory of the position.
    fn with_memory<R>(
        &mut self,
        f: impl FnOnce(&symbols::Symbolizer, &mut dyn symbols::Memory) -> Result<R>,
    ) -> Result<R> {
        let (core, sym) = self.machine()?;
        let sym = sym.ok_or_else(|| anyhow!("the program has no symbols"))?;
        let mut mem = CoreMemory(core);
        f(&sym, &mut mem)
    }

    /// The debug core at the position (the session's, `live.rs`: inside a
    /// step too), and the program's symbols. A write makes the session
    /// diverge; moving away returns to the recording.
    fn machine(
        &mut self,
    ) -> Result<(&mut vmm::debug::DebugCore, Option<Arc<symbols::Symbolizer>>)> {
        let live = self.live()?;
        let sym = live.sym.clone();
        Ok((&mut live.core, sym))
    }

    /// Frame `frame_id`'s variables, read once per position.
    fn frame_variables(&mut self, frame_id: i64) -> Result<FrameVariables> {
        if let Some(v) = self
            .open
            .as_ref()
            .and_then(|o| o.vars.frames.get(&frame_id))
        {
            return Ok(v.clone());
        }
        let (tid, i) = split_frame(frame_id);
        let bt = self.backtrace_of(tid)?;
        if i >= bt.frames.len() {
            bail!("`frameId`: no frame {i} in thread {tid}");
        }
        let vars = self.with_memory(|sym, mem| {
            sym.variables(&bt, i, mem)
                .or_else(|e| match e {
                    // A frame without debug info has no variables to show.
                    symbols::ValueError::NoDebugInfo(_) => Ok(FrameVariables::default()),
                    e => Err(e),
                })
                .map_err(|e| anyhow!("{e}"))
        })?;
        if let Some(o) = self.open.as_mut() {
            o.vars.frames.insert(frame_id, vars.clone());
        }
        Ok(vars)
    }

    /// The variables of a Locals, Arguments or Globals reference.
    fn scope_list(&mut self, r: i64) -> Result<Vec<symbols::values::Variable>> {
        let frame_id = r & 0xffff_ffff;
        let vars = self.frame_variables(frame_id)?;
        Ok(match r & KIND {
            LOCALS => vars.locals,
            ARGUMENTS => vars.arguments,
            _ => self.with_memory(|_, mem| Ok(vars.globals(mem, MAX_GLOBALS)))?,
        })
    }

    /// The value a `VALUE` reference names.
    fn node_of(&self, r: i64) -> Result<Node> {
        self.open
            .as_ref()
            .and_then(|o| o.vars.node(r))
            .cloned()
            .ok_or_else(|| anyhow!("`variablesReference`: {r} is not valid at this position"))
    }

    /// The variable or member `name` of a scope or value reference.
    fn named_in(&mut self, r: i64, name: &str) -> Result<Value> {
        match r & KIND {
            LOCALS | ARGUMENTS | GLOBALS => self
                .scope_list(r)?
                .into_iter()
                .find(|v| v.name == name)
                .map(|v| v.value)
                .ok_or_else(|| anyhow!("`name`: no variable `{name}` in this scope")),
            VALUE => {
                let node = self.node_of(r)?;
                self.with_memory(|_, mem| {
                    node.value
                        .children(mem, 0, PAGE)
                        .into_iter()
                        .find(|(n, _)| *n == name || child_names(Some(&node), n).0 == name)
                        .map(|(_, v)| v)
                        .ok_or_else(|| anyhow!("`name`: no member `{name}` here"))
                })
            }
            _ => bail!("`variablesReference`: no variables with reference {r}"),
        }
    }

    /// The address and size of a variable (`name` in a scope or value
    /// reference) or of an expression's value in a frame: what a data
    /// breakpoint watches. None when it is not in memory.
    pub fn data_of(
        &mut self,
        reference: Option<i64>,
        name: &str,
        frame_id: Option<i64>,
    ) -> Result<Option<(u64, u64)>> {
        let v = match reference.filter(|r| *r != 0) {
            Some(r) => self.named_in(r, name)?,
            None => match self.evaluate_in(name, frame_id)? {
                (Evaluated::Value(v), _) => v,
                (Evaluated::Int { .. }, _) => return Ok(None),
            },
        };
        Ok(match v.place {
            symbols::values::Place::Memory(a) => Some((a, v.ty().size.unwrap_or(8).clamp(1, 4096))),
            _ => None,
        })
    }

    /// `variables` for the Locals, Arguments, Globals and value references.
    pub fn variables_request(&mut self, a: &VariablesArguments) -> Result<Option<Json>> {
        let r = a.variables_reference;
        let start = u64::try_from(a.start.unwrap_or(0))
            .map_err(|_| anyhow!("`start`: must not be negative"))?;
        let count = match a.count {
            None | Some(0) => PAGE,
            Some(n) => u64::try_from(n).map_err(|_| anyhow!("`count`: must not be negative"))?,
        }
        .min(PAGE);
        let named_only = matches!(a.filter, Some(VariablesArgumentsFilter::Named));
        let indexed_only = matches!(a.filter, Some(VariablesArgumentsFilter::Indexed));
        let (children, frame_id, parent) = match r & KIND {
            LOCALS | ARGUMENTS | GLOBALS => {
                let frame_id = r & 0xffff_ffff;
                let children: Vec<(String, Value)> = self
                    .scope_list(r)?
                    .into_iter()
                    .skip(start as usize)
                    .take(count as usize)
                    .map(|v| (v.name, v.value))
                    .collect();
                (children, frame_id, None)
            }
            VALUE => {
                let node = self.node_of(r)?;
                let children = self.with_memory(|_, mem| {
                    let shown = node.value.show(mem);
                    if (named_only && shown.named == 0) || (indexed_only && shown.indexed == 0) {
                        return Ok(Vec::new());
                    }
                    Ok(node.value.children(mem, start, count))
                })?;
                let frame_id = node.frame_id;
                (children, frame_id, Some(node))
            }
            _ => bail!("`variablesReference`: no variables with reference {r}"),
        };
        let variables = self.with_memory(|_, mem| {
            Ok(children
                .into_iter()
                .map(|(name, value)| {
                    let (name, evaluate_name) = child_names(parent.as_ref(), &name);
                    (name, evaluate_name, value.show(mem), value)
                })
                .collect::<Vec<_>>())
        })?;
        let o = self
            .open
            .as_mut()
            .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))?;
        let variables: Vec<Variable> = variables
            .into_iter()
            .map(|(name, evaluate_name, shown, value)| {
                let reference = if shown.expandable() {
                    o.vars.add(Node {
                        value,
                        name: name.clone(),
                        evaluate_name: evaluate_name.clone(),
                        frame_id,
                    })
                } else {
                    0
                };
                variable(name, Some(evaluate_name), &shown, reference)
            })
            .collect();
        Ok(Some(body(&VariablesResponse { variables })))
    }

    /// `evaluate`: an expression in a frame (the focused thread's chosen
    /// frame without `frameId`).
    pub fn evaluate_request(&mut self, a: &EvaluateArguments) -> Result<Option<Json>> {
        let text = a.expression.trim().to_string();
        if text.is_empty() {
            bail!("`expression`: empty");
        }
        let (e, frame_id) = self.evaluate_in(&text, a.frame_id)?;
        let shown = self.with_memory(|_, mem| Ok(e.show(mem)))?;
        let reference = match (&e, shown.expandable()) {
            (Evaluated::Value(v), true) => {
                let o = self
                    .open
                    .as_mut()
                    .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))?;
                o.vars.add(Node {
                    value: v.clone(),
                    name: text.clone(),
                    evaluate_name: text.clone(),
                    frame_id,
                })
            }
            _ => 0,
        };
        Ok(Some(body(&EvaluateResponse {
            result: shown.value,
            type_field: Some(shown.type_name),
            presentation_hint: None,
            variables_reference: reference,
            named_variables: (shown.named > 0).then_some(shown.named as i64),
            indexed_variables: (shown.indexed > 0).then_some(shown.indexed as i64),
            memory_reference: shown.address.map(|a| format!("{a:#x}")),
        })))
    }

    /// `text` evaluated in a frame (the focused thread's chosen frame
    /// without one), with the frame it was evaluated in.
    fn evaluate_in(&mut self, text: &str, frame_id: Option<i64>) -> Result<(Evaluated, i64)> {
        let frame_id = match frame_id {
            Some(f) => f,
            None => {
                let o = self
                    .open
                    .as_ref()
                    .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))?;
                let (_, tid) = o
                    .focus()
                    .ok_or_else(|| anyhow!("no thread is alive at step {}", o.pos))?;
                let chosen = o.view.stacks.get(&tid).map_or(0, |b| b.chosen);
                (tid as i64) << 8 | chosen as i64
            }
        };
        let (tid, i) = split_frame(frame_id);
        let vars = self.frame_variables(frame_id)?;
        let thread_regs = self.thread_registers(tid, i)?;
        let bt = self.backtrace_of(tid)?;
        let frame_regs = bt.frames.get(i).map(|f| f.regs).unwrap_or_default();
        let register = move |name: &str| -> Option<u64> {
            if let Some(v) = thread_regs.iter().find(|(n, _)| *n == name) {
                return Some(v.1);
            }
            let n = REG_NAMES.iter().position(|r| *r == name)?;
            frame_regs.get(n as u16)
        };
        let e = self.with_memory(|_, mem| {
            let env = Env {
                vars: &vars,
                register: &register,
                machine: false,
            };
            expr::evaluate(text, &env, mem).map_err(|e| anyhow!("{e}"))
        })?;
        Ok((e, frame_id))
    }

    /// `setVariable`: writes the new value's bytes into the machine's
    /// memory; the session then is no longer the recording.
    pub fn set_variable_request(&mut self, a: &SetVariableArguments) -> Result<Option<Json>> {
        let target = self.named_in(a.variables_reference, &a.name)?;
        let (addr, bytes) = target
            .encode(&a.value)
            .map_err(|e| anyhow!("`value`: {e}"))?;
        let (core, _) = self.machine()?;
        core.write_memory(addr, &bytes)
            .map_err(|e| anyhow!("cannot write {addr:#x}: {e}"))?;
        let diverged = core.is_modified();
        let shown = target.show(&mut CoreMemory(core));
        self.later(wire::event(dap::events::Event::Invalidated(
            dap::events::InvalidatedEventBody {
                areas: Some(vec![dap::types::InvalidatedAreas::Variables]),
                ..Default::default()
            },
        )));
        if diverged {
            self.later(wire::event(dap::events::Event::Output(
                dap::events::OutputEventBody {
                    category: Some(dap::types::OutputEventCategory::Important),
                    output: format!(
                        "rewind: {} was written: the session is no longer the recording (as after \
                         a gdb write); it goes forward from here, and `goto` (or rewind/goto) \
                         returns to the recording\n",
                        a.name
                    ),
                    ..Default::default()
                },
            )));
        }
        Ok(Some(body(&SetVariableResponse {
            value: shown.value,
            type_field: Some(shown.type_name),
            variables_reference: Some(0),
            named_variables: None,
            indexed_variables: None,
        })))
    }

    /// The registers of thread `tid` by name, for `$name` in frame 0 (the
    /// other frames know only what the unwinder recovered).
    fn thread_registers(&self, tid: i64, frame: usize) -> Result<Vec<(&'static str, u64)>> {
        let o = self
            .open
            .as_ref()
            .ok_or_else(|| anyhow!("no run is open: send `launch` or `attach` first"))?;
        let t = o
            .view
            .threads
            .iter()
            .find(|t| t.tid as i64 == tid)
            .ok_or_else(|| anyhow!("`frameId`: thread {tid} is not alive at step {}", o.pos))?;
        if frame > 0 {
            return Ok(vec![("fs_base", t.fs_base), ("gs_base", t.gs_base)]);
        }
        let mut named = super::view::named_registers(t).to_vec();
        named.push(("eflags", t.regs.rflags));
        Ok(named)
    }
}

/// DWARF register numbers' names (x86-64), for `$name` in outer frames.
const REG_NAMES: [&str; 17] = [
    "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15", "rip",
];

/// A child's shown name and the expression that reaches it.
fn child_names(parent: Option<&Node>, name: &str) -> (String, String) {
    let Some(p) = parent else {
        return (name.to_string(), name.to_string());
    };
    let pe = &p.evaluate_name;
    let through_pointer = matches!(
        p.value.ty().kind,
        symbols::values::types::Kind::Pointer { .. }
    );
    if name == "*" {
        return (format!("*{}", p.name), format!("*({pe})"));
    }
    if let Some(i) = name.strip_prefix('[') {
        return (name.to_string(), format!("({pe})[{}", i));
    }
    let sep = if through_pointer && !p.value.is_rust() {
        "->"
    } else {
        "."
    };
    (name.to_string(), format!("({pe}){sep}{name}"))
}

fn variable(name: String, evaluate_name: Option<String>, s: &Shown, reference: i64) -> Variable {
    Variable {
        name,
        value: s.value.clone(),
        type_field: Some(s.type_name.clone()),
        evaluate_name,
        variables_reference: reference,
        named_variables: (s.named > 0).then_some(s.named as i64),
        indexed_variables: (s.indexed > 0).then_some(s.indexed as i64),
        memory_reference: s.address.map(|a| format!("{a:#x}")),
        ..Default::default()
    }
}
