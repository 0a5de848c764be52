//! Many clients at once (issue 25): one `rewind dap --port` server, 8
//! clients that present its token, and a `rewind lsp`, for a bounded time
//! (`REWIND_SOAK_SECS`, default 45), while `rewind gc` runs beside them.
//! Each client launches or attaches, steps both ways, forks, checks, and
//! leaves at a seeded random point (`REWIND_SOAK_SEED`): politely, with a
//! request under way, before its launch (a recording or a check launch)
//! has answered, or by dropping the connection. Afterwards the server
//! is alive, its snapshots never held more than its one budget, its memory
//! stayed under a bound, the store has nothing half-written, and every run
//! the clients made replays identically.

use rewind_tests::dap::{Client, Server};
use rewind_tests::{lsp, rewind_bin, run_command, Home, DEADLINE};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: u64 = 8;
/// The server's `--snapshot-memory`, MiB: small, so that the sessions
/// together press on it.
const SNAPSHOT_MIB: u64 = 4;
/// What the server may hold besides the snapshots: its own heap, and per
/// session a machine (the guest's pages it touched, its kernel state) and
/// a check's or fork's machine beside it. Measured at 80 to 94 MiB in all
/// (seeds 1 and 2, 30 s, debug build); the bound leaves room for slack.
const BASE_MIB: u64 = 64;
const PER_SESSION_MIB: u64 = 16;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64: a client's seeded choices.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// What one client did.
#[derive(Default, Debug)]
struct Tally {
    sessions: u64,
    requests: u64,
    launches: u64,
    attaches: u64,
    forks: u64,
    checks: u64,
    /// Left with a request under way, or without `disconnect`.
    mid_request: u64,
    /// Left before the response to its `launch` (a recording, or a check
    /// launch's schedules), and how many of those were check launches.
    mid_launch: u64,
    mid_check_launch: u64,
    hung_up: u64,
    /// Requests refused (moves past either end of a run): the message of each.
    refused: Vec<String>,
}

struct Soak {
    port: u16,
    token: String,
    program: PathBuf,
    until: Instant,
}

/// One client's sessions until the soak's time is up.
fn client(soak: &Soak, seed: u64) -> Tally {
    let mut rng = Rng(seed);
    let mut t = Tally::default();
    while Instant::now() < soak.until {
        let mut c = Client::connect(soak.port, &soak.token).expect("connect to the server");
        t.sessions += 1;
        c.request("initialize", json!({"adapterID": "rewind"}), false);
        if rng.below(5) == 0 {
            leave_mid_launch(c, soak, &mut rng, &mut t);
            continue;
        }
        let runs = c.request("rewind/runs", json!({"limit": 20}), false);
        let runs = runs["runs"].as_array().cloned().unwrap_or_default();
        let launch = if runs.is_empty() || rng.below(2) == 0 {
            t.launches += 1;
            json!({"program": soak.program})
        } else {
            t.attaches += 1;
            let run = &runs[rng.below(runs.len() as u64) as usize]["id"];
            json!({"run": run})
        };
        c.send("launch", launch).expect("send launch");
        c.request("configurationDone", json!({}), true);
        t.requests += 4;
        for _ in 0..1 + rng.below(8) {
            act(&mut c, &mut rng, &mut t);
        }
        match rng.below(3) {
            0 => drop(c), // `disconnect`
            1 => {
                let (command, args) = match rng.below(3) {
                    0 => ("rewind/check", json!({"schedules": 3})),
                    1 => ("rewind/fork", json!({"open": true})),
                    _ => ("next", json!({"threadId": c.tid})),
                };
                let _ = c.send(command, args);
                std::thread::sleep(Duration::from_millis(rng.below(300)));
                t.mid_request += 1;
                c.hang_up();
            }
            _ => {
                t.hung_up += 1;
                c.hang_up();
            }
        }
    }
    t
}

/// Launches (recording the program, or checking it first) and hangs up
/// after up to 0.4 s, counted as mid-launch when no response had come.
fn leave_mid_launch(mut c: Client, soak: &Soak, rng: &mut Rng, t: &mut Tally) {
    let check = rng.below(2) == 0;
    let launch = if check {
        json!({"program": soak.program, "check": {"schedules": 2}})
    } else {
        json!({"program": soak.program})
    };
    let seq = c.send("launch", launch).expect("send launch");
    let _ = c.send("configurationDone", json!({}));
    t.requests += 3;
    std::thread::sleep(Duration::from_millis(rng.below(400)));
    if !c.answered(seq) {
        t.mid_launch += 1;
        t.mid_check_launch += u64::from(check);
    }
    c.hang_up();
}

