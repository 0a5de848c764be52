//! Forking a run: a new run equal to it up to a step, then following
//! another schedule or seed.

use crate::progress::{Progress, Watched};
use anyhow::{Context, Result};
use vmm::record::diff::first_divergence;
use vmm::record::fork::{fork_manifest, ForkWith};
use vmm::run::RunInputs;
use vmm::store::RunDetails;

/// How a fork's run is shown while it runs.
pub enum Shown {
    /// Its output, live.
    Echo,
    /// A progress line on a terminal.
    Progress,
    /// Nothing.
    Quiet,
}

/// A fork made.
pub struct Forked {
    pub run: vmm::store::Run,
    pub outcome: vmm::run::Outcome,
    /// The step of the first event where it differs from its parent.
    pub first_difference: Option<u64>,
}

/// Forks `parent` at `step`: equal to it up to the step, then `with`.
pub fn fork(
    store: &vmm::store::Store,
    parent: &vmm::store::Run,
    step: u64,
    with: ForkWith,
    show: Shown,
) -> Result<Forked> {
    fork_points(store, parent, step, with, None, show)
}

/// `fork`, with `points` after the step when given (else the parent's).
pub fn fork_points(
    store: &vmm::store::Store,
    parent: &vmm::store::Run,
    step: u64,
    with: ForkWith,
    points: Option<vmm::run::Points>,
    show: Shown,
) -> Result<Forked> {
    if step > parent.meta.steps {
        crate::util::usage!(
            "step {} is past the end of run {} ({} steps)",
            step,
            parent.id,
            parent.meta.steps
        );
    }
    let inputs = parent
        .inputs()
        .with_context(|| format!("cannot fork run {}", parent.id))?;
    let mut manifest = fork_manifest(
        &parent.id,
        &inputs.manifest,
        &parent.meta.perturbed,
        step,
        with,
    );
    if let Some(p) = points {
        manifest.set_points_after(step, p);
    }
    let inputs = RunInputs { manifest, ..inputs };
    let mut rec = store.begin(&inputs.manifest, &inputs.stdin)?;
    rec.set_echo(matches!(show, Shown::Echo));
    let limits = parent.limits();
    // From the last keyframe at or before the step, when the parent kept one.
    let kf = super::usable_keyframe(parent, store, step).map(|(k, _)| k);
    // Said on the command line (the timeline benchmark checks it); a quiet
    // fork (the DAP server's) says nothing.
    match (&kf, &show) {
        (_, Shown::Quiet) => {}
        (Some(k), _) => eprintln!("rewind: forking from the keyframe at step {}", k.step),
        (None, _) => {
            eprintln!("rewind: forking from step 0 (no keyframe at or before step {step})")
        }
    }
    let outcome = match show {
        Shown::Progress => {
            let mut shown = Watched {
                inner: &mut rec,
                watch: Progress::new("forking", parent.meta.steps),
            };
            parent.run_fork(store, kf.as_ref(), &inputs, &limits, &mut shown)?
        }
        _ => parent.run_fork(store, kf.as_ref(), &inputs, &limits, &mut rec)?,
    };
    super::warn_all(rec.take_warnings());
    let run = rec.finish(
        &outcome,
        &RunDetails {
            name: parent.meta.name.clone(),
            image: inputs.image.clone(),
            timeout: limits.timeout,
        },
    )?;
    let (a, b) = (parent.events()?, run.events()?);
    let first_difference = first_divergence(&a, &b, 0)
        .map(|d| d.right_step().or(d.left_step()).unwrap_or(outcome.steps));
    Ok(Forked {
        run,
        outcome,
        first_difference,
    })
}
