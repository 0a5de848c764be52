//! The run store: `show` (commands that make a run again), `remove` and
//! `gc`, `prune`, bookmarks, `ls` filters, and
//! several commands on one store at once.

use rewind_tests::{
    failing_run_in, guest_arg, last_run_id, rewind_bin, run_command, store_files,
    store_tree as tree, Home, Output, DEADLINE,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

fn bytes(t: &BTreeMap<String, u64>) -> u64 {
    t.values().sum()
}

/// A shell line run with `home` as REWIND_HOME and this `rewind` first on PATH.
fn sh(home: &Home, line: &str) -> Output {
    let bin_dir = rewind_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(line)
        .env("REWIND_HOME", home.path())
        .env("PATH", path);
    run_command(cmd, DEADLINE)
}

/// One field of each run `rewind ls --json ARGS` lists, in its order.
fn ls_field(home: &Home, args: &[&str], field: &str) -> Vec<String> {
    let mut full = vec!["ls", "--json"];
    full.extend_from_slice(args);
    home.ok(&full)
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()[field]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// `rewind fork`, asserting it ends with a status line; returns the fork's id.
fn fork(home: &Home, args: &[&str]) -> String {
    let mut full = vec!["fork"];
    full.extend_from_slice(args);
    full.push("--quiet");
    let out = home.rewind(&full);
    last_run_id(&out.stderr)
        .unwrap_or_else(|| panic!("`rewind {}` made no run:\n{out}", full.join(" ")))
}

#[test]
fn show_gives_commands_that_recreate_the_same_ids_in_a_fresh_home() {
    let home = Home::new();
    // The default epoch (today) must come out explicit.
    let bank = home.run(&["-q", "--example", "bank"]);
    home.replay_identical(&bank.id);
    let threads = guest_arg("threads");
    let stdin_file = home.path().join("input.txt");
    std::fs::write(&stdin_file, "some input\nfor the guest\n").unwrap();
    let mut cmd = Command::new(rewind_bin());
    cmd.args([
        "run",
        "-q",
        "--name",
        "named run",
        "--seed",
        "7",
        "--cores",
        "2",
        "--mem",
        "512M",
        "--env",
        "HOME=/home/it's me",
        "--env",
        "GREETING=hello world",
        "--cwd",
        "/tmp",
        "--schedule",
        "3",
        "--schedule-from",
        "5",
        "--",
        &threads,
        "arg with space",
    ])
    .env("REWIND_HOME", home.path())
    .stdin(std::fs::File::open(&stdin_file).unwrap());
    // run_command sets standard input to null: run this one by hand.
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let flagged = last_run_id(&stderr).unwrap_or_else(|| panic!("no run:\n{stderr}"));
    home.replay_identical(&flagged);
    let by_schedule = fork(&home, &[&bank.id, "20", "--schedule", "2"]);
    home.replay_identical(&by_schedule);
    let fork_of_fork = fork(&home, &[&by_schedule, "30", "--seed", "9"]);
    home.replay_identical(&fork_of_fork);

    for id in [&bank.id, &flagged, &by_schedule, &fork_of_fork] {
        let v = home.show_json(id);
        assert_eq!(v["reproducible"], true, "{v:#}");
        let cmds = v["commands"].as_array().unwrap();
        let first = cmds[0]["argv"].as_array().unwrap();
        assert!(
            first.iter().any(|a| a == "--epoch"),
            "the epoch must be explicit: {v:#}"
        );
        // The plain output names the same commands.
        let text = home.ok(&["show", id]).stdout;
        for c in cmds {
            let line = c["shell"].as_str().unwrap();
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        // Run them in a fresh home: the last one makes the same run.
        let fresh = Home::new();
        let mut made = None;
        for c in cmds {
            let line = c["shell"].as_str().unwrap();
            let out = sh(&fresh, line);
            made = last_run_id(&out.stderr);
            assert!(made.is_some(), "`{line}` made no run:\n{out}");
        }
        assert_eq!(made.as_deref(), Some(id.as_str()), "{v:#}");
        fresh.replay_identical(id);
    }

    // A run made by narrowing in `rewind check` (an explicit perturbation)
    // is made again by `rewind run --reschedule-at`/`--stall-at`.
    let out = home.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--example",
        "bank",
        "--schedules",
        "16",
    ]);
    // bank is found within 16 schedules.
    let failing = failing_run_in(&out);
    home.replay_identical(&failing);
    let v = home.show_json(&failing);
    let perturb = &v["inputs"]["perturb"];
    assert!(!perturb.as_array().is_none_or(Vec::is_empty), "{v:#}");
    assert!(
        perturb[0]["step"].is_u64() && perturb[0]["what"].is_string(),
        "{v:#}"
    );
    assert_eq!(v["reproducible"], true, "{v:#}");
    let fresh = Home::new();
    let mut made = None;
    for c in v["commands"].as_array().unwrap() {
        let line = c["shell"].as_str().unwrap();
        assert!(
            line.contains("--reschedule-at") || line.contains("--stall-at"),
            "{line}"
        );
        made = last_run_id(&sh(&fresh, line).stderr);
    }
    assert_eq!(made.as_deref(), Some(failing.as_str()), "{v:#}");
    fresh.replay_identical(&failing);
}

#[test]
fn remove_takes_forks_along_and_gc_returns_the_store_to_its_size() {
    let home = Home::new();
    let first = home.run_guest("hello", &[]);
    home.replay_identical(&first.id);
    // The store's runs and pages; not the cache of host files' hashes
    // (`cache/file-hashes`, bounded), where the next run keeps its
    // program's hash whether or not the run stays.
    let tree = |p: &std::path::Path| {
        let mut t = tree(p);
        t.retain(|k, _| !k.starts_with("cache/"));
        t
    };
    let before = tree(home.path());

    // Long enough for keyframes, whose pages go to the shared page store.
    let long = home.run_guest("getpid", &["30000"]);
    assert_eq!(long.status, "exited:0", "{}", long.out);
    home.replay_identical(&long.id);
    let forked = fork(&home, &[&long.id, "100", "--schedule", "4"]);
    home.replay_identical(&forked);
    let grandchild = fork(&home, &[&forked, "200", "--seed", "2"]);
    home.replay_identical(&grandchild);
    // Pages, whether in files of their own or in packs.
    let pages = |h: &Home| {
        vmm::store::pages::PageStore::at(h.path().join("pages"))
            .list()
            .unwrap()
            .len()
    };
    let had_pages = pages(&home);
    assert!(
        had_pages > 0,
        "the 30,000-step run and its forks kept no pages: gc has nothing to prove"
    );

    let ls = home.ok(&["ls", "--json"]).stdout;
    assert_eq!(ls.lines().count(), 4, "{ls}");
    let forks = home.ok(&["ls", "--forks-of", &long.id]).stdout;
    assert_eq!(forks.lines().count(), 2, "{forks}");

    // A wrong RUN among them removes nothing.
    let out = home.rewind(&["remove", &long.id, "no-such-run"]);
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(home.ok(&["ls"]).stdout.lines().count(), 4);

    let dry = home.ok(&["remove", "--dry-run", &long.id]).stdout;
    assert_eq!(dry.lines().count(), 3, "{dry}");
    assert_eq!(home.ok(&["ls"]).stdout.lines().count(), 4);

    let out = home.ok(&["remove", &long.id]);
    for id in [&long.id, &forked, &grandchild] {
        assert!(out.stdout.contains(id.as_str()), "{out}");
    }
    let ls = home.ok(&["ls"]).stdout;
    assert_eq!(ls.lines().count(), 1, "{ls}");
    assert!(ls.contains(&first.id));

    let gc = home.ok(&["gc", "--json"]);
    let v: Value = serde_json::from_str(&gc.stdout).unwrap();
    assert_eq!(
        v["pages_removed"].as_u64().unwrap() as usize,
        had_pages,
        "{v}"
    );
    assert!(v["freed_bytes"].as_u64().unwrap() > 0, "{v}");
    let after = tree(home.path());
    assert_eq!(after, before, "the store is as it was before the run");
    assert_eq!(bytes(&after), bytes(&before));
    home.replay_identical(&first.id);
    // Nothing left to collect.
    let again: Value = serde_json::from_str(&home.ok(&["gc", "--json"]).stdout).unwrap();
    assert_eq!(again["freed_bytes"], 0, "{again}");
    let text = home.ok(&["gc"]).stdout;
    assert!(text.starts_with("freed "), "{text}");
}

#[test]
fn an_imported_run_keeps_its_keyframes_pages_in_one_pack() {
    let home = Home::new();
    let long = home.run_guest("getpid", &["30000"]);
    home.replay_identical(&long.id);
    let file = home.path().join("long.rwd");
    let file_s = file.to_str().unwrap();
    home.ok(&["export", &long.id, "--replayable", "-o", file_s]);

    let other = Home::new();
    other.ok(&["import", file_s]);
    // The keyframes' pages arrive together: one pack, not a file a page.
    let packs: Vec<_> = std::fs::read_dir(other.path().join("pages/packs"))
        .expect("the import wrote a pack")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .collect();
    assert_eq!(packs.len(), 1, "{packs:?}");
    let loose = tree(&other.path().join("pages"))
        .keys()
        .filter(|k| !k.starts_with("packs"))
        .count();
    assert_eq!(loose, 0, "pages outside the pack");
    other.replay_identical(&long.id);
    // A fork from a late keyframe reads its pages from the pack.
    let f = fork(&other, &[&long.id, "29000", "--schedule", "1"]);
    other.replay_identical(&f);
    assert_eq!(other.events(&long.id), home.events(&long.id));
}

#[test]
fn gc_keeps_the_pages_of_runs_it_keeps() {
    let home = Home::new();
    let a = home.run_guest("getpid", &["30000"]);
    home.replay_identical(&a.id);
    let b = home.run_guest("getpid", &["25000"]);
    home.replay_identical(&b.id);
    home.ok(&["remove", &b.id]);
    home.ok(&["gc"]);
    home.replay_identical(&a.id);
    // A fork from the kept run's keyframes still works.
    let f = fork(&home, &[&a.id, "29000", "--schedule", "1"]);
    home.replay_identical(&f);
}

#[test]
fn prune_identical_removes_forks_that_ran_as_an_older_run() {
    let home = Home::new();
    let hello = home.run_guest("hello", &[]);
    home.replay_identical(&hello.id);
    // A fork of a single-threaded program at its last step cannot differ.
    let steps = hello.steps.unwrap();
    let same = fork(&home, &[&hello.id, &steps.to_string(), "--schedule", "5"]);
    home.replay_identical(&same);
    let bank = home.run(&["-q", "--example", "bank"]);
    home.replay_identical(&bank.id);
    let v = home.show_json(&bank.id);
    let bank_steps = v["steps"].as_u64().unwrap();
    // Forks of bank under many schedules: some differ, maybe some not.
    let mut forks = Vec::new();
    for s in 1..=6 {
        let f = fork(&home, &[&bank.id, "20", "--schedule", &s.to_string()]);
        home.replay_identical(&f);
        forks.push(f);
    }
    assert!(bank_steps > 20);
    let dry = home.ok(&["prune", "--identical", "--dry-run"]).stdout;
    assert!(dry.contains(&same), "{dry}");
    let out = home.ok(&["prune", "--identical"]);
    assert!(out.stdout.contains(&same), "{out}");
    let left = ls_field(&home, &[], "id");
    assert!(!left.contains(&same));
    assert!(left.contains(&hello.id) && left.contains(&bank.id));
    // What is left is pairwise different among forks and their elders.
    for f in &forks {
        if left.contains(f) {
            let d = home.rewind(&["diff", &bank.id, f]);
            assert_eq!(
                d.code, 1,
                "kept fork {f} does not differ from its parent:\n{d}"
            );
        }
    }
    let out = home.rewind(&["prune"]);
    assert_eq!(out.code, 2, "{out}");
}

#[test]
fn ls_filters() {
    let home = Home::new();
    let ok = home.run(&["--name", "good", "-q", "--example", "bank"]);
    let segv = home.run_guest("segv", &[]);
    let three = home.run_guest("threads", &[]);
    assert_eq!(three.status, "exited:3", "{}", three.out);
    let stuck = home.run_guest("deadlock", &[]);
    assert_eq!(stuck.status, "deadlocked", "{}", stuck.out);
    for r in [&ok, &segv, &three, &stuck] {
        home.replay_identical(&r.id);
    }
    let f = fork(&home, &[&ok.id, "10", "--schedule", "1"]);
    home.replay_identical(&f);
    let ff = fork(&home, &[&f, "15", "--schedule", "2"]);
    home.replay_identical(&ff);
    let ids = |args: &[&str]| ls_field(&home, args, "id");
    let statuses = |args: &[&str]| ls_field(&home, args, "status");
    assert_eq!(ids(&[]).len(), 6);
    assert!(statuses(&["--status", "passed"])
        .iter()
        .all(|s| s == "exited:0"));
    assert!(ids(&["--status", "passed"]).contains(&ok.id));
    let failed = ids(&["--status", "failed"]);
    assert!(failed.contains(&segv.id), "{failed:?}");
    assert!(!failed.contains(&ok.id));
    assert_eq!(ids(&["--status", "killed"]), vec![segv.id.clone()]);
    assert_eq!(ids(&["--status", "killed:SIGSEGV"]), vec![segv.id.clone()]);
    let exited3 = ids(&["--status", "exited:3"]);
    assert!(
        exited3.contains(&three.id) && !exited3.contains(&ok.id),
        "{exited3:?}"
    );
    assert!(statuses(&["--status", "exited:3"])
        .iter()
        .all(|s| s == "exited:3"));
    assert_eq!(ids(&["--status", "deadlocked"]), vec![stuck.id.clone()]);
    assert!(ids(&["--status", "timed-out"]).is_empty());
    let forks = ids(&["--forks-of", &ok.id]);
    assert_eq!(forks.len(), 2, "{forks:?}");
    assert!(forks.contains(&f) && forks.contains(&ff));
    assert_eq!(ids(&["--forks-of", &f]), vec![ff.clone()]);
    let named = ids(&["--name", "good"]);
    assert!(named.contains(&ok.id) && !named.contains(&segv.id));
    assert_eq!(ids(&["--since", "1h"]).len(), 6);
    assert_eq!(ids(&["--since", "2000-01-01"]).len(), 6);
    assert!(ids(&["--since", "2999-01-01"]).is_empty());
    assert_eq!(ids(&["--since", "1h", "-n", "2"]).len(), 2);
    // The plain listing filters the same way.
    let text = home.ok(&["ls", "--status", "killed"]).stdout;
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(&segv.id));
    for bad in [
        &["--status", "bogus"][..],
        &["--since", "yesterday"][..],
        &["--status", "exited:x"][..],
    ] {
        let mut full = vec!["ls"];
        full.extend_from_slice(bad);
        let out = home.rewind(&full);
        assert_eq!(out.code, 2, "{out}");
        assert_eq!(out.stderr_lines().len(), 1, "{out}");
    }
}

