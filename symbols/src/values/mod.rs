//! Program variables from DWARF: a frame's arguments and locals, their
//! values read through the thread's memory, shown lazily as a tree.
//!
//! - [`scope`]: which variables a frame has at its pc (the subprogram, the
//!   lexical blocks and inlined subroutines that cover it);
//! - [`location`]: where a variable is (DWARF location expressions and
//!   lists, frame base, CFA, pieces, entry values from the caller's call
//!   site);
//! - [`types`]: what its bytes mean (DWARF types, one level at a time);
//! - [`format`]: a value's one-line summary and its children (C and Rust:
//!   strings, `Vec`, `String`, `&str`, slices, enums with data, `Option`);
//! - [`expr`]: the expressions a debugger's hover, watch and REPL take;
//! - [`cond`]: the same as a breakpoint's condition or a logpoint's
//!   `{expression}`, over variables or else registers and memory.
//!
//! Every read is bounded (element, depth and byte caps) and every failure is
//! a value (`<unreadable 0x...>`, `<optimized out>`), so hostile DWARF or
//! memory shows as text, never as a panic or a hang.
//!
//! ```no_run
//! # fn f(s: &symbols::Symbolizer, bt: &symbols::Backtrace, mut mem: impl symbols::Memory) {
//! let vars = s.variables(bt, bt.chosen, &mut mem).unwrap();
//! for v in &vars.locals {
//!     let shown = v.value.show(&mut mem);
//!     println!("{} = {} ({})", v.name, shown.value, shown.type_name);
//! }
//! # }
//! ```

pub mod cond;
pub mod encode;
pub mod expr;
pub mod format;
pub mod location;
pub mod scope;
pub mod types;

use crate::module::{Module, Reader};
use crate::unwind::Memory;
use crate::{Backtrace, Frame, Symbolizer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use format::Shown;
pub use types::Ty;

/// Why a value or a frame's variables could not be had. Shown as the
/// value's text where a value is expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("no debug info covers {0:#x}")]
    NoDebugInfo(u64),
    #[error("bad DWARF: {0}")]
    Dwarf(String),
    #[error("<unreadable {0:#x}>")]
    Unreadable(u64),
    #[error("<optimized out>")]
    OptimizedOut,
    #[error("<unavailable: {0}>")]
    Unavailable(String),
    #[error("no variable `{0}` in this frame")]
    NoSuchName(String),
    #[error("{0}")]
    Expression(String),
    #[error("no frame {0} in the stack")]
    NoFrame(usize),
}

impl From<gimli::Error> for ValueError {
    fn from(e: gimli::Error) -> Self {
        ValueError::Dwarf(e.to_string())
    }
}

/// A compilation unit parsed for reading values, with the module it is in
/// and where that module is loaded.
pub struct UnitCtx {
    pub(crate) module: Arc<Module>,
    pub(crate) unit: Arc<gimli::Unit<Reader>>,
    pub(crate) bias: u64,
    pub(crate) rust: bool,
}

impl std::fmt::Debug for UnitCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitCtx")
            .field("unit", &self.unit.header.offset())
            .field("bias", &self.bias)
            .field("rust", &self.rust)
            .finish()
    }
}

impl UnitCtx {
    pub(crate) fn dwarf(&self) -> &gimli::Dwarf<Reader> {
        self.module.dwarf().expect("a unit comes from DWARF")
    }

    /// The unit holding the DIE at a `.debug_info` offset (a reference
    /// across units), as a context like this one.
    pub(crate) fn unit_of(
        &self,
        off: gimli::DebugInfoOffset,
    ) -> Result<(Arc<UnitCtx>, gimli::UnitOffset), ValueError> {
        let index = self.module.values_index();
        let unit = index.unit_containing(self.dwarf(), off)?;
        let local = off
            .to_unit_offset(&unit.header)
            .ok_or_else(|| ValueError::Dwarf(format!("no DIE at {:#x}", off.0)))?;
        Ok((
            Arc::new(UnitCtx {
                module: self.module.clone(),
                rust: is_rust(&unit),
                unit,
                bias: self.bias,
            }),
            local,
        ))
    }
}

/// Per-module index for values, built on first use and kept with the
/// module (so per build id): each unit's address ranges, and the units
/// parsed so far.
#[derive(Default)]
pub struct Index {
    /// (begin, end, unit header offset), sorted by begin.
    ranges: Vec<(u64, u64, gimli::DebugInfoOffset)>,
    /// Unit header offsets in section order, for references across units.
    headers: Vec<gimli::DebugInfoOffset>,
    parsed: Mutex<HashMap<gimli::DebugInfoOffset, Arc<gimli::Unit<Reader>>>>,
}

