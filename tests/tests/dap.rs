//! `rewind dap` driven by real DAP clients: the DebugClient of
//! `@vscode/debugadapter-testsupport` under Node.js (tests/dap-client,
//! installed by scripts/setup-tests). The scenarios are in
//! tests/dap-client/dap.test.mjs; every run they make is replayed there.

use rewind_tests::dap::{debug_client, guest_source};
use rewind_tests::{rewind_bin, run_command};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn debug_client_sessions() {
    let fs_tool = rewind_tests::guest("fs-tool");
    debug_client("dap.test.mjs", &[("FS_TOOL", fs_tool.as_os_str())]);
}

/// The debug core in the adapter, by the same DebugClient: line and
/// instruction steps both ways, source, conditional, hit-count, function
/// and data breakpoints, logpoints, gotoTargets, memory, disassembly,
/// sources and modules, on `stepper` (tests/dap-client/lines.test.mjs).
#[test]
fn debug_client_lines_and_breakpoints() {
    let stepper = rewind_tests::guest("stepper");
    let source = guest_source("stepper.c");
    debug_client(
        "lines.test.mjs",
        &[
            ("STEPPER", stepper.as_os_str()),
            ("STEPPER_SOURCE", source.as_os_str()),
        ],
    );
}

/// At the step of a fatal fault: stopped where it was raised; stepBack and
/// next by statement change line (tests/dap-client/fault.test.mjs).
#[test]
fn debug_client_at_the_fault() {
    let served = rewind_tests::guest("served");
    let source = guest_source("served.c");
    debug_client(
        "fault.test.mjs",
        &[
            ("SERVED", served.as_os_str()),
            ("SERVED_SOURCE", source.as_os_str()),
        ],
    );
}

/// `rewind open` prints what opens a run in an editor; `check` and `fork`
/// print that command for what they made, and it works.
#[test]
fn open_prints_what_opens_a_run() {
    let home = rewind_tests::Home::new();
    let check = home.rewind(&["check", "--points", "syscalls", "--example", "bank"]);
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

/// The run of the two `rewind check --points syscalls --example pool`
/// narrowed between that crashed.
fn crashed_pool(home: &rewind_tests::Home) -> String {
    let check = home.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--example",
        "pool",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&check.stdout)
        .unwrap_or_else(|e| panic!("check --json: {e}\n{check}"));
    rewind_tests::killed_narrowed_run(&report)
}

/// The same adapter driven by Emacs dap-mode (Debian's elpa-dap-mode, in
/// batch mode): the failing pool run stops, its stack trace has a frame in
/// `worker` (the stop's reason is dap.test.mjs's to check), stepBack to an earlier step, rewind/lanes, disconnect.
#[test]
fn emacs_dap_mode_session() {
    let home = rewind_tests::Home::new();
    let run = crashed_pool(&home);
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
        "emacs dap-mode (installed by scripts/setup-tests) failed:\n{out}"
    );
    assert!(out.stdout.contains("dap-mode: ok"), "{out}");
    home.replay_identical(&run);
}

/// The same adapter driven by nvim-dap in headless Neovim (scripts/setup-tests
/// installs Neovim; nvim-dap's checkout comes from `$NVIM_DAP_PATH`, and
/// without it the test says it was skipped): the failing pool run at the
/// crash, a line step back, reverse-continue to a function breakpoint, to
/// a source breakpoint set in pool.c's buffer, and to a data breakpoint on
/// pool.queue where main clears it.
#[test]
fn nvim_dap_session() {
    let Some(dap_path) = std::env::var_os("NVIM_DAP_PATH") else {
        // Not required even under REWIND_REQUIRE_ALL_GUESTS: nvim-dap is on
        // no package registry, so no script of ours can install it.
        rewind_tests::skipped("set NVIM_DAP_PATH to a checkout of nvim-dap to run nvim-dap");
        return;
    };
    let nvim = std::env::var_os("REWIND_NVIM").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/neovim/bin/nvim"),
        std::path::PathBuf::from,
    );
    assert!(
        nvim.exists(),
        "{} is missing: run scripts/setup-tests",
        nvim.display()
    );
    let home = rewind_tests::Home::new();
    // System-call points: the scenario sets a data breakpoint.
    let run = crashed_pool(&home);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("dap-client/nvim-dap-test.lua");
    let mut cmd = Command::new(nvim);
    cmd.args(["--headless", "-u", "NONE", "-i", "NONE", "-l"])
        .arg(&script)
        .env("NVIM_DAP_PATH", dap_path)
        .env("REWIND_BIN", rewind_bin())
        .env("REWIND_HOME", home.path())
        .env("XDG_STATE_HOME", home.path())
        .env("XDG_CACHE_HOME", home.path())
        .env("RUN", &run);
    let out = run_command(cmd, Duration::from_secs(180));
    assert_eq!(out.code, 0, "nvim-dap failed:\n{out}");
    assert!(
        out.stdout.contains("nvim-dap: ok") || out.stderr.contains("nvim-dap: ok"),
        "{out}"
    );
    home.replay_identical(&run);
}

/// A `check` launch stops when its client leaves. The check of a program
/// with no bug plans a million schedules; once it is trying them the
/// client sends `disconnect` (which the session, busy with the launch,
/// reads only after it): the check stops before its next schedule, its
/// progress and the launch's response say it was stopped, and the adapter
/// process ends, with a small part of the schedules in the store.
#[test]
fn a_disconnect_stops_a_check_launch() {
    let home = rewind_tests::Home::new();
    let mut dap = rewind_tests::dap::Client::start(home.path());
    dap.request("initialize", json!({"adapterID": "rewind"}), false);
    let program = rewind_tests::guest("bank-fixed");
    let check = json!({"program": program, "schedules": 1_000_000, "strategy": "random",
                       "points": "syscalls", "jobs": 1});
    let launch = dap
        .send("launch", json!({"check": check}))
        .expect("write to rewind dap");
    // A schedule after schedule 0 has been tried: its update has a share done.
    let update =
        dap.wait_for(|m| m["event"] == "progressUpdate" && m["body"]["percentage"].is_number());
    assert!(update.is_some(), "the check tries schedules");
    dap.send("disconnect", json!({}))
        .expect("write to rewind dap");
    let end = dap
        .wait_for(|m| m["event"] == "progressEnd")
        .expect("the check's progress ends");
    let said = end["body"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("the check was stopped"), "{end}");
    let response = dap
        .wait_for(|m| m["type"] == "response" && m["request_seq"] == launch)
        .expect("the launch is answered");
    assert_eq!(response["success"], false, "{response}");
    assert!(
        response["message"]
            .as_str()
            .is_some_and(|m| m.contains("stopped")),
        "{response}"
    );
    let status = dap.exit_status();
    assert!(status.success(), "rewind dap ended with {status}");
    let runs = home.ok(&["ls"]).stdout.lines().count();
    assert!(
        (2..100_000).contains(&runs),
        "{runs} runs of a check of a million schedules"
    );
    home.replay_identical("@");
}
