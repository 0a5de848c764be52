//! `rewind check --shard I/N --results DIR` and `rewind check --merge DIR...`:
//! a check spread over machines (docs/distributed.md).

use super::{keep_of, show, CheckArgs, Lines};
use crate::app::check::Keep;
use crate::app::kept::drop_runs;
use crate::util::usage;
use anyhow::{anyhow, Result};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use vmm::check::merge;
use vmm::check::shard::{run_shard, Shard, ShardError, ShardRun};
use vmm::check::CheckSpec;
use vmm::store::Store;

#[derive(Args, Debug, Default)]
pub struct ShardArgs {
    /// Run only shard I of N of the check's schedules (I from 1), a record
    /// each into --results; with no value, from SLURM_ARRAY_TASK_ID and
    /// SLURM_ARRAY_TASK_COUNT, JOB_COMPLETION_INDEX and --shard-count, or
    /// CI_NODE_INDEX and CI_NODE_TOTAL.
    #[arg(long, value_name = "I/N", num_args = 0..=1, default_missing_value = "", requires = "results")]
    pub shard: Option<String>,
    /// The number of shards, with JOB_COMPLETION_INDEX (a Kubernetes Indexed Job).
    #[arg(long, value_name = "N")]
    pub shard_count: Option<u32>,
    /// The directory a shard writes its records and failing runs into.
    #[arg(long, value_name = "DIR", requires = "shard")]
    pub results: Option<PathBuf>,
    /// Merge the shards' --results directories into the check's report.
    #[arg(long, value_name = "DIR", num_args = 1.., conflicts_with_all = ["shard", "results", "command", "example"])]
    pub merge: Vec<PathBuf>,
    /// With --merge: while the shards run, say every 2 s how many schedules
    /// are done, how many violate, and the slowest shard; merge when every
    /// shard has ended.
    #[arg(long, requires = "merge")]
    pub watch: bool,
}

