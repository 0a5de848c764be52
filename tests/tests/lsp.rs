//! `rewind lsp` driven by a real LSP client: Neovim's own `vim.lsp`, headless
//! (tests/tools/neovim, installed by scripts/setup-tests), over a workspace holding
//! an example's source and its program compiled here with -g. The Lua
//! scenarios are in tests/lsp-client; they write what they saw as JSON, and
//! the assertions are here. Plus raw bytes over stdio: a server that gets
//! garbage says so and keeps serving.

use rewind_tests::lsp::{self, Raw};
use rewind_tests::{rewind_bin, run_command, Home};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn nvim() -> PathBuf {
    let nvim = root().join("tests/tools/neovim/bin/nvim");
    assert!(
        nvim.exists(),
        "{} is missing: run scripts/setup-tests",
        nvim.display()
    );
    nvim
}

/// Runs a Lua scenario under headless Neovim; returns what it wrote.
fn scenario(script: &str, home: &Home, ws: &Path, env: &[(&str, &str)]) -> Value {
    let out = ws.join("results.json");
    let mut cmd = Command::new(nvim());
    cmd.args(["--headless", "-u", "NONE", "-i", "NONE", "-n", "-l"])
        .arg(root().join("tests/lsp-client").join(script))
        .current_dir(ws)
        .env("REWIND_BIN", rewind_bin())
        .env("REWIND_HOME", home.path())
        .env("WS", ws)
        .env("OUT", &out);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let run = run_command(cmd, Duration::from_secs(600));
    let results = std::fs::read_to_string(&out).unwrap_or_default();
    assert_eq!(
        run.code, 0,
        "nvim {script} failed:\n{run}\nresults: {results}"
    );
    serde_json::from_str(&results)
        .unwrap_or_else(|e| panic!("{script} wrote no JSON ({e}):\n{run}"))
}

