//! Checking a program: rerun it under perturbed schedules, find one that
//! violates a property, and narrow it to the step that decides it. The
//! request is what `rewind check`'s options, a debug session's `check`
//! launch and its `rewind/check` request say; the report is kept for the
//! readers that were not watching.

use super::record::{prepare, RunSpec};
use crate::util::usage;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;
use vmm::check::property::Property;
use vmm::check::{CheckSpec, Entry, Parent, Report, Strategy};
use vmm::run::Points;
use vmm::run::{Limits, RunInputs};
use vmm::store::Store;

/// Schedules a pinned search tries when not said.
pub const DEFAULT_SCHEDULES: u64 = 64;
/// The strategy when the points alone pin the search (chosen by the
/// numbers in docs/design.md, "Search strategies").
pub const DEFAULT_STRATEGY: Strategy = Strategy::Random;
/// What the portfolio spends when neither a count nor a budget is said.
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(60);
/// The most schedules a portfolio plans when its budget alone bounds it.
const PORTFOLIO_CAP: u64 = 20_000;

/// The default search (docs/design.md, "A portfolio by default"): the
/// cheap system-call points' random schedules first in each round, then
/// race-directed points' random, PCT of depths 2 and 3 and `bounded`; after
/// two rounds, random and PCT depth 3 on memory points join, widening to
/// every shared access (their schedule 0 is recorded only then).
pub const PORTFOLIO: [Entry; 7] = [
    entry(Strategy::Random, 0, Points::Syscalls),
    entry(Strategy::Random, 0, Points::Races),
    entry(Strategy::Pct, 2, Points::Races),
    entry(Strategy::Pct, 3, Points::Races),
    entry(Strategy::Bounded, 0, Points::Races),
    entry(Strategy::Random, 0, Points::Memory),
    entry(Strategy::Pct, 3, Points::Memory),
];

/// The portfolio's own points: its schedule 0 (the report's) learns where
/// races can be first.
pub const PORTFOLIO_POINTS: Points = Points::Races;

const fn entry(strategy: Strategy, depth: u32, points: Points) -> Entry {
    Entry {
        strategy,
        depth,
        points,
    }
}

/// Which runs a check leaves in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Schedule 0, the violating runs and the narrowed pair.
    Found,
    /// Every run the check made.
    All,
}
/// PCT's depth when not said.
pub const DEFAULT_DEPTH: u32 = 3;

/// A check's scheduling points when not said: memory points find races
/// with no system call in their window (docs/design.md, "Memory scheduling
/// points").
pub const DEFAULT_POINTS: Points = Points::Memory;

/// A check as the user asked for it.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    /// The program's run (or, with `from_run`, the window and points).
    pub run: RunSpec,
    /// How many schedules (`None`: as many as the budget allows, or
    /// `DEFAULT_SCHEDULES` for a pinned search).
    pub schedules: Option<u64>,
    /// Start no schedule after this long.
    pub budget: Option<Duration>,
    /// Try every schedule, then report how many violate.
    pub all: bool,
    /// Schedules run at once (`None`: one per core).
    pub jobs: Option<usize>,
    /// Narrow the first violating schedule.
    pub narrow: bool,
    /// Properties as written (`Property::parse`).
    pub properties: Vec<String>,
    /// A file of properties, one a line.
    pub properties_file: Option<PathBuf>,
    /// Say where each thread was at the deciding step.
    pub want_where: bool,
    /// Random, Bounded or Pct (`seeds` makes it Seeds); `None`, with no
    /// points, seeds or run either, is the portfolio.
    pub strategy: Option<Strategy>,
    pub depth: u32,
    pub check_seed: u64,
    /// Check from a recorded run: schedules equal to it up to `run.schedule_from`.
    pub from_run: Option<String>,
    /// Try the run's own randomness seed and N others.
    pub seeds: Option<u64>,
    /// A Nix derivation's build instead of a program: INSTALLABLE and its
    /// `-A ATTR` (`app::nix::installable_words`).
    pub installable: Option<(String, Option<String>)>,
}

impl Default for CheckRequest {
    fn default() -> CheckRequest {
        CheckRequest {
            run: RunSpec::default(),
            schedules: None,
            budget: None,
            all: false,
            jobs: None,
            narrow: true,
            properties: Vec::new(),
            properties_file: None,
            want_where: false,
            strategy: None,
            depth: DEFAULT_DEPTH,
            check_seed: 0,
            from_run: None,
            seeds: None,
            installable: None,
        }
    }
}

fn properties(req: &CheckRequest) -> Result<Vec<Property>> {
    let mut out = Vec::new();
    for p in &req.properties {
        match Property::parse(p, None) {
            Ok(p) => out.push(p),
            Err(e) => usage!("{e}"),
        }
    }
    if let Some(f) = &req.properties_file {
        match Property::parse_file(f) {
            Ok(ps) => out.extend(ps),
            Err(e) => usage!("{e}"),
        }
    }
    if out.is_empty() {
        out.push(Property::EndsDifferently);
    }
    Ok(out)
}

/// Whether the request pins one search: anything that does pins it as
/// before the portfolio.
fn pinned(req: &CheckRequest) -> bool {
    req.strategy.is_some()
        || req.run.points.is_some()
        || req.seeds.is_some()
        || req.from_run.is_some()
}