/// Units are not parsed past this many (a hostile file's endless list).
const MAX_UNITS: usize = 100_000;

impl Index {
    pub(crate) fn build(dwarf: &gimli::Dwarf<Reader>) -> Index {
        let mut ranges = Vec::new();
        let mut headers = Vec::new();
        let mut units = dwarf.units();
        while let Ok(Some(header)) = units.next() {
            if headers.len() >= MAX_UNITS {
                break;
            }
            let Some(off) = header.offset().as_debug_info_offset() else {
                continue;
            };
            headers.push(off);
            let Ok(unit) = dwarf.unit(header) else {
                continue;
            };
            if let Ok(mut rs) = dwarf.unit_ranges(&unit) {
                while let Ok(Some(r)) = rs.next() {
                    if r.begin < r.end {
                        ranges.push((r.begin, r.end, off));
                    }
                }
            }
        }
        ranges.sort_by_key(|r| r.0);
        Index {
            ranges,
            headers,
            parsed: Mutex::default(),
        }
    }

    /// The units whose ranges cover `addr` (link-time).
    fn units_at(&self, addr: u64) -> Vec<gimli::DebugInfoOffset> {
        let end = self.ranges.partition_point(|r| r.0 <= addr);
        let mut out: Vec<_> = self.ranges[..end]
            .iter()
            .filter(|r| addr < r.1)
            .map(|r| r.2)
            .collect();
        out.dedup();
        out
    }

    pub(crate) fn unit(
        &self,
        dwarf: &gimli::Dwarf<Reader>,
        off: gimli::DebugInfoOffset,
    ) -> Result<Arc<gimli::Unit<Reader>>, ValueError> {
        let mut parsed = self.parsed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(u) = parsed.get(&off) {
            return Ok(u.clone());
        }
        let header = dwarf.debug_info.header_from_offset(off)?;
        let unit = Arc::new(dwarf.unit(header)?);
        parsed.insert(off, unit.clone());
        Ok(unit)
    }

    fn unit_containing(
        &self,
        dwarf: &gimli::Dwarf<Reader>,
        off: gimli::DebugInfoOffset,
    ) -> Result<Arc<gimli::Unit<Reader>>, ValueError> {
        let i = self.headers.partition_point(|h| h.0 <= off.0);
        let start = i
            .checked_sub(1)
            .map(|i| self.headers[i])
            .ok_or_else(|| ValueError::Dwarf(format!("no unit holds {:#x}", off.0)))?;
        self.unit(dwarf, start)
    }
}

impl Module {
    pub(crate) fn values_index(&self) -> &Index {
        self.values.get_or_init(|| match self.dwarf() {
            Some(d) => Index::build(d),
            None => Index::default(),
        })
    }
}

pub(crate) fn is_rust(unit: &gimli::Unit<Reader>) -> bool {
    let Ok(root) = unit.entry(unit_root(unit)) else {
        return false;
    };
    matches!(
        root.attr_value(gimli::DW_AT_language),
        Ok(Some(gimli::AttributeValue::Language(gimli::DW_LANG_Rust)))
    )
}

/// The offset of a unit's root DIE.
pub(crate) fn unit_root(unit: &gimli::Unit<Reader>) -> gimli::UnitOffset {
    gimli::UnitOffset(unit.header.header_size())
}

/// Where a value's bytes are.
#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// In the thread's memory, at this address.
    Memory(u64),
    /// Known bytes (a register, a constant, pieces put together).
    Bytes(Arc<[u8]>),
    /// Nowhere: why.
    Missing(ValueError),
}

/// One value: its type and where its bytes are. Cheap to clone; reading
/// and formatting happen when asked ([`Value::show`], [`Value::children`]).
#[derive(Debug, Clone)]
pub struct Value {
    pub(crate) unit: Arc<UnitCtx>,
    pub(crate) ty: Arc<Ty>,
    pub place: Place,
}

/// A variable of a frame.
#[derive(Debug, Clone)]
pub struct Variable {
    pub name: String,
    /// A formal parameter (else a local).
    pub argument: bool,
    /// Where it was declared, when the DWARF says.
    pub line: Option<u32>,
    pub value: Value,
}

