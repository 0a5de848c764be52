//! `rewind export`: a run as one file, to carry to another machine.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    after_help = "Without --replayable the file holds the run's manifest, meta, events, \
                        output, thread switches and bookmarks: enough to read it anywhere. With \
                        it, also standard input, the image (the program file, or the root \
                        directory's files) and the keyframes with their pages, so that `rewind \
                        replay` works on another machine with the same CPU vendor."
)]
pub struct ExportArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// Also carry the inputs and keyframes, so the run replays elsewhere.
    #[arg(long)]
    pub replayable: bool,
    /// The file to write (replaced if it exists).
    #[arg(short = 'o', long = "output", value_name = "FILE.rwd", required = true)]
    pub output: PathBuf,
    /// Print what was written as one JSON object.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: ExportArgs) -> Result<i32> {
    let store = crate::app::store()?;
    let run = crate::app::resolve(&args.run.spec)?;
    let s = store
        .export(&run, args.replayable, &args.output)
        .with_context(|| format!("cannot export run {}", run.id))?;
    for w in &s.warnings {
        eprintln!("rewind: warning: {w}");
    }
    if args.json {
        let mut v = serde_json::to_value(&s)?;
        v["run"] = run.id.clone().into();
        v["file"] = args.output.display().to_string().into();
        println!("{v}");
    } else {
        let what = if args.replayable {
            format!(
                "replayable: {} image file{}, {} page{}",
                s.image_files,
                if s.image_files == 1 { "" } else { "s" },
                s.pages,
                if s.pages == 1 { "" } else { "s" }
            )
        } else {
            "not replayable: no inputs (--replayable adds them)".to_string()
        };
        println!(
            "exported run {} to {} ({}; {})",
            run.id,
            args.output.display(),
            super::gc::bytes(s.bytes),
            what
        );
    }
    Ok(0)
}
