//! The standard requests served by the debug core: breakpoints of every
//! kind, stepping by line or instruction, gotoTargets, memory, disassembly,
//! sources and modules. docs/dap.md says what each answers.

use super::breakpoints::{self, Bp, HitCond, On};
use super::live::Live;
use super::moves::{Kind, GOTO_BASE, MAX_HITS};
use super::replies::{
    body, Breakpoint, BreakpointsReply, GotoTargetsReply, Instruction, InstructionsReply, Source,
    SourcesReply,
};
use super::session::Session;
use super::wire;
use anyhow::{anyhow, bail, Result};
use base64::Engine as _;
use dap::events::Event;
use dap::requests::{
    DataBreakpointInfoArguments, DisassembleArguments, GotoTargetsArguments, ModulesArguments,
    ReadMemoryArguments, SetBreakpointsArguments, SetDataBreakpointsArguments,
    SetFunctionBreakpointsArguments, SetInstructionBreakpointsArguments, SourceArguments,
    WriteMemoryArguments,
};
use dap::responses::{
    DataBreakpointInfoResponse, ModulesResponse, ReadMemoryResponse, SourceResponse,
    WriteMemoryResponse,
};
use dap::types::{DataBreakpointAccessType, GotoTarget, Module, ModuleId, SteppingGranularity};
use serde_json::Value;
use std::collections::BTreeSet;

/// At most this many bytes a readMemory or writeMemory.
const MAX_MEMORY: i64 = 1 << 20;
/// At most this many instructions a disassemble.
const MAX_INSTRUCTIONS: i64 = 10_000;
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

