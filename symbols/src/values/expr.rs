//! The expressions a debugger's hover, watch and REPL take, over a frame's
//! variables: `name`, `a.b`, `a->b`, `a[i]`, `*p`, `&x`, registers (`$rip`),
//! integer literals, `+ - * / %`, comparisons, `&&`, `||`, `!`, the bitwise
//! `& | ^ ~ << >>` and parentheses, casts to C's integer types and pointers
//! to them (`(char)x`, `*(int *)p`, `(void *)a`) and `sizeof` of a type or a
//! value. Pointer arithmetic scales by the pointee's size.
//!
//! With [`Env::machine`] names reach the machine too, for a breakpoint's
//! condition where no variable has the name: bare registers (`rax`, `eax`
//! for the low half), memory at a number (`*ADDR` reads 8 bytes,
//! `*(int *)ADDR` or `*(u32 *)ADDR` the type's, `[ADDR]` 8) and the casts
//! `u8`..`u64`, `i8`..`i64`.

use super::encode::parse_int;
use super::types::{Kind, Ty, TypeRef};
use super::{FrameVariables, Place, Value, ValueError};
use crate::unwind::Memory;
use std::sync::Arc;

/// What an expression evaluated to.
#[derive(Debug, Clone)]
pub enum Evaluated {
    /// A value with a type from the program.
    Value(Value),
    /// A number with no type of the program's (a literal, a register,
    /// arithmetic); `hex` for registers and addresses.
    Int { value: i128, hex: bool },
}

/// What names mean in an expression.
pub struct Env<'a> {
    pub vars: &'a FrameVariables,
    /// A register by name (`rip`, `rsp`, `fs_base`), without the `$`.
    pub register: &'a dyn Fn(&str) -> Option<u64>,
    /// Machine-level names: a name no variable has is a register, and a
    /// number can be read as an address (the module's doc).
    pub machine: bool,
}

/// Evaluates `text` in the frame.
pub fn evaluate(text: &str, env: &Env, mem: &mut dyn Memory) -> Result<Evaluated, ValueError> {
    let tokens = lex(text)?;
    if tokens.is_empty() {
        return Err(err("an empty expression"));
    }
    let mut p = Parser {
        tokens,
        at: 0,
        env,
        mem,
        depth: 0,
    };
    let v = p.binary(0)?;
    match p.tokens.get(p.at) {
        None => Ok(v),
        Some(t) => Err(err(format!("unexpected `{}`", t.text()))),
    }
}

fn err(s: impl Into<String>) -> ValueError {
    ValueError::Expression(s.into())
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Reg(String),
    Num(i128),
    Op(&'static str),
}

impl Tok {
    fn text(&self) -> String {
        match self {
            Tok::Ident(s) => s.clone(),
            Tok::Reg(s) => format!("${s}"),
            Tok::Num(n) => n.to_string(),
            Tok::Op(o) => o.to_string(),
        }
    }
}

/// Longest first where one begins another.
const OPS: [&str; 25] = [
    "->", "==", "!=", "<=", ">=", "<<", ">>", "&&", "||", "+", "-", "*", "/", "%", "(", ")", "[",
    "]", ".", "&", "<", ">", "|", "^", "~",
];

/// The binary operators by C's precedence, loosest first.
const LEVELS: &[&[&str]] = &[
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", "<=", ">", ">="],
    &["<<", ">>"],
    &["+", "-"],
    &["*", "/", "%"],
];

/// Longest expression accepted, in bytes.
const MAX_TEXT: usize = 4096;
/// Deepest nesting accepted.
const MAX_DEPTH: usize = 64;

fn lex(text: &str) -> Result<Vec<Tok>, ValueError> {
    if text.len() > MAX_TEXT {
        return Err(err(format!("longer than {MAX_TEXT} bytes")));
    }
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'$' || c.is_ascii_alphabetic() || c == b'_' {
            let start = i + usize::from(c == b'$');
            i = start;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = text[start..i].to_string();
            out.push(if c == b'$' {
                Tok::Reg(word)
            } else {
                Tok::Ident(word)
            });
            continue;
        }
        if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let n = parse_int(&text[start..i])
                .ok_or_else(|| err(format!("`{}` is not a number", &text[start..i])))?;
            out.push(Tok::Num(n));
            continue;
        }
        if c == b'\'' {
            let end = text[i + 1..]
                .find('\'')
                .map(|e| i + 1 + e)
                .ok_or_else(|| err("an unterminated character"))?;
            let n = parse_int(&text[i..=end]).ok_or_else(|| err("a bad character literal"))?;
            out.push(Tok::Num(n));
            i = end + 1;
            continue;
        }
        if c == b'!' && b.get(i + 1) != Some(&b'=') {
            out.push(Tok::Op("!"));
            i += 1;
            continue;
        }
        match OPS.iter().find(|o| text[i..].starts_with(**o)) {
            Some(o) => {
                out.push(Tok::Op(o));
                i += o.len();
            }
            None => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err(err(format!("unexpected `{ch}`")));
            }
        }
    }
    Ok(out)
}

