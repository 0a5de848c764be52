//! The language server's own JSON, typed: the arguments of the commands
//! its diagnostics and lenses carry, and the answers of `rewind.*`
//! commands (docs/lsp.md). Each is made a `Value` by `util::json_value`.

use serde::Serialize;
use std::path::Path;

/// `{"run", "step", "compare"?}`: the argument of `rewind.open`, and a
/// diagnostic's `data`.
#[derive(Serialize)]
pub struct OpenArgs<'a> {
    pub run: &'a str,
    pub step: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<&'a str>,
}

/// `{"program", "args"}`: what a lens runs or debugs.
#[derive(Serialize)]
pub struct ProgramArgs<'a> {
    pub program: &'a Path,
    pub args: Vec<String>,
}

/// `rewind.selectRun`'s answer: the run chosen and its program.
#[derive(Serialize)]
pub struct SelectedRun<'a> {
    pub run: &'a str,
    pub program: &'a Path,
}

/// The answer of `rewind.record` and `rewind.check`: the command's exit,
/// its output and whether it was cancelled.
#[derive(Serialize)]
pub struct CommandReply<'a> {
    pub exit: i32,
    pub cancelled: bool,
    pub stdout: &'a str,
    pub stderr: &'a str,
}
