//! Narrowing finds one deciding step even when the schedule that found the
//! failure perturbed other steps, and a check ends when a schedule spins.
//! These mechanisms are measured with system-call points (`--points
//! syscalls`); narrowing of memory-point failures is tested by every racy
//! example (racy_examples.rs) and by check.rs.

use rewind_tests::{guest_arg, Home};

#[test]
fn a_single_reschedule_near_the_schedules_own_perturbations_decides_it() {
    let h = Home::new();
    let prog = guest_arg("pool-sleep");
    // A fixed epoch: the same inputs, the same ids, whenever the test runs.
    let epoch = "1700000000";
    let (out, v) = h.check_json(&["--points", "syscalls", "--epoch", epoch, "--", &prog]);
    assert_eq!(out.code, 1, "{out}");
    let n = &v["narrowed"];
    let deciding = n["deciding"].as_array().unwrap();
    assert_eq!(deciding.len(), 1, "one step decides it: {n:#}");
    assert_eq!(deciding[0]["what"], "reschedule", "{n:#}");
    let step = deciding[0]["step"].as_u64().unwrap().to_string();
    // The step is real: that reschedule alone fails, none passes.
    let alone = h.run(&[
        "-q",
        "--epoch",
        epoch,
        "--reschedule-at",
        &step,
        "--",
        &prog,
    ]);
    let none = h.run(&["-q", "--epoch", epoch, "--", &prog]);
    assert_ne!(alone.status, none.status, "{}\n{}", alone.out, none.out);
    assert_eq!(alone.id, n["failing"].as_str().unwrap());
    assert_eq!(none.id, n["passing"].as_str().unwrap());
    h.replay_identical(&alone.id);
    h.replay_identical(&none.id);
}

#[test]
fn a_schedule_that_spins_forever_ends_timed_out_instead_of_hanging_the_check() {
    let h = Home::new();
    let prog = guest_arg("spinlock");
    let base = h.run(&["-q", "--", &prog]);
    assert_eq!(base.status, "exited:0", "{}", base.out);
    h.replay_identical(&base.id);
    // No --timeout: the check bounds perturbed runs by itself.
    let out = h.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--schedules",
        "4",
        "--no-narrow",
        "--",
        &prog,
    ]);
    assert_eq!(out.code, 1, "{out}");
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("schedule") && l.contains("timed-out")),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("ended timed-out where schedule 0 ended exited:0"),
        "{out}"
    );
}

/// With memory points a spinning thread reaches a point at every read of
/// the lock word, so no schedule spins forever (pinned: the portfolio's
/// system-call points would spin until the timeout).
#[test]
fn with_memory_points_a_spinning_schedule_reaches_points_and_ends() {
    let h = Home::new();
    let prog = guest_arg("spinlock");
    let out = h.rewind(&[
        "check",
        "--points",
        "memory",
        "--schedules",
        "4",
        "--no-narrow",
        "--keep",
        "all",
        "--",
        &prog,
    ]);
    assert_eq!(out.code, 0, "{out}");
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("schedule"))
        .collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines.iter().all(|l| l.contains("exited:0")), "{out}");
}
