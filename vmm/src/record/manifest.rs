//! Every input of a run. The run id is the BLAKE3 of this, serialized.

use serde::{Deserialize, Serialize};

/// The engine's own version; part of every manifest so that a change to the
/// engine's behaviour changes the ids of the runs it makes.
pub const ENGINE_VERSION: &str = concat!("rewind-engine/", env!("CARGO_PKG_VERSION"), "/1");

/// The guest's environment before `--env`.
pub const DEFAULT_ENV: &[&str] = &["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"];
/// Virtual nanoseconds each step adds to the clock (`quantum_ns`).
pub const QUANTUM_NS: u64 = 5000;

/// The guest's environment: [`DEFAULT_ENV`] with each `K=V` of `flags`
/// replacing the variable K or added after; Err names a flag that is not
/// `K=V` with a non-empty K and no NUL.
pub fn guest_env(flags: &[String]) -> Result<Vec<String>, String> {
    let mut env: Vec<String> = DEFAULT_ENV.iter().map(|s| s.to_string()).collect();
    for kv in flags {
        let Some((k, _)) = kv.split_once('=') else {
            return Err(format!("`{kv}`: expected K=V"));
        };
        if k.is_empty() || kv.contains('\0') {
            return Err(format!("`{kv}`: expected K=V with a non-empty K"));
        }
        let prefix = format!("{k}=");
        match env.iter_mut().find(|e| e.starts_with(&prefix)) {
            Some(e) => *e = kv.clone(),
            None => env.push(kv.clone()),
        }
    }
    Ok(env)
}

/// The manifest's `stdin`: the BLAKE3 of the bytes, None when there are none.
pub fn stdin_hash(bytes: &[u8]) -> Option<String> {
    (!bytes.is_empty()).then(|| blake3::hash(bytes).to_hex().to_string())
}

/// The default epoch: the start of the current day, UTC, in Unix seconds.
pub fn start_of_today_utc() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    now - now % 86400
}

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
        }
    }
}

impl std::fmt::Display for Perturbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at step {}", self.what, self.step)
    }
}

/// Guest memory when `--mem` is not given.
pub const DEFAULT_MEM: u64 = 2 << 30;

impl Manifest {
    /// The inputs of a run of `argv` (the program at guest path `program`,
    /// in the image whose hash is `image`) with every other input at its
    /// default: this engine, [`DEFAULT_ENV`], cwd `/`, no standard input, the
    /// epoch at the start of today (UTC), seed 0, one core, [`DEFAULT_MEM`],
    /// [`QUANTUM_NS`], schedule 0.
    pub fn new(program: String, argv: Vec<String>, image: String) -> Manifest {
        Manifest {
            engine: ENGINE_VERSION.to_string(),
            program,
            argv,
            env: DEFAULT_ENV.iter().map(|s| s.to_string()).collect(),
            cwd: "/".into(),
            image,
            stdin: None,
            epoch: start_of_today_utc(),
            seed: 0,
            cores: 1,
            mem: DEFAULT_MEM,
            quantum_ns: QUANTUM_NS,
            schedule: 0,
            schedule_from: None,
            schedule_until: None,
            perturb: Vec::new(),
            reseed: None,
            fork_of: None,
        }
    }
}

impl Manifest {
    /// The run id: the first 16 hex digits of the BLAKE3 of the manifest's JSON.
    pub fn id(&self) -> String {
        let json = serde_json::to_vec(self).expect("a manifest always serializes");
        blake3::hash(&json).to_hex()[..16].to_string()
    }
}
