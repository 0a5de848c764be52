//! What a person calls the two runs a check compares, and the sentence that
//! says what the deciding step does.
//!
//! "Passing" must not mean "ended like schedule 0": when schedule 0 is itself
//! the bad run (`hash-order` under `--seeds`), that inverts the truth. Of the
//! two runs, the one that exits 0 is passing when exactly one does; else the
//! one that violates no property other than `ends-differently`, when exactly
//! one does; else neither is called passing: they are `schedule 0` (or
//! `baseline`, when the run without the deciding step is not schedule 0's)
//! and `differs`.

use super::property::Property;
use super::Tried;
use crate::record::switches::Switch;
use crate::run::{Event, EventKind, ExitStatus, Perturbation, Perturbed};

/// What a run of the compared pair is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Passing,
    Failing,
    /// Schedule 0's own run, when neither run can be called passing.
    #[serde(rename = "schedule 0")]
    Schedule0,
    /// The run without the deciding step, when it is not schedule 0's and
    /// neither run can be called passing.
    Baseline,
    /// The run with the deciding step, when neither run can be called passing.
    Differs,
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Label::Passing => "passing",
            Label::Failing => "failing",
            Label::Schedule0 => "schedule 0",
            Label::Baseline => "baseline",
            Label::Differs => "differs",
        })
    }
}

/// What is known of one run of the pair.
#[derive(Debug, Clone, Copy)]
pub struct Judged {
    pub status: ExitStatus,
    /// It violates a property other than `ends-differently`. None when the
    /// properties are not known (`rewind show`).
    pub other_violation: Option<bool>,
}

impl Judged {
    pub fn of(t: &Tried) -> Judged {
        let ends = Property::EndsDifferently.name();
        Judged {
            status: t.status,
            other_violation: Some(t.violations.iter().any(|(p, _)| *p != ends)),
        }
    }
}

/// The labels of (the run without the deciding change, the run with it).
/// `without_is_schedule_0`: the run without it is schedule 0's.
pub fn labels(without: Judged, with: Judged, without_is_schedule_0: bool) -> (Label, Label) {
    let ok = |j: Judged| j.status == ExitStatus::Exited(0);
    let clean = |j: Judged| j.other_violation.map(|v| !v);
    let passing_is_with = if ok(without) != ok(with) {
        Some(ok(with))
    } else {
        match (clean(without), clean(with)) {
            (Some(a), Some(b)) if a != b => Some(b),
            _ => None,
        }
    };
    match passing_is_with {
        Some(true) => (Label::Failing, Label::Passing),
        Some(false) => (Label::Passing, Label::Failing),
        None if without_is_schedule_0 => (Label::Schedule0, Label::Differs),
        None => (Label::Baseline, Label::Differs),
    }
}

/// What the first violating run of a report is called when it was not
/// narrowed: by the same rule as a narrowed pair, against schedule 0.
pub fn unnarrowed(r: &super::Report, bad: &Tried) -> Label {
    if r.bases.iter().any(|b| b.id == bad.id) {
        // Schedule 0 itself violates a property (not ends-differently).
        return Label::Failing;
    }
    labels(Judged::of(&r.base), Judged::of(bad), true).1
}

/// What the run with the deciding change does, relative to `other` (the
/// run without it: `schedule 0` or `the run without it`), after `makes the
/// run` (or `make the run`): `violate no-crash`, `pass: it ends exited:0
/// where schedule 0 ends exited:1`.
pub fn effect(
    property: &str,
    other: &str,
    without: ExitStatus,
    with: (Label, ExitStatus),
) -> String {
    match with.0 {
        Label::Passing => format!("pass: it ends {} where {other} ends {without}", with.1),
        Label::Failing => format!("violate {property}"),
        _ => format!(
            "end {} where {other} ends {without} (neither passes; it violates {property})",
            with.1
        ),
    }
}

/// What the thread that made `step` did there, from the events of the run:
/// `after its write` (a system call), `before its read of 0x4c6a10
/// (counter, in increment)` (a memory point stops the thread before its
/// access completes); None when no event of that step says.
pub fn what_it_did(events: &[Event], step: u64, tid: u32, syms: &Names) -> Option<String> {
    let at: Vec<&Event> = events
        .iter()
        .filter(|e| e.step == step && e.tid == tid)
        .collect();
    at.iter().rev().find_map(|e| match &e.kind {
        EventKind::Syscall { name, .. } => Some(format!("after its {name}")),
        EventKind::Access {
            pc, addr, access, ..
        } => Some(format!(
            "before {}",
            self::access(&access.to_string(), *addr, *pc, syms)
        )),
        EventKind::Sdk { .. } => Some("after its SDK call".to_string()),
        _ => None,
    })
}

/// The checked program's names: functions (the `symbols` crate, ELF symbol
/// table alone, as recorded text uses) and data objects (variables).
#[derive(Default)]
pub struct Names {
    module: Option<symbols::Module>,
    /// (start, size, name) of the ELF's data objects, sorted by start.
    objects: Vec<(u64, u64, String)>,
    bias: u64,
}

