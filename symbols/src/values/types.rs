//! DWARF types, read one level at a time: a type's name, size and kind,
//! with its members' and elements' types left as references until a child
//! is asked for. Typedefs and qualifiers are followed (a bounded number of
//! hops) and kept in the name.

use super::{caps, UnitCtx, ValueError};
use crate::module::Reader;
use gimli::{AttributeValue, Reader as _};
use std::sync::Arc;

/// A type, not yet read, or made up by an expression (`&x`, `1 + 2`).
#[derive(Debug, Clone)]
pub enum TypeRef {
    Die(Arc<UnitCtx>, gimli::UnitOffset),
    Synth(Arc<Ty>),
    Void,
}

/// A type read one level deep.
#[derive(Debug)]
pub struct Ty {
    /// As a programmer writes it: `struct node *`, `node_t`, `&str`,
    /// `alloc::vec::Vec<i32, alloc::alloc::Global>`.
    pub name: String,
    /// In bytes, when known.
    pub size: Option<u64>,
    pub kind: Kind,
}

#[derive(Debug)]
pub enum Kind {
    Void,
    /// An integer, float, bool or character, by its DWARF encoding.
    Base(gimli::DwAte),
    /// A pointer or reference (Rust's `&T`, `Box<T>`).
    Pointer {
        target: TypeRef,
        reference: bool,
    },
    Struct {
        members: Vec<Member>,
        /// A Rust enum's variants.
        variants: Option<Variants>,
        /// Template (generic) type parameters by name: `T` of `Vec<T>`.
        params: Vec<(String, TypeRef)>,
        union: bool,
    },
    Array {
        elem: TypeRef,
        /// Element counts, outermost first (None where unknown).
        dims: Vec<Option<u64>>,
    },
    Enum {
        enumerators: Vec<(String, i128)>,
        signed: bool,
    },
    Function,
    Unknown,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub name: String,
    pub ty: TypeRef,
    /// Byte offset in the containing value.
    pub offset: u64,
    /// A bit field: (bit offset from `offset`, bit size).
    pub bits: Option<(u64, u64)>,
}

/// A Rust enum's variant part: the discriminant and the variants.
#[derive(Debug, Clone)]
pub struct Variants {
    pub discr: Option<Member>,
    pub variants: Vec<Variant>,
}

#[derive(Debug, Clone)]
pub struct Variant {
    /// The discriminant value that selects it; None for the default.
    pub value: Option<u64>,
    /// The variant's data: a member whose type is a struct named after it.
    pub member: Member,
}

impl Ty {
    pub fn synth(name: impl Into<String>, size: Option<u64>, kind: Kind) -> Arc<Ty> {
        Arc::new(Ty {
            name: name.into(),
            size,
            kind,
        })
    }

    /// A signed 64-bit integer (literals and arithmetic).
    pub fn long() -> Arc<Ty> {
        Ty::synth("long", Some(8), Kind::Base(gimli::DW_ATE_signed))
    }

    /// A pointer to `target` (`&x`).
    pub fn pointer_to(target: TypeRef) -> Arc<Ty> {
        let name = match &target {
            TypeRef::Void => "void *".to_string(),
            t => format!(
                "{} *",
                resolve(t).map_or_else(|_| "?".into(), |t| t.name.clone())
            ),
        };
        Ty::synth(
            name,
            Some(8),
            Kind::Pointer {
                target,
                reference: false,
            },
        )
    }

    pub fn is_integer(&self) -> bool {
        matches!(
            self.kind,
            Kind::Base(
                gimli::DW_ATE_signed
                    | gimli::DW_ATE_unsigned
                    | gimli::DW_ATE_signed_char
                    | gimli::DW_ATE_unsigned_char
                    | gimli::DW_ATE_boolean
                    | gimli::DW_ATE_UTF
            ) | Kind::Enum { .. }
        )
    }

