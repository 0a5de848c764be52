//! How many schedules each search strategy of `rewind check` needs to find
//! each example's bug (issue 7): for `random` and `pct`, the median over
//! 20 check seeds (`--check-seed 0..19`, each a different set of schedules)
//! of the position of the first violating schedule among the default 64;
//! for `bounded`, whose order is fixed, that position once. A seed that
//! finds nothing counts as more than 64. Prints a Markdown table (README and
//! docs/design.md, "Search strategies"): a row per example and points
//! (`memory`, check's default, for every example; `syscalls` too for those
//! with a system call in their racy window: the others have no step inside
//! it with syscall points, and are never found). Then checks per second,
//! memory points against syscall points, measured in the same process, in
//! wall time and in the `rewind` process's CPU time: the wall rate is what
//! a user waits for but falls with the host's load (under `nice -n 19` at
//! load average 21, counter-fixed's syscall-point check made 1.9 runs/s
//! where a quiet host makes 20 or more); the CPU rate is what to compare
//! between runs of the bench.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench strategies
//!
//! `REWIND_BENCH_SEEDS` changes the number of check seeds,
//! `REWIND_BENCH_EXAMPLES` (comma-separated) the examples, and
//! `REWIND_BENCH_JOBS` how many checks run at once (default 1; each check
//! runs its schedules one at a time, so what is measured does not change).
//! After each row it prints what the row cost: the runs it made and their
//! wall time, so a strategy that misses (and so runs its whole budget)
//! shows.
//!
//! Its stores are never replayed: the tests replay what they record, a
//! benchmark only counts (replaying every run doubled the bench's time).

use rewind_tests::Home;

/// The buggy examples, each found by the default property (the SDK's is
/// added by itself).
const EXAMPLES: &[&str] = &[
    "bank",
    "philosophers",
    "pool",
    "sdk",
    "counter",
    "flag",
    "lazy",
    "lockfree",
    "twolocks",
];
/// The examples whose racy window has no system call: checked with
/// `--points memory` only.
const MEMORY: &[&str] = &["counter", "flag", "lazy", "lockfree", "twolocks"];

/// What a check found: the position of the first violating schedule, or
/// that schedule 0 itself violates.
#[derive(Clone, Copy, Debug)]
enum Found {
    At(u64),
    Missed,
    Schedule0,
}
const SCHEDULES: u64 = 64;

/// The position of the first violating schedule within SCHEDULES, and the
/// runs the check made (schedule 0 included).
fn needed(h: &Home, example: &str, points: &str, strategy: &str, seed: u64) -> (Found, u64) {
    let seed = seed.to_string();
    let schedules = SCHEDULES.to_string();
    let (_, v) = h.check_json(&[
        "--points",
        points,
        "--no-narrow",
        "--jobs",
        "1",
        "--example",
        example,
        "--strategy",
        strategy,
        "--check-seed",
        &seed,
        "--schedules",
        &schedules,
    ]);
    let tried = v["tried"].as_array().expect("tried");
    let runs = 1 + tried.len() as u64;
    if v["base"]["violations"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        return (Found::Schedule0, runs);
    }
    match v["violations"].as_u64().unwrap_or(0) > 0 {
        true => (Found::At(tried.len() as u64), runs),
        false => (Found::Missed, runs),
    }
}

/// What each check seed 0..seeds needs, `jobs` checks at a time, each in
/// a store of its own; and the runs all of them made.
fn seeds_needed(
    example: &str,
    points: &str,
    strategy: &str,
    seeds: u64,
    jobs: u64,
) -> (Vec<Found>, u64) {
    let next = std::sync::atomic::AtomicU64::new(0);
    let out = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, seeds.max(1)) {
            s.spawn(|| {
                let h = Home::unreplayed();
                loop {
                    let seed = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if seed >= seeds {
                        break;
                    }
                    let r = needed(&h, example, points, strategy, seed);
                    out.lock().unwrap().push((seed, r));
                }
            });
        }
    });
    let mut all = out.into_inner().unwrap();
    all.sort_by_key(|(seed, _)| *seed);
    let runs = all.iter().map(|(_, (_, r))| r).sum();
    (all.into_iter().map(|(_, (f, _))| f).collect(), runs)
}