#[test]
fn bookmarks_are_checked_and_kept_with_the_run() {
    let home = Home::new();
    let run = home.run_guest("hello", &[]);
    home.replay_identical(&run.id);
    let out = home.rewind(&["bookmark", &run.id, "999999", "past the end"]);
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(home.ok(&["bookmarks", &run.id]).stdout, "");
    // Several at once: none lost.
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let bin = rewind_bin();
            let dir = home.path().to_path_buf();
            let id = run.id.clone();
            std::thread::spawn(move || {
                let mut c = Command::new(bin);
                c.args(["bookmark", &id, &i.to_string(), &format!("note {i}")])
                    .env("REWIND_HOME", dir);
                run_command(c, DEADLINE)
            })
        })
        .collect();
    for h in handles {
        let out = h.join().unwrap();
        assert_eq!(out.code, 0, "{out}");
    }
    let list = home.ok(&["bookmarks", &run.id]).stdout;
    assert_eq!(list.lines().count(), 6, "{list}");
    assert!(list.lines().next().unwrap().contains("note 0"), "{list}");
    // Bookmarks do not change the run.
    home.replay_identical(&run.id);
    assert_eq!(home.ok(&["show", &run.id, "--json"]).code, 0);
}

#[test]
fn concurrent_runs_and_gc_leave_a_consistent_store() {
    let home = Home::new();
    let old = home.run_guest("getpid", &["22000"]);
    home.replay_identical(&old.id);
    let bin = rewind_bin();
    let dir: PathBuf = home.path().to_path_buf();
    let spawn = |args: Vec<String>| {
        let bin = bin.clone();
        let dir = dir.clone();
        std::thread::spawn(move || {
            let mut c = Command::new(bin);
            c.args(&args).env("REWIND_HOME", dir);
            run_command(c, DEADLINE)
        })
    };
    let getpid = guest_arg("getpid");
    let mut jobs = Vec::new();
    for round in 0..3 {
        jobs.push(spawn(vec![
            "run".into(),
            "-q".into(),
            "--".into(),
            getpid.clone(),
            format!("{}", 24000 + round),
        ]));
        jobs.push(spawn(vec![
            "run".into(),
            "-q".into(),
            "--seed".into(),
            format!("{round}"),
            "--".into(),
            getpid.clone(),
            "26000".into(),
        ]));
        jobs.push(spawn(vec!["gc".into()]));
        jobs.push(spawn(vec!["remove".into(), old.id.clone()]));
    }
    let outs: Vec<Output> = jobs.into_iter().map(|j| j.join().unwrap()).collect();
    let mut made = Vec::new();
    for (i, out) in outs.iter().enumerate() {
        match i % 4 {
            0 | 1 => {
                assert_eq!(out.code, 0, "{out}");
                made.push(last_run_id(&out.stderr).expect("a run"));
            }
            2 => assert_eq!(out.code, 0, "gc: {out}"),
            _ => {} // the first remove wins; the others find nothing
        }
    }
    // Every listed run loads and replays; nothing half-written is in view.
    let listed: Vec<Value> = home
        .ok(&["ls", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for id in &made {
        assert!(
            listed.iter().any(|v| v["id"] == id.as_str()),
            "{id} is not listed"
        );
    }
    assert!(!listed.iter().any(|v| v["id"] == old.id.as_str()));
    for v in &listed {
        let id = v["id"].as_str().unwrap();
        home.ok(&["show", id]);
        home.ok(&["events", id]);
        home.replay_identical(id);
        // Their keyframes' pages are all there and whole: an export that
        // carries them (each read back and checked against its hash) warns
        // of none missing.
        let file = home.path().join(format!("{id}.rwd"));
        let out = home.ok(&["export", id, "--replayable", "-o", file.to_str().unwrap()]);
        assert!(!out.stderr.contains("warning"), "{out}");
    }
    let dots: Vec<String> = std::fs::read_dir(home.path().join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(dots.is_empty(), "leftovers: {dots:?}");
    let gc: Value = serde_json::from_str(&home.ok(&["gc", "--json"]).stdout).unwrap();
    assert_eq!(gc["leftovers_removed"], 0, "{gc}");
}

#[test]
fn a_damaged_run_is_reported_by_ls_and_the_others_still_listed() {
    let home = Home::new();
    let a = home.run(&["-q", "--example", "bank"]);
    let b = home.run(&["-q", "--example", "bank-fixed"]);
    home.replay_identical(&a.id);
    home.replay_identical(&b.id);
    let meta = home.path().join("runs").join(&a.id).join("meta.json");
    std::fs::write(&meta, b"{ not json").unwrap();
    let out = home.ok(&["ls"]);
    assert!(out.stdout.contains(&b.id), "{out}");
    assert!(!out.stdout.contains(&a.id), "{out}");
    assert!(
        out.stderr
            .contains(&format!("rewind: warning: runs/{} is damaged", a.id)),
        "{out}"
    );
    // Asking for it by name is a one-line error, not a crash.
    let shown = home.rewind(&["events", &a.id]);
    assert_eq!(shown.code, 2, "{shown}");
    assert_eq!(shown.stderr.lines().count(), 1, "{shown}");
}

/// Looking at a run (`show` compares its image with the host's, as a
/// debug session and the language server do) writes nothing into the
/// store, not even the file hashes a run would keep: here the program's
/// were too new to keep when it ran, and have settled since.
#[test]
fn looking_at_a_run_writes_nothing_into_the_store() {
    // The program outlives the home, whose runs are replayed when it goes.
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new();
    let prog = dir.path().join("getpid");
    std::fs::copy(guest_arg("getpid"), &prog).unwrap();
    let run = home.run(&["-q", "--", prog.to_str().unwrap(), "3"]);
    home.replay_identical(&run.id);
    std::thread::sleep(vmm::image::RACY_MARGIN + std::time::Duration::from_secs(1));
    let before = store_files(home.path());
    let shown = home.show_json(&run.id);
    assert_eq!(shown["reproducible"], true, "{shown:#}");
    assert_eq!(
        store_files(home.path()),
        before,
        "`rewind show` changed the store"
    );
    // A run does keep them: the next one reads the program no more.
    home.run(&["-q", "--", prog.to_str().unwrap(), "3"]);
    assert!(
        home.path().join(vmm::store::FILE_HASHES).exists(),
        "a run keeps the settled program's hash"
    );
}
