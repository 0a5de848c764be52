//! The `rewind where` benchmark (issue 8): where at a step near the start
//! and one near the end of a 1,000,000-step run, cold (a fresh debuginfod
//! cache: the debug info is downloaded from a real `debuginfod` on loopback,
//! then parsed) and warm (the cache filled), each in a new `rewind`
//! process as a user runs it. Figures are printed, never asserted.
//!
//! Where the warm time goes: beside `where STEP`, `rewind ps --at STEP-1`
//! (the same keyframe and the same replay but the last exit, places named
//! by symbol, no source) and `rewind show` (the store, no machine), each
//! with its CPU time (the child's user + system time): the ratios say what
//! the seek, the symbols and the process cost, and wall over CPU says how
//! much was waiting for a core.
//! Beside the two steps, the step whose seek replays the most: the one
//! that ends the widest gap between keyframes, the worst case anywhere.
//! `WHERE_CALLS=N` records a shorter run.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench where

use rewind_tests::debuginfod::{build_id, client_env, Server};
use rewind_tests::{children_cpu, guest, guest_arg, parse_status, Home, Output};
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

/// Medians of wall and CPU time over `WARM_RUNS` runs of `rewind args`.
fn medians(h: &Home, args: &[&str], env: &[(&str, &str)]) -> (Duration, Duration) {
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..WARM_RUNS {
        let before = children_cpu();
        let (t, out) = timed(|| h.rewind_env(args, env));
        assert_eq!(out.code, 0, "{out}");
        assert!(!out.stderr.contains("downloaded"), "{out}");
        cpu.push(children_cpu() - before);
        wall.push(t);
    }
    wall.sort();
    cpu.sort();
    (wall[WARM_RUNS / 2], cpu[WARM_RUNS / 2])
}

fn main() {
    println!("rewind where benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    let server = Server::start(&guest("split-debug"));
    server.wait_for(&build_id(&guest("long-split")));
    let url = server.url();
    let h = Home::new();
    let prog = guest_arg("long-split");
    let calls = std::env::var("WHERE_CALLS").unwrap_or_else(|_| CALLS.to_string());
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
    let kf_path = h.path().join("runs").join(&run.id).join("keyframes");
    let keyframes = std::fs::metadata(&kf_path).map_or(0, |m| m.len());
    // The step a seek replays the most to reach: the keyframe that ends the
    // widest gap (where at STEP starts from the keyframe at or before STEP-1).
    let kf_steps: Vec<u64> = vmm::run::keyframe::read_all(&kf_path)
        .expect("the run's keyframes")
        .iter()
        .map(|k| k.step)
        .collect();
    let (gap, worst) = std::iter::once(0)
        .chain(kf_steps.iter().copied())
        .zip(kf_steps.iter().copied().chain([steps - 1]))
        .map(|(a, b)| (b - a, b))
        .max()
        .expect("a step");
    println!(
        "long-split {calls}: {steps} steps, recorded in {:.1} s; {} keyframes, {:.0} bytes per 1,000 steps, \
         the widest gap {gap} steps (before step {worst}); debug info only from debuginfod at {url}",
        rec.as_secs_f64(),
        kf_steps.len(),
        keyframes as f64 * 1000.0 / steps as f64
    );
    let mut warm_at = Vec::new();
    for step in [MARGIN, steps - MARGIN, worst] {
        let cache = tempfile::tempdir().unwrap();
        let env = client_env(&url, cache.path());
        let st = step.to_string();
        let (cold, out) = timed(|| h.rewind_env(&["where", &run.id, &st], &env));
        assert_eq!(out.code, 0, "{out}");
        assert!(out.stderr.contains("downloaded debug info"), "{out}");
        assert!(out.stdout.contains("long.c:"), "{out}");
        let (warm, warm_cpu) = medians(&h, &["where", &run.id, &st], &env);
        let before = (step - 1).to_string();
        let (ps, ps_cpu) = medians(&h, &["ps", &run.id, "--at", &before], &env);
        let (show, show_cpu) = medians(&h, &["show", &run.id], &env);
        let s = |d: Duration| d.as_secs_f64();
        println!(
            "  where at step {step:>8}: cold {:.3} s (download + parse + seek), warm {:.3} s (median of {WARM_RUNS}), {:.3} s CPU ({:.2}x wall over CPU)",
            s(cold),
            s(warm),
            s(warm_cpu),
            s(warm) / s(warm_cpu).max(1e-6)
        );
        println!(
            "    ps --at STEP-1 (the seek, no source) {:.3} s, {:.3} s CPU: where is {:.2}x its CPU; show (no machine) {:.3} s, {:.3} s CPU: where is {:.1}x its CPU",
            s(ps),
            s(ps_cpu),
            s(warm_cpu) / s(ps_cpu).max(1e-6),
            s(show),
            s(show_cpu),
            s(warm_cpu) / s(show_cpu).max(1e-6)
        );
        warm_at.push(warm);
    }
    println!(
        "  warm, late step / early step: {:.2}x; the most replayed step / early step: {:.2}x",
        warm_at[1].as_secs_f64() / warm_at[0].as_secs_f64(),
        warm_at[2].as_secs_f64() / warm_at[0].as_secs_f64()
    );
    server.stop();
}
