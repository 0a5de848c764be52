//! What narrowing costs beside the find (issue 22, item 4: narrowing
//! within 2x the find): `rewind check --example NAME --schedules N --jobs 1
//! --json` on each racy example, the find being the check's wall time less
//! the narrowing's (`narrowed.wall_secs`). With `REWIND_BASELINE_BIN` (a
//! `rewind` built from an earlier commit) each example is checked by both
//! binaries in turn, in this process, and the narrowed results compared:
//! the ratio of their narrowing times is read against the same load.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench narrowing
//!
//! `REWIND_BENCH_EXAMPLES` (comma-separated `NAME` or `NAME:SCHEDULES`)
//! changes what is measured. Wall times fall with the host's load, which
//! is printed: read the ratios. Nothing is replayed (the tests replay).

use rewind_tests::{load_average, run_command_with_input, Home};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Each example and the schedules its test gives it (tests/tests/racy_examples.rs).
const EXAMPLES: &str =
    "counter:64,flag:64,lazy:64,lockfree:64,twolocks:64,handoff:128,refcount:256,tally:64";

/// One check's find and narrowing.
struct Checked {
    find: f64,
    narrow: f64,
    runs: u64,
    /// The deciding steps and the sentence: what must not change.
    result: String,
}

fn check(bin: &Path, name: &str, schedules: &str) -> Checked {
    let h = Home::unreplayed();
    let mut cmd = Command::new(bin);
    cmd.args(["check", "--example", name, "--schedules", schedules])
        .args(["--jobs", "1", "--json"])
        .env("REWIND_HOME", h.path());
    let t = Instant::now();
    let out = run_command_with_input(cmd, Duration::from_secs(3600), &[]);
    let wall = t.elapsed().as_secs_f64();
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("check --json of {name}: {e}:\n{out}"));
    let n = &v["narrowed"];
    let narrow = n["wall_secs"].as_f64().unwrap_or(0.0);
    Checked {
        find: wall - narrow,
        narrow,
        runs: n["runs"].as_u64().unwrap_or(0),
        result: format!("{} {}", n["deciding"], n["sentence"]),
    }
}

fn main() {
    let now = rewind_tests::rewind_bin();
    let before = std::env::var_os("REWIND_BASELINE_BIN").map(PathBuf::from);
    println!(
        "| example | find | narrow (runs) | narrow / find | baseline: find, narrow (runs), narrow / find | narrow, baseline / now | same result | load |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let examples = std::env::var("REWIND_BENCH_EXAMPLES").unwrap_or_else(|_| EXAMPLES.into());
    for ex in examples.split(',').filter(|e| !e.is_empty()) {
        let (name, schedules) = ex.split_once(':').unwrap_or((ex, "64"));
        let old = before.as_deref().map(|b| check(b, name, schedules));
        let new = check(&now, name, schedules);
        let (was, speedup, same) = match &old {
            Some(o) => (
                format!(
                    "{:.1} s, {:.1} s ({}), {:.2}x",
                    o.find,
                    o.narrow,
                    o.runs,
                    o.narrow / o.find
                ),
                format!("{:.1}x", o.narrow / new.narrow),
                if o.result == new.result {
                    "yes"
                } else {
                    "**no**"
                }
                .to_string(),
            ),
            None => Default::default(),
        };
        println!(
            "| {name} | {:.1} s | {:.1} s ({}) | {:.2}x | {was} | {speedup} | {same} | {} |",
            new.find,
            new.narrow,
            new.runs,
            new.narrow / new.find,
            load_average()
        );
        if let Some(o) = old.filter(|o| o.result != new.result) {
            println!("|  | was: {} | now: {} | | | | | |", o.result, new.result);
        }
    }
}