fn titles(lenses: &Value) -> Vec<String> {
    lenses
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| l["command"]["title"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn neovim_sees_the_deciding_line_opens_it_and_a_passing_check_clears_it() {
    // The workspace outlives the home: dropping the home replays runs of its program.
    let ws = lsp::workspace("examples", "bank");
    let home = Home::new();
    let fixed = root().join("guest/examples/bank-fixed.c");
    let r = scenario(
        "bank.lua",
        &home,
        ws.path(),
        &[("FIXED", fixed.to_str().unwrap())],
    );

    // Lenses above main (line 31, 0-based 30) before anything was recorded.
    assert_eq!(
        titles(&r["lenses_before"]),
        ["Record", "Check 64 schedules"],
        "{r:#}"
    );
    for l in r["lenses_before"].as_array().unwrap() {
        assert_eq!(l["range"]["start"]["line"], 30, "{l}");
        let arg = &l["command"]["arguments"][0];
        assert!(arg["program"].as_str().unwrap().ends_with("/bank"), "{l}");
    }

    // The check run in a terminal failed, and its diagnostic came without a restart.
    assert_eq!(r["terminal_check"]["code"], 1, "{r:#}");
    let stdout = r["terminal_check"]["stdout"].as_str().unwrap();
    let open_line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("open it: rewind open "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let words: Vec<&str> = open_line.split_whitespace().collect();
    let (failing, step, passing) = (words[0], words[1], words[3]);

    let diags = r["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{r:#}");
    let d = &diags[0];
    assert!(
        r["diagnostic_file"].as_str().unwrap().ends_with("/bank.c"),
        "{r:#}"
    );
    // bank.c:26, `write(1, line, n);`: where Alice was switched away.
    assert_eq!(d["lnum"], 25, "{d:#}");
    assert_eq!(d["severity"], 2, "a warning: {d:#}");
    let message = d["message"].as_str().unwrap();
    let schedule = stdout
        .lines()
        .find_map(|l| l.split_once(" violates ").map(|(s, _)| s.to_string()))
        .unwrap();
    let schedule = schedule.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        message,
        format!(
            "a reschedule after this line lets thread 1000/1002 run: the run ends exited:2 \
             instead of exited:0 (check of bank, {schedule}, step {step})"
        ),
        "{d:#}"
    );
    let lsp = &d["lsp"];
    assert_eq!(lsp["data"]["run"], failing, "{lsp:#}");
    assert_eq!(lsp["data"]["step"].to_string(), step, "{lsp:#}");
    assert_eq!(lsp["data"]["compare"], passing, "{lsp:#}");
    let related = &lsp["relatedInformation"][0];
    assert!(
        related["location"]["uri"]
            .as_str()
            .unwrap()
            .ends_with("/bank.c"),
        "{lsp:#}"
    );
    assert!(
        related["message"]
            .as_str()
            .unwrap()
            .starts_with("thread 1000/1002 runs here instead"),
        "{lsp:#}"
    );

    // The code action names rewind.open with the run, the step and the run to compare.
    let action = &r["actions"][0];
    assert_eq!(action["title"], format!("Open in debugger at step {step}"));
    assert_eq!(action["command"]["command"], "rewind.open");
    let want = serde_json::json!({"run": failing, "step": step.parse::<u64>().unwrap(), "compare": passing});
    assert_eq!(action["command"]["arguments"][0], want, "{action:#}");
    assert_eq!(
        r["opened"][0][0], want,
        "running it calls the client's rewind.open"
    );

    // After the check, the lenses open the failing run too; hover shows the step's events.
    assert_eq!(
        titles(&r["lenses_after_check"]),
        ["Record", "Check 64 schedules", "Open last failing run"]
    );
    assert_eq!(r["lenses_after_check"][2]["command"]["arguments"][0], want);
    let hover = r["hover"]["contents"]["value"].as_str().unwrap_or("");
    assert!(hover.contains("write(1, \"alice: balance 1000"), "{hover}");

    // Inlay hints: steps and threads at the end of each line a thread stood
    // on; in the failing run (rewind.selectRun), Alice's ledger write at the
    // deciding step and Bob's.
    let hint_at = |hints: &Value, line: u64| {
        hints
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["position"]["line"] == line)
            .map(|h| h["label"].as_str().unwrap().to_string())
    };
    let newest = hint_at(&r["hints_newest"], 25).unwrap_or_else(|| panic!("{r:#}"));
    assert!(newest.contains(" · 1001"), "{newest}");
    assert_eq!(r["selected"]["result"]["run"], failing, "{r:#}");
    assert_eq!(
        hint_at(&r["hints_failing"], 25).as_deref(),
        Some(format!("{step}, 40 · 1001, 1002").as_str()),
        "{r:#}"
    );
    // The hint sits at the line's end; main's joins are there too.
    let h = r["hints_failing"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["position"]["line"] == 25)
        .unwrap();
    assert_eq!(h["position"]["character"], 50, "{h}");
    assert!(hint_at(&r["hints_failing"], 37).is_some(), "{r:#}");
    let hover_main = r["hover_main"]["contents"]["value"].as_str().unwrap_or("");
    // pthread_create(&b, ...): main's calls that make Bob's thread.
    assert!(
        hover_main.contains(" · 1000**") && hover_main.contains("1000/1000  mmap("),
        "{hover_main}"
    );

    // The Check lens ran with work-done progress and cleared the diagnostic.
    assert_eq!(r["lens_check"]["result"]["exit"], 0, "{r:#}");
    let kinds: Vec<&str> = r["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["kind"].as_str())
        .collect();
    assert_eq!(kinds.first(), Some(&"begin"), "{r:#}");
    assert!(kinds.contains(&"report"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"end"), "{kinds:?}");
    assert_eq!(r["progress"][0]["title"], "rewind check bank");
    assert_eq!(r["diagnostics_after_fix"], 0);
    eprintln!(
        "lsp: diagnostic published {:.0} ms after the check ended (check: {:.0} ms)",
        r["publish_ms"].as_f64().unwrap(),
        r["check_ms"].as_f64().unwrap()
    );

    // The runs of the buggy program were replayed by the scenario before it
    // rebuilt `bank` (their image is gone now); the fixed ones are replayed
    // when `home` is dropped.
    let replays = r["replays"].as_object().unwrap();
    assert!(replays.contains_key(failing) && replays.contains_key(passing));
    for (run, rep) in replays {
        assert_eq!(rep["code"], 0, "replay {run}: {rep:#}");
        let said = format!("{}{}", rep["stdout"], rep["stderr"]);
        assert!(said.contains("identical"), "replay {run}: {said}");
        home.forget(run);
    }
}

/// Garbage on stdin and damaged store files: each is logged with
/// window/logMessage, every request still gets its answer, and `exit` ends
/// the process with status 0.
#[test]
fn malformed_messages_and_store_files_are_logged_and_the_server_keeps_serving() {
    let home = Home::new();
    let runs = home.path().join("runs/0123456789abcdef");
    std::fs::create_dir_all(&runs).unwrap();
    std::fs::write(runs.join("manifest.json"), b"\x00 not a manifest").unwrap();
    std::fs::create_dir_all(home.path().join("checks")).unwrap();
    std::fs::write(home.path().join("checks/1-x.json"), b"{\"version\": 1}").unwrap();
    home.forget("0123456789abcdef");

    let mut s = Raw::start(home.path());
    let garbage: &[&[u8]] = &[
        b"Content-Length: 5\r\n\r\n{oops",
        b"Content-Length: 9\r\n\r\n{\"bad\":1}",
        b"Content-Type: nothing\r\n\r\n",
        b"\xff\xfe\x00 garbage\r\n\r\n",
        b"Content-Length: 99999999999999999999\r\n\r\n",
        b"Content-Length: 40\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"x\"}  ",
    ];
    for g in garbage {
        s.raw(g);
    }
    let ws = tempfile::tempdir().unwrap();
    let uri = format!("file://{}", ws.path().display());
    s.send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": null, "rootUri": uri, "capabilities": {}}}),
    );
    let mut seen = s.until(&[1]);
    s.send(serde_json::json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    for g in garbage {
        s.raw(g);
    }
    // Wrong parameters, a command without its argument, an unknown method,
    // a file no run was built from.
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "textDocument/codeAction", "params": {"textDocument": 5}}));
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "workspace/executeCommand", "params": {"command": "rewind.check", "arguments": []}}));
    s.send(
        serde_json::json!({"jsonrpc": "2.0", "id": 4, "method": "rewind/nothing", "params": {}}),
    );
    let nowhere = format!("{uri}/nowhere.c");
    s.send(serde_json::json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": nowhere, "languageId": "c", "version": 1, "text": "int main(void) { return 0; }\n"}}}));
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 5, "method": "textDocument/codeLens", "params": {"textDocument": {"uri": nowhere}}}));
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 6, "method": "textDocument/hover", "params": {"textDocument": {"uri": nowhere}, "position": {"line": 0, "character": 0}}}));
    seen.extend(s.until(&[2, 3, 4, 5, 6]));
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": "shutdown"}));
    seen.extend(s.until(&[7]));
    s.send(serde_json::json!({"jsonrpc": "2.0", "method": "exit"}));
    let status = s.child.wait().unwrap();
    let mut stderr = String::new();
    s.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "exit status {status:?}:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let response = |id: u64| {
        seen.iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no response {id}: {seen:#?}"))
    };
    assert!(response(1)["result"]["capabilities"].is_object());
    assert_eq!(response(2)["error"]["code"], -32602, "invalid params");
    assert_eq!(response(3)["error"]["code"], -32602, "invalid params");
    assert_eq!(response(4)["error"]["code"], -32601, "method not found");
    assert_eq!(
        response(5)["result"],
        serde_json::json!([]),
        "no program: no lens"
    );
    assert!(response(6)["result"].is_null());
    let logs: Vec<&str> = seen
        .iter()
        .filter(|m| m["method"] == "window/logMessage")
        .filter_map(|m| m["params"]["message"].as_str())
        .collect();
    let malformed = logs
        .iter()
        .filter(|l| l.contains("ignored a malformed message"))
        .count();
    assert_eq!(malformed, 2 * garbage.len(), "{logs:#?}");
    assert!(
        logs.iter()
            .any(|l| l.contains("run 0123456789abcdef is not readable")),
        "{logs:#?}"
    );
    assert!(
        logs.iter()
            .any(|l| l.contains("checks/1-x.json is not readable")),
        "{logs:#?}"
    );
}

