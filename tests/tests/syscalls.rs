//! `rewind doctor --syscalls` prints every x86-64 system call from the
//! dispatcher's own table, and the README's list says the same.

use rewind_tests::{assert_lines, Home};

/// The README's block, as the table makes it.
fn readme_block(rows: &[serde_json::Value]) -> String {
    let named = |state: &str| -> Vec<&serde_json::Value> {
        rows.iter().filter(|r| r["support"] == state).collect()
    };
    let mut s = String::from("Implemented: ");
    let full: Vec<String> = named("implemented")
        .iter()
        .map(|r| format!("`{}`", r["name"].as_str().unwrap()))
        .collect();
    s += &full.join(", ");
    s += ".\n\nPartial:\n\n";
    for r in named("partial") {
        s += &format!(
            "- `{}`: {}\n",
            r["name"].as_str().unwrap(),
            r["note"].as_str().unwrap()
        );
    }
    s
}

#[test]
fn every_call_number_has_an_entry_and_the_readme_agrees() {
    let home = Home::new();
    let out = home.ok(&["doctor", "--syscalls", "--json"]);
    let rows: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    // Every number Linux x86-64 has, 0 to 334 and 424 to 450, once.
    let nrs: Vec<u64> = rows.iter().map(|r| r["nr"].as_u64().unwrap()).collect();
    let want: Vec<u64> = (0..=334).chain(424..=450).collect();
    assert_eq!(nrs, want, "{}", out.stdout);
    for r in &rows {
        let state = r["support"].as_str().unwrap();
        assert!(
            ["implemented", "partial", "not implemented"].contains(&state),
            "{r}"
        );
        assert_eq!(
            state == "implemented",
            r["note"].as_str().unwrap().is_empty(),
            "a partial or missing call says why, an implemented one needs not: {r}"
        );
    }
    let by_name = |n: &str| rows.iter().find(|r| r["name"] == n).unwrap()["support"].clone();
    assert_eq!(by_name("write"), "implemented");
    assert_eq!(by_name("clone"), "partial");
    assert_eq!(by_name("io_uring_setup"), "not implemented");

    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let count = |state: &str| rows.iter().filter(|r| r["support"] == state).count();
    let (full, partial) = (count("implemented"), count("partial"));
    let served = format!(
        "{} of them are served: {full} implemented and {partial} partly.",
        full + partial
    );
    assert!(readme.contains(&served), "README.md should say: {served}");
    let block = readme_block(&rows);
    assert!(
        readme.contains(&block),
        "README.md's list of system calls is not the table's; it should hold:\n\n{block}"
    );
}

/// The calls added to reach 200 (sendfile, copy_file_range, getdents,
/// futimesat, msync, mincore, mlock, times, getpriority, sched_*,
/// membarrier...), each against what Linux does: the guest program checks
/// itself natively and in a run, which replays identically.
#[test]
fn the_added_calls_behave_as_on_linux() {
    let native = rewind_tests::run_command(
        std::process::Command::new(rewind_tests::guest("sys-more")),
        rewind_tests::DEADLINE,
    );
    assert!(
        native.code == 0 && native.stdout.contains("all passed"),
        "natively:\n{native}"
    );
    let home = Home::new();
    let (run, log) = home.run_passing("sys-more");
    assert_lines(&log, &["nice at the start: 0"]);
    let events = home.events(&run.id);
    for call in [
        "sendfile(",
        "copy_file_range(",
        "getdents(",
        "futimesat(",
        "utimes(",
        "utime(",
        "msync(",
        "mincore(",
        "mlock2(",
        " times(",
        "setpriority(",
        "sched_rr_get_interval(",
        "membarrier(",
        "sync_file_range(",
    ] {
        assert!(
            events
                .lines()
                .any(|l| l.contains(call) && !l.contains("ENOSYS")),
            "{call} was not served:\n{events}"
        );
    }
}

/// Every call the table marks not implemented gets ENOSYS in a guest run,
/// recorded as an event under its Linux name, and the run replays.
#[test]
fn every_call_the_table_marks_missing_gets_enosys() {
    let home = Home::new();
    let missing: Vec<(u64, String)> = home
        .ok(&["doctor", "--syscalls", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
        .filter(|r| r["support"] == "not implemented")
        .map(|r| {
            (
                r["nr"].as_u64().unwrap(),
                r["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(missing.len() > 100, "{missing:?}");
    let nrs: Vec<String> = missing.iter().map(|(nr, _)| nr.to_string()).collect();
    let args: Vec<&str> = nrs.iter().map(String::as_str).collect();
    let run = home.run_guest("enosys", &args);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let want: Vec<String> = missing
        .iter()
        .map(|(nr, _)| format!("call {nr} = -1 (ENOSYS)"))
        .collect();
    assert_eq!(home.log(&run.id).lines().collect::<Vec<_>>(), want);
    let events = home.events_json(&run.id);
    for (nr, name) in &missing {
        assert!(
            events.iter().any(|e| e["kind"] == "syscall"
                && e["nr"] == *nr
                && e["name"] == name.as_str()
                && e["ret"] == -38),
            "no ENOSYS event for {name} ({nr})"
        );
    }
    home.replay_identical(&run.id);
}
