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

/// Rounds before the widening entries (memory points, `widening`) join.
const WIDEN_AFTER: u64 = 2;

/// Whether `p` is a widening entry's points: memory points when the
/// check's own are race-directed. Every shared access is a point there, so
/// a race the learned pages miss is still reached (a page a thread handed
/// over by a release it made after it took the page), at what the program
/// shares: pbzip2's memory-point schedule 0 is a minute. So their schedule
/// 0 is recorded only once the cheap entries' first `WIDEN_AFTER` rounds
/// found nothing, within what is left of the budget.
fn widening(spec: &CheckSpec, p: Points) -> bool {
    p == Points::Memory && spec.base.manifest.points == Points::Races
}

/// The points the portfolio's runs use: the check's own first (its
/// schedule 0 is the report's), then each entry's in order.
pub(super) fn modes(spec: &CheckSpec) -> Vec<Points> {
    let mut modes = vec![spec.base.manifest.points];
    for e in &spec.portfolio {
        if !modes.contains(&e.points) {
            modes.push(e.points);
        }
    }
    // The widening points last: their schedule 0 comes after the others'.
    modes.sort_by_key(|p| widening(spec, *p));
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
            if *p != Points::Races {
                // Learned pages (a merge's schedule 0 carries them) are race-directed points' alone.
                s.base.manifest.race_pages.clear();
            }
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
/// and the check stops at the first violation. Without `widened` (the
/// widening points' schedule 0 not recorded yet), the rounds before the
/// widening entries join, which are the whole plan's first schedules.
pub(super) fn plan_after(
    spec: &CheckSpec,
    modes: &[Points],
    checkers: &[Checker],
    bases: &[Tried],
    widened: bool,
) -> Vec<Planned> {
    if bases.iter().any(|b| b.violated()) && !spec.all {
        Vec::new()
    } else {
        plan(spec, modes, checkers, widened)
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
    let wide = modes.iter().position(|p| widening(spec, *p));
    progress.phase("schedule 0");
    let mut bases = Vec::new();
    for (i, c) in checkers
        .iter_mut()
        .enumerate()
        .take(wide.unwrap_or(modes.len()))
    {
        let t = c.schedule0(&base_label(&modes, i))?;
        progress.tried(&t, 0, 0);
        bases.push(t);
    }
    let first = plan_after(spec, &modes, &checkers, &bases, wide.is_none());
    progress.phase("schedules");
    let (mut tried, mut late) = try_plan(spec, &checkers, &first, deadline, progress, 0)?;
    let mut planned = spec.schedules.max(first.len() as u64);
    let found = !spec.all && tried.iter().any(|t| t.violated());
    let room = (first.len() as u64) < spec.schedules && !found && !late;
    if let Some(w) = wide.filter(|_| room) {
        match widen(spec, &modes, &mut checkers[w..], w, deadline, progress)? {
            Some(more) => bases.extend(more),
            None => late = true,
        }
        if !late {
            let all = plan_after(spec, &modes, &checkers, &bases, true);
            let rest = all.get(first.len()..).unwrap_or_default();
            progress.phase("schedules");
            let before = first.len() as u64;
            let (more, cut) = try_plan(spec, &checkers, rest, deadline, progress, before)?;
            tried.extend(more);
            late = cut;
            planned = all.len() as u64;
        }
    }
    let out_of_budget = late.then(|| jobs::out_of_budget(spec, tried.len(), planned));
    report(
        spec,
        &modes,
        &checkers,
        bases,
        tried,
        out_of_budget,
        progress,
    )
}

/// Records the widening points' schedule 0s (`checkers`, modes `from..`),
/// each within what is left of the budget: None when it ran out.
fn widen(
    spec: &CheckSpec,
    modes: &[Points],
    checkers: &mut [Checker],
    from: usize,
    deadline: Option<Instant>,
    progress: &mut dyn Progress,
) -> Result<Option<Vec<Tried>>, CheckError> {
    let mut out = Vec::new();
    for (i, c) in checkers.iter_mut().enumerate() {
        if progress.stopped() {
            return Err(CheckError::Stopped);
        }
        let mut limits = spec.limits.clone();
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            limits.timeout = Some(limits.timeout.map_or(left, |t| t.min(left)));
        }
        progress.phase(&format!("schedule 0 ({})", points_name(modes[from + i])));
        let t = c.schedule0_within(&base_label(modes, from + i), &limits)?;
        progress.tried(&t, 0, 0);
        let cut = deadline.is_some() && t.status == crate::run::ExitStatus::TimedOut;
        out.push(t);
        if cut {
            return Ok(None);
        }
    }
    Ok(Some(out))
}

/// Tries `plan` in order (`jobs::try_each`), its schedules counted after
/// `before` others.
fn try_plan(
    spec: &CheckSpec,
    checkers: &[Checker],
    plan: &[Planned],
    deadline: Option<Instant>,
    progress: &mut dyn Progress,
    before: u64,
) -> Result<(Vec<Tried>, bool), CheckError> {
    let all = spec.all;
    let stop = |t: &Tried| !all && t.violated();
    let one = |i: usize| try_planned(checkers, &plan[i]);
    let mut after = After {
        inner: progress,
        before,
        total: spec.schedules,
    };
    jobs::try_each(plan.len(), spec.jobs, deadline, &mut after, &stop, &one)
}

/// Progress of schedules counted after `before` others, of `total`.
struct After<'a> {
    inner: &'a mut dyn Progress,
    before: u64,
    total: u64,
}

