//! `rewind check`'s default search, a portfolio (issue 22, part 2): random
//! schedules on system-call points, then on race-directed points random,
//! PCT of depths 2 and 3 and `bounded`, in rounds within a budget, and
//! after two rounds random and PCT depth 3 on memory points (widening). It
//! finds the examples of check.rs, whose tests pin the single search they
//! were written for, and says which strategy and points found each; its
//! order does not depend on `--jobs`; a race-directed find comes before any
//! memory-point run, a race that only memory points reach is reached within
//! the default budget; and the budget stops a check that finds nothing.
//!
//! What a check keeps (part 5): schedule 0, the violating runs and the
//! narrowed pair; the passing schedules' runs only with `--keep all`, and
//! `rewind show` of one it did not keep says how to make it again.

use rewind_tests::Home;
use std::path::Path;

/// `rewind check --json --keep all ARGS`, which must find a violation; the
/// report. Every run it made is replayed when the home is dropped.
fn found(h: &Home, args: &[&str]) -> serde_json::Value {
    let mut full = vec!["--keep", "all"];
    full.extend_from_slice(args);
    let (out, v) = h.check_json(&full);
    assert_eq!(out.code, 1, "not found:\n{out}");
    assert!(
        out.stdout.trim_start().starts_with('{'),
        "--json prints the report alone:\n{out}"
    );
    v
}

/// The strategy and points the report says found the first violation.
fn found_by(v: &serde_json::Value) -> (String, String) {
    let by = &v["first_violation"]["found_by"];
    let s = |k: &str| {
        by[k]
            .as_str()
            .unwrap_or_else(|| panic!("{by:#}"))
            .to_string()
    };
    (s("strategy"), s("points"))
}

/// Each of check.rs's buggy examples is found by the portfolio's first 64
/// schedules, and the report says by what; every run the check printed is
/// the one its line says (schedule 0 once per points).
#[test]
fn the_portfolio_finds_the_examples_and_says_how() {
    for (example, status) in [
        ("bank", "exited:2"),
        ("philosophers", "deadlocked"),
        ("sdk", "exited:0"),
    ] {
        let h = Home::new();
        let v = found(&h, &["--example", example, "--schedules", "64"]);
        let bases = v["bases"].as_array().unwrap();
        let labels: Vec<&str> = bases.iter().map(|b| b["label"].as_str().unwrap()).collect();
        // Memory points' schedule 0 only once the widening rounds came.
        let widened = labels.len() == 3;
        assert_eq!(
            labels[..],
            [
                "schedule   0",
                "schedule   0 (syscall points)",
                "schedule   0 (memory points)"
            ][..labels.len().clamp(2, 3)],
            "{v:#}"
        );
        let tried = v["tried"].as_array().unwrap();
        assert!((1..=64).contains(&tried.len()), "{v:#}");
        let bad = tried.last().unwrap();
        assert_eq!(bad["status"], status, "{example}: {bad:#}");
        let (strategy, points) = found_by(&v);
        assert_eq!(bad["entry"]["strategy"], strategy.as_str(), "{bad:#}");
        assert_eq!(bad["entry"]["points"], points.as_str(), "{bad:#}");
        let said = if points == "syscalls" {
            "syscall"
        } else {
            &points
        };
        assert!(
            bad["label"]
                .as_str()
                .unwrap()
                .ends_with(&format!(", {said} points)")),
            "{bad:#}"
        );
        assert!(widened || points != "memory", "{v:#}");
        // Narrowed against the schedule 0 of the same points.
        let of_points = match points.as_str() {
            "races" => 0,
            "syscalls" => 1,
            _ => 2,
        };
        assert_eq!(v["base"]["run"], bases[of_points]["run"], "{v:#}");
        assert!(v["narrowed"]["deciding"].is_array(), "{v:#}");
    }
}

/// The same check finds the same first violation whatever its jobs: the
/// order is the check's, not the host's.
#[test]
fn the_order_is_the_checks_own() {
    let h = Home::new();
    let args = ["--example", "flag", "--schedules", "64", "--no-narrow"];
    let one = found(&h, &[&args[..], &["--jobs", "1"]].concat());
    let two = found(&h, &[&args[..], &["--jobs", "2"]].concat());
    let labels = |v: &serde_json::Value| -> Vec<String> {
        v["tried"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| format!("{} {}", t["label"], t["run"]))
            .collect()
    };
    assert_eq!(labels(&one), labels(&two));
    assert_eq!(one["first_violation"], two["first_violation"]);
}

/// `counter`'s lost update has no system call in its window: the
/// portfolio's race-directed points find it, before any memory-point
/// schedule 0 (a cheap find is not lost behind the widening entries).
#[test]
fn a_race_directed_find_comes_before_the_widening() {
    let h = Home::new();
    let v = found(&h, &["--example", "counter"]);
    assert_eq!(found_by(&v).1, "races", "{v:#}");
    assert_eq!(v["bases"].as_array().unwrap().len(), 2, "{v:#}");
    assert!(v["learned"]["run"].is_string(), "{v:#}");
    let sentence = v["narrowed"]["sentence"].as_str().unwrap();
    assert!(sentence.contains("(total, in worker)"), "{sentence}");
}

