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
    let store = crate::app::store()?;
    let lock = store.lock_exclusive(&mut || {
        eprintln!("rewind: waiting for the runs being recorded in this store to finish...")
    })?;
    let doomed: Vec<_> = store
        .identical_forks()?
        .into_iter()
        .map(|(r, same)| (r, format!("  (ran as {same} did)")))
        .collect();
    super::remove::remove_all(&store, &lock, &doomed, args.dry_run, ("pruned", "fork"))?;
    Ok(0)
}