/// What a check of an example shows in Neovim: the diagnostics of `file`
/// once one of kind `want` came.
fn example_diagnostics(name: &str, want: &str) -> (Value, Vec<Value>) {
    example_diagnostics_in("examples", name, want, "syscalls")
}

/// `example_diagnostics` of a program of `guest/<dir>`, checked with `points`.
fn example_diagnostics_in(dir: &str, name: &str, want: &str, points: &str) -> (Value, Vec<Value>) {
    let ws = lsp::workspace(dir, name);
    let home = Home::new();
    let file = format!("{name}.c");
    let r = scenario(
        "diagnostics.lua",
        &home,
        ws.path(),
        &[
            ("FILE", &file),
            ("PROG", name),
            ("WANT", want),
            ("POINTS", points),
        ],
    );
    assert_eq!(r["check"]["code"], 1, "the check finds the bug: {r:#}");
    let diags = r["diagnostics"].as_array().unwrap().clone();
    for d in &diags {
        let data = &d["data"];
        assert!(
            data["run"].as_str().is_some_and(|r| r.len() == 16) && data["step"].is_u64(),
            "every diagnostic names its run and step: {d:#}"
        );
    }
    (r, diags)
}

fn of_kind<'a>(diags: &'a [Value], code: &str) -> Vec<&'a Value> {
    diags.iter().filter(|d| d["code"] == code).collect()
}