/// The outputs properties are a Nix build's: `store-outputs` is given
/// your store's NAR hashes of `outputs`.
fn outputs_properties(props: &mut [Property], nix: bool, outputs: &[String]) -> Result<()> {
    for p in props.iter_mut() {
        match p {
            Property::SameOutputs | Property::StoreOutputs(_) if !nix => usage!(
                "property {}: a Nix build's outputs, for `rewind check INSTALLABLE`",
                p.name()
            ),
            Property::StoreOutputs(want) => {
                *want = super::nix::store_digests(outputs)?;
                if want.is_empty() {
                    usage!("property store-outputs: your store has none of the outputs (nix-build it first)");
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The check's schedule 0: its inputs, its name and, for a check from a
/// run's window, that run.
fn base(
    req: &CheckRequest,
    store: &Store,
    stdin: impl FnOnce() -> Vec<u8>,
) -> Result<(RunInputs, String, Option<Parent>)> {
    Ok(match &req.from_run {
        Some(spec) => {
            if req.run.schedule_from.is_none() {
                usage!("--run needs --schedule-from STEP");
            }
            let run = super::resolve(spec)?;
            let inputs = run
                .inputs()
                .with_context(|| format!("cannot check from run {}", run.id))?;
            // The check's points from the window on: a run's schedules
            // are forks of it there.
            let mut inputs = inputs;
            if let (Some(p), Some(from)) = (req.run.points, req.run.schedule_from) {
                inputs.manifest.set_points_after(from, p);
            }
            let parent = Parent {
                id: run.id.clone(),
                applied: run.meta.perturbed.clone(),
            };
            (inputs, run.meta.name.clone(), Some(parent))
        }
        None => {
            let prepared = match &req.installable {
                // A builder's standard input is /dev/null.
                Some((i, attr)) => super::nix::prepare(i, attr.as_deref(), &req.run)?.prepared,
                None => {
                    let mut p = prepare(&req.run, store)?;
                    p.set_stdin(stdin());
                    p
                }
            };
            // Schedule 0 of a check is its base: the window is the check's.
            let mut inputs = prepared.inputs;
            let own = match pinned(req) {
                true => DEFAULT_POINTS,
                false => PORTFOLIO_POINTS,
            };
            inputs.manifest.points = req.run.points.unwrap_or(own);
            inputs.manifest.schedule_from = None;
            inputs.manifest.schedule_until = None;
            (inputs, prepared.name, None)
        }
    })
}

/// What a check of this request runs; `stdin` gives standard input's
/// bytes once the program is known to be runnable.
pub fn spec(
    req: &CheckRequest,
    store: &Store,
    stdin: impl FnOnce() -> Vec<u8>,
) -> Result<CheckSpec> {
    if req.run.schedule != 0 || req.run.pct.is_some() {
        usage!("--schedule and --pct are for `rewind run`; `rewind check` tries schedules itself (--strategy)");
    }
    let mut props = properties(req)?;
    store.prepare()?;
    let (base, name, parent) = base(req, store, stdin)?;
    let strategy = match req.seeds {
        Some(_) => Strategy::Seeds,
        None => req.strategy.unwrap_or(DEFAULT_STRATEGY),
    };
    let (portfolio, schedules, budget) = match (pinned(req), req.seeds.or(req.schedules)) {
        (true, n) => (Vec::new(), n.unwrap_or(DEFAULT_SCHEDULES), req.budget),
        (false, Some(n)) => (PORTFOLIO.to_vec(), n, req.budget),
        (false, None) => (
            PORTFOLIO.to_vec(),
            PORTFOLIO_CAP,
            Some(req.budget.unwrap_or(DEFAULT_BUDGET)),
        ),
    };
    // A Nix build's outputs are kept at its end, for the outputs properties.
    let nix = matches!(base.image, vmm::image::Image::Store(_));
    let keep = match nix {
        true => super::nix::output_paths(&base.manifest.env),
        false => Vec::new(),
    };
    outputs_properties(&mut props, nix, &keep)?;
    Ok(CheckSpec {
        base,
        name,
        limits: Limits {
            timeout: req.run.timeout,
            keep,
            ..Default::default()
        },
        digest: nix.then_some(super::nix::nar_digest as vmm::check::outputs::Digest),
        schedules,
        all: req.all,
        jobs: req
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        narrow: req.narrow,
        properties: props,
        strategy,
        depth: req.depth,
        check_seed: req.check_seed,
        from: req.run.schedule_from,
        until: req.run.schedule_until,
        want_where: req.want_where,
        parent,
        portfolio,
        budget,
    })
}

/// Keeps a check's report for readers that were not watching (the language
/// server, docs/lsp.md; the debug adapter's deciding mark), whether the check
/// ran here or in a debug session, and drops the runs `what` does not keep
/// (`kept.rs`); returns the `--json` report. The runs `elsewhere` (a
/// merge's, made on the shards' machines) are not kept here either.
pub fn keep(
    store: &Store,
    report: &Report,
    what: Keep,
    remake: super::kept::Remake,
    elsewhere: &[vmm::store::Run],
) -> serde_json::Value {
    let mut json = super::report_json::json_report(report);
    let dropped = match what {
        Keep::Found => super::kept::drop_unkept(store, report, remake),
        Keep::All => Ok(Vec::new()),
    };
    let mut gone = dropped.unwrap_or_else(|e| {
        eprintln!("rewind: warning: the check's passing runs are not removed: {e}");
        Vec::new()
    });
    gone.extend(elsewhere.iter().map(|r| (r.id.clone(), remake(store, r))));
    super::kept::mark(&mut json, &gone);
    if let Err(e) = store.save_check(&report.base.id, &json) {
        eprintln!("rewind: warning: the check's result is not kept: {e}");
    }
    json
}
