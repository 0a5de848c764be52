//! How runs end when the program misbehaves: a NULL dereference, an
//! unimplemented call, a deadlock, a spin, garbage passed to every call.
//! The monitor lives on and reports each; every recorded run replays.

use rewind_tests::{assert_lines, Home};

#[test]
fn null_dereference_is_sigsegv_with_its_address() {
    let home = Home::new();
    let run = home.run_guest("segv", &[]);
    assert_eq!(run.status, "killed:SIGSEGV", "{}", run.out);
    assert_eq!(run.out.code, 139, "{}", run.out);
    let log = home.log(&run.id);
    assert_lines(&log, &["paying carol"]);
    assert!(
        !log.contains("paid"),
        "the program went on after the fault:\n{log}"
    );
    let events = home.events(&run.id);
    assert!(
        events
            .lines()
            .any(|l| l.contains("SIGSEGV") && l.contains("addr=0x108")),
        "no SIGSEGV event with addr=0x108:\n{events}"
    );
    // The same events as flat JSON (docs/events.md).
    let json = home.events_json(&run.id);
    let (first, last) = (&json[0], json.last().unwrap());
    assert_eq!(first["kind"], "thread_start", "{first}");
    assert_eq!(first["parent"], 0, "{first}");
    assert!(first["step"].is_u64() && first["pid"].is_u64() && first["tid"].is_u64());
    let signal = json
        .iter()
        .find(|e| e["kind"] == "signal")
        .expect("a signal event");
    assert_eq!(
        (&signal["signo"], &signal["addr"]),
        (&11.into(), &0x108.into()),
        "{signal}"
    );
    assert_eq!(last["kind"], "process_exit", "{last}");
    assert_eq!(last["status"], "killed:SIGSEGV", "{last}");
    let brk = json
        .iter()
        .find(|e| e["kind"] == "syscall")
        .expect("a syscall event");
    assert!(
        brk["name"].is_string() && brk["text"].is_string() && brk["ret"].is_i64(),
        "{brk}"
    );
    home.replay_identical(&run.id);
}

#[test]
fn unimplemented_calls_get_enosys_and_are_named() {
    let home = Home::new();
    let run = home.run_guest("enosys", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(
        &home.log(&run.id),
        &[
            "syscall(999) = -1 (ENOSYS)",
            "io_uring_setup = -1 (ENOSYS)",
            "still running",
        ],
    );
    let events = home.events(&run.id);
    assert!(
        events
            .lines()
            .any(|l| l.contains("io_uring_setup") && l.contains("ENOSYS")),
        "no io_uring_setup event with ENOSYS:\n{events}"
    );
    assert!(
        events
            .lines()
            .any(|l| l.contains("999") && l.contains("ENOSYS")),
        "no event for call 999 with ENOSYS:\n{events}"
    );
    home.replay_identical(&run.id);
}

#[test]
fn opposite_lock_order_ends_deadlocked_naming_both_waits() {
    let home = Home::new();
    let run = home.run_guest("deadlock", &[]);
    assert_eq!(run.status, "deadlocked", "{}", run.out);
    assert_eq!(run.out.code, 125, "{}", run.out);
    assert_lines(&run.out.stdout, &["starting transfer and auditor"]);
    // Both lockers wait in futex (and main in join, also a futex).
    let waits = run
        .out
        .stderr_lines()
        .iter()
        .filter(|l| l.contains("futex"))
        .count();
    assert!(
        waits >= 2,
        "stderr names fewer than two futex waits:\n{}",
        run.out
    );
    home.replay_identical(&run.id);
}

#[test]
fn spinning_thread_times_out_naming_where() {
    let home = Home::new();
    let prog = rewind_tests::guest_arg("spin");
    let run = home.run(&["--timeout", "1", "--", &prog]);
    assert_eq!(run.status, "timed-out", "{}", run.out);
    assert_eq!(run.out.code, 124, "{}", run.out);
    assert!(
        run.out.stderr.contains("spin_forever"),
        "the report does not name spin_forever:\n{}",
        run.out
    );
    assert_lines(&home.log(&run.id), &["starting the spinner"]);
    home.replay_identical(&run.id);
}

#[test]
fn garbage_to_every_call_never_crashes_the_monitor() {
    let home = Home::new();
    let run = home.run_guest("fuzz", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.code, 0, "{}", run.out);
    assert!(
        run.steps.is_some_and(|s| s > 5000),
        "too few steps for 300 calls x 24 rounds: {}",
        run.line
    );
    let events = home.events(&run.id);
    for call in [
        "read(",
        "write(",
        "openat(",
        "futex(",
        "mmap(",
        "clock_gettime(",
    ] {
        assert!(events.contains(call), "no {call}..) event");
    }
    home.replay_identical(&run.id);
}
