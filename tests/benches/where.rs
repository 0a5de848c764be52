//! The `rewind where` benchmark (issue 8): where at a step near the start
//! and one near the end of a 1,000,000-step run, cold (a fresh debuginfod
//! cache: the debug info is downloaded from a real `debuginfod` on loopback,
//! then parsed) and warm (the cache filled), each in a new `rewind`
//! process as a user runs it. Figures are printed, never asserted.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench where

use rewind_tests::debuginfod::{build_id, Server};
use rewind_tests::{guest, guest_arg, parse_status, Home, Output};
use std::time::{Duration, Instant};

/// Calls the long program makes (about one step each).
const CALLS: u64 = 1_000_000;
/// Steps from either end of the run at which `where` is timed.
const MARGIN: u64 = 1_000;
/// Warm runs per step; the median is printed.
const WARM_RUNS: usize = 5;

fn timed(f: impl FnOnce() -> Output) -> (Duration, Output) {
    let t = Instant::now();
    let o = f();
    (t.elapsed(), o)
}

fn main() {
    println!("rewind where benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    let server = Server::start(&guest("split-debug"));
    server.wait_for(&build_id(&guest("long-split")));
    let url = server.url();
    let h = Home::new();
    let prog = guest_arg("long-split");
    let calls = CALLS.to_string();
    // Recording a million steps outlasts the tests' deadline on a loaded host.
    let (rec, out) = timed(|| {
        let mut cmd = std::process::Command::new(rewind_tests::rewind_bin());
        cmd.args(["run", "-q", "--", &prog, &calls])
            .env("REWIND_HOME", h.path())
            .env("DEBUGINFOD_URLS", "");
        rewind_tests::run_command(cmd, Duration::from_secs(1800))
    });
    let run = parse_status(&out).unwrap_or_else(|| panic!("{out}"));
    let steps = run.steps.expect("a step count");
    println!(
        "long-split {CALLS}: {steps} steps, recorded in {:.1} s; debug info only from debuginfod at {url}",
        rec.as_secs_f64()
    );
    let mut warm_at = Vec::new();
    for step in [MARGIN, steps - MARGIN] {
        let cache = tempfile::tempdir().unwrap();
        let env = [
            ("DEBUGINFOD_URLS", url.as_str()),
            ("DEBUGINFOD_CACHE_PATH", cache.path().to_str().unwrap()),
        ];
        let st = step.to_string();
        let (cold, out) = timed(|| h.rewind_env(&["where", &run.id, &st], &env));
        assert_eq!(out.code, 0, "{out}");
        assert!(out.stderr.contains("downloaded debug info"), "{out}");
        assert!(out.stdout.contains("long.c:"), "{out}");
        let mut warm: Vec<Duration> = (0..WARM_RUNS)
            .map(|_| {
                let (t, out) = timed(|| h.rewind_env(&["where", &run.id, &st], &env));
                assert!(!out.stderr.contains("downloaded"), "{out}");
                t
            })
            .collect();
        warm.sort();
        let warm = warm[WARM_RUNS / 2];
        println!(
            "  where at step {step:>8}: cold {:.3} s (download + parse + seek), warm {:.3} s (median of {WARM_RUNS})",
            cold.as_secs_f64(),
            warm.as_secs_f64()
        );
        warm_at.push(warm);
    }
    println!(
        "  warm, late step / early step: {:.2}x",
        warm_at[1].as_secs_f64() / warm_at[0].as_secs_f64()
    );
    server.stop();
}
