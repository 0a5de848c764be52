//! `rewind threads`: which thread held the CPU when, read from the run's
//! switch record (no replay).

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use std::io::Write;
use vmm::record::switches::stretches;

#[derive(Args, Debug)]
pub struct ThreadsArgs {
    #[command(flatten)]
    pub steps: super::RunSteps,
    /// One JSON object a line: {"first", "last", "pid", "tid", "name"}.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: ThreadsArgs) -> Result<i32> {
    let super::RunSteps { run, from, to } = &args.steps;
    let run = crate::app::resolve(&run.spec)?;
    let switches = run
        .switches()
        .with_context(|| format!("run {}: cannot read which thread ran when", run.id))?;
    let end = run.meta.steps;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (first, last, s) in stretches(&switches, end, *from, to.unwrap_or(end)) {
        let name = run.meta.thread_names.get(&s.tid).map_or("", String::as_str);
        if args.json {
            let v = crate::util::json_value(&StretchJson {
                first,
                last,
                pid: s.pid,
                tid: s.tid,
                name,
            });
            writeln!(out, "{v}")?;
        } else {
            writeln!(out, "{first:>8}  {last:>8}  {}/{}  {name}", s.pid, s.tid)?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// `rewind threads --json`: a stretch of steps one thread ran.
#[derive(Serialize)]
struct StretchJson<'a> {
    first: u64,
    last: u64,
    pid: u32,
    tid: u32,
    name: &'a str,
}
