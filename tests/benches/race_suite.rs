//! The race-benchmark claim of issue 7: schedulers that may switch threads
//! at every shared access find nearly all of a set of small pthread
//! programs with one bug each, where system-call points find few.
//!
//! Third-party code does not enter this repository: the suite is a
//! directory named by `REWIND_RACE_SUITE`, of C files, each a whole program
//! whose bug makes it exit non-zero or die under some interleaving. Without
//! the variable the harness says "skipped". Each program is built here with
//! `cc -static -pthread -O1` (one that does not build is listed, not
//! counted) and checked with `rewind check --no-narrow` (random, 64
//! schedules) with memory points and with syscall points. A program whose
//! schedule 0 already fails shows its bug on the first run and is counted
//! apart, as the issue counts it.
//!
//!   REWIND_RACE_SUITE=/path/to/suite cargo bench -p rewind-tests --bench race_suite

use rewind_tests::Home;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCHEDULES: &str = "64";

/// What one check said of a program.
enum Verdict {
    /// Schedule 0 itself fails.
    FirstRun,
    /// The first failing schedule's position.
    Found(usize),
    /// No schedule failed, but one ran out of its --timeout: a hang or a
    /// slow run, not a find.
    TimedOut(usize),
    Missed,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::FirstRun => f.write_str("schedule 0"),
            Verdict::Found(n) => write!(f, "{n}"),
            Verdict::TimedOut(n) => write!(f, "timed out at {n}"),
            Verdict::Missed => write!(f, ">{SCHEDULES}"),
        }
    }
}

fn build(src: &Path, out: &Path) -> bool {
    Command::new("cc")
        .args(["-static", "-pthread", "-O1", "-w", "-o"])
        .arg(out)
        .arg(src)
        .status()
        .is_ok_and(|s| s.success())
}

fn check(h: &Home, prog: &Path, points: &str) -> Verdict {
    let prog = prog.to_str().expect("a UTF-8 path");
    let out = h.rewind(&[
        "check",
        "--json",
        "--no-narrow",
        "--timeout",
        "10",
        "--points",
        points,
        "--schedules",
        SCHEDULES,
        "--",
        prog,
    ]);
    let Ok(v) = serde_json::from_str::<serde_json::Value>(out.stdout.trim()) else {
        return Verdict::Missed;
    };
    let timed_out = |t: &serde_json::Value| t["status"].as_str() == Some("timed-out");
    let violated = |t: &serde_json::Value| {
        t["violations"].as_array().is_some_and(|a| !a.is_empty())
            || (t["status"].as_str() != Some("exited:0") && !timed_out(t))
    };
    if violated(&v["base"]) {
        return Verdict::FirstRun;
    }
    let tried = v["tried"].as_array().cloned().unwrap_or_default();
    match (
        tried.iter().position(violated),
        tried.iter().position(timed_out),
    ) {
        (Some(i), _) => Verdict::Found(i + 1),
        (None, Some(i)) => Verdict::TimedOut(i + 1),
        (None, None) => Verdict::Missed,
    }
}

fn main() {
    let Some(suite) = std::env::var_os("REWIND_RACE_SUITE").map(PathBuf::from) else {
        println!("race suite: skipped (set REWIND_RACE_SUITE to a directory of C programs)");
        return;
    };
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&suite)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", suite.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    let bins = tempfile_dir();
    println!(
        "race suite: {} programs in {}",
        sources.len(),
        suite.display()
    );
    println!("| program | memory points | syscall points |");
    println!("| --- | --- | --- |");
    let (mut counted, mut first, mut mem_found, mut sys_found) = (0, 0, 0, 0);
    let (mut mem_timed_out, mut sys_timed_out) = (0, 0);
    for src in &sources {
        let name = src.file_stem().unwrap().to_string_lossy().to_string();
        let bin = bins.join(&name);
        if !build(src, &bin) {
            println!("| {name} | does not build | |");
            continue;
        }
        let h = Home::new();
        let mem = check(&h, &bin, "memory");
        let sys = check(&h, &bin, "syscalls");
        println!("| {name} | {mem} | {sys} |");
        if matches!(mem, Verdict::FirstRun) || matches!(sys, Verdict::FirstRun) {
            first += 1;
            continue;
        }
        counted += 1;
        mem_found += matches!(mem, Verdict::Found(_)) as usize;
        sys_found += matches!(sys, Verdict::Found(_)) as usize;
        mem_timed_out += matches!(mem, Verdict::TimedOut(_)) as usize;
        sys_timed_out += matches!(sys, Verdict::TimedOut(_)) as usize;
    }
    println!();
    println!("{first} show their bug on the first run; of the other {counted}:");
    println!("  memory points found {mem_found}, syscall points found {sys_found} (within {SCHEDULES} schedules)");
    println!(
        "  timed out without a find: memory points {mem_timed_out}, syscall points {sys_timed_out}"
    );
    let _ = std::fs::remove_dir_all(&bins);
}

/// A fresh directory for the built programs.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rewind-race-suite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}
