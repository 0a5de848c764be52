//! `rewind fork`: a new run equal to RUN up to STEP, then following another
//! schedule or seed.

use crate::app::fork::{fork_points, Shown};
use crate::app::record::summary;
use crate::app::{resolve, store};
use anyhow::Result;
use clap::Args;
use vmm::record::fork::ForkWith;

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("with").required(true).args(["schedule", "seed"]))]
pub struct ForkArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// The last step the fork shares with RUN.
    #[arg(value_name = "STEP")]
    pub step: u64,
    /// Follow schedule N after STEP.
    #[arg(long, value_name = "N")]
    pub schedule: Option<u64>,
    /// Reseed the guest's randomness with N after STEP.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Scheduling points after STEP [default: RUN's]: `syscalls` or
    /// `memory` (also every access to memory more than one thread touches).
    #[arg(long, value_name = "syscalls|memory")]
    pub points: Option<vmm::run::Points>,
    /// Do not show the fork's output.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn main(args: ForkArgs) -> Result<i32> {
    let store = store()?;
    let parent = resolve(&args.run.spec)?;
    let with = match (args.schedule, args.seed) {
        (Some(n), _) => ForkWith::Schedule(n),
        (None, Some(s)) => ForkWith::Seed(s),
        (None, None) => unreachable!("clap requires one"),
    };
    let show = if args.quiet {
        Shown::Progress
    } else {
        Shown::Echo
    };
    let forked = fork_points(&store, &parent, args.step, with, args.points, show)?;
    eprintln!("rewind: {}", summary(&forked.run.id, &forked.outcome));
    match forked.first_difference {
        Some(step) => eprintln!("rewind: the fork first differs from its parent at step {step}"),
        None => eprintln!("rewind: the fork does not differ from its parent"),
    }
    eprintln!(
        "rewind: open it: {}",
        super::open::command_line(&forked.run.id, Some(args.step), Some(&parent.id))
    );
    Ok(forked.outcome.status.shell_code())
}
