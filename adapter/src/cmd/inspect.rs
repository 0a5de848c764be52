//! `rewind cat` and `rewind ps`: the machine at a step of a run, reached by
//! seeking (the last keyframe at or before the step, then forward).

use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use vmm::inspect::{at_step, SeekError};
use vmm::record::keyframe::Keyframe;
use vmm::session::{Limits, RunInputs};
use vmm::store::{Run, Store};

/// `rewind cat`'s exit status when the file did not exist at that step: the
/// answer, where trouble (an unknown run, a step past the end) exits 2.
pub const NO_SUCH_FILE: i32 = 1;

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

/// RUN and STEP as `cat`, `ps`, `where` and `gdb` take them: the run,
/// when the step is inside it.
pub(crate) fn run_at(spec: &str, step: u64) -> Result<Run> {
    let run = super::resolve(spec)?;
    within(&run, step)?;
    Ok(run)
}

/// A usage error unless `step` is a step of `run`.
fn within(run: &Run, step: u64) -> Result<()> {
    if step > run.meta.steps {
        crate::util::usage!(
            "step {step} is past the end of run {} ({} steps)",
            run.id,
            run.meta.steps
        );
    }
    Ok(())
}

/// What a look inside a run starts from: its store, inputs and limits, and
/// the keyframe to reach `step` from (said on stderr when unusable).
pub(crate) struct Inside {
    pub store: Store,
    pub inputs: RunInputs,
    pub keyframe: Option<(Keyframe, bool)>,
    pub limits: Limits,
}

impl Inside {
    pub(crate) fn of(run: &Run, step: u64) -> Result<Inside> {
        let store = super::store()?;
        let inputs = run
            .inputs()
            .with_context(|| format!("cannot look inside run {}", run.id))?;
        let keyframe = super::usable_keyframe(run, &store, step);
        Ok(Inside {
            store,
            inputs,
            keyframe,
            limits: run.limits(),
        })
    }

    /// The keyframe as the seeks take it.
    pub(crate) fn keyframe(&self) -> Option<(&Keyframe, bool)> {
        self.keyframe.as_ref().map(|(k, own)| (k, *own))
    }
}

/// The error of a look at `step` of a run that was over by then.
pub(crate) fn ended(run: &Run, step: u64, at: u64) -> anyhow::Error {
    anyhow::anyhow!(
        "run {} has no live process after step {step} (it ended at step {at})",
        run.id
    )
}

pub(crate) fn seek<R>(
    run: &Run,
    step: u64,
    look: impl FnOnce(&mut vmm::kernel::Kernel) -> R,
) -> Result<R> {
    within(run, step)?;
    let inside = Inside::of(run, step)?;
    let pages = inside.store.pages();
    match at_step(
        &inside.inputs,
        inside.keyframe(),
        &pages,
        step,
        &inside.limits,
        look,
    ) {
        Ok(r) => Ok(r),
        Err(SeekError::Ended(at)) => Err(ended(run, step, at)),
        Err(e) => Err(e.into()),
    }
}

pub fn cat(args: CatArgs) -> Result<i32> {
    let run = run_at(&args.run, args.step)?;
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
    let run = run_at(&args.run, args.at)?;
    for line in seek(&run, args.at, |k| k.process_lines())? {
        println!("{line}");
    }
    Ok(0)
}