/// One random request of a session at a stop.
fn act(c: &mut Client, rng: &mut Rng, t: &mut Tally) {
    t.requests += 1;
    let tid = json!({"threadId": c.tid});
    let moves = [
        "next",
        "stepIn",
        "stepBack",
        "rewind/reverseStepIn",
        "continue",
        "reverseContinue",
    ];
    match rng.below(10) {
        m @ 0..=5 => {
            if let Err(e) = c.try_request(moves[m as usize], tid, true) {
                t.refused.push(format!("{}: {e}", moves[m as usize]));
            }
        }
        6 => {
            let frames = c.request("stackTrace", tid, false);
            assert!(frames["stackFrames"].is_array(), "{frames}");
        }
        7 => {
            let open = rng.below(2) == 0;
            match c.try_request("rewind/fork", json!({"open": open}), open) {
                Ok(f) => {
                    assert!(f["run"].is_string(), "{f}");
                    t.forks += 1;
                }
                Err(e) => t.refused.push(format!("rewind/fork: {e}")),
            }
        }
        _ => match c.try_request("rewind/check", json!({"schedules": 2}), false) {
            Ok(r) => {
                assert!(r["results"].is_array(), "{r}");
                t.checks += 1;
            }
            Err(e) => t.refused.push(format!("rewind/check: {e}")),
        },
    }
}

/// `rewind lsp` on the workspace of the program the clients record: code
/// lenses of its source asked again and again as runs come and go. How
/// many it answered.
fn language_server(home: &Path, ws: &Path, until: Instant) -> u64 {
    let mut s = lsp::Raw::start(home);
    s.initialize(ws, json!({}));
    let file = format!("file://{}", ws.join("bank.c").display());
    let text = std::fs::read_to_string(ws.join("bank.c")).expect("bank.c");
    s.send(json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
        "params": {"textDocument": {"uri": file, "languageId": "c", "version": 1, "text": text}}}));
    let mut id: u64 = 1;
    while Instant::now() < until {
        id += 1;
        let r = s.request(
            id,
            "textDocument/codeLens",
            json!({"textDocument": {"uri": file}}),
        );
        assert!(r.get("error").is_none(), "codeLens: {r}");
        std::thread::sleep(Duration::from_millis(500));
    }
    s.shut_down(id + 1);
    id - 1
}

/// `rewind gc --json` again and again; how many times it ran.
fn collector(home: &Path, until: Instant) -> u64 {
    let mut n = 0;
    while Instant::now() < until {
        let mut gc = Command::new(rewind_bin());
        gc.args(["gc", "--json"]).env("REWIND_HOME", home);
        let out = run_command(gc, DEADLINE);
        assert_eq!(out.code, 0, "rewind gc beside the sessions:\n{out}");
        n += 1;
        std::thread::sleep(Duration::from_millis(700));
    }
    n
}

/// A field of /proc/PID/status, in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The server's session threads still alive.
fn sessions_alive(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "dap-session")
        })
        .count()
}

/// The largest `process snapshots X of Y MiB` in the profile lines, and Y.
fn snapshot_peak(lines: &[String]) -> (f64, f64) {
    let mut peak = (0.0f64, 0.0f64);
    for l in lines {
        let Some(rest) = l.split("process snapshots ").nth(1) else {
            continue;
        };
        let nums: Vec<f64> = rest.split(" ").filter_map(|w| w.parse().ok()).collect();
        if let [used, budget, ..] = nums[..] {
            peak = (peak.0.max(used), budget);
        }
    }
    peak
}

