//! The breakpoint requests: setBreakpoints, setFunctionBreakpoints,
//! setInstructionBreakpoints, dataBreakpointInfo and setDataBreakpoints,
//! and breakpoints set before the run opened resolved once it has. What a
//! breakpoint is and how a stop is judged against it is `breakpoints.rs`.
//! docs/dap.md says what each answers.

use super::breakpoints::{self, Bp, HitCond, On};
use super::live::Live;
use super::memory::reference;
use super::moves::MAX_HITS;
use super::replies::{body, Breakpoint, BreakpointsReply, Source};
use super::session::Session;
use super::wire;
use anyhow::{anyhow, Result};
use dap::events::Event;
use dap::requests::{
    DataBreakpointInfoArguments, SetBreakpointsArguments, SetDataBreakpointsArguments,
    SetFunctionBreakpointsArguments, SetInstructionBreakpointsArguments,
};
use dap::responses::DataBreakpointInfoResponse;
use dap::types::DataBreakpointAccessType;
use serde_json::Value;
use std::collections::BTreeSet;

/// A breakpoint on a line without code moves at most this far down.
const LINE_SLACK: u32 = 20;

/// Whether a function breakpoint's name is an event's (a system call, a
/// signal, an event kind) rather than a function's.
pub fn is_event_name(name: &str) -> bool {
    let n = name.trim();
    if n.starts_with("syscall:") || n == "signal" || n.starts_with("SIG") {
        return true;
    }
    if ["threadStart", "threadExit", "exit", "sdk"].contains(&n) {
        return true;
    }
    (0..512).any(|nr| vmm::kernel::syscalls::name(nr) == n)
}

fn hit_cond(h: Option<&String>) -> Result<Option<HitCond>, String> {
    match h {
        Some(h) if !h.trim().is_empty() => HitCond::parse(h)
            .map(Some)
            .map_err(|e| format!("`hitCondition`: {e}")),
        _ => Ok(None),
    }
}

fn nonempty(s: Option<&String>) -> Option<String> {
    s.filter(|c| !c.trim().is_empty()).cloned()
}

/// The address after a function's prologue: its second line's first
/// statement, as gdb puts a breakpoint on a function.
fn after_prologue(live: &Live, entry: u64) -> u64 {
    let stmts = live.function_stmts(entry);
    let first = live.line_at(entry);
    stmts
        .iter()
        .copied()
        .find(|a| *a > entry && live.line_at(*a) != first)
        .unwrap_or(entry)
}

impl Session {
    pub fn set_function_breakpoints(
        &mut self,
        a: SetFunctionBreakpointsArguments,
    ) -> Result<Option<Value>> {
        let mut events = Vec::new();
        let mut symbols = Vec::new();
        let mut out = Vec::new();
        for (i, b) in a.breakpoints.iter().enumerate() {
            let name = b.name.trim();
            if let Some(sym) = name
                .strip_prefix("symbol:")
                .or((!is_event_name(name)).then_some(name))
            {
                let id = self.bps.id();
                let addr = self.live().ok().and_then(|l| {
                    let a = l.sym.as_ref()?.symbol_address(sym)?;
                    Some(after_prologue(l, a))
                });
                let hit = hit_cond(b.hit_condition.as_ref());
                let msg = match (&addr, &hit) {
                    (_, Err(e)) => Some(e.clone()),
                    (None, _) => Some(format!("no function `{sym}` in the program's symbols")),
                    (Some(a), _) => Some(format!("function `{sym}` at {a:#x}")),
                };
                let verified = addr.is_some() && hit.is_ok();
                if verified || (hit.is_ok() && self.open.is_none()) {
                    symbols.push(Bp {
                        id,
                        on: On::Symbol(sym.to_string()),
                        addrs: addr.into_iter().collect(),
                        condition: nonempty(b.condition.as_ref()),
                        hit: hit.unwrap_or(None),
                        log: None,
                    });
                }
                out.push(Breakpoint {
                    id,
                    verified,
                    message: msg,
                    ..Default::default()
                });
            } else {
                let id = i as i64 + 1;
                let hits = self.open.as_ref().map(|o| {
                    o.events
                        .iter()
                        .filter(|e| super::session::matches_break(name, e))
                        .count()
                });
                events.push((id, name.to_string()));
                out.push(Breakpoint {
                    id,
                    verified: true,
                    message: hits.map(|h| format!("{h} events of the run match `{name}`")),
                    ..Default::default()
                });
            }
        }
        self.set_event_breaks(events);
        self.bps.symbols = symbols;
        Ok(Some(body(&BreakpointsReply { breakpoints: out })))
    }

