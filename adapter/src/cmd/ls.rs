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
                "{}  {:<sw$}  {:>nw$} steps  {}",
                r.id, r.meta.status, r.meta.steps, r.meta.name
            )?;
        }
    }
    out.flush()?;
    Ok(0)
}
