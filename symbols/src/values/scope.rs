//! A frame's scopes at its pc: the subprogram, and the lexical blocks and
//! inlined subroutines inside it that cover the pc; the variables each
//! declares.

use super::location::{self, FrameCtx};
use super::types::{self, name_of, reference, type_of};
use super::{caps, FrameVariables, Place, UnitCtx, Value, ValueError, Variable};
use crate::module::Reader;
use crate::unwind::Memory;
use gimli::AttributeValue;
use std::sync::Arc;

/// The scopes covering an address, outermost (the subprogram) first.
pub type Chain = Vec<(gimli::UnitOffset, gimli::DwTag)>;

/// The chain of scopes covering `addr` (link-time) in this unit, if a
/// subprogram of it does.
pub fn chain_at(u: &Arc<UnitCtx>, addr: u64) -> Result<Option<Chain>, ValueError> {
    let mut tree = u.unit.entries_tree(None)?;
    let root = tree.root()?;
    let mut chain = Vec::new();
    let mut budget = caps::DIES;
    walk(u, root, addr, &mut chain, &mut budget)?;
    Ok((!chain.is_empty()).then_some(chain))
}

fn covers(u: &UnitCtx, e: &gimli::DebuggingInformationEntry<Reader>, addr: u64) -> bool {
    let Ok(mut ranges) = u.dwarf().die_ranges(&u.unit, e) else {
        return false;
    };
    for _ in 0..10_000 {
        match ranges.next() {
            Ok(Some(r)) if r.begin <= addr && addr < r.end => return true,
            Ok(Some(_)) => {}
            _ => return false,
        }
    }
    false
}