    pub fn set_breakpoints(&mut self, a: SetBreakpointsArguments) -> Result<Option<Value>> {
        let path = self.path_of(&a.source)?;
        let wanted = a.breakpoints.clone().unwrap_or_default();
        let table = self.live().ok().map(|l| l.lines.lines_of(&path));
        let old: Vec<Bp> = self.bps.source.remove(&path).unwrap_or_default();
        let mut kept = Vec::new();
        let mut out = Vec::new();
        let mut new_logs = Vec::new();
        for b in &wanted {
            let line = u32::try_from(b.line).unwrap_or(0);
            let found = table.as_ref().and_then(|t| {
                t.iter()
                    .find(|(l, _)| *l >= line && *l <= line.saturating_add(LINE_SLACK))
                    .cloned()
            });
            let hit = hit_cond(b.hit_condition.as_ref());
            let id = old
                .iter()
                .find(|o| {
                    o.on == On::Line {
                        path: path.clone(),
                        line,
                    }
                })
                .map_or_else(|| self.bps.id(), |o| o.id);
            if table.is_none() && hit.is_ok() {
                // Before the run opens: resolved at launch (a `breakpoint` event).
                kept.push(Bp {
                    id,
                    on: On::Line {
                        path: path.clone(),
                        line,
                    },
                    addrs: Vec::new(),
                    condition: nonempty(b.condition.as_ref()),
                    hit: hit.unwrap_or(None),
                    log: nonempty(b.log_message.as_ref()),
                });
                let why = "resolved when the run opens".to_string();
                out.push(Breakpoint::unverified(id, b.line, why));
                continue;
            }
            let Some((at, addrs)) = found.filter(|_| hit.is_ok()) else {
                let why = match (&table, hit) {
                    (_, Err(e)) => e,
                    (None, _) => "no run is open, or it has no symbols".to_string(),
                    (Some(t), _) if t.is_empty() => {
                        format!("{path} is not a source file of the program's line tables")
                    }
                    _ => format!("no code at line {line} or the {LINE_SLACK} lines below it"),
                };
                out.push(Breakpoint::unverified(id, b.line, why));
                continue;
            };
            let bp = Bp {
                id,
                on: On::Line {
                    path: path.clone(),
                    line,
                },
                addrs: addrs.clone(),
                condition: nonempty(b.condition.as_ref()),
                hit: hit.unwrap_or(None),
                log: nonempty(b.log_message.as_ref()),
            };
            let was_log = old
                .iter()
                .any(|o| o.on == bp.on && o.log == bp.log && o.condition == bp.condition);
            if bp.log.is_some() && !was_log {
                new_logs.push(bp.clone());
            }
            let plural = if addrs.len() == 1 { "" } else { "es" };
            out.push(Breakpoint {
                id,
                verified: true,
                line: Some(i64::from(at)),
                source: Some(Source::local(&path)),
                message: Some(format!("{} address{plural} at line {at}", addrs.len())),
                ..Default::default()
            });
            kept.push(bp);
        }
        if !kept.is_empty() {
            self.bps.source.insert(path.clone(), kept);
        }
        for lp in new_logs {
            self.list_logpoint(&lp)?;
        }
        Ok(Some(body(&BreakpointsReply { breakpoints: out })))
    }

