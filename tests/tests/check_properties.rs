//! `rewind check` with properties (built-in, SDK and script ones, and a
//! broken script a warning, not an abort), `--jobs` (the same report as
//! one job) and `--strategy bounded` (bank at one reschedule, and its bound
//! said when exhausted). Every run a check prints is replayed; see check.rs
//! for the search these tests pin.

mod checks;

use checks::*;
use rewind_tests::{rewind_bin, without_wall_time, Home};
use std::path::Path;

// ---- properties ----

/// `rewind check --property P --example NAME`, which must exit `code`.
fn with_property(example: &str, property: &str, code: i32) -> Check {
    let home = Home::new();
    let c = check(
        &home,
        &[
            "--points",
            "syscalls",
            "--example",
            example,
            "--property",
            property,
        ],
    );
    assert_eq!(c.out.code, code, "{}", c.out);
    if code == 1 {
        assert!(c.violation_line(property).is_some(), "{}", c.out);
        assert!(c.deciding.is_some(), "{}", c.out);
    } else {
        assert!(!c.any_violation(), "{}", c.out);
    }
    replay_all(&home, &c);
    c
}

#[test]
fn no_crash_is_violated_by_pool() {
    let c = with_property("pool", "no-crash", 1);
    assert!(
        c.violation_line("no-crash")
            .unwrap()
            .ends_with("ended killed:SIGSEGV"),
        "{}",
        c.out
    );
}

#[test]
fn no_crash_holds_for_pool_fixed() {
    with_property("pool-fixed", "no-crash", 0);
}

#[test]
fn no_deadlock_is_violated_by_philosophers() {
    let c = with_property("philosophers", "no-deadlock", 1);
    assert!(
        c.violation_line("no-deadlock")
            .unwrap()
            .ends_with("deadlocked"),
        "{}",
        c.out
    );
}

#[test]
fn no_deadlock_holds_for_philosophers_fixed() {
    with_property("philosophers-fixed", "no-deadlock", 0);
}

#[test]
fn sdk_property_is_violated_by_sdk() {
    let c = with_property("sdk", "sdk", 1);
    assert!(c
        .violation_line("sdk")
        .unwrap()
        .contains("no seat is sold twice"));
}

#[test]
fn sdk_property_holds_for_sdk_fixed_and_is_added_by_itself() {
    with_property("sdk-fixed", "sdk", 0);
    let home = Home::new();
    let (out, v) = home.check_json(&[
        "--points",
        "syscalls",
        "--keep",
        "all",
        "--example",
        "sdk-fixed",
    ]);
    assert_eq!(out.code, 0, "{out}");
    let props: Vec<&str> = v["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        props.contains(&"sdk"),
        "schedule 0 calls the SDK, yet: {props:?}"
    );
    assert_eq!(v["never_held"].as_array().map(|a| a.len()), Some(0), "{v}");
    // The SDK's calls are events of the run.
    let base = v["base"]["run"].as_str().unwrap();
    let events = home.events(base);
    for want in [
        "box offices open",
        "no seat is sold twice",
        "both offices sell a seat",
    ] {
        assert!(events.contains(want), "no SDK event {want:?}:\n{events}");
    }
    home.replay_identical(base);
    for t in v["tried"].as_array().unwrap() {
        home.replay_identical(t["run"].as_str().unwrap());
    }
}

