//! `--artifacts DIR` and `rewind test`: a flaky test's failing run lands in
//! DIR as a replayable `.rwd` that another home imports, replays identically
//! and opens at the failure; a passing run leaves DIR empty. The runs go
//! through contrib/ci/rewind-test.sh, the step docs/ci.md's jobs run.

use rewind_tests::{guest, rewind_bin, run_command, Home, Output};
use std::path::Path;
use std::time::Duration;

/// contrib/ci/rewind-test.sh ARGS with this home, `rewind` on PATH and
/// artifacts into `dir`, trying `schedules` schedules.
fn ci_step(home: &Home, dir: &Path, schedules: &str, args: &[&str]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/ci/rewind-test.sh");
    let bin_dir = rewind_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = std::process::Command::new("sh");
    cmd.arg(script)
        .args(args)
        .env("PATH", path)
        .env("REWIND_HOME", home.path())
        .env("REWIND_ARTIFACTS", dir)
        .env("REWIND_SCHEDULES", schedules)
        // One search on memory points: the lost update has no system call in its window.
        .env("REWIND_OPTIONS", "--strategy random --points memory");
    let out = run_command(cmd, Duration::from_secs(900));
    home.replay_recorded();
    out
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_flaky_tests_failure_travels_as_a_run() {
    let flaky = guest("flaky-test");
    let flaky = flaky.to_str().unwrap();
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let out = ci_step(
        &home,
        dir.path(),
        "64",
        &[flaky, "counts", "--test-threads=1"],
    );
    assert_eq!(out.code, 1, "rewind test finds the lost update:\n{out}");
    let txt: Vec<String> = files(dir.path())
        .into_iter()
        .filter(|f| f.ends_with(".txt"))
        .collect();
    assert_eq!(
        txt.len(),
        1,
        "one failing run, one summary: {:?}",
        files(dir.path())
    );
    let failing = txt[0].trim_end_matches(".txt").to_string();
    let text = std::fs::read_to_string(dir.path().join(&txt[0])).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "a summary and a command:\n{text}");
    assert!(lines[0].contains("violates exit=0"), "{text}");
    let open = lines[1].rsplit(" && ").next().unwrap();
    assert!(
        open.starts_with(&format!("rewind open {failing} ")),
        "{text}"
    );
    // Another machine: a home of its own, the commands the summary gives.
    let other = Home::new();
    for cmd in lines[1].split(" && ") {
        let words: Vec<&str> = cmd.split(' ').skip(1).collect();
        let out = other.rewind(&words);
        assert_eq!(out.code, 0, "`{cmd}` in another home:\n{out}");
        if words[0] == "open" {
            assert!(
                out.stdout.contains(&format!("\"run\":\"{failing}\"")),
                "{out}"
            );
        }
    }
    other.replay_identical(&failing);
    let shown = other.show_json(&failing);
    assert_eq!(
        shown["status"], "exited:101",
        "the imported run is the failing test: {shown}"
    );
}

#[test]
fn a_passing_test_leaves_nothing() {
    let flaky = guest("flaky-test");
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let out = ci_step(
        &home,
        dir.path(),
        "4",
        &[flaky.to_str().unwrap(), "steady", "--test-threads=1"],
    );
    assert_eq!(out.code, 0, "{out}");
    assert_eq!(
        files(dir.path()),
        Vec::<String>::new(),
        "no artifact for a pass"
    );
    let out = home.rewind(&[
        "run",
        "--artifacts",
        dir.path().to_str().unwrap(),
        "--",
        flaky.to_str().unwrap(),
        "steady",
    ]);
    assert_eq!(out.code, 0, "{out}");
    assert_eq!(
        files(dir.path()),
        Vec::<String>::new(),
        "rewind run keeps no passing run"
    );
}