/// `0x401136` (a memory or instruction reference) plus an offset.
fn reference(field: &str, r: &str, offset: Option<i64>) -> Result<u64> {
    let a = breakpoints::parse_address(r)
        .or_else(|| r.trim().parse().ok())
        .ok_or_else(|| anyhow!("`{field}`: `{r}` is not an address (0x...)"))?;
    Ok(a.wrapping_add(offset.unwrap_or(0) as u64))
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

    /// The file a request's `source` names: its path, or the file behind its
    /// `sourceReference`.
    fn path_of(&self, source: &dap::types::Source) -> Result<String> {
        match (&source.path, source.source_reference) {
            (Some(p), _) => Ok(p.clone()),
            (None, Some(r)) if r > 0 => self
                .source_path(r as i64)
                .ok_or_else(|| anyhow!("`source.sourceReference`: no source {r}")),
            _ => bail!("`source.path` is required"),
        }
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

    pub fn read_memory(&mut self, a: ReadMemoryArguments) -> Result<Option<Value>> {
        let addr = reference("memoryReference", &a.memory_reference, a.offset)?;
        if !(0..=MAX_MEMORY).contains(&a.count) {
            bail!("`count`: {} is not 0 to {MAX_MEMORY} bytes", a.count);
        }
        let count = a.count as u64;
        let live = self.live()?;
        // As much as is readable from the start, page by page.
        let data = readable(live, addr, count);
        let unreadable = count - data.len() as u64;
        Ok(Some(body(&ReadMemoryResponse {
            address: format!("{addr:#x}"),
            data: Some(base64::engine::general_purpose::STANDARD.encode(&data)),
            unreadable_bytes: Some(unreadable as i64),
        })))
    }

    pub fn write_memory(&mut self, a: WriteMemoryArguments) -> Result<Option<Value>> {
        let addr = reference("memoryReference", &a.memory_reference, a.offset)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(a.data.trim())
            .map_err(|e| anyhow!("`data`: not base64 ({e})"))?;
        if bytes.len() as i64 > MAX_MEMORY {
            bail!("`data`: more than {MAX_MEMORY} bytes");
        }
        let live = self.live()?;
        live.core
            .write_memory(addr, &bytes)
            .map_err(|e| anyhow!("`memoryReference`: {e}"))?;
        let diverged = live.core.is_modified();
        let tid = live.tid();
        let step = live.core.step();
        let view = super::view::of_kernel(live.core.kernel(), step);
        let o = self.open.as_mut().expect("live");
        o.view = view;
        let _ = tid;
        self.later(wire::event(Event::Invalidated(
            dap::events::InvalidatedEventBody {
                areas: Some(vec![dap::types::InvalidatedAreas::Variables]),
                ..Default::default()
            },
        )));
        self.later(wire::event(Event::Memory(dap::events::MemoryEventBody {
            memory_reference: format!("{addr:#x}"),
            offset: 0,
            count: bytes.len() as i64,
        })));
        if diverged {
            self.later(wire::output(
                "rewind: memory was written: the session is no longer the recording; it goes \
                 forward from here, and `goto` (or rewind/goto) returns to the recording\n"
                    .into(),
            ));
        }
        Ok(Some(body(&WriteMemoryResponse {
            offset: Some(0),
            bytes_written: Some(bytes.len() as i64),
        })))
    }

    pub fn disassemble(&mut self, a: DisassembleArguments) -> Result<Option<Value>> {
        use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};
        let addr = reference("memoryReference", &a.memory_reference, a.offset)?;
        if !(0..=MAX_INSTRUCTIONS).contains(&a.instruction_count) {
            bail!(
                "`instructionCount`: {} is not 0 to {MAX_INSTRUCTIONS}",
                a.instruction_count
            );
        }
        let count = a.instruction_count as usize;
        let skip = a.instruction_offset.unwrap_or(0);
        if !(-MAX_INSTRUCTIONS..=MAX_INSTRUCTIONS).contains(&skip) {
            bail!("`instructionOffset`: {skip} is not -{MAX_INSTRUCTIONS} to {MAX_INSTRUCTIONS}");
        }
        let symbols = a.resolve_symbols.unwrap_or(true);
        let live = self.live()?;
        // Decode from a known boundary before the address: its function's
        // start, else the address itself.
        let before = (-skip).max(0) as u64;
        let start = live
            .function(addr)
            .map(|(lo, _)| lo)
            .filter(|lo| addr - lo <= 1 << 16)
            .unwrap_or(addr)
            .min(addr.saturating_sub(before * 15));
        let span = (addr - start) + (count as u64 + skip.max(0) as u64) * 15 + 16;
        let code = readable(live, start, span);
        let mut decoded: Vec<(u64, Vec<u8>, String)> = Vec::new();
        let mut f = IntelFormatter::new();
        let mut d = Decoder::with_ip(64, &code, start, DecoderOptions::NONE);
        for ins in &mut d {
            let mut text = String::new();
            f.format(&ins, &mut text);
            let off = (ins.ip() - start) as usize;
            decoded.push((ins.ip(), code[off..off + ins.len()].to_vec(), text));
        }
        // The instruction at (or containing) addr, then the offset.
        let at = decoded
            .iter()
            .position(|(ip, b, _)| *ip <= addr && addr < ip + b.len() as u64);
        let mut out = Vec::new();
        let first = at.map(|i| i as i64 + skip);
        for k in 0..count as i64 {
            let idx = first.map(|f| f + k);
            match idx
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| decoded.get(i))
            {
                Some((ip, bytes, text)) => {
                    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                    let mut v = Instruction {
                        address: format!("{ip:#x}"),
                        instruction_bytes: Some(hex.join(" ")),
                        instruction: text.clone(),
                        ..Default::default()
                    };
                    if symbols {
                        v.symbol = live.sym.as_ref().and_then(|s| {
                            s.frames_at(*ip).into_iter().last().and_then(|fr| fr.symbol)
                        });
                    }
                    if let Some(r) = live.lines.at(*ip) {
                        if live.lines.is_stmt_start(*ip) {
                            v.location = Some(Source::local(live.lines.file(r.file)));
                            v.line = Some(i64::from(r.line));
                        }
                    }
                    out.push(v);
                }
                None => {
                    let ip =
                        idx.map_or(addr, |i| addr.wrapping_add((i - first.unwrap_or(0)) as u64));
                    out.push(Instruction {
                        address: format!("{ip:#x}"),
                        instruction: "??".into(),
                        presentation_hint: Some("invalid"),
                        ..Default::default()
                    });
                }
            }
        }
        Ok(Some(body(&InstructionsReply { instructions: out })))
    }

    /// The source files of the program's line tables.
    pub fn loaded_sources(&mut self) -> Result<Option<Value>> {
        let files: Vec<String> = self.live()?.lines.files().to_vec();
        let sources: Vec<Source> = files.iter().map(|p| self.source_of(p)).collect();
        Ok(Some(body(&SourcesReply { sources })))
    }

    /// `path` as DAP names it, with a `sourceReference` when the file is
    /// not on this host (the client then asks `source` for it).
    pub fn source_of(&mut self, path: &str) -> Source {
        let mut s = Source::local(path);
        if !std::path::Path::new(path).exists() {
            s.source_reference = Some(self.source_ref(path));
            s.origin = Some("from the run's image or debuginfod".into());
        }
        s
    }

    pub fn source(&mut self, a: SourceArguments) -> Result<Option<Value>> {
        let path = match a.source.as_ref().and_then(|s| s.path.clone()) {
            Some(p) if a.source_reference == 0 => p,
            _ => self
                .source_path(a.source_reference)
                .ok_or_else(|| anyhow!("`sourceReference`: no source {}", a.source_reference))?,
        };
        let live = self.live()?;
        let sym = live
            .sym
            .clone()
            .ok_or_else(|| anyhow!("the program has no symbols"))?;
        let k = live.core.kernel();
        let mut image = |p: &str| k.file_contents(p);
        let src = sym
            .source(&path, None, &mut image)
            .map_err(|e| anyhow!("`source`: {e}"))?;
        Ok(Some(body(&SourceResponse {
            content: src.text,
            mime_type: Some("text/x-c".into()),
        })))
    }

    pub fn modules(&mut self, a: ModulesArguments) -> Result<Option<Value>> {
        let live = self.live()?;
        let Some(sym) = live.sym.clone() else {
            return Ok(Some(body(&ModulesResponse {
                modules: Vec::new(),
                total_modules: Some(0),
            })));
        };
        let all: Vec<Module> = sym
            .modules()
            .iter()
            .map(|m| {
                let origin = m.module.debug_origin();
                let status = match origin {
                    symbols::DebugOrigin::None => "symbols only (no debug info)".to_string(),
                    symbols::DebugOrigin::Embedded => "debug info loaded".to_string(),
                    symbols::DebugOrigin::HostFile(p) => format!("debug info from {}", p.display()),
                    symbols::DebugOrigin::Debuginfod(p) => {
                        format!("debug info from debuginfod ({})", p.display())
                    }
                };
                let file = match origin {
                    symbols::DebugOrigin::HostFile(p) | symbols::DebugOrigin::Debuginfod(p) => {
                        Some(p.display().to_string())
                    }
                    _ => None,
                };
                Module {
                    id: ModuleId::String(m.module.build_id_hex().unwrap_or_else(|| m.path.clone())),
                    name: m.path.rsplit('/').next().unwrap_or(&m.path).to_string(),
                    path: Some(m.path.clone()),
                    is_optimized: None,
                    is_user_code: Some(true),
                    version: None,
                    symbol_status: Some(status),
                    symbol_file_path: file,
                    date_time_stamp: None,
                    address_range: Some(format!("{:#x}-{:#x}", m.start, m.end)),
                }
            })
            .collect();
        let total = all.len();
        let start = a.start_module.unwrap_or(0).max(0) as usize;
        let count = a
            .module_count
            .filter(|c| *c > 0)
            .map_or(usize::MAX, |c| c as usize);
        let modules = all.into_iter().skip(start).take(count).collect();
        Ok(Some(body(&ModulesResponse {
            modules,
            total_modules: Some(total as i64),
        })))
    }
}

/// The bytes readable from `addr` on, at most `len`, page by page, up to
/// the first that cannot be read.
fn readable(live: &mut Live, addr: u64, len: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cur = addr;
    let end = addr.saturating_add(len);
    while cur < end {
        let page_end = (cur | 0xfff).saturating_add(1).min(end);
        let n = page_end - cur;
        if n == 0 {
            break;
        }
        match live.core.read_memory(cur, n as usize) {
            Ok(b) => out.extend(b),
            Err(_) => break,
        }
        cur += n;
    }
    out
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