struct Parser<'a, 'm> {
    tokens: Vec<Tok>,
    at: usize,
    env: &'a Env<'a>,
    mem: &'m mut dyn Memory,
    depth: usize,
}

impl Parser<'_, '_> {
    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.tokens.get(self.at), Some(Tok::Op(o)) if *o == op) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.at) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn int(&mut self, v: &Evaluated) -> Result<i128, ValueError> {
        match v {
            Evaluated::Int { value, .. } => Ok(*value),
            Evaluated::Value(v) => v.as_int(self.mem),
        }
    }

    /// The operators of `LEVELS[level]` and tighter ones.
    fn binary(&mut self, level: usize) -> Result<Evaluated, ValueError> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut l = self.binary(level + 1)?;
        while let Some(op) = self.peek_op().filter(|o| LEVELS[level].contains(o)) {
            self.at += 1;
            let r = self.binary(level + 1)?;
            l = self.apply(op, l, r)?;
        }
        Ok(l)
    }

    fn apply(&mut self, op: &str, l: Evaluated, r: Evaluated) -> Result<Evaluated, ValueError> {
        if ["+", "-", "*", "/", "%"].contains(&op) {
            return self.arith(op, l, r);
        }
        let hex = matches!(l, Evaluated::Int { hex: true, .. });
        let (a, b) = (self.int(&l)?, self.int(&r)?);
        let value = match op {
            "||" => return Ok(bool_val(a != 0 || b != 0)),
            "&&" => return Ok(bool_val(a != 0 && b != 0)),
            "==" => return Ok(bool_val(a == b)),
            "!=" => return Ok(bool_val(a != b)),
            "<" => return Ok(bool_val(a < b)),
            ">" => return Ok(bool_val(a > b)),
            "<=" => return Ok(bool_val(a <= b)),
            ">=" => return Ok(bool_val(a >= b)),
            "|" => a | b,
            "^" => a ^ b,
            "&" => a & b,
            _ => {
                let shift = u32::try_from(b).ok().filter(|s| *s < 128);
                let shifted = if op == "<<" {
                    shift.and_then(|s| a.checked_shl(s))
                } else {
                    shift.and_then(|s| a.checked_shr(s))
                };
                shifted.ok_or_else(|| {
                    err(format!("{a} {op} {b} has no value (a shift of 0 to 127)"))
                })?
            }
        };
        Ok(Evaluated::Int { value, hex })
    }

    fn arith(&mut self, op: &str, l: Evaluated, r: Evaluated) -> Result<Evaluated, ValueError> {
        // Pointer plus or minus an integer moves by elements.
        if let Evaluated::Value(v) = &l {
            if matches!(v.ty.kind, Kind::Pointer { .. }) && (op == "+" || op == "-") {
                let n = self.int(&r)?;
                let n = if op == "-" { n.wrapping_neg() } else { n };
                let elem = v.index(n, self.mem)?;
                return elem.address_of().map(Evaluated::Value);
            }
        }
        let hex = matches!(l, Evaluated::Int { hex: true, .. });
        let (a, b) = (self.int(&l)?, self.int(&r)?);
        let value = match op {
            "+" => a.checked_add(b),
            "-" => a.checked_sub(b),
            "*" => a.checked_mul(b),
            "/" => a.checked_div(b),
            _ => a.checked_rem(b),
        }
        .ok_or_else(|| {
            err(format!(
                "{a} {op} {b} has no value (overflow or division by zero)"
            ))
        })?;
        Ok(Evaluated::Int { value, hex })
    }

    fn unary(&mut self) -> Result<Evaluated, ValueError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(err(format!("nested deeper than {MAX_DEPTH}")));
        }
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> Result<Evaluated, ValueError> {
        if matches!(self.tokens.get(self.at), Some(Tok::Ident(w)) if w == "sizeof") {
            self.at += 1;
            return self.size_of();
        }
        if let Some((ty, len)) = self.cast_at(self.at) {
            self.at += len;
            let v = self.unary()?;
            return self.cast(v, ty);
        }
        if self.eat("-") {
            let v = self.unary()?;
            let n = self.int(&v)?;
            return Ok(Evaluated::Int {
                value: n.checked_neg().ok_or_else(|| err("overflow"))?,
                hex: false,
            });
        }
        if self.eat("!") {
            let v = self.unary()?;
            return Ok(bool_val(self.int(&v)? == 0));
        }
        if self.eat("~") {
            let v = self.unary()?;
            let n = self.int(&v)?;
            return Ok(Evaluated::Int {
                value: !n,
                hex: false,
            });
        }
        if self.eat("*") {
            return self.deref();
        }
        if self.eat("&") {
            let v = self.unary()?;
            return match v {
                Evaluated::Value(v) => Ok(Evaluated::Value(v.address_of()?)),
                Evaluated::Int { .. } => Err(err("a number has no address")),
            };
        }
        self.postfix()
    }

    /// `*v`: the value pointed to; with [`Env::machine`] a number is an
    /// address, read as `*(T *)`'s `T` (8 bytes unsigned without a cast).
    fn deref(&mut self) -> Result<Evaluated, ValueError> {
        let cast = self.cast_at(self.at);
        if let Some((_, len)) = &cast {
            self.at += len;
        }
        let mut v = self.unary()?;
        if let Some((ty, _)) = cast {
            if let (true, Evaluated::Int { value, .. }) = (self.env.machine, &v) {
                if let Some(width) = pointee_width(&ty) {
                    return self.read(*value, width);
                }
            }
            v = self.cast(v, ty)?;
        }
        match v {
            Evaluated::Value(v) => Ok(Evaluated::Value(v.deref(self.mem)?)),
            Evaluated::Int { value, .. } if self.env.machine => self.read(value, (8, false)),
            Evaluated::Int { .. } => Err(err("a number has no type to dereference")),
        }
    }

    /// `len` bytes at `addr` as an integer, signed or not.
    fn read(&mut self, addr: i128, (len, signed): (usize, bool)) -> Result<Evaluated, ValueError> {
        let a = addr as u64;
        let mut buf = [0u8; 8];
        if !self.mem.read(a, &mut buf[..len]) {
            return Err(err(format!("cannot read {len} bytes at {a:#x}")));
        }
        let u = u64::from_le_bytes(buf);
        let shift = 64 - 8 * len as u32;
        let value = if signed {
            i128::from(((u << shift) as i64) >> shift)
        } else {
            i128::from(u)
        };
        Ok(Evaluated::Int { value, hex: false })
    }

    /// A register by the name a condition gives it: any case, `$` or not,
    /// `eax` and `r8d` for the low 32 bits of `rax` and `r8`.
    fn machine_register(&self, name: &str) -> Option<Evaluated> {
        let n = name.to_ascii_lowercase();
        let low = |full: &str| (self.env.register)(full).map(|v| v & 0xffff_ffff);
        let v = (self.env.register)(&n).or_else(|| {
            if let Some(r) = n.strip_suffix('d').filter(|r| r.starts_with('r')) {
                low(r)
            } else {
                low(&format!("r{}", n.strip_prefix('e')?))
            }
        })?;
        Some(Evaluated::Int {
            value: i128::from(v),
            hex: true,
        })
    }

    /// A C type in parentheses at token `i` (`(unsigned long)`, `(int *)`,
    /// `(void *)`): the type and how many tokens it takes.
    fn cast_at(&self, i: usize) -> Option<(Arc<Ty>, usize)> {
        if !matches!(self.tokens.get(i), Some(Tok::Op("("))) {
            return None;
        }
        let mut words = Vec::new();
        let mut j = i + 1;
        while let Some(Tok::Ident(w)) = self.tokens.get(j) {
            words.push(w.as_str());
            j += 1;
        }
        let mut ty = c_type(&words, self.env.machine)?;
        while matches!(self.tokens.get(j), Some(Tok::Op("*"))) {
            let target = match ty.kind {
                Kind::Void => TypeRef::Void,
                _ => TypeRef::Synth(ty),
            };
            ty = Ty::pointer_to(target);
            j += 1;
        }
        matches!(self.tokens.get(j), Some(Tok::Op(")"))).then_some((ty, j + 1 - i))
    }

    /// `(ty) v`: the value's integer as that type.
    fn cast(&mut self, v: Evaluated, ty: Arc<Ty>) -> Result<Evaluated, ValueError> {
        if matches!(ty.kind, Kind::Void) {
            return Err(err("a cast to `void` has no value"));
        }
        let size = ty.size.unwrap_or(8).min(16) as usize;
        let n = self.int(&v)?;
        let Some(unit) = self.env.vars.unit.clone() else {
            // No debug info here: the number, in the type's bytes.
            let bits = 8 * size as u32;
            let value = if bits >= 128 {
                n
            } else if ty.is_signed() {
                (n << (128 - bits)) >> (128 - bits)
            } else {
                n & ((1i128 << bits) - 1)
            };
            return Ok(Evaluated::Int {
                value,
                hex: matches!(ty.kind, Kind::Pointer { .. }),
            });
        };
        Ok(Evaluated::Value(Value {
            unit,
            ty,
            place: Place::Bytes(n.to_le_bytes()[..size].into()),
        }))
    }

    /// `sizeof (type)`, `sizeof expr`: bytes, as an `unsigned long`.
    fn size_of(&mut self) -> Result<Evaluated, ValueError> {
        let size = match self.cast_at(self.at) {
            Some((ty, len)) => {
                self.at += len;
                ty.size
            }
            None => match self.unary()? {
                Evaluated::Value(v) => v.ty.size,
                // Literals and registers are 8-byte numbers here.
                Evaluated::Int { .. } => Some(8),
            },
        };
        let size = size.ok_or_else(|| err("its size is not known"))?;
        Ok(Evaluated::Int {
            value: i128::from(size),
            hex: false,
        })
    }

    fn postfix(&mut self) -> Result<Evaluated, ValueError> {
        let mut v = self.primary()?;
        loop {
            if self.eat(".") || self.eat("->") {
                let name = match self.tokens.get(self.at) {
                    Some(Tok::Ident(n)) => n.clone(),
                    Some(Tok::Num(n)) => n.to_string(),
                    _ => return Err(err("a member name must follow `.` or `->`")),
                };
                self.at += 1;
                v = match v {
                    Evaluated::Value(x) => Evaluated::Value(x.member(&name, self.mem)?),
                    Evaluated::Int { .. } => return Err(err("a number has no members")),
                };
            } else if self.eat("[") {
                let i = self.binary(0)?;
                if !self.eat("]") {
                    return Err(err("`]` expected"));
                }
                let i = self.int(&i)?;
                v = match v {
                    Evaluated::Value(x) => Evaluated::Value(x.index(i, self.mem)?),
                    Evaluated::Int { .. } => return Err(err("a number cannot be indexed")),
                };
            } else {
                return Ok(v);
            }
        }
    }

    fn primary(&mut self) -> Result<Evaluated, ValueError> {
        let t = self
            .tokens
            .get(self.at)
            .cloned()
            .ok_or_else(|| err("the expression ends too early"))?;
        self.at += 1;
        match t {
            Tok::Num(n) => Ok(Evaluated::Int {
                value: n,
                hex: false,
            }),
            Tok::Reg(r) if self.env.machine => self
                .machine_register(&r)
                .ok_or_else(|| err(format!("no register `${r}`"))),
            Tok::Reg(r) => (self.env.register)(&r)
                .map(|v| Evaluated::Int {
                    value: v as i128,
                    hex: true,
                })
                .ok_or_else(|| err(format!("no register `${r}`"))),
            Tok::Ident(name) => {
                if let Some(v) = self.env.vars.find(&name) {
                    return Ok(Evaluated::Value(v.value.clone()));
                }
                if let Some(v) = self.env.vars.global(&name, self.mem) {
                    return Ok(Evaluated::Value(v));
                }
                if self.env.machine {
                    return self.machine_register(&name).ok_or_else(|| {
                        err(format!(
                            "`{name}` is not a register (conditions without debug-info \
                             variables read registers and memory: `rax == 3`, \
                             `*(int*)(rbp-4) > 2`)"
                        ))
                    });
                }
                match name.as_str() {
                    "true" => Ok(bool_val(true)),
                    "false" => Ok(bool_val(false)),
                    "errno" => Ok(Evaluated::Value(self.env.vars.errno()?)),
                    _ => Err(ValueError::NoSuchName(name)),
                }
            }
            Tok::Op("(") => {
                let v = self.binary(0)?;
                if !self.eat(")") {
                    return Err(err("`)` expected"));
                }
                Ok(v)
            }
            Tok::Op("[") if self.env.machine => {
                let a = self.binary(0)?;
                if !self.eat("]") {
                    return Err(err("`]` expected"));
                }
                let a = self.int(&a)?;
                self.read(a, (8, false))
            }
            Tok::Op(o) => Err(err(format!("unexpected `{o}`"))),
        }
    }
}

