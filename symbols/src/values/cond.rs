//! Breakpoint conditions, logpoint `{expressions}` and data-breakpoint
//! addresses: the expression language of [`super::expr`] read twice, first
//! over the frame's variables (`balance < 0`), then, where that gives no
//! number, at the machine level (`rax == 3`, `*(int*)(rbp-4) > 2`,
//! `[0x4c6f80]`).

use super::expr::{evaluate, Env, Evaluated};
use super::{FrameVariables, ValueError};
use crate::unwind::Memory;

/// What a condition reads where a thread stopped.
pub struct Stop<'a> {
    /// The innermost frame's variables; None without debug info there.
    pub vars: Option<&'a FrameVariables>,
    /// The thread's registers by name, without the `$`.
    pub register: &'a dyn Fn(&str) -> Option<u64>,
}

impl Stop<'_> {
    /// `text` over the variables: its integer when it is one, and its
    /// text as shown. None without debug info.
    fn program(&self, text: &str, mem: &mut dyn Memory) -> Option<Result<Program, ValueError>> {
        let env = Env {
            vars: self.vars?,
            register: self.register,
            machine: false,
        };
        Some(evaluate(text, &env, mem).map(|e| {
            let int = match &e {
                Evaluated::Int { value, .. } => Some(*value),
                Evaluated::Value(v) => v.as_int(mem).ok(),
            };
            Program {
                int,
                text: e.show(mem).value,
            }
        }))
    }

    /// `text` over registers and memory alone.
    fn machine(&self, text: &str, mem: &mut dyn Memory) -> Result<i128, ValueError> {
        let vars = FrameVariables::default();
        let env = Env {
            vars: &vars,
            register: self.register,
            machine: true,
        };
        match evaluate(text, &env, mem)? {
            Evaluated::Int { value, .. } => Ok(value),
            Evaluated::Value(v) => v.as_int(mem),
        }
    }

    /// `text` as an integer (a condition holds when it is not 0): over the
    /// variables when there are some, else over registers and memory. An
    /// error says why, in the variables' terms when there are some.
    pub fn eval(&self, text: &str, mem: &mut dyn Memory) -> Result<i128, ValueError> {
        match self.program(text, mem) {
            Some(Ok(Program { int: Some(n), .. })) => Ok(n),
            Some(Ok(Program { int: None, text: t })) => self
                .machine(text, mem)
                .map_err(|_| ValueError::Expression(format!("`{text}` is `{t}`, not a number"))),
            Some(Err(why)) => self.machine(text, mem).map_err(|_| why),
            None => self.machine(text, mem),
        }
    }

    /// A logpoint's message with each `{expression}` replaced by its value
    /// (a machine-level number in hex when it looks like an address);
    /// `{{` and `}}` are braces; what cannot be evaluated shows as
    /// `<expression: why>`.
    pub fn interpolate(&self, msg: &str, mem: &mut dyn Memory) -> String {
        let mut out = String::new();
        let mut rest = msg;
        while let Some(i) = rest.find(['{', '}']) {
            out.push_str(&rest[..i]);
            let tail = &rest[i..];
            if tail.starts_with("{{") || tail.starts_with("}}") {
                out.push(tail.as_bytes()[0] as char);
                rest = &tail[2..];
            } else if let Some(after) = tail.strip_prefix('}') {
                out.push('}');
                rest = after;
            } else if let Some(j) = tail.find('}') {
                out.push_str(&self.shown(&tail[1..j], mem));
                rest = &tail[j + 1..];
            } else {
                out.push_str(tail);
                rest = "";
            }
        }
        out.push_str(rest);
        out
    }

    /// One `{e}` of a logpoint's message.
    fn shown(&self, e: &str, mem: &mut dyn Memory) -> String {
        let program = self.program(e, mem);
        if let Some(Ok(p)) = program {
            return p.text;
        }
        match self.machine(e, mem) {
            Ok(v) if v > 0xffff => format!("{v:#x}"),
            Ok(v) => v.to_string(),
            Err(why) => {
                let why = match program {
                    Some(Err(w)) => w,
                    _ => why,
                };
                format!("<{e}: {why}>")
            }
        }
    }
}

