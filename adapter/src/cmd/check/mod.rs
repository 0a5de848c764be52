//! `rewind check`: rerun a program under perturbed schedules, find one that
//! violates a property, and narrow it to the step that decides it.

use super::run::{read_stdin, RunArgs};
use crate::app::check::{keep, spec, CheckRequest, Keep, DEFAULT_DEPTH};
use crate::app::{store, warn_all};
use crate::util::usage;
use anyhow::Result;
use clap::{Args, ValueEnum};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;
use vmm::check::property::Property;
use vmm::check::{CheckSpec, Checker, Progress, Report, Strategy, Tried};
use vmm::store::Store;

mod shard;

const POINTS_HELP: &str = "Scheduling points: `memory` (system calls, faults and every access \
     to memory more than one thread touches), `races` (a first run learns which pages two \
     threads touch with nothing ordering them; every run then stops only at accesses to \
     those, and at pages it sees race itself) or `syscalls` (system calls and faults \
     alone) [default: a portfolio of syscalls and memory; with --run, the run's own, or these from --schedule-from on]";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// Seeded schedules 1..N, each perturbing steps at random.
    Random,
    /// Every schedule with one reschedule in the window, then every pair.
    Bounded,
    /// PCT: random thread priorities, DEPTH-1 priority change points (--depth).
    Pct,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KeepArg {
    /// Schedule 0, the violating runs and the narrowed pair.
    Found,
    /// Every run the check made.
    All,
}

#[derive(Args, Debug)]
#[command(
    override_usage = "rewind check [OPTIONS] -- PROG [ARGS]...\n       rewind check [OPTIONS] --example NAME\n       rewind check [OPTIONS] DRV | FILE.nix -A ATTR | FLAKE#ATTR\n       rewind check --run RUN --schedule-from STEP [OPTIONS]",
    after_help = after_help(),
    mut_arg("points", |a| a.help(POINTS_HELP))
)]
pub struct CheckArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// How many schedules to try [default: as many as --budget allows;
    /// 64 with --strategy or --points].
    #[arg(long, value_name = "N")]
    pub schedules: Option<u64>,
    /// Start no schedule after this long (like 60s or 5m) [default: 60s
    /// without --schedules, --strategy and --points].
    #[arg(long, value_name = "TIME", value_parser = crate::util::parse_secs)]
    pub budget: Option<Duration>,
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
    /// How schedules are chosen [default: a portfolio of random, pct and
    /// bounded on both points; random with --points].
    #[arg(long, value_enum)]
    pub strategy: Option<StrategyArg>,
    /// PCT's depth: DEPTH-1 priority change points a schedule.
    #[arg(long, value_name = "DEPTH", default_value_t = DEFAULT_DEPTH, value_parser = clap::value_parser!(u32).range(1..=64))]
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
    /// Which runs stay in the store: `found` (schedule 0, the violating
    /// runs and the narrowed pair) or `all` (every schedule's).
    #[arg(long, value_enum, default_value_t = KeepArg::Found)]
    pub keep: KeepArg,
    #[command(flatten)]
    pub shards: Box<shard::ShardArgs>,
}

impl CheckArgs {
    /// Whether this is a shard of a check, or the merge of one.
    fn sharded(&self) -> bool {
        self.shards.shard.is_some() || !self.shards.merge.is_empty()
    }

    /// The check these options ask for.
    pub fn request(&self) -> CheckRequest {
        CheckRequest {
            run: self.run.spec(),
            // A time budget ends at another schedule on every machine: a
            // sharded check's plan is a count, the pinned search's default.
            schedules: self.schedules.or(self
                .sharded()
                .then_some(crate::app::check::DEFAULT_SCHEDULES)),
            budget: self.budget,
            all: self.all,
            jobs: self.jobs,
            narrow: !self.no_narrow,
            properties: self.properties.clone(),
            properties_file: self.properties_file.clone(),
            want_where: self.where_,
            strategy: self.strategy.map(|s| match s {
                StrategyArg::Random => Strategy::Random,
                StrategyArg::Bounded => Strategy::Bounded,
                StrategyArg::Pct => Strategy::Pct,
            }),
            depth: self.depth,
            check_seed: self.check_seed,
            from_run: self.from_run.clone(),
            seeds: self.seeds,
            installable: self.installable(),
        }
    }