/// A C type by its words (`unsigned long`, `char`, `int64_t`, `void`);
/// `machine` adds `u8`..`u64` and `i8`..`i64`.
fn c_type(words: &[&str], machine: bool) -> Option<Arc<Ty>> {
    use gimli::{
        DW_ATE_boolean, DW_ATE_signed, DW_ATE_signed_char, DW_ATE_unsigned, DW_ATE_unsigned_char,
    };
    let (name, size, enc) = match words {
        ["u8"] if machine => ("unsigned char", 1, DW_ATE_unsigned_char),
        ["i8"] if machine => ("signed char", 1, DW_ATE_signed_char),
        ["u16"] if machine => ("unsigned short", 2, DW_ATE_unsigned),
        ["i16"] if machine => ("short", 2, DW_ATE_signed),
        ["u32"] if machine => ("unsigned int", 4, DW_ATE_unsigned),
        ["i32"] if machine => ("int", 4, DW_ATE_signed),
        ["u64"] if machine => ("unsigned long", 8, DW_ATE_unsigned),
        ["i64"] if machine => ("long", 8, DW_ATE_signed),
        ["void"] => return Some(Ty::synth("void", None, Kind::Void)),
        ["_Bool"] | ["bool"] => ("_Bool", 1, DW_ATE_boolean),
        ["char"] | ["signed", "char"] => ("char", 1, DW_ATE_signed_char),
        ["unsigned", "char"] | ["uint8_t"] => ("unsigned char", 1, DW_ATE_unsigned_char),
        ["int8_t"] => ("signed char", 1, DW_ATE_signed_char),
        ["short"] | ["short", "int"] | ["int16_t"] => ("short", 2, DW_ATE_signed),
        ["unsigned", "short"] | ["unsigned", "short", "int"] | ["uint16_t"] => {
            ("unsigned short", 2, DW_ATE_unsigned)
        }
        ["int"] | ["signed"] | ["signed", "int"] | ["int32_t"] => ("int", 4, DW_ATE_signed),
        ["unsigned"] | ["unsigned", "int"] | ["uint32_t"] => ("unsigned int", 4, DW_ATE_unsigned),
        ["long"]
        | ["long", "int"]
        | ["long", "long"]
        | ["long", "long", "int"]
        | ["int64_t"]
        | ["ssize_t"]
        | ["intptr_t"] => ("long", 8, DW_ATE_signed),
        ["unsigned", "long"]
        | ["unsigned", "long", "int"]
        | ["unsigned", "long", "long"]
        | ["uint64_t"]
        | ["size_t"]
        | ["uintptr_t"] => ("unsigned long", 8, DW_ATE_unsigned),
        _ => return None,
    };
    Some(Ty::synth(name, Some(size), Kind::Base(enc)))
}