impl Progress for After<'_> {
    fn phase(&mut self, what: &str) {
        self.inner.phase(what)
    }
    fn tried(&mut self, t: &Tried, done: u64, _: u64) {
        self.inner.tried(t, self.before + done, self.total)
    }
}

/// The report of the schedule 0s and the schedules tried after them,
/// narrowed: what `run` gives, and a merge of its shards.
pub(super) fn report(
    spec: &CheckSpec,
    modes: &[Points],
    checkers: &[Checker],
    bases: Vec<Tried>,
    tried: Vec<Tried>,
    out_of_budget: Option<String>,
    progress: &mut dyn Progress,
) -> Result<Report, CheckError> {
    let bases = used(spec, modes, checkers, bases, &tried);
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
        learned: checkers[0].learned.clone(),
    };
    report.never_held = never_held(&report);
    let mut report = checkers[mode].finish(report, progress)?;
    for c in checkers {
        c.hand_over(&mut report);
    }
    Ok(report)
}

/// The schedule 0s a report lists: a widening one only when the
/// schedules tried went past the rounds before the widening (or it
/// violates), so that a check that stopped before them reports the same
/// as a merge of shards, which record every schedule 0 first.
pub(super) fn used(
    spec: &CheckSpec,
    modes: &[Points],
    checkers: &[Checker],
    bases: Vec<Tried>,
    tried: &[Tried],
) -> Vec<Tried> {
    let widened = tried.len() > plan(spec, modes, checkers, false).len();
    bases
        .into_iter()
        .zip(modes)
        .filter(|(b, p)| !widening(spec, **p) || b.violated() || widened)
        .map(|(b, _)| b)
        .collect()
}

/// `used`'s schedule 0s, where the widening ones start among them, and how
/// many schedules come before the widening rounds.
pub(super) fn shown(
    spec: &CheckSpec,
    modes: &[Points],
    checkers: &[Checker],
    bases: Vec<Tried>,
    tried: &[Tried],
) -> (Vec<Tried>, usize, usize) {
    let wide = modes.iter().take_while(|p| !widening(spec, **p)).count();
    let prefix = plan(spec, modes, checkers, false).len();
    (used(spec, modes, checkers, bases, tried), wide, prefix)
}

/// The portfolio's schedules in the order they are tried, `spec.schedules`
/// of them at most: rounds, each entry taking its weight of schedules a
/// round (the dearest schedule 0's steps over its own). The widening
/// entries join after `WIDEN_AFTER` rounds, weighed with the others from
/// then on; the rounds before them are weighed without them, so the plan
/// without `widened` is the first schedules of the plan with it.
pub(super) fn plan(
    spec: &CheckSpec,
    modes: &[Points],
    checkers: &[Checker],
    widened: bool,
) -> Vec<Planned> {
    let steps: Vec<u64> = checkers.iter().map(|c| c.base_steps.max(1)).collect();
    let cheap = |m: &usize| !widening(spec, modes[*m]);
    let dearest = |wide: bool| {
        let modes = (0..modes.len()).filter(|m| wide || cheap(m));
        modes.map(|m| steps[m]).max().unwrap_or(1)
    };
    let n = spec.schedules;
    let mut lists: Vec<(usize, Entry, std::vec::IntoIter<Candidate>)> = spec
        .portfolio
        .iter()
        .map(|e| (modes.iter().position(|p| *p == e.points).unwrap_or(0), *e))
        .filter(|(m, _)| widened || cheap(m))
        .map(|(m, e)| {
            let (cands, _) = checkers[m].candidates_of(e.strategy, e.depth, n, steps[m]);
            (m, e, cands.into_iter())
        })
        .collect();
    let mut out: Vec<Planned> = Vec::new();
    for round in 0.. {
        let wide = round >= WIDEN_AFTER;
        if wide && !widened {
            break;
        }
        let most = dearest(wide);
        let before = out.len();
        for (m, e, list) in lists.iter_mut().filter(|(m, ..)| wide || cheap(m)) {
            let weight = (most / steps[*m]).clamp(1, MAX_WEIGHT);
            for c in list.take(weight as usize) {
                if out.len() as u64 >= n {
                    return out;
                }
                out.push((*m, c, *e));
            }
        }
        if out.len() == before && wide {
            break;
        }
    }
    out
}
