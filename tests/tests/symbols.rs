//! Symbols and sources: `rewind where` names the user's own frame at the
//! right line with the source shown, skips the C library and Rust std, and
//! reports name source lines. Every recorded run also replays identically.

use rewind_tests::{failing_run_in, Home};
use serde_json::Value;
use std::path::Path;

/// The 1-based line of `file` (under the repository) holding `needle`.
fn line_of(file: &str, needle: &str) -> u32 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} is not in {file}")) as u32
        + 1
}

/// The narrowed failing run of `rewind check --example NAME`.
fn failing_run(h: &Home, example: &str) -> String {
    let (out, v) = h.check_json(&["--points", "syscalls", "--example", example]);
    assert_eq!(out.code, 1, "{out}");
    v["narrowed"]["failing"].as_str().unwrap().to_string()
}

fn where_json(h: &Home, args: &[&str]) -> Value {
    let mut all = vec!["where", "--json"];
    all.extend_from_slice(args);
    let out = h.ok(&all);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The chosen frame of `where --json`, checking that exactly one is.
fn chosen(v: &Value) -> &Value {
    let frames = v["frames"].as_array().unwrap();
    let chosen: Vec<&Value> = frames.iter().filter(|f| f["chosen"] == true).collect();
    assert_eq!(chosen.len(), 1, "{v:#}");
    assert_eq!(
        &frames[v["chosen"].as_u64().unwrap() as usize],
        chosen[0],
        "{v:#}"
    );
    chosen[0]
}

#[test]
fn where_at_the_pool_crash_names_the_worker_line_and_mains_join() {
    let h = Home::new();
    let run = failing_run(&h, "pool");
    h.replay_identical(&run);
    let events = h.events_json(&run);
    let crash = events
        .iter()
        .find(|e| e["kind"] == "signal" && e["signo"] == 11)
        .unwrap_or_else(|| panic!("no SIGSEGV in {events:?}"));
    let step = crash["step"].as_u64().unwrap().to_string();
    let tid = crash["tid"].as_u64().unwrap();
    let pid = crash["pid"].as_u64().unwrap();

    let count = line_of("guest/examples/pool.c", "cost += pool.queue[i].cost;");
    let out = h.ok(&["where", &run, &step]);
    assert!(
        out.stdout.contains(&format!("at  worker (pool.c:{count})")),
        "{out}"
    );
    let marked = format!(">  {count:>4} |             cost += pool.queue[i].cost;");
    assert!(out.stdout.contains(&marked), "no marked source line: {out}");
    assert!(out.stdout.contains("called from start_thread"), "{out}");

    let v = where_json(&h, &[&run, &step]);
    assert_eq!(v["tid"], tid, "the step's own thread by default: {v:#}");
    let f = chosen(&v);
    assert_eq!(f["function"], "worker", "{v:#}");
    assert_eq!(f["location"]["line"], count, "{v:#}");
    assert!(f["own"] == true, "{v:#}");
    assert_eq!(v["source"]["line"], count, "{v:#}");
    assert!(
        v["source"]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["line"] == count
                && l["text"].as_str().unwrap().contains("pool.queue[i].cost")),
        "{v:#}"
    );

    // The main thread, at the same step, waits in pthread_join: the join in main.
    let join = line_of("guest/examples/pool.c", "pthread_join(t[i], NULL);");
    let main_tid = pid.to_string();
    let v = where_json(&h, &[&run, &step, "--tid", &main_tid]);
    let f = chosen(&v);
    assert_eq!(f["function"], "main", "{v:#}");
    assert_eq!(f["location"]["line"], join, "{v:#}");
    let frames = v["frames"].as_array().unwrap();
    let c = v["chosen"].as_u64().unwrap() as usize;
    assert!(c > 0, "the C library's frames are below main: {v:#}");
    assert!(frames[..c].iter().all(|f| f["own"] == false), "{v:#}");

    // Hostile input: a step past the end, a thread that does not exist.
    let out = h.rewind(&["where", &run, "999999"]);
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(out.stderr.lines().count(), 1, "{out}");
    let out = h.rewind(&["where", &run, &step, "--tid", "4242"]);
    assert_eq!(out.code, 2, "{out}");
    assert!(out.stderr.contains("no thread 4242"), "{out}");
}

