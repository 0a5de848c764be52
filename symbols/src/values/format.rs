//! A value's one-line summary and its children, read when asked, bounded
//! in elements, depth and bytes. C values as gdb shows them (`{x = 3, y =
//! -4}`, `0x48cad9 "list"`); Rust's as Rust writes them (`Some(42)`,
//! `[10, 20, 30]`, `"ada"`), with `Vec`, `String`, `&str`, slices and
//! enums with data seen through their layout.

use super::types::{self, Kind, Member, Ty, TypeRef};
use super::{caps, Place, Value, ValueError};
use crate::unwind::Memory;
use std::sync::Arc;

/// What a debugger shows of a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub value: String,
    pub type_name: String,
    /// Named children (members, fields).
    pub named: usize,
    /// Indexed children (elements), for paging.
    pub indexed: u64,
    /// The address of its bytes, when in memory.
    pub address: Option<u64>,
}

impl Shown {
    pub fn expandable(&self) -> bool {
        self.named > 0 || self.indexed > 0
    }
}

/// A sequence seen through a Rust layout: `Vec<T>`, `&[T]`.
struct Seq {
    ptr: u64,
    len: u64,
    elem: TypeRef,
}

/// What a value is, looking through Rust's standard layouts.
enum Shape {
    Plain,
    /// `String`, `&str`: UTF-8 text at ptr, len bytes.
    Text(u64, u64),
    Seq(Seq),
}

impl Value {
    /// A value of type `ty` at `place`, in the same unit as this one.
    pub(crate) fn with(&self, ty: Arc<Ty>, place: Place) -> Value {
        Value {
            unit: self.unit.clone(),
            ty,
            place,
        }
    }

    pub fn type_name(&self) -> &str {
        &self.ty.name
    }

    pub fn ty(&self) -> &Ty {
        &self.ty
    }

    pub fn is_rust(&self) -> bool {
        self.unit.rust
    }

    /// Its address, when its bytes are in memory.
    pub fn address(&self) -> Option<u64> {
        match self.place {
            Place::Memory(a) => Some(a),
            _ => None,
        }
    }

    /// `n` bytes from `off` into the value.
    pub fn read(&self, mem: &mut dyn Memory, off: u64, n: usize) -> Result<Vec<u8>, ValueError> {
        if n as u64 > caps::VALUE_BYTES {
            return Err(ValueError::Unavailable(format!(
                "{n} bytes is too large to read"
            )));
        }
        match &self.place {
            Place::Memory(a) => {
                let at = a.wrapping_add(off);
                let mut b = vec![0; n];
                if mem.read(at, &mut b) {
                    Ok(b)
                } else {
                    Err(ValueError::Unreadable(at))
                }
            }
            Place::Bytes(b) => b
                .get(off as usize..(off as usize).saturating_add(n))
                .map(<[u8]>::to_vec)
                .ok_or_else(|| ValueError::Unavailable("part of it is not known".into())),
            Place::Missing(e) => Err(e.clone()),
        }
    }

    /// The part of this value at byte `off`, of type `ty`.
    pub(crate) fn part(&self, off: u64, ty: Arc<Ty>) -> Value {
        let place = match &self.place {
            Place::Memory(a) => Place::Memory(a.wrapping_add(off)),
            Place::Bytes(b) => {
                let n = ty.size.unwrap_or(0) as usize;
                match b.get(off as usize..(off as usize).saturating_add(n)) {
                    Some(s) => Place::Bytes(s.into()),
                    None => {
                        Place::Missing(ValueError::Unavailable("part of it is not known".into()))
                    }
                }
            }
            Place::Missing(e) => Place::Missing(e.clone()),
        };
        self.with(ty, place)
    }

