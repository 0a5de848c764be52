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
    /// Where the scheduler may switch threads: at system calls and faults
    /// only, or at shared-memory accesses too.
    #[serde(default, skip_serializing_if = "Points::is_syscalls")]
    pub points: Points,
    /// Changes of `points` after a step, in step order (a fork made with
    /// `rewind fork --points`, a check from a run with other points).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub points_after: Vec<(u64, Points)>,
    /// With `points: races`: the pages (addresses, sorted) that trap from
    /// the start, learned by an earlier run (a check's learning run); left
    /// out when empty, so older run ids stay the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub race_pages: Vec<u64>,
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pct {
    pub depth: u32,
    pub steps: u64,
    /// When not empty, the steps PCT counts (its k) are only the system
    /// calls and the accesses to these byte ranges (start, length): where
    /// schedule 0's threads conflict. A change of priority at any other
    /// step is the same run as one at that thread's next counted step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<(u64, u64)>,
}

impl Pct {
    /// Whether an access to `len` bytes at `addr` is one PCT counts.
    pub fn counts_access(&self, addr: u64, len: u64) -> bool {
        let end = addr.saturating_add(len.max(1));
        // The last range starting before `end` is the only one that can overlap.
        let i = self.shared.partition_point(|&(s, _)| s < end);
        i > 0 && {
            let (s, l) = self.shared[i - 1];
            s.saturating_add(l) > addr
        }
    }
}

/// A run's scheduling points: every exit is one; `Memory` adds an exit at
/// every access to memory more than one thread has touched; `Races` only at
/// the accesses to pages that can race (the manifest's `race_pages`, and
/// the pages this run sees two threads touch with nothing ordering them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Points {
    #[default]
    Syscalls,
    Memory,
    Races,
}

impl Points {
    pub fn is_syscalls(&self) -> bool {
        *self == Points::Syscalls
    }
}

impl std::fmt::Display for Points {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Points::Syscalls => "syscalls",
            Points::Memory => "memory",
            Points::Races => "races",
        })
    }
}

impl std::str::FromStr for Points {
    type Err = String;
    fn from_str(s: &str) -> Result<Points, String> {
        match s {
            "syscalls" => Ok(Points::Syscalls),
            "memory" => Ok(Points::Memory),
            "races" => Ok(Points::Races),
            _ => Err(format!("`{s}`: one of syscalls, memory, races")),
        }
    }
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
            points: Default::default(),
            points_after: Vec::new(),
            race_pages: Vec::new(),
            fork_of: None,
            pct: None,
        }
    }
}

/// Most changes of points a manifest may list.
pub const MAX_POINTS_CHANGES: usize = 64;
/// Most pages `race_pages` may list.
pub const MAX_RACE_PAGES: usize = 1 << 16;

impl Manifest {
    /// The points in force after `step`.
    pub fn points_after_step(&self, step: u64) -> Points {
        self.points_after
            .iter()
            .take_while(|(s, _)| *s <= step)
            .last()
            .map_or(self.points, |(_, p)| *p)
    }

    /// Points `points` from after `step` on (a fork's `--points`): changes
    /// after the step are dropped, and one is added when the points in
    /// force there differ.
    pub fn set_points_after(&mut self, step: u64, points: Points) {
        self.points_after.retain(|(s, _)| *s <= step);
        if self.points_after_step(step) != points {
            self.points_after.retain(|(s, _)| *s < step);
            if self.points_after_step(step) != points {
                self.points_after.push((step, points));
            }
        }
    }

    /// The run id: the first 16 hex digits of the BLAKE3 of the manifest's JSON.
    pub fn id(&self) -> String {
        let json = serde_json::to_vec(self).expect("a manifest always serializes");
        blake3::hash(&json).to_hex()[..16].to_string()
    }
}

/// Most CPUs a run may say it has (`--cores`).
pub const MAX_CORES: u32 = 1024;
/// Most guest memory a run may have (`--mem`).
pub const MAX_MEM: u64 = 1 << 40;
/// Most bytes argv and env may hold together (Linux's ARG_MAX for an 8 MiB stack).
pub const MAX_ARG_BYTES: usize = 2 << 20;
/// Latest epoch a run may start at (the clock counts nanoseconds in 64 bits).
pub const MAX_EPOCH: u64 = 1 << 32;

