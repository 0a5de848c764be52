//! The bodies of the custom requests' replies and events (`rewind/...`) as
//! types: what docs/dap.md shows and vscode-extension/src/protocol.ts
//! declares under the same names. `protocol_ts.rs`'s test reads the
//! TypeScript and checks it against these, field by field. The standard
//! replies use the `dap` crate's types, but for [`Breakpoint`] and
//! [`Source`], whose members the crate names in snake case.
//!
//! On the wire a `null` member is dropped (`wire::strip_nulls`), so an
//! `Option` here is a member that may be missing: `?` or `| null` there.
//!
//! [`page`] is the part of a list a standard request asks for by a start
//! and a count (`stackTrace`, `modules`).

use serde::Serialize;
use serde_json::Value;
use vmm::record::fork::ForkWith;
use vmm::store::bookmarks::Bookmark;

/// A reply or event body as JSON.
pub fn body(r: &impl Serialize) -> Value {
    // Plain data with string keys: serializing it cannot fail.
    serde_json::to_value(r).expect("a reply serializes")
}

/// The part of `items` a request asks for by a start and a count, as
/// `stackTrace` does by `startFrame` and `levels` and `modules` by
/// `startModule` and `moduleCount`: from `start` (missing or negative: the
/// first), at most `count` items (missing, zero or negative: all of them).
pub fn page<T>(
    items: impl IntoIterator<Item = T>,
    start: Option<i64>,
    count: Option<i64>,
) -> Vec<T> {
    let start = usize::try_from(start.unwrap_or(0)).unwrap_or(0);
    let count = count
        .and_then(|c| usize::try_from(c).ok())
        .filter(|c| *c > 0)
        .unwrap_or(usize::MAX);
    items.into_iter().skip(start).take(count).collect()
}

/// An event of the run, as the timeline, the position and `rewind/events`
/// show it.
#[derive(Debug, Clone, Serialize)]
pub struct RunEvent {
    pub step: u64,
    pub pid: u32,
    pub tid: u32,
    pub kind: &'static str,
    pub text: String,
}

/// `rewind/fork`'s reply and the `rewind/forked` event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forked {
    pub parent: String,
    pub step: u64,
    pub run: String,
    pub status: String,
    pub steps: u64,
    pub with: ForkedWith,
    pub first_difference: Option<u64>,
}

/// What a fork changed: its schedule or its seed.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ForkedWith {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl From<ForkWith> for ForkedWith {
    fn from(w: ForkWith) -> Self {
        match w {
            ForkWith::Schedule(n) => ForkedWith {
                schedule: Some(n),
                seed: None,
            },
            ForkWith::Seed(n) => ForkedWith {
                schedule: None,
                seed: Some(n),
            },
        }
    }
}

/// One schedule of `rewind/check`, as it ends.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResult {
    pub index: u64,
    pub label: String,
    pub run: String,
    pub status: String,
    pub steps: u64,
    pub same_end: bool,
    pub violations: Vec<Violation>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub property: String,
    pub why: String,
}

/// The `rewind/checkResult` event: a result of request `request`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResultEvent {
    pub request: i64,
    pub result: CheckResult,
}

/// `rewind/check`'s reply.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReply {
    pub run: String,
    pub from: u64,
    pub results: Vec<CheckResult>,
    /// How many results violate a property.
    pub violations: usize,
    pub cancelled: bool,
}

/// `rewind/cat`'s reply: the file's size and text where it exists.
#[derive(Debug, Clone, Serialize)]
pub struct CatReply {
    pub path: String,
    pub step: u64,
    pub exists: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utf8: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// `rewind/compare`'s reply: `events` when the runs are identical, else
/// where they first differ (`index` ... `rightEvents`).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub left: String,
    pub right: String,
    pub identical: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub right_step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<Vec<RunEvent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_events: Option<Vec<RunEvent>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub right_events: Option<Vec<RunEvent>>,
}

/// `rewind/bookmark`'s reply: the run's bookmarks after the action.
#[derive(Debug, Clone, Serialize)]
pub struct BookmarksReply {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added: Option<Bookmark>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<usize>,
    pub bookmarks: Vec<Bookmark>,
}

/// `rewind/events`' reply.
#[derive(Debug, Clone, Serialize)]
pub struct EventsReply {
    pub events: Vec<RunEvent>,
    /// More matched than `limit`.
    pub truncated: bool,
}

/// `rewind/lanes`' reply: each thread's stretches on the CPU.
#[derive(Debug, Clone, Serialize)]
pub struct Lanes {
    pub run: String,
    pub from: u64,
    pub to: u64,
    /// Stretches were merged into buckets.
    pub coarse: bool,
    pub threads: Vec<LaneThread>,
    /// The compared run's, over the same steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compare: Option<Box<Lanes>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LaneThread {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    /// First and last step of each stretch.
    pub stretches: Vec<(u64, u64)>,
}

