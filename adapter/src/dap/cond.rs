//! Breakpoint conditions, logpoint `{expressions}` and data-breakpoint
//! addresses without DWARF variables: integers, registers (`rax`, `$rip`,
//! `eax` for the low half), memory (`*ADDR` reads 8 bytes, `*(u32*)ADDR`
//! or `*(int*)ADDR` other sizes, `[ADDR]` too) and C's operators. What
//! needs a variable's name goes to the variables engine when it is there.

use std::fmt;

/// What an expression reads.
pub trait Context {
    fn register(&mut self, name: &str) -> Option<u64>;
    fn memory(&mut self, addr: u64, len: usize) -> Option<Vec<u8>>;
    /// `expr` over the program's variables (DWARF), where the context has
    /// them: its integer value when it is one, and its text as shown; an
    /// error says why it could not be evaluated. None without debug info.
    fn program(&mut self, _expr: &str) -> Option<Result<(Option<i128>, String), String>> {
        None
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EvalError {}

fn err<T>(s: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError(s.into()))
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(u64),
    Ident(String),
    Op(&'static str),
}

const OPS: &[&str] = &[
    "||", "&&", "==", "!=", "<=", ">=", "<<", ">>", "(", ")", "[", "]", "+", "-", "*", "/", "%",
    "<", ">", "&", "|", "^", "!", "~",
];

fn lex(s: &str) -> Result<Vec<Tok>, EvalError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_alphanumeric() {
                i += 1;
            }
            let t = &s[start..i];
            let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16),
                None => t.parse(),
            };
            out.push(Tok::Num(
                v.map_err(|_| EvalError(format!("`{t}` is not a number")))?,
            ));
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b'$' {
            let start = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].trim_start_matches('$').to_string()));
        } else {
            match OPS.iter().find(|op| s[i..].starts_with(**op)) {
                Some(op) => {
                    out.push(Tok::Op(op));
                    i += op.len();
                }
                None => {
                    return err(format!(
                        "unexpected `{}`",
                        &s[i..].chars().next().unwrap_or(' ')
                    ))
                }
            }
        }
    }
    Ok(out)
}

/// The width and signedness a cast names: `u8`..`u64`, `i8`..`i64`,
/// `char`, `short`, `int`, `long`, `unsigned ...`, `void`.
fn cast_type(words: &[String]) -> Option<(usize, bool)> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    Some(match w.as_slice() {
        ["u8"] | ["unsigned", "char"] => (1, false),
        ["i8"] | ["char"] | ["signed", "char"] => (1, true),
        ["u16"] | ["unsigned", "short"] => (2, false),
        ["i16"] | ["short"] => (2, true),
        ["u32"] | ["unsigned"] | ["unsigned", "int"] => (4, false),
        ["i32"] | ["int"] => (4, true),
        ["u64"] | ["unsigned", "long"] | ["size_t"] | ["uintptr_t"] | ["void"] => (8, false),
        ["i64"] | ["long"] | ["long", "long"] => (8, true),
        _ => return None,
    })
}

struct Parser<'a, C: Context + ?Sized> {
    toks: Vec<Tok>,
    i: usize,
    cx: &'a mut C,
}

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