    /// A member's value (bit fields extracted into bytes).
    pub(crate) fn member_value(&self, m: &Member, mem: &mut dyn Memory) -> Value {
        let ty = types::resolve(&m.ty).unwrap_or_else(|_| Ty::long());
        let Some((bit, size)) = m.bits else {
            return self.part(m.offset, ty);
        };
        let nbytes = (bit + size).div_ceil(8).min(16) as usize;
        let place = match self.read(mem, m.offset, nbytes) {
            Ok(b) => {
                let mut w = [0u8; 16];
                w[..b.len()].copy_from_slice(&b);
                let raw = u128::from_le_bytes(w) >> bit;
                let mask = if size >= 128 {
                    u128::MAX
                } else {
                    (1u128 << size) - 1
                };
                let mut v = raw & mask;
                if ty.is_signed() && size > 0 && size < 128 && v >> (size - 1) & 1 == 1 {
                    v |= !mask;
                }
                let n = ty.size.unwrap_or(4).min(16) as usize;
                Place::Bytes(v.to_le_bytes()[..n].into())
            }
            Err(e) => Place::Missing(e),
        };
        self.with(ty, place)
    }

    /// The value as an integer (integers, enums, bools, chars, pointers).
    pub fn as_int(&self, mem: &mut dyn Memory) -> Result<i128, ValueError> {
        let size = self.ty.size.unwrap_or(8).min(16) as usize;
        match self.ty.kind {
            Kind::Pointer { .. } => {}
            _ if self.ty.is_integer() => {}
            _ => {
                return Err(ValueError::Expression(format!(
                    "`{}` is not a number",
                    self.ty.name
                )))
            }
        }
        let b = self.read(mem, 0, size)?;
        Ok(int_of(&b, self.ty.is_signed()))
    }

