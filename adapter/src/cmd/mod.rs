//! One module per command.

pub mod bookmark;
pub mod check;
pub mod diff;
pub mod doctor;
pub mod events;
pub mod export;
pub mod fork;
pub mod gc;
pub mod gdb;
pub mod import;
pub mod inspect;
pub mod log;
pub mod ls;
pub mod open;
pub mod prune;
pub mod remove;
pub mod replay;
pub mod run;
pub mod shell;
pub mod show;
pub mod threads;
pub mod where_;

use anyhow::{Context, Result};
use vmm::store::{Run, Store};

/// A run and a stretch of its steps (`rewind events`, `rewind threads`).
#[derive(clap::Args, Debug)]
pub struct RunSteps {
    /// The run: id, unique id prefix, @, @N or name.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// From this step.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub from: u64,
    /// To this step [default: the end of the run].
    #[arg(long, value_name = "S")]
    pub to: Option<u64>,
}

/// The store of runs, from the environment.
pub fn store() -> Result<Store> {
    Ok(Store::from_env()?)
}

/// Resolves a RUN argument.
pub fn resolve(spec: &str) -> Result<Run> {
    let store = store()?;
    store.resolve(spec).with_context(|| format!("run `{spec}`"))
}

/// Prints what the store went on without, one `rewind: warning:` line each.
pub fn warn_all(warnings: impl IntoIterator<Item = impl std::fmt::Display>) {
    for w in warnings {
        eprintln!("rewind: warning: {w}");
    }
}

/// The keyframe to start from to reach `step` of `run` (see
/// `Run::usable_keyframe`), saying on stderr when its keyframes are unusable.
pub fn usable_keyframe(
    run: &Run,
    store: &Store,
    step: u64,
) -> Option<(vmm::record::keyframe::Keyframe, bool)> {
    let usable = run.usable_keyframe(store, step);
    warn_all(usable.warning);
    usable.keyframe
}
