//! Narrowing a violating schedule to the perturbation that decides it:
//! each applied perturbation alone first (a single step usually decides a
//! race), then delta debugging (ddmin) for the smallest set.

use super::label::{self, Judged, Label};
use super::{Candidate, CheckError, Checker, Narrowed, Side, Tried};
use crate::record::diff::first_divergence;
use crate::record::{Discard, Event, EventKind, Perturbation, Perturbed};
use crate::session::{self, Limits};
use std::time::Instant;

/// Shared events shown before the first difference, and events of each side after it.
const CONTEXT: usize = 3;
/// How far before a deciding set's first step a single reschedule is tried.
const NEAR: u64 = 16;
/// Single reschedules tried at schedule 0's steps of the same accesses.
const SAME_ACCESS_TRIES: usize = 32;

struct Search<'c, 'a> {
    checker: &'c Checker<'a>,
    property: String,
    runs: u64,
}

impl Search<'_, '_> {
    /// The run with exactly these perturbations, if it violates the property.
    fn fails(&mut self, set: &[Perturbed]) -> Result<Option<Tried>, CheckError> {
        self.runs += 1;
        let t = self.checker.try_one(&Candidate::Explicit(set.to_vec()))?;
        let hit = t.violations.iter().any(|(p, _)| *p == self.property);
        Ok(hit.then_some(t))
    }

    /// When several perturbations together decide it, one reschedule at a
    /// nearby step often does too (the schedule's own perturbations are only
    /// where its dice fell): tries each step from the set's last back to
    /// `NEAR` steps before its first, latest first, then the `NEAR` steps
    /// after its last (a PCT schedule's switches lead threads to where one
    /// reschedule of the policy's order would decide it later).
    fn single_near(
        &mut self,
        set: &[Perturbed],
    ) -> Result<Option<(Vec<Perturbed>, Tried)>, CheckError> {
        let (Some(first), Some(last)) = (set.first(), set.last()) else {
            return Ok(None);
        };
        let lowest = first.step.saturating_sub(NEAR).max(1);
        let after = last.step + 1..=last.step + NEAR;
        for step in (lowest..=last.step).rev().chain(after) {
            let one = Perturbed {
                step,
                what: Perturbation::Reschedule,
            };
            if set.contains(&one) {
                continue;
            }
            if let Some(t) = self.fails(&[one])? {
                return Ok(Some((vec![one], t)));
            }
        }
        Ok(None)
    }

    /// When several perturbations together decide it and no reschedule near
    /// them does alone: the accesses they interrupted (memory points) happen
    /// at other steps in schedule 0, where one reschedule may decide it.
    /// Tries a single reschedule at each step where schedule 0 makes an
    /// access at the same instruction as one the set interrupted (its last
    /// first), at most `SAME_ACCESS_TRIES` of them.
    fn same_access(
        &mut self,
        set: &[Perturbed],
        failing: &Tried,
    ) -> Result<Option<(Vec<Perturbed>, Tried)>, CheckError> {
        let events = load(self.checker, &failing.id)?;
        let switches = self.checker.store.resolve(&failing.id)?.switches()?;
        let base_id = self
            .checker
            .inputs_for(&Candidate::Explicit(Vec::new()))
            .manifest
            .id();
        let Ok(base) = load(self.checker, &base_id) else {
            return Ok(None);
        };
        let mut tried = 0;
        for p in set.iter().rev() {
            let Some((_, tid)) = label::thread_at(&switches, p.step) else {
                continue;
            };
            let pc = events.iter().find_map(|e| match e.kind {
                EventKind::Access { pc, .. } if e.step == p.step && e.tid == tid => Some(pc),
                _ => None,
            });
            let Some(pc) = pc else { continue };
            let steps = base.iter().filter_map(|e| match e.kind {
                EventKind::Access { pc: at, .. } if at == pc => Some(e.step),
                _ => None,
            });
            for step in steps {
                if tried == SAME_ACCESS_TRIES {
                    return Ok(None);
                }
                tried += 1;
                let one = Perturbed {
                    step,
                    what: Perturbation::Reschedule,
                };
                if let Some(t) = self.fails(&[one])? {
                    return Ok(Some((vec![one], t)));
                }
            }
        }
        Ok(None)
    }

    /// Zeller's ddmin: a 1-minimal subset of `set` that still fails.
    fn ddmin(&mut self, mut set: Vec<Perturbed>) -> Result<Vec<Perturbed>, CheckError> {
        let mut n = 2usize;
        while set.len() >= 2 {
            let chunk = set.len().div_ceil(n);
            let parts: Vec<Vec<Perturbed>> = set.chunks(chunk).map(|c| c.to_vec()).collect();
            let mut reduced = false;
            for p in &parts {
                if self.fails(p)?.is_some() {
                    set = p.clone();
                    n = 2;
                    reduced = true;
                    break;
                }
            }
            if !reduced && parts.len() > 2 {
                for i in 0..parts.len() {
                    let rest: Vec<Perturbed> = parts
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .flat_map(|(_, p)| p.iter().copied())
                        .collect();
                    if self.fails(&rest)?.is_some() {
                        set = rest;
                        n = (n - 1).max(2);
                        reduced = true;
                        break;
                    }
                }
            }
            if !reduced {
                if n >= set.len() {
                    break;
                }
                n = (2 * n).min(set.len());
            }
        }
        Ok(set)
    }
}

