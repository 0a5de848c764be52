//! `rewind fork`: a new run equal to RUN up to STEP, then following another
//! schedule or seed.

use super::run::summary;
use anyhow::{Context, Result};
use clap::Args;
use vmm::record::diff::first_divergence;
use vmm::record::fork::{fork_manifest, ForkWith};
use vmm::session::{Limits, RunInputs};
use vmm::store::RunDetails;

#[derive(Args, Debug)]
#[command(group = clap::ArgGroup::new("with").required(true).args(["schedule", "seed"]))]
pub struct ForkArgs {
    /// The run to fork: id, unique id prefix, @, @N or name.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// The last step the fork shares with RUN.
    #[arg(value_name = "STEP")]
    pub step: u64,
    /// Follow schedule N after STEP.
    #[arg(long, value_name = "N")]
    pub schedule: Option<u64>,
    /// Reseed the guest's randomness with N after STEP.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Do not show the fork's output.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn main(args: ForkArgs) -> Result<i32> {
    let store = super::store()?;
    let parent = super::resolve(&args.run)?;
    if args.step > parent.meta.steps {
        crate::util::usage!(
            "step {} is past the end of run {} ({} steps)",
            args.step,
            parent.id,
            parent.meta.steps
        );
    }
    let inputs = parent
        .inputs()
        .with_context(|| format!("cannot fork run {}", parent.id))?;
    let with = match (args.schedule, args.seed) {
        (Some(n), _) => ForkWith::Schedule(n),
        (None, Some(s)) => ForkWith::Seed(s),
        (None, None) => unreachable!("clap requires one"),
    };
    let manifest = fork_manifest(
        &parent.id,
        &inputs.manifest,
        &parent.meta.perturbed,
        args.step,
        with,
    );
    let inputs = RunInputs { manifest, ..inputs };
    let mut rec = store.begin(&inputs.manifest, &inputs.stdin)?;
    rec.set_echo(!args.quiet);
    let limits = Limits {
        timeout: parent
            .meta
            .timeout_secs
            .map(std::time::Duration::from_secs_f64),
        ..Default::default()
    };
    // From the last keyframe at or before the step, when the parent kept one.
    let kf = parent.usable_keyframe(&store, args.step).map(|(k, _)| k);
    match &kf {
        Some(k) => eprintln!("rewind: forking from the keyframe at step {}", k.step),
        None => eprintln!(
            "rewind: forking from step 0 (no keyframe at or before step {})",
            args.step
        ),
    }
    let outcome = if args.quiet {
        let mut shown = crate::progress::Progress::new(&mut rec, "forking", parent.meta.steps);
        parent.run_fork(&store, kf.as_ref(), &inputs, &limits, &mut shown)?
    } else {
        parent.run_fork(&store, kf.as_ref(), &inputs, &limits, &mut rec)?
    };
    let run = rec.finish(
        &outcome,
        &RunDetails {
            name: parent.meta.name.clone(),
            image: inputs.image.clone(),
            timeout: limits.timeout,
        },
    )?;
    eprintln!("rewind: {}", summary(&run.id, &outcome));
    let (a, b) = (parent.events()?, run.events()?);
    match first_divergence(&a, &b, 0) {
        Some(d) => eprintln!(
            "rewind: the fork first differs from its parent at step {}",
            d.right_step().or(d.left_step()).unwrap_or(outcome.steps)
        ),
        None => eprintln!("rewind: the fork does not differ from its parent"),
    }
    Ok(outcome.status.shell_code())
}