#[test]
fn a_crash_is_an_error_on_the_faulting_line() {
    let (r, diags) = example_diagnostics("pool", "crash");
    let crash = of_kind(&diags, "crash");
    assert_eq!(crash.len(), 1, "{r:#}");
    // pool.c:56, `cost += pool.queue[i].cost;`: the queue is gone.
    assert_eq!(crash[0]["lnum"], 55, "{r:#}");
    assert_eq!(crash[0]["severity"], 1, "an error");
    let m = crash[0]["message"].as_str().unwrap();
    assert!(
        m.contains(" dies of SIGSEGV at address 0x") && m.contains("the run ends killed:SIGSEGV"),
        "{m}"
    );
    assert_eq!(of_kind(&diags, "deciding-step").len(), 1, "{r:#}");
}

#[test]
fn with_memory_points_the_racing_accesses_are_the_deciding_steps_related_lines() {
    let (r, diags) = example_diagnostics_in("examples", "bank", "deciding-step", "memory");
    let deciding = of_kind(&diags, "deciding-step");
    assert_eq!(deciding.len(), 1, "{r:#}");
    let related: Vec<(u64, String)> = deciding[0]["related"]
        .as_array()
        .unwrap_or_else(|| panic!("no related information: {r:#}"))
        .iter()
        .filter(|x| {
            x["location"]["uri"]
                .as_str()
                .is_some_and(|u| u.ends_with("/bank.c"))
        })
        .map(|x| {
            let line = x["location"]["range"]["start"]["line"].as_u64().unwrap();
            (line + 1, x["message"].as_str().unwrap().to_string())
        })
        .collect();
    // bank.c:22 `long seen = balance;` and :27 `balance = seen + ...`.
    let has = |line: u64, what: &str| {
        related
            .iter()
            .any(|(l, m)| *l == line && m.contains(what) && m.contains(" of balance at step "))
    };
    assert!(
        has(22, "'s read") && has(22, ", before the switch"),
        "{related:#?}"
    );
    assert!(
        has(27, "'s write") && has(27, " comes in between"),
        "{related:#?}"
    );
    assert!(has(27, ", when it runs again"), "{related:#?}");
}

#[test]
fn a_deadlock_is_an_error_on_each_waiting_threads_line() {
    let (r, diags) = example_diagnostics("philosophers", "deadlock");
    let dead = of_kind(&diags, "deadlock");
    // Five philosophers wait at philosophers.c:36 (the right fork), main at 52 (join).
    let mut lines: Vec<u64> = dead
        .iter()
        .map(|d| d["lnum"].as_u64().unwrap() + 1)
        .collect();
    lines.sort();
    assert_eq!(lines, [36, 36, 36, 36, 36, 52], "{r:#}");
    for d in &dead {
        assert_eq!(d["severity"], 1);
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .contains("waits here forever: the run ends deadlocked"),
            "{d:#}"
        );
    }
}

