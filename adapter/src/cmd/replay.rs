//! `rewind replay`: run a recorded run's inputs again and compare.

use crate::progress::{Progress, Watched};
use crate::util::parse_secs;
use anyhow::{Context, Result};
use clap::Args;
use std::time::Duration;
use vmm::replay::{MemRecorder, Verdict};
use vmm::runner;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// Bound the replay in host seconds [default: the recording's --timeout, if any].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub timeout: Option<Duration>,
}

pub fn main(args: ReplayArgs) -> Result<i32> {
    let run = crate::app::resolve(&args.run.spec)?;
    let inputs = run
        .inputs()
        .with_context(|| format!("cannot replay run {}", run.id))?;
    let mut limits = run.limits();
    // A replay is bounded by what it reproduces: a timed-out recording's
    // step count. The recording's host timeout, generously scaled, only
    // guards against a replay that never gets there.
    if run.meta.exit == vmm::run::ExitStatus::TimedOut {
        limits.max_steps = Some(run.meta.steps);
    }
    limits.timeout = args
        .timeout
        .or(limits.timeout.map(|t| t * 10 + Duration::from_secs(60)));
    let mut rec = MemRecorder::default();
    let outcome = runner::run(
        &inputs,
        &limits,
        &mut Watched {
            inner: &mut rec,
            watch: Progress::new("replaying", run.meta.steps),
        },
    )
    .with_context(|| format!("cannot replay run {}", run.id))?;

    match vmm::replay::compare(&run, &outcome, &rec)
        .with_context(|| format!("run {}: cannot read what it recorded", run.id))?
    {
        Verdict::Identical {
            events,
            steps,
            timed_out,
        } => {
            let note = if timed_out {
                " (timed out when recorded: replayed to the same step)"
            } else {
                ""
            };
            println!("identical: {events} events over {steps} steps{note}");
            Ok(0)
        }
        Verdict::Different(lines) => {
            for l in lines {
                println!("{l}");
            }
            Ok(1)
        }
    }
}