    fn pointer(&self, mem: &mut dyn Memory) -> Result<u64, ValueError> {
        let b = self.read(mem, 0, 8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// What `*p` is: the value a pointer points to.
    pub fn deref(&self, mem: &mut dyn Memory) -> Result<Value, ValueError> {
        let Kind::Pointer { target, .. } = &self.ty.kind else {
            return Err(ValueError::Expression(format!(
                "`{}` is not a pointer",
                self.ty.name
            )));
        };
        if matches!(target, TypeRef::Void) {
            return Err(ValueError::Expression(
                "a `void *` cannot be dereferenced".into(),
            ));
        }
        let to = types::resolve(target)?;
        let p = self.pointer(mem)?;
        Ok(self.with(to, Place::Memory(p)))
    }

    /// What `&x` is.
    pub fn address_of(&self) -> Result<Value, ValueError> {
        let a = self.address().ok_or_else(|| {
            ValueError::Expression("it is not in memory, so it has no address".into())
        })?;
        Ok(self.with(
            Ty::pointer_to(TypeRef::Synth(self.ty.clone())),
            Place::Bytes(a.to_le_bytes().into()),
        ))
    }

    /// `x.name` (for a pointer to a struct, `x->name`).
    pub fn member(&self, name: &str, mem: &mut dyn Memory) -> Result<Value, ValueError> {
        let this = match self.ty.kind {
            Kind::Pointer { .. } => self.deref(mem)?,
            _ => self.clone(),
        };
        let this = this.variant(mem)?.unwrap_or(this);
        match this.ty.member(name) {
            Some(m) => Ok(this.member_value(&m.clone(), mem)),
            None => Err(ValueError::Expression(format!(
                "`{}` has no member `{name}`",
                this.ty.name
            ))),
        }
    }

    /// `x[i]`: arrays, pointers, `Vec`s and slices.
    pub fn index(&self, i: i128, mem: &mut dyn Memory) -> Result<Value, ValueError> {
        if self.is_rust_reference() {
            return self.deref(mem)?.index(i, mem);
        }
        let bad = || ValueError::Expression(format!("index {i} is out of range"));
        if let Shape::Seq(s) = self.shape(mem)? {
            let i = u64::try_from(i)
                .ok()
                .filter(|i| *i < s.len)
                .ok_or_else(bad)?;
            return self.element_at(s.ptr, &s.elem, i);
        }
        match &self.ty.kind {
            Kind::Array { elem, dims } => {
                let (ty, n) = self.element_type(elem, dims)?;
                let i = u64::try_from(i)
                    .ok()
                    .filter(|i| n.is_none_or(|n| *i < n))
                    .ok_or_else(bad)?;
                Ok(self.part(i * ty.size.unwrap_or(0), ty))
            }
            Kind::Pointer { target, .. } => {
                let p = self.pointer(mem)?;
                let ty = types::resolve(target)?;
                let size = ty.size.unwrap_or(1) as i128;
                let at = (p as i128).wrapping_add(i.wrapping_mul(size)) as u64;
                Ok(self.with(ty, Place::Memory(at)))
            }
            _ => Err(ValueError::Expression(format!(
                "`{}` cannot be indexed",
                self.ty.name
            ))),
        }
    }

    /// A Rust `&T`, `&mut T` or `Box<T>`: indexing and members look
    /// through it.
    fn is_rust_reference(&self) -> bool {
        let n = self.ty.name.as_str();
        self.unit.rust
            && matches!(self.ty.kind, Kind::Pointer { .. })
            && (n.starts_with('&') || n.starts_with("alloc::boxed::Box<"))
    }

    /// An array's element type (a sub-array for more dimensions) and count.
    fn element_type(
        &self,
        elem: &TypeRef,
        dims: &[Option<u64>],
    ) -> Result<(Arc<Ty>, Option<u64>), ValueError> {
        let base = types::resolve(elem)?;
        let n = dims.first().copied().flatten();
        if dims.len() <= 1 {
            return Ok((base, n));
        }
        let rest = &dims[1..];
        let count: u64 = rest.iter().map(|d| d.unwrap_or(0)).product();
        let mut name = base.name.clone();
        name.push(' ');
        for d in rest {
            name.push_str(&format!("[{}]", d.unwrap_or(0)));
        }
        let ty = Ty::synth(
            name,
            base.size.map(|s| s.saturating_mul(count)),
            Kind::Array {
                elem: elem.clone(),
                dims: rest.to_vec(),
            },
        );
        Ok((ty, n))
    }

    fn element_at(&self, ptr: u64, elem: &TypeRef, i: u64) -> Result<Value, ValueError> {
        let ty = types::resolve(elem)?;
        let at = ptr.wrapping_add(i.wrapping_mul(ty.size.unwrap_or(0)));
        Ok(self.with(ty, Place::Memory(at)))
    }

    /// For a Rust enum, the active variant's data (a struct named after
    /// the variant); None for any other value.
    pub fn variant(&self, mem: &mut dyn Memory) -> Result<Option<Value>, ValueError> {
        let Kind::Struct {
            variants: Some(vs), ..
        } = &self.ty.kind
        else {
            return Ok(None);
        };
        let chosen = match &vs.discr {
            None => vs.variants.first(),
            Some(d) => {
                let dv = self.member_value(d, mem);
                let size = dv.ty.size.unwrap_or(8).min(8);
                let raw = dv.read(mem, 0, size as usize)?;
                let n = int_of(&raw, false) as u64;
                let mask = if size >= 8 {
                    u64::MAX
                } else {
                    (1u64 << (size * 8)) - 1
                };
                vs.variants
                    .iter()
                    .find(|v| v.value.is_some_and(|x| x & mask == n))
                    .or_else(|| vs.variants.iter().find(|v| v.value.is_none()))
            }
        };
        let v = chosen.ok_or_else(|| {
            ValueError::Unavailable(format!("no variant of `{}` matches", self.ty.name))
        })?;
        Ok(Some(self.member_value(&v.member.clone(), mem)))
    }

    fn shape(&self, mem: &mut dyn Memory) -> Result<Shape, ValueError> {
        let name = self.ty.name.as_str();
        if !self.unit.rust || !matches!(self.ty.kind, Kind::Struct { .. }) {
            return Ok(Shape::Plain);
        }
        // Rust names a struct without its module (`Vec<i32, ...>`), so the
        // layout is checked too.
        if (name == "String" || name == "alloc::string::String") && self.ty.member("vec").is_some()
        {
            let vec = self.member("vec", mem)?;
            return Ok(match vec.shape(mem)? {
                Shape::Seq(s) => Shape::Text(s.ptr, s.len),
                _ => Shape::Plain,
            });
        }
        if (name.starts_with("Vec<") || name.starts_with("alloc::vec::Vec<"))
            && self.ty.member("len").is_some()
            && self.ty.param("T").is_some()
        {
            let len = self.member("len", mem)?.as_int(mem)? as u64;
            let ptr = first_pointer(self, mem, 0)?;
            let elem = self
                .ty
                .param("T")
                .cloned()
                .ok_or_else(|| ValueError::Dwarf(format!("`{name}` has no parameter T")))?;
            return Ok(Shape::Seq(Seq {
                ptr,
                len: len.min(caps::ELEMENTS),
                elem,
            }));
        }
        let ptr_len = self.ty.member("data_ptr").is_some() && self.ty.member("length").is_some();
        if ptr_len {
            let len = self.member("length", mem)?.as_int(mem)? as u64;
            let data = self.member("data_ptr", mem)?;
            let ptr = data.pointer(mem)?;
            if name == "&str" || name == "&mut str" {
                return Ok(Shape::Text(ptr, len));
            }
            if let Kind::Pointer { target, .. } = &data.ty.kind {
                return Ok(Shape::Seq(Seq {
                    ptr,
                    len: len.min(caps::ELEMENTS),
                    elem: target.clone(),
                }));
            }
        }
        Ok(Shape::Plain)
    }

    /// What a debugger shows of the value.
    pub fn show(&self, mem: &mut dyn Memory) -> Shown {
        let (named, indexed) = self.counts(mem);
        Shown {
            value: self.summary(mem),
            type_name: self.ty.name.clone(),
            named,
            indexed,
            address: self.address(),
        }
    }

    /// The one-line text of the value.
    pub fn summary(&self, mem: &mut dyn Memory) -> String {
        let mut out = String::new();
        self.write_summary(mem, 0, &mut out);
        if out.chars().count() > caps::SUMMARY_CHARS {
            out = out.chars().take(caps::SUMMARY_CHARS).collect::<String>() + "...";
        }
        out
    }

    fn counts(&self, mem: &mut dyn Memory) -> (usize, u64) {
        match self.shape(mem) {
            Ok(Shape::Seq(s)) => return (0, s.len),
            Ok(Shape::Text(..)) => return (0, 0),
            Err(_) => return (0, 0),
            Ok(Shape::Plain) => {}
        }
        if let Ok(Some(v)) = self.variant(mem) {
            return v.counts(mem);
        }
        match &self.ty.kind {
            Kind::Struct { members, .. } => (members.len(), 0),
            Kind::Array { dims, .. } if !self.is_string_array() => {
                (0, dims.first().copied().flatten().unwrap_or(0))
            }
            Kind::Pointer { target, .. } => match self.pointee_shown(mem) {
                Some(p) if p.is_aggregate() => p.counts(mem),
                Some(_) if !matches!(target, TypeRef::Void) => (1, 0),
                _ => (0, 0),
            },
            _ => (0, 0),
        }
    }

    fn is_aggregate(&self) -> bool {
        matches!(self.ty.kind, Kind::Struct { .. })
    }

    fn is_string_array(&self) -> bool {
        match &self.ty.kind {
            Kind::Array { elem, dims } => {
                dims.len() == 1 && types::resolve(elem).is_ok_and(|t| t.is_char())
            }
            _ => false,
        }
    }

    /// The pointee of a non-null pointer to data (not to a function).
    fn pointee_shown(&self, mem: &mut dyn Memory) -> Option<Value> {
        let p = self.pointer(mem).ok()?;
        if p == 0 {
            return None;
        }
        let v = self.deref(mem).ok()?;
        (!matches!(v.ty.kind, Kind::Function | Kind::Void | Kind::Unknown)).then_some(v)
    }

    /// Children `start..start + count`: (name, value). A pointer to a
    /// struct shows the struct's members; another pointer one child, `*`.
    pub fn children(&self, mem: &mut dyn Memory, start: u64, count: u64) -> Vec<(String, Value)> {
        let count = count.min(10_000);
        match self.shape(mem) {
            Ok(Shape::Seq(s)) => {
                return (start..s.len.min(start.saturating_add(count)))
                    .filter_map(|i| {
                        Some((format!("[{i}]"), self.element_at(s.ptr, &s.elem, i).ok()?))
                    })
                    .collect()
            }
            Ok(Shape::Text(..)) | Err(_) => return Vec::new(),
            Ok(Shape::Plain) => {}
        }
        if let Ok(Some(v)) = self.variant(mem) {
            return v.children(mem, start, count);
        }
        match &self.ty.kind {
            Kind::Struct { members, .. } => members
                .iter()
                .skip(start as usize)
                .take(count as usize)
                .map(|m| {
                    (
                        field_name(&m.name, self.unit.rust),
                        self.member_value(m, mem),
                    )
                })
                .collect(),
            Kind::Array { .. } if !self.is_string_array() => {
                let n = self.counts(mem).1;
                (start..n.min(start.saturating_add(count)))
                    .filter_map(|i| Some((format!("[{i}]"), self.index(i as i128, mem).ok()?)))
                    .collect()
            }
            Kind::Pointer { .. } => match self.pointee_shown(mem) {
                Some(p) if p.is_aggregate() => p.children(mem, start, count),
                Some(p) if start == 0 => vec![("*".to_string(), p)],
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn write_summary(&self, mem: &mut dyn Memory, depth: usize, out: &mut String) {
        if out.len() > caps::SUMMARY_CHARS {
            out.push_str("...");
            return;
        }
        if let Place::Missing(e) = &self.place {
            out.push_str(&e.to_string());
            return;
        }
        let rust = self.unit.rust;
        match self.shape(mem) {
            Err(e) => {
                out.push_str(&e.to_string());
                return;
            }
            Ok(Shape::Text(ptr, len)) => {
                out.push_str(&text_at(mem, ptr, len as usize, false));
                return;
            }
            Ok(Shape::Seq(s)) => {
                if depth >= caps::SUMMARY_DEPTH {
                    out.push_str(&format!("[...; {}]", s.len));
                    return;
                }
                let shown = s.len.min(caps::SUMMARY_ELEMENTS as u64);
                let items: Vec<Value> = (0..shown)
                    .filter_map(|i| self.element_at(s.ptr, &s.elem, i).ok())
                    .collect();
                list(mem, depth, out, "[", "]", &items, s.len > shown);
                return;
            }
            Ok(Shape::Plain) => {}
        }
        match &self.ty.kind {
            Kind::Void => out.push_str("void"),
            Kind::Unknown => out.push_str(&format!("<{}>", self.ty.name)),
            Kind::Function => out.push_str("<function>"),
            Kind::Base(enc) => {
                match self.read(mem, 0, self.ty.size.unwrap_or(0).min(16) as usize) {
                    Ok(b) => out.push_str(&base(&b, *enc, rust)),
                    Err(e) => out.push_str(&e.to_string()),
                }
            }
            Kind::Enum { enumerators, .. } => match self.as_int(mem) {
                Ok(n) => match enumerators.iter().find(|e| e.1 == n) {
                    Some((name, _)) => out.push_str(name),
                    None => out.push_str(&n.to_string()),
                },
                Err(e) => out.push_str(&e.to_string()),
            },
            Kind::Pointer { target, reference } => {
                let p = match self.pointer(mem) {
                    Ok(p) => p,
                    Err(e) => return out.push_str(&e.to_string()),
                };
                let pointee = types::resolve(target).ok();
                let boxed = self.ty.name.starts_with("alloc::boxed::Box<");
                if (*reference || self.is_rust_reference()) && p != 0 && depth < caps::SUMMARY_DEPTH
                {
                    if let Ok(v) = self.deref(mem) {
                        if !matches!(v.ty.kind, Kind::Function | Kind::Void) {
                            out.push_str(if boxed { "box " } else { "&" });
                            return v.write_summary(mem, depth + 1, out);
                        }
                    }
                }
                out.push_str(&format!("{p:#x}"));
                match pointee {
                    Some(t) if t.is_char() && p != 0 => {
                        out.push(' ');
                        out.push_str(&c_string(mem, p));
                    }
                    Some(t) if matches!(t.kind, Kind::Function) && p != 0 => {
                        let bias = self.unit.bias;
                        if let Some((name, off)) = self.unit.module.symbol(p.wrapping_sub(bias)) {
                            match off {
                                0 => out.push_str(&format!(" <{name}>")),
                                o => out.push_str(&format!(" <{name}+{o:#x}>")),
                            }
                        }
                    }
                    _ => {}
                }
            }
            Kind::Array { .. } if self.is_string_array() => {
                let n = self.ty.size.unwrap_or(0).min(caps::STRING_BYTES as u64) as usize;
                match self.read(mem, 0, n) {
                    Ok(b) => {
                        let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
                        out.push_str(&quote_c(&b[..end]));
                    }
                    Err(e) => out.push_str(&e.to_string()),
                }
            }
            Kind::Array { dims, .. } => {
                let n = dims.first().copied().flatten().unwrap_or(0);
                if depth >= caps::SUMMARY_DEPTH {
                    out.push_str(if rust { "[...]" } else { "{...}" });
                    return;
                }
                let shown = n.min(caps::SUMMARY_ELEMENTS as u64);
                let items: Vec<Value> = (0..shown)
                    .filter_map(|i| self.index(i as i128, mem).ok())
                    .collect();
                let (open, close) = if rust { ("[", "]") } else { ("{", "}") };
                list(mem, depth, out, open, close, &items, n > shown);
            }
            Kind::Struct { members, .. } => {
                match self.variant(mem) {
                    Ok(Some(v)) => return variant_summary(&v, mem, depth, out),
                    Ok(None) => {}
                    Err(e) => return out.push_str(&e.to_string()),
                }
                if depth >= caps::SUMMARY_DEPTH {
                    out.push_str("{...}");
                    return;
                }
                fields(self, members, mem, depth, out);
            }
        }
    }
}

/// `{x = 3, y = -4}` (C), `{x: 3, y: -4}` (Rust), `(3, 4)` (a tuple).
fn fields(v: &Value, members: &[Member], mem: &mut dyn Memory, depth: usize, out: &mut String) {
    let tuple =
        v.unit.rust && !members.is_empty() && members.iter().all(|m| m.name.starts_with("__"));
    out.push_str(if tuple { "(" } else { "{" });
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if i >= caps::SUMMARY_ELEMENTS || out.len() > caps::SUMMARY_CHARS {
            out.push_str("...");
            break;
        }
        if !tuple {
            out.push_str(&field_name(&m.name, v.unit.rust));
            out.push_str(if v.unit.rust { ": " } else { " = " });
        }
        v.member_value(m, mem).write_summary(mem, depth + 1, out);
    }
    out.push_str(if tuple { ")" } else { "}" });
}

/// `Some(42)`, `None`, `Circle {r: 1.5}`.
fn variant_summary(v: &Value, mem: &mut dyn Memory, depth: usize, out: &mut String) {
    let name =
        v.ty.name
            .rsplit("::")
            .next()
            .unwrap_or(&v.ty.name)
            .to_string();
    out.push_str(&name);
    if let Kind::Struct { members, .. } = &v.ty.kind {
        if members.is_empty() {
            return;
        }
        if depth >= caps::SUMMARY_DEPTH {
            out.push_str("(...)");
            return;
        }
        let tuple = members.iter().all(|m| m.name.starts_with("__"));
        if !tuple {
            out.push(' ');
        }
        fields(v, members, mem, depth, out);
    }
}

fn list(
    mem: &mut dyn Memory,
    depth: usize,
    out: &mut String,
    open: &str,
    close: &str,
    items: &[Value],
    more: bool,
) {
    out.push_str(open);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        if out.len() > caps::SUMMARY_CHARS {
            out.push_str("...");
            break;
        }
        item.write_summary(mem, depth + 1, out);
    }
    if more {
        out.push_str(", ...");
    }
    out.push_str(close);
}

/// Rust's tuple fields are `__0`: shown as `0`.
fn field_name(name: &str, rust: bool) -> String {
    match name.strip_prefix("__") {
        Some(n) if rust && n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => n.to_string(),
        _ if name.is_empty() => "<anonymous>".into(),
        _ => name.to_string(),
    }
}

/// The first pointer inside a value (a `Vec`'s buffer), searched through
/// nested structs.
fn first_pointer(v: &Value, mem: &mut dyn Memory, depth: usize) -> Result<u64, ValueError> {
    if depth > 8 {
        return Err(ValueError::Dwarf(format!("no pointer in `{}`", v.ty.name)));
    }
    match &v.ty.kind {
        Kind::Pointer { .. } => v.pointer(mem),
        Kind::Struct { members, .. } => {
            for m in members {
                let mv = v.member_value(m, mem);
                if let Ok(p) = first_pointer(&mv, mem, depth + 1) {
                    return Ok(p);
                }
            }
            Err(ValueError::Dwarf(format!("no pointer in `{}`", v.ty.name)))
        }
        _ => Err(ValueError::Dwarf(format!("no pointer in `{}`", v.ty.name))),
    }
}

pub(crate) fn int_of(b: &[u8], signed: bool) -> i128 {
    let mut w = [0u8; 16];
    let n = b.len().min(16);
    w[..n].copy_from_slice(&b[..n]);
    let v = u128::from_le_bytes(w);
    if signed && n > 0 && n < 16 && b[n - 1] & 0x80 != 0 {
        (v | (u128::MAX << (n * 8))) as i128
    } else {
        v as i128
    }
}

fn base(b: &[u8], enc: gimli::DwAte, rust: bool) -> String {
    match enc {
        gimli::DW_ATE_float => match b.len() {
            4 => format!("{}", f32::from_le_bytes(b.try_into().expect("4"))),
            8 => format!("{}", f64::from_le_bytes(b.try_into().expect("8"))),
            n => format!("<{n}-byte float>"),
        },
        gimli::DW_ATE_boolean => (int_of(b, false) != 0).to_string(),
        gimli::DW_ATE_UTF => match char::from_u32(int_of(b, false) as u32) {
            Some(c) => format!("{c:?}"),
            None => format!("{:#x}", int_of(b, false)),
        },
        gimli::DW_ATE_signed_char | gimli::DW_ATE_unsigned_char if b.len() == 1 && !rust => {
            let n = int_of(b, enc == gimli::DW_ATE_signed_char);
            format!("{n} {}", c_char(b[0]))
        }
        gimli::DW_ATE_signed | gimli::DW_ATE_signed_char => int_of(b, true).to_string(),
        _ => int_of(b, false).to_string(),
    }
}

/// `'h'`, `'\n'`, `'\000'`.
fn c_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".into(),
        b'\\' => "'\\\\'".into(),
        b'\n' => "'\\n'".into(),
        b'\t' => "'\\t'".into(),
        0x20..=0x7e => format!("'{}'", c as char),
        _ => format!("'\\{c:03o}'"),
    }
}

/// Bytes as a quoted string (UTF-8 where valid, escapes elsewhere).
fn quote(b: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(b))
}

