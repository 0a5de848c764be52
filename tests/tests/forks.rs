//! Forks, keyframes and looking inside a run at a step (issue 4), and the
//! single-writer property (issue 3), through the real `rewind` binary.

use rewind_tests::{guest_arg, Home};

/// The last `run <id>` on a line of stdout that starts with `prefix`.
fn run_after(stdout: &str, prefix: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().last())
        .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{stdout}"))
        .to_string()
}

#[test]
fn single_writer_holds_for_own_files_and_is_violated_by_a_shared_one() {
    let h = Home::new();
    let prog = guest_arg("two-writers");
    let own = h.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--schedules",
        "4",
        "--property",
        "single-writer=/*.log",
        "--",
        &prog,
    ]);
    assert_eq!(own.code, 0, "each thread writes its own file:\n{own}");
    let shared = h.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--schedules",
        "4",
        "--property",
        "single-writer=/*.log",
        "--",
        &prog,
        "shared",
    ]);
    assert_eq!(shared.code, 1, "two threads write /shared.log:\n{shared}");
    assert!(
        shared
            .stdout
            .contains("/shared.log was written by 1000/1001 and 1000/1002"),
        "{shared}"
    );
    // A glob that matches nothing written holds.
    let other = h.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--schedules",
        "2",
        "--property",
        "single-writer=/var/*",
        "--",
        &prog,
        "shared",
    ]);
    assert_eq!(other.code, 0, "{other}");
    h.replay_identical(&run_after(&shared.stdout, "failing: "));
}

#[test]
fn a_late_fork_restores_a_keyframe_and_replays_identically() {
    let h = Home::new();
    // Long enough for several keyframes (one every 20,000 steps at most).
    let parent = h.run_guest("long", &["60000"]);
    assert_eq!(parent.status, "exited:0", "{}", parent.out);
    let steps = parent.steps.unwrap();
    assert!(steps > 60_000, "{}", parent.out);
    let kf = std::fs::metadata(h.path().join("runs").join(&parent.id).join("keyframes")).unwrap();
    assert!(kf.len() > 8, "the run kept keyframes");
    h.replay_identical(&parent.id);

    let late = (steps - 100).to_string();
    let a = h.rewind(&["fork", &parent.id, &late, "--schedule", "7", "-q"]);
    let b = h.rewind(&["fork", &parent.id, &late, "--schedule", "7", "-q"]);
    let (ra, rb) = (a.run_id(), b.run_id());
    assert_eq!(
        ra, rb,
        "forking twice with the same arguments gives the same id"
    );
    assert!(
        a.stderr
            .contains("the fork first differs from its parent at step")
            || a.stderr
                .contains("the fork does not differ from its parent"),
        "{a}"
    );
    assert!(
        a.stderr_lines()
            .iter()
            .any(|l| l.starts_with("rewind: forking from the keyframe at step ")),
        "the late fork did not start from a keyframe:\n{a}"
    );
    // The fork restored a keyframe and recorded only the rest; replay reruns
    // it from step 0 and must see the same events.
    h.replay_identical(&ra);
    let ls = h.ok(&["ls"]).stdout;
    assert!(
        ls.contains(&format!("(fork of {} at {late}, schedule 7)", parent.id)),
        "{ls}"
    );
    // A fork keeps only its own keyframes; before its first one, seeking
    // starts from the parent's and must show the same machine.
    let early = (steps - 1_000).to_string();
    assert_eq!(
        h.ok(&["ps", &ra, "--at", &early]).stdout,
        h.ok(&["ps", &parent.id, "--at", &early]).stdout
    );
    // The prefix is the parent's: the events up to the fork step agree.
    let cut = |id: &str| -> Vec<String> {
        h.ok(&["events", id, "--to", &late])
            .stdout
            .lines()
            .map(str::to_string)
            .collect()
    };
    assert_eq!(cut(&parent.id), cut(&ra));
}

