//! `rewind nix`: a Nix derivation's build as a recorded run, its outputs
//! checked against the host's store and its substituters.

use super::run::{record, RunArgs};
use crate::app::nix::{check_outputs, prepare, OutputCheck, Verdict};
use crate::app::store;
use crate::util::usage;
use anyhow::Result;
use clap::Args;
use serde::Serialize;
use vmm::run::ExitStatus;

#[derive(Args, Debug)]
#[command(
    override_usage = "rewind nix [OPTIONS] DRV\n       rewind nix [OPTIONS] FILE.nix -A ATTR\n       rewind nix [OPTIONS] FLAKE#ATTR",
    after_help = "The host's Nix names the derivation and builds or substitutes its inputs \
                  (never its outputs). The build runs with the input closure at its /nix/store \
                  paths and an empty /build as its image, the derivation's environment (with \
                  HOME=/homeless-shelter, NIX_BUILD_TOP=TMPDIR=/build, NIX_BUILD_CORES from \
                  --cores), and is named after the derivation.\n\
                  When the build succeeds, each output's NAR hash is printed with what your \
                  store and each configured substituter say of it. Exit status: the builder's \
                  when it failed, 1 when an output differs or was not made, else 0."
)]
pub struct NixArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Print the outcome and the outputs' hashes as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Refuses the options a derivation gives itself, for `rewind VERB`.
pub(crate) fn refuse_image_flags(args: &RunArgs, verb: &str) -> Result<()> {
    if args.root.is_some() || args.example.is_some() || !args.env.is_empty() || args.cwd != "/" {
        usage!("rewind {verb}: the derivation gives the image, environment and directory (no --root, --example, --env or --cwd)");
    }
    Ok(())
}

/// INSTALLABLE and its `-A ATTR`, from the words after the options.
fn installable(args: &RunArgs) -> Result<(String, Option<String>)> {
    refuse_image_flags(args, "nix")?;
    match args.command.as_slice() {
        [i] => Ok((i.clone(), None)),
        [i, a, attr] if a == "-A" || a == "--attr" => Ok((i.clone(), Some(attr.clone()))),
        [] => usage!("rewind nix: give a derivation: DRV, FILE.nix -A ATTR or FLAKE#ATTR"),
        _ => usage!("rewind nix: one derivation: DRV, FILE.nix -A ATTR or FLAKE#ATTR"),
    }
}

pub fn main(mut args: NixArgs) -> Result<i32> {
    let (inst, attr) = installable(&args.run)?;
    let store = store()?;
    store.prepare()?;
    let mut build = prepare(&inst, attr.as_deref(), &args.run.spec())?;
    let limits = build.limits(args.run.timeout);
    // JSON on stdout: the build's output is recorded, not shown.
    args.run.quiet |= args.json;
    let (id, outcome) = record(&store, &mut build.prepared, &limits, &args.run)?;
    let built = outcome.status == ExitStatus::Exited(0);
    let checks = if built {
        check_outputs(&build, &outcome)?
    } else {
        Vec::new()
    };
    if args.json {
        let v = crate::util::json_value(&NixJson {
            run: &id,
            drv: &build.drv_path,
            name: &build.prepared.name,
            status: outcome.status.to_string(),
            steps: outcome.steps,
            outputs: checks.iter().map(OutputJson::of).collect(),
        });
        println!("{v}");
    } else {
        for c in &checks {
            for line in output_lines(c) {
                println!("{line}");
            }
        }
    }
    Ok(if !built {
        outcome.status.shell_code()
    } else if checks.iter().any(OutputCheck::differs) {
        1
    } else {
        0
    })
}

/// One line for the store, one for each cache.
fn output_lines(c: &OutputCheck) -> Vec<String> {
    let Some(ours) = c.nar_hash else {
        return vec![format!("{} was not made by the build", c.path)];
    };
    let head = format!("{} {ours}", c.path);
    let mut lines: Vec<String> = c
        .store
        .iter()
        .map(|v| match v {
            Verdict::Matches => format!("{head} matches your store"),
            Verdict::Differs(h) => format!("{head} differs from your store (yours {h})"),
            Verdict::Absent => format!("{head} not in your store"),
            Verdict::Unknown(e) => format!("{head} your store could not be asked: {e}"),
        })
        .collect();
    lines.extend(c.caches.iter().map(|(url, v)| match v {
        Verdict::Matches => format!("{head} matches cache {url}"),
        Verdict::Differs(h) => format!("{head} differs from cache {url} (its {h})"),
        Verdict::Absent => format!("{head} not in cache {url}"),
        Verdict::Unknown(e) => format!("{head} cache {url} could not be asked: {e}"),
    }));
    lines
}

/// `rewind nix --json`.
#[derive(Serialize)]
struct NixJson<'a> {
    run: &'a str,
    drv: &'a str,
    name: &'a str,
    status: String,
    steps: u64,
    outputs: Vec<OutputJson<'a>>,
}

/// An output's NAR hash, and what your store and each cache say of it.
#[derive(Serialize)]
struct OutputJson<'a> {
    name: &'a str,
    path: &'a str,
    #[serde(rename = "narHash")]
    nar_hash: Option<String>,
    store: Option<VerdictJson<'a>>,
    caches: Vec<VerdictJson<'a>>,
}

impl<'a> OutputJson<'a> {
    fn of(c: &'a OutputCheck) -> OutputJson<'a> {
        OutputJson {
            name: &c.name,
            path: &c.path,
            nar_hash: c.nar_hash.map(|h| h.to_nix()),
            store: c.store.as_ref().map(|v| VerdictJson::of(v, None)),
            caches: c
                .caches
                .iter()
                .map(|(url, v)| VerdictJson::of(v, Some(url)))
                .collect(),
        }
    }
}

/// `{"verdict", "theirs", "error"}`, and a cache's `url`.
#[derive(Serialize)]
struct VerdictJson<'a> {
    verdict: &'static str,
    theirs: Option<String>,
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
}

impl<'a> VerdictJson<'a> {
    fn of(v: &'a Verdict, url: Option<&'a str>) -> VerdictJson<'a> {
        VerdictJson {
            verdict: v.word(),
            theirs: v.theirs().map(|h| h.to_nix()),
            error: match v {
                Verdict::Unknown(e) => Some(e.as_str()),
                _ => None,
            },
            url,
        }
    }
}
