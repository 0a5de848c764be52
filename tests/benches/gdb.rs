//! The gdb benchmark (issue 8): how long `rewind gdb` takes to attach at an
//! early and a late step of a long run, and how long `reverse-continue`
//! takes to go back over 10,000 steps, each beside a baseline measured here.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench gdb

use rewind_tests::{Home, Output};
use std::time::{Duration, Instant};

/// `long N` makes about N steps.
const LONG_ITERATIONS: &str = "200000";
/// The run `reverse-continue` crosses: about 10,000 steps.
const SHORT_ITERATIONS: &str = "10000";

fn timed(f: impl FnOnce() -> Output) -> (Duration, Output) {
    let t = Instant::now();
    let o = f();
    (t.elapsed(), o)
}

/// `rewind gdb RUN STEP -- -nx -batch -ex CMD...`, timed.
fn gdb(h: &Home, id: &str, step: u64, cmds: &[&str]) -> Duration {
    let step = step.to_string();
    let mut args = vec!["gdb", id, &step, "--", "-nx", "-batch"];
    for c in cmds {
        args.extend(["-ex", c]);
    }
    let (t, out) = timed(|| h.rewind(&args));
    assert_eq!(out.code, 0, "rewind gdb failed:\n{out}");
    t
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    println!("rewind gdb benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    let h = Home::new();

    // Attach: start gdb, connect, read the registers and the stack, quit.
    let long = h.run_guest("long", &[LONG_ITERATIONS]);
    let steps = long.steps.expect("steps");
    let attach = |step: u64| median((0..3).map(|_| gdb(&h, &long.id, step, &["bt"])).collect());
    let (early, late) = (attach(1_000), attach(steps - 1_000));
    println!(
        "attach (rewind gdb RUN STEP -- -batch -ex bt), {steps}-step run: step 1,000 {:.3} s, \
         step {} {:.3} s ({:.2}x the early one)",
        early.as_secs_f64(),
        steps - 1_000,
        late.as_secs_f64(),
        late.as_secs_f64() / early.as_secs_f64()
    );

    // reverse-continue from the end back to the threads' creation.
    let short = h.run_guest("long", &[SHORT_ITERATIONS]);
    let end = short.steps.expect("steps") - 2;
    let base = median(
        (0..3)
            .map(|_| gdb(&h, &short.id, end, &["break pthread_create"]))
            .collect(),
    );
    let back = median(
        (0..3)
            .map(|_| {
                gdb(
                    &h,
                    &short.id,
                    end,
                    &["break pthread_create", "reverse-continue", "bt 1"],
                )
            })
            .collect(),
    );
    let (replay, _) = timed(|| h.rewind(&["replay", &short.id]));
    let rc = back.saturating_sub(base);
    println!(
        "reverse-continue over {end} steps: {:.3} s (session {:.3} s less attach {:.3} s); \
         replaying the whole run: {:.3} s ({:.2}x)",
        rc.as_secs_f64(),
        back.as_secs_f64(),
        base.as_secs_f64(),
        replay.as_secs_f64(),
        rc.as_secs_f64() / replay.as_secs_f64()
    );
}