    /// The derivation the words after the options name, when they name
    /// one and neither --example nor --root gives the program's image.
    fn installable(&self) -> Option<(String, Option<String>)> {
        if self.run.example.is_some() || self.run.root.is_some() || self.from_run.is_some() {
            return None;
        }
        crate::app::nix::installable_words(&self.run.command)
    }
}

fn after_help() -> String {
    format!(
        "Properties (--property, repeatable; --properties FILE, one a line, # comments):\n{}\n\n\
         Exit status: 1 when a property is violated, 0 when none is, 2 on usage errors.",
        vmm::check::property::HELP
    )
}

/// A line per schedule on stdout; a transient progress line on a terminal.
pub(crate) struct Lines {
    json: bool,
    tty: bool,
    phase: String,
}

impl Lines {
    pub(crate) fn new(json: bool) -> Lines {
        let lines = Lines {
            json,
            tty: std::io::stderr().is_terminal(),
            phase: String::new(),
        };
        if !json {
            lines.clear();
        }
        lines
    }

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

pub fn main(args: CheckArgs) -> Result<i32> {
    if !args.shards.merge.is_empty() {
        return shard::merge(&args);
    }
    if args.budget.is_some() && args.sharded() {
        usage!("--budget is a time, which runs out at another schedule on every machine: a sharded check plans --schedules N (default {})", crate::app::check::DEFAULT_SCHEDULES);
    }
    let request = args.request();
    if request.installable.is_some() {
        super::nix::refuse_image_flags(&args.run, "check")?;
    }
    let store = store()?;
    let spec = spec(&request, &store, read_stdin)?;
    if args.shards.shard.is_some() {
        return shard::shard(&args, &spec, &store);
    }
    let mut lines = Lines::new(args.json);
    let report = Checker::new(&spec, &store).run(&mut lines)?;
    let code = show(&store, &report, &spec, &mut lines, &args, &[])?;
    if let Some(dir) = &args.run.artifacts.artifacts {
        if let Some(f) = super::artifacts::of_check(&spec.name, &report) {
            super::artifacts::write(&store, dir, &f)?;
        }
    }
    Ok(code)
}

/// What `--keep` says.
pub(crate) fn keep_of(args: &CheckArgs) -> Keep {
    match args.keep {
        KeepArg::Found => Keep::Found,
        KeepArg::All => Keep::All,
    }
}

/// The command `rewind show` gives to make a run again, if any.
fn remake(store: &Store, run: &vmm::store::Run) -> Option<String> {
    let r = super::show::recipe(store, run);
    r.lines.last().map(|l| l.shell.clone())
}

/// Prints a check's report (`--json`: one JSON object) and keeps it; the
/// exit status. `elsewhere`: runs of its schedules made on other machines
/// (a merge's), not in this store.
pub(crate) fn show(
    store: &Store,
    report: &Report,
    spec: &CheckSpec,
    lines: &mut Lines,
    args: &CheckArgs,
    elsewhere: &[vmm::store::Run],
) -> Result<i32> {
    let json = args.json;
    lines.clear();
    warn_all(&report.warnings);
    let kept = keep(store, report, keep_of(args), &remake, elsewhere);
    if json {
        println!("{}", serde_json::to_string(&kept)?);
    } else {
        print_report(report, spec);
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
    let cut = r.cut_off();
    if cut > 0 {
        println!(
            "{cut} of them cut off by the check's time limit past schedule 0's last step \
             (slow, not stuck): not judged"
        );
    }
    if let Some(l) = &r.learned {
        println!(
            "learned from run {} ({} steps): {} page{} can race, where every schedule stops",
            l.run,
            l.steps,
            l.pages.len(),
            if l.pages.len() == 1 { "" } else { "s" }
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
    if let Some(e) = &r.out_of_budget {
        println!("{e}");
    }
    let Some(bad) = r.first_violation() else {
        return;
    };
    for (p, why) in &bad.violations {
        println!("{} violates {p}: {why}", bad.label.trim());
    }
    if let Some(e) = bad.entry {
        println!("found by {e}");
    }
    let Some(n) = &r.narrowed else {
        if r.base.violated() {
            println!("schedule 0 itself violates it: no perturbation is needed");
        }
        println!("{}: run {}", vmm::check::label::unnarrowed(r, bad), bad.id);
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
