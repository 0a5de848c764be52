//! The language server's benchmark (issue 11, "Performance"): the time from
//! a `rewind check`'s end to the diagnostic being published (goal: under
//! 1 s), inlay hints for a 1,000-line file against a long run (goal: under
//! 100 ms warm; cold is one pass over the run), and the memory the server
//! holds per indexed run (its RSS before and after). Figures are printed,
//! never asserted.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench lsp
//!
//! `REWIND_BENCH_CALLS` sets the long run's calls (default 1,000,000).

use rewind_tests::lsp::Raw;
use rewind_tests::{parse_status, run_command, Home};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Check ends timed, alternating a failing and a passing program.
const ROUNDS: usize = 6;
/// Warm inlay-hint requests; the median is printed.
const WARM: usize = 7;

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn cc(ws: &Path, src: &str, out: &str) {
    let mut c = Command::new("cc");
    c.args(["-static", "-O1", "-g", "-pthread", "-o", out, src])
        .current_dir(ws);
    let o = run_command(c, Duration::from_secs(120));
    assert_eq!(o.code, 0, "{o}");
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn start(home: &Home, ws: &Path) -> Raw {
    let mut s = Raw::start(home.path());
    let uri = format!("file://{}", ws.display());
    s.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": uri, "capabilities": {}}}));
    s.until(&[1]);
    s.send(json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    s
}

/// Waits for a publishDiagnostics of `uri` that `ok` accepts.
fn published(s: &mut Raw, uri: &str, ok: impl Fn(&Value) -> bool) -> Instant {
    loop {
        let m = s
            .next(Duration::from_secs(60))
            .expect("a diagnostic within 60 s");
        if m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == uri
            && ok(&m["params"]["diagnostics"])
        {
            return Instant::now();
        }
    }
}

fn main() {
    println!("rewind lsp benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    publish_latency();
    inlay_hints();
}

fn publish_latency() {
    let home = Home::unreplayed();
    let ws = tempfile::tempdir().unwrap();
    let bank = ws.path().join("bank.c");
    let uri = format!("file://{}", bank.display());
    let mut s = start(&home, ws.path());
    let mut lat = Vec::new();
    for round in 0..ROUNDS {
        let failing = round % 2 == 0;
        let src = if failing { "bank.c" } else { "bank-fixed.c" };
        std::fs::copy(root().join("guest/examples").join(src), &bank).unwrap();
        cc(ws.path(), "bank.c", "bank");
        let out = home.rewind(&["check", "--", ws.path().join("bank").to_str().unwrap()]);
        let ended = Instant::now();
        assert_eq!(out.code, if failing { 1 } else { 0 }, "{out}");
        let at = published(&mut s, &uri, |d| {
            d.as_array().is_some_and(|a| a.is_empty() != failing)
        });
        lat.push(at - ended);
    }
    lat.sort();
    println!(
        "check end -> diagnostics published (bank, {ROUNDS} checks, failing and passing in turn): \
         median {:.0} ms, max {:.0} ms (the store is polled every 200 ms)",
        lat[ROUNDS / 2].as_secs_f64() * 1e3,
        lat[ROUNDS - 1].as_secs_f64() * 1e3
    );
}

fn inlay_hints() {
    let calls: u64 = std::env::var("REWIND_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let home = Home::unreplayed();
    let ws = tempfile::tempdir().unwrap();
    // long.c padded to 1,000 lines.
    let mut text = std::fs::read_to_string(root().join("guest/tests/long.c")).unwrap();
    while text.lines().count() < 1000 {
        text.push_str("/* padding: a long file's lines */\n");
    }
    let file = ws.path().join("long.c");
    std::fs::write(&file, &text).unwrap();
    cc(ws.path(), "long.c", "long");
    let prog = ws.path().join("long");
    let t = Instant::now();
    let mut cmd = Command::new(rewind_tests::rewind_bin());
    cmd.args([
        "run",
        "-q",
        "--",
        prog.to_str().unwrap(),
        &calls.to_string(),
    ])
    .env("REWIND_HOME", home.path());
    let out = run_command(cmd, Duration::from_secs(3600));
    let run = parse_status(&out).unwrap_or_else(|| panic!("{out}"));
    println!(
        "long.c (1,000 lines), {calls} calls: {} steps, recorded in {:.1} s",
        run.steps.unwrap_or(0),
        t.elapsed().as_secs_f64()
    );
    let mut s = start(&home, ws.path());
    let uri = format!("file://{}", file.display());
    s.send(
        json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument":
        {"uri": uri, "languageId": "c", "version": 1, "text": text}}}),
    );
    let pid = s.child.id();
    let before = rss_kib(pid);
    let mut id = 10;
    let mut hints = |s: &mut Raw| {
        id += 1;
        s.send(json!({"jsonrpc": "2.0", "id": id, "method": "textDocument/inlayHint", "params": {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 1000, "character": 0}}}}));
        let t = Instant::now();
        let msgs = s.until(&[id]);
        let took = t.elapsed();
        let r = msgs.iter().find(|m| m["id"] == id).unwrap();
        (took, r["result"].as_array().map_or(0, Vec::len))
    };
    let (cold, n) = hints(&mut s);
    let after = rss_kib(pid);
    let mut warm: Vec<Duration> = (0..WARM).map(|_| hints(&mut s).0).collect();
    warm.sort();
    println!(
        "inlay hints, 1,000-line file, {} steps: cold {:.2} s (one pass over the run), \
         warm {:.1} ms (median of {WARM}), {n} hints",
        run.steps.unwrap_or(0),
        cold.as_secs_f64(),
        warm[WARM / 2].as_secs_f64() * 1e3
    );
    println!(
        "server memory: {before} KiB before the run was indexed, {after} KiB after: \
         {} KiB for this run ({:.1} bytes a step)",
        after.saturating_sub(before),
        after.saturating_sub(before) as f64 * 1024.0 / run.steps.unwrap_or(1).max(1) as f64
    );
}
