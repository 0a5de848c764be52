//! `rewind check`: rerun a program under perturbed schedules, find one that
//! violates a property, and narrow it to the step that decides it.

use super::run::{prepare, read_stdin, RunArgs};
use crate::util::usage;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use vmm::check::label::{labels, Judged, Label};
use vmm::check::property::Property;
use vmm::check::race::{Race, Told};
use vmm::check::{CheckSpec, Checker, Parent, Progress, Report, Side, Strategy, Tried};
use vmm::record::Points;
use vmm::session::Limits;
use vmm::store::Store;

/// Schedules tried when `--schedules` is not given.
pub const DEFAULT_SCHEDULES: u64 = 64;
/// The strategy when `--strategy` is not given (chosen by the numbers in
/// docs/design.md, "Search strategies").
pub const DEFAULT_STRATEGY: StrategyArg = StrategyArg::Random;

/// A check's scheduling points when `--points` is not given: memory points
/// find races with no system call in their window (docs/design.md, "Memory
/// scheduling points").
pub const DEFAULT_POINTS: Points = Points::Memory;

const POINTS_HELP: &str = "Scheduling points: `memory` (system calls, faults and every access \
     to memory more than one thread touches) or `syscalls` (system calls and faults \
     alone) [default: memory; with --run, the run's own, or these from --schedule-from on]";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// Seeded schedules 1..N, each perturbing steps at random.
    Random,
    /// Every schedule with one reschedule in the window, then every pair.
    Bounded,
    /// PCT: random thread priorities, DEPTH-1 priority change points (--depth).
    Pct,
}

#[derive(Args, Debug)]
#[command(
    override_usage = "rewind check [OPTIONS] -- PROG [ARGS]...\n       rewind check [OPTIONS] --example NAME\n       rewind check --run RUN --schedule-from STEP [OPTIONS]",
    after_help = after_help(),
    mut_arg("points", |a| a.help(POINTS_HELP))
)]
pub struct CheckArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// How many schedules to try.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SCHEDULES)]
    pub schedules: u64,
    /// Try every schedule, then report how many violate.
    #[arg(long)]
    pub all: bool,
    /// Schedules run at once [default: one per core].
    #[arg(long, value_name = "J")]
    pub jobs: Option<usize>,
    /// Do not narrow the first violating schedule.
    #[arg(long)]
    pub no_narrow: bool,
    /// A property every run must keep (repeatable).
    #[arg(long = "property", value_name = "P")]
    pub properties: Vec<String>,
    /// A file of properties, one a line.
    #[arg(long = "properties", value_name = "FILE")]
    pub properties_file: Option<PathBuf>,
    /// Say where each thread was at the deciding step.
    #[arg(long = "where")]
    pub where_: bool,
    /// How schedules are chosen.
    #[arg(long, value_enum, default_value_t = DEFAULT_STRATEGY)]
    pub strategy: StrategyArg,
    /// PCT's depth: DEPTH-1 priority change points a schedule.
    #[arg(long, value_name = "DEPTH", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub depth: u32,
    /// Which seeded schedules to try: with N schedules, seed S tries
    /// schedules S*N+1 to S*N+N.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub check_seed: u64,
    /// Check from a recorded run: schedules equal to RUN up to --schedule-from.
    #[arg(long = "run", value_name = "RUN")]
    pub from_run: Option<String>,
    /// Try the run's own randomness seed and N others, reseeded at --schedule-from.
    #[arg(long, value_name = "N")]
    pub seeds: Option<u64>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn after_help() -> String {
    format!(
        "Properties (--property, repeatable; --properties FILE, one a line, # comments):\n{}\n\n\
         Exit status: 1 when a property is violated, 0 when none is, 2 on usage errors.",
        vmm::check::property::HELP
    )
}

/// A line per schedule on stdout; a transient progress line on a terminal.
struct Lines {
    json: bool,
    tty: bool,
    phase: String,
}

impl Lines {
    fn clear(&self) {
        if self.tty {
            eprint!("\r\x1b[K");
        }
    }
}

fn schedule_line(t: &Tried) -> String {
    format!(
        "{}: {:<14} {:>8} steps  run {}",
        t.label,
        t.status.to_string(),
        t.steps,
        t.id
    )
}

impl Progress for Lines {
    fn phase(&mut self, what: &str) {
        self.phase = what.to_string();
        if self.tty {
            self.clear();
            eprint!("rewind: {what}...");
        }
    }

    fn tried(&mut self, t: &Tried, done: u64, total: u64) {
        self.clear();
        if !self.json {
            println!("{}", schedule_line(t));
            for b in &t.broken {
                println!("  warning: {b}");
            }
        }
        if self.tty {
            eprint!("rewind: {} {done}/{total}...", self.phase);
        }
    }
}

