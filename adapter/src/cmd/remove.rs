//! `rewind remove`: removes runs, with every run forked from them.

use anyhow::{Context, Result};
use clap::Args;
use vmm::store::maintain::with_descendants;

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
    let store = super::store()?;
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
    let doomed = with_descendants(&all, &roots);
    let mut freed = 0u64;
    for r in &doomed {
        let fork = match &r.manifest.fork_of {
            Some(f) => format!("  (fork of {} at {})", f.parent, f.step),
            None => String::new(),
        };
        if args.dry_run {
            println!("would remove {}  {}{fork}", r.id, r.meta.name);
        } else {
            freed += store.remove_run(&_lock, r)?;
            println!("removed {}  {}{fork}", r.id, r.meta.name);
        }
    }
    if !args.dry_run {
        eprintln!(
            "rewind: removed {} run{} ({}); `rewind gc` frees the pages no run uses",
            doomed.len(),
            if doomed.len() == 1 { "" } else { "s" },
            super::gc::bytes(freed)
        );
    }
    Ok(0)
}