    pub fn is_signed(&self) -> bool {
        match &self.kind {
            Kind::Base(e) => matches!(*e, gimli::DW_ATE_signed | gimli::DW_ATE_signed_char),
            Kind::Enum { signed, .. } => *signed,
            _ => false,
        }
    }

    /// A C character type (what `char *` points to).
    pub fn is_char(&self) -> bool {
        self.size == Some(1)
            && matches!(
                self.kind,
                Kind::Base(gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char)
            )
    }

    /// The member named `name`, or a Rust tuple field `0` (`__0`).
    pub fn member(&self, name: &str) -> Option<&Member> {
        let Kind::Struct { members, .. } = &self.kind else {
            return None;
        };
        members
            .iter()
            .find(|m| m.name == name)
            .or_else(|| members.iter().find(|m| m.name == format!("__{name}")))
    }

    /// A generic parameter's type (`T`).
    pub fn param(&self, name: &str) -> Option<&TypeRef> {
        match &self.kind {
            Kind::Struct { params, .. } => params.iter().find(|p| p.0 == name).map(|p| &p.1),
            _ => None,
        }
    }
}

fn attr(
    e: &gimli::DebuggingInformationEntry<Reader>,
    at: gimli::DwAt,
) -> Option<AttributeValue<Reader>> {
    e.attr_value(at).ok().flatten()
}

/// A DIE's `DW_AT_name`.
pub(crate) fn name_of(u: &UnitCtx, e: &gimli::DebuggingInformationEntry<Reader>) -> Option<String> {
    let v = attr(e, gimli::DW_AT_name)?;
    let s = u.dwarf().attr_string(&u.unit, v).ok()?;
    Some(s.to_string_lossy().ok()?.into_owned())
}

/// Where a reference attribute (`DW_AT_type`, `DW_AT_abstract_origin`)
/// points: in this unit or another one.
pub(crate) fn reference(
    u: &Arc<UnitCtx>,
    e: &gimli::DebuggingInformationEntry<Reader>,
    at: gimli::DwAt,
) -> Option<(Arc<UnitCtx>, gimli::UnitOffset)> {
    match attr(e, at)? {
        AttributeValue::UnitRef(o) => Some((u.clone(), o)),
        AttributeValue::DebugInfoRef(o) => u.unit_of(o).ok(),
        _ => None,
    }
}

/// A DIE's type attribute as a reference (void when absent).
pub(crate) fn type_of(u: &Arc<UnitCtx>, e: &gimli::DebuggingInformationEntry<Reader>) -> TypeRef {
    match reference(u, e, gimli::DW_AT_type) {
        Some((u, o)) => TypeRef::Die(u, o),
        None => TypeRef::Void,
    }
}

pub(crate) fn constant(v: &AttributeValue<Reader>) -> Option<i128> {
    Some(match *v {
        AttributeValue::Sdata(n) => n as i128,
        AttributeValue::Udata(n) => n as i128,
        AttributeValue::Data1(n) => n as i128,
        AttributeValue::Data2(n) => n as i128,
        AttributeValue::Data4(n) => n as i128,
        AttributeValue::Data8(n) => n as i128,
        _ => return None,
    })
}

/// Reads a type one level deep.
pub fn resolve(r: &TypeRef) -> Result<Arc<Ty>, ValueError> {
    match r {
        TypeRef::Void => Ok(Ty::synth("void", None, Kind::Void)),
        TypeRef::Synth(t) => Ok(t.clone()),
        TypeRef::Die(u, off) => resolve_die(u, *off),
    }
}

/// A type's name without reading its members (for pointer and array names).
pub fn name(r: &TypeRef, depth: usize) -> String {
    match r {
        TypeRef::Void => "void".into(),
        TypeRef::Synth(t) => t.name.clone(),
        TypeRef::Die(u, off) => die_name(u, *off, depth).unwrap_or_else(|| "?".into()),
    }
}

