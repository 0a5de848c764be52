//! `rewind events`: a run's events, one a line.

use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct EventsArgs {
    #[command(flatten)]
    pub steps: super::RunSteps,
    /// One flat JSON object a line: {"step", "pid", "tid", "kind":
    /// "syscall", ..the kind's fields}; every kind is in docs/events.md. (The
    /// text form also marks where the run's schedule intervened.)
    #[arg(long)]
    pub json: bool,
    /// Show memory accesses too (the points of a `--points memory` run),
    /// which are hidden by default (`--json` always carries them).
    #[arg(long)]
    pub accesses: bool,
}

pub fn main(args: EventsArgs) -> Result<i32> {
    let super::RunSteps { run, from, to } = &args.steps;
    let run = crate::app::resolve(&run.spec)?;
    let mut trace = run
        .trace()
        .with_context(|| format!("run {}: cannot read its events", run.id))?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let (from, to) = (*from, to.unwrap_or(u64::MAX));
    // Where the run's schedule intervened, shown after that step's events.
    let mut marks = run
        .meta
        .perturbed
        .iter()
        .filter(|p| (from..=to).contains(&p.step))
        .peekable();
    for ev in trace.events_in(from, to) {
        let ev = ev.with_context(|| format!("run {}", run.id))?;
        if ev.kind.is_access() && !args.accesses && !args.json {
            continue;
        }
        if args.json {
            serde_json::to_writer(&mut out, &vmm::record::json::event(&ev))?;
            out.write_all(b"\n")?;
        } else {
            while let Some(p) = marks.next_if(|p| p.step < ev.step) {
                writeln!(out, "{}", mark(p))?;
            }
            writeln!(out, "{ev}")?;
        }
    }
    if !args.json {
        for p in marks {
            writeln!(out, "{}", mark(p))?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// `      36  schedule: a reschedule here`
fn mark(p: &vmm::run::Perturbed) -> String {
    format!("{:>8}  schedule: {} here", p.step, p.what)
}