#[test]
fn where_in_a_rust_program_skips_std_and_names_the_users_closure() {
    let h = Home::new();
    let run = h.run_guest("threads-rust", &[]);
    assert_eq!(run.status, "exited:4", "{}", run.out);
    h.replay_identical(&run.id);
    // A worker's futex wake from inside `tx.send` (std's channel).
    let events = h.events_json(&run.id);
    let wake = events
        .iter()
        .find(|e| {
            let s = e.to_string();
            s.contains("FUTEX_WAKE") && e["tid"] != e["pid"]
        })
        .unwrap_or_else(|| panic!("no futex wake by a worker: {events:?}"));
    let step = wake["step"].as_u64().unwrap().to_string();
    let v = where_json(&h, &[&run.id, &step]);
    let f = chosen(&v);
    let function = f["function"].as_str().unwrap();
    assert!(function.starts_with("threads::main::"), "{v:#}");
    assert!(
        f["location"]["file"]
            .as_str()
            .unwrap()
            .ends_with("guest/tests/threads.rs"),
        "{v:#}"
    );
    let frames = v["frames"].as_array().unwrap();
    let c = v["chosen"].as_u64().unwrap() as usize;
    assert!(
        frames[..c]
            .iter()
            .any(|f| f["function"].as_str().unwrap_or("").starts_with("std::")),
        "std's frames were skipped, not missing: {v:#}"
    );
    assert!(frames[..c].iter().all(|f| f["own"] == false), "{v:#}");
}

#[test]
fn the_deadlock_report_of_philosophers_names_source_lines() {
    let h = Home::new();
    let run = failing_run(&h, "philosophers");
    // Make it again as `rewind show` says, to see its report.
    let made = h.run_as_shown(&run);
    assert_eq!(made.status, "deadlocked", "{}", made.out);
    let take = line_of(
        "guest/examples/philosophers.c",
        "pthread_mutex_lock(&forks[right]);",
    );
    let stuck: Vec<&str> = made
        .out
        .stderr_lines()
        .into_iter()
        .filter(|l| l.contains("__lll_lock_wait"))
        .collect();
    assert!(stuck.len() >= 2, "{}", made.out);
    for l in stuck {
        assert!(
            l.contains(&format!("from philosopher (philosophers.c:{take})")),
            "{l}"
        );
    }
    h.replay_identical(&run);
}

#[test]
fn the_narrowing_sentence_and_check_where_name_source_lines() {
    let h = Home::new();
    let out = h.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--example",
        "bank",
        "--where",
    ]);
    assert_eq!(out.code, 1, "{out}");
    let ledger = line_of(
        "guest/examples/bank.c",
        "write(1, line, n);            /* the ledger */",
    );
    let sentence = out
        .stdout
        .lines()
        .find(|l| l.contains("decides it"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        sentence.contains(&format!("in teller (bank.c:{ledger})")),
        "{sentence}"
    );
    // Syscall points record no accesses: no interleaving is told.
    assert!(!out.stdout.contains("the interleaving:"), "{out}");
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains(": running, at ")
                && l.contains(&format!("teller (bank.c:{ledger})"))),
        "{out}"
    );
    h.replay_identical(&failing_run_in(&out));
}

