//! The DAP benchmark (issue 9): how long line steps take beside the
//! step-granular moves the adapter had before, measured in this process on
//! the same run at the same places: `next` by line vs `next` from event to
//! event (`stepping: "events"`), and `stepBack` by line vs `stepBack` by
//! event. Each figure is the median of several; the ratios are the result.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench dap

use rewind_tests::dap::{median, ms, Client};
use serde_json::json;
use std::time::Instant;

/// Rounds of each move.
const ROUNDS: usize = 7;

fn main() {
    println!("rewind dap benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    let h = rewind_tests::Home::new();
    let run = h.run_guest("stepper", &[]);
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../guest/tests/stepper.c")
        .canonicalize()
        .expect("stepper.c");
    let text = std::fs::read_to_string(&source).expect("stepper.c");
    let line = text
        .lines()
        .position(|l| l.contains("long s = square("))
        .expect("the line")
        + 1;

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
        "next by line {:.1} ms, by event {:.1} ms: {:.2}x",
        ms(ln),
        ms(en),
        ln.as_secs_f64() / en.as_secs_f64()
    );
    println!(
        "stepBack by line {:.1} ms, by event {:.1} ms: {:.2}x",
        ms(lb),
        ms(eb),
        lb.as_secs_f64() / eb.as_secs_f64()
    );
    println!(
        "reverse line step vs forward line step: {:.2}x",
        lb.as_secs_f64() / ln.as_secs_f64()
    );
    drop(lines);
    drop(events);
    h.replay_identical(&run.id);
}
