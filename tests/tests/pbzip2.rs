//! Debian's `pbzip2` under `rewind check` (issue 22): two compressing
//! threads, a reader and a writer hand 100 KB blocks through mutexes and
//! condition variables, shared traffic that is not a race. A check with
//! race-directed points (`--all --schedules 8`) compresses and decompresses
//! a text file without a false violation, every schedule's output is the
//! native program's, and every run replays (`Home`, at drop).

use rewind_tests::{host_program, rewind_bin, run_command_with_input, word_text, Home, DEADLINE};
use std::process::Command;

const PBZIP2: &str = "/usr/bin/pbzip2";

/// The text compressed: three 100 KB blocks and a part, so each compressing
/// thread takes more than one. 1 MB took 13.5 min in a debug build at load
/// average 17 (it passed); the bench measures 1 MB in a release build.
const SIZE: usize = 320 << 10;

/// `rewind check --json --all --schedules 8 --points races --keep all --
/// pbzip2 ARGS` with `input` on standard input: the runs of its report.
fn check(h: &Home, args: &[&str], input: &[u8]) -> Vec<String> {
    let mut cmd = Command::new(rewind_bin());
    cmd.args([
        "check",
        "--json",
        "--all",
        "--schedules",
        "8",
        "--points",
        "races",
        "--keep",
        "all",
        "--",
        PBZIP2,
    ])
    .args(args)
    .env("REWIND_HOME", h.path());
    let out = run_command_with_input(cmd, DEADLINE * 10, input);
    assert_eq!(out.code, 0, "no violation expected:\n{out}");
    let report: serde_json::Value = serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("check --json: {e}:\n{out}"));
    let runs: Vec<&serde_json::Value> = report["bases"]
        .as_array()
        .into_iter()
        .chain(report["tried"].as_array())
        .flatten()
        .collect();
    assert_eq!(runs.len(), 9, "schedule 0 and 8 schedules:\n{out}");
    for t in &runs {
        assert_eq!(t["status"], "exited:0", "{t}");
    }
    runs.iter()
        .map(|t| t["run"].as_str().expect("a run id").to_string())
        .collect()
}

/// What `run` wrote to its standard output, byte for byte.
fn stdout_of(h: &Home, run: &str) -> Vec<u8> {
    let out = Command::new(rewind_bin())
        .args(["log", "--fd", "1", run])
        .env("REWIND_HOME", h.path())
        .output()
        .expect("rewind log");
    assert!(out.status.success(), "rewind log {run}: {out:?}");
    out.stdout
}

#[test]
fn pbzip2_compresses_and_decompresses_alike_under_every_schedule() {
    let Some(pbzip2) = host_program(PBZIP2, "pbzip2") else {
        return;
    };
    let text = word_text(SIZE);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("text");
    std::fs::write(&file, &text).expect("the text written");
    let native = Command::new(&pbzip2)
        .args(["-p2", "-b1", "-c"])
        .arg(&file)
        .output()
        .expect("pbzip2 runs natively");
    assert!(native.status.success(), "{native:?}");
    let compressed = native.stdout;
    let h = Home::new();
    for run in check(&h, &["-p2", "-b1", "-c"], &text) {
        assert!(
            stdout_of(&h, &run) == compressed,
            "run {run} compressed otherwise than pbzip2 natively"
        );
    }
    for run in check(&h, &["-d", "-p2", "-c"], &compressed) {
        assert!(
            stdout_of(&h, &run) == text,
            "run {run} did not decompress to the text"
        );
    }
}
