//! Where a variable is: its DWARF location (an expression, or a location
//! list entry covering the pc) evaluated with the frame's registers, frame
//! base and CFA, memory read through the thread; pieces put together; an
//! entry value found at the caller's call site; a constant value as bytes.

use super::{scope, types, Place, UnitCtx, ValueError};
use crate::module::Reader;
use crate::unwind::{Memory, Registers};
use crate::{Frame, Symbolizer};
use gimli::{AttributeValue, EvaluationResult, Location, Reader as _};
use std::sync::Arc;

/// The frame that called the one whose variables are read: where entry
/// values (a parameter's value when the function was entered) come from.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub symbolizer: &'a Symbolizer,
    pub frame: &'a Frame,
}

/// What a location expression may ask of the frame.
#[derive(Clone, Copy)]
pub struct FrameCtx<'a> {
    pub regs: Registers,
    pub cfa: Option<u64>,
    /// The link-time address looked up (location lists are chosen by it).
    pub probe: u64,
    /// The value of the function's `DW_AT_frame_base`.
    pub frame_base: Option<u64>,
    pub caller: Option<Caller<'a>>,
    /// The thread's pointer (`fs_base`), for thread-local variables.
    pub tp: Option<u64>,
}

/// Operations one expression may take, at most.
const MAX_OPS: u32 = 10_000;

/// The place of the variable or parameter `e`, whose type is `size` bytes.
pub(crate) fn place_of(
    u: &Arc<UnitCtx>,
    e: &gimli::DebuggingInformationEntry<Reader>,
    f: &FrameCtx,
    mem: &mut dyn Memory,
    size: Option<u64>,
) -> Place {
    if let Ok(Some(v)) = e.attr_value(gimli::DW_AT_const_value) {
        return const_place(u, &v, size);
    }
    match e.attr_value(gimli::DW_AT_location) {
        Ok(Some(v)) => attr_place(u, v, f, mem, size),
        Ok(None) => Place::Missing(ValueError::OptimizedOut),
        Err(e) => Place::Missing(e.into()),
    }
}

/// The place a location attribute names at the frame's pc.
pub(crate) fn attr_place(
    u: &Arc<UnitCtx>,
    v: AttributeValue<Reader>,
    f: &FrameCtx,
    mem: &mut dyn Memory,
    size: Option<u64>,
) -> Place {
    if let AttributeValue::Exprloc(x) = v {
        return eval(u, &x, f, mem, size);
    }
    let mut list = match u.dwarf().attr_locations(&u.unit, v) {
        Ok(Some(l)) => l,
        Ok(None) => return Place::Missing(ValueError::OptimizedOut),
        Err(e) => return Place::Missing(e.into()),
    };
    for _ in 0..100_000 {
        match list.next() {
            Ok(Some(entry)) => {
                if entry.range.begin <= f.probe && f.probe < entry.range.end {
                    return eval(u, &entry.data, f, mem, size);
                }
            }
            Ok(None) => break,
            Err(e) => return Place::Missing(e.into()),
        }
    }
    Place::Missing(ValueError::OptimizedOut)
}

fn const_place(u: &UnitCtx, v: &AttributeValue<Reader>, size: Option<u64>) -> Place {
    let n = size.unwrap_or(8).min(16) as usize;
    let bytes: Vec<u8> = match v {
        AttributeValue::Block(b) => b.to_slice().map(|b| b.to_vec()).unwrap_or_default(),
        AttributeValue::Sdata(x) => (*x as i128).to_le_bytes()[..n].to_vec(),
        AttributeValue::String(s) => s.to_slice().map(|b| b.to_vec()).unwrap_or_default(),
        v => match types::constant(v) {
            Some(x) => x.to_le_bytes()[..n].to_vec(),
            None => match u.dwarf().attr_string(&u.unit, v.clone()) {
                Ok(s) => s.to_slice().map(|b| b.to_vec()).unwrap_or_default(),
                Err(e) => return Place::Missing(e.into()),
            },
        },
    };
    Place::Bytes(bytes.into())
}

