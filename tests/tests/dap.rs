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
