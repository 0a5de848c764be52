//! The default search: a portfolio of strategies and scheduling points,
//! tried in turn within a budget.
//!
//! No one strategy finds every race soonest (docs/design.md, "Search
//! strategies"): random finds most of the examples first, PCT and `bounded`
//! find a check-then-act that random misses in 64 schedules, and a race
//! with a system call in its window is found at a fraction of the cost
//! with system-call points. So a check records schedule 0 once per points
//! it uses, then takes schedules from every entry in rounds, an entry on
//! cheaper points taking more of them a round (as many as its schedule 0
//! has fewer steps, up to `MAX_WEIGHT`): a cheap strategy's early
//! schedules come before an expensive one's late ones, and a find that
//! needs one strategy is not lost behind another's budget. The order is a
//! function of the check's inputs alone (schedule 0's step counts, not its
//! wall time), so the same check finds the same first violation.

use super::{jobs, never_held, Candidate, CheckError, CheckSpec, Checker, Entry, Progress};
use super::{points_name, Report, Tried};
use crate::run::Points;
use crate::store::Store;
use std::time::Instant;

/// The most schedules an entry on cheap points takes a round for one of
/// the dearest entry's.
const MAX_WEIGHT: u64 = 8;

/// The points the portfolio's runs use: the check's own first (its
/// schedule 0 is the report's), then each entry's in order.
pub(super) fn modes(spec: &CheckSpec) -> Vec<Points> {
    let mut modes = vec![spec.base.manifest.points];
    for e in &spec.portfolio {
        if !modes.contains(&e.points) {
            modes.push(e.points);
        }
    }
    modes
}

/// One schedule of the portfolio: which schedule 0 it perturbs (an index
/// into the modes), the candidate, and the entry it comes from.
pub(super) type Planned = (usize, Candidate, Entry);

/// The check each of `modes` records its schedules with: `spec` on those
/// points, alone.
pub(super) fn mode_specs(spec: &CheckSpec, modes: &[Points]) -> Vec<CheckSpec> {
    modes
        .iter()
        .map(|p| {
            let mut s = spec.clone();
            s.base.manifest.points = *p;
            s.portfolio.clear();
            s
        })
        .collect()
}

/// Schedule 0 of mode `m`'s label: `schedule   0 (syscall points)`.
pub(super) fn base_label(modes: &[Points], m: usize) -> String {
    match m {
        0 => "schedule   0".to_string(),
        _ => format!("schedule   0 ({})", points_name(modes[m])),
    }
}

/// Runs one planned schedule and judges it.
pub(super) fn try_planned(checkers: &[Checker], planned: &Planned) -> Result<Tried, CheckError> {
    let (m, c, e) = planned;
    let mut t = checkers[*m].try_one(c)?;
    t.label = planned_label(c, e);
    t.entry = Some(*e);
    Ok(t)
}

/// `schedule   5 (random, syscall points)`.
pub(super) fn planned_label(c: &Candidate, e: &Entry) -> String {
    format!("{} ({e})", c.label())
}

/// The plan to try after the schedule 0s: none when one of them violates
/// and the check stops at the first violation.
pub(super) fn plan_after(
    spec: &CheckSpec,
    modes: &[Points],
    checkers: &[Checker],
    bases: &[Tried],
) -> Vec<Planned> {
    if bases.iter().any(|b| b.violated()) && !spec.all {
        Vec::new()
    } else {
        plan(spec, modes, checkers)
    }
}

pub fn run(
    spec: &CheckSpec,
    store: &Store,
    progress: &mut dyn Progress,
) -> Result<Report, CheckError> {
    let deadline = spec.budget.map(|b| Instant::now() + b);
    let modes = modes(spec);
    let specs = mode_specs(spec, &modes);
    let mut checkers: Vec<Checker> = specs.iter().map(|s| Checker::new(s, store)).collect();
    progress.phase("schedule 0");
    let mut bases = Vec::new();
    for (i, c) in checkers.iter_mut().enumerate() {
        let t = c.schedule0(&base_label(&modes, i))?;
        progress.tried(&t, 0, 0);
        bases.push(t);
    }
    let plan = plan_after(spec, &modes, &checkers, &bases);
    progress.phase("schedules");
    let all = spec.all;
    let stop = |t: &Tried| !all && t.violated();
    let one = |i: usize| try_planned(&checkers, &plan[i]);
    let (tried, stopped) = jobs::try_each(plan.len(), spec.jobs, deadline, progress, &stop, &one)?;
    let out_of_budget = stopped.then(|| jobs::out_of_budget(spec, tried.len(), plan.len() as u64));
    report(&modes, &checkers, bases, tried, out_of_budget, progress)
}

/// The report of the schedule 0s and the schedules tried after them,
/// narrowed: what `run` gives, and a merge of its shards.
pub(super) fn report(
    modes: &[Points],
    checkers: &[Checker],
    bases: Vec<Tried>,
    tried: Vec<Tried>,
    out_of_budget: Option<String>,
    progress: &mut dyn Progress,
) -> Result<Report, CheckError> {
    // The report's schedule 0 is the one the first violation perturbed.
    let mode = tried
        .iter()
        .find(|t| t.violated())
        .and_then(|t| t.entry)
        .and_then(|e| modes.iter().position(|p| *p == e.points))
        .unwrap_or(0);
    let mut properties = checkers[0].properties.clone();
    for c in &checkers[1..] {
        for p in &c.properties {
            if !properties.contains(p) {
                properties.push(p.clone());
            }
        }
    }
    let mut report = Report {
        base: bases[mode].clone(),
        bases,
        tried,
        exhausted: None,
        out_of_budget,
        made: Vec::new(),
        narrowed: None,
        properties,
        never_held: Vec::new(),
        warnings: Vec::new(),
        learned: None,
    };
    report.never_held = never_held(&report);
    let mut report = checkers[mode].finish(report, progress)?;
    for c in checkers {
        c.hand_over(&mut report);
    }
    Ok(report)
}

/// The portfolio's schedules in the order they are tried, `spec.schedules`
/// of them at most: rounds, each entry taking its weight of schedules a
/// round (schedule 0's steps with the dearest points over its own).
pub(super) fn plan(spec: &CheckSpec, modes: &[Points], checkers: &[Checker]) -> Vec<Planned> {
    let steps: Vec<u64> = checkers.iter().map(|c| c.base_steps.max(1)).collect();
    let most = steps.iter().copied().max().unwrap_or(1);
    let n = spec.schedules;
    let mut lists: Vec<(usize, Entry, std::vec::IntoIter<Candidate>, u64)> = spec
        .portfolio
        .iter()
        .map(|e| {
            let m = modes.iter().position(|p| *p == e.points).unwrap_or(0);
            let (cands, _) = checkers[m].candidates_of(e.strategy, e.depth, n, steps[m]);
            let weight = (most / steps[m]).clamp(1, MAX_WEIGHT);
            (m, *e, cands.into_iter(), weight)
        })
        .collect();
    let mut out: Vec<Planned> = Vec::new();
    loop {
        let before = out.len();
        for (m, e, list, weight) in lists.iter_mut() {
            for c in list.take(*weight as usize) {
                if out.len() as u64 >= n {
                    return out;
                }
                out.push((*m, c, *e));
            }
        }
        if out.len() == before {
            return out;
        }
    }
}
