//! The DAP benchmark (issue 9), two parts, each measured in this process
//! beside a baseline measured here too; each figure is the median of several
//! and the ratios are the result.
//!
//! (a) Line steps beside the step-granular moves the adapter had before, on
//!     the same run (`stepper`) at the same places: `next` by line vs `next`
//!     from event to event (`stepping: "events"`), and `stepBack` likewise.
//! (b) The latencies near the start and near the end of a long run
//!     (`long`, 1,000,000 steps; `REWIND_DAP_BENCH_STEPS` to change): `next`
//!     and `stepBack` by line, `reverseContinue` to a source breakpoint
//!     10,000 hits back (one hit a step), `goto` to the far end of the run,
//!     and `rewind/lanes` over a 100,000-step window, each beside a seek to
//!     the same place (`rewind/goto` to its step: the last keyframe, then
//!     forward), the least any move there costs.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench dap
//!
//! `REWIND_DAP_BENCH_HOME=DIR` keeps the store in DIR and measures the long
//! run recorded there before, if any (recording 1,000,000 steps takes
//! minutes).

use rewind_tests::dap::{median, ms, Client};
use serde_json::json;
use std::time::{Duration, Instant};

/// Rounds of each move.
const ROUNDS: usize = 7;
/// Rounds of the slow moves (reverseContinue, goto to the far end).
const SLOW_ROUNDS: usize = 3;
/// How far back reverseContinue goes, in hits of a line run once a step.
const BACK_HITS: u64 = 10_000;
/// The lanes window.
const LANES_WINDOW: u64 = 100_000;

fn main() {
    println!("rewind dap benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    line_steps();
    long_run();
}

/// A line of a guest source (`guest/tests/NAME`): its path and number.
fn line_of(name: &str, text: &str) -> (std::path::PathBuf, u64) {
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../guest/tests")
        .join(name)
        .canonicalize()
        .expect("the guest source");
    let body = std::fs::read_to_string(&source).expect("the guest source");
    let line = body
        .lines()
        .position(|l| l.contains(text))
        .expect("the line") as u64
        + 1;
    (source, line)
}

fn line_steps() {
    println!();
    println!("(a) line steps beside event steps, on stepper");
    let h = rewind_tests::Home::new();
    let run = h.run_guest("stepper", &[]);
    let (source, line) = line_of("stepper.c", "long s = square(");

    // Both sessions stand where worker first reaches the line.
    let mut lines = Client::start(h.path());
    let mut events = Client::start(h.path());
    lines.open(json!({"run": run.id, "step": 0}));
    events.open(json!({"run": run.id, "step": 0, "stepping": "events"}));
    let bp = json!({"source": {"path": source}, "breakpoints": [{"line": line}]});
    lines.request("setBreakpoints", bp, false);
    lines.request("continue", json!({"threadId": 1000}), true);
    lines.request(
        "setBreakpoints",
        json!({"source": {"path": source}, "breakpoints": []}),
        false,
    );
    let tid = lines.tid;

    let time = |c: &mut Client, cmd: &str| {
        let t = Instant::now();
        c.request(cmd, json!({"threadId": tid}), true);
        t.elapsed()
    };
    let (mut line_next, mut line_back, mut event_next, mut event_back) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        line_next.push(time(&mut lines, "next"));
        line_back.push(time(&mut lines, "stepBack"));
    }
    // The events session at the worker's thread start, stepping its events.
    events.request(
        "rewind/goto",
        json!({"step": run.steps.unwrap_or(30) / 2}),
        true,
    );
    for _ in 0..ROUNDS {
        event_next.push(time(&mut events, "next"));
        event_back.push(time(&mut events, "stepBack"));
    }
    let (ln, lb, en, eb) = (
        median(line_next),
        median(line_back),
        median(event_next),
        median(event_back),
    );
    println!(
        "    next by line {:.1} ms, by event {:.1} ms: {:.2}x",
        ms(ln),
        ms(en),
        ln.as_secs_f64() / en.as_secs_f64()
    );
    println!(
        "    stepBack by line {:.1} ms, by event {:.1} ms: {:.2}x",
        ms(lb),
        ms(eb),
        lb.as_secs_f64() / eb.as_secs_f64()
    );
    println!(
        "    reverse line step vs forward line step: {:.2}x",
        lb.as_secs_f64() / ln.as_secs_f64()
    );
    drop(lines);
    drop(events);
    h.replay_identical(&run.id);
}

/// What (b) measures at one place of the long run.
struct Place {
    seek: Duration,
    next: Duration,
    back: Duration,
    reverse: Duration,
    far: Duration,
    lanes: Duration,
}

