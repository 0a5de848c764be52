//! `rewind replay`: run a recorded run's inputs again and compare.

use crate::util::parse_secs;
use anyhow::{Context, Result};
use clap::Args;
use std::time::Duration;
use vmm::replay::{MemRecorder, Verdict};
use vmm::session;

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
    limits.timeout = args.timeout.or(limits.timeout);
    let mut rec = MemRecorder::default();
    let outcome = session::run(
        &inputs,
        &limits,
        &mut crate::progress::Progress::new(&mut rec, "replaying", run.meta.steps),
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
                " (timed out: compared the events both reached)"
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