/// `late-update`'s tellers write the balance back after their unlock,
/// with no system call between the load and the store: system-call points
/// never stop there. Race-directed points judged the handover ordered and
/// did not either, until a lock's handover put its page (the balance's) on
/// probation, where the lock's own accesses order the rest and the late
/// store races (docs/design.md, "Race-directed points"). The default check
/// (a budget of 60 s, no count) finds it within its budget, and narrows
/// it to the balance.
#[test]
fn a_late_update_is_reached_within_the_budget() {
    let program = rewind_tests::guest_arg("late-update");
    let h = Home::new();
    let out = h.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--strategy",
        "random",
        "--no-narrow",
        "--",
        &program,
    ]);
    assert_eq!(out.code, 0, "syscalls random:\n{out}");
    let v = found(&h, &["--", &program]);
    assert_eq!(v["out_of_budget"], serde_json::Value::Null, "{v:#}");
    let sentence = v["narrowed"]["sentence"].as_str().unwrap();
    assert!(sentence.contains("(balance, in teller)"), "{sentence}");
}

/// A check that finds nothing stops when its budget is spent, and says so.
#[test]
fn the_budget_ends_a_check_that_finds_nothing() {
    let h = Home::new();
    let out = h.rewind(&["check", "--example", "counter-fixed", "--budget", "3s"]);
    assert_eq!(out.code, 0, "{out}");
    let said = out
        .stdout
        .lines()
        .find(|l| l.starts_with("the budget of 3s ran out after "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(said.ends_with(" of 20000 schedules"), "{said}");
}

fn runs_and_bytes(home: &Path) -> (usize, u64) {
    let runs = std::fs::read_dir(home.join("runs"))
        .unwrap()
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    let out = std::process::Command::new("du")
        .args(["-sb"])
        .arg(home)
        .output()
        .unwrap();
    let bytes = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (runs, bytes)
}

/// A passing check keeps its two schedule 0s (not the learning run);
/// `--keep all` keeps every run. A schedule not kept is in the check's record, and
/// `rewind show` of its id prints the command that makes it again, which
/// makes the same run (another command taking the id says so and exits 2);
/// `rewind gc` frees the pages the removed runs used.
#[test]
fn a_check_keeps_what_it_found_and_remakes_the_rest() {
    let args = ["--example", "counter-fixed", "--schedules", "16"];
    let all = Home::new();
    let (out, v) = all.check_json(&[&args[..], &["--keep", "all"]].concat());
    assert_eq!(out.code, 0, "{out}");
    let (runs_all, bytes_all) = runs_and_bytes(all.path());
    // The schedule 0s: race-directed and system-call points, and memory
    // points when the 16 schedules reach the widening rounds (how many
    // schedules a round takes follows the schedule 0s' steps).
    let bases = |v: &serde_json::Value| v["bases"].as_array().unwrap().len();
    let learning = usize::from(v["learned"]["run"] != v["bases"][0]["run"]);
    assert_eq!(
        runs_all,
        learning + bases(&v) + 16,
        "the learning run, the schedule 0s and 16 schedules: {v:#}"
    );

    let h = Home::new();
    let (out, v2) = h.check_json(&args);
    assert_eq!(out.code, 0, "{out}");
    assert_eq!(
        v["tried"].as_array().unwrap().len(),
        v2["tried"].as_array().unwrap().len()
    );
    let (runs, bytes) = runs_and_bytes(h.path());
    assert_eq!(runs, bases(&v2), "the schedule 0s alone");
    assert!(
        bytes < bytes_all,
        "{bytes} bytes kept, {bytes_all} with --keep all"
    );
    eprintln!("kept: {runs} runs, {bytes} bytes; --keep all: {runs_all} runs, {bytes_all} bytes");
    let gc = h.ok(&["gc"]);
    let (_, after_gc) = runs_and_bytes(h.path());
    assert!(after_gc <= bytes, "{gc}");

    // Every schedule is in the record, with its status; a removed one says
    // how to make it again, and that makes it.
    let t = &v2["tried"][5];
    assert_eq!(t["kept"], false, "{t:#}");
    let id = t["run"].as_str().unwrap();
    let show = h.ok(&["show", id]).stdout;
    assert!(
        show.starts_with(&format!("run {id} was not kept: it is schedule ")),
        "{show}"
    );
    // A command that takes the run says it was not kept, and where to look.
    let events = h.rewind(&["events", id]);
    assert_eq!(events.code, 2, "{events}");
    assert!(
        events
            .stderr
            .contains("was not kept: it passed in the check of run ")
            && events
                .stderr
                .contains(&format!("`rewind show {id}` prints the command")),
        "{events}"
    );
    let remake = h.show_json(id)["remake"].as_str().unwrap().to_string();
    let argv: Vec<&str> = remake
        .trim_end_matches(" < /dev/null")
        .split(' ')
        .skip(2)
        .collect();
    let again = h.run(&[&["-q"][..], &argv].concat());
    assert_eq!(again.id, id, "{remake}");
    assert_eq!(again.status, t["status"].as_str().unwrap());
}
