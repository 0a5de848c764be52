//! `rewind check` calls the two runs it compares what a person would call
//! them (issue 14): the run that exits 0 is `passing` even when it is the one
//! that differs from schedule 0, in the text, in `--json`, in the narrowing
//! sentence and in `rewind show`. Every run recorded here is replayed.

use rewind_tests::Home;

/// `LABEL: run ID` lines of a check's text report.
fn labelled(stdout: &str, label: &str) -> Option<String> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{label}: run ")))
        .map(|id| id.trim().to_string())
}

#[test]
fn when_schedule_0_is_the_bad_run_the_run_that_exits_0_is_passing() {
    let h = Home::new();
    // Schedule 0 of hash-order fails (exit 1); the seed that decides it passes.
    let args = [
        "check",
        "--example",
        "hash-order",
        "--seeds",
        "8",
        "--schedules",
        "0",
    ];
    let out = h.rewind(&args);
    assert_eq!(out.code, 1, "{out}");
    let passing = labelled(&out.stdout, "passing").unwrap_or_else(|| panic!("{out}"));
    let failing = labelled(&out.stdout, "failing").unwrap_or_else(|| panic!("{out}"));
    assert!(h.log(&passing).contains("ok: ada heads the table"), "{out}");
    assert!(h.log(&failing).contains("FAILED: expected ada"), "{out}");
    let sentence = out
        .stdout
        .lines()
        .find(|l| l.contains(" decides it: "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        sentence.ends_with(
            "decides it: the run with it passes: it ends exited:0 where schedule 0 ends exited:1"
        ),
        "{sentence}"
    );
    // The same in --json.
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let j = h.rewind(&json_args);
    let v: serde_json::Value = serde_json::from_str(j.stdout.trim()).unwrap();
    let n = &v["narrowed"];
    assert_eq!(n["passing"], passing.as_str(), "{n:#}");
    assert_eq!(n["failing"], failing.as_str(), "{n:#}");
    assert_eq!(n["with"]["label"], "passing", "{n:#}");
    assert_eq!(n["without"]["label"], "failing", "{n:#}");
    assert_eq!(n["sentence"], sentence, "{n:#}");
    // And in show: the reseeded run is the passing one of its pair.
    let s = h.ok(&["show", &passing]).stdout;
    assert!(
        s.lines().nth(1).is_some_and(|l| l.starts_with(&format!(
            "passing: run {failing} (failing, exited:1) with its randomness reseeded with "
        ))),
        "{s}"
    );
    let sj = h.show_json(&passing);
    assert_eq!(sj["narrowing"]["label"], "passing", "{sj:#}");
    assert_eq!(sj["narrowing"]["other_label"], "failing", "{sj:#}");
    h.replay_identical(&passing);
    h.replay_identical(&failing);
}

#[test]
fn bank_keeps_passing_for_the_run_that_exits_0() {
    let h = Home::new();
    let out = h.rewind(&["check", "--example", "bank"]);
    assert_eq!(out.code, 1, "{out}");
    let passing = labelled(&out.stdout, "passing").unwrap_or_else(|| panic!("{out}"));
    let failing = labelled(&out.stdout, "failing").unwrap_or_else(|| panic!("{out}"));
    assert!(h
        .log(&passing)
        .contains("final balance 1150, expected 1150"));
    assert!(h.log(&failing).contains("money lost: 50"));
    let s = h.ok(&["show", &failing]).stdout;
    let second = s.lines().nth(1).unwrap_or("");
    assert!(
        second.starts_with(&format!(
            "failing: run {passing} (passing, exited:0) with a reschedule at step "
        )),
        "{s}"
    );
    // Schedule 0's own run was not made by adding anything: no such line.
    let base = h.ok(&["show", &passing]).stdout;
    assert!(base.lines().nth(1) == Some(""), "{base}");
    h.replay_identical(&passing);
    h.replay_identical(&failing);
}