fn properties(args: &CheckArgs) -> Result<Vec<Property>> {
    let mut out = Vec::new();
    for p in &args.properties {
        match Property::parse(p, None) {
            Ok(p) => out.push(p),
            Err(e) => usage!("{e}"),
        }
    }
    if let Some(f) = &args.properties_file {
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

/// What a check of these arguments runs; `stdin` gives standard input's
/// bytes once the program is known to be runnable.
pub fn spec(
    args: &CheckArgs,
    store: &vmm::store::Store,
    stdin: impl FnOnce() -> Vec<u8>,
) -> Result<CheckSpec> {
    if args.run.schedule != 0 || args.run.pct.is_some() {
        usage!("--schedule and --pct are for `rewind run`; `rewind check` tries schedules itself (--strategy)");
    }
    let props = properties(args)?;
    store.prepare()?;
    let (base, name, parent) = match &args.from_run {
        Some(spec) => {
            if args.run.schedule_from.is_none() {
                usage!("--run needs --schedule-from STEP");
            }
            let run = super::resolve(spec)?;
            let inputs = run
                .inputs()
                .with_context(|| format!("cannot check from run {}", run.id))?;
            // The check's points from the window on: a run's schedules
            // are forks of it there.
            let mut inputs = inputs;
            if let (Some(p), Some(from)) = (args.run.points, args.run.schedule_from) {
                inputs.manifest.set_points_after(from, p);
            }
            let parent = Parent {
                id: run.id.clone(),
                applied: run.meta.perturbed.clone(),
            };
            (inputs, run.meta.name.clone(), Some(parent))
        }
        None => {
            let mut prepared = prepare(&args.run, store)?;
            prepared.set_stdin(stdin());
            // Schedule 0 of a check is its base: the window is the check's.
            let mut inputs = prepared.inputs;
            inputs.manifest.points = args.run.points.unwrap_or(DEFAULT_POINTS);
            inputs.manifest.schedule_from = None;
            inputs.manifest.schedule_until = None;
            (inputs, prepared.name, None)
        }
    };
    let strategy = match (args.seeds, args.strategy) {
        (Some(_), _) => Strategy::Seeds,
        (None, StrategyArg::Random) => Strategy::Random,
        (None, StrategyArg::Bounded) => Strategy::Bounded,
        (None, StrategyArg::Pct) => Strategy::Pct,
    };
    Ok(CheckSpec {
        base,
        name,
        limits: Limits {
            timeout: args.run.timeout,
            ..Default::default()
        },
        schedules: args.seeds.unwrap_or(args.schedules),
        all: args.all,
        jobs: args
            .jobs
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        narrow: !args.no_narrow,
        properties: props,
        strategy,
        depth: args.depth,
        check_seed: args.check_seed,
        from: args.run.schedule_from,
        until: args.run.schedule_until,
        want_where: args.where_,
        parent,
    })
}

pub fn main(args: CheckArgs) -> Result<i32> {
    let store = super::store()?;
    let spec = spec(&args, &store, read_stdin)?;
    let mut lines = Lines {
        json: args.json,
        tty: std::io::stderr().is_terminal(),
        phase: String::new(),
    };
    if !args.json {
        lines.clear();
    }
    let report = Checker::new(&spec, &store).run(&mut lines)?;
    lines.clear();
    super::warn_all(&report.warnings);
    let json = keep(&store, &report);
    if args.json {
        println!("{}", serde_json::to_string(&json)?);
    } else {
        print_report(&report, &spec);
    }
    std::io::stdout().flush()?;
    Ok(if report.failed() { 1 } else { 0 })
}

fn what_tried(spec: &CheckSpec) -> &'static str {
    match spec.strategy {
        Strategy::Seeds => "seeds",
        _ => "perturbed schedules",
    }
}

fn print_report(r: &Report, spec: &CheckSpec) {
    {
        let verdict = if r.properties == [Property::EndsDifferently] {
            "ended differently".to_string()
        } else {
            let names: Vec<String> = r.properties.iter().map(|p| p.name()).collect();
            format!("violated {}", names.join(", "))
        };
        println!(
            "{} of {} {} {verdict}",
            r.violations(),
            r.tried.len(),
            what_tried(spec),
        );
    }
    for m in &r.never_held {
        println!(
            "sdk: sometimes({m:?}) held in none of the {} runs",
            r.tried.len() + 1
        );
    }
    if let Some(e) = &r.exhausted {
        println!("{e}");
    }
    let Some(bad) = r.first_violation() else {
        return;
    };
    for (p, why) in &bad.violations {
        println!("{} violates {p}: {why}", bad.label.trim());
    }
    let Some(n) = &r.narrowed else {
        if r.base.violated() {
            println!("schedule 0 itself violates it: no perturbation is needed");
        }
        println!("{}: run {}", unnarrowed_label(r, bad), bad.id);
        return;
    };
    println!("{}", n.sentence);
    if let Some(race) = &n.race {
        println!("the interleaving: {}", race.sentence);
    }
    for side in n.sides() {
        println!("{}: run {}", side.label, side.run);
    }
    if let Some(d) = &n.divergence {
        for l in d.lines() {
            println!("{l}");
        }
    }
    if spec.want_where && !n.where_.is_empty() {
        println!(
            "where each thread was at step {}:",
            n.deciding.last().map_or(0, |p| p.step)
        );
        for w in &n.where_ {
            println!("  {w}");
        }
    }
    println!("narrowed in {} runs, {:.3}s", n.runs, n.wall.as_secs_f64());
    println!(
        "open it: {}",
        super::open::command_line(
            &n.with.run,
            n.deciding.last().map(|p| p.step),
            Some(&n.without.run)
        )
    );
}

/// What the first violating run is called when it was not narrowed: by the
/// same rule as a narrowed pair, against schedule 0.
fn unnarrowed_label(r: &Report, bad: &Tried) -> Label {
    if bad.id == r.base.id {
        // Schedule 0 itself violates a property (not ends-differently).
        return Label::Failing;
    }
    labels(Judged::of(&r.base), Judged::of(bad), true).1
}

fn side_json(s: &Side) -> serde_json::Value {
    serde_json::json!({
        "run": s.run,
        "status": s.status.to_string(),
        "label": s.label,
    })
}

/// `{"sentence", "before", "between", "after"}`, each access `{"step",
/// "pid", "tid", "access", "addr", "size", "pc", "variable", "place"}`.
fn race_json(r: &Race) -> serde_json::Value {
    let told = |t: &Told| {
        serde_json::json!({
            "step": t.touch.step,
            "pid": t.touch.pid,
            "tid": t.touch.tid,
            "access": t.touch.access,
            "addr": t.touch.addr,
            "size": t.touch.size,
            "pc": t.touch.pc,
            "variable": t.variable,
            "place": t.place,
        })
    };
    serde_json::json!({
        "sentence": r.sentence,
        "before": r.before.as_ref().map(told),
        "between": told(&r.between),
        "after": r.after.as_ref().map(told),
    })
}

fn tried_json(t: &Tried) -> serde_json::Value {
    serde_json::json!({
        "label": t.label.trim(),
        "run": t.id,
        "status": t.status.to_string(),
        "steps": t.steps,
        "perturbed": vmm::record::json::perturbations(&t.perturbed),
        "violations": t.violations.iter().map(|(p, w)| serde_json::json!({"property": p, "why": w})).collect::<Vec<_>>(),
        "broken": t.broken,
    })
}

/// Keeps a check's report for readers that were not watching (the language
/// server, docs/lsp.md; the debug adapter's deciding mark), whether the check
/// ran here or in a debug session; returns the `--json` report.
pub fn keep(store: &Store, report: &Report) -> serde_json::Value {
    let json = json_report(report);
    if let Err(e) = store.save_check(&report.base.id, &json) {
        eprintln!("rewind: warning: the check's result is not kept: {e}");
    }
    json
}

fn json_report(r: &Report) -> serde_json::Value {
    serde_json::json!({
        "properties": r.properties.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "never_held": r.never_held,
        "base": tried_json(&r.base),
        "tried": r.tried.iter().map(tried_json).collect::<Vec<_>>(),
        "violations": r.violations(),
        "exhausted": r.exhausted,
        "first_violation": r.first_violation().map(|bad| serde_json::json!({
            "run": bad.id,
            "label": unnarrowed_label(r, bad),
        })),
        "narrowed": r.narrowed.as_ref().map(|n| serde_json::json!({
            "deciding": vmm::record::json::perturbations(&n.deciding),
            "property": n.property,
            "sentence": n.sentence,
            "without": side_json(&n.without),
            "with": side_json(&n.with),
            "passing": n.run_called(Label::Passing),
            "failing": n.run_called(Label::Failing),
            "divergence": n.divergence.as_ref().map(|d| serde_json::json!({
                "left_step": d.left_step(),
                "right_step": d.right_step(),
                "lines": d.lines(),
            })),
            "where": n.where_,
            "race": n.race.as_ref().map(race_json),
            "runs": n.runs,
            "wall_secs": n.wall.as_secs_f64(),
        })),
    })
}
