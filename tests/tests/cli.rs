//! Naming runs: ids, prefixes, `@`, `@2`, names; `rewind ls`; the status line.

use rewind_tests::Home;

#[test]
fn runs_are_found_by_id_prefix_position_and_name() {
    let home = Home::new();
    let older = home.run(&["--name", "first", "--example", "bank"]);
    let newer = home.run_guest("hello", &[]);
    assert_ne!(older.id, newer.id);
    assert_eq!(older.id.len(), 16, "{}", older.line);
    assert!(
        older.id.chars().all(|c| c.is_ascii_hexdigit()),
        "{}",
        older.line
    );

    let log_of = |sel: &str| home.log(sel);
    assert_eq!(log_of("@"), log_of(&newer.id));
    assert_eq!(log_of("@2"), log_of(&older.id));
    assert_eq!(log_of("first"), log_of(&older.id));
    assert_eq!(log_of(&older.id[..8]), log_of(&older.id));
    assert!(log_of("first").contains("final balance"));
    assert_ne!(home.rewind(&["log", "no-such-run"]).code, 0);

    let ls = home.ok(&["ls"]).stdout;
    let lines: Vec<&str> = ls.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 2, "{ls}");
    assert!(lines[0].contains(&newer.id), "newest first:\n{ls}");
    assert!(
        lines[1].contains(&older.id) && lines[1].contains("first"),
        "{ls}"
    );
    assert!(lines[1].contains("exited:0"), "{ls}");

    let json = home.ok(&["ls", "--json"]).stdout;
    assert_eq!(json.lines().count(), 2, "{json}");
    for line in json.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("ls --json prints JSON lines");
    }
    assert_eq!(home.ok(&["ls", "-n", "1"]).stdout.lines().count(), 1);

    let events = home
        .ok(&["events", "@2", "--from", "0", "--to", "30"])
        .stdout;
    assert!(!events.is_empty());
    for line in events.lines() {
        let step: u64 = line.split_whitespace().next().unwrap().parse().unwrap();
        assert!(step <= 30, "{line}");
    }
}

#[test]
fn host_environment_does_not_leak() {
    let home = Home::new();
    let prog = rewind_tests::guest_arg("hello");
    let a = home.rewind_env(&["run", "--", &prog], &[("REWIND_TEST_NOISE", "1")]);
    let b = home.rewind_env(&["run", "--", &prog], &[("REWIND_TEST_NOISE", "2")]);
    let (a, b) = (
        rewind_tests::parse_status(&a).expect("a status line"),
        rewind_tests::parse_status(&b).expect("a status line"),
    );
    assert_eq!(a.id, b.id, "the host environment changed the run");
    let c = home.run(&["--env", "GREETING=hi", "--", &prog]);
    assert_ne!(c.id, a.id, "--env did not change the run");
}

/// The status line is always a line of its own on stderr, however the
/// guest left its streams: a half line on stderr followed by a whole one
/// on stdout (stdout and stderr captured apart, as a script does) used to
/// glue the status line to the guest's half line.
#[test]
fn the_status_line_starts_a_line_after_a_half_line_on_stderr() {
    let Some(busybox) = rewind_tests::host_program("/usr/bin/busybox", "busybox-static") else {
        return;
    };
    let home = Home::new();
    let run = home.run(&["--", &busybox, "sh", "-c", "printf half >&2; echo whole"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.stdout, "whole\n");
    let lines: Vec<&str> = run.out.stderr.lines().collect();
    assert_eq!(lines.first(), Some(&"half"), "{}", run.out);
    assert!(lines[1].starts_with("rewind: run "), "{}", run.out);
    home.replay_identical(&run.id);
}