impl Names {
    /// From the program's ELF bytes, loaded at `bias`.
    pub fn from_elf(bytes: &[u8], bias: u64) -> Names {
        use object::{Object, ObjectSymbol, SymbolKind};
        let mut objects: Vec<(u64, u64, String)> = object::File::parse(bytes)
            .map(|f| {
                f.symbols()
                    .filter(|s| s.kind() == SymbolKind::Data && s.address() != 0)
                    .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        objects.sort();
        Names {
            module: symbols::Module::symbols_only(bytes).ok(),
            objects,
            bias,
        }
    }

    /// The function covering `pc`.
    pub fn function_at(&self, pc: u64) -> Option<String> {
        let (name, _) = self.module.as_ref()?.symbol(pc.wrapping_sub(self.bias))?;
        Some(name)
    }

    /// `counter`, `pool+0x8`: the variable covering `addr`, and the offset into it.
    pub fn variable(&self, addr: u64) -> Option<String> {
        match self.object_at(addr)? {
            (name, 0) => Some(name.to_string()),
            (name, off) => Some(format!("{name}+{off:#x}")),
        }
    }

    /// The variable covering `addr`, and the offset into it.
    pub fn object_at(&self, addr: u64) -> Option<(&str, u64)> {
        let a = addr.wrapping_sub(self.bias);
        let i = self.objects.partition_point(|o| o.0 <= a);
        let (start, size, name) = &self.objects[i.checked_sub(1)?];
        (a < start + (*size).max(1)).then(|| (name.as_str(), a - start))
    }
}

/// A memory access told for a person: `its read of 0x4c6a10 (counter, in
/// increment)`; the variable and the function where the symbol table names
/// them.
pub fn access(what: &str, addr: u64, pc: u64, syms: &Names) -> String {
    let var = syms.variable(addr);
    let func = syms.function_at(pc).map(|f| format!("in {f}"));
    let within: Vec<String> = var.into_iter().chain(func).collect();
    if within.is_empty() {
        format!("its {what} of {addr:#x}")
    } else {
        format!("its {what} of {addr:#x} ({})", within.join(", "))
    }
}

/// The thread that made `step`, as (pid, tid): the last switch at or before it.
pub fn thread_at(switches: &[Switch], step: u64) -> Option<(u32, u32)> {
    switches
        .iter()
        .rev()
        .find(|s| s.step <= step)
        .map(|s| (s.pid, s.tid))
}

/// `switching away from thread 1000/1002 after its write`: what the
/// deciding perturbation does, told from the run it was applied to.
pub fn deciding(
    p: &Perturbed,
    events: &[Event],
    thread: Option<(u32, u32)>,
    syms: &Names,
) -> String {
    let Some((pid, tid)) = thread else {
        return format!("{} there", p.what);
    };
    let after = what_it_did(events, p.step, tid, syms)
        .map(|d| format!(" {d}"))
        .unwrap_or_default();
    match p.what {
        Perturbation::Reschedule => format!("switching away from thread {pid}/{tid}{after}"),
        Perturbation::Stall { ns } => {
            format!("stalling thread {pid}/{tid} for {}us{after}", ns / 1000)
        }
        Perturbation::Switch { tid: to } => {
            format!("switching from thread {pid}/{tid} to thread {pid}/{to}{after}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(code: i32, other: bool) -> Judged {
        Judged {
            status: ExitStatus::Exited(code),
            other_violation: Some(other),
        }
    }

    #[test]
    fn the_run_that_exits_0_is_passing() {
        assert_eq!(
            labels(j(0, false), j(2, false), true),
            (Label::Passing, Label::Failing)
        );
        // Schedule 0 is the bad run: the words follow the truth.
        assert_eq!(
            labels(j(1, false), j(0, false), true),
            (Label::Failing, Label::Passing)
        );
    }

    #[test]
    fn else_the_one_without_another_violation() {
        // Both exit 0; an SDK assertion fails in one.
        assert_eq!(
            labels(j(0, false), j(0, true), true),
            (Label::Passing, Label::Failing)
        );
    }

    #[test]
    fn else_neither_is_called_passing() {
        assert_eq!(
            labels(j(1, false), j(3, false), true),
            (Label::Schedule0, Label::Differs)
        );
        assert_eq!(
            labels(j(1, false), j(3, false), false),
            (Label::Baseline, Label::Differs)
        );
        let unknown = Judged {
            status: ExitStatus::Exited(0),
            other_violation: None,
        };
        assert_eq!(
            labels(unknown, unknown, true),
            (Label::Schedule0, Label::Differs)
        );
    }

    #[test]
    fn effects() {
        let ok = ExitStatus::Exited(0);
        let bad = ExitStatus::Exited(1);
        assert_eq!(
            effect("p", "schedule 0", ok, (Label::Failing, bad)),
            "violate p"
        );
        assert_eq!(
            effect("p", "schedule 0", bad, (Label::Passing, ok)),
            "pass: it ends exited:0 where schedule 0 ends exited:1"
        );
        assert_eq!(
            effect(
                "p",
                "schedule 0",
                bad,
                (Label::Differs, ExitStatus::Exited(3))
            ),
            "end exited:3 where schedule 0 ends exited:1 (neither passes; it violates p)"
        );
    }
}
