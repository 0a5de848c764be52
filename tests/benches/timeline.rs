//! The timeline benchmark (issues 3 and 4): finding a race, forking late,
//! seeking, keyframe sizes. Everything is measured in this process and
//! printed beside a baseline measured here too:
//!
//!   (a) `rewind check --example bank` end to end: wall time, schedules per
//!       second, narrowing time; beside it the native bank binary run in a
//!       loop on all cores until it first loses money, and pinned to one core
//!       for 1000 runs (it should never fail there);
//!   (b) fork latency at steps 1k, 10k, 100k and 1M of a long run, against
//!       forking the same run recorded without keyframes (a rerun from step 0);
//!   (c) seek time (`rewind cat` at those steps) with and without keyframes;
//!   (d) keyframe bytes per 1,000 steps (the keyframes file and the new pages);
//!   (e) export sizes with and without `--replayable`, when `rewind export` exists.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench timeline

use rewind_tests::{guest, guest_arg, Home, Output};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Steps at which forks and seeks are timed.
const FORK_STEPS: [u64; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// Steps a run goes on past the fork step.
const TAIL: u64 = 2_000;
/// Native bank runs pinned to one core.
const PINNED_RUNS: u32 = 1000;
/// Native bank runs on all cores before giving up on seeing it fail.
const UNPINNED_LIMIT: u32 = 100_000;

fn timed(f: impl FnOnce() -> Output) -> (Duration, Output) {
    let t = Instant::now();
    let o = f();
    (t.elapsed(), o)
}

fn main() {
    println!("rewind timeline benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    println!();
    check_bank();
    println!();
    forks_and_seeks();
}

fn check_bank() {
    let h = Home::unreplayed();
    let (wall, out) = timed(|| h.rewind(&["check", "--example", "bank", "--json"]));
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("check --json: {e}\n{out}"));
    let tried = v["tried"].as_array().map_or(0, |a| a.len()) + 1;
    let narrow = v["narrowed"]["wall_secs"].as_f64().unwrap_or(f64::NAN);
    let search = wall.as_secs_f64() - narrow;
    println!(
        "(a) rewind check --example bank: found and narrowed in {:.3} s wall",
        wall.as_secs_f64()
    );
    println!(
        "    {tried} schedules in {search:.3} s = {:.0} schedules/s; narrowing {narrow:.3} s ({} runs)",
        tried as f64 / search,
        v["narrowed"]["runs"]
    );
    let bank = guest("bank");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (runs, took) = native_until_failure(&bank, cores);
    match runs {
        Some(n) => println!(
            "    native bank on {cores} cores: first lost money after {n} runs, {:.3} s (rewind's check took {:.2}x that, and its failure replays every time)",
            took.as_secs_f64(),
            wall.as_secs_f64() / took.as_secs_f64()
        ),
        None => println!(
            "    native bank on {cores} cores: no failure in {UNPINNED_LIMIT} runs ({:.1} s)",
            took.as_secs_f64()
        ),
    }
    let (fails, took) = native_pinned(&bank);
    println!(
        "    native bank pinned to one core: {fails} failures in {PINNED_RUNS} runs ({:.2} s)",
        took.as_secs_f64()
    );
}

fn native_until_failure(bank: &Path, cores: usize) -> (Option<u32>, Duration) {
    let t = Instant::now();
    let found = std::sync::atomic::AtomicU32::new(0);
    let count = std::sync::atomic::AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..cores {
            s.spawn(|| {
                use std::sync::atomic::Ordering::SeqCst;
                while found.load(SeqCst) == 0 {
                    let n = count.fetch_add(1, SeqCst) + 1;
                    if n > UNPINNED_LIMIT {
                        break;
                    }
                    let st = Command::new(bank).stdout(Stdio::null()).status().unwrap();
                    if st.code() == Some(2) {
                        found.fetch_min(n, SeqCst);
                        let _ = found.compare_exchange(0, n, SeqCst, SeqCst);
                    }
                }
            });
        }
    });
    let n = found.into_inner();
    ((n > 0).then_some(n), t.elapsed())
}

fn native_pinned(bank: &Path) -> (u32, Duration) {
    let t = Instant::now();
    let mut fails = 0;
    for _ in 0..PINNED_RUNS {
        let mut cmd = Command::new("taskset");
        cmd.arg("-c").arg("0").arg(bank).stdout(Stdio::null());
        if cmd.status().unwrap().code() == Some(2) {
            fails += 1;
        }
    }
    (fails, t.elapsed())
}