#[test]
fn where_inside_a_signal_handler_goes_through_the_signal_frame() {
    let h = Home::new();
    let run = h.run_guest("signal-handler", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    h.replay_identical(&run.id);
    // The handler's sigprocmask, right after SIGUSR1 was delivered.
    let events = h.events_json(&run.id);
    let usr1 = events
        .iter()
        .position(|e| e["kind"] == "signal" && e["signo"] == 10)
        .unwrap_or_else(|| panic!("no SIGUSR1: {events:?}"));
    let step = events[usr1 + 1]["step"].as_u64().unwrap().to_string();
    let v = where_json(&h, &[&run.id, &step]);
    assert_eq!(chosen(&v)["function"], "on_usr1", "{v:#}");
    let frames = v["frames"].as_array().unwrap();
    let tramp = frames
        .iter()
        .position(|f| f["signal_trampoline"] == true)
        .unwrap_or_else(|| panic!("no signal frame: {v:#}"));
    // Above it, the code the signal interrupted, down to main.
    assert!(
        frames[tramp + 1..].iter().any(|f| f["function"] == "main"),
        "{v:#}"
    );
}

/// A program whose DWARF 5 line table records its source's MD5, built
/// here: gcc leaves the checksum out, so the assembly's `.file` lines get
/// it (`md5 0x...`) before gas builds the table, in the bytes' order clang
/// writes.
fn build_with_md5(src: &std::path::Path) -> std::path::PathBuf {
    let dir = src.parent().unwrap();
    let asm = dir.join("prog.s");
    let cc = |args: &[&std::ffi::OsStr]| rewind_tests::tool("cc", args);
    cc(&[
        "-g".as_ref(),
        "-gdwarf-5".as_ref(),
        "-O0".as_ref(),
        "-S".as_ref(),
        src.as_os_str(),
        "-o".as_ref(),
        asm.as_os_str(),
    ]);
    let out = std::process::Command::new("md5sum")
        .arg(src)
        .output()
        .unwrap();
    let sum = String::from_utf8(out.stdout).unwrap();
    // gas stores the number little-endian; DWARF's MD5 is the digest's
    // bytes in order (as clang writes them): give it reversed.
    let digest = sum.split_whitespace().next().unwrap();
    let sum: String = (0..16).rev().map(|i| &digest[2 * i..2 * i + 2]).collect();
    // `"prog.c"` or `"/tmp/.../prog.c"`.
    let name = format!("{}\"", src.file_name().unwrap().to_str().unwrap());
    let text: String = std::fs::read_to_string(&asm)
        .unwrap()
        .lines()
        .map(|l| {
            let t = l.trim_start();
            let numbered = t.starts_with(".file 0 ") || t.starts_with(".file 1 ");
            if numbered && t.ends_with(&name) {
                format!("{l} md5 0x{sum}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(
        text.contains(" md5 0x"),
        "no .file line for the source:\n{text}"
    );
    std::fs::write(&asm, text).unwrap();
    let exe = dir.join("prog");
    cc(&[
        "-static".as_ref(),
        asm.as_os_str(),
        "-o".as_ref(),
        exe.as_os_str(),
    ]);
    exe
}

/// The source `where` shows is checked by the MD5 the debug info records:
/// the host file is shown when it matches, and refused, saying why, once
/// it changed (the same size and lines, another text).
#[test]
fn where_checks_the_source_by_the_debug_infos_md5() {
    const PROG: &str = rewind_tests::MARK_PROGRAM;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("prog.c");
    std::fs::write(&src, PROG).unwrap();
    let exe = build_with_md5(&src);
    let h = Home::new();
    let run = h.run(&["--", exe.to_str().unwrap()]);
    assert_eq!(run.status, "exited:0", "{}", run.line);
    let step = h.first_call(&run.id, "write").to_string();
    let out = h.ok(&["where", &run.id, &step]);
    assert!(out.stdout.contains("at  work (prog.c:5)"), "{out}");
    assert!(
        out.stdout
            .contains(">     5 |     write(1, \"mark\\n\", 5);"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("on this host (its MD5 matches the debug info)"),
        "{out}"
    );

    std::fs::write(&src, PROG.replace("mark", "MARK")).unwrap();
    let out = h.ok(&["where", &run.id, &step]);
    assert!(out.stdout.contains("at  work (prog.c:5)"), "{out}");
    assert!(
        !out.stdout.contains("MARK"),
        "a changed file was shown: {out}"
    );
    assert!(
        out.stdout
            .contains("on this host: its MD5 differs from the debug info's"),
        "{out}"
    );
}

/// Every ELF file a process maps is symbolized, through its own address
/// space: in `where-procs` the parent forks and waits, the child execs the
/// program again and writes. Dynamically linked, the write is in the C
/// library the loader mapped (named, not own code) called from
/// `child_writes` at its line; and `--tid` of the parent, whose memory the
/// exec'd child does not share, names the wait in `parent_waits`. The
/// static build must say the same of the user's frames. The dynamic one's
/// child first makes 21,000 calls: `where` starts from a keyframe taken
/// after the exec (one at least every 20,000 steps), which carries the
/// files the process mapped.
#[test]
fn where_names_the_libraries_frames_and_reads_each_process_own_memory() {
    let h = Home::new();
    let write = line_of(
        "guest/tests/where-procs.c",
        "where-procs: the child's write",
    );
    let wait = line_of("guest/tests/where-procs.c", "where-procs: the parent waits");
    for (prog, calls) in [
        ("where-procs-dynamic", &["21000"][..]),
        ("where-procs", &[]),
    ] {
        let run = h.run_guest(prog, calls);
        assert_eq!(run.status, "exited:0", "{}", run.out);
        h.replay_identical(&run.id);
        let events = h.events_json(&run.id);
        let w = events
            .iter()
            .find(|e| e["name"] == "write" && e["pid"] != events[0]["pid"])
            .unwrap_or_else(|| panic!("{prog}: no write by the child: {events:?}"));
        let step = w["step"].as_u64().unwrap().to_string();

        let v = where_json(&h, &[&run.id, &step]);
        assert_eq!(v["pid"], w["pid"], "{v:#}");
        let f = chosen(&v);
        assert_eq!(f["function"], "child_writes", "{prog}: {v:#}");
        assert_eq!(f["location"]["line"], write, "{prog}: {v:#}");
        let frames = v["frames"].as_array().unwrap();
        let c = v["chosen"].as_u64().unwrap() as usize;
        assert!(c > 0, "{prog}: the write's own frame is below: {v:#}");
        assert!(frames[..c].iter().all(|f| f["own"] == false), "{v:#}");
        assert!(
            frames[..c].iter().all(|f| f["function"].is_string()),
            "{prog}: every frame named: {v:#}"
        );
        if prog == "where-procs-dynamic" {
            assert!(
                frames[..c]
                    .iter()
                    .all(|f| f["module"].as_str().unwrap_or("").contains("/libc.so")),
                "the write is in libc: {v:#}"
            );
        }
        assert!(
            frames[c..].iter().any(|f| f["function"] == "main"),
            "{prog}: {v:#}"
        );
        let out = h.ok(&["where", &run.id, &step]);
        assert!(
            out.stdout
                .contains(&format!("at  child_writes (where-procs.c:{write})")),
            "{out}"
        );

        let parent = events[0]["pid"].to_string();
        let v = where_json(&h, &[&run.id, &step, "--tid", &parent]);
        let f = chosen(&v);
        assert_eq!(f["function"], "parent_waits", "{prog}: {v:#}");
        assert_eq!(f["location"]["line"], wait, "{prog}: {v:#}");
        let ps = h.ok(&["ps", &run.id, "--at", &step]).stdout;
        assert!(
            ps.contains(&format!("from parent_waits (where-procs.c:{wait})"))
                && ps.contains(&format!("from child_writes (where-procs.c:{write})")),
            "{ps}"
        );
    }
}

/// The timeout report names source lines: the spinning thread's loop in
/// `spin_forever`, and main's join, below the C library's wait.
#[test]
fn the_timeout_report_names_source_lines() {
    let h = Home::new();
    let run = h.run(&["--timeout", "1", "--", &rewind_tests::guest_arg("spin")]);
    assert_eq!(run.status, "timed-out", "{}", run.out);
    let join = line_of("guest/tests/spin.c", "pthread_join(t, NULL);");
    let loop_lines = [
        line_of("guest/tests/spin.c", "for (;;)"),
        line_of("guest/tests/spin.c", "spins++;"),
    ];
    let report = &run.out.stderr;
    assert!(
        report.contains(&format!(", from main (spin.c:{join})")),
        "{report}"
    );
    assert!(
        loop_lines
            .iter()
            .any(|n| report.contains(&format!(" in spin_forever (spin.c:{n})"))),
        "{report}"
    );
    h.replay_identical(&run.id);
}

/// A process that execs another program names places in that program: a
/// busybox shell (stripped, no symbols of its own) forks and execs
/// `counter` with memory points. At a shared access of a counter thread the
/// recorded access names `add` (from counter's symbol table, not the
/// shell's), `where` at its write names `add` at its line, and the debug adapter's
/// stackTrace and Locals at that step are counter's: `add`'s line and its
/// loop variable `i`.
#[test]
fn a_program_a_shell_execs_names_its_own_places() {
    let Some(busybox) = rewind_tests::host_program("/usr/bin/busybox", "busybox-static") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("bin")).unwrap();
    std::fs::copy(&busybox, root.path().join("bin/busybox")).unwrap();
    std::fs::copy(rewind_tests::guest("counter"), root.path().join("counter")).unwrap();
    let h = Home::new();
    let r = root.path().to_str().unwrap();
    // Two commands, so that the shell forks for the first.
    let run = h.run(&[
        "--points",
        "memory",
        "--root",
        r,
        "--",
        "/bin/busybox",
        "sh",
        "-c",
        "/counter 5; echo done",
    ]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert!(
        run.out.stdout.contains("total 10, expected 10\ndone"),
        "{}",
        run.out
    );
    h.replay_identical(&run.id);

    let add = line_of("guest/tests/counter.c", "total = total + 1;");
    let events = h.events_json(&run.id);
    let shell = events[0]["pid"].clone();
    let counter: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "access" && e["pid"] != shell)
        .collect();
    // The shell is stripped: by its symbols no access would be named.
    let access = counter
        .iter()
        .find(|e| {
            e["access"] == "write" && e["at"].as_str().is_some_and(|at| at.contains(" in add+"))
        })
        .unwrap_or_else(|| panic!("no write in add among counter's {} accesses", counter.len()));
    let at = access["at"].as_str().unwrap();
    let text = h.ok(&["events", &run.id, "--accesses"]).stdout;
    assert!(
        text.lines().any(|l| l.contains(at)),
        "events --accesses shows {at}:\n{text}"
    );

    let step = access["step"].as_u64().unwrap();
    let st = step.to_string();
    let v = where_json(&h, &[&run.id, &st]);
    assert_eq!(v["pid"], access["pid"], "{v:#}");
    let f = chosen(&v);
    assert_eq!(f["function"], "add", "{v:#}");
    assert_eq!(f["location"]["line"], add, "{v:#}");
    let out = h.ok(&["where", &run.id, &st]);
    assert!(
        out.stdout.contains(&format!("at  add (counter.c:{add})")),
        "{out}"
    );

    let mut dap = rewind_tests::dap::Client::start(h.path());
    dap.open(serde_json::json!({"run": run.id, "step": step}));
    let tid = access["tid"].as_i64().unwrap();
    let st = dap.request("stackTrace", serde_json::json!({"threadId": tid}), false);
    let top = &st["stackFrames"][0];
    assert_eq!(top["name"], "add", "{st:#}");
    assert_eq!(top["line"], add, "{st:#}");
    assert!(
        top["source"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("counter.c")),
        "{st:#}"
    );
    let scopes = dap.request("scopes", serde_json::json!({"frameId": top["id"]}), false);
    let locals = scopes["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Locals")
        .unwrap_or_else(|| panic!("{scopes:#}"));
    let vars = dap.request(
        "variables",
        serde_json::json!({"variablesReference": locals["variablesReference"]}),
        false,
    );
    assert!(
        vars["variables"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "i"),
        "add's locals: {vars:#}"
    );
}

/// `rewind check --json --example NAME` with memory points: its report.
fn memory_check(h: &Home, example: &str) -> (Value, String) {
    let (out, v) = h.check_json(&["--points", "memory", "--example", example]);
    assert_eq!(out.code, 1, "{out}");
    let failing = v["narrowed"]["with"]["run"].as_str().unwrap().to_string();
    (v, failing)
}

#[test]
fn the_narrowing_names_the_accesses_the_deciding_switch_interleaved() {
    let h = Home::new();
    // bank: the switch falls inside the teller's snprintf; the race is the
    // other teller's store of balance between this one's read and store.
    let (v, failing) = memory_check(&h, "bank");
    let read = line_of("guest/examples/bank.c", "long seen = balance; /* read */");
    let store = line_of("guest/examples/bank.c", "balance = seen + t->deposit;");
    let race = &v["narrowed"]["race"];
    let (before, between, after) = (&race["before"], &race["between"], &race["after"]);
    for (access, what, line) in [
        (before, "read", read),
        (between, "write", store),
        (after, "write", store),
    ] {
        assert_eq!(access["variable"], "balance", "{race:#}");
        assert_eq!(access["access"], what, "{race:#}");
        assert_eq!(
            access["place"],
            format!("teller (bank.c:{line})"),
            "{race:#}"
        );
    }
    assert_eq!(before["tid"], after["tid"], "{race:#}");
    assert_ne!(before["tid"], between["tid"], "{race:#}");
    let step = |a: &Value| a["step"].as_u64().unwrap();
    let deciding = v["narrowed"]["deciding"][0]["step"].as_u64().unwrap();
    assert!(
        step(before) < deciding && deciding < step(between) && step(between) < step(after),
        "{v:#}"
    );
    // The accesses are the failing run's own events.
    let events = h.events_json(&failing);
    for a in [before, between, after] {
        assert!(
            events.iter().any(|e| e["step"] == a["step"]
                && e["tid"] == a["tid"]
                && e["kind"] == "access"
                && e["addr"] == a["addr"]
                && e["access"] == a["access"]),
            "{a} is not an event of run {failing}"
        );
    }
    h.replay_identical(&failing);

    // lazy: the other worker reads storage before this one, stopped before
    // its store, fills it in; the sentence says so, in the text report too.
    let out = h.rewind(&["check", "--points", "memory", "--example", "lazy"]);
    assert_eq!(out.code, 1, "{out}");
    let fill = line_of("guest/examples/lazy.c", "storage.port = 8080;");
    let use_ = line_of(
        "guest/examples/lazy.c",
        "seen_port[id] = get_config()->port;",
    );
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("the interleaving: "))
        .unwrap_or_else(|| panic!("no interleaving:\n{out}"));
    assert!(line.contains("'s read of storage at step "), "{line}");
    assert!(
        line.contains(&format!(
            "in worker (lazy.c:{use_}), came before the write of it thread "
        )),
        "{line}"
    );
    assert!(
        line.ends_with(&format!(
            "was stopped before at step {}, in get_config (lazy.c:{fill})",
            {
                let s = out
                    .stdout
                    .lines()
                    .find(|l| l.contains("decides it"))
                    .unwrap();
                s.split_whitespace().nth(1).unwrap().to_string()
            }
        )),
        "{line}"
    );
    h.replay_identical(&failing_run_in(&out));
}
