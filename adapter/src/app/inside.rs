//! Looking inside a run at a step: the machine reached by seeking (the last
//! usable keyframe at or before the step, then forward).

use anyhow::{Context, Result};
use vmm::inspect::{at_exit, at_step, SeekError};
use vmm::run::keyframe::Keyframe;
use vmm::run::{Limits, RunInputs};
use vmm::store::{Run, Store};

/// RUN and STEP as `cat`, `ps`, `where` and `gdb` take them: the run,
/// when the step is inside it.
pub fn run_at(spec: &str, step: u64) -> Result<Run> {
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
pub struct Inside {
    pub store: Store,
    pub inputs: RunInputs,
    pub keyframe: Option<(Keyframe, bool)>,
    pub limits: Limits,
}

impl Inside {
    pub fn of(run: &Run, step: u64) -> Result<Inside> {
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
    pub fn keyframe(&self) -> Option<(&Keyframe, bool)> {
        self.keyframe.as_ref().map(|(k, own)| (k, *own))
    }
}

/// The error of a look at `step` of a run that was over by then.
pub fn ended(run: &Run, step: u64, at: u64) -> anyhow::Error {
    anyhow::anyhow!(
        "run {} has no live process after step {step} (it ended at step {at})",
        run.id
    )
}

/// Runs `run` to `step` (after that step was served) and hands the
/// machine to `look`; an error when no process is left by then.
pub fn seek<R>(
    run: &Run,
    step: u64,
    look: impl FnOnce(&mut vmm::kernel::Kernel) -> R,
) -> Result<R> {
    seek_in(run, step, look)?.map_err(|e| seek_error(run, step, e))
}

/// `seek`, but at the step that ended the run (where no process is left
/// after it) the machine is the one that step's exit found, before the
/// monitor served it: files and processes as the program last saw them
/// (`cat` and `ps` at a run's last step).
pub fn seek_or_last<R>(
    run: &Run,
    step: u64,
    look: impl FnOnce(&mut vmm::kernel::Kernel) -> R,
) -> Result<R> {
    // `look` runs once, in whichever seek reaches the machine.
    let mut look = Some(look);
    let mut once = |k: &mut vmm::kernel::Kernel| look.take().map(|f| f(k));
    let got = match seek_in(run, step, &mut once)? {
        Err(SeekError::Ended(at)) if at == step && step > 0 => {
            let before = Inside::of(run, step - 1)?;
            let pages = before.store.pages();
            let limits = &before.limits;
            at_exit(
                &before.inputs,
                before.keyframe(),
                &pages,
                step,
                limits,
                &mut once,
            )
        }
        got => got,
    };
    got.map_err(|e| seek_error(run, step, e))?
        .context("the look at the step ran twice")
}

/// The seek of `seek`, its engine's error as it came.
fn seek_in<R>(
    run: &Run,
    step: u64,
    look: impl FnOnce(&mut vmm::kernel::Kernel) -> R,
) -> Result<Result<R, SeekError>> {
    within(run, step)?;
    let inside = Inside::of(run, step)?;
    let pages = inside.store.pages();
    let keyframe = inside.keyframe();
    Ok(at_step(
        &inside.inputs,
        keyframe,
        &pages,
        step,
        &inside.limits,
        look,
    ))
}

/// A seek's error as the front ends say it.
fn seek_error(run: &Run, step: u64, e: SeekError) -> anyhow::Error {
    match e {
        SeekError::Ended(at) => ended(run, step, at),
        e => e.into(),
    }
}
