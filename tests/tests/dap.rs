//! `rewind dap` driven by real DAP clients: the DebugClient of
//! `@vscode/debugadapter-testsupport` under Node.js (tests/dap-client,
//! installed by scripts/setup). The scenarios are in
//! tests/dap-client/dap.test.mjs; every run they make is replayed there.

use rewind_tests::{rewind_bin, run_command};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn debug_client_sessions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("dap-client");
    assert!(
        dir.join("node_modules/@vscode/debugadapter-testsupport")
            .exists(),
        "{} has no node_modules: run scripts/setup --install-only",
        dir.display()
    );
    let mut cmd = Command::new("node");
    cmd.arg("--test")
        .arg("--test-reporter=tap")
        .arg("dap.test.mjs")
        .current_dir(&dir)
        .env("REWIND_BIN", rewind_bin());
    let out = run_command(cmd, Duration::from_secs(600));
    assert_eq!(out.code, 0, "node --test failed:\n{out}");
    assert!(out.stdout.contains("# fail 0"), "{out}");
}

/// `rewind open` prints what opens a run in an editor; `check` and `fork`
/// print that command for what they made, and it works.
#[test]
fn open_prints_what_opens_a_run() {
    let home = rewind_tests::Home::new();
    let check = home.rewind(&["check", "--example", "bank"]);
    assert_eq!(check.code, 1, "{check}");
    let line = check
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("open it: "))
        .unwrap_or_else(|| panic!("check prints how to open its failing run:\n{check}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..2], &["rewind", "open"], "{line}");
    let (failing, step, passing) = (words[2], words[3], words[5]);
    let open = home.ok(&words[1..]);
    let launch: serde_json::Value = serde_json::from_str(
        open.stdout
            .lines()
            .find_map(|l| l.strip_prefix("launch: "))
            .unwrap_or_else(|| panic!("{open}")),
    )
    .expect("launch arguments are JSON");
    assert_eq!(launch["type"], "rewind");
    assert_eq!(launch["run"], failing);
    assert_eq!(launch["step"].to_string(), step);
    assert_eq!(launch["compare"], passing);
    assert!(
        open.stdout.contains(&format!(
            "vscode://rewind.rewind/open?run={failing}&step={step}&compare={passing}"
        )),
        "{open}"
    );
    assert!(
        open.stdout
            .contains(&format!("RewindOpen {failing} {step}")),
        "{open}"
    );
    let past = home.rewind(&["open", failing, "100000"]);
    assert_eq!(past.code, 2, "{past}");
    assert!(past.stderr.contains("past the end"), "{past}");
    let fork = home.rewind(&["fork", passing, "30", "--schedule", "2", "-q"]);
    assert!(
        fork.stderr.contains("open it: rewind open ")
            && fork.stderr.contains(&format!("30 --compare {passing}")),
        "{fork}"
    );
    for run in [failing, passing] {
        home.replay_identical(run);
    }
}

/// The same adapter driven by Emacs dap-mode (Debian's elpa-dap-mode, in
/// batch mode): the failing pool run stops at the crash, a stack trace,
/// stepBack to an earlier step, rewind/lanes, disconnect.
#[test]
fn emacs_dap_mode_session() {
    let home = rewind_tests::Home::new();
    let check = home.rewind(&["check", "--example", "pool", "--json"]);
    let report: serde_json::Value = serde_json::from_str(&check.stdout)
        .unwrap_or_else(|e| panic!("check --json: {e}\n{check}"));
    let run = report["narrowed"]["with"]["run"]
        .as_str()
        .unwrap_or_else(|| panic!("a narrowed failing run:\n{check}"))
        .to_string();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("dap-client/dap-mode-test.el");
    let mut cmd = Command::new("emacs");
    cmd.arg("--batch")
        .arg("-l")
        .arg(&script)
        .env("REWIND_BIN", rewind_bin())
        .env("REWIND_HOME", home.path())
        .env("RUN", &run);
    let out = run_command(cmd, Duration::from_secs(120));
    assert_eq!(
        out.code, 0,
        "emacs dap-mode (installed by scripts/setup) failed:\n{out}"
    );
    assert!(out.stdout.contains("dap-mode: ok"), "{out}");
    home.replay_identical(&run);
}