impl<C: Context + ?Sized> Parser<'_, C> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.i)
    }

    fn eat(&mut self, op: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Op(o)) if *o == op) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn binary(&mut self, level: usize) -> Result<i128, EvalError> {
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut v = self.binary(level + 1)?;
        loop {
            let Some(Tok::Op(op)) = self.peek().cloned() else {
                return Ok(v);
            };
            if !LEVELS[level].contains(&op) {
                return Ok(v);
            }
            self.i += 1;
            let r = self.binary(level + 1)?;
            v = match op {
                "||" => ((v != 0) || (r != 0)) as i128,
                "&&" => ((v != 0) && (r != 0)) as i128,
                "|" => v | r,
                "^" => v ^ r,
                "&" => v & r,
                "==" => (v == r) as i128,
                "!=" => (v != r) as i128,
                "<" => (v < r) as i128,
                "<=" => (v <= r) as i128,
                ">" => (v > r) as i128,
                ">=" => (v >= r) as i128,
                "<<" => v.checked_shl(r as u32).unwrap_or(0),
                ">>" => v.checked_shr(r as u32).unwrap_or(0),
                "+" => v.wrapping_add(r),
                "-" => v.wrapping_sub(r),
                "*" => v.wrapping_mul(r),
                "/" | "%" if r == 0 => return err("division by zero"),
                "/" => v / r,
                "%" => v % r,
                _ => return err(format!("unexpected `{op}`")),
            };
        }
    }

    /// `(type *)` after a `*`: the width to read.
    fn deref_cast(&mut self) -> Option<(usize, bool)> {
        let save = self.i;
        if !self.eat("(") {
            return None;
        }
        let mut words = Vec::new();
        while let Some(Tok::Ident(w)) = self.peek().cloned() {
            words.push(w);
            self.i += 1;
        }
        if let Some(t) = cast_type(&words) {
            if self.eat("*") && self.eat(")") {
                return Some(t);
            }
        }
        self.i = save;
        None
    }

    fn read(&mut self, addr: i128, (len, signed): (usize, bool)) -> Result<i128, EvalError> {
        let a = addr as u64;
        let Some(b) = self.cx.memory(a, len) else {
            return err(format!("cannot read {len} bytes at {a:#x}"));
        };
        let mut buf = [0u8; 8];
        buf[..len].copy_from_slice(&b[..len]);
        let u = u64::from_le_bytes(buf);
        Ok(if signed {
            let shift = 64 - 8 * len as u32;
            (((u << shift) as i64) >> shift) as i128
        } else {
            u as i128
        })
    }

    fn unary(&mut self) -> Result<i128, EvalError> {
        if self.eat("-") {
            return Ok(self.unary()?.wrapping_neg());
        }
        if self.eat("!") {
            return Ok((self.unary()? == 0) as i128);
        }
        if self.eat("~") {
            return Ok(!self.unary()?);
        }
        if self.eat("*") {
            let ty = self.deref_cast().unwrap_or((8, false));
            let a = self.unary()?;
            return self.read(a, ty);
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<i128, EvalError> {
        match self.peek().cloned() {
            Some(Tok::Num(n)) => {
                self.i += 1;
                Ok(n as i128)
            }
            Some(Tok::Ident(name)) => {
                self.i += 1;
                match register(self.cx, &name) {
                    Some(v) => Ok(v as i128),
                    None => err(format!(
                        "`{name}` is not a register (conditions without debug-info variables \
                         read registers and memory: `rax == 3`, `*(int*)(rbp-4) > 2`)"
                    )),
                }
            }
            Some(Tok::Op("(")) => {
                self.i += 1;
                let v = self.binary(0)?;
                if !self.eat(")") {
                    return err("a `)` is missing");
                }
                Ok(v)
            }
            Some(Tok::Op("[")) => {
                self.i += 1;
                let a = self.binary(0)?;
                if !self.eat("]") {
                    return err("a `]` is missing");
                }
                self.read(a, (8, false))
            }
            Some(Tok::Op(op)) => err(format!("unexpected `{op}`")),
            None => err("the expression ends too soon"),
        }
    }
}

/// A register by name: the 64-bit ones, and `eXX`/`rNd` for the low half.
fn register<C: Context + ?Sized>(cx: &mut C, name: &str) -> Option<u64> {
    let n = name.to_ascii_lowercase();
    if let Some(v) = cx.register(&n) {
        return Some(v);
    }
    let full = if let Some(r) = n.strip_suffix('d').filter(|r| r.starts_with('r')) {
        r.to_string()
    } else if let Some(r) = n.strip_prefix('e') {
        format!("r{r}")
    } else {
        return None;
    };
    cx.register(&full).map(|v| v & 0xffff_ffff)
}

/// Evaluates `expr` to an integer: over the program's variables when the
/// context has them (`balance < 0`), else over registers and memory.
pub fn eval<C: Context + ?Sized>(expr: &str, cx: &mut C) -> Result<i128, EvalError> {
    match cx.program(expr) {
        Some(Ok((Some(n), _))) => Ok(n),
        Some(Ok((None, text))) => {
            machine(expr, cx).map_err(|_| EvalError(format!("`{expr}` is `{text}`, not a number")))
        }
        Some(Err(why)) => machine(expr, cx).map_err(|_| EvalError(why)),
        None => machine(expr, cx),
    }
}

/// Evaluates `expr` over registers and memory only.
fn machine<C: Context + ?Sized>(expr: &str, cx: &mut C) -> Result<i128, EvalError> {
    let toks = lex(expr)?;
    if toks.is_empty() {
        return err("the expression is empty");
    }
    let mut p = Parser { toks, i: 0, cx };
    let v = p.binary(0)?;
    if p.i != p.toks.len() {
        return err(format!(
            "unexpected `{:?}` after the expression",
            p.toks[p.i]
        ));
    }
    Ok(v)
}

/// A logpoint's message with each `{expression}` replaced by its value
/// (hex when it looks like an address); `{{` and `}}` are braces.
pub fn interpolate<C: Context + ?Sized>(msg: &str, cx: &mut C) -> String {
    let mut out = String::new();
    let mut rest = msg;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push(tail.as_bytes()[0] as char);
            rest = &tail[2..];
            continue;
        }
        if let Some(after) = tail.strip_prefix('}') {
            out.push('}');
            rest = after;
            continue;
        }
        match tail.find('}') {
            Some(j) => {
                let e = &tail[1..j];
                let program = cx.program(e);
                match program {
                    Some(Ok((_, text))) => out.push_str(&text),
                    _ => match machine(e, cx) {
                        Ok(v) if v > 0xffff => out.push_str(&format!("{v:#x}")),
                        Ok(v) => out.push_str(&v.to_string()),
                        Err(why) => {
                            let why = match program {
                                Some(Err(w)) => w,
                                _ => why.0,
                            };
                            out.push_str(&format!("<{e}: {why}>"))
                        }
                    },
                }
                rest = &tail[j + 1..];
            }
            None => {
                out.push_str(tail);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
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
    pub fn parse(s: &str) -> Result<HitCond, EvalError> {
        let s = s.trim();
        let num = |t: &str| -> Result<u64, EvalError> {
            t.trim().parse().map_err(|_| {
                EvalError(format!(
                    "`{s}` is not a hit count (N, >= N, == N, > N, % N)"
                ))
            })
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
                return err("`% 0` never matches");
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
    use super::*;

    struct Fake;
    impl Context for Fake {
        fn register(&mut self, name: &str) -> Option<u64> {
            match name {
                "rax" => Some(0x1_0000_0003),
                "rbp" => Some(0x1000),
                _ => None,
            }
        }
        fn memory(&mut self, addr: u64, len: usize) -> Option<Vec<u8>> {
            (addr == 0xffc).then(|| {
                (-2i32)
                    .to_le_bytes()
                    .iter()
                    .copied()
                    .cycle()
                    .take(len)
                    .collect()
            })
        }
    }

    #[test]
    fn evaluates_registers_memory_and_operators() {
        assert_eq!(eval("rax", &mut Fake), Ok(0x1_0000_0003));
        assert_eq!(eval("$eax == 3 && 1 + 2 * 3 == 7", &mut Fake), Ok(1));
        assert_eq!(eval("*(int*)(rbp - 4)", &mut Fake), Ok(-2));
        assert_eq!(eval("*(u32*)(rbp-4) > 2", &mut Fake), Ok(1));
        assert!(eval("nosuch > 1", &mut Fake)
            .unwrap_err()
            .0
            .contains("not a register"));
        assert!(eval("*(int*)0", &mut Fake)
            .unwrap_err()
            .0
            .contains("cannot read"));
        assert!(eval("1 +", &mut Fake).is_err());
        assert!(eval("(1", &mut Fake).is_err());
        assert!(eval("1 / 0", &mut Fake).is_err());
        assert_eq!(
            interpolate("a={eax} {{x}} {nope}", &mut Fake)
                .split(' ')
                .next(),
            Some("a=3")
        );
        assert!(HitCond::parse("3").unwrap().fires(3));
        assert!(!HitCond::parse("== 3").unwrap().fires(4));
        assert!(HitCond::parse("%2").unwrap().fires(4));
        assert!(HitCond::parse("x").is_err());
    }
}
