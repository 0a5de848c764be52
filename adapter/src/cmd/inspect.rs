//! `rewind cat` and `rewind ps`: the machine at a step of a run, reached by
//! seeking (the last keyframe at or before the step, then forward).

use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use vmm::inspect::{at_step, SeekError};
use vmm::session::Limits;
use vmm::store::Run;

/// `rewind cat`'s exit status when the file did not exist at that step.
pub const NO_SUCH_FILE: i32 = 3;

#[derive(Args, Debug)]
pub struct CatArgs {
    /// The run: id, unique id prefix, @, @N or name.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// The step after which to look.
    #[arg(value_name = "STEP")]
    pub step: u64,
    /// The file, as a guest path.
    #[arg(value_name = "PATH")]
    pub path: String,
}

#[derive(Args, Debug)]
pub struct PsArgs {
    /// The run: id, unique id prefix, @, @N or name.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// The step after which to look.
    #[arg(long = "at", value_name = "STEP")]
    pub at: u64,
}

pub(crate) fn seek<R>(
    run: &Run,
    step: u64,
    look: impl FnOnce(&mut vmm::kernel::Kernel) -> R,
) -> Result<R> {
    if step > run.meta.steps {
        crate::util::usage!(
            "step {step} is past the end of run {} ({} steps)",
            run.id,
            run.meta.steps
        );
    }
    let store = super::store()?;
    let inputs = run
        .inputs()
        .with_context(|| format!("cannot look inside run {}", run.id))?;
    let kf = run.usable_keyframe(&store, step);
    let limits = Limits {
        timeout: run
            .meta
            .timeout_secs
            .map(std::time::Duration::from_secs_f64),
        ..Default::default()
    };
    let kf = kf.as_ref().map(|(k, own)| (k, *own));
    match at_step(&inputs, kf, &store.pages(), step, &limits, look) {
        Ok(r) => Ok(r),
        Err(SeekError::Ended(at)) => anyhow::bail!(
            "run {} has no live process after step {step} (it ended at step {at})",
            run.id
        ),
        Err(e) => Err(e.into()),
    }
}

pub fn cat(args: CatArgs) -> Result<i32> {
    let run = super::resolve(&args.run)?;
    let path = args.path.clone();
    match seek(&run, args.step, |k| k.file_contents(&path))? {
        Some(bytes) => {
            std::io::stdout().write_all(&bytes)?;
            Ok(0)
        }
        None => {
            eprintln!(
                "rewind: {} did not exist at step {} of run {}",
                args.path, args.step, run.id
            );
            Ok(NO_SUCH_FILE)
        }
    }
}

pub fn ps(args: PsArgs) -> Result<i32> {
    let run = super::resolve(&args.run)?;
    for line in seek(&run, args.at, |k| k.process_lines())? {
        println!("{line}");
    }
    Ok(0)
}
