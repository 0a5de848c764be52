//! `rewind check --strategy pct`: PCT schedules find bank's lost deposit,
//! each is a pure function of its manifest (`rewind show` prints a `rewind
//! run --schedule N --pct D:K` command that makes the same run again, and
//! replay is identical), a fork of a PCT run replays identically, and the
//! fixed twin passes. `--check-seed` tries another set of schedules.
//!
//! With memory points (check's default) `bounded` and `pct` start where
//! schedule 0 has a second thread: `bounded` reschedules at its system calls
//! and conflicting shared accesses from there, in step order, and finds
//! every example whose racy window has no system call; `pct` draws its
//! change points from where the threads start sharing data, among the
//! system calls and the accesses to bytes schedule 0's threads conflict on
//! (its k), and finds every one; neither flags a fixed twin. Every run
//! recorded here is replayed.

use rewind_tests::Home;

#[test]
fn pct_finds_bank_and_its_schedules_are_made_again_by_the_command_show_prints() {
    let h = Home::new();
    let (_, v) = h.check_json(&["--example", "bank", "--strategy", "pct"]);
    assert_eq!(v["violations"], 1, "{v:#}");
    let tried = v["tried"].as_array().unwrap();
    let bad = tried.last().unwrap();
    assert_eq!(bad["status"], "exited:2", "{v:#}");
    let id = bad["run"].as_str().unwrap();
    // The PCT schedule, made again from the command show prints.
    let args = h.remake_args(id);
    assert!(args.contains(&"--pct".to_string()), "{args:?}");
    let args: Vec<&str> = args.iter().map(String::as_str).chain(["-q"]).collect();
    let again = h.run(&args);
    assert_eq!(again.id, id, "{}", again.out);
    assert_eq!(again.status, "exited:2");
    // Narrowed to one step, whose failing run the show command remakes too.
    let n = &v["narrowed"];
    assert_eq!(n["deciding"].as_array().unwrap().len(), 1, "{n:#}");
    let failing = n["failing"].as_str().unwrap();
    let args = h.remake_args(failing);
    let args: Vec<&str> = args.iter().map(String::as_str).chain(["-q"]).collect();
    assert_eq!(h.run(&args).id, failing);
    for t in tried {
        h.replay_identical(t["run"].as_str().unwrap());
    }
    h.replay_identical(n["passing"].as_str().unwrap());
    h.replay_identical(failing);
}

#[test]
fn a_fork_of_a_pct_run_replays_identically() {
    let h = Home::new();
    // Schedule 3 of bank under PCT: its choices are switches, kept as the fork's prefix.
    let parent = h.run(&[
        "-q",
        "--example",
        "bank",
        "--schedule",
        "3",
        "--pct",
        "3:50",
    ]);
    let show = h.ok(&["show", &parent.id]).stdout;
    assert!(
        show.contains("PCT: 2 priority change points among 50 steps"),
        "{show}"
    );
    let fork = h.rewind(&["fork", &parent.id, "30", "--schedule", "7", "-q"]);
    let forked = fork.run_id();
    h.replay_identical(&parent.id);
    h.replay_identical(&forked);
}

