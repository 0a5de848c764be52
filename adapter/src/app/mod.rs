//! The application layer: the use cases the front ends share, with typed
//! inputs. The CLI (`cmd`), the debug adapter (`dap`), the language server
//! (`lsp`) and the gdb stub (`gdb`) call these and do only their own
//! protocol; none of them imports another (`adapter/tests/layers.rs`).

pub mod check;
pub mod fork;
pub mod inside;
pub mod kept;
pub mod nix;
pub mod record;
mod report_json;
pub mod runs;

use anyhow::Result;
use vmm::store::{Run, Store, StoreError};

/// The store of runs, from the environment.
pub fn store() -> Result<Store> {
    Ok(Store::from_env()?)
}

/// Resolves a RUN argument (`resolve_in` the store of the environment).
pub fn resolve(spec: &str) -> Result<Run> {
    resolve_in(&store()?, spec)
}

/// Resolves a RUN argument in `store`. A run a check recorded and did not
/// keep is named as such, with where to find the command that makes it
/// again.
pub fn resolve_in(store: &Store, spec: &str) -> Result<Run> {
    store.resolve(spec).map_err(|e| match e {
        // The store's own words name the run: no context repeats it.
        StoreError::NotFound(_) => match kept::find(store, spec) {
            Some(n) => anyhow::anyhow!(
                "run `{spec}` was not kept: it passed in the check of run {} and was removed \
                 when the check ended; `rewind show {spec}` prints the command that makes it again",
                n.check.base
            ),
            None => e.into(),
        },
        e => anyhow::Error::new(e).context(format!("run `{spec}`")),
    })
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
) -> Option<(vmm::run::keyframe::Keyframe, bool)> {
    let usable = run.usable_keyframe(store, step);
    warn_all(usable.warning);
    usable.keyframe
}