    /// Breakpoints set before the run opened, resolved now; each change
    /// is a `breakpoint` event.
    pub fn resolve_pending(&mut self) {
        let Ok(live) = self.live() else { return };
        let lines = live.lines.clone();
        let sym = live.sym.clone();
        let mut events = Vec::new();
        let mut logs = Vec::new();
        for (path, list) in self.bps.source.iter_mut() {
            let table = lines.lines_of(path);
            for b in list.iter_mut().filter(|b| b.addrs.is_empty()) {
                let On::Line { line, .. } = b.on else {
                    continue;
                };
                let found = table
                    .iter()
                    .find(|(l, _)| *l >= line && *l <= line.saturating_add(LINE_SLACK));
                let v = match found {
                    Some((at, addrs)) => {
                        b.addrs = addrs.clone();
                        if b.log.is_some() {
                            logs.push(b.clone());
                        }
                        Breakpoint {
                            id: b.id,
                            verified: true,
                            line: Some(i64::from(*at)),
                            source: Some(Source::local(path)),
                            ..Default::default()
                        }
                    }
                    None => Breakpoint::unverified(
                        b.id,
                        i64::from(line),
                        format!("no code at line {line} or the {LINE_SLACK} lines below it"),
                    ),
                };
                events.push(v);
            }
        }
        let mut resolved = Vec::new();
        for b in self.bps.symbols.iter_mut().filter(|b| b.addrs.is_empty()) {
            let On::Symbol(name) = &b.on else { continue };
            let addr = sym.as_ref().and_then(|s| s.symbol_address(name));
            if let Some(a) = addr {
                resolved.push((b.id, a));
            }
            events.push(Breakpoint {
                id: b.id,
                verified: addr.is_some(),
                message: Some(addr.map_or_else(
                    || format!("no function `{name}` in the program's symbols"),
                    |a| format!("function `{name}` at {a:#x}"),
                )),
                ..Default::default()
            });
        }
        let resolved: Vec<(i64, u64)> = match self.live() {
            Ok(live) => resolved
                .into_iter()
                .map(|(id, a)| (id, after_prologue(live, a)))
                .collect(),
            Err(_) => Vec::new(),
        };
        for (id, at) in resolved {
            if let Some(b) = self.bps.symbols.iter_mut().find(|b| b.id == id) {
                b.addrs = vec![at];
            }
        }
        for v in events {
            self.later(wire::event(Event::Breakpoint(
                dap::events::BreakpointEventBody {
                    reason: dap::types::BreakpointEventReason::Changed,
                    breakpoint: serde_json::from_value(body(&v)).unwrap_or_default(),
                },
            )));
        }
        for l in logs {
            let _ = self.list_logpoint(&l);
        }
    }

    /// A logpoint set: its message for every time its line ran in the
    /// whole recording, each tagged with its step, as `output` events.
    fn list_logpoint(&mut self, b: &Bp) -> Result<()> {
        let addrs: BTreeSet<u64> = b.addrs.iter().copied().collect();
        let msg = b.log.clone().unwrap_or_default();
        let condition = b.condition.clone();
        let hit = b.hit;
        let mut n = 0u64;
        let mut lines: Vec<String> = Vec::new();
        let names = self.open()?.run.meta.thread_names.clone();
        let (_, total) = self.line_hits(&addrs, |live, pos, tid| {
            let mut at = breakpoints::At { live, tid };
            if let Some(c) = &condition {
                if matches!(at.eval(c), Ok(0)) {
                    return false;
                }
            }
            n += 1;
            if hit.is_some_and(|h| !h.fires(n)) {
                return false;
            }
            if lines.len() < MAX_HITS {
                let text = at.interpolate(&msg);
                let name = names.get(&tid).cloned().unwrap_or_default();
                lines.push(format!("step {} {tid} {name}: {text}\n", pos.step));
            }
            true
        })?;
        if let On::Line { path, line } = &b.on {
            let name = path.rsplit('/').next().unwrap_or(path);
            let more = if total > lines.len() {
                format!(", the first {} shown", lines.len())
            } else {
                String::new()
            };
            self.later(wire::output(format!(
                "logpoint {name}:{line}: {total} time{} in the recording{more}\n",
                if total == 1 { "" } else { "s" }
            )));
        }
        for l in lines {
            self.later(wire::output(l));
        }
        Ok(())
    }

    pub fn set_instruction_breakpoints(
        &mut self,
        a: SetInstructionBreakpointsArguments,
    ) -> Result<Option<Value>> {
        let mut bps = Vec::new();
        let mut out = Vec::new();
        for b in &a.breakpoints {
            let id = self.bps.id();
            let addr = reference("instructionReference", &b.instruction_reference, b.offset)?;
            let hit = hit_cond(b.hit_condition.as_ref()).map_err(|e| anyhow!(e))?;
            bps.push(Bp {
                id,
                on: On::Symbol(format!("{addr:#x}")),
                addrs: vec![addr],
                condition: nonempty(b.condition.as_ref()),
                hit,
                log: None,
            });
            out.push(Breakpoint {
                id,
                verified: true,
                instruction_reference: Some(format!("{addr:#x}")),
                ..Default::default()
            });
        }
        self.bps.instructions = bps;
        Ok(Some(body(&BreakpointsReply { breakpoints: out })))
    }

