//! How many schedules each search strategy of `rewind check` needs to find
//! each example's bug (issue 7): for `random` and `pct`, the median over
//! 20 check seeds (`--check-seed 0..19`, each a different set of schedules)
//! of the position of the first violating schedule among the default 64;
//! for `bounded`, whose order is fixed, that position once. A seed that
//! finds nothing counts as more than 64. Prints a Markdown table (README and
//! docs/design.md, "Search strategies").
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench strategies
//!
//! `REWIND_BENCH_SEEDS` changes the number of check seeds,
//! `REWIND_BENCH_EXAMPLES` (comma-separated) the examples.

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
/// `--points memory`.
const MEMORY: &[&str] = &["counter", "flag", "lazy", "lockfree", "twolocks"];
const SCHEDULES: u64 = 64;

/// The position of the first violating schedule, or None within SCHEDULES.
fn needed(h: &Home, example: &str, strategy: &str, seed: u64) -> Option<u64> {
    let seed = seed.to_string();
    let schedules = SCHEDULES.to_string();
    let points = if MEMORY.contains(&example) {
        "memory"
    } else {
        "syscalls"
    };
    let out = h.rewind(&[
        "check",
        "--points",
        points,
        "--json",
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
    assert!(
        out.code == 0 || out.code == 1,
        "check of {example} ({strategy}, seed {seed}) failed:\n{out}"
    );
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("check --json: {e}\n{out}"));
    assert!(
        v["base"]["violations"]
            .as_array()
            .is_some_and(|a| a.is_empty()),
        "schedule 0 of {example} violates a property itself:\n{out}"
    );
    let tried = v["tried"].as_array().expect("tried");
    let found = v["violations"].as_u64().unwrap_or(0) > 0;
    found.then_some(tried.len() as u64)
}

fn median(mut xs: Vec<Option<u64>>) -> String {
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
    println!("| example | random | pct (depth 3) | bounded |");
    println!("| --- | --- | --- | --- |");
    for ex in examples {
        // A store of its own for each example, removed after it.
        let h = Home::new();
        let random: Vec<_> = (0..seeds).map(|s| needed(&h, ex, "random", s)).collect();
        let pct: Vec<_> = (0..seeds).map(|s| needed(&h, ex, "pct", s)).collect();
        let bounded =
            needed(&h, ex, "bounded", 0).map_or(format!(">{SCHEDULES}"), |n| n.to_string());
        println!(
            "| {ex} | {} | {} | {bounded} |",
            median(random),
            median(pct)
        );
    }
}