/// An expression over the variables: its integer when it is one, its text.
struct Program {
    int: Option<i128>,
    text: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn register(name: &str) -> Option<u64> {
        match name {
            "rax" => Some(0x1_0000_0003),
            "rbp" => Some(0x1000),
            _ => None,
        }
    }

    /// -2 as an `int`, repeated, at 0xffc.
    fn memory(addr: u64, buf: &mut [u8]) -> bool {
        let bytes = (-2i32).to_le_bytes();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = bytes[i % 4];
        }
        addr == 0xffc
    }

    fn eval(text: &str) -> Result<i128, String> {
        let stop = Stop {
            vars: None,
            register: &register,
        };
        stop.eval(text, &mut memory).map_err(|e| e.to_string())
    }

    #[test]
    fn evaluates_registers_memory_and_operators() {
        assert_eq!(eval("rax"), Ok(0x1_0000_0003));
        assert_eq!(eval("RAX"), Ok(0x1_0000_0003));
        assert_eq!(eval("$eax == 3 && 1 + 2 * 3 == 7"), Ok(1));
        assert_eq!(eval("*(int*)(rbp - 4)"), Ok(-2));
        assert_eq!(eval("*(u32*)(rbp-4) > 2"), Ok(1));
        assert_eq!(eval("*(rbp - 4)"), Ok(0xffff_fffe_ffff_fffe));
        assert_eq!(eval("[rbp - 4] & 0xff"), Ok(0xfe));
        assert_eq!(eval("*(char *)0xffc"), Ok(-2));
        assert_eq!(eval("1 << 4 | 1 ^ 3"), Ok(0x12));
        assert_eq!(eval("~0 == -1 && (rax >> 32) == 1"), Ok(1));
        assert_eq!(eval("1 < 2 == 1"), Ok(1));
        assert!(eval("nosuch > 1").unwrap_err().contains("not a register"));
        assert!(eval("*(int*)0").unwrap_err().contains("cannot read"));
        assert!(eval("1 +").is_err());
        assert!(eval("(1").is_err());
        assert!(eval("1 / 0").is_err());
        assert!(eval("1 << 200").unwrap_err().contains("shift"));
        let stop = Stop {
            vars: None,
            register: &register,
        };
        let text = stop.interpolate("a={eax} {{x}} {nope} {rbp} {0x10000}}", &mut memory);
        assert!(
            text.starts_with("a=3 {x} <nope: `nope` is not a register"),
            "{text}"
        );
        assert!(text.ends_with("> 4096 0x10000}"), "{text}");
    }

    /// Whatever the text, an answer or an error that says why: never a panic.
    #[test]
    fn malformed_conditions_say_why() {
        for bad in [
            "",
            "(",
            ")",
            "[",
            "[1",
            "*",
            "*(",
            "*(int",
            "*(int*",
            "*(int*)",
            "~",
            "1 <<",
            "<< 1",
            "1 ? 2 : 3",
            "rax =",
            "é",
            "rax é",
            "'",
            "'ab'",
            "0xzz",
            "$",
            "(u8)",
            "sizeof",
            "1 +* 2",
            "[[[[",
            "((((",
            "1 >> -1",
        ] {
            let e = eval(bad).expect_err(bad);
            assert!(!e.is_empty(), "`{bad}` gives an empty error");
        }
        let tokens = [
            "1", "rax", "(", ")", "[", "]", "*", "&", "~", "!", "-", "<<", "||", "(int*)", "$",
        ];
        for a in tokens {
            for b in tokens {
                for c in tokens {
                    let _ = eval(&format!("{a}{b}{c}"));
                    let _ = eval(&format!("{a} {b} {c}"));
                }
            }
        }
        assert!(eval(&"[".repeat(3000))
            .unwrap_err()
            .contains("nested deeper"));
    }
}