fn id_of(o: &Output) -> String {
    o.stderr
        .lines()
        .find_map(|l| l.strip_prefix("rewind: run "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no run line:\n{o}"))
        .to_string()
}

// Steps between keyframes at most; none is taken at step 0.
use vmm::run::keyframe::KEYFRAME_STEPS;

/// A timed fork must have worked, and started where it should: past the
/// first keyframe, from a keyframe at most `KEYFRAME_STEPS` before `step`
/// (keyframes are kept at least that often), never from step 0; from step 0
/// when `step` is None (the run kept no keyframes).
fn forked(o: &Output, step: Option<u64>) {
    assert_eq!(o.code, 0, "a timed fork failed:\n{o}");
    let from = o
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("rewind: forking from "))
        .unwrap_or_else(|| panic!("the fork does not say where it started:\n{o}"));
    match step {
        Some(s) => {
            let k: Option<u64> = from
                .strip_prefix("the keyframe at step ")
                .and_then(|k| k.parse().ok());
            match k {
                Some(k) => assert!(
                    k <= s && s - k <= KEYFRAME_STEPS,
                    "the fork at step {s} started from the keyframe at step {k}:\n{o}"
                ),
                None => assert!(
                    s < KEYFRAME_STEPS,
                    "the fork at step {s} fell back to step 0:\n{o}"
                ),
            }
        }
        None => assert!(from.starts_with("step 0"), "{o}"),
    }
}

/// A timed seek must have answered: `/nothing` did not exist (exit 1).
fn sought(o: &Output) {
    assert_eq!(o.code, 1, "a timed seek failed:\n{o}");
}

fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p).map_or(0, |d| {
        d.flatten()
            .map(|e| {
                let m = e.metadata().unwrap();
                if m.is_dir() {
                    dir_size(&e.path())
                } else {
                    m.len()
                }
            })
            .sum()
    })
}

fn forks_and_seeks() {
    // For each step S, a run of S + TAIL steps, so that a fork at S has
    // little left to run: its time is the time to reach S. The same run
    // without keyframes has the same inputs, so the same id: it lives in a
    // store of its own.
    let h = Home::unreplayed();
    let bare = Home::unreplayed();
    let prog = guest_arg("long");
    println!("(b) fork latency at step S of a run of S+{TAIL} steps, against the same fork of the run kept without keyframes (a rerun from step 0)");
    println!("(c) seek time (`rewind cat RUN S /nothing`), the same way");
    let mut last = None;
    for s in FORK_STEPS {
        // The guest makes about one step per call.
        let calls = (s + TAIL).to_string();
        let (rec, with) = timed(|| h.rewind(&["run", "-q", "--", &prog, &calls]));
        assert_eq!(with.code, 0, "{with}");
        let with = id_of(&with);
        let without = bare.rewind(&["run", "-q", "--no-keyframes", "--", &prog, &calls]);
        assert_eq!(without.code, 0, "{without}");
        let without = id_of(&without);
        let st = s.to_string();
        let (kf, o) = timed(|| h.rewind(&["fork", &with, &st, "--schedule", "1", "-q"]));
        forked(&o, Some(s));
        let (rerun, o) = timed(|| bare.rewind(&["fork", &without, &st, "--schedule", "1", "-q"]));
        forked(&o, None);
        let (seek, o) = timed(|| h.rewind(&["cat", &with, &st, "/nothing"]));
        sought(&o);
        let (seek0, o) = timed(|| bare.rewind(&["cat", &without, &st, "/nothing"]));
        sought(&o);
        println!(
            "    S = {s:>8}: fork {:6.3} s with keyframes, {:7.3} s rerun ({:6.1}x); seek {:6.3} s, {:7.3} s from step 0 ({:6.1}x); recorded in {:.1} s",
            kf.as_secs_f64(),
            rerun.as_secs_f64(),
            rerun.as_secs_f64() / kf.as_secs_f64(),
            seek.as_secs_f64(),
            seek0.as_secs_f64(),
            seek0.as_secs_f64() / seek.as_secs_f64(),
            rec.as_secs_f64()
        );
        last = Some((with, s + TAIL));
    }
    let (with, steps) = last.expect("at least one step");
    let kf_bytes = std::fs::metadata(h.path().join("runs").join(&with).join("keyframes"))
        .map_or(0, |m| m.len());
    let pages = dir_size(&h.path().join("pages"));
    println!(
        "(d) keyframes of the longest run: {kf_bytes} bytes, pages of all runs {pages} bytes: {:.0} bytes of keyframes per 1,000 steps",
        kf_bytes as f64 * 1000.0 / steps as f64
    );
    let out = h.path().join("x.rwd");
    let plain = h.rewind(&["export", &with, "-o", out.to_str().unwrap()]);
    if plain.code == 0 {
        let a = std::fs::metadata(&out).map_or(0, |m| m.len());
        let full = h.rewind(&["export", &with, "--replayable", "-o", out.to_str().unwrap()]);
        let b = std::fs::metadata(&out).map_or(0, |m| m.len());
        println!(
            "(e) export: {a} bytes; with --replayable {b} bytes{}",
            if full.code == 0 { "" } else { " (failed)" }
        );
    } else {
        println!("(e) export: not available ({})", plain.stderr.trim());
    }
}