/// A shell script property: exit 0 for a correct run, 1 with the reason.
fn write_script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `money.sh` (reads the run's output with `rewind log`) in a properties
/// file that names it relative to itself.
fn money_properties(home: &Home) -> String {
    let dir = home.path().join("props");
    std::fs::create_dir_all(&dir).unwrap();
    let bin = rewind_bin();
    write_script(
        &dir,
        "money.sh",
        &format!(
            "if \"{}\" log \"$REWIND_RUN\" | grep -q 'money lost'; then\n  echo \"run $REWIND_RUN lost money\"\n  exit 1\nfi\nexit 0",
            bin.display()
        ),
    );
    let file = dir.join("bank.properties");
    std::fs::write(
        &file,
        "# no deposit is ever lost\nscript=money.sh  # relative to this file\n",
    )
    .unwrap();
    file.to_str().unwrap().to_string()
}

#[test]
fn script_property_is_violated_by_bank() {
    let home = Home::new();
    let props = money_properties(&home);
    let c = check(
        &home,
        &[
            "--points",
            "syscalls",
            "--example",
            "bank",
            "--properties",
            &props,
        ],
    );
    assert_eq!(c.out.code, 1, "{}", c.out);
    let line = c
        .out
        .stdout
        .lines()
        .find(|l| l.contains(" violates script=") && l.contains("money.sh: run "))
        .unwrap_or_else(|| panic!("no script violation:\n{}", c.out));
    assert!(line.ends_with("lost money"), "{line}");
    assert!(c.deciding.is_some(), "{}", c.out);
    replay_all(&home, &c);
}

#[test]
fn script_property_holds_for_bank_fixed() {
    let home = Home::new();
    let props = money_properties(&home);
    let c = check(
        &home,
        &[
            "--points",
            "syscalls",
            "--example",
            "bank-fixed",
            "--properties",
            &props,
            "--schedules",
            "16",
        ],
    );
    assert_eq!(c.out.code, 0, "{}", c.out);
    assert_eq!(c.tried.len(), 17, "{}", c.out);
    assert!(!c.out.stdout.contains("warning"), "{}", c.out);
    replay_all(&home, &c);
}

/// A property script that crashes, or says a run is wrong without a
/// reason, is a warning naming the run; the check goes on and still finds
/// bank's bug through the other property.
#[test]
fn broken_property_scripts_are_warnings_not_aborts() {
    let home = Home::new();
    let dir = home.path().join("props");
    std::fs::create_dir_all(&dir).unwrap();
    write_script(&dir, "crash.sh", "kill -SEGV $$");
    write_script(&dir, "silent.sh", "exit 1");
    let crash = format!("script={}", dir.join("crash.sh").display());
    let silent = format!("script={}", dir.join("silent.sh").display());
    let c = check(
        &home,
        &[
            "--points",
            "syscalls",
            "--example",
            "bank",
            "--property",
            &crash,
            "--property",
            &silent,
            "--property",
            "ends-differently",
        ],
    );
    assert_eq!(c.out.code, 1, "{}", c.out);
    assert!(c.violation_line("ends-differently").is_some(), "{}", c.out);
    assert!(c.deciding.is_some(), "{}", c.out);
    let warnings: Vec<&str> = c
        .out
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("warning:"))
        .collect();
    for t in &c.tried {
        for script in ["crash.sh", "silent.sh"] {
            assert!(
                warnings
                    .iter()
                    .any(|w| w.contains(script) && w.contains(&t.id)),
                "no warning about {script} for run {}:\n{}",
                t.id,
                c.out
            );
        }
    }
    assert!(
        !c.out.stdout.contains("violates script="),
        "a broken script counted as a violation:\n{}",
        c.out
    );
    replay_all(&home, &c);
}

// ---- jobs and strategies ----

#[test]
fn two_jobs_give_the_same_report_as_one() {
    for (example, extra) in [
        // Memory points (the default): narrowing's lists of single
        // candidates run on the jobs too.
        ("bank", &[][..]),
        ("lazy", &[][..]),
        (
            "bank",
            &["--points", "syscalls", "--all", "--no-narrow"][..],
        ),
        ("philosophers", &["--points", "syscalls"][..]),
    ] {
        let home = Home::new();
        let mut args = vec!["--example", example];
        args.extend_from_slice(extra);
        let one = check(&home, &[&args[..], &["--jobs", "1"]].concat());
        let two = check(&home, &[&args[..], &["--jobs", "2"]].concat());
        assert_eq!(one.out.code, two.out.code);
        assert_eq!(
            without_wall_time(&one.out.stdout),
            without_wall_time(&two.out.stdout),
            "--jobs 1 and --jobs 2 differ for {example} {extra:?}"
        );
        replay_all(&home, &two);
    }
}

#[test]
fn bounded_finds_bank_at_one_reschedule() {
    let home = Home::new();
    let c = check(
        &home,
        &[
            "--points",
            "syscalls",
            "--example",
            "bank",
            "--strategy",
            "bounded",
        ],
    );
    assert_eq!(c.out.code, 1, "{}", c.out);
    let bad = c
        .tried
        .iter()
        .find(|t| t.status == "exited:2")
        .unwrap_or_else(|| panic!("{}", c.out));
    // One reschedule, at one step: `reschedule at N`.
    let n: u64 = bad
        .label
        .strip_prefix("reschedule at ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not a single reschedule: {}", bad.label));
    assert!(c
        .violation_line("ends-differently")
        .unwrap()
        .starts_with(&bad.label));
    // Every earlier single step from where a second thread exists was
    // tried, in order, and none failed.
    let start = home.second_thread_step(&c.base().id);
    let singles: Vec<u64> = c
        .tried
        .iter()
        .skip(1)
        .map(|t| {
            t.label
                .strip_prefix("reschedule at ")
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(singles, (start..=n).collect::<Vec<_>>(), "{}", c.out);
    let (step, line) = c.deciding.clone().unwrap();
    assert_eq!(step, n, "{line}");
    replay_all(&home, &c);
}

#[test]
fn bounded_exhausts_its_bound_on_bank_fixed() {
    let home = Home::new();
    let c = check(
        &home,
        &[
            "--points",
            "syscalls",
            "--example",
            "bank-fixed",
            "--strategy",
            "bounded",
        ],
    );
    assert_eq!(c.out.code, 0, "{}", c.out);
    let steps = c.tried.len();
    assert!(steps > 1, "{}", c.out);
    let bound = c
        .out
        .stdout
        .lines()
        .find(|l| l.starts_with("every schedule with "))
        .unwrap_or_else(|| panic!("no `every schedule with ...` line:\n{}", c.out));
    let start = home.second_thread_step(&c.base().id);
    assert!(
        bound.starts_with(&format!(
            "every schedule with 1 reschedule in steps {start}.."
        )),
        "{bound}"
    );
    assert!(!c.any_violation(), "{}", c.out);
    replay_all(&home, &c);
}