fn die_name(u: &Arc<UnitCtx>, off: gimli::UnitOffset, depth: usize) -> Option<String> {
    if depth > caps::TYPE_HOPS {
        return Some("...".into());
    }
    let e = u.unit.entry(off).ok()?;
    let named = name_of(u, &e);
    let inner = || name(&type_of(u, &e), depth + 1);
    Some(match e.tag() {
        gimli::DW_TAG_const_type => format!("const {}", inner()),
        gimli::DW_TAG_volatile_type => format!("volatile {}", inner()),
        gimli::DW_TAG_restrict_type | gimli::DW_TAG_atomic_type => inner(),
        gimli::DW_TAG_pointer_type => named.unwrap_or_else(|| pointer_name(&inner(), "*")),
        gimli::DW_TAG_reference_type => named.unwrap_or_else(|| pointer_name(&inner(), "&")),
        gimli::DW_TAG_rvalue_reference_type => {
            named.unwrap_or_else(|| pointer_name(&inner(), "&&"))
        }
        gimli::DW_TAG_array_type => {
            let dims = array_dims(u, off).unwrap_or_default();
            let mut s = inner();
            s.push(' ');
            for d in dims {
                match d {
                    Some(n) => s.push_str(&format!("[{n}]")),
                    None => s.push_str("[]"),
                }
            }
            s
        }
        gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type if !u.rust => {
            format!("struct {}", named.unwrap_or_else(|| "{...}".into()))
        }
        gimli::DW_TAG_union_type if !u.rust => {
            format!("union {}", named.unwrap_or_else(|| "{...}".into()))
        }
        gimli::DW_TAG_enumeration_type if !u.rust => {
            format!("enum {}", named.unwrap_or_else(|| "{...}".into()))
        }
        gimli::DW_TAG_subroutine_type => "function".into(),
        _ => named.unwrap_or_else(|| "?".into()),
    })
}

/// `char *`, and `int (*)[3]`-free: the pointee's name and the sigil.
fn pointer_name(inner: &str, sigil: &str) -> String {
    if inner.ends_with('*') {
        format!("{inner}{sigil}")
    } else {
        format!("{inner} {sigil}")
    }
}

fn array_dims(u: &Arc<UnitCtx>, off: gimli::UnitOffset) -> Result<Vec<Option<u64>>, ValueError> {
    let mut dims = Vec::new();
    let mut tree = u.unit.entries_tree(Some(off))?;
    let root = tree.root()?;
    let mut children = root.children();
    while let Some(child) = children.next()? {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_subrange_type {
            continue;
        }
        if dims.len() >= 16 {
            break;
        }
        let count = match attr(e, gimli::DW_AT_count).as_ref().and_then(constant) {
            Some(n) => Some(n),
            None => {
                let lower = attr(e, gimli::DW_AT_lower_bound)
                    .as_ref()
                    .and_then(constant)
                    .unwrap_or(0);
                attr(e, gimli::DW_AT_upper_bound)
                    .as_ref()
                    .and_then(constant)
                    .map(|upper| upper - lower + 1)
            }
        };
        dims.push(count.map(|n| n.clamp(0, caps::ELEMENTS as i128) as u64));
    }
    Ok(dims)
}