/// A frame's variables: arguments in declaration order, then locals, the
/// innermost block's first.
#[derive(Debug, Clone, Default)]
pub struct FrameVariables {
    pub arguments: Vec<Variable>,
    pub locals: Vec<Variable>,
    /// The unit of the frame's function (for globals in expressions).
    pub(crate) unit: Option<Arc<UnitCtx>>,
    /// The thread's pointer, for thread-locals and errno.
    pub(crate) tp: Option<u64>,
}

impl FrameVariables {
    /// The variable a name means here: the innermost local, else an argument.
    pub fn find(&self, name: &str) -> Option<&Variable> {
        self.locals
            .iter()
            .chain(&self.arguments)
            .find(|v| v.name == name)
    }
}

impl Frame {
    /// The address to look up for this frame: its pc for the innermost
    /// frame and one a signal interrupted, else the call instruction (the
    /// return address minus one).
    pub fn probe(&self) -> u64 {
        match self.method {
            crate::Method::Context | crate::Method::SignalFrame => self.pc,
            _ => self.pc.wrapping_sub(1),
        }
    }
}

impl Backtrace {
    /// How many inlined frames are inside frame `i` in the same physical
    /// frame (0 for the innermost logical frame at its pc).
    pub fn inline_depth(&self, i: usize) -> usize {
        let mut d = 0;
        let mut j = i;
        while j > 0 && self.frames[j - 1].inlined && self.frames[j - 1].pc == self.frames[i].pc {
            d += 1;
            j -= 1;
        }
        d
    }

    /// The first frame of the physical frame that calls frame `i`'s.
    pub fn caller_of(&self, i: usize) -> Option<usize> {
        let mut j = i;
        while self.frames.get(j)?.inlined {
            j += 1;
        }
        (j + 1 < self.frames.len()).then_some(j + 1)
    }
}

impl Symbolizer {
    /// The arguments and locals of frame `i` of `bt` (an unwound stack:
    /// the frame's registers and CFA come from the unwinder), their
    /// locations evaluated with memory read through `mem`.
    pub fn variables(
        &self,
        bt: &Backtrace,
        i: usize,
        mem: &mut dyn Memory,
    ) -> Result<FrameVariables, ValueError> {
        let frame = bt.frames.get(i).ok_or(ValueError::NoFrame(i))?;
        let probe = frame.probe();
        let m = self
            .module_at(probe)
            .ok_or(ValueError::NoDebugInfo(frame.pc))?;
        let dwarf = m.module.dwarf().ok_or(ValueError::NoDebugInfo(frame.pc))?;
        let addr = probe.wrapping_sub(m.bias);
        let index = m.module.values_index();
        for off in index.units_at(addr) {
            let unit = index.unit(dwarf, off)?;
            let ctx = Arc::new(UnitCtx {
                module: m.module.clone(),
                rust: is_rust(&unit),
                unit,
                bias: m.bias,
            });
            let Some(chain) = scope::chain_at(&ctx, addr)? else {
                continue;
            };
            let caller = bt.caller_of(i).map(|c| (self, bt, c));
            let fctx = location::FrameCtx {
                regs: frame.regs,
                cfa: frame.cfa,
                probe: addr,
                frame_base: None,
                caller: caller.map(|(s, bt, c)| location::Caller {
                    symbolizer: s,
                    frame: &bt.frames[c],
                }),
                tp: bt.thread_pointer,
            };
            return scope::variables(&ctx, &chain, bt.inline_depth(i), fctx, mem);
        }
        Err(ValueError::NoDebugInfo(frame.pc))
    }
}

/// Caps on the work one request does, whatever the DWARF and memory say.
pub mod caps {
    /// Elements an array or `Vec` is said to have, at most.
    pub const ELEMENTS: u64 = 1 << 20;
    /// Elements shown in a one-line summary.
    pub const SUMMARY_ELEMENTS: usize = 8;
    /// Nesting shown in a one-line summary.
    pub const SUMMARY_DEPTH: usize = 2;
    /// Characters of a summary.
    pub const SUMMARY_CHARS: usize = 160;
    /// Bytes of a C string read.
    pub const STRING_BYTES: usize = 256;
    /// Members of a struct read.
    pub const MEMBERS: usize = 4096;
    /// Typedef, const and volatile hops followed.
    pub const TYPE_HOPS: usize = 32;
    /// DIEs visited looking for a frame's scope.
    pub const DIES: usize = 1_000_000;
    /// Bytes of one value read at once.
    pub const VALUE_BYTES: u64 = 1 << 16;
}

/// The OnceLock a module keeps its index in.
pub(crate) type IndexCell = OnceLock<Index>;
