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
    pub schedule: u64,
}

impl Manifest {
    /// The run id: the first 16 hex digits of the BLAKE3 of the manifest's JSON.
    pub fn id(&self) -> String {
        let json = serde_json::to_vec(self).expect("a manifest always serializes");
        blake3::hash(&json).to_hex()[..16].to_string()
    }
}