fn resolve_die(u: &Arc<UnitCtx>, off: gimli::UnitOffset) -> Result<Arc<Ty>, ValueError> {
    let display = die_name(u, off, 0).unwrap_or_else(|| "?".into());
    let (mut u, mut off) = (u.clone(), off);
    for _ in 0..caps::TYPE_HOPS {
        let e = u.unit.entry(off)?;
        let size = attr(&e, gimli::DW_AT_byte_size)
            .as_ref()
            .and_then(constant)
            .and_then(|n| u64::try_from(n).ok());
        let ty = |kind| Ok(Ty::synth(display.clone(), size, kind));
        match e.tag() {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => match reference(&u, &e, gimli::DW_AT_type) {
                Some((nu, no)) => {
                    (u, off) = (nu, no);
                    continue;
                }
                None => return ty(Kind::Void),
            },
            gimli::DW_TAG_base_type => {
                let enc = match attr(&e, gimli::DW_AT_encoding) {
                    Some(AttributeValue::Encoding(enc)) => enc,
                    _ => gimli::DW_ATE_unsigned,
                };
                return ty(Kind::Base(enc));
            }
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => {
                return Ok(Ty::synth(
                    display,
                    size.or(Some(8)),
                    Kind::Pointer {
                        target: type_of(&u, &e),
                        reference: e.tag() != gimli::DW_TAG_pointer_type,
                    },
                ));
            }
            gimli::DW_TAG_array_type => {
                let dims = array_dims(&u, off)?;
                let elem = type_of(&u, &e);
                // C arrays rarely say their size: the elements' times the counts.
                let size = size.or_else(|| {
                    let each = resolve(&elem).ok()?.size?;
                    dims.iter().try_fold(each, |acc, d| acc.checked_mul((*d)?))
                });
                return Ok(Ty::synth(
                    display,
                    size,
                    Kind::Array {
                        elem,
                        dims: if dims.is_empty() { vec![None] } else { dims },
                    },
                ));
            }
            gimli::DW_TAG_enumeration_type => {
                let signed = match type_of(&u, &e) {
                    TypeRef::Void => false,
                    t => resolve(&t).is_ok_and(|t| t.is_signed()),
                };
                let mut enumerators = Vec::new();
                let mut tree = u.unit.entries_tree(Some(off))?;
                let mut children = tree.root()?.children();
                while let Some(c) = children.next()? {
                    let c = c.entry();
                    if c.tag() != gimli::DW_TAG_enumerator || enumerators.len() >= caps::MEMBERS {
                        continue;
                    }
                    let v = attr(c, gimli::DW_AT_const_value);
                    let n = match v {
                        Some(AttributeValue::Data1(n)) if signed => n as i8 as i128,
                        Some(AttributeValue::Data2(n)) if signed => n as i16 as i128,
                        Some(AttributeValue::Data4(n)) if signed => n as i32 as i128,
                        Some(AttributeValue::Data8(n)) if signed => n as i64 as i128,
                        Some(v) => constant(&v).unwrap_or(0),
                        None => 0,
                    };
                    enumerators.push((name_of(&u, c).unwrap_or_default(), n));
                }
                return ty(Kind::Enum {
                    enumerators,
                    signed,
                });
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                let union = e.tag() == gimli::DW_TAG_union_type;
                let (members, variants, params) = struct_parts(&u, off)?;
                return ty(Kind::Struct {
                    members,
                    variants,
                    params,
                    union,
                });
            }
            gimli::DW_TAG_subroutine_type => return ty(Kind::Function),
            gimli::DW_TAG_unspecified_type => return ty(Kind::Void),
            _ => return ty(Kind::Unknown),
        }
    }
    Ok(Ty::synth(display, None, Kind::Unknown))
}

type StructParts = (Vec<Member>, Option<Variants>, Vec<(String, TypeRef)>);

fn struct_parts(u: &Arc<UnitCtx>, off: gimli::UnitOffset) -> Result<StructParts, ValueError> {
    let mut members = Vec::new();
    let mut variants = None;
    let mut params = Vec::new();
    let mut tree = u.unit.entries_tree(Some(off))?;
    let mut children = tree.root()?.children();
    let mut seen = 0usize;
    while let Some(c) = children.next()? {
        seen += 1;
        if seen > caps::MEMBERS {
            break;
        }
        let offset = c.entry().offset();
        let e = c.entry();
        match e.tag() {
            gimli::DW_TAG_member | gimli::DW_TAG_inheritance => {
                // Static members have no place in the value.
                if attr(e, gimli::DW_AT_external).is_some()
                    || attr(e, gimli::DW_AT_declaration).is_some()
                {
                    continue;
                }
                if let Some(m) = member(u, e)? {
                    members.push(m);
                }
            }
            gimli::DW_TAG_template_type_parameter => {
                params.push((name_of(u, e).unwrap_or_default(), type_of(u, e)));
            }
            gimli::DW_TAG_variant_part if variants.is_none() => {
                variants = Some(variant_part(u, e, offset)?);
            }
            _ => {}
        }
    }
    Ok((members, variants, params))
}

