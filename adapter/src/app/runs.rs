//! Listing runs: each as the JSON object `rewind ls --json` prints and the
//! debug adapter's `rewind/runs` returns.

use serde::Serialize;
use vmm::run::manifest::ForkOf;

/// A run as `rewind ls --json` prints it (and `rewind/runs` answers).
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub id: String,
    pub name: String,
    pub status: String,
    pub exit_code: i32,
    pub steps: u64,
    pub virtual_ns: u64,
    pub wall_secs: f64,
    pub created: u64,
    pub events: u64,
    pub program: String,
    pub argv: Vec<String>,
    pub fork_of: Option<ForkOf>,
    pub schedule: u64,
}

impl RunInfo {
    pub fn of(r: &vmm::store::Run) -> RunInfo {
        RunInfo {
            id: r.id.clone(),
            name: r.meta.name.clone(),
            status: r.meta.status.clone(),
            exit_code: r.meta.exit_code,
            steps: r.meta.steps,
            virtual_ns: r.meta.virtual_ns,
            wall_secs: r.meta.wall_secs,
            created: r.meta.created,
            events: r.meta.events,
            program: r.manifest.program.clone(),
            argv: r.manifest.argv.clone(),
            fork_of: r.manifest.fork_of.clone(),
            schedule: r.manifest.schedule,
        }
    }
}

/// [`RunInfo`] as JSON (its members sorted, as `rewind ls --json` prints them).
pub fn run_json(r: &vmm::store::Run) -> serde_json::Value {
    serde_json::to_value(RunInfo::of(r)).expect("a run's info serializes")
}
