//! The VS Code extension (vscode-extension/) tested as a person uses it:
//! its Timeline webview alone in headless Chromium (fed what `rewind dap`
//! sends), then the built .vsix installed in a real code-server driven by
//! Debian's Chromium through playwright-core, over a workspace holding bank.c
//! and its program built there (so the extension's `rewind lsp` puts what
//! the check found in the Problems panel). scripts/setup-editors installs
//! code-server, Node.js 24 and Chromium; the scenarios are in
//! vscode-extension/test/*.test.mjs. Screenshots of each state are kept in
//! target/vscode/. Every run the sessions record is replayed when the home
//! is dropped.

use rewind_tests::{guest_arg, lsp, rewind_bin, run_command, Home};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The extension's directory and the test tools' (code-server, Node.js 24),
/// after checking that what the scenarios need is installed.
fn editor_tools() -> (std::path::PathBuf, std::path::PathBuf) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ext = repo.join("vscode-extension");
    let tools = repo.join("tests/tools");
    for need in [
        ext.join("node_modules/playwright-core"),
        tools.join("code-server"),
        tools.join("node24/node"),
        Path::new("/usr/bin/chromium").to_path_buf(),
    ] {
        assert!(
            need.exists(),
            "{} is missing: run scripts/setup-tests",
            need.display()
        );
    }
    (ext, tools)
}

/// Where the scenarios keep their screenshots.
fn artifacts() -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/vscode");
    std::fs::create_dir_all(&dir).expect("target/vscode");
    dir
}

#[test]
fn extension_in_code_server_and_chromium() {
    let (ext, tools) = editor_tools();
    let artifacts = artifacts();
    // The webview test loads dist/ as built from this checkout: a fresh
    // clone has no dist/, and an old one would test stale code.
    let mut build = Command::new("npm");
    build.args(["run", "--silent", "build"]).current_dir(&ext);
    let built = run_command(build, Duration::from_secs(300));
    assert_eq!(built.code, 0, "npm run build failed:\n{built}");
    // The workspace holds bank.c and its program built there with -g, so
    // `rewind lsp` (started by the extension) finds the runs of its program.
    // It outlives the homes: dropping them replays runs of its program.
    let ws = lsp::workspace("examples", "bank");
    // A run recorded in another store, exported into the workspace: opening
    // the .rwd in the editor imports it.
    let other = Home::new();
    let carried = other.run_guest("write-twice", &[]);
    let rwd = ws.path().join("write-twice.rwd");
    other.ok(&[
        "export",
        &carried.id,
        "--replayable",
        "-o",
        rwd.to_str().expect("a UTF-8 path"),
    ]);
    let home = Home::new();
    let mut cmd = Command::new("node");
    cmd.args([
        "--test",
        "--test-reporter=tap",
        "--test-concurrency=1",
        "test/timeline.test.mjs",
        "test/vscode.test.mjs",
        // Workspace trust (issue 25): a cloned workspace naming its own
        // rewind.path opens restricted and starts nothing; once trusted the
        // machine's rewind.path runs, never the workspace's.
        "test/trust.test.mjs",
    ])
    .current_dir(&ext)
    .env("REWIND_BIN", rewind_bin())
    .env("REWIND_HOME", home.path())
    // The webview test's runs: the example as the guest build made it.
    .env("REWIND_TEST_PROGRAM", guest_arg("bank"))
    .env("REWIND_TEST_WORKSPACE", ws.path())
    .env("REWIND_TEST_RWD", &rwd)
    .env("REWIND_TEST_RWD_RUN", &carried.id)
    .env("REWIND_ARTIFACTS", &artifacts)
    .env("CODE_SERVER", tools.join("code-server"))
    .env("NODE24_BIN", tools.join("node24"));
    let out = run_command(cmd, Duration::from_secs(900));
    for line in out.stdout.lines().filter(|l| l.contains("figures:")) {
        eprintln!("{line}");
    }
    if out.code != 0 {
        // Which runs the store has left: a test that finds one gone says why.
        eprintln!(
            "the store's runs after the failure:\n{}",
            home.rewind(&["ls"])
        );
    }
    out.assert_tap_passed("node --test");
    for shot in [
        "code-server-6-compare-view.png",
        "code-server-7-problems-panel.png",
        "code-server-12-rwd-imported.png",
    ] {
        assert!(artifacts.join(shot).exists(), "{shot}");
    }
}
