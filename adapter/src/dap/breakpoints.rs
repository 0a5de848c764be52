//! Source, function (symbol), instruction-address and data breakpoints,
//! with conditions, hit conditions and logpoints, as the session keeps them
//! and judges a stop against them. Event-name function breakpoints
//! (`write`, `SIGSEGV`, `threadStart`) stay step granular (session.rs).

use super::live::{register_of, CoreMemory, Live};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use symbols::values::cond;
use symbols::ValueError;
use vmm::debug::{Watch, WatchKind};

/// What a breakpoint is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum On {
    /// A line of a source file (the path as the client named it).
    Line { path: String, line: u32 },
    /// A function, by symbol.
    Symbol(String),
    /// A data breakpoint.
    Data(Watch),
}

#[derive(Debug, Clone)]
pub struct Bp {
    pub id: i64,
    pub on: On,
    /// Where its `int3`s go (empty for data breakpoints, and where the
    /// line or symbol has no code).
    pub addrs: Vec<u64>,
    pub condition: Option<String>,
    pub hit: Option<HitCond>,
    /// A logpoint's message: it never stops.
    pub log: Option<String>,
}

/// Every breakpoint of the session that is not an event name.
#[derive(Debug, Default)]
pub struct Breakpoints {
    next_id: i64,
    /// Source breakpoints by the path the client gave.
    pub source: BTreeMap<String, Vec<Bp>>,
    pub symbols: Vec<Bp>,
    pub instructions: Vec<Bp>,
    pub data: Vec<Bp>,
}

impl Breakpoints {
    /// A new id (source, symbol, instruction and data breakpoints share them;
    /// event-name function breakpoints keep 1.. by position).
    pub fn id(&mut self) -> i64 {
        self.next_id += 1;
        1000 + self.next_id
    }

    fn all(&self) -> impl Iterator<Item = &Bp> {
        self.source
            .values()
            .flatten()
            .chain(&self.symbols)
            .chain(&self.instructions)
    }

    /// The addresses of the breakpoints that can stop (not logpoints).
    pub fn stop_addrs(&self) -> BTreeSet<u64> {
        self.all()
            .filter(|b| b.log.is_none())
            .flat_map(|b| b.addrs.iter().copied())
            .collect()
    }

    /// The addresses of the logpoints.
    pub fn log_addrs(&self) -> BTreeSet<u64> {
        self.all()
            .filter(|b| b.log.is_some())
            .flat_map(|b| b.addrs.iter().copied())
            .collect()
    }

    /// Whether a move needs the machine (anything but event names:
    /// logpoints print what a `continue` passes).
    pub fn any(&self) -> bool {
        self.all().any(|b| !b.addrs.is_empty()) || !self.data.is_empty()
    }

    /// What the logpoints at `pc` print when thread `tid` runs it in step
    /// `step` (those whose condition holds): `step 28 1001 worker: total=16`.
    pub fn log_lines(&self, at: &mut At, pc: u64, step: u64, name: &str) -> Vec<String> {
        let tid = at.tid;
        self.all()
            .filter(|b| b.addrs.contains(&pc))
            .filter_map(|b| {
                let msg = b.log.as_ref()?;
                if let Some(c) = &b.condition {
                    if matches!(at.eval(c), Ok(0)) {
                        return None;
                    }
                }
                let text = at.interpolate(msg);
                Some(format!("step {step} {tid} {name}: {text}\n"))
            })
            .collect()
    }

    pub fn watches(&self) -> Vec<Watch> {
        self.data
            .iter()
            .filter_map(|b| match b.on {
                On::Data(w) => Some(w),
                _ => None,
            })
            .collect()
    }

    /// The stopping breakpoints at `pc`.
    pub fn at(&self, pc: u64) -> Vec<&Bp> {
        self.all()
            .filter(|b| b.log.is_none() && b.addrs.contains(&pc))
            .collect()
    }

    pub fn data_for(&self, w: &Watch) -> Option<&Bp> {
        self.data.iter().find(|b| b.on == On::Data(*w))
    }
}

/// Hit counts of one move, by breakpoint id.
#[derive(Debug, Default)]
pub struct Counts(HashMap<i64, u64>);

/// The machine at a stop, as a condition reads it: thread `tid`'s
/// registers and the process's memory.
pub struct At<'a> {
    pub live: &'a mut Live,
    pub tid: u32,
}