/// What `*(T *)` reads: `T`'s size (8 for `void`) and signedness.
fn pointee_width(ty: &Ty) -> Option<(usize, bool)> {
    match &ty.kind {
        Kind::Pointer {
            target: TypeRef::Void,
            ..
        } => Some((8, false)),
        Kind::Pointer {
            target: TypeRef::Synth(t),
            ..
        } => match t.size {
            Some(n @ (1 | 2 | 4 | 8)) => Some((n as usize, t.is_signed())),
            _ => None,
        },
        _ => None,
    }
}

fn bool_val(b: bool) -> Evaluated {
    Evaluated::Int {
        value: i128::from(b),
        hex: false,
    }
}

impl Evaluated {
    /// The one-line text, the type's name, and the value when it has
    /// children or a place.
    pub fn show(&self, mem: &mut dyn Memory) -> super::Shown {
        match self {
            Evaluated::Value(v) => v.show(mem),
            Evaluated::Int { value, hex } => super::Shown {
                value: if *hex {
                    format!("{:#x}", *value as u64)
                } else {
                    value.to_string()
                },
                type_name: Ty::long().name.clone(),
                named: 0,
                indexed: 0,
                address: None,
            },
        }
    }

    pub fn value(&self) -> Option<&Value> {
        match self {
            Evaluated::Value(v) => Some(v),
            Evaluated::Int { .. } => None,
        }
    }
}