/// Why a manifest cannot be run: it came from a file, and a file can say anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("mem {0}: must be whole 4 KiB pages from 16 MiB to 1 TiB")]
    Mem(u64),
    #[error("cores {0}: must be 1 to {MAX_CORES}")]
    Cores(u32),
    #[error("quantum_ns {0}: must be 1 ns to 1 s")]
    Quantum(u64),
    #[error("epoch {0}: must be at most {MAX_EPOCH}")]
    Epoch(u64),
    #[error("{field} `{value}`: not a BLAKE3 hash (64 lowercase hex digits)")]
    Hash { field: &'static str, value: String },
    #[error("fork_of.parent `{0}`: not a run id (16 lowercase hex digits)")]
    Parent(String),
    #[error("{field} `{value}`: not an absolute guest path")]
    Path { field: &'static str, value: String },
    #[error("argv is empty")]
    NoArgv,
    #[error("points_after: at most {MAX_POINTS_CHANGES} changes, in step order")]
    PointsAfter,
    #[error("race_pages: at most {MAX_RACE_PAGES} page addresses, sorted")]
    RacePages,
    #[error("{0} holds a NUL byte")]
    Nul(&'static str),
    #[error("argv and env hold {0} bytes, more than {MAX_ARG_BYTES}")]
    ArgsTooLong(usize),
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Manifest {
    /// Checks every value the engine later sizes, indexes or joins into a
    /// path with: called on boot, restore, replay and import, so that no
    /// manifest file makes the monitor panic, allocate without bound, or
    /// name a path outside the store.
    pub fn validate(&self) -> Result<(), ManifestError> {
        use ManifestError as E;
        if self.mem < crate::machine::memory::MIN_MEM
            || self.mem > MAX_MEM
            || !self.mem.is_multiple_of(4096)
        {
            return Err(E::Mem(self.mem));
        }
        if !(1..=MAX_CORES).contains(&self.cores) {
            return Err(E::Cores(self.cores));
        }
        if !(1..=1_000_000_000).contains(&self.quantum_ns) {
            return Err(E::Quantum(self.quantum_ns));
        }
        if self.epoch > MAX_EPOCH {
            return Err(E::Epoch(self.epoch));
        }
        if !is_hex(&self.image, 64) {
            return Err(E::Hash {
                field: "image",
                value: self.image.clone(),
            });
        }
        if let Some(h) = self.stdin.as_ref().filter(|h| !is_hex(h, 64)) {
            return Err(E::Hash {
                field: "stdin",
                value: h.clone(),
            });
        }
        if self.points_after.len() > MAX_POINTS_CHANGES
            || self.points_after.windows(2).any(|w| w[0].0 >= w[1].0)
        {
            return Err(E::PointsAfter);
        }
        if self.race_pages.len() > MAX_RACE_PAGES
            || self.race_pages.iter().any(|p| p % 4096 != 0)
            || self.race_pages.windows(2).any(|w| w[0] >= w[1])
        {
            return Err(E::RacePages);
        }
        if let Some(f) = self.fork_of.as_ref().filter(|f| !is_hex(&f.parent, 16)) {
            return Err(E::Parent(f.parent.clone()));
        }
        for (field, value) in [("program", &self.program), ("cwd", &self.cwd)] {
            if !value.starts_with('/') {
                return Err(E::Path {
                    field,
                    value: value.clone(),
                });
            }
        }
        if self.argv.is_empty() {
            return Err(E::NoArgv);
        }
        for (field, list) in [("argv", &self.argv), ("env", &self.env)] {
            if list.iter().any(|s| s.contains('\0')) {
                return Err(E::Nul(field));
            }
        }
        for (field, s) in [("program", &self.program), ("cwd", &self.cwd)] {
            if s.contains('\0') {
                return Err(E::Nul(field));
            }
        }
        let bytes: usize = self.argv.iter().chain(&self.env).map(|s| s.len() + 1).sum();
        if bytes > MAX_ARG_BYTES {
            return Err(E::ArgsTooLong(bytes));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pct_counts_accesses_that_overlap_a_shared_range() {
        let pct = Pct {
            depth: 3,
            steps: 2,
            shared: vec![(0x1000, 4), (0x2000, 8)],
        };
        assert!(pct.counts_access(0x1000, 4));
        assert!(pct.counts_access(0x0ffc, 8), "ends inside the first range");
        assert!(pct.counts_access(0x1003, 1));
        assert!(!pct.counts_access(0x1004, 4), "just after it");
        assert!(!pct.counts_access(0x0ffc, 4), "just before it");
        assert!(
            pct.counts_access(0x2004, 0),
            "a size the decoder did not give"
        );
        assert!(!pct.counts_access(0x3000, 8));
        assert!(!pct.counts_access(u64::MAX, u64::MAX));
    }

    /// A manifest as `rewind run` writes it.
    fn good() -> Manifest {
        let json = format!(
            r#"{{"engine":"{ENGINE_VERSION}","program":"/bin/p","argv":["/bin/p"],
            "env":["HOME=/root"],"cwd":"/","image":"{}","stdin":null,"epoch":1700000000,
            "seed":0,"cores":1,"mem":2147483648,"quantum_ns":5000,"schedule":0}}"#,
            "ab".repeat(32)
        );
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn a_manifest_the_cli_makes_is_valid() {
        assert_eq!(good().validate(), Ok(()));
    }

    #[test]
    fn every_value_the_engine_sizes_or_joins_is_checked() {
        type Spoil = fn(&mut Manifest);
        let bad: Vec<(Spoil, &str)> = vec![
            (|m| m.mem = 4096, "mem 4096"),
            (|m| m.mem = (16 << 20) + 1, "mem"),
            (|m| m.mem = !4095, "mem"),
            (|m| m.cores = 0, "cores 0"),
            (|m| m.cores = u32::MAX, "cores"),
            (|m| m.quantum_ns = 0, "quantum_ns 0"),
            (|m| m.epoch = u64::MAX, "epoch"),
            (|m| m.image = "../../etc".into(), "image `../../etc`"),
            (|m| m.stdin = Some("AB".repeat(32)), "stdin"),
            (
                |m| {
                    m.fork_of = Some(ForkOf {
                        parent: "../x".into(),
                        step: 1,
                    })
                },
                "fork_of.parent",
            ),
            (|m| m.program = "p".into(), "program `p`"),
            (|m| m.cwd = "".into(), "cwd"),
            (|m| m.argv.clear(), "argv is empty"),
            (|m| m.argv.push("a\0b".into()), "argv holds a NUL"),
            (|m| m.env.push("A".repeat(3 << 20)), "argv and env hold"),
        ];
        for (spoil, want) in bad {
            let mut m = good();
            spoil(&mut m);
            let e = m.validate().expect_err(want).to_string();
            assert!(e.contains(want), "{e:?} does not say {want:?}");
        }
    }
}
