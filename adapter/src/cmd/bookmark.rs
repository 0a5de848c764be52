//! `rewind bookmark` and `rewind bookmarks`: notes at steps of a run, kept
//! with it and carried by its exports.

use crate::util::usage;
use anyhow::Result;
use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct BookmarkArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// The step the note is about.
    #[arg(value_name = "STEP")]
    pub step: u64,
    /// The note.
    #[arg(value_name = "NOTE")]
    pub note: String,
}

#[derive(Args, Debug)]
pub struct BookmarksArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// One JSON object a line: step, note, created.
    #[arg(long)]
    pub json: bool,
}

pub fn add(args: BookmarkArgs) -> Result<i32> {
    let store = crate::app::store()?;
    let run = crate::app::resolve(&args.run.spec)?;
    if args.step > run.meta.steps {
        usage!(
            "step {} is past the end of run {} ({} steps)",
            args.step,
            run.id,
            run.meta.steps
        );
    }
    if args.note.trim().is_empty() {
        usage!("the note is empty");
    }
    let b = store.add_bookmark(&run, args.step, &args.note)?;
    println!("bookmarked step {} of run {}: {}", b.step, run.id, b.note);
    Ok(0)
}

pub fn list(args: BookmarksArgs) -> Result<i32> {
    let run = crate::app::resolve(&args.run.spec)?;
    let list = run.bookmarks()?;
    let stdout = std::io::stdout();
    let mut o = std::io::BufWriter::new(stdout.lock());
    let w = list
        .iter()
        .map(|b| b.step.to_string().len())
        .max()
        .unwrap_or(0);
    for b in &list {
        if args.json {
            writeln!(o, "{}", serde_json::to_string(b)?)?;
        } else {
            writeln!(o, "{:>w$}  {}", b.step, b.note.replace('\n', " "))?;
        }
    }
    o.flush()?;
    Ok(0)
}