impl FrameVariables {
    /// A global or static variable of the frame's compilation unit.
    pub fn global(&self, name: &str, mem: &mut dyn Memory) -> Option<Value> {
        let u = self.unit.as_ref()?;
        super::scope::globals(u, Some(name), self.tp, mem, 1)
            .pop()
            .map(|v| v.value)
    }

    /// The global and static variables of the frame's compilation unit (the
    /// Globals scope), at most `max`.
    pub fn globals(&self, mem: &mut dyn Memory, max: usize) -> Vec<super::Variable> {
        match &self.unit {
            Some(u) => super::scope::globals(u, None, self.tp, mem, max),
            None => Vec::new(),
        }
    }

    /// The thread's errno (an `int`), where the C library keeps it.
    pub fn errno(&self) -> Result<Value, ValueError> {
        let u = self
            .unit
            .as_ref()
            .ok_or_else(|| err("no debug info here to read errno with"))?;
        let tp = self
            .tp
            .ok_or_else(|| err("errno: the thread pointer is not known"))?;
        let addr = u.module.tls().errno(tp).ok_or_else(|| {
            err("errno: the program has neither an `errno` thread-local nor a known `__errno_location`")
        })?;
        Ok(Value {
            unit: u.clone(),
            ty: Ty::synth("int", Some(4), Kind::Base(gimli::DW_ATE_signed)),
            place: Place::Memory(addr),
        })
    }
}

