//! The memory requests: readMemory, writeMemory and disassemble, on the
//! debug core at the position. docs/dap.md says what each answers.

use super::breakpoints;
use super::live::Live;
use super::replies::{body, Instruction, InstructionsReply, Source};
use super::session::Session;
use super::wire;
use anyhow::{anyhow, bail, Result};
use base64::Engine as _;
use dap::events::Event;
use dap::requests::{DisassembleArguments, ReadMemoryArguments, WriteMemoryArguments};
use dap::responses::{ReadMemoryResponse, WriteMemoryResponse};
use serde_json::Value;

/// At most this many bytes a readMemory or writeMemory.
const MAX_MEMORY: i64 = 1 << 20;
/// At most this many instructions a disassemble.
const MAX_INSTRUCTIONS: i64 = 10_000;

/// `0x401136` (a memory or instruction reference) plus an offset.
pub(super) fn reference(field: &str, r: &str, offset: Option<i64>) -> Result<u64> {
    let a = breakpoints::parse_address(r)
        .or_else(|| r.trim().parse().ok())
        .ok_or_else(|| anyhow!("`{field}`: `{r}` is not an address (0x...)"))?;
    Ok(a.wrapping_add(offset.unwrap_or(0) as u64))
}

impl Session {
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
