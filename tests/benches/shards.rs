//! The shards benchmark (issue 27): schedules per second of one check split
//! into N shards run at once on this machine (separate processes, sharing
//! one home and one results directory), beside one `--jobs 2` check of the
//! same schedules measured here too; and the merge's own time beside the
//! check's, wall and CPU (user and system: under load the wall is mostly
//! waiting for a core). Every run tries every schedule (`--all`) and narrows
//! nothing, so each side runs the same schedules.
//!
//! The program is one whose schedule takes at least a second: Debian's
//! `pbzip2 -p2 -b1 -c` compressing 1 MB of text on standard input, with
//! race-directed points (`--points races`: a learning run, then schedule 0,
//! then seeded schedules). Every process of a check (each shard too) gets
//! the same standard input, as a sharded check needs. What each schedule
//! took is printed from the shards' records (their run's own wall time, as
//! the shards ran at once).
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench shards
//!
//! Environment (defaults: about 4 minutes on a quiet 2-core machine):
//! - `REWIND_SHARDS_BENCH_PROGRAM`: `pbzip2` (default), or an example's
//!   name (`pool`, checked as `--example pool`, no standard input);
//! - `REWIND_SHARDS_BENCH_KB`: pbzip2's input, in KB (default 1024);
//! - `REWIND_SHARDS_BENCH_POINTS`: `races` (default), `memory` or `syscalls`;
//! - `REWIND_SHARDS_BENCH_SCHEDULES`: schedules after schedule 0 (default
//!   16: 8 a shard when split in two);
//! - `REWIND_SHARDS_BENCH_SHARDS`: the shard counts (default `1,2`);
//! - `REWIND_SHARDS_BENCH_ROUNDS`: how many times each count is measured
//!   (default 2), every time right after its own `--jobs 2` check, so that
//!   a ratio compares two runs under about the same load.

use rewind_tests::{children_cpu, host_program, load_average, rewind_bin, word_text, Home};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PBZIP2: &str = "/usr/bin/pbzip2";

/// What is checked: the arguments after the check's options, and the
/// file standard input comes from (none: empty).
struct Checked {
    label: String,
    program: Vec<String>,
    stdin: Option<PathBuf>,
}

fn check_args(c: &Checked, points: &str, schedules: &str) -> Vec<String> {
    let mut v: Vec<String> = ["check", "--strategy", "random", "--points", points]
        .map(String::from)
        .to_vec();
    v.extend(["--schedules", schedules, "--all", "--no-narrow"].map(String::from));
    v.extend(c.program.iter().cloned());
    v
}

/// `args` with the check's options `opts` added, before the `--` that
/// starts the program's arguments.
fn with(args: &[String], opts: &[&str]) -> Vec<String> {
    let mut a = args.to_vec();
    let at = a.iter().position(|s| s == "--").unwrap_or(a.len());
    a.splice(at..at, opts.iter().map(|s| s.to_string()));
    a
}

/// Runs `rewind ARGS` in `home`, each a process at once, each with `stdin`
/// on standard input; the wall time of all.
fn at_once(home: &Home, runs: &[Vec<String>], stdin: Option<&Path>) -> Duration {
    let started = Instant::now();
    let children: Vec<_> = runs
        .iter()
        .map(|args| {
            let input = match stdin {
                Some(p) => Stdio::from(std::fs::File::open(p).expect("the input file")),
                None => Stdio::null(),
            };
            Command::new(rewind_bin())
                .args(args)
                .env("REWIND_HOME", home.path())
                .stdin(input)
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

/// Every home and results directory the bench made, removed only when it
/// ends: removing thousands of page files makes the next thousands slower
/// to create for a minute or more on this machine's ext4 (a profile of
/// such a merge: most of its time in the kernel's inode allocator skipping
/// inodes deleted lately, `find_inode_bit` and `recently_deleted`), which
/// would be measured as the merge's and the shards' own time.
#[derive(Default)]
struct Kept {
    homes: Vec<Home>,
    dirs: Vec<tempfile::TempDir>,
}

impl Kept {
    fn home(&mut self) -> &Home {
        self.homes.push(Home::unreplayed());
        self.homes.last().unwrap()
    }

    fn dir(&mut self) -> PathBuf {
        self.dirs.push(tempfile::tempdir().unwrap());
        self.dirs.last().unwrap().path().to_path_buf()
    }
}

/// `rewind check --merge DIR`'s wall time, in a home of its own.
fn merge_time(dir: &Path, kept: &mut Kept) -> Duration {
    let merge = vec!["check".into(), "--merge".into(), dir.display().to_string()];
    at_once(kept.home(), &[merge], None)
}

/// A record's `duration` (`{"secs", "nanos"}`).
fn duration(v: &serde_json::Value) -> Option<f64> {
    Some(v["secs"].as_f64()? + v["nanos"].as_f64()? / 1e9)
}

/// What the shards' records say each run took: schedule 0's, the learning
/// run's (when there was one), and the schedules' after them.
fn schedule_times(dir: &Path) -> String {
    let mut times = Vec::new();
    let mut base = String::new();
    for e in std::fs::read_dir(dir).expect("the results").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.starts_with("schedule-") && name.ends_with(".json")) {
            continue;
        }
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(e.path()).unwrap()).expect("a record");
        let took = duration(&r["duration"]).unwrap_or(0.0);
        if r["index"] == 0 {
            let learned = r["learned"]["wall"].clone();
            base = format!("schedule 0 {took:.2} s ({} steps)", r["steps"]);
            if let Some(l) = duration(&learned) {
                base.push_str(&format!(", learning run {l:.2} s"));
            }
        } else {
            times.push(took);
        }
    }
    if times.is_empty() {
        return base;
    }
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    let min = times.iter().cloned().fold(f64::MAX, f64::min);
    let max = times.iter().cloned().fold(0.0, f64::max);
    format!(
        "a schedule {mean:.2} s on average ({min:.2} to {max:.2}, {} schedules); {base}",
        times.len()
    )
}

