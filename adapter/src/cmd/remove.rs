//! `rewind remove`: removes runs, with every run forked from them.

use anyhow::{Context, Result};
use clap::Args;
use vmm::store::lock::StoreLock;
use vmm::store::maintain::with_descendants;
use vmm::store::{Run, Store};

#[derive(Args, Debug)]
pub struct RemoveArgs {
    /// The runs: ids, unique id prefixes, @, @N or names.
    #[arg(value_name = "RUN", required = true)]
    pub runs: Vec<String>,
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn main(args: RemoveArgs) -> Result<i32> {
    let store = crate::app::store()?;
    let _lock = store.lock_exclusive(&mut || {
        eprintln!("rewind: waiting for the runs being recorded in this store to finish...")
    })?;
    // Resolved under the lock: every RUN first, so that a wrong one removes nothing.
    let mut roots = Vec::new();
    for spec in &args.runs {
        let run = store
            .resolve(spec)
            .with_context(|| format!("run `{spec}`"))?;
        roots.push(run.id);
    }
    let all = store.list()?;
    let doomed: Vec<(Run, String)> = with_descendants(&all, &roots)
        .into_iter()
        .map(|r| {
            let fork = match &r.manifest.fork_of {
                Some(f) => format!("  (fork of {} at {})", f.parent, f.step),
                None => String::new(),
            };
            (r, fork)
        })
        .collect();
    remove_all(&store, &_lock, &doomed, args.dry_run, ("removed", "run"))?;
    Ok(0)
}

/// Removes each run (or, with `dry_run`, says it would), a line each with
/// its note, then a summary: `rewind: removed 3 runs (1.2 MB)`, with
/// `words` = (`removed`, `run`). `remove` and `prune` both end here.
pub fn remove_all(
    store: &Store,
    lock: &StoreLock,
    doomed: &[(Run, String)],
    dry_run: bool,
    words: (&str, &str),
) -> Result<()> {
    let mut freed = 0u64;
    for (r, note) in doomed {
        if dry_run {
            println!("would remove {}  {}{note}", r.id, r.meta.name);
        } else {
            freed += store.remove_run(lock, r)?;
            println!("removed {}  {}{note}", r.id, r.meta.name);
        }
    }
    if !dry_run {
        let (did, noun) = words;
        eprintln!(
            "rewind: {did} {} {noun}{} ({}); `rewind gc` frees the pages no run uses",
            doomed.len(),
            if doomed.len() == 1 { "" } else { "s" },
            super::gc::bytes(freed)
        );
    }
    Ok(())
}