fn walk(
    u: &UnitCtx,
    node: gimli::EntriesTreeNode<Reader>,
    addr: u64,
    chain: &mut Chain,
    budget: &mut usize,
) -> Result<bool, ValueError> {
    let mut children = node.children();
    while let Some(child) = children.next()? {
        if *budget == 0 || chain.len() > 64 {
            return Ok(false);
        }
        *budget -= 1;
        let e = child.entry();
        let (off, tag) = (e.offset(), e.tag());
        let container = matches!(
            tag,
            gimli::DW_TAG_namespace
                | gimli::DW_TAG_module
                | gimli::DW_TAG_structure_type
                | gimli::DW_TAG_class_type
                | gimli::DW_TAG_union_type
                | gimli::DW_TAG_enumeration_type
        );
        let scope = matches!(
            tag,
            gimli::DW_TAG_subprogram
                | gimli::DW_TAG_lexical_block
                | gimli::DW_TAG_inlined_subroutine
        ) && covers(u, e, addr);
        if scope {
            chain.push((off, tag));
            walk(u, child, addr, chain, budget)?;
            return Ok(true);
        }
        if container && walk(u, child, addr, chain, budget)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The value of subprogram `sub`'s `DW_AT_frame_base` in the frame.
pub(crate) fn frame_base(
    u: &Arc<UnitCtx>,
    sub: gimli::UnitOffset,
    f: &FrameCtx,
    mem: &mut dyn Memory,
) -> Option<u64> {
    let e = u.unit.entry(sub).ok()?;
    let v = e.attr_value(gimli::DW_AT_frame_base).ok()??;
    match location::attr_place(u, v, f, mem, Some(8)) {
        Place::Memory(a) => Some(a),
        Place::Bytes(b) => {
            let mut w = [0u8; 8];
            let n = b.len().min(8);
            w[..n].copy_from_slice(&b[..n]);
            Some(u64::from_le_bytes(w))
        }
        Place::Missing(_) => None,
    }
}

/// An attribute of a DIE, else of the DIE it is a concrete instance of.
fn inherited(
    u: &Arc<UnitCtx>,
    e: &gimli::DebuggingInformationEntry<Reader>,
) -> Option<(Arc<UnitCtx>, gimli::UnitOffset)> {
    reference(u, e, gimli::DW_AT_abstract_origin)
        .or_else(|| reference(u, e, gimli::DW_AT_specification))
}

/// The variables of the logical frame `depth` inlined levels out from the
/// innermost at the chain's address.
pub(crate) fn variables(
    u: &Arc<UnitCtx>,
    chain: &Chain,
    depth: usize,
    mut f: FrameCtx,
    mem: &mut dyn Memory,
) -> Result<FrameVariables, ValueError> {
    let functions: Vec<usize> = chain
        .iter()
        .enumerate()
        .filter(|(_, (_, t))| {
            matches!(
                *t,
                gimli::DW_TAG_subprogram | gimli::DW_TAG_inlined_subroutine
            )
        })
        .map(|(i, _)| i)
        .collect();
    let Some(&start) = functions
        .len()
        .checked_sub(1 + depth)
        .map(|k| &functions[k])
    else {
        return Err(ValueError::Dwarf(format!(
            "no inlined frame {depth} levels out at {:#x}",
            f.probe
        )));
    };
    let end = functions
        .iter()
        .copied()
        .find(|&i| i > start)
        .unwrap_or(chain.len());
    // The frame base is the physical function's.
    let sub = chain[..=start]
        .iter()
        .rev()
        .find(|(_, t)| *t == gimli::DW_TAG_subprogram)
        .map(|(o, _)| *o);
    if let Some(sub) = sub {
        f.frame_base = frame_base(u, sub, &f, mem);
    }
    let mut out = FrameVariables {
        unit: Some(u.clone()),
        tp: f.tp,
        ..Default::default()
    };
    for (k, (off, _)) in chain[start..end].iter().enumerate().rev() {
        let mut tree = u.unit.entries_tree(Some(*off))?;
        let mut children = tree.root()?.children();
        let mut block = Vec::new();
        let mut n = 0;
        while let Some(c) = children.next()? {
            n += 1;
            if n > caps::MEMBERS {
                break;
            }
            let e = c.entry();
            let argument = match e.tag() {
                gimli::DW_TAG_formal_parameter => true,
                gimli::DW_TAG_variable => false,
                _ => continue,
            };
            // A declaration of a global (`extern int x;` in a block).
            if e.attr_value(gimli::DW_AT_declaration)?.is_some() {
                continue;
            }
            if let Some(v) = variable(u, e, argument, &f, mem) {
                block.push(v);
            }
        }
        if k == 0 {
            let (args, locals): (Vec<_>, Vec<_>) = block.into_iter().partition(|v| v.argument);
            out.arguments = args;
            out.locals.extend(locals);
        } else {
            out.locals.extend(block);
        }
    }
    Ok(out)
}

fn variable(
    u: &Arc<UnitCtx>,
    e: &gimli::DebuggingInformationEntry<Reader>,
    argument: bool,
    f: &FrameCtx,
    mem: &mut dyn Memory,
) -> Option<Variable> {
    let origin = inherited(u, e);
    let from_origin = |at: gimli::DwAt| -> Option<(Arc<UnitCtx>, gimli::UnitOffset)> {
        let (ou, oo) = origin.clone()?;
        let oe = ou.unit.entry(oo).ok()?;
        oe.attr_value(at).ok()??;
        Some((ou, oo))
    };
    let name = match name_of(u, e) {
        Some(n) => n,
        None => {
            let (ou, oo) = from_origin(gimli::DW_AT_name)?;
            name_of(&ou, &ou.unit.entry(oo).ok()?)?
        }
    };
    let ty = match type_of(u, e) {
        types::TypeRef::Void => match from_origin(gimli::DW_AT_type) {
            Some((ou, oo)) => type_of(&ou, &ou.unit.entry(oo).ok()?),
            None => types::TypeRef::Void,
        },
        t => t,
    };
    let line = match e.attr_value(gimli::DW_AT_decl_line).ok().flatten() {
        Some(v) => types::constant(&v),
        None => from_origin(gimli::DW_AT_decl_line).and_then(|(ou, oo)| {
            types::constant(
                &ou.unit
                    .entry(oo)
                    .ok()?
                    .attr_value(gimli::DW_AT_decl_line)
                    .ok()??,
            )
        }),
    }
    .and_then(|l| u32::try_from(l).ok());
    let resolved = types::resolve(&ty).unwrap_or_else(|_| types::Ty::long());
    let place = location::place_of(u, e, f, mem, resolved.size);
    Some(Variable {
        name,
        argument,
        line,
        value: Value {
            unit: u.clone(),
            ty: resolved,
            place,
        },
    })
}

/// The unit's global and static variables (unit and namespace level, with
/// a location), only the one named `only` when given, at most `max`:
/// the Globals scope, and the globals expressions name. `tp` is the
/// thread's pointer, for thread-locals.
pub(crate) fn globals(
    u: &Arc<UnitCtx>,
    only: Option<&str>,
    tp: Option<u64>,
    mem: &mut dyn Memory,
    max: usize,
) -> Vec<Variable> {
    let mut out = Vec::new();
    let mut cursor = u.unit.entries();
    let mut depth: isize = 0;
    let f = FrameCtx {
        regs: Default::default(),
        cfa: None,
        probe: 0,
        frame_base: None,
        caller: None,
        tp,
    };
    for _ in 0..caps::DIES {
        let Ok(Some((delta, e))) = cursor.next_dfs() else {
            break;
        };
        depth += delta;
        // Unit-level and namespace-level variables only.
        if e.tag() != gimli::DW_TAG_variable || depth > 2 {
            continue;
        }
        let has_location = matches!(
            e.attr_value(gimli::DW_AT_location),
            Ok(Some(AttributeValue::Exprloc(_)))
        );
        if !has_location {
            continue;
        }
        if let Some(name) = only {
            let named = name_of(u, e).or_else(|| {
                let (su, so) = reference(u, e, gimli::DW_AT_specification)?;
                name_of(&su, &su.unit.entry(so).ok()?)
            });
            if named.as_deref() != Some(name) {
                continue;
            }
        }
        let e = e.clone();
        if let Some(v) = variable(u, &e, false, &f, mem) {
            out.push(v);
            if out.len() >= max {
                break;
            }
        }
    }
    out
}