pub fn narrow(checker: &Checker, bad: &Tried) -> Result<Narrowed, CheckError> {
    let started = Instant::now();
    let property = bad.violations[0].0.clone();
    let mut s = Search {
        checker,
        property: property.clone(),
        runs: 0,
    };
    if bad.perturbed.is_empty() {
        // No schedule perturbation: another seed decides it. Compare with schedule 0.
        let base = checker.try_one(&Candidate::Explicit(Vec::new()))?;
        let divergence =
            first_divergence(&load(checker, &base.id)?, &load(checker, &bad.id)?, CONTEXT);
        let (without, with) = sides(&base, bad, true);
        let who = bad.label.trim();
        let sentence = match with.label {
            Label::Failing => format!(
                "{who} decides it: the run with it violates {property} where schedule 0 does not"
            ),
            Label::Passing => format!(
                "{who} decides it: the run with it passes: it ends {} where schedule 0 ends {}",
                with.status, without.status
            ),
            _ => format!(
                "{who} decides it: the run with it ends {} where schedule 0 ends {} (neither passes; it violates {property})",
                with.status, without.status
            ),
        };
        return Ok(Narrowed {
            deciding: Vec::new(),
            property,
            without,
            with,
            sentence,
            divergence,
            where_: Vec::new(),
            runs: 1,
            wall: started.elapsed(),
        });
    }
    let mut deciding = None;
    for p in &bad.perturbed {
        if let Some(t) = s.fails(&[*p])? {
            deciding = Some((vec![*p], t));
            break;
        }
    }
    let (deciding, failing) = match deciding {
        Some(d) => d,
        None => {
            let set = s.ddmin(bad.perturbed.clone())?;
            match s.fails(&set)? {
                Some(t) => match s.single_near(&set)? {
                    Some(one) => one,
                    None => match s.same_access(&set, &t)? {
                        Some(one) => one,
                        None => (set, t),
                    },
                },
                // Not reproducible from its perturbations alone: report the whole run.
                None => (bad.perturbed.clone(), bad.clone()),
            }
        }
    };
    // The passing side: the same perturbations but the last, so both runs
    // are one machine until the deciding step.
    let without_last = &deciding[..deciding.len().saturating_sub(1)];
    let passing = checker.try_one(&Candidate::Explicit(without_last.to_vec()))?;
    s.runs += 1;
    // Where each thread was at the deciding step: the sentence names the
    // place of the thread that made it, `--where` prints every thread.
    let where_ = match deciding.last() {
        Some(last) => {
            let inputs = checker.inputs_for(&Candidate::Explicit(deciding.clone()));
            let limits = Limits {
                where_at: Some(last.step),
                ..checker.candidate_limits()
            };
            session::run(&inputs, &limits, &mut Discard)?.where_at
        }
        _ => Vec::new(),
    };
    let failing_events = load(checker, &failing.id)?;
    let divergence = first_divergence(&load(checker, &passing.id)?, &failing_events, CONTEXT);
    let (without, with) = sides(&passing, &failing, without_last.is_empty());
    let other = match without.label {
        Label::Schedule0 => "schedule 0",
        _ if without_last.is_empty() => "schedule 0",
        _ => "the run without it",
    };
    let effect = label::effect(&property, other, without.status, (with.label, with.status));
    let sentence = match deciding.as_slice() {
        [one] => {
            let switches = checker.store.resolve(&failing.id)?.switches()?;
            let thread = label::thread_at(&switches, one.step);
            let what = label::deciding(one, &failing_events, thread, &symbols(checker));
            let place = thread
                .and_then(|(pid, tid)| {
                    let prefix = format!("thread {pid}/{tid}: ");
                    let line = where_.iter().find(|l| l.starts_with(&prefix))?;
                    crate::kernel::symbols::place_in(line)
                })
                .map_or_else(String::new, |p| format!(" in {p}"));
            format!(
                "step {} decides it: {what}{place} makes the run {effect}",
                one.step
            )
        }
        set => format!(
            "no single step decides it; these {} together make the run {effect}: {}",
            set.len(),
            set.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Ok(Narrowed {
        deciding,
        property,
        without,
        with,
        sentence,
        divergence,
        where_,
        runs: s.runs,
        wall: started.elapsed(),
    })
}

/// Every event of a run the check recorded.
fn load(checker: &Checker, id: &str) -> Result<Vec<Event>, CheckError> {
    let run = checker.store.resolve(id)?;
    run.events()
        .map_err(|e| CheckError::Trace(id.into(), e.to_string()))
}

/// The pair's sides, each with what a person calls it.
fn sides(without: &Tried, with: &Tried, without_is_schedule_0: bool) -> (Side, Side) {
    let (a, b) = label::labels(Judged::of(without), Judged::of(with), without_is_schedule_0);
    let side = |t: &Tried, label| Side {
        run: t.id.clone(),
        status: t.status,
        label,
    };
    (side(without, a), side(with, b))
}

/// The checked program's symbols (none when its file cannot be read).
fn symbols(checker: &Checker) -> label::Names {
    let base = &checker.spec.base;
    crate::kernel::elf::read_program(&base.image, &base.manifest.program)
        .map(|elf| label::Names::from_elf(&elf, crate::kernel::elf::load_bias(&elf)))
        .unwrap_or_default()
}