    pub fn data_breakpoint_info(
        &mut self,
        a: DataBreakpointInfoArguments,
    ) -> Result<Option<Value>> {
        // A variable (in a scope or a value), or an expression over the
        // frame's variables (`balance`, `head->next`).
        let by_name = self.data_of(a.variables_reference, &a.name, a.frame_id);
        if a.variables_reference.is_some_and(|r| r != 0) {
            return Ok(Some(match by_name? {
                Some((addr, len)) => data_info(addr, len, &a.name),
                None => no_data(format!(
                    "`{}` is not in memory (a register or a constant)",
                    a.name
                )),
            }));
        }
        if let Ok(Some((addr, len))) = by_name {
            return Ok(Some(data_info(addr, len, &a.name)));
        }
        let (expr, len) = match a.name.rsplit_once(',') {
            Some((e, l)) => (
                e,
                l.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=4096).contains(n))
                    .ok_or_else(|| anyhow!("`name`: `{l}` is not a length of 1 to 4096 bytes"))?,
            ),
            None => (a.name.as_str(), 8),
        };
        let tid = match a.frame_id {
            Some(f) => (f >> 8) as u32,
            None => self
                .open()?
                .focus()
                .map(|(_, t)| t)
                .ok_or_else(|| anyhow!("no thread to evaluate `name` in"))?,
        };
        let live = self.live()?;
        let mut at = breakpoints::At { live, tid };
        let addr = match at.eval(expr) {
            Ok(v) => v as u64,
            Err(e) => {
                return Ok(Some(no_data(format!(
                    "`name`: {e} (give an address: 0x4c6f80, or 0x4c6f80,4 for 4 bytes)"
                ))))
            }
        };
        Ok(Some(data_info(addr, len, &a.name)))
    }

    pub fn set_data_breakpoints(
        &mut self,
        a: SetDataBreakpointsArguments,
    ) -> Result<Option<Value>> {
        let mut bps = Vec::new();
        let mut out = Vec::new();
        for b in &a.breakpoints {
            let access = b.access_type.as_ref().map(|t| {
                serde_json::to_value(t)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            });
            let w = breakpoints::watch_of(&b.data_id, access.as_deref()).map_err(|e| anyhow!(e))?;
            let hit = hit_cond(b.hit_condition.as_ref()).map_err(|e| anyhow!(e))?;
            let known = self
                .bps
                .data
                .iter()
                .find(|d| d.on == On::Data(w))
                .map(|d| d.id);
            let id = known.unwrap_or_else(|| self.bps.id());
            bps.push(Bp {
                id,
                on: On::Data(w),
                addrs: Vec::new(),
                condition: nonempty(b.condition.as_ref()),
                hit,
                log: None,
            });
            let what = format!("{:?} of {} bytes at {:#x}", w.kind, w.len, w.addr);
            out.push(Breakpoint {
                id,
                verified: true,
                message: Some(what.to_lowercase()),
                ..Default::default()
            });
        }
        self.bps.data = bps;
        Ok(Some(body(&BreakpointsReply { breakpoints: out })))
    }
}

/// dataBreakpointInfo's answer where no data breakpoint can be set
/// (`dataId` null), and why.
fn no_data(description: String) -> Value {
    body(&DataBreakpointInfoResponse {
        data_id: None,
        description,
        access_types: None,
        can_persist: None,
    })
}

fn data_info(addr: u64, len: u64, name: &str) -> Value {
    body(&DataBreakpointInfoResponse {
        data_id: Some(breakpoints::data_id(addr, len)),
        description: format!("{len} bytes at {addr:#x} ({name})"),
        access_types: Some(vec![
            DataBreakpointAccessType::Write,
            DataBreakpointAccessType::Read,
            DataBreakpointAccessType::ReadWrite,
        ]),
        can_persist: Some(false),
    })
}
