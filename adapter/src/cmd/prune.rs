//! `rewind prune --identical`: removes forks that ran exactly as an older
//! run did.

use crate::util::usage;
use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Remove forks whose events, output and ending are those of an older
    /// run (a fork that has a fork that stays is kept).
    #[arg(long)]
    pub identical: bool,
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn main(args: PruneArgs) -> Result<i32> {
    if !args.identical {
        usage!("say what to prune: --identical (forks that ran exactly as an older run did)");
    }
    let store = super::store()?;
    let lock = store.lock_exclusive(&mut || {
        eprintln!("rewind: waiting for the runs being recorded in this store to finish...")
    })?;
    let doomed = store.identical_forks()?;
    let mut freed = 0;
    for (r, same) in &doomed {
        let verb = if args.dry_run {
            "would remove"
        } else {
            freed += store.remove_run(&lock, r)?;
            "removed"
        };
        println!("{verb} {}  {}  (ran as {same} did)", r.id, r.meta.name);
    }
    if !args.dry_run {
        eprintln!(
            "rewind: pruned {} fork{} ({}); `rewind gc` frees the pages no run uses",
            doomed.len(),
            if doomed.len() == 1 { "" } else { "s" },
            super::gc::bytes(freed)
        );
    }
    Ok(0)
}
