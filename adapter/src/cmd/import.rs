//! `rewind import`: adds a run exported with `rewind export` to the store.

use anyhow::{anyhow, Result};
use clap::Args;
use serde::Serialize;
use std::path::PathBuf;
use vmm::store::archive::ArchiveError;

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The file `rewind export` wrote.
    #[arg(value_name = "FILE.rwd")]
    pub file: PathBuf,
    /// Print the imported run as one JSON object: id, name, status,
    /// replayable, already.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: ImportArgs) -> Result<i32> {
    let store = crate::app::store()?;
    let shown = args.file.display();
    let s = match store.import(&args.file) {
        Ok(s) => s,
        Err(ArchiveError::Refused(why)) => {
            return Err(anyhow!(
                "cannot import {shown}: {why}; nothing was imported"
            ))
        }
        Err(ArchiveError::Store(e)) => {
            return Err(anyhow!(e).context(format!("cannot import {shown}")))
        }
    };
    let r = &s.run;
    if args.json {
        let v = crate::util::json_value(&ImportJson {
            id: &r.id,
            name: &r.meta.name,
            status: &r.meta.status,
            replayable: s.replayable,
            already: s.already,
        });
        println!("{v}");
    } else if s.already {
        println!(
            "run {} is already in this store: nothing imported (`rewind remove` it first to replace it)",
            r.id
        );
    } else {
        println!(
            "imported run {}  {}  {} steps  {}  ({})",
            r.id,
            r.meta.status,
            r.meta.steps,
            r.meta.name,
            if s.replayable {
                "replayable"
            } else {
                "not replayable: exported without --replayable"
            }
        );
    }
    Ok(0)
}

/// `rewind import --json`: the run imported, or already there.
#[derive(Serialize)]
struct ImportJson<'a> {
    id: &'a str,
    name: &'a str,
    status: &'a str,
    replayable: bool,
    already: bool,
}