#[test]
fn cat_shows_a_file_before_and_after_the_guest_wrote_it() {
    let h = Home::new();
    let run = h.run_guest("write-twice", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    h.replay_identical(&run.id);
    let events = h.events(&run.id);
    let step_of = |needle: &str| -> String {
        events
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no `{needle}` in:\n{events}"))
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let opened = step_of("\"/out.txt\"");
    let first = step_of("\"first\\n\"");
    let second = step_of("\"second\\n\"");
    let before: u64 = opened.parse::<u64>().unwrap() - 1;
    let missing = h.rewind(&["cat", &run.id, &before.to_string(), "/out.txt"]);
    assert_eq!(
        missing.code, 1,
        "before the open the file did not exist:\n{missing}"
    );
    assert_eq!(
        h.ok(&["cat", &run.id, &first, "/out.txt"]).stdout,
        "first\n"
    );
    assert_eq!(
        h.ok(&["cat", &run.id, &second, "/out.txt"]).stdout,
        "first\nsecond\n"
    );
    let ps = h.ok(&["ps", &run.id, "--at", &first]).stdout;
    assert!(
        ps.contains("process 1000") && ps.contains("thread 1000/1000"),
        "{ps}"
    );
}

#[test]
fn diff_and_threads_of_the_bank_passing_and_failing_runs() {
    let h = Home::new();
    let check = h.rewind(&["check", "--points", "syscalls", "--example", "bank"]);
    assert_eq!(check.code, 1, "{check}");
    let pass = run_after(&check.stdout, "passing: ");
    let fail = run_after(&check.stdout, "failing: ");
    let diff = h.rewind(&["diff", &pass, &fail]);
    assert_eq!(diff.code, 1, "{diff}");
    assert!(
        diff.stdout.lines().any(|l| l.starts_with("both ")),
        "{diff}"
    );
    assert!(
        diff.stdout.lines().any(|l| l.starts_with("left ")),
        "{diff}"
    );
    assert!(
        diff.stdout.lines().any(|l| l.starts_with("right ")),
        "{diff}"
    );
    let json: serde_json::Value =
        serde_json::from_str(h.rewind(&["diff", &pass, &fail, "--json"]).stdout.trim()).unwrap();
    assert!(json["divergence"]["left_step"].is_u64(), "{json}");
    assert!(json["divergence"]["right_step"].is_u64(), "{json}");
    // Events in diff's JSON are flat, as `events --json` prints them.
    for side in ["shared", "left", "right"] {
        let first = &json["divergence"][side][0];
        assert!(
            first["kind"].is_string() && first["step"].is_u64(),
            "{json}"
        );
    }
    let same = h.rewind(&["diff", &pass, &pass]);
    assert_eq!(same.code, 0, "{same}");
    let (a, b) = (
        h.ok(&["threads", &pass]).stdout,
        h.ok(&["threads", &fail]).stdout,
    );
    assert!(a.lines().count() >= 2, "{a}");
    assert_ne!(a, b, "who held the CPU differs between the runs");
    h.replay_identical(&pass);
    h.replay_identical(&fail);
}

#[test]
fn damaged_keyframes_are_reported_and_not_trusted() {
    let h = Home::new();
    let parent = h.run_guest("long", &["40000"]);
    assert_eq!(parent.status, "exited:0", "{}", parent.out);
    let kf = h.path().join("runs").join(&parent.id).join("keyframes");
    let mut bytes = std::fs::read(&kf).unwrap();
    assert!(bytes.len() > 64, "the run kept keyframes");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&kf, bytes).unwrap();
    let step = (parent.steps.unwrap() - 500).to_string();
    let fork = h.rewind(&["fork", &parent.id, &step, "--schedule", "2", "-q"]);
    assert!(
        fork.stderr.contains("rewind: warning: keyframes not used"),
        "{fork}"
    );
    let id = fork.run_id();
    h.replay_identical(&id);
    h.replay_identical(&parent.id);
}

#[test]
fn large_files_of_the_overlay_live_in_pages_not_in_every_keyframe() {
    let h = Home::new();
    // 20,000 KiB lines: a 20 MB file in the overlay while keyframes are taken.
    let run = h.run_guest("big-file", &["20000"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert!(h.log(&run.id).contains("size 20480000"), "{}", run.out);
    h.replay_identical(&run.id);
    let kf = std::fs::metadata(h.path().join("runs").join(&run.id).join("keyframes"))
        .unwrap()
        .len();
    assert!(kf > 8, "the run kept keyframes");
    assert!(
        kf < 4 << 20,
        "keyframes hold the file by page hashes: {kf} bytes"
    );
    // gc keeps the pages keyframes refer to: a late seek still starts from one
    // (no warning) and sees the file as it was.
    h.ok(&["gc"]);
    let step = run.steps.unwrap() - 30;
    let cat = h.ok(&["cat", &run.id, &step.to_string(), "/big.log"]);
    assert!(!cat.stderr.contains("warning"), "{cat}");
    let lines = cat.stdout.lines().count() as u64;
    assert!(
        lines > 19_000 && lines < 20_000,
        "{lines} lines at step {step}"
    );
    let fork = h.rewind(&["fork", &run.id, &step.to_string(), "--schedule", "3", "-q"]);
    assert!(!fork.stderr.contains("warning"), "{fork}");
    let id = fork.run_id();
    assert!(h.log(&id).contains("size 20480000"));
    h.replay_identical(&id);
}
