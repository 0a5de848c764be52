//! `rewind log`: a run's output as it was written.

use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct LogArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// Only what was written to this descriptor (1 stdout, 2 stderr).
    #[arg(long, value_name = "N")]
    pub fd: Option<i32>,
}

pub fn main(args: LogArgs) -> Result<i32> {
    let run = crate::app::resolve(&args.run.spec)?;
    let ctx = || format!("run {}: cannot read its output", run.id);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match args.fd {
        None => out.write_all(&run.output().with_context(ctx)?)?,
        Some(fd) => {
            for chunk in run.output_chunks().with_context(ctx)? {
                if chunk.fd == fd {
                    out.write_all(&chunk.bytes)?;
                }
            }
        }
    }
    out.flush()?;
    Ok(0)
}
