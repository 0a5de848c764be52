//! What the variables references of a position point to: values handed
//! out by `variables` and `evaluate`, and each frame's variables, read once
//! per position.

use std::collections::HashMap;
use symbols::{FrameVariables, Value};

/// Variable references, above the session's own (`1 << 32`, `2 << 32`).
pub const LOCALS: i64 = 3 << 32;
pub const ARGUMENTS: i64 = 4 << 32;
pub const VALUE: i64 = 5 << 32;
pub const GLOBALS: i64 = 6 << 32;
pub const KIND: i64 = !0xffff_ffff;

/// Value references one position hands out, at most.
pub const MAX_HANDLES: usize = 100_000;

/// What the references of the position point to.
#[derive(Default)]
pub struct Handles {
    values: Vec<Node>,
    pub frames: HashMap<i64, FrameVariables>,
}

/// A value a reference names, with the expression that reaches it.
#[derive(Clone)]
pub struct Node {
    pub value: Value,
    pub name: String,
    pub evaluate_name: String,
    pub frame_id: i64,
}

impl Handles {
    pub fn add(&mut self, n: Node) -> i64 {
        if self.values.len() >= MAX_HANDLES {
            return 0;
        }
        self.values.push(n);
        VALUE | self.values.len() as i64
    }

    pub fn node(&self, reference: i64) -> Option<&Node> {
        let i = usize::try_from(reference & 0xffff_ffff).ok()?;
        self.values.get(i.checked_sub(1)?)
    }
}
