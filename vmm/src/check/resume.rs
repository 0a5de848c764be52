//! Narrowing's runs, and schedules windowed by `--schedule-from`, started
//! where a run the check already made parts from them, not from step 0.
//!
//! Two runs of one check are the same machine up to the first step at
//! which their perturbations differ: the schedule is the only input that
//! differs, and a perturbation that is planned but cannot apply changes
//! nothing. So a run of explicit perturbations can start from a keyframe,
//! before that step, of the run already recorded (schedule 0, the failing
//! schedule, or one narrowing made) that shares the longest prefix with
//! it: a fork whose manifest names no parent, so its id, its events and
//! everything judged of it are those of the run made from step 0.

use super::{Candidate, CheckError, Checker, Tried};
use crate::run::keyframe::Keyframe;
use crate::run::Perturbed;
use crate::run::{Limits, Outcome};

/// A run in the store and the perturbations its schedule applied.
#[derive(Debug, Clone)]
pub(super) struct Donor {
    pub id: String,
    pub applied: Vec<Perturbed>,
}

impl Donor {
    pub fn of(t: &Tried) -> Donor {
        Donor {
            id: t.id.clone(),
            applied: t.perturbed.clone(),
        }
    }
}

/// The first step at which a run that applied `applied` and one planned
/// with `planned` can differ: the first at which either perturbs and the
/// other does not do the same (`u64::MAX`: never).
pub(super) fn parts_at(applied: &[Perturbed], planned: &[Perturbed]) -> u64 {
    let mut a = applied.to_vec();
    let mut b = planned.to_vec();
    a.sort_by_key(|p| p.step);
    b.sort_by_key(|p| p.step);
    let mut i = 0;
    loop {
        match (a.get(i), b.get(i)) {
            (Some(x), Some(y)) if x == y => i += 1,
            (Some(x), Some(y)) => return x.step.min(y.step),
            (Some(x), None) | (None, Some(x)) => return x.step,
            (None, None) => return u64::MAX,
        }
    }
}

impl Checker<'_> {
    /// The latest keyframe before step `below`, among `donors`' runs, that
    /// the run of `planned` passes through: before the first step at which
    /// it parts from that run. None when no run shares a keyframe with it
    /// (then it is made from step 0, as exact).
    fn shared_keyframe(
        &self,
        planned: &[Perturbed],
        donors: &[Donor],
        below: u64,
    ) -> Option<(crate::store::Run, Keyframe)> {
        if self.spec.parent.is_some() {
            // A check from a recorded run makes its explicit runs from step 0.
            return None;
        }
        let mut best: Option<(crate::store::Run, Keyframe)> = None;
        for d in donors {
            let before = parts_at(&d.applied, planned).min(below).saturating_sub(1);
            if before == 0 || best.as_ref().is_some_and(|(_, k)| k.step >= before) {
                continue;
            }
            let Ok(run) = self.store.resolve(&d.id) else {
                continue;
            };
            if let Some((kf, _)) = run.usable_keyframe(self.store, before).keyframe {
                if best.as_ref().is_none_or(|(_, k)| kf.step > k.step) {
                    best = Some((run, kf));
                }
            }
        }
        best
    }

    /// Runs one candidate and judges it: a windowed one from schedule 0's
    /// keyframe before its window (`window_start`).
    pub fn try_one(&self, c: &Candidate) -> Result<Tried, CheckError> {
        let inputs = self.inputs_for(c);
        let limits = self.candidate_limits();
        let (id, o, events) = match self.window_start(&inputs) {
            Some(start) => self.record_from(&inputs, &limits, Some(start))?,
            None => self.record(&inputs, &limits)?,
        };
        Ok(self.judge(c.label(), id, &o, &events))
    }

    /// Where a seeded or PCT schedule whose window starts at step F
    /// (`--schedule-from`) starts: schedule 0's latest keyframe before F.
    /// Such a schedule draws nothing before its window (`schedule::Plan`),
    /// so up to F it is schedule 0's machine, as a run of explicit
    /// perturbations is up to its first (a build compiled before the check
    /// phase it perturbs is not compiled again). None: from step 0.
    pub(super) fn window_start(
        &self,
        inputs: &crate::run::RunInputs,
    ) -> Option<(crate::store::Run, Keyframe)> {
        let m = &inputs.manifest;
        let from = m.schedule_from.filter(|f| *f > 1)?;
        if m.schedule == 0 || !m.perturb.is_empty() || m.reseed.is_some() {
            return None;
        }
        let base = Donor {
            id: self.base_run.clone()?,
            applied: Vec::new(),
        };
        self.shared_keyframe(&[], &[base], from)
    }

    /// `try_one` of explicit perturbations, started from the keyframe of
    /// one of `donors` that its run passes through.
    pub(super) fn try_resumed(
        &self,
        planned: &[Perturbed],
        donors: &[Donor],
    ) -> Result<Tried, CheckError> {
        let c = Candidate::Explicit(planned.to_vec());
        let inputs = self.inputs_for(&c);
        let start = self.shared_keyframe(planned, donors, u64::MAX);
        let (id, o, events) = self.record_from(&inputs, &self.candidate_limits(), start)?;
        Ok(self.judge(c.label(), id, &o, &events))
    }

    /// The run of `planned` with `limits` (notes at its steps), recorded
    /// nowhere, started from a keyframe of `donors` before the first step
    /// noted, and ended after the last.
    pub(super) fn notes_of(
        &self,
        planned: &[Perturbed],
        donors: &[Donor],
        limits: &Limits,
    ) -> Result<Outcome, CheckError> {
        let inputs = self.inputs_for(&Candidate::Explicit(planned.to_vec()));
        let noted = limits.where_at.iter().chain(&limits.places_at);
        let (first, last) = (noted.clone().min().copied(), noted.max().copied());
        // Without a note to take, the whole run.
        let limits = Limits {
            max_steps: last.or(limits.max_steps),
            ..limits.clone()
        };
        let start = first.and_then(|f| self.shared_keyframe(planned, donors, f));
        let mut discard = crate::run::Discard;
        Ok(match start {
            Some((_, kf)) => crate::runner::run_from(
                &inputs,
                &kf,
                &self.store.pages(),
                false,
                &limits,
                &mut discard,
            )?,
            None => crate::runner::run(&inputs, &limits, &mut discard)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Perturbation;

    fn at(step: u64) -> Perturbed {
        Perturbed {
            step,
            what: Perturbation::Reschedule,
        }
    }

    #[test]
    fn runs_part_at_their_first_different_perturbation() {
        assert_eq!(parts_at(&[], &[]), u64::MAX);
        assert_eq!(parts_at(&[at(5), at(9)], &[at(5), at(9)]), u64::MAX);
        assert_eq!(parts_at(&[at(5), at(9)], &[at(5)]), 9);
        assert_eq!(parts_at(&[at(5)], &[at(5), at(7)]), 7);
        assert_eq!(parts_at(&[at(5), at(9)], &[at(9)]), 5);
        let stall = Perturbed {
            step: 5,
            what: Perturbation::Stall { ns: 10_000 },
        };
        assert_eq!(parts_at(&[at(5)], &[stall]), 5);
        assert_eq!(parts_at(&[at(9), at(5)], &[at(5), at(9)]), u64::MAX);
    }
}