#[test]
fn a_failed_always_is_an_error_on_its_call() {
    let (r, diags) = example_diagnostics("sdk", "sdk-always");
    let failed = of_kind(&diags, "sdk-always");
    assert!(!failed.is_empty(), "{r:#}");
    for d in &failed {
        // sdk.c:33, `always(seats_left >= 0, "no seat is sold twice");`
        assert_eq!(d["lnum"], 32, "{r:#}");
        assert!(
            d["message"]
                .as_str()
                .unwrap()
                .starts_with("always(\"no seat is sold twice\") failed"),
            "{d:#}"
        );
    }
    // The deciding step changes no exit status here: it makes the run violate the SDK property.
    let deciding = of_kind(&diags, "deciding-step");
    assert_eq!(deciding.len(), 1, "{r:#}");
    let m = deciding[0]["message"].as_str().unwrap();
    assert!(m.contains("after this line lets thread 1000/100"), "{m}");
    assert!(
        m.contains(": the run violates sdk (check of sdk, schedule "),
        "{m}"
    );
}

/// A Check lens started by a client that shows progress can be cancelled
/// with window/workDoneProgress/cancel: the check stops as at Ctrl-C, the
/// answer says so, and the store holds only whole runs. The server runs
/// with SIGINT ignored (an editor started in the background): the check it
/// starts must not inherit that, or a cancel before its handler is in
/// place is lost and the check runs to its end.
#[test]
fn a_check_run_from_a_lens_stops_when_its_progress_is_cancelled() {
    let home = Home::new();
    let ws = tempfile::tempdir().unwrap();
    let mut s = Raw::start_ignoring_sigint(home.path());
    s.initialize(
        ws.path(),
        serde_json::json!({"window": {"workDoneProgress": true}}),
    );
    let long = rewind_tests::guest_arg("long");
    s.send(serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "workspace/executeCommand",
        "params": {"command": "rewind.check", "arguments": [{"program": long, "args": ["1000000"]}]}}));
    let mut kinds = Vec::new();
    // The answer and the progress's end come on two streams: wait for both.
    let mut answer = None;
    while answer.is_none() || !kinds.iter().any(|k| k == "end") {
        let m = s
            .next(Duration::from_secs(120))
            .expect("the command ends within 120 s");
        if m["method"] == "window/workDoneProgress/create" {
            s.send(serde_json::json!({"jsonrpc": "2.0", "id": m["id"], "result": null}));
        } else if m["method"] == "$/progress" {
            let v = &m["params"]["value"];
            kinds.push(v["kind"].as_str().unwrap().to_string());
            if v["kind"] == "begin" {
                assert_eq!(v["cancellable"], true, "{m}");
                s.send(
                    serde_json::json!({"jsonrpc": "2.0", "method": "window/workDoneProgress/cancel",
                    "params": {"token": m["params"]["token"]}}),
                );
            }
            if v["kind"] == "end" {
                assert_eq!(v["message"], "cancelled", "{m}");
            }
        } else if m["id"] == 2 {
            answer = Some(m);
        }
    }
    let answer = answer.unwrap();
    let r = &answer["result"];
    assert_eq!(r["cancelled"], true, "{answer:#}");
    assert_ne!(r["exit"], 0, "{answer:#}");
    assert_eq!(kinds, ["begin", "end"], "{answer:#}");
    s.shut_down(3);
    // Only whole runs are in the store (none, or schedule 0 if it ended first).
    let ls = home.ok(&["ls", "--json"]).stdout;
    assert_eq!(ls.lines().count(), home.finished_run_dirs().len(), "{ls}");
}

/// A run that timed out (recorded before the server starts): an error on
/// the line the spinning thread was on.
#[test]
fn a_timed_out_run_is_an_error_where_the_thread_spun() {
    let ws = lsp::workspace("tests", "spin");
    let home = Home::new();
    let prog = ws.path().join("spin");
    let run = home.run(&["--timeout", "1", "--", prog.to_str().unwrap()]);
    assert_eq!(run.status, "timed-out", "{}", run.out);
    let mut s = Raw::start(home.path());
    let uri = s.initialize(ws.path(), serde_json::json!({}));
    let file = format!("{uri}/spin.c");
    let diags = loop {
        let m = s
            .next(Duration::from_secs(60))
            .expect("the diagnostics of spin.c within 60 s");
        if m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == file {
            break m["params"]["diagnostics"].clone();
        }
    };
    let d = &diags[0];
    assert_eq!(diags.as_array().unwrap().len(), 1, "{diags:#}");
    assert_eq!(d["code"], "timed-out");
    assert_eq!(d["severity"], 1);
    // spin.c:10-11, `for (;;) spins++;` in spin_forever.
    let line = d["range"]["start"]["line"].as_u64().unwrap() + 1;
    assert!(line == 10 || line == 11, "{d:#}");
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .starts_with("thread 1000/1001 was still running here when the run timed out"),
        "{d:#}"
    );
    assert_eq!(d["data"]["run"], run.id.as_str());
    s.shut_down(2);
}

