//! Which lines threads stood on, step by step, in one run: coverage after
//! the fact, with no instrumentation. One pass over the run
//! (`vmm::inspect::each_exit`) notes, at every exit, the workspace line of
//! the thread that made it; inlay hints and hover read the result.

use super::findings::{pick, Frame, Workspace};
use std::collections::BTreeMap;

/// Consecutive steps made by one thread on one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub first: u64,
    pub last: u64,
    pub tid: u32,
}

/// Per file (as debug info names it), per 1-based line: spans in step order.
/// A thread stays on a line for many steps (a loop's call), so spans keep
/// a long run small.
pub type Lines = BTreeMap<String, BTreeMap<u32, Vec<Span>>>;

/// Steps and threads shown in a hint, at most.
const SHOWN: usize = 4;

/// The steps of some spans, in order.
pub fn steps(at: &[Span]) -> impl Iterator<Item = u64> + '_ {
    at.iter().flat_map(|s| s.first..=s.last)
}

/// `36, 44 · 1001`: the steps, then the threads; long lists are shortened
/// (`12, 18, 24, 30, … (+8) · 1001, 1002`).
pub fn label(at: &[Span]) -> String {
    let n: u64 = at.iter().map(|s| s.last - s.first + 1).sum();
    let mut tids: Vec<u32> = at.iter().map(|s| s.tid).collect();
    tids.sort_unstable();
    tids.dedup();
    let list = |shown: Vec<String>, n: u64| {
        let mut out = shown.join(", ");
        if n > SHOWN as u64 {
            out.push_str(&format!(", … (+{})", n - SHOWN as u64));
        }
        out
    };
    format!(
        "{} · {}",
        list(steps(at).take(SHOWN).map(|s| s.to_string()).collect(), n),
        list(
            tids.iter().take(SHOWN).map(u32::to_string).collect(),
            tids.len() as u64
        )
    )
}

/// Adds one exit: the thread `tid` made step `step` with these frames.
pub fn note(lines: &mut Lines, frames: &[Frame], ws: &dyn Workspace, step: u64, tid: u32) {
    let Some(f) = pick(frames, ws) else { return };
    if !lines.contains_key(&f.file) {
        lines.insert(f.file.clone(), BTreeMap::new());
    }
    let spans = lines
        .get_mut(&f.file)
        .expect("just inserted")
        .entry(f.line)
        .or_default();
    match spans.last_mut() {
        Some(s) if s.tid == tid && s.last + 1 == step => s.last = step,
        _ => spans.push(Span {
            first: step,
            last: step,
            tid,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_steps_then_threads_and_shorten_long_lists() {
        let span = |first, last, tid| Span { first, last, tid };
        assert_eq!(
            label(&[span(36, 36, 1001), span(44, 44, 1001)]),
            "36, 44 · 1001"
        );
        let many: Vec<Span> = (0..10)
            .map(|i| span(i * 6, i * 6, 1001 + (i % 2) as u32))
            .collect();
        assert_eq!(label(&many), "0, 6, 12, 18, … (+6) · 1001, 1002");
        assert_eq!(
            label(&[span(100, 1099, 1002)]),
            "100, 101, 102, 103, … (+996) · 1002"
        );
    }

    #[test]
    fn exits_outside_the_workspace_are_not_noted() {
        let ws = |f: &str| f.starts_with("/ws/");
        let mut lines = Lines::new();
        let f = |file: &str, line| Frame {
            file: file.into(),
            line,
            function: None,
        };
        note(
            &mut lines,
            &[f("/usr/x.c", 3), f("/ws/bank.c", 26)],
            &ws,
            36,
            1001,
        );
        note(&mut lines, &[f("/usr/x.c", 3)], &ws, 37, 1002);
        // A thread's consecutive steps on one line are one span.
        for step in 38..=40 {
            note(&mut lines, &[f("/ws/bank.c", 26)], &ws, step, 1002);
        }
        let span = |first, last, tid| Span { first, last, tid };
        assert_eq!(
            lines["/ws/bank.c"][&26],
            vec![span(36, 36, 1001), span(38, 40, 1002)]
        );
        assert_eq!(lines.len(), 1);
    }
}
