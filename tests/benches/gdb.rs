//! The gdb benchmark (issue 8): how long `rewind gdb` takes to attach at an
//! early and a late step of a long run, and how long `reverse-continue`
//! takes to go back over 10,000 steps, each beside a baseline measured here.
//!
//! Each figure is the median of 3 with the CPU time of the `rewind`
//! process and gdb (user + system), so that the wall time's share spent
//! waiting for a core on a loaded host shows. `GDB_CALLS=N` records a
//! shorter long run.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench gdb

use rewind_tests::{children_cpu, parse_status, Home, Output};
use std::time::{Duration, Instant};

/// `long N` makes about N steps.
const LONG_ITERATIONS: &str = "1000000";
/// The run `reverse-continue` crosses: about 10,000 steps.
const SHORT_ITERATIONS: &str = "10000";

fn timed(f: impl FnOnce() -> Output) -> (Duration, Output) {
    let t = Instant::now();
    let o = f();
    (t.elapsed(), o)
}

/// `rewind gdb RUN STEP -- -nx -batch -ex CMD...`: wall and CPU time.
fn gdb(h: &Home, id: &str, step: u64, cmds: &[&str]) -> (Duration, Duration) {
    let step = step.to_string();
    let mut args = vec!["gdb", id, &step, "--", "-nx", "-batch"];
    for c in cmds {
        args.extend(["-ex", c]);
    }
    let before = children_cpu();
    let (t, out) = timed(|| h.rewind(&args));
    assert_eq!(out.code, 0, "rewind gdb failed:\n{out}");
    (t, children_cpu() - before)
}

/// The medians of wall and CPU time of 3 sessions.
fn median(f: impl Fn() -> (Duration, Duration)) -> (Duration, Duration) {
    let (mut wall, mut cpu): (Vec<_>, Vec<_>) = (0..3).map(|_| f()).unzip();
    wall.sort();
    cpu.sort();
    (wall[1], cpu[1])
}

fn s(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn main() {
    println!("rewind gdb benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    let h = Home::new();

    // Attach: start gdb, connect, read the registers and the stack, quit.
    // Recording a million steps outlasts the tests' deadline on a loaded host.
    let calls = std::env::var("GDB_CALLS").unwrap_or_else(|_| LONG_ITERATIONS.to_string());
    let (rec, out) = timed(|| {
        let mut cmd = std::process::Command::new(rewind_tests::rewind_bin());
        cmd.args(["run", "-q", "--", &rewind_tests::guest_arg("long"), &calls])
            .env("REWIND_HOME", h.path());
        rewind_tests::run_command(cmd, Duration::from_secs(1800))
    });
    let long = parse_status(&out).unwrap_or_else(|| panic!("{out}"));
    let steps = long.steps.expect("steps");
    println!("long {calls}: {steps} steps, recorded in {:.1} s", s(rec));
    let attach = |step: u64| median(|| gdb(&h, &long.id, step, &["bt"]));
    let late_step = steps - 1_000;
    let ((early, early_cpu), (late, late_cpu)) = (attach(1_000), attach(late_step));
    println!(
        "attach (rewind gdb RUN STEP -- -batch -ex bt), {steps}-step run: step 1,000 {:.3} s \
         ({:.3} s CPU), step {late_step} {:.3} s ({:.3} s CPU; {:.2}x the early one's wall, {:.2}x its CPU)",
        s(early),
        s(early_cpu),
        s(late),
        s(late_cpu),
        s(late) / s(early),
        s(late_cpu) / s(early_cpu).max(1e-6)
    );

    // reverse-continue from the end back to the threads' creation.
    let short = h.run_guest("long", &[SHORT_ITERATIONS]);
    let end = short.steps.expect("steps") - 2;
    let (base, base_cpu) = median(|| gdb(&h, &short.id, end, &["break pthread_create"]));
    let (back, back_cpu) = median(|| {
        gdb(
            &h,
            &short.id,
            end,
            &["break pthread_create", "reverse-continue", "bt 1"],
        )
    });
    let before = children_cpu();
    let (replay, _) = timed(|| h.rewind(&["replay", &short.id]));
    let replay_cpu = children_cpu() - before;
    let (rc, rc_cpu) = (back.saturating_sub(base), back_cpu.saturating_sub(base_cpu));
    println!(
        "reverse-continue over {end} steps: {:.3} s, {:.3} s CPU (session {:.3} s less attach {:.3} s); \
         replaying the whole run: {:.3} s, {:.3} s CPU ({:.2}x the wall)",
        s(rc),
        s(rc_cpu),
        s(back),
        s(base),
        s(replay),
        s(replay_cpu),
        s(rc) / s(replay)
    );
}