/// `rewind/runs`' reply: the store's runs, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct RunsReply {
    pub runs: Vec<crate::app::runs::RunInfo>,
}

/// The `rewind/position` event: where the session stands.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Position {
    pub run: String,
    pub step: u64,
    pub steps: u64,
    /// The step the registers are from (`View::state_step`).
    pub state_step: u64,
    pub virtual_ns: u64,
    /// The focused thread.
    pub thread: Option<PositionThread>,
    /// The events of the step.
    pub events: Vec<RunEvent>,
    /// The place inside the step, when a move went inside one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_step: Option<InStep>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PositionThread {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
}

/// A place inside a step: the `hit`-th time `pc` ran in it.
#[derive(Debug, Clone, Serialize)]
pub struct InStep {
    pub step: u64,
    pub pc: String,
    pub hit: u64,
}

/// The `rewind/timeline` event: the whole run, for the timeline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Timeline {
    pub run: String,
    pub name: String,
    pub status: String,
    pub steps: u64,
    pub virtual_ns: u64,
    pub fork_of: Option<vmm::run::ForkOf>,
    /// The events worth a mark (`view::of_interest`).
    pub events: Vec<RunEvent>,
    pub bookmarks: Vec<Bookmark>,
    pub perturbations: Vec<Perturbation>,
    /// The deciding step a check found, when the run is its finding.
    pub deciding: Option<u64>,
    /// Where the compared run first differs.
    pub compare: Option<TimelineCompare>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Perturbation {
    pub step: u64,
    pub what: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineCompare {
    pub run: String,
    pub identical: bool,
    pub step: Option<u64>,
    pub other_step: Option<u64>,
}

/// A breakpoint as `setBreakpoints` and the other `set...Breakpoints`
/// answer and the `breakpoint` event carries it. Not the `dap` crate's
/// `Breakpoint` and `Source`: those name their members in snake case
/// (`instruction_reference`, `source_reference`), which DAP does not.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Breakpoint {
    pub id: i64,
    pub verified: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction_reference: Option<String>,
}

impl Breakpoint {
    /// A breakpoint not set (yet) at `line`, and why.
    pub fn unverified(id: i64, line: i64, message: String) -> Breakpoint {
        Breakpoint {
            id,
            line: Some(line),
            message: Some(message),
            ..Default::default()
        }
    }
}

/// The reply of the `set...Breakpoints` requests.
#[derive(Debug, Clone, Serialize)]
pub struct BreakpointsReply {
    pub breakpoints: Vec<Breakpoint>,
}

/// A source file as DAP names it: a `sourceReference` (and where it comes
/// from) when it is not on this host.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    pub name: String,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_reference: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

impl Source {
    /// A file of this host, named by its last component.
    pub fn local(path: &str) -> Source {
        Source {
            name: path.rsplit('/').next().unwrap_or(path).to_string(),
            path: path.to_string(),
            source_reference: None,
            origin: None,
        }
    }
}

/// `loadedSources`' reply (of [`Source`]s).
#[derive(Debug, Clone, Serialize)]
pub struct SourcesReply {
    pub sources: Vec<Source>,
}

/// `gotoTargets`' reply, with how many times the line ran in all (DAP's
/// has the targets alone).
#[derive(Debug, Clone, Serialize)]
pub struct GotoTargetsReply {
    pub targets: Vec<dap::types::GotoTarget>,
    pub total: usize,
}

/// An instruction of `disassemble`'s reply: the `dap` crate's
/// `DisassembledInstruction` has no `presentationHint`.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Instruction {
    pub address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instruction_bytes: Option<String>,
    pub instruction: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Source>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
    /// `invalid` where there is no instruction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presentation_hint: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
pub struct InstructionsReply {
    pub instructions: Vec<Instruction>,
}

/// `rewind/goto`'s reply.
#[derive(Debug, Clone, Serialize)]
pub struct GotoReply {
    pub step: u64,
}

#[cfg(test)]
mod tests {
    use super::page;

    #[test]
    fn a_page_is_what_start_and_count_ask_for() {
        let all = || 0..5;
        assert_eq!(page(all(), None, None), [0, 1, 2, 3, 4]);
        assert_eq!(page(all(), Some(1), Some(2)), [1, 2]);
        assert_eq!(page(all(), Some(3), Some(10)), [3, 4]);
        assert_eq!(page(all(), Some(9), None), Vec::<i32>::new());
        // Zero or a negative count is all; a negative start is the first.
        assert_eq!(page(all(), Some(2), Some(0)), [2, 3, 4]);
        assert_eq!(page(all(), Some(-3), Some(-1)), [0, 1, 2, 3, 4]);
    }
}
