//! What race-directed memory points cost (issue 22): a whole `rewind check
//! --all --no-narrow --schedules 8` with `--points races` (its learning run
//! included) beside nine `--points syscalls` runs of the same program,
//! measured in the same process; the learning run alone beside one
//! syscall-point run; and the same check with `--points memory` (every
//! access to a page two threads touched a point) where it ends in
//! reasonable time. Programs: Debian's `pbzip2 -p2 -b1 -c` compressing
//! 200 KB and 1 MB of text on standard input, and the examples.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench races
//!
//! `REWIND_BENCH_SIZES` (comma-separated KB, default `200,1024`) and
//! `REWIND_BENCH_EXAMPLES` (comma-separated, default `handoff,counter
//! 2500`: an example by name, or a guest program and its arguments, checked
//! as `-- PROGRAM ARGS`) change what is measured. Schedules per second are
//! the check's nine runs (schedule 0 and eight) over its time less the
//! learning run's. Wall times fall with the host's load, which is
//! printed: read the ratios. Nothing is replayed (the tests replay).

use rewind_tests::{host_program, load_average, run_command_with_input, word_text, Home};
use std::process::Command;
use std::time::{Duration, Instant};

const PBZIP2: &str = "/usr/bin/pbzip2";
const DEADLINE: Duration = Duration::from_secs(3600);

/// `rewind ARGS` in `h` with `input` on standard input: its wall time and output.
fn timed(h: &Home, args: &[&str], input: &[u8]) -> (Duration, rewind_tests::Output) {
    let mut cmd = Command::new(rewind_tests::rewind_bin());
    cmd.args(args).env("REWIND_HOME", h.path());
    let t = Instant::now();
    let out = run_command_with_input(cmd, DEADLINE, input);
    (t.elapsed(), out)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// One program under the three measurements; `prog` is what follows
/// `--` (or `--example NAME`).
fn measure(label: &str, prog: &[&str], input: &[u8], memory_too: bool) {
    let h = Home::unreplayed();
    let with =
        |head: &[&str]| -> Vec<String> { head.iter().chain(prog).map(|s| s.to_string()).collect() };
    let run = with(&["run", "-q", "--points", "syscalls"]);
    let mut nine = Duration::ZERO;
    let mut one = Duration::MAX;
    for _ in 0..9 {
        let (d, out) = timed(&h, &strs(&run), input);
        assert!(out.code == 0, "{out}");
        nine += d;
        one = one.min(d);
    }
    let learn = with(&["run", "-q", "--points", "races"]);
    let (learning, out) = timed(&h, &strs(&learn), input);
    assert!(out.code == 0, "{out}");
    let check = |points: &str| {
        let v = with(&[
            "check",
            "--all",
            "--no-narrow",
            "--jobs",
            "1",
            "--schedules",
            "8",
            "--json",
            "--points",
            points,
        ]);
        let (d, out) = timed(&h, &strs(&v), input);
        let report: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("check --json: {e}:\n{out}"));
        let violations = report["tried"].as_array().map_or(0, |t| {
            t.iter()
                .filter(|t| t["violations"].as_array().is_some_and(|v| !v.is_empty()))
                .count()
        });
        (d, violations, report["base"]["steps"].as_u64().unwrap_or(0))
    };
    let (races, found, steps) = check("races");
    let schedule = races.saturating_sub(learning) / 9;
    println!(
        "| {label} | {:.2} s ({:.1}/s) | {:.2} s ({:.1}x) | {:.2} s ({:.1}x) | {:.2} s ({:.1}x, {:.1}/s) | {steps} | {found} | {} |",
        secs(nine),
        9.0 / secs(nine),
        secs(races),
        secs(races) / secs(nine),
        secs(learning),
        secs(learning) / secs(one),
        secs(schedule),
        secs(schedule) / secs(one),
        1.0 / secs(schedule),
        load_average(),
    );
    if memory_too {
        let (memory, found, steps) = check("memory");
        let schedule = memory / 9;
        println!(
            "| {label}, `--points memory` | | {:.2} s ({:.1}x) | | {:.2} s ({:.1}x, {:.2}/s) | {steps} | {found} | {} |",
            secs(memory),
            secs(memory) / secs(nine),
            secs(schedule),
            secs(schedule) / secs(one),
            1.0 / secs(schedule),
            load_average(),
        );
    }
}

fn main() {
    println!(
        "| program | 9 syscall-point runs (runs/s) | check, races (x the 9) | learning run (x one run) | \
         a schedule after it (x one run, schedules/s) | schedule 0 steps | violating | load |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    let examples =
        std::env::var("REWIND_BENCH_EXAMPLES").unwrap_or_else(|_| "handoff,counter 2500".into());
    for ex in examples.split(',').filter(|e| !e.is_empty()) {
        match ex.split_whitespace().collect::<Vec<_>>().as_slice() {
            [name] => measure(ex, &["--example", name], &[], true),
            [name, args @ ..] => {
                let path = rewind_tests::guest_arg(name);
                let mut prog = vec!["--", path.as_str()];
                prog.extend_from_slice(args);
                measure(ex, &prog, &[], true);
            }
            [] => {}
        }
    }
    if host_program(PBZIP2, "pbzip2").is_none() {
        return;
    }
    let sizes = std::env::var("REWIND_BENCH_SIZES").unwrap_or_else(|_| "200,1024".into());
    for kb in sizes.split(',').filter_map(|s| s.parse::<usize>().ok()) {
        let input = word_text(kb << 10);
        let label = format!("pbzip2 -p2 -b1, {kb} KB");
        measure(&label, &["--", PBZIP2, "-p2", "-b1", "-c"], &input, false);
    }
}
