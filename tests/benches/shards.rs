//! The shards benchmark (issue 27): schedules per second of one check split
//! into 1 and 2 shards run at once on this machine, beside one `--jobs 2`
//! check of the same schedules measured here too; and the merge's own time
//! beside the check's. Every run tries every schedule (`--all`) and narrows
//! nothing, so each side runs the same schedules.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench shards
//!
//! `REWIND_SHARDS_BENCH_SCHEDULES` (default 16) and
//! `REWIND_SHARDS_BENCH_EXAMPLE` (default pool: memory points, about a
//! second a schedule here) change what is checked.

use rewind_tests::{load_average, rewind_bin, Home};
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

fn main() {
    let example = std::env::var("REWIND_SHARDS_BENCH_EXAMPLE").unwrap_or_else(|_| "pool".into());
    let schedules = std::env::var("REWIND_SHARDS_BENCH_SCHEDULES").unwrap_or_else(|_| "16".into());
    let n: f64 = schedules.parse().expect("a number of schedules");
    println!(
        "rewind shards benchmark: {example}, {schedules} schedules, load average {}",
        load_average()
    );
    let base = check_args(&example, &schedules);
    let jobs2 = at_once(
        &Home::unreplayed(),
        &[[&base[..], &["--jobs".into(), "2".into()]].concat()],
    );
    let rate = |d: Duration| n / d.as_secs_f64();
    println!(
        "one check, --jobs 2:        {:6.2} schedules/s ({:.1}s)",
        rate(jobs2),
        jobs2.as_secs_f64()
    );
    for shards in [1u32, 2] {
        let home = Home::unreplayed();
        let dir = tempfile::tempdir().unwrap();
        let jobs = (2 / shards).to_string();
        let runs: Vec<Vec<String>> = (1..=shards)
            .map(|i| {
                let mut a = base.clone();
                a.extend([
                    "--jobs".into(),
                    jobs.clone(),
                    "--shard".into(),
                    format!("{i}/{shards}"),
                ]);
                a.extend(["--results".into(), dir.path().display().to_string()]);
                a
            })
            .collect();
        let wall = at_once(&home, &runs);
        println!(
            "{shards} shard(s) at once, --jobs {jobs}: {:6.2} schedules/s ({:.1}s), {:.3} of the --jobs 2 check's",
            rate(wall),
            wall.as_secs_f64(),
            rate(wall) / rate(jobs2)
        );
        if shards == 2 {
            let merge = vec![
                "check".into(),
                "--merge".into(),
                dir.path().display().to_string(),
            ];
            let took = at_once(&Home::unreplayed(), &[merge]);
            println!(
                "merge of 2 shards:          {:.2}s, {:.2}% of the check's time",
                took.as_secs_f64(),
                100.0 * took.as_secs_f64() / jobs2.as_secs_f64()
            );
        }
    }
    println!("load average after: {}", load_average());
}