fn unavailable(why: impl Into<String>) -> ValueError {
    ValueError::Unavailable(why.into())
}

/// Evaluates a location expression to a place.
pub(crate) fn eval(
    u: &Arc<UnitCtx>,
    x: &gimli::Expression<Reader>,
    f: &FrameCtx,
    mem: &mut dyn Memory,
    size: Option<u64>,
) -> Place {
    match eval_pieces(u, x, f, mem) {
        Ok(pieces) => assemble(&pieces, f, mem, size),
        Err(e) => Place::Missing(e),
    }
}

fn eval_pieces(
    u: &Arc<UnitCtx>,
    x: &gimli::Expression<Reader>,
    f: &FrameCtx,
    mem: &mut dyn Memory,
) -> Result<Vec<gimli::Piece<Reader>>, ValueError> {
    let mut eval = x.clone().evaluation(u.unit.encoding());
    eval.set_max_iterations(MAX_OPS);
    let mut r = eval.evaluate()?;
    for _ in 0..MAX_OPS {
        r = match r {
            EvaluationResult::Complete => return Ok(eval.result()),
            EvaluationResult::RequiresMemory { address, size, .. } => {
                let mut b = [0u8; 8];
                let n = (size as usize).min(8);
                if !mem.read(address, &mut b[..n]) {
                    return Err(ValueError::Unreadable(address));
                }
                eval.resume_with_memory(gimli::Value::Generic(u64::from_le_bytes(b)))?
            }
            EvaluationResult::RequiresRegister { register, .. } => {
                let v = f.regs.get(register.0).ok_or_else(|| {
                    unavailable(format!(
                        "{} is not known in this frame",
                        reg_name(register.0)
                    ))
                })?;
                eval.resume_with_register(gimli::Value::Generic(v))?
            }
            EvaluationResult::RequiresFrameBase => {
                let fb = f
                    .frame_base
                    .ok_or_else(|| unavailable("the frame base is not known"))?;
                eval.resume_with_frame_base(fb)?
            }
            EvaluationResult::RequiresCallFrameCfa => {
                let cfa = f.cfa.ok_or_else(|| unavailable("the CFA is not known"))?;
                eval.resume_with_call_frame_cfa(cfa)?
            }
            EvaluationResult::RequiresRelocatedAddress(a) => {
                eval.resume_with_relocated_address(a.wrapping_add(u.bias))?
            }
            EvaluationResult::RequiresIndexedAddress { index, relocate } => {
                let a = u.dwarf().address(&u.unit, index)?;
                let a = if relocate { a.wrapping_add(u.bias) } else { a };
                eval.resume_with_indexed_address(a)?
            }
            EvaluationResult::RequiresBaseType(off) => {
                let e = u.unit.entry(off)?;
                let enc = match e.attr_value(gimli::DW_AT_encoding)? {
                    Some(AttributeValue::Encoding(enc)) => enc,
                    _ => gimli::DW_ATE_unsigned,
                };
                let size = e
                    .attr_value(gimli::DW_AT_byte_size)?
                    .as_ref()
                    .and_then(types::constant)
                    .unwrap_or(8) as u64;
                let vt = gimli::ValueType::from_encoding(enc, size)
                    .ok_or_else(|| unavailable("a base type the evaluator does not know"))?;
                eval.resume_with_base_type(vt)?
            }
            EvaluationResult::RequiresEntryValue(expr) => {
                let v = entry_value(&expr, f, mem).ok_or(ValueError::OptimizedOut)?;
                eval.resume_with_entry_value(gimli::Value::Generic(v))?
            }
            EvaluationResult::RequiresTls(offset) => {
                let tp =
                    f.tp.ok_or_else(|| unavailable("the thread pointer is not known"))?;
                let a = u.module.tls().address(tp, offset).ok_or_else(|| {
                    unavailable("a thread-local of a file without a PT_TLS segment")
                })?;
                eval.resume_with_tls(a)?
            }
            EvaluationResult::RequiresAtLocation(_) | EvaluationResult::RequiresParameterRef(_) => {
                return Err(unavailable("a reference to another DIE's location"))
            }
        };
    }
    Err(unavailable("the location expression does not end"))
}