#[test]
fn an_unmet_sometimes_is_a_warning_on_its_call() {
    let (r, diags) =
        example_diagnostics_in("tests", "sometimes-never", "sdk-sometimes", "syscalls");
    let stdout = r["check"]["stdout"].as_str().unwrap();
    let runs: u64 = stdout
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "sdk: sometimes(\"main sees an update half done\") held in none of the ",
            )?
            .strip_suffix(" runs")?
            .parse()
            .ok()
        })
        .unwrap_or_else(|| panic!("the check says the sometimes never held: {stdout}"));
    let unmet = of_kind(&diags, "sdk-sometimes");
    assert_eq!(unmet.len(), 1, "{r:#}");
    let d = unmet[0];
    // sometimes-never.c:31, `sometimes(seen != 0, "main sees an update half done");`
    assert_eq!(d["lnum"], 30, "{r:#}");
    assert_eq!(d["severity"], 2, "a warning: {d:#}");
    assert_eq!(
        d["message"],
        format!(
            "sometimes(\"main sees an update half done\") held in none of the {runs} runs \
             of the check of sometimes-never"
        ),
        "{d:#}"
    );
    // Nothing else: no schedule ended differently, no always failed.
    assert_eq!(diags.len(), 1, "{r:#}");
}

/// Code lenses of a Rust file built as a program and as a test harness:
/// `fn main`'s run the program, the `#[test]`'s run the harness on that
/// test alone, and running each records what it printed.
#[test]
fn rust_main_and_test_lenses_record_the_program_and_the_test() {
    let ws = lsp::rust_workspace("lenses");
    let home = Home::new();
    let mut s = Raw::start(home.path());
    let uri = s.initialize(ws.path(), serde_json::json!({}));
    let file = format!("{uri}/lenses.rs");
    let text = std::fs::read_to_string(ws.path().join("lenses.rs")).unwrap();
    s.send(serde_json::json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": file, "languageId": "rust", "version": 1, "text": text}}}));
    let lenses = s.request(
        2,
        "textDocument/codeLens",
        serde_json::json!({"textDocument": {"uri": file}}),
    )["result"]
        .clone();
    let at = |line: u64| -> Vec<Value> {
        lenses
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["range"]["start"]["line"] == line)
            .cloned()
            .collect()
    };
    // lenses.rs:9 `fn main() {` and :16 `fn adds_up() {`, 0-based; nothing else.
    let (main, test) = (at(8), at(15));
    assert_eq!(
        main.len() + test.len(),
        lenses.as_array().unwrap().len(),
        "{lenses:#}"
    );
    for (lenses, exe, args) in [
        (&main, "lenses", serde_json::json!([])),
        (
            &test,
            "lenses-test",
            serde_json::json!(["tests::adds_up", "--exact", "--test-threads=1"]),
        ),
    ] {
        assert_eq!(
            titles(&Value::from(lenses.clone())),
            ["Record", "Check 64 schedules"],
            "{lenses:#?}"
        );
        for l in lenses {
            let arg = &l["command"]["arguments"][0];
            assert_eq!(arg["program"], ws.path().join(exe).to_str().unwrap(), "{l}");
            assert_eq!(arg["args"], args, "{l}");
        }
    }
    // Record from each: the program prints its sum, the harness runs the one test.
    for (id, lens, printed) in [
        (3, &main[0], "2 + 3 = 5\n"),
        (4, &test[0], "test tests::adds_up ... ok"),
    ] {
        let command = &lens["command"];
        let done = s.request(
            id,
            "workspace/executeCommand",
            serde_json::json!({"command": command["command"], "arguments": command["arguments"]}),
        );
        assert_eq!(done["result"]["exit"], 0, "{done:#}");
        let log = home.ok(&["log", "@"]).stdout;
        assert!(log.contains(printed), "{printed:?} in:\n{log}");
    }
    assert!(home.ok(&["log", "@"]).stdout.contains("1 passed; 0 failed"));
    s.shut_down(5);
}
