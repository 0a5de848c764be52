//! `rewind cat` and `rewind ps`: the machine at a step of a run, reached by
//! seeking (the last keyframe at or before the step, then forward).

use crate::app::inside::{run_at, seek_or_last};
use anyhow::Result;
use clap::Args;
use std::io::Write;

/// `rewind cat`'s exit status when the file did not exist at that step: the
/// answer, where trouble (an unknown run, a step past the end) exits 2.
pub const NO_SUCH_FILE: i32 = 1;

#[derive(Args, Debug)]
pub struct CatArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// The step after which to look.
    #[arg(value_name = "STEP")]
    pub step: u64,
    /// The file, as a guest path.
    #[arg(value_name = "PATH")]
    pub path: String,
}

#[derive(Args, Debug)]
pub struct PsArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// The step after which to look.
    #[arg(long = "at", value_name = "STEP")]
    pub at: u64,
}

pub fn cat(args: CatArgs) -> Result<i32> {
    let run = run_at(&args.run.spec, args.step)?;
    let path = args.path.clone();
    let got = seek_or_last(&run, args.step, |k| {
        (k.file_contents(&path), k.vfs.tree.image.view().missed())
    })?;
    match got {
        (Some(bytes), _) => {
            std::io::stdout().write_all(&bytes)?;
            Ok(0)
        }
        (None, Some(_)) => {
            eprintln!(
                "rewind: {}: run {} never read this file, and its root changed since \
                 (a run keeps only the files it read)",
                args.path, run.id
            );
            Ok(2)
        }
        (None, None) => {
            eprintln!(
                "rewind: {} did not exist at step {} of run {}",
                args.path, args.step, run.id
            );
            Ok(NO_SUCH_FILE)
        }
    }
}

pub fn ps(args: PsArgs) -> Result<i32> {
    let run = run_at(&args.run.spec, args.at)?;
    for line in seek_or_last(&run, args.at, |k| k.process_lines())? {
        println!("{line}");
    }
    Ok(0)
}