fn median(xs: Vec<Found>) -> String {
    if xs.iter().any(|x| matches!(x, Found::Schedule0)) {
        return "schedule 0 violates".into();
    }
    let mut xs: Vec<Option<u64>> = xs
        .into_iter()
        .map(|x| match x {
            Found::At(n) => Some(n),
            _ => None,
        })
        .collect();
    // Not found sorts last.
    xs.sort_by_key(|x| x.unwrap_or(u64::MAX));
    let found = xs.iter().filter(|x| x.is_some()).count();
    let m = match xs.len() {
        0 => None,
        n if n % 2 == 1 => xs[n / 2],
        n => match (xs[n / 2 - 1], xs[n / 2]) {
            (Some(a), Some(b)) => Some((a + b).div_ceil(2)),
            _ => None,
        },
    };
    let m = m.map_or(format!(">{SCHEDULES}"), |m| m.to_string());
    format!("{m} ({found}/{} found)", xs.len())
}

fn main() {
    let seeds: u64 = std::env::var("REWIND_BENCH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let jobs: u64 = std::env::var("REWIND_BENCH_JOBS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let chosen = std::env::var("REWIND_BENCH_EXAMPLES").ok();
    let examples: Vec<&str> = match &chosen {
        Some(list) => list.split(',').collect(),
        None => EXAMPLES.to_vec(),
    };
    println!("rewind strategies benchmark: schedules needed to find each example's bug");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    println!(
        "median over {seeds} check seeds of the first violating schedule's position (of {SCHEDULES})"
    );
    println!();
    println!("| example | points | random | pct (depth 3) | bounded |");
    println!("| --- | --- | --- | --- | --- |");
    let mut costs = Vec::new();
    for ex in &examples {
        let points: &[&str] = match MEMORY.contains(ex) {
            true => &["memory"],
            false => &["memory", "syscalls"],
        };
        for p in points {
            let mut cost = format!("{ex}, {p} points:");
            let mut timed = |strategy: &str, seeds: u64| {
                let started = std::time::Instant::now();
                let (found, runs) = seeds_needed(ex, p, strategy, seeds, jobs);
                let wall = started.elapsed().as_secs_f64();
                cost += &format!(" {strategy} {runs} runs in {wall:.0} s;");
                found
            };
            let random = timed("random", seeds);
            let pct = timed("pct", seeds);
            let bounded = match timed("bounded", 1)[0] {
                Found::At(n) => n.to_string(),
                Found::Missed => format!(">{SCHEDULES}"),
                Found::Schedule0 => "schedule 0 violates".into(),
            };
            println!(
                "| {ex} | {p} | {} | {} | {bounded} |",
                median(random),
                median(pct)
            );
            eprintln!("cost: {cost}");
            costs.push(cost);
        }
    }
    println!();
    println!("what each row cost (runs made, schedule 0 included, and their wall time; {jobs} at a time):");
    for c in costs {
        println!("  {c}");
    }
    checks_per_second();
}

/// How fast one `rewind check --all --no-narrow --jobs 1` made its runs.
struct Rate {
    /// Schedule 0 and every schedule tried.
    runs: u64,
    steps: u64,
    wall: f64,
    /// User plus system time of the `rewind` process: what the runs cost,
    /// which the load of a shared host does not change as it changes the
    /// wall time.
    cpu: f64,
}

impl Rate {
    fn per_wall_second(&self) -> f64 {
        self.runs as f64 / self.wall
    }
    fn per_cpu_second(&self) -> f64 {
        self.runs as f64 / self.cpu.max(1e-3)
    }
}

/// `rewind check --all --no-narrow --jobs 1 --points POINTS --schedules N
/// TARGET...` in a store of its own, timed.
fn check_rate(points: &str, schedules: u64, target: &[&str]) -> Rate {
    let h = Home::unreplayed();
    let n = schedules.to_string();
    let mut args = vec![
        "check",
        "--json",
        "--points",
        points,
        "--all",
        "--no-narrow",
        "--jobs",
        "1",
        "--schedules",
        &n,
    ];
    args.extend_from_slice(target);
    let cpu = rewind_tests::children_cpu();
    let started = std::time::Instant::now();
    let out = h.rewind(&args);
    let wall = started.elapsed().as_secs_f64();
    let cpu = (rewind_tests::children_cpu() - cpu).as_secs_f64();
    // A buggy program's violations end the check with 1; `--all` still
    // ran every schedule.
    assert!(out.code == 0 || out.code == 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("check --json: {e}\n{out}"));
    let runs: Vec<&serde_json::Value> = std::iter::once(&v["base"])
        .chain(v["tried"].as_array().expect("tried"))
        .collect();
    Rate {
        runs: runs.len() as u64,
        steps: runs.iter().filter_map(|r| r["steps"].as_u64()).sum(),
        wall,
        cpu,
    }
}

/// Runs per second of `rewind check --all --no-narrow`, memory points
/// against syscall points (the baseline, measured in this process), in wall
/// time and in the `rewind` process's CPU time: on a loaded host (or under
/// `nice`) the wall rate falls with the CPU the bench gets, the CPU rate
/// does not, so compare CPU rates across hosts and loads.
fn checks_per_second() {
    const RUNS: u64 = 16;
    // `counter 2500`: a program making 10,000 shared accesses, two threads
    // each reading and writing a shared total 2,500 times (its race found
    // or not, every schedule runs: `--all`). Fewer schedules: a
    // memory-point run of it is ~26,000 steps, and a command has 120 s.
    const BIG_RUNS: u64 = 3;
    let counter = rewind_tests::guest_arg("counter");
    let targets: [(&str, u64, Vec<&str>); 4] = [
        ("bank-fixed", RUNS, vec!["--example", "bank-fixed"]),
        ("counter-fixed", RUNS, vec!["--example", "counter-fixed"]),
        ("counter", RUNS, vec!["--example", "counter"]),
        (
            "counter 2500 (10,000 shared accesses)",
            BIG_RUNS,
            vec!["--", &counter, "2500"],
        ),
    ];
    println!();
    println!(
        "checks per second (`check --all --no-narrow --jobs 1`, {RUNS} schedules, \
         {BIG_RUNS} for counter 2500; CPU: the rewind process's user + sys time); \
         load average before: {}",
        rewind_tests::load_average()
    );
    println!("| program | points | runs | steps a run | runs/s (wall) | runs per CPU second | CPU ms a run |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut ratios = Vec::new();
    for (name, schedules, target) in &targets {
        let pair: Vec<Rate> = ["syscalls", "memory"]
            .into_iter()
            .map(|p| {
                let r = check_rate(p, *schedules, target);
                println!(
                    "| {name} | {p} | {} | {} | {:.1} | {:.1} | {:.1} |",
                    r.runs,
                    r.steps / r.runs.max(1),
                    r.per_wall_second(),
                    r.per_cpu_second(),
                    r.cpu * 1e3 / r.runs.max(1) as f64
                );
                r
            })
            .collect();
        ratios.push(format!(
            "  {name}: memory points at {:.3}x the rate of syscall points in wall time, {:.3}x in CPU time",
            pair[1].per_wall_second() / pair[0].per_wall_second(),
            pair[1].per_cpu_second() / pair[0].per_cpu_second()
        ));
    }
    println!();
    for r in ratios {
        println!("{r}");
    }
    println!("load average after: {}", rewind_tests::load_average());
}
