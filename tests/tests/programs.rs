//! Static glibc, static musl and Rust std programs with threads run with
//! correct output and exit status, and replay identically.

use rewind_tests::{assert_lines, guest_arg, Home};

const WORKER_LINES: &[&str] = &[
    "worker 0: sum 312512500, tls ok",
    "worker 1: sum 937512500, tls ok",
    "worker 2: sum 1562512500, tls ok",
    "worker 3: sum 2187512500, tls ok",
];

/// Runs the threads program at `program` (a path).
fn threads(program: &str, code: i32, total_line: &str) {
    let home = Home::new();
    let run = home.run(&["--", program]);
    assert_eq!(run.status, format!("exited:{code}"), "{}", run.out);
    assert_eq!(run.out.code, code, "{}", run.out);
    // The output streams live to rewind's own stdout, and is kept in the run.
    assert_lines(&run.out.stdout, WORKER_LINES);
    assert_lines(&run.out.stdout, &[total_line]);
    let log = home.log(&run.id);
    assert_lines(&log, WORKER_LINES);
    assert_lines(&log, &[total_line]);
    assert_eq!(log.lines().count(), WORKER_LINES.len() + 1, "log:\n{log}");
    // Four thread starts besides the main thread's.
    let events = home.events(&run.id);
    let starts = events
        .lines()
        .filter(|l| l.contains("thread start"))
        .count();
    assert!(
        starts >= 5,
        "expected 5 thread starts, saw {starts}:\n{events}"
    );
    home.replay_identical(&run.id);
}

#[test]
fn static_glibc_threads() {
    threads(
        &guest_arg("threads"),
        3,
        "total 5000050000, joined 5000050000",
    );
}

#[test]
fn static_musl_threads() {
    // Without musl-gcc, build.rs leaves it out (scripts/test never does).
    let Some(musl) = rewind_tests::optional_guest("threads-musl") else {
        return;
    };
    threads(&musl, 3, "total 5000050000, joined 5000050000");
}

#[test]
fn rust_std_threads() {
    threads(
        &guest_arg("threads-rust"),
        4,
        "total 5000050000, finished 4",
    );
}

#[test]
fn arguments_reach_the_program() {
    let home = Home::new();
    let run = home.run_guest("hello", &["one", "two words"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let prog = rewind_tests::guest_arg("hello");
    assert_lines(
        &home.log(&run.id),
        &[&format!("hello from {prog} with 2 argument(s)")],
    );
    home.replay_identical(&run.id);
}