fn long_run() {
    let steps_wanted: u64 = std::env::var("REWIND_DAP_BENCH_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    println!();
    println!("(b) a long run: `long {steps_wanted}`");
    // REWIND_DAP_BENCH_HOME keeps the store, and the run, for the next time.
    let h = match std::env::var_os("REWIND_DAP_BENCH_HOME") {
        Some(dir) => rewind_tests::Home::kept_at(std::path::Path::new(&dir)),
        None => rewind_tests::Home::new(),
    };
    let note = h.path().join(format!("bench-long-{steps_wanted}"));
    let kept = std::fs::read_to_string(&note).ok().and_then(|t| {
        let (id, steps) = t.trim().split_once(' ')?;
        let there = h
            .path()
            .join("runs")
            .join(id)
            .join("manifest.json")
            .exists();
        there.then(|| (id.to_string(), steps.parse::<u64>().ok()))
    });
    let (id, steps) = match kept {
        Some((id, Some(steps))) => {
            println!("    the run recorded before: {id}, {steps} steps");
            (id, steps)
        }
        _ => {
            let t = Instant::now();
            let run = h.run_guest("long", &[&steps_wanted.to_string()]);
            let steps = run.steps.expect("steps");
            println!(
                "    recorded {steps} steps in {:.1} s",
                t.elapsed().as_secs_f64()
            );
            std::fs::write(&note, format!("{} {steps}", run.id)).expect("the note");
            (run.id, steps)
        }
    };
    let (source, line) = line_of("long.c", "shared++;");
    let mut c = Client::start(h.path());
    c.open(json!({"run": id, "step": 0}));
    // Where reverseContinue has 10,000 hits behind it, and near the end.
    let start = (BACK_HITS + 2_000).min(steps / 2);
    let end = steps.saturating_sub(1_000).max(start);
    let at_start = place(&mut c, &source, line, start, end);
    let at_end = place(&mut c, &source, line, end, start);
    drop(c);
    println!("    medians in ms; start = step {start}, end = step {end}; vs seek = the move / a seek to that step");
    println!(
        "    {:<48} {:>9} {:>9} {:>9} {:>14} {:>12}",
        "", "start", "end", "end/start", "vs seek start", "vs seek end"
    );
    let (a, b) = (&at_start, &at_end);
    let ratio = |x: Duration, y: Duration| x.as_secs_f64() / y.as_secs_f64();
    let rows = [
        (
            "seek (rewind/goto to the step): the baseline",
            a.seek,
            b.seek,
        ),
        ("next by line", a.next, b.next),
        ("stepBack by line", a.back, b.back),
        (
            "reverseContinue to a breakpoint 10,000 hits back",
            a.reverse,
            b.reverse,
        ),
        ("goto the other end of the run", a.far, b.far),
        ("rewind/lanes over 100,000 steps", a.lanes, b.lanes),
    ];
    for (what, x, y) in rows {
        println!(
            "    {what:<48} {:>9.1} {:>9.1} {:>8.2}x {:>13.2}x {:>11.2}x",
            ms(x),
            ms(y),
            ratio(y, x),
            ratio(x, a.seek),
            ratio(y, b.seek),
        );
    }
    h.replay_identical(&id);
}

/// Times the moves at `step`: a seek there, then, from a stop at the source
/// line in the worker, `next` and `stepBack` by line, reverseContinue
/// 10,000 hits back, goto to `far`, and lanes over the window before it.
fn place(c: &mut Client, source: &std::path::Path, line: u64, step: u64, far: u64) -> Place {
    let none = json!({"source": {"path": source}, "breakpoints": []});
    let bp = |hit: Option<u64>| {
        let mut b = json!({"line": line});
        if let Some(n) = hit {
            b["hitCondition"] = json!(n.to_string());
        }
        json!({"source": {"path": source}, "breakpoints": [b]})
    };
    // In the worker at the line, just after `step`.
    let arrive = |c: &mut Client| {
        c.request("rewind/goto", json!({"step": step}), true);
        c.request("setBreakpoints", bp(None), false);
        c.request("continue", json!({"threadId": c.tid}), true);
        c.request("setBreakpoints", none.clone(), false);
    };
    let times = |c: &mut Client, n: usize, f: &mut dyn FnMut(&mut Client) -> Duration| {
        median((0..n).map(|_| f(c)).collect())
    };
    let seek = times(c, ROUNDS, &mut |c| {
        c.request("rewind/goto", json!({"step": step + 1}), true);
        c.timed("rewind/goto", json!({"step": step}), true).0
    });
    arrive(c);
    let tid = c.tid;
    let next = times(c, ROUNDS, &mut |c| {
        c.timed("next", json!({"threadId": tid}), true).0
    });
    let back = times(c, ROUNDS, &mut |c| {
        c.timed("stepBack", json!({"threadId": tid}), true).0
    });
    let reverse = times(c, SLOW_ROUNDS, &mut |c| {
        arrive(c);
        c.request("setBreakpoints", bp(Some(BACK_HITS)), false);
        let t = c.timed("reverseContinue", json!({"threadId": tid}), true).0;
        c.request("setBreakpoints", none.clone(), false);
        t
    });
    let far_time = times(c, SLOW_ROUNDS, &mut |c| {
        c.request("rewind/goto", json!({"step": step}), true);
        c.timed("rewind/goto", json!({"step": far}), true).0
    });
    let from = step.saturating_sub(LANES_WINDOW);
    let lanes = times(c, ROUNDS, &mut |c| {
        c.timed(
            "rewind/lanes",
            json!({"from": from, "to": from + LANES_WINDOW}),
            false,
        )
        .0
    });
    Place {
        seek,
        next,
        back,
        reverse,
        far: far_time,
        lanes,
    }
}
