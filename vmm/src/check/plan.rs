//! Which schedules a check tries: the steps `bounded` reschedules at,
//! PCT's parameters and window, and each strategy's candidates.

use super::{Candidate, Checker, Strategy};
use crate::run::{Pct, Perturbation, Perturbed};

impl Checker<'_> {
    /// The steps `bounded` reschedules at, in order, and what they are.
    pub(super) fn bounded_steps(&self, base_steps: u64) -> (Vec<u64>, String) {
        let from = self.start().unwrap_or(1).max(1);
        let until = self.spec.until.unwrap_or(base_steps).min(base_steps);
        let memory = !self
            .spec
            .base
            .manifest
            .points_after_step(from)
            .is_syscalls();
        match &self.window {
            Some(w) if memory => {
                let steps: Vec<u64> = w
                    .points
                    .iter()
                    .copied()
                    .filter(|s| (from..=until).contains(s))
                    .collect();
                let what = format!(
                    "at the {} system calls and conflicting shared accesses of steps {from}..{until}",
                    steps.len()
                );
                (steps, what)
            }
            _ => (
                (from..=until).collect(),
                format!("in steps {from}..{until}"),
            ),
        }
    }

    /// PCT's parameters: change points among the window's steps of
    /// schedule 0; with memory points, among its system calls and accesses
    /// to the bytes its threads conflict on (PCT's k is the number of steps
    /// that can reorder what threads share: a change of priority at a step
    /// that commutes with every other thread's is the same run as one at
    /// that thread's next such step).
    pub(super) fn pct(&self, depth: u32) -> Pct {
        let (from, until) = self.pct_range();
        let depth = depth.max(1);
        let steps = until.saturating_sub(from.unwrap_or(0)).max(1);
        match &self.window {
            Some(w) if self.spec.parent.is_none() && !w.shared.is_empty() => {
                let range = from.unwrap_or(0)..=until;
                let counted = w.counted.iter().filter(|s| range.contains(s)).count();
                Pct {
                    depth,
                    steps: (counted as u64).max(1),
                    shared: w.shared.clone(),
                }
            }
            _ => Pct {
                depth,
                steps,
                shared: Vec::new(),
            },
        }
    }

    /// PCT's window in schedule 0: from where its threads start sharing
    /// data (or, sharing none, where a second thread exists) to the last
    /// step at which they share anything, so that the d-1 change points
    /// fall where a change of priority can reorder them.
    pub(super) fn pct_range(&self) -> (Option<u64>, u64) {
        let until = self.spec.until.unwrap_or(u64::MAX).min(self.base_steps);
        match (&self.spec.parent, &self.window) {
            (None, Some(w)) => {
                let from = self.spec.from.unwrap_or(0);
                let last = w.points.last().copied().unwrap_or(until);
                (
                    Some(from.max(w.sharing_from.unwrap_or(w.from))),
                    until.min(last),
                )
            }
            _ => (self.spec.from, until),
        }
    }

    /// The schedules to try and, for a bounded search, the number of
    /// reschedules up to which they are every schedule there is.
    pub fn candidates(&self, base_steps: u64) -> (Vec<Candidate>, Option<u32>) {
        let (strategy, depth) = (self.spec.strategy, self.spec.depth);
        self.candidates_of(strategy, depth, self.spec.schedules, base_steps)
    }

    /// `n` schedules of `strategy` (at most: `bounded` may have fewer).
    pub(super) fn candidates_of(
        &self,
        strategy: Strategy,
        depth: u32,
        n: u64,
        base_steps: u64,
    ) -> (Vec<Candidate>, Option<u32>) {
        let first = self.spec.check_seed.saturating_mul(n).saturating_add(1);
        let seeded = (0..n).map(|i| first.saturating_add(i));
        match strategy {
            Strategy::Random => (seeded.map(Candidate::Seeded).collect(), None),
            Strategy::Pct => (seeded.map(|s| Candidate::Pct(s, depth)).collect(), None),
            Strategy::Seeds => {
                let own = self.spec.base.manifest.seed;
                let seeds = (1..).filter(|s| *s != own).take(n as usize);
                (seeds.map(Candidate::Seed).collect(), None)
            }
            Strategy::Bounded => {
                let (steps, _) = self.bounded_steps(base_steps);
                let one = |s: u64| Perturbed {
                    step: s,
                    what: Perturbation::Reschedule,
                };
                let singles = steps.iter().map(|&s| Candidate::Explicit(vec![one(s)]));
                let pairs = steps.iter().enumerate().flat_map(|(i, &a)| {
                    steps[i + 1..]
                        .iter()
                        .map(move |&b| Candidate::Explicit(vec![one(a), one(b)]))
                });
                let width = steps.len() as u64;
                let all: Vec<Candidate> = singles.chain(pairs).take(n as usize).collect();
                let bound = if all.len() as u64 >= width + width * width.saturating_sub(1) / 2 {
                    Some(2)
                } else if all.len() as u64 >= width {
                    Some(1)
                } else {
                    None
                };
                (all, bound)
            }
        }
    }
}
