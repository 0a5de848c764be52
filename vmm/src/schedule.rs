//! Schedules: which perturbations a run's scheduler applies, and where.
//!
//! Schedule 0 is the unperturbed policy. Schedule N > 0 draws, at every step
//! inside its window, from a PRNG seeded with N: one step in
//! [`RESCHEDULE_ONE_IN`] sends the running thread behind the other runnable
//! threads, one in [`STALL_ONE_IN`] stalls it for 10 us to 1.28 ms of virtual
//! time while the others run. A perturbation is applied (and recorded) only
//! when another thread is runnable: alone, it would change nothing. An
//! explicit schedule applies exactly the listed perturbations (narrowing).
//!
//! A PCT schedule (the manifest's `pct`, Burckhardt et al., ASPLOS 2010)
//! gives each thread a random priority when it is first seen and always runs
//! the highest-priority runnable thread; at `depth` - 1 change points, drawn
//! among the window's first `steps` steps, the thread that made that step
//! drops to priority 1..depth-1, below every initial one. With `shared`
//! ranges the steps counted are only system calls and accesses to those
//! bytes (PCT's k is then the number of steps that can reorder what the
//! threads share, not of every step). A yielding thread
//! gives way to any other. Where its choice differs from what the policy
//! would run, it is recorded as a switch to that thread, so the applied list
//! replays the same run as an explicit schedule (forks, narrowing).
//!
//! The kernel applies a schedule, so this module sits below it: it names
//! neither the kernel nor `check` (which re-exports it) nor `store`
//! (`vmm/tests/layers.rs`).

use crate::run::{Manifest, Pct, Perturbation, Perturbed};
use std::collections::BTreeMap;

/// What the scheduler knows after a step, for a plan that picks threads.
pub struct Point<'a> {
    pub step: u64,
    /// The thread that made the step.
    pub cur: u32,
    pub cur_runnable: bool,
    /// It asked to give up the CPU (sched_yield).
    pub yielding: bool,
    /// The other runnable threads, in run-queue order.
    pub waiting: &'a [u32],
    /// What the step was: a system call, an access (address, length), or
    /// neither (a demand fault, a timeout). PCT counts some of them.
    pub made: Made,
}

/// What a step was, for PCT's count of the steps that can reorder what
/// threads share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Made {
    #[default]
    Other,
    Syscall,
    Access {
        addr: u64,
        len: u64,
    },
}

impl Point<'_> {
    /// The thread the policy alone would run next, if any.
    fn policy_pick(&self) -> Option<u32> {
        if self.cur_runnable && !self.yielding {
            return Some(self.cur);
        }
        self.waiting
            .first()
            .copied()
            .or(self.cur_runnable.then_some(self.cur))
    }
}

/// Initial PCT priorities are above this; change points give 1..depth-1.
const PCT_BASE: u64 = 1 << 32;

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
    /// PCT within the window; before it, the explicit prefix.
    Pct {
        rng: Rng,
        from: u64,
        until: u64,
        prefix: BTreeMap<u64, Perturbation>,
        /// Change points: step (or, with `counted`, the index of a counted
        /// step from `from`) -> the priority the thread making it drops to.
        change: BTreeMap<u64, u64>,
        /// Each thread's priority, drawn when it is first seen.
        prio: BTreeMap<u32, u64>,
        /// Which steps PCT counts: every one (None) or only the system
        /// calls and the accesses to schedule 0's conflicting bytes.
        counted: Option<Pct>,
        /// Counted steps seen from `from` on.
        #[serde(default)]
        seen: u64,
    },
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
        let plan = if let (true, Some(pct)) = (m.schedule != 0, &m.pct) {
            let mut rng = Rng::new(m.schedule.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x0050_4354);
            let from = m.schedule_from.unwrap_or(0);
            let counted = (!pct.shared.is_empty()).then(|| pct.clone());
            // Counted steps are numbered from 0; plain steps from `from`.
            let base = if counted.is_some() { 0 } else { from };
            let mut change = BTreeMap::new();
            for i in 1..pct.depth.max(1) as u64 {
                let at = base.saturating_add(rng.next_u64() % pct.steps.max(1));
                change.entry(at).or_insert(i);
            }
            Plan::Pct {
                rng,
                from,
                until: m.schedule_until.unwrap_or(u64::MAX),
                prefix: explicit,
                change,
                prio: BTreeMap::new(),
                counted,
                seen: 0,
            }
        } else if m.schedule != 0 {
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

    /// The perturbation planned after a step, if any. Seeded plans draw at
    /// every step of the window at which the running thread is still
    /// runnable, whether or not it is applied.
    pub fn planned(&mut self, pt: &Point) -> Option<Perturbation> {
        let step = pt.step;
        match &mut self.plan {
            Plan::Explicit(map) => map.get(&step).copied(),
            Plan::Pct {
                rng,
                from,
                until,
                prefix,
                change,
                prio,
                counted,
                seen,
            } => {
                if step < *from {
                    return prefix.get(&step).copied();
                }
                if step > *until {
                    return None;
                }
                let at = match counted {
                    None => Some(step),
                    Some(pct) => match pt.made {
                        Made::Syscall => Some(*seen),
                        Made::Access { addr, len } if pct.counts_access(addr, len) => Some(*seen),
                        _ => None,
                    },
                };
                if counted.is_some() && at.is_some() {
                    *seen += 1;
                }
                for t in std::iter::once(pt.cur).chain(pt.waiting.iter().copied()) {
                    prio.entry(t)
                        .or_insert_with(|| PCT_BASE + (rng.next_u64() >> 32));
                }
                if let Some(&p) = at.and_then(|at| change.get(&at)) {
                    prio.insert(pt.cur, p);
                }
                let keeps = pt.cur_runnable && (!pt.yielding || pt.waiting.is_empty());
                let best = std::iter::once(pt.cur)
                    .filter(|_| keeps)
                    .chain(pt.waiting.iter().copied().filter(|t| *t != pt.cur))
                    .max_by_key(|t| (prio[t], std::cmp::Reverse(*t)))?;
                (Some(best) != pt.policy_pick()).then_some(Perturbation::Switch { tid: best })
            }
            Plan::Seeded {
                rng,
                from,
                until,
                prefix,
            } => {
                if step < *from {
                    return prefix.get(&step).copied();
                }
                if step > *until || !pt.cur_runnable {
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

/// A deterministic PRNG (SplitMix64): the guest's only source of randomness.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5265_7769_6e64_2121)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}