fn member(
    u: &Arc<UnitCtx>,
    e: &gimli::DebuggingInformationEntry<Reader>,
) -> Result<Option<Member>, ValueError> {
    let name = if e.tag() == gimli::DW_TAG_inheritance {
        "<base>".to_string()
    } else {
        name_of(u, e).unwrap_or_default()
    };
    let offset = match attr(e, gimli::DW_AT_data_member_location) {
        None => 0,
        Some(AttributeValue::Exprloc(x)) => {
            let mut eval = x.evaluation(u.unit.encoding());
            eval.set_max_iterations(1000);
            eval.set_initial_value(0);
            match eval.evaluate() {
                Ok(gimli::EvaluationResult::Complete) => match eval.result().first() {
                    Some(gimli::Piece {
                        location: gimli::Location::Address { address },
                        ..
                    }) => *address,
                    _ => return Ok(None),
                },
                _ => return Ok(None),
            }
        }
        Some(v) => match constant(&v).and_then(|n| u64::try_from(n).ok()) {
            Some(n) => n,
            None => return Ok(None),
        },
    };
    let bit_size = attr(e, gimli::DW_AT_bit_size)
        .as_ref()
        .and_then(constant)
        .and_then(|n| u64::try_from(n).ok());
    let bits = match bit_size {
        None => None,
        Some(size) => {
            if let Some(b) = attr(e, gimli::DW_AT_data_bit_offset)
                .as_ref()
                .and_then(constant)
                .and_then(|n| u64::try_from(n).ok())
            {
                // DWARF 4+: bits from the start of the containing struct.
                return Ok(Some(Member {
                    name,
                    ty: type_of(u, e),
                    offset: b / 8,
                    bits: Some((b % 8, size)),
                }));
            }
            // DWARF 2/3: from the most significant bit of the storage unit.
            let storage = attr(e, gimli::DW_AT_byte_size)
                .as_ref()
                .and_then(constant)
                .unwrap_or(4) as u64;
            let msb = attr(e, gimli::DW_AT_bit_offset)
                .as_ref()
                .and_then(constant)
                .unwrap_or(0) as u64;
            Some(((storage * 8).saturating_sub(msb + size), size))
        }
    };
    Ok(Some(Member {
        name,
        ty: type_of(u, e),
        offset,
        bits,
    }))
}

fn variant_part(
    u: &Arc<UnitCtx>,
    e: &gimli::DebuggingInformationEntry<Reader>,
    off: gimli::UnitOffset,
) -> Result<Variants, ValueError> {
    let discr = match reference(u, e, gimli::DW_AT_discr) {
        Some((du, doff)) => {
            let d = du.unit.entry(doff)?;
            member(&du, &d)?
        }
        None => None,
    };
    let mut variants = Vec::new();
    let mut tree = u.unit.entries_tree(Some(off))?;
    let mut children = tree.root()?.children();
    while let Some(c) = children.next()? {
        if c.entry().tag() != gimli::DW_TAG_variant || variants.len() >= caps::MEMBERS {
            continue;
        }
        let value = attr(c.entry(), gimli::DW_AT_discr_value)
            .as_ref()
            .and_then(constant)
            .map(|n| n as u64);
        let mut inner = c.children();
        while let Some(m) = inner.next()? {
            if m.entry().tag() == gimli::DW_TAG_member {
                if let Some(member) = member(u, m.entry())? {
                    variants.push(Variant { value, member });
                }
                break;
            }
        }
    }
    Ok(Variants { discr, variants })
}
