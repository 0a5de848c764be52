//! Listing runs: each as the JSON object `rewind ls --json` prints and the
//! debug adapter's `rewind/runs` returns.

/// A run as `rewind ls --json` prints it (and `rewind/runs` answers).
pub fn run_json(r: &vmm::store::Run) -> serde_json::Value {
    serde_json::json!({
        "id": r.id,
        "name": r.meta.name,
        "status": r.meta.status,
        "exit_code": r.meta.exit_code,
        "steps": r.meta.steps,
        "virtual_ns": r.meta.virtual_ns,
        "wall_secs": r.meta.wall_secs,
        "created": r.meta.created,
        "events": r.meta.events,
        "program": r.manifest.program,
        "argv": r.manifest.argv,
        "fork_of": r.manifest.fork_of,
        "schedule": r.manifest.schedule,
    })
}