fn reg_bytes(f: &FrameCtx, reg: u16) -> Result<[u8; 8], ValueError> {
    f.regs
        .get(reg)
        .map(u64::to_le_bytes)
        .ok_or_else(|| unavailable(format!("{} is not known in this frame", reg_name(reg))))
}

/// Pieces to a place: one address stays an address; anything else is read
/// into bytes now (registers of a frame do not change while it is shown).
fn assemble(
    pieces: &[gimli::Piece<Reader>],
    f: &FrameCtx,
    mem: &mut dyn Memory,
    size: Option<u64>,
) -> Place {
    if let [one] = pieces {
        if one.size_in_bits.is_none() {
            return match &one.location {
                Location::Address { address } => Place::Memory(*address),
                Location::Empty => Place::Missing(ValueError::OptimizedOut),
                Location::ImplicitPointer { .. } => {
                    Place::Missing(unavailable("an implicit pointer"))
                }
                Location::Register { register } => match reg_bytes(f, register.0) {
                    Ok(b) => Place::Bytes(b[..size.unwrap_or(8).min(8) as usize].into()),
                    Err(e) => Place::Missing(e),
                },
                Location::Value { value } => Place::Bytes(value_bytes(value, size).into()),
                Location::Bytes { value } => Place::Bytes(
                    value
                        .to_slice()
                        .map(|b| b.to_vec())
                        .unwrap_or_default()
                        .into(),
                ),
            };
        }
    }
    if pieces.iter().all(|p| p.location.is_empty()) {
        return Place::Missing(ValueError::OptimizedOut);
    }
    let mut out: Vec<u8> = Vec::new();
    for p in pieces {
        let n = p.size_in_bits.map_or(8, |b| b.div_ceil(8)).min(4096) as usize;
        let bytes: Vec<u8> = match &p.location {
            Location::Empty | Location::ImplicitPointer { .. } => vec![0; n],
            Location::Address { address } => {
                let mut b = vec![0; n];
                if !mem.read(*address, &mut b) {
                    return Place::Missing(ValueError::Unreadable(*address));
                }
                b
            }
            Location::Register { register } => match reg_bytes(f, register.0) {
                Ok(b) => b
                    .iter()
                    .copied()
                    .chain(std::iter::repeat(0))
                    .take(n)
                    .collect(),
                Err(e) => return Place::Missing(e),
            },
            Location::Value { value } => value_bytes(value, Some(n as u64)),
            Location::Bytes { value } => value.to_slice().map(|b| b.to_vec()).unwrap_or_default(),
        };
        out.extend(bytes.iter().copied().chain(std::iter::repeat(0)).take(n));
        if out.len() > 1 << 16 {
            break;
        }
    }
    Place::Bytes(out.into())
}

fn value_bytes(v: &gimli::Value, size: Option<u64>) -> Vec<u8> {
    let n = size.unwrap_or(8).min(8) as usize;
    let b: [u8; 8] = match *v {
        gimli::Value::F32(x) => (x.to_bits() as u64).to_le_bytes(),
        gimli::Value::F64(x) => x.to_bits().to_le_bytes(),
        other => other.to_u64(u64::MAX).unwrap_or(0).to_le_bytes(),
    };
    b[..n].to_vec()
}

/// A register's name in messages.
pub fn reg_name(reg: u16) -> String {
    const NAMES: [&str; 17] = [
        "rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15", "rip",
    ];
    NAMES
        .get(reg as usize)
        .map_or_else(|| format!("register {reg}"), |n| format!("${n}"))
}