/// The NUL-terminated string at `p`, at most [`caps::STRING_BYTES`].
fn c_string(mem: &mut dyn Memory, p: u64) -> String {
    let mut out = Vec::new();
    let mut chunk = [0u8; 32];
    while out.len() < caps::STRING_BYTES {
        let at = p.wrapping_add(out.len() as u64);
        // Near the end of a page, read byte by byte.
        let n = if mem.read(at, &mut chunk) {
            chunk.len()
        } else if mem.read(at, &mut chunk[..1]) {
            1
        } else if out.is_empty() {
            return format!("<unreadable {p:#x}>");
        } else {
            break;
        };
        match chunk[..n].iter().position(|c| *c == 0) {
            Some(end) => {
                out.extend_from_slice(&chunk[..end]);
                return quote_c(&out);
            }
            None => out.extend_from_slice(&chunk[..n]),
        }
    }
    quote_c(&out) + "..."
}

/// Bytes as C writes a string: `"hello\001"`.
fn quote_c(b: &[u8]) -> String {
    let mut s = String::from('"');
    for &c in b {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\{c:03o}")),
        }
    }
    s.push('"');
    s
}

/// `len` bytes of UTF-8 text at `p` (at most [`caps::STRING_BYTES`]).
fn text_at(mem: &mut dyn Memory, p: u64, len: usize, _c: bool) -> String {
    let n = len.min(caps::STRING_BYTES);
    let mut b = vec![0; n];
    if n > 0 && !mem.read(p, &mut b) {
        return format!("<unreadable {p:#x}>");
    }
    let s = quote(&b);
    if len > n {
        s + "..."
    } else {
        s
    }
}