#[test]
fn pct_passes_bank_fixed_and_check_seeds_try_other_schedules() {
    let h = Home::new();
    let (_, a) = h.check_json(&[
        "--example",
        "bank-fixed",
        "--strategy",
        "pct",
        "--schedules",
        "8",
        "--keep",
        "all",
    ]);
    assert_eq!(a["violations"], 0, "{a:#}");
    let (_, b) = h.check_json(&[
        "--example",
        "bank-fixed",
        "--strategy",
        "pct",
        "--schedules",
        "8",
        "--check-seed",
        "1",
        "--keep",
        "all",
    ]);
    let labels = |v: &serde_json::Value| -> Vec<String> {
        v["tried"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["label"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(labels(&a)[0], "schedule   1");
    assert_eq!(labels(&b)[0], "schedule   9");
    assert_eq!(labels(&b).len(), 8);
    for v in [&a, &b] {
        for t in v["tried"].as_array().unwrap() {
            h.replay_identical(t["run"].as_str().unwrap());
        }
    }
}

/// The examples whose racy window has no system call in it.
const MEMORY_EXAMPLES: [&str; 5] = ["counter", "flag", "lazy", "lockfree", "twolocks"];

/// A run's events (`rewind events --accesses --json`).
fn events(h: &Home, run: &str) -> Vec<serde_json::Value> {
    h.ok(&["events", run, "--accesses", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn bounded_finds_every_memory_point_example_rescheduling_where_threads_share() {
    for example in MEMORY_EXAMPLES {
        let h = Home::new();
        let (_, v) = h.check_json(&["--example", example, "--strategy", "bounded", "--no-narrow"]);
        assert_eq!(v["violations"], 1, "{example} not found: {v:#}");
        let base_run = v["base"]["run"].as_str().unwrap();
        let base = events(&h, base_run);
        let start = h.second_thread_step(base_run);
        // Single reschedules in step order, each at a step of schedule 0
        // that is a system call or an access to shared memory.
        let steps: Vec<u64> = v["tried"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let label = t["label"].as_str().unwrap();
                label
                    .strip_prefix("reschedule at ")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("not a single reschedule: {label}"))
            })
            .collect();
        assert!(steps[0] >= start, "{example}: {steps:?} before {start}");
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
        for s in &steps {
            assert!(
                base.iter()
                    .any(|e| e["step"] == *s && (e["kind"] == "syscall" || e["kind"] == "access")),
                "{example}: step {s} is neither a system call nor a shared access"
            );
        }
        let bad = v["tried"].as_array().unwrap().last().unwrap();
        assert_eq!(bad["status"], "exited:2", "{v:#}");
    }
}

#[test]
fn pct_finds_memory_point_examples_with_change_points_where_threads_share() {
    let mut found = Vec::new();
    for example in MEMORY_EXAMPLES {
        let h = Home::new();
        let (_, v) = h.check_json(&[
            "--example",
            example,
            "--strategy",
            "pct",
            "--no-narrow",
            "--keep",
            "all",
        ]);
        let start = h.second_thread_step(v["base"]["run"].as_str().unwrap());
        let tried = v["tried"].as_array().unwrap();
        // Every schedule's change points are drawn from a step at or after
        // the second thread's start, which its command says.
        let args = h.remake_args(tried[0]["run"].as_str().unwrap());
        let from: u64 = args
            .windows(2)
            .find(|w| w[0] == "--schedule-from")
            .map(|w| w[1].parse().unwrap())
            .unwrap_or_else(|| panic!("{args:?}"));
        assert!(from >= start, "{example}: PCT from {from}, before {start}");
        if v["violations"] == 1 {
            let bad = tried.last().unwrap();
            assert_eq!(bad["status"], "exited:2", "{v:#}");
            let id = bad["run"].as_str().unwrap();
            let args = h.remake_args(id);
            // DEPTH:STEPS:RANGES: k counts the steps on the conflicting bytes.
            let pct = args.windows(2).find(|w| w[0] == "--pct").unwrap()[1].clone();
            assert_eq!(pct.split(':').count(), 3, "{example}: --pct {pct}");
            let args: Vec<&str> = args.iter().map(String::as_str).chain(["-q"]).collect();
            assert_eq!(h.run(&args).id, id);
            h.replay_identical(id);
            found.push(example);
        }
    }
    assert_eq!(found, MEMORY_EXAMPLES, "PCT found only {found:?}");
}

#[test]
fn bounded_and_pct_pass_the_fixed_memory_point_twins() {
    for example in MEMORY_EXAMPLES {
        let fixed = format!("{example}-fixed");
        for strategy in ["bounded", "pct"] {
            let h = Home::new();
            let (_, v) = h.check_json(&[
                "--example",
                &fixed,
                "--strategy",
                strategy,
                "--schedules",
                "32",
            ]);
            assert_eq!(v["violations"], 0, "{fixed} under {strategy}: {v:#}");
            assert_eq!(v["tried"].as_array().unwrap().len(), 32, "{v:#}");
        }
    }
}