#[test]
fn eight_clients_a_language_server_and_gc_share_one_server() {
    let secs = env_u64("REWIND_SOAK_SECS", 45);
    let seed = env_u64("REWIND_SOAK_SEED", 1);
    let ws = lsp::workspace("examples", "bank");
    let home = Home::new();
    let runtime = tempfile::tempdir().expect("a runtime directory");
    let mib = SNAPSHOT_MIB.to_string();
    let (mut server, listening) = Server::start_env(
        &home,
        runtime.path(),
        &["--port", "0", "--snapshot-memory", &mib],
        &[("REWIND_DAP_PROFILE", "1")],
    );
    let port = rewind_tests::dap::port_of(&listening);
    let token_file = runtime.path().join(format!("rewind/dap-{port}.token"));
    let soak = Arc::new(Soak {
        port,
        token: std::fs::read_to_string(token_file).expect("the token"),
        program: ws.path().join("bank"),
        until: Instant::now() + Duration::from_secs(secs),
    });
    let pid = server.child.id();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(Ordering::SeqCst) {
                peak = peak.max(status_kib(pid, "VmRSS:"));
                std::thread::sleep(Duration::from_millis(100));
            }
            peak
        })
    };
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let soak = soak.clone();
            std::thread::spawn(move || client(&soak, seed.wrapping_mul(1000) + i))
        })
        .collect();
    let (h, until) = (home.path().to_path_buf(), soak.until);
    let gc = std::thread::spawn(move || collector(&h, until));
    let lenses = language_server(home.path(), ws.path(), soak.until);
    let tallies: Vec<Tally> = clients
        .into_iter()
        .map(|c| c.join().expect("a client failed (its message is above)"))
        .collect();
    let gcs = gc.join().expect("gc failed beside the sessions");

    // Sessions left mid-request end after the request they were serving.
    let t = Instant::now();
    while sessions_alive(pid) > 0 {
        assert!(
            t.elapsed() < DEADLINE,
            "sessions still alive after their clients left"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    done.store(true, Ordering::SeqCst);
    let peak_rss = sampler.join().unwrap().max(status_kib(pid, "VmHWM:")) / 1024;
    let log = server.lines_so_far();
    assert!(
        matches!(server.child.try_wait(), Ok(None)),
        "the server died: {}",
        log.iter()
            .rev()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Nothing half-written: no entry being written, and gc finds none.
    let dots: Vec<String> = std::fs::read_dir(home.path().join("runs"))
        .expect("runs/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(dots.is_empty(), "half-written runs: {dots:?}");
    let gc: Value = serde_json::from_str(&home.ok(&["gc", "--json"]).stdout).expect("gc's JSON");
    assert_eq!(gc["leftovers_removed"], 0, "{gc}");
    drop(server);

    let sum = |f: fn(&Tally) -> u64| tallies.iter().map(f).sum::<u64>();
    let served = log
        .iter()
        .filter(|l| l.starts_with("rewind dap profile:"))
        .count();
    let (snap_peak, snap_budget) = snapshot_peak(&log);
    let runs = home.unreplayed_runs().len();
    let refused: Vec<&String> = tallies.iter().flat_map(|t| &t.refused).collect();
    eprintln!(
        "soak: {secs} s, seed {seed}, load {}: {} sessions ({} launches, {} attaches, {} forks, \
         {} checks, {} left mid-launch ({} of them check launches), {} left mid-request, \
         {} hung up), {} requests sent, {served} served, \
         {lenses} code lens requests, {gcs} gc runs; peak RSS {peak_rss} MiB; snapshots peak \
         {snap_peak:.1} of {snap_budget:.1} MiB; {runs} runs to replay; {} moves refused",
        rewind_tests::load_average(),
        sum(|t| t.sessions),
        sum(|t| t.launches),
        sum(|t| t.attaches),
        sum(|t| t.forks),
        sum(|t| t.checks),
        sum(|t| t.mid_launch),
        sum(|t| t.mid_check_launch),
        sum(|t| t.mid_request),
        sum(|t| t.hung_up),
        sum(|t| t.requests),
        refused.len(),
    );
    let mut kinds: Vec<String> = refused
        .iter()
        .map(|r| r.chars().take(70).collect())
        .collect();
    kinds.sort();
    kinds.dedup();
    eprintln!("soak: moves refused, by kind: {kinds:#?}");
    for r in &refused {
        assert!(
            r.ends_with("nothing after it") || r.ends_with("nothing before it"),
            "a request was refused for another reason than an end of its run: {r}"
        );
    }
    assert!(sum(|t| t.sessions) >= CLIENTS, "{tallies:?}");
    assert!(sum(|t| t.forks) > 0 && sum(|t| t.checks) > 0, "{tallies:?}");
    assert!(
        sum(|t| t.mid_launch) > 0,
        "no client left before its launch's response: {tallies:?}"
    );
    assert!(served > 0, "no profile lines: {log:?}");
    assert_eq!(
        snap_budget, SNAPSHOT_MIB as f64,
        "the server's snapshot budget"
    );
    assert!(
        snap_peak <= snap_budget,
        "the sessions' snapshots held {snap_peak} MiB, over the process's {snap_budget} MiB"
    );
    let bound = SNAPSHOT_MIB + BASE_MIB + CLIENTS * PER_SESSION_MIB;
    assert!(
        peak_rss <= bound,
        "the server's peak RSS was {peak_rss} MiB, over {bound} MiB"
    );
    // Every run the clients made replays identically when `home` drops.
}
