//! The shards benchmark (issue 27): schedules per second of one check split
//! into N shards run at once on this machine (separate processes, sharing
//! one home and one results directory), beside one `--jobs 2` check of the
//! same schedules measured here too; and the merge's own time beside the
//! check's, wall and CPU (user and system: under load the wall is mostly
//! waiting for a core). Every run tries every schedule (`--all`) and narrows
//! nothing, so each side runs the same schedules.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench shards
//!
//! `REWIND_SHARDS_BENCH_SCHEDULES` (default 16) and
//! `REWIND_SHARDS_BENCH_EXAMPLE` (default pool: memory points, about a
//! second a schedule here) change what is checked;
//! `REWIND_SHARDS_BENCH_SHARDS` (default `1,2`) the shard counts and
//! `REWIND_SHARDS_BENCH_ROUNDS` (default 2) how many times each is
//! measured, every time right after its own `--jobs 2` check, so that a
//! ratio compares two runs under about the same load.

use rewind_tests::{children_cpu, load_average, rewind_bin, Home};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn check_args(example: &str, schedules: &str) -> Vec<String> {
    let args = [
        "check",
        "--example",
        example,
        "--strategy",
        "random",
        "--points",
        "memory",
    ];
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    v.extend(["--schedules", schedules, "--all", "--no-narrow"].map(String::from));
    v
}

/// Runs `rewind ARGS` in `home`, each a process at once; the wall time of all.
fn at_once(home: &Home, runs: &[Vec<String>]) -> Duration {
    let started = Instant::now();
    let children: Vec<_> = runs
        .iter()
        .map(|args| {
            Command::new(rewind_bin())
                .args(args)
                .env("REWIND_HOME", home.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("rewind starts")
        })
        .collect();
    for mut c in children {
        let s = c.wait().expect("rewind ends");
        assert!(
            matches!(s.code(), Some(0 | 1)),
            "rewind {:?} failed: {s}",
            runs[0]
        );
    }
    started.elapsed()
}

/// `rewind check --merge DIR`'s wall time, in a home of its own.
fn merge_time(dir: &std::path::Path) -> Duration {
    let merge = vec!["check".into(), "--merge".into(), dir.display().to_string()];
    at_once(&Home::unreplayed(), &[merge])
}

/// One round: the `--jobs 2` check, then `shards` shards at once (each
/// `--jobs 2/shards`, at least 1), each measured right after the other so
/// that both see about the same load.
fn round(base: &[String], n: f64, shards: u32) {
    let rate = |d: Duration| n / d.as_secs_f64();
    let load = load_average();
    let cpu = children_cpu();
    let jobs2 = at_once(
        &Home::unreplayed(),
        &[[base, &["--jobs".into(), "2".into()]].concat()],
    );
    let jobs2_cpu = children_cpu() - cpu;
    let home = Home::unreplayed();
    let dir = tempfile::tempdir().unwrap();
    let jobs = (2 / shards).max(1).to_string();
    let runs: Vec<Vec<String>> = (1..=shards)
        .map(|i| {
            let mut a = base.to_vec();
            a.extend(["--jobs".into(), jobs.clone()]);
            a.extend(["--shard".into(), format!("{i}/{shards}")]);
            a.extend(["--results".into(), dir.path().display().to_string()]);
            a
        })
        .collect();
    let wall = at_once(&home, &runs);
    let cpu = children_cpu();
    let merge = merge_time(dir.path());
    let merge_cpu = children_cpu() - cpu;
    println!(
        "{shards} shard(s) at once, --jobs {jobs}: {:5.2} schedules/s ({:.1} s) against one \
         --jobs 2 check's {:5.2} ({:.1} s): {:.3}x; merge {:.2} s, {:.2}% of the check's time \
         (CPU {:.3} s, {:.2}% of the check's {:.1} s: what the load does not decide); \
         load {load} -> {}",
        rate(wall),
        wall.as_secs_f64(),
        rate(jobs2),
        jobs2.as_secs_f64(),
        rate(wall) / rate(jobs2),
        merge.as_secs_f64(),
        100.0 * merge.as_secs_f64() / jobs2.as_secs_f64(),
        merge_cpu.as_secs_f64(),
        100.0 * merge_cpu.as_secs_f64() / jobs2_cpu.as_secs_f64(),
        jobs2_cpu.as_secs_f64(),
        load_average()
    );
}

fn main() {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let example = var("REWIND_SHARDS_BENCH_EXAMPLE", "pool");
    let schedules = var("REWIND_SHARDS_BENCH_SCHEDULES", "16");
    let rounds: u32 = var("REWIND_SHARDS_BENCH_ROUNDS", "2")
        .parse()
        .expect("a number of rounds");
    let counts: Vec<u32> = var("REWIND_SHARDS_BENCH_SHARDS", "1,2")
        .split(',')
        .map(|c| c.trim().parse().expect("shard counts, e.g. 1,2"))
        .collect();
    let n: f64 = schedules.parse().expect("a number of schedules");
    println!(
        "rewind shards benchmark: {example}, {schedules} schedules, {rounds} rounds, shards {counts:?}, load average {}",
        load_average()
    );
    let base = check_args(&example, &schedules);
    for r in 1..=rounds {
        println!("round {r}:");
        for &shards in &counts {
            round(&base, n, shards);
        }
    }
    println!("load average after: {}", load_average());
}
