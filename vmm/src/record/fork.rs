//! Forks: a run equal to its parent up to a step, then following another
//! schedule or seed. The fork's manifest is its parent's, with the parent's
//! applied perturbations up to the step made explicit and the new schedule
//! (or seed) starting right after it, so the fork's id is a function of the
//! parent's id, the step and the new schedule.

use crate::run::{ForkOf, Manifest, Perturbed};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkWith {
    Schedule(u64),
    Seed(u64),
}

/// The manifest of the fork of `parent` (whose schedule applied `applied`) at `step`.
pub fn fork_manifest(
    parent_id: &str,
    parent: &Manifest,
    applied: &[Perturbed],
    step: u64,
    with: ForkWith,
) -> Manifest {
    let mut m = parent.clone();
    m.fork_of = Some(ForkOf {
        parent: parent_id.to_string(),
        step,
    });
    m.perturb = applied.iter().filter(|p| p.step <= step).copied().collect();
    match with {
        ForkWith::Schedule(n) => {
            m.schedule = n;
            m.schedule_from = Some(step + 1);
            m.schedule_until = None;
        }
        ForkWith::Seed(seed) => {
            // The parent's own schedule ends at the fork: only its prefix stays.
            m.schedule = 0;
            m.schedule_from = None;
            m.schedule_until = None;
            m.pct = None;
            m.reseed = Some((step + 1, seed));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Perturbation;

    fn parent() -> Manifest {
        Manifest {
            engine: "e".into(),
            program: "/p".into(),
            argv: vec!["/p".into()],
            env: vec![],
            cwd: "/".into(),
            image: "i".into(),
            stdin: None,
            epoch: 0,
            seed: 0,
            cores: 1,
            mem: 1 << 30,
            quantum_ns: 5000,
            schedule: 3,
            schedule_from: None,
            schedule_until: None,
            perturb: vec![],
            reseed: None,
            points: Default::default(),
            points_after: Vec::new(),
            race_pages: Vec::new(),
            fork_of: None,
            pct: None,
        }
    }

    #[test]
    fn same_arguments_same_id_and_prefix_kept() {
        let applied = [
            Perturbed {
                step: 5,
                what: Perturbation::Reschedule,
            },
            Perturbed {
                step: 50,
                what: Perturbation::Reschedule,
            },
        ];
        let a = fork_manifest("abc", &parent(), &applied, 10, ForkWith::Schedule(7));
        let b = fork_manifest("abc", &parent(), &applied, 10, ForkWith::Schedule(7));
        assert_eq!(a.id(), b.id());
        assert_eq!(a.perturb, vec![applied[0]]);
        assert_eq!(a.schedule_from, Some(11));
        let c = fork_manifest("abc", &parent(), &applied, 11, ForkWith::Schedule(7));
        assert_ne!(a.id(), c.id());
        let d = fork_manifest("abc", &parent(), &applied, 10, ForkWith::Seed(7));
        assert_ne!(a.id(), d.id());
        assert_eq!(d.reseed, Some((11, 7)));
    }
}
