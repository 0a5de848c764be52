//! `rewind ls`: recorded runs, newest first.

use anyhow::Result;
use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct LsArgs {
    /// Show only the N newest runs.
    #[arg(short = 'n', value_name = "N")]
    pub n: Option<usize>,
    /// One JSON object a line: id, name, status, exit_code, steps,
    /// virtual_ns, wall_secs, created, events, program, argv.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: LsArgs) -> Result<i32> {
    let store = super::store()?;
    let mut runs = store.list()?;
    if let Some(n) = args.n {
        runs.truncate(n);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        for r in &runs {
            let v = serde_json::json!({
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
            });
            writeln!(out, "{v}")?;
        }
    } else {
        let sw = runs.iter().map(|r| r.meta.status.len()).max().unwrap_or(0);
        let nw = runs
            .iter()
            .map(|r| r.meta.steps.to_string().len())
            .max()
            .unwrap_or(0);
        for r in &runs {
            writeln!(
                out,
                "{}  {:<sw$}  {:>nw$} steps  {}{}",
                r.id,
                r.meta.status,
                r.meta.steps,
                r.meta.name,
                lineage(&r.manifest)
            )?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// `  (fork of <parent> at <step>, schedule N)` for a fork.
fn lineage(m: &vmm::record::Manifest) -> String {
    let Some(f) = &m.fork_of else {
        return String::new();
    };
    let with = match m.reseed {
        Some((_, seed)) if m.schedule == 0 => format!("seed {seed}"),
        _ => format!("schedule {}", m.schedule),
    };
    format!("  (fork of {} at {}, {with})", f.parent, f.step)
}