/// The value a register had when the function was entered: the call site
/// in the caller that passed it (`DW_TAG_call_site_parameter` with that
/// register as its location), its value evaluated in the caller's frame.
fn entry_value(
    expr: &gimli::Expression<Reader>,
    f: &FrameCtx,
    mem: &mut dyn Memory,
) -> Option<u64> {
    let caller = f.caller?;
    let reg = single_register(expr)?;
    let frame = caller.frame;
    let m = caller.symbolizer.module_at(frame.probe())?;
    let dwarf = m.module.dwarf()?;
    let ret = frame.pc.wrapping_sub(m.bias);
    let probe = frame.probe().wrapping_sub(m.bias);
    let index = m.module.values_index();
    for off in index.units_at(probe) {
        let unit = index.unit(dwarf, off).ok()?;
        let u = Arc::new(UnitCtx {
            module: m.module.clone(),
            rust: super::is_rust(&unit),
            unit,
            bias: m.bias,
        });
        let Some(chain) = scope::chain_at(&u, probe).ok().flatten() else {
            continue;
        };
        let (sub, _) = *chain.first()?;
        let Some(value) = call_site_value(&u, sub, ret, reg) else {
            continue;
        };
        let mut cf = FrameCtx {
            regs: frame.regs,
            cfa: frame.cfa,
            probe,
            frame_base: None,
            caller: None,
            tp: None,
        };
        cf.frame_base = scope::frame_base(&u, sub, &cf, mem);
        return match eval(&u, &value, &cf, mem, Some(8)) {
            Place::Bytes(b) => {
                let mut w = [0u8; 8];
                let n = b.len().min(8);
                w[..n].copy_from_slice(&b[..n]);
                Some(u64::from_le_bytes(w))
            }
            // DW_OP_breg7 etc. without stack_value: the address is the value.
            Place::Memory(a) => Some(a),
            Place::Missing(_) => None,
        };
    }
    None
}

/// `DW_OP_regN` alone (or `DW_OP_regx N`).
fn single_register(expr: &gimli::Expression<Reader>) -> Option<u16> {
    let mut ops = expr.clone().operations(gimli::Encoding {
        format: gimli::Format::Dwarf32,
        version: 4,
        address_size: 8,
    });
    let first = ops.next().ok()??;
    if ops.next().ok()?.is_some() {
        return None;
    }
    match first {
        gimli::Operation::Register { register } => Some(register.0),
        _ => None,
    }
}

/// The `DW_AT_call_value` of the parameter passed in `reg` at the call site
/// of subprogram `sub` that returns to `ret`.
fn call_site_value(
    u: &Arc<UnitCtx>,
    sub: gimli::UnitOffset,
    ret: u64,
    reg: u16,
) -> Option<gimli::Expression<Reader>> {
    let mut cursor = u.unit.entries_at_offset(sub).ok()?;
    let mut depth: isize = 0;
    let mut in_site: Option<isize> = None;
    let mut first = true;
    for _ in 0..super::caps::DIES {
        let (delta, e) = cursor.next_dfs().ok()??;
        if first {
            first = false;
        } else {
            depth += delta;
            if depth <= 0 {
                return None;
            }
        }
        if let Some(d) = in_site {
            if depth <= d {
                in_site = None;
            }
        }
        match e.tag() {
            gimli::DW_TAG_call_site | gimli::DW_TAG_GNU_call_site => {
                let pc = [gimli::DW_AT_call_return_pc, gimli::DW_AT_low_pc]
                    .into_iter()
                    .find_map(|a| match e.attr_value(a).ok()? {
                        Some(AttributeValue::Addr(a)) => Some(a),
                        Some(AttributeValue::DebugAddrIndex(i)) => {
                            u.dwarf().address(&u.unit, i).ok()
                        }
                        _ => None,
                    });
                if pc == Some(ret) {
                    in_site = Some(depth);
                }
            }
            gimli::DW_TAG_call_site_parameter | gimli::DW_TAG_GNU_call_site_parameter
                if in_site.is_some() =>
            {
                let loc = match e.attr_value(gimli::DW_AT_location).ok()? {
                    Some(AttributeValue::Exprloc(x)) => x,
                    _ => continue,
                };
                if single_register(&loc) != Some(reg) {
                    continue;
                }
                for a in [gimli::DW_AT_call_value, gimli::DW_AT_GNU_call_site_value] {
                    if let Ok(Some(AttributeValue::Exprloc(x))) = e.attr_value(a) {
                        return Some(x);
                    }
                }
            }
            _ => {}
        }
    }
    None
}