/// One round: the `--jobs 2` check, then `shards` shards at once (each
/// `--jobs 2/shards`, at least 1), each measured right after the other so
/// that both see about the same load.
fn round(base: &[String], stdin: Option<&Path>, n: f64, shards: u32, kept: &mut Kept) {
    let rate = |d: Duration| n / d.as_secs_f64();
    let load = load_average();
    let cpu = children_cpu();
    let jobs2 = at_once(kept.home(), &[with(base, &["--jobs", "2"])], stdin);
    let jobs2_cpu = children_cpu() - cpu;
    let dir = kept.dir();
    let jobs = (2 / shards).max(1).to_string();
    let runs: Vec<Vec<String>> = (1..=shards)
        .map(|i| {
            let shard = format!("{i}/{shards}");
            let results = dir.display().to_string();
            with(
                base,
                &["--jobs", &jobs, "--shard", &shard, "--results", &results],
            )
        })
        .collect();
    let wall = at_once(kept.home(), &runs, stdin);
    let cpu = children_cpu();
    let merge = merge_time(&dir, kept);
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
    println!("  the shards' runs: {}", schedule_times(&dir));
}

/// The program to check, as `REWIND_SHARDS_BENCH_PROGRAM` says; None when
/// pbzip2 is not installed.
fn checked(var: &dyn Fn(&str, &str) -> String, scratch: &Path) -> Option<Checked> {
    let program = var("REWIND_SHARDS_BENCH_PROGRAM", "pbzip2");
    if program != "pbzip2" {
        return Some(Checked {
            label: format!("--example {program}"),
            program: vec!["--example".into(), program],
            stdin: None,
        });
    }
    let pbzip2 = host_program(PBZIP2, "pbzip2")?;
    let kb: usize = var("REWIND_SHARDS_BENCH_KB", "1024")
        .parse()
        .expect("a size in KB");
    let input = scratch.join("input.txt");
    std::fs::write(&input, word_text(kb << 10)).expect("the input file");
    Some(Checked {
        label: format!("pbzip2 -p2 -b1 -c, {kb} KB of text on standard input"),
        program: ["--", &pbzip2, "-p2", "-b1", "-c"]
            .map(String::from)
            .to_vec(),
        stdin: Some(input),
    })
}

fn main() {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let scratch = tempfile::tempdir().unwrap();
    let Some(c) = checked(&var, scratch.path()) else {
        return;
    };
    let points = var("REWIND_SHARDS_BENCH_POINTS", "races");
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
        "rewind shards benchmark: {}, --points {points}, {schedules} schedules, {rounds} rounds, \
         shards {counts:?}, load average {}",
        c.label,
        load_average()
    );
    let base = check_args(&c, &points, &schedules);
    let mut kept = Kept::default();
    for r in 1..=rounds {
        println!("round {r}:");
        for &shards in &counts {
            round(&base, c.stdin.as_deref(), n, shards, &mut kept);
        }
    }
    println!("load average after: {}", load_average());
}
