//! Every input of a run. The run id is the BLAKE3 of this, serialized.

use serde::{Deserialize, Serialize};

/// The engine's own version; part of every manifest so that a change to the
/// engine's behaviour changes the ids of the runs it makes.
pub const ENGINE_VERSION: &str = concat!("rewind-engine/", env!("CARGO_PKG_VERSION"), "/1");

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub engine: String,
    /// The program's path inside the guest.
    pub program: String,
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    /// BLAKE3 of the root image (every file's path, mode and contents).
    pub image: String,
    /// BLAKE3 of the bytes given on standard input, when it was not a terminal.
    pub stdin: Option<String>,
    /// Wall clock at step 0, seconds since the Unix epoch.
    pub epoch: u64,
    pub seed: u64,
    pub cores: u32,
    pub mem: u64,
    /// Virtual nanoseconds each step adds to the clock.
    pub quantum_ns: u64,
    /// 0 is the unperturbed policy; N > 0 perturbs steps from a PRNG seeded with N.
    pub schedule: u64,
    /// The window of steps a seeded schedule perturbs (default: the whole run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_from: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_until: Option<u64>,
    /// Explicit perturbations (narrowing, and a fork's inherited prefix).
    /// With a seeded schedule too, these apply before `schedule_from`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub perturb: Vec<Perturbed>,
    /// Reseed the guest's randomness at a step: (step, new seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reseed: Option<(u64, u64)>,
    /// The run this one was forked from, and the last step they share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_of: Option<ForkOf>,
    /// A seeded schedule (`schedule` N > 0) is PCT's rather than random
    /// perturbations (`rewind check --strategy pct`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct: Option<Pct>,
}

/// PCT's parameters (Burckhardt et al., ASPLOS 2010): `depth` - 1 priority
/// change points drawn among `steps` steps from the window's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pct {
    pub depth: u32,
    pub steps: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOf {
    pub parent: String,
    pub step: u64,
}

/// What a schedule does to the running thread at a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Perturbation {
    /// Sent behind the other runnable threads.
    Reschedule,
    /// Taken off the CPU for this many virtual nanoseconds while others run.
    Stall { ns: u64 },
    /// Thread `tid` takes the CPU (a PCT schedule's choice); the running
    /// thread, if still runnable, goes behind the others.
    Switch { tid: u32 },
}

/// A perturbation a schedule applied, and the step at which it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Perturbed {
    pub step: u64,
    pub what: Perturbation,
}

/// `a reschedule`, `a stall of 40us`.
impl std::fmt::Display for Perturbation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Perturbation::Reschedule => write!(f, "a reschedule"),
            Perturbation::Stall { ns } => write!(f, "a stall of {}us", ns / 1000),
            Perturbation::Switch { tid } => write!(f, "a switch to thread {tid}"),
        }
    }
}

impl std::fmt::Display for Perturbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at step {}", self.what, self.step)
    }
}

impl Manifest {
    /// The run id: the first 16 hex digits of the BLAKE3 of the manifest's JSON.
    pub fn id(&self) -> String {
        let json = serde_json::to_vec(self).expect("a manifest always serializes");
        blake3::hash(&json).to_hex()[..16].to_string()
    }
}