/// Whether a place can be written (for `setVariable`).
pub fn writable(v: &Value) -> bool {
    matches!(v.place, Place::Memory(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str) -> Result<String, String> {
        let vars = FrameVariables::default();
        let register = |n: &str| (n == "rsp").then_some(0x7ffe_0000u64);
        let env = Env {
            vars: &vars,
            register: &register,
            machine: false,
        };
        let mut mem = |_a: u64, _b: &mut [u8]| false;
        evaluate(text, &env, &mut mem)
            .map(|e| e.show(&mut mem).value)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_registers_and_operators() {
        assert_eq!(eval("1 + 2 * 3").unwrap(), "7");
        assert_eq!(eval("(1 + 2) * 3").unwrap(), "9");
        assert_eq!(eval("-7 / 2").unwrap(), "-3");
        assert_eq!(eval("7 % 3 == 1 && !0").unwrap(), "1");
        assert_eq!(eval("0x10 - 'a'").unwrap(), "-81");
        assert_eq!(eval("$rsp + 8").unwrap(), "0x7ffe0008");
        assert_eq!(eval("2 < 1 || 3 >= 3").unwrap(), "1");
        // Without debug info a cast is the number; sizeof of C's types.
        assert_eq!(eval("(unsigned char)300 + 1").unwrap(), "45");
        assert_eq!(eval("(char)255").unwrap(), "-1");
        assert_eq!(eval("(int *)$rsp").unwrap(), "0x7ffe0000");
        assert_eq!(
            eval("sizeof(unsigned short) + sizeof (long *)").unwrap(),
            "10"
        );
        assert_eq!(eval("sizeof 1").unwrap(), "8");
        assert_eq!(eval("(x)").unwrap_err(), "no variable `x` in this frame");
        assert!(eval("(void)1").unwrap_err().contains("`void`"));
        assert!(eval("sizeof(void)").unwrap_err().contains("not known"));
    }

    #[test]
    fn bad_expressions_say_why() {
        assert_eq!(eval("").unwrap_err(), "an empty expression");
        assert_eq!(eval("$xmm0").unwrap_err(), "no register `$xmm0`");
        assert_eq!(eval("x").unwrap_err(), "no variable `x` in this frame");
        assert!(eval("1 +").unwrap_err().contains("ends too early"));
        assert!(eval("1 2").unwrap_err().contains("unexpected `2`"));
        assert!(eval("1 # 2").unwrap_err().contains("unexpected `#`"));
        assert!(eval("12abc").unwrap_err().contains("not a number"));
        assert!(eval("'a").unwrap_err().contains("unterminated"));
        assert!(eval("*1").unwrap_err().contains("no type"));
        assert!(eval("&1").unwrap_err().contains("no address"));
        assert!(eval("1[0]").unwrap_err().contains("cannot be indexed"));
        assert!(eval("170141183460469231731687303715884105727 + 1")
            .unwrap_err()
            .contains("overflow"));
        assert!(eval(&"-".repeat(1000))
            .unwrap_err()
            .contains("nested deeper"));
        assert!(eval(&"(".repeat(5000)).unwrap_err().contains("longer than"));
        assert!(eval(&"(".repeat(200)).is_err());
    }
}