impl At<'_> {
    /// `f` over what a condition reads here: the innermost frame's
    /// variables (where there is debug info), the registers, the memory.
    fn read<R>(&mut self, f: impl FnOnce(&cond::Stop, &mut CoreMemory) -> R) -> R {
        let tid = self.tid;
        let regs = self.live.core.registers(tid).ok();
        let register = |name: &str| regs.as_ref().and_then(|t| register_of(t, tid, name));
        let vars = self.live.stop_variables(tid);
        let stop = cond::Stop {
            vars: vars.as_ref(),
            register: &register,
        };
        f(&stop, &mut CoreMemory(&mut self.live.core))
    }

    /// A condition or an address as an integer (symbols' `cond`).
    pub fn eval(&mut self, expr: &str) -> Result<i128, ValueError> {
        self.read(|stop, mem| stop.eval(expr, mem))
    }

    /// A logpoint's message with its `{expressions}` evaluated.
    pub fn interpolate(&mut self, msg: &str) -> String {
        self.read(|stop, mem| stop.interpolate(msg, mem))
    }
}

/// Whether `b` stops here: its condition holds (an expression that cannot
/// be evaluated stops, and says why), then its hit condition counts.
/// Returns the stop's note when it stops.
pub fn judge(b: &Bp, at: &mut At, counts: &mut Counts) -> Option<Option<String>> {
    let mut note = None;
    if let Some(c) = &b.condition {
        match at.eval(c) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => note = Some(format!("condition `{c}`: {e}")),
        }
    }
    let n = counts.0.entry(b.id).or_insert(0);
    *n += 1;
    if let Some(h) = b.hit {
        if !h.fires(*n) {
            return None;
        }
    }
    Some(note)
}

/// `0x4c6f80`, `4c6f80` and `*0x4c6f80` as an address.
pub fn parse_address(s: &str) -> Option<u64> {
    let t = s.trim().trim_start_matches('*').trim_start_matches('&');
    let h = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
    u64::from_str_radix(h, 16).ok()
}

/// The data id of a watched range: `0x4c6f80/8`.
pub fn data_id(addr: u64, len: u64) -> String {
    format!("{addr:#x}/{len}")
}

/// A data id and DAP access type as a watch.
pub fn watch_of(data_id: &str, access: Option<&str>) -> Result<Watch, String> {
    let (a, l) = data_id
        .split_once('/')
        .ok_or_else(|| format!("`dataId` `{data_id}` is not ADDRESS/LENGTH"))?;
    let addr = parse_address(a).ok_or_else(|| format!("`dataId`: `{a}` is not an address"))?;
    let len: u64 = l
        .parse()
        .ok()
        .filter(|n| (1..=4096).contains(n))
        .ok_or_else(|| format!("`dataId`: `{l}` is not a length of 1 to 4096 bytes"))?;
    let kind = match access.unwrap_or("write") {
        "write" => WatchKind::Write,
        "read" => WatchKind::Read,
        "readWrite" => WatchKind::Access,
        other => {
            return Err(format!(
                "`accessType` `{other}` is not read, write or readWrite"
            ))
        }
    };
    Ok(Watch { addr, len, kind })
}

/// A hit condition: `N` or `>= N` (from the N-th hit on), `== N`, `> N`,
/// `% N` (every N-th).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitCond {
    AtLeast(u64),
    Exactly(u64),
    Every(u64),
}

impl HitCond {
    pub fn parse(s: &str) -> Result<HitCond, String> {
        let s = s.trim();
        let num = |t: &str| -> Result<u64, String> {
            t.trim()
                .parse()
                .map_err(|_| format!("`{s}` is not a hit count (N, >= N, == N, > N, % N)"))
        };
        Ok(if let Some(t) = s.strip_prefix(">=") {
            HitCond::AtLeast(num(t)?)
        } else if let Some(t) = s.strip_prefix("==") {
            HitCond::Exactly(num(t)?)
        } else if let Some(t) = s.strip_prefix('>') {
            HitCond::AtLeast(num(t)? + 1)
        } else if let Some(t) = s.strip_prefix('%') {
            let n = num(t)?;
            if n == 0 {
                return Err("`% 0` never matches".into());
            }
            HitCond::Every(n)
        } else {
            HitCond::AtLeast(num(s)?)
        })
    }

    /// Whether the `n`-th hit (1 is the first) stops.
    pub fn fires(&self, n: u64) -> bool {
        match *self {
            HitCond::AtLeast(k) => n >= k,
            HitCond::Exactly(k) => n == k,
            HitCond::Every(k) => n.is_multiple_of(k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HitCond;

    #[test]
    fn hit_conditions() {
        assert!(HitCond::parse("3").unwrap().fires(3));
        assert!(!HitCond::parse("== 3").unwrap().fires(4));
        assert!(HitCond::parse("%2").unwrap().fires(4));
        assert!(HitCond::parse("x").is_err());
    }
}
