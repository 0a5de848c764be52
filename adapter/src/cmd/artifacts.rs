//! `--artifacts DIR` (`rewind run`, `rewind check`, `rewind test`): each
//! failing run as a replayable `.rwd` in DIR, with a one-line summary and
//! the commands that open it on another machine; nothing for passing runs
//! (docs/ci.md).

use super::open::command_line;
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use vmm::check::label::Label;
use vmm::check::shard::{export_atomic, write_atomic};
use vmm::check::Report;
use vmm::store::Store;

#[derive(Args, Debug, Default, Clone)]
pub struct ArtifactArgs {
    /// Write each failing run (a failing exit, a violation) into DIR as a
    /// replayable .rwd, with RUN.txt: a one-line summary and the commands
    /// that open it; nothing for passing runs.
    #[arg(long, value_name = "DIR")]
    pub artifacts: Option<PathBuf>,
}

/// A failing run to keep: what it is, and where to open it.
pub struct Failure<'a> {
    pub run: &'a str,
    pub summary: String,
    pub step: Option<u64>,
    /// The passing run to compare it with, carried along.
    pub compare: Option<&'a str>,
}

/// Writes `f` into `dir`: `RUN.rwd` (and the compared run's), and `RUN.txt`.
pub fn write(store: &Store, dir: &Path, f: &Failure) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut imports = Vec::new();
    for run in std::iter::once(f.run).chain(f.compare) {
        let name = format!("{run}.rwd");
        export_atomic(store, run, dir, &name)
            .with_context(|| format!("cannot write run {run} into {}", dir.display()))?;
        imports.push(format!("rewind import {}", dir.join(name).display()));
    }
    let open = format!(
        "{} && {}",
        imports.join(" && "),
        command_line(f.run, f.step, f.compare)
    );
    let text = format!("{}\n{open}\n", f.summary);
    write_atomic(dir, &format!("{}.txt", f.run), text.as_bytes())?;
    eprintln!(
        "rewind: artifact {}: {}",
        dir.join(format!("{}.rwd", f.run)).display(),
        f.summary
    );
    eprintln!("rewind: open it elsewhere: {open}");
    Ok(())
}

/// The failing run of a check's report, if it found one: the narrowed
/// pair's (opened at the deciding step, against the other), or the first
/// violating run.
pub fn of_check<'a>(name: &str, r: &'a Report) -> Option<Failure<'a>> {
    let bad = r.first_violation()?;
    let (p, why) = bad.violations.first()?;
    let mut summary = format!("check of {name}: {} violates {p}: {why}", bad.label.trim());
    let Some(n) = &r.narrowed else {
        return Some(Failure {
            run: &bad.id,
            summary,
            step: None,
            compare: None,
        });
    };
    summary.push_str(&format!("; {}", n.sentence));
    // Open the failing side; without a failing one, the run with the step.
    let failing = n.run_called(Label::Failing).unwrap_or(&n.with.run);
    let other = [&n.with, &n.without]
        .into_iter()
        .map(|s| s.run.as_str())
        .find(|s| *s != failing);
    Some(Failure {
        run: failing,
        summary,
        step: n.deciding.last().map(|p| p.step),
        compare: other,
    })
}
