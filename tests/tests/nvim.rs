//! The Neovim plugin (nvim-plugin/) under headless Neovim 0.11
//! (tests/tools/neovim, from scripts/setup-tests): it loads and defines its
//! commands, `:help rewind` opens its help, `:checkhealth rewind` reports no
//! error and its runs are `rewind ls`'s; its language-server side
//! (`require('rewind').lsp()` with vim.lsp, `:RewindCheck` without a
//! session, the code action, `:RewindRuns`) needs no nvim-dap and always
//! runs; with an nvim-dap checkout in $NVIM_DAP_PATH, `:RewindOpen` on the
//! failing run of bank stops at the deciding step, `:RewindLanes` draws
//! both runs' lanes, `:RewindGoto` moves the session, `:RewindCompare`
//! shows the first difference `rewind diff` finds, `:RewindCheck` checks
//! from there, `:RewindBookmark` and `:RewindFork` keep a bookmark and a
//! fork in the store, and the code action opens a session (without one,
//! the test says it skipped that). The runs are replayed when the home
//! drops.

use rewind_tests::{lsp, rewind_bin, run_command, Home};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn nvim() -> std::path::PathBuf {
    let nvim = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/neovim/bin/nvim");
    assert!(
        nvim.exists(),
        "{} is missing: run scripts/setup-tests",
        nvim.display()
    );
    nvim
}

fn dap_checkout() -> Option<std::ffi::OsString> {
    std::env::var_os("NVIM_DAP_PATH").filter(|p| !p.is_empty())
}

#[test]
fn lsp_side_in_headless_neovim() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // The workspace outlives the home: dropping the home replays runs of its program.
    let ws = lsp::workspace("examples", "bank");
    let home = Home::new();
    let mut cmd = Command::new(nvim());
    cmd.args(["--headless", "-u", "NONE", "-i", "NONE", "-n", "-l"])
        .arg(repo.join("nvim-plugin/test/lsp_test.lua"))
        .current_dir(ws.path())
        .env("REWIND_PLUGIN", repo.join("nvim-plugin"))
        .env("REWIND_BIN", rewind_bin())
        .env("REWIND_HOME", home.path())
        .env("WS", ws.path());
    let out = run_command(cmd, Duration::from_secs(900));
    assert_eq!(out.code, 0, "{out}");
    let said = said(&out);
    for want in [
        "ok: rewind lsp attached to bank.c",
        "ok: RewindCheck put bank.c:",
        "ok: the code action opened run ",
        "ok: RewindRuns offered ",
    ] {
        assert!(said.contains(want), "{want}:\n{out}");
    }
    match dap_checkout() {
        None => assert!(said.contains("skipped: NVIM_DAP_PATH"), "{out}"),
        Some(_) => assert!(
            said.contains("ok: the code action opened a debug session stopped at step"),
            "{out}"
        ),
    }
}

#[test]
fn plugin_in_headless_neovim() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let nvim = nvim();
    let home = Home::new();
    let check = home.rewind(&["check", "--example", "bank"]);
    assert_eq!(check.code, 1, "{check}");
    let line = check
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("open it: rewind open "))
        .unwrap_or_else(|| panic!("{check}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    let (run, step, compare) = (w[0], w[1], w[3]);
    let mut cmd = Command::new(&nvim);
    cmd.args(["--headless", "-u", "NONE", "-i", "NONE", "-n", "-l"])
        .arg(repo.join("nvim-plugin/test/rewind_test.lua"))
        .env("REWIND_PLUGIN", repo.join("nvim-plugin"))
        .env("REWIND_BIN", rewind_bin())
        .env("REWIND_HOME", home.path())
        .env("REWIND_RUN", run)
        .env("REWIND_STEP", step)
        .env("REWIND_COMPARE", compare);
    let out = run_command(cmd, Duration::from_secs(180));
    assert_eq!(out.code, 0, "{out}");
    let said = said(&out);
    let mut want = vec![
        "ok: :help rewind opens rewind.txt at *rewind*",
        "ok: the runs are rewind ls's ",
    ];
    match dap_checkout() {
        None => want.extend([
            "ok: checkhealth rewind has no error without nvim-dap",
            "skipped: NVIM_DAP_PATH is not set",
        ]),
        Some(_) => want.extend([
            "ok: the adapter and the c, cpp and rust configurations are registered; \
             checkhealth rewind has no error",
            "ok: RewindOpen stopped at step ",
            "ok: RewindCompare shows the first difference at event ",
            "ok: RewindCheck from step 10: ",
            "ok: RewindBookmark kept ",
            "ok: RewindFork goes on at step 10 in ",
            "ok: RewindRuns opened ",
        ]),
    }
    for w in want {
        assert!(said.contains(w), "{w}:\n{out}");
    }
    if dap_checkout().is_some() {
        assert!(said.contains('█'), "the lanes are drawn:\n{out}");
    }
}

/// What a scenario said: its `ok:` lines go to the test's (captured)
/// output, its `skipped:` lines where `cargo test` shows them.
fn said(out: &rewind_tests::Output) -> String {
    let said = format!("{}{}", out.stdout, out.stderr);
    for l in said.lines() {
        if let Some(why) = l.strip_prefix("skipped: ") {
            rewind_tests::skipped(why);
        } else if l.starts_with("ok:") {
            eprintln!("{l}");
        }
    }
    said
}
