//! Schedules: which perturbations a run's scheduler applies, and where.
//!
//! Schedule 0 is the unperturbed policy. Schedule N > 0 draws, at every step
//! inside its window, from a PRNG seeded with N: one step in
//! [`RESCHEDULE_ONE_IN`] sends the running thread behind the other runnable
//! threads, one in [`STALL_ONE_IN`] stalls it for 10 us to 1.28 ms of virtual
//! time while the others run. A perturbation is applied (and recorded) only
//! when another thread is runnable: alone, it would change nothing. An
//! explicit schedule applies exactly the listed perturbations (narrowing).

use crate::kernel::Rng;
use crate::record::{Manifest, Perturbation, Perturbed};
use std::collections::BTreeMap;

/// One step in this many is a reschedule, in a seeded schedule's window.
pub const RESCHEDULE_ONE_IN: u64 = 8;
/// One step in this many is a stall.
pub const STALL_ONE_IN: u64 = 16;
/// The shortest stall; the longest is this times 2^[`STALL_DOUBLINGS`].
pub const STALL_MIN_NS: u64 = 10_000;
pub const STALL_DOUBLINGS: u64 = 7;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
enum Plan {
    /// Seeded within the window; before it, the explicit prefix (a fork's parent's).
    Seeded {
        rng: Rng,
        from: u64,
        until: u64,
        prefix: BTreeMap<u64, Perturbation>,
    },
    Explicit(BTreeMap<u64, Perturbation>),
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Perturber {
    plan: Plan,
    /// What was actually applied, in step order.
    pub applied: Vec<Perturbed>,
}

impl Perturber {
    /// The perturber a manifest asks for; None for schedule 0.
    pub fn from_manifest(m: &Manifest) -> Option<Perturber> {
        let explicit: BTreeMap<u64, Perturbation> =
            m.perturb.iter().map(|p| (p.step, p.what)).collect();
        let plan = if m.schedule != 0 {
            Plan::Seeded {
                rng: Rng::new(m.schedule.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                from: m.schedule_from.unwrap_or(0),
                until: m.schedule_until.unwrap_or(u64::MAX),
                prefix: explicit,
            }
        } else if !explicit.is_empty() {
            Plan::Explicit(explicit)
        } else {
            return None;
        };
        Some(Perturber {
            plan,
            applied: Vec::new(),
        })
    }

    /// The perturbation planned for `step`, if any. Seeded plans draw at
    /// every step of the window, whether or not it is applied, so that the
    /// draw sequence depends on the step count alone.
    pub fn planned(&mut self, step: u64) -> Option<Perturbation> {
        match &mut self.plan {
            Plan::Explicit(map) => map.get(&step).copied(),
            Plan::Seeded {
                rng,
                from,
                until,
                prefix,
            } => {
                if step < *from {
                    return prefix.get(&step).copied();
                }
                if step > *until {
                    return None;
                }
                let r = rng.next_u64();
                let d = rng.next_u64();
                if r % RESCHEDULE_ONE_IN == 0 {
                    Some(Perturbation::Reschedule)
                } else if (r / RESCHEDULE_ONE_IN).is_multiple_of(STALL_ONE_IN) {
                    Some(Perturbation::Stall {
                        ns: STALL_MIN_NS << (d % (STALL_DOUBLINGS + 1)),
                    })
                } else {
                    None
                }
            }
        }
    }

    pub fn record(&mut self, step: u64, what: Perturbation) {
        self.applied.push(Perturbed { step, what });
    }
}
