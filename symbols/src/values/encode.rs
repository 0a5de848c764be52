//! Text into a value's bytes, for writing a variable (DAP `setVariable`,
//! `setExpression`), and the integer literals the expression language
//! reads (`42`, `-7`, `0x2a`, `'a'`). The other way, a value into text, is
//! `format.rs`.

use super::types::Kind;
use super::{Value, ValueError};

/// The bytes that store `text` as this value, and where: for writing a
/// variable. Integers (decimal, hex, negative, `'c'`), floats, bools,
/// enumerator names and pointers (as integers).
impl Value {
    pub fn encode(&self, text: &str) -> Result<(u64, Vec<u8>), ValueError> {
        let addr = self.address().ok_or_else(|| {
            ValueError::Expression(
                "it is not in memory (a register, a constant or a bit field): not written".into(),
            )
        })?;
        let size = self.ty.size.unwrap_or(0) as usize;
        let text = text.trim();
        let bad =
            || ValueError::Expression(format!("`{text}` is not a value of `{}`", self.ty.name));
        let bytes = match &self.ty.kind {
            Kind::Base(gimli::DW_ATE_float) => match size {
                4 => text
                    .parse::<f32>()
                    .map_err(|_| bad())?
                    .to_le_bytes()
                    .to_vec(),
                8 => text
                    .parse::<f64>()
                    .map_err(|_| bad())?
                    .to_le_bytes()
                    .to_vec(),
                _ => return Err(bad()),
            },
            Kind::Base(gimli::DW_ATE_boolean) => match text {
                "true" => vec![1],
                "false" => vec![0],
                t => vec![u8::from(parse_int(t).ok_or_else(bad)? != 0)],
            },
            Kind::Enum { enumerators, .. } => {
                let n = match enumerators.iter().find(|e| e.0 == text) {
                    Some(e) => e.1,
                    None => parse_int(text).ok_or_else(bad)?,
                };
                n.to_le_bytes()[..size.min(16)].to_vec()
            }
            Kind::Pointer { .. } => parse_int(text).ok_or_else(bad)?.to_le_bytes()[..8].to_vec(),
            _ if self.ty.is_integer() && (1..=16).contains(&size) => {
                let n = parse_int(text).ok_or_else(bad)?;
                let bits = size as u32 * 8;
                let fits = if self.ty.is_signed() {
                    bits >= 128 || (n >= -(1i128 << (bits - 1)) && n < (1i128 << (bits - 1)))
                } else {
                    bits >= 128 || (n >= 0 && n < (1i128 << bits))
                };
                if !fits {
                    return Err(ValueError::Expression(format!(
                        "{n} does not fit in `{}`",
                        self.ty.name
                    )));
                }
                n.to_le_bytes()[..size].to_vec()
            }
            _ => {
                return Err(ValueError::Expression(format!(
                    "only numbers, enums, bools and pointers can be set, not `{}`",
                    self.ty.name
                )))
            }
        };
        Ok((addr, bytes))
    }
}

/// `42`, `-7`, `0x2a`, `'a'`.
pub(crate) fn parse_int(t: &str) -> Option<i128> {
    let t = t.trim();
    if let Some(c) = t.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        let mut cs = c.chars();
        let ch = cs.next()?;
        return cs.next().is_none().then_some(ch as i128);
    }
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => i128::from_str_radix(h, 16).ok()?,
        None => t.parse::<i128>().ok()?,
    };
    Some(if neg { -v } else { v })
}