/// `--merge --watch`: a line on stderr every 2 s until every shard has ended.
fn watch(dirs: &[PathBuf]) -> Result<()> {
    loop {
        let w = merge::watch(dirs).map_err(refused)?;
        let n = w.shards.unwrap_or(0);
        let per: Vec<String> = w
            .done
            .iter()
            .map(|(s, d)| format!("{s}/{n}: {d}"))
            .collect();
        let slowest = w.slowest().map_or(String::new(), |(s, d)| {
            format!("; slowest: shard {s}/{n} ({d} done)")
        });
        eprintln!(
            "rewind: watch: {} schedules done ({}), {} violating so far, {} of {n} shards ended{slowest}",
            w.done.values().sum::<u64>(),
            per.join(", "),
            w.violating,
            w.finished.len()
        );
        if w.over() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn number(name: &str, v: &str) -> Result<u32> {
    match v.trim().parse() {
        Ok(n) => Ok(n),
        Err(_) => usage!("{name}={v} is not a number"),
    }
}

/// The shard the engine running this task says it is.
fn from_env(count: Option<u32>) -> Result<Shard> {
    let shard = if let (Some(id), Some(n)) =
        (var("SLURM_ARRAY_TASK_ID"), var("SLURM_ARRAY_TASK_COUNT"))
    {
        // An array need not start at 0 nor step by 1.
        let min =
            var("SLURM_ARRAY_TASK_MIN").map_or(Ok(0), |m| number("SLURM_ARRAY_TASK_MIN", &m))?;
        let step =
            var("SLURM_ARRAY_TASK_STEP").map_or(Ok(1), |s| number("SLURM_ARRAY_TASK_STEP", &s))?;
        let id = number("SLURM_ARRAY_TASK_ID", &id)?;
        let n = number("SLURM_ARRAY_TASK_COUNT", &n)?;
        Shard::new(id.saturating_sub(min) / step.max(1) + 1, n)
    } else if let Some(i) = var("JOB_COMPLETION_INDEX") {
        let Some(n) = count else {
            usage!("JOB_COMPLETION_INDEX is set but not --shard-count (the Job's completions)");
        };
        Shard::new(number("JOB_COMPLETION_INDEX", &i)? + 1, n)
    } else if let (Some(i), Some(n)) = (var("CI_NODE_INDEX"), var("CI_NODE_TOTAL")) {
        Shard::new(number("CI_NODE_INDEX", &i)?, number("CI_NODE_TOTAL", &n)?)
    } else {
        usage!("--shard without I/N needs SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, JOB_COMPLETION_INDEX and --shard-count, or CI_NODE_INDEX and CI_NODE_TOTAL; none is set");
    };
    match shard {
        Ok(s) => Ok(s),
        Err(e) => usage!("{e}"),
    }
}

/// The shard `--shard` names.
fn which(args: &ShardArgs) -> Result<Shard> {
    match args.shard.as_deref() {
        None | Some("") => from_env(args.shard_count),
        Some(s) => match Shard::parse(s) {
            Ok(s) => Ok(s),
            Err(e) => usage!("{e}"),
        },
    }
}

/// A shard error as the front end's (every error exits 2: nothing merged).
fn refused(e: ShardError) -> anyhow::Error {
    match e {
        ShardError::Check(e) => anyhow!(e),
        e => anyhow!("{e}"),
    }
}

/// Removes the runs of the shard's passing schedules from this store, as a
/// check on one machine does (unless `--keep all`): its schedule 0s and
/// violating runs stay. How many were removed.
fn drop_passing(store: &Store, run: &ShardRun, args: &CheckArgs) -> usize {
    if keep_of(args) == Keep::All {
        return 0;
    }
    match drop_runs(store, &run.made, &run.kept(), &|_, _| None) {
        Ok(gone) => gone.len(),
        Err(e) => {
            eprintln!("rewind: warning: the shard's passing runs are not removed: {e}");
            0
        }
    }
}

/// `rewind check --shard --json`: what one shard did.
#[derive(Serialize)]
struct ShardJson {
    shard: u32,
    shards: u32,
    planned: usize,
    share: usize,
    tried: usize,
    violations: usize,
    removed: usize,
    results: String,
}

/// Runs one shard of the check; 1 when its share violates a property.
pub fn shard(args: &CheckArgs, spec: &CheckSpec, store: &Store) -> Result<i32> {
    let shard = which(&args.shards)?;
    let dir = args
        .shards
        .results
        .clone()
        .expect("clap requires --results");
    let mut lines = Lines::new(args.json);
    let run = run_shard(spec, store, shard, &dir, &mut lines).map_err(refused)?;
    let removed = drop_passing(store, &run, args);
    let found = run
        .bases
        .iter()
        .chain(&run.tried)
        .filter(|t| t.violated())
        .count();
    if args.json {
        let v = crate::util::json_value(&ShardJson {
            shard: shard.index,
            shards: shard.count,
            planned: run.planned,
            share: run.share,
            tried: run.tried.len(),
            violations: found,
            removed,
            results: dir.display().to_string(),
        });
        println!("{v}");
    } else {
        println!(
            "shard {shard}: {} of its {} schedules (of the check's {}), {found} violating; records in {}",
            run.tried.len(),
            run.share,
            run.planned,
            dir.display()
        );
        if removed > 0 {
            println!("{removed} passing runs removed (--keep all keeps them)");
        }
        println!("merge the shards: rewind check --merge {}", dir.display());
    }
    Ok(if run.violated() { 1 } else { 0 })
}

/// Merges shards' records into the check's report.
pub fn merge(args: &CheckArgs) -> Result<i32> {
    let store = crate::app::store()?;
    store.prepare()?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if args.shards.watch {
        watch(&args.shards.merge)?;
    }
    let p = merge::prepare(&args.shards.merge, &store, jobs).map_err(refused)?;
    let mut lines = Lines::new(args.json);
    let merged = merge::merge(&p, &store, &mut lines).map_err(refused)?;
    for n in &merged.notes {
        eprintln!("rewind: note: {n}");
    }
    show(
        &store,
        &merged.report,
        &p.spec,
        &mut lines,
        args,
        &merged.elsewhere,
    )
}
