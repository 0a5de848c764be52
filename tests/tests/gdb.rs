//! `rewind gdb` with Debian's real gdb in batch mode, on the failing run of
//! the `pool` example (a worker dies of SIGSEGV on the queue main freed):
//! a breakpoint, `bt` in every thread, `p` of a local and of a struct,
//! `watch -l` and `rwatch -l` on the queue pointer, `reverse-continue`,
//! `reverse-next` and `reverse-step`; the run replays identically after.

use rewind_tests::{Home, Output};
use std::path::Path;

/// The failing run `rewind check --points syscalls --example pool` finds.
fn failing_pool(home: &Home) -> String {
    home.failing_example("pool", "syscalls")
}

/// The step of the first event whose line contains `what`.
fn step_of(home: &Home, id: &str, what: &str) -> String {
    home.events(id)
        .lines()
        .find(|l| l.contains(what))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no event with {what}"))
        .to_string()
}

/// `rewind gdb RUN STEP -- -nx -batch -ex CMD...`.
fn gdb(home: &Home, id: &str, step: &str, cmds: &[&str]) -> Output {
    let mut args = vec!["gdb", id, step, "--", "-nx", "-batch"];
    for c in cmds {
        args.extend(["-ex", c]);
    }
    let out = home.rewind(&args);
    assert_eq!(out.code, 0, "rewind gdb failed:\n{out}");
    out
}

fn assert_has(out: &Output, want: &str) {
    assert!(
        out.stdout.contains(want),
        "gdb's output lacks `{want}`:\n{out}"
    );
}

/// Asserts that gdb's output has each of `wants`, each one at or after
/// where the one before it starts.
#[track_caller]
fn assert_in_order(out: &Output, wants: &[&str]) {
    let text = &out.stdout;
    let mut from = 0;
    for want in wants {
        from = text[from..]
            .find(want)
            .map(|i| i + from)
            .unwrap_or_else(|| panic!("no `{want}` after byte {from}:\n{out}"));
    }
}

/// gdb on pool's failing run `id` from where main starts shutting down:
/// `watch -l pool.queue` and `continue` (to where main clears the queue
/// pointer), then `then`; `bt 1` after each command that runs, to show
/// where it stopped.
fn watch_the_queue(home: &Home, id: &str, then: &[&str]) -> Output {
    let at = step_of(home, id, "main: shutting down");
    let mut cmds = Vec::new();
    for c in ["watch -l pool.queue", "continue"].iter().chain(then) {
        cmds.push(*c);
        if c.ends_with("continue") {
            cmds.push("bt 1");
        }
    }
    gdb(home, id, &at, &cmds)
}

#[test]
fn breakpoint_backtraces_and_values() {
    let home = Home::new();
    let id = failing_pool(&home);
    let out = gdb(
        &home,
        &id,
        "24",
        &[
            "break worker",
            "continue",
            "info threads",
            "thread apply all bt",
            "next",
            "p me",
            "p pool",
            "p pool.queue[3]",
            "p $fs_base != 0",
            "set var pool.len = 5",
            "reverse-stepi",
        ],
    );
    assert_has(&out, "Breakpoint 1, worker (arg=0x0) at ");
    assert_has(&out, "pool.c:");
    // Both threads, each with its frames.
    assert_has(&out, "Thread 1.1000");
    assert_has(&out, "Thread 1.1001");
    assert!(
        out.stdout.contains("in main () at ") || out.stdout.contains(" main () at "),
        "main's frame:\n{out}"
    );
    assert_has(&out, "$1 = 0");
    assert_has(&out, "stop = 0, queue = 0x");
    assert_has(&out, "len = 100}");
    assert_has(&out, "$3 = {id = 3, cost = 3}");
    assert_has(&out, "$4 = 1");
    // Written by gdb: the session is no longer the recording, and says so.
    assert!(
        out.stderr.contains("no longer the recording"),
        "reverse execution after a write:\n{out}"
    );
    home.replay_identical(&id);
}

#[test]
fn watchpoints_and_reverse_execution() {
    let home = Home::new();
    let id = failing_pool(&home);
    let out = watch_the_queue(
        &home,
        &id,
        &[
            "rwatch -l pool.queue",
            "continue",
            "delete",
            "continue",
            "rwatch -l pool.queue",
            "reverse-continue",
        ],
    );
    assert_in_order(
        &out,
        &[
            // main clears the pointer, then the worker reads it, then dies.
            "New value = (struct job *) 0x0",
            "#0  main () at",
            "Value = (struct job *) 0x0",
            "worker (arg=0x1)",
            "received signal SIGSEGV",
            // reverse-continue is back at the read in the worker.
            "Value = (struct job *) 0x0",
            "in worker (arg=0x1)",
        ],
    );
    home.replay_identical(&id);
}

/// The same on the run `rewind check` gives by default, recorded with
/// memory scheduling points: the queue pointer's page is shared, so the
/// kernel hides it from ring 3 and every access to it is a step. `watch -l`
/// stops where main clears it, `awatch` where the worker then reads it, the
/// worker still dies where the recording did, and `reverse-continue` goes
/// back through the read to the write.
#[test]
fn watchpoints_on_a_run_with_memory_points() {
    let home = Home::new();
    let id = home.failing_example("pool", "memory");
    let out = watch_the_queue(
        &home,
        &id,
        &[
            "awatch -l pool.queue",
            "continue",
            "continue",
            "reverse-continue",
            "reverse-continue",
        ],
    );
    assert_in_order(
        &out,
        &[
            "New value = (struct job *) 0x0",
            "#0  main () at",
            "Value = (struct job *) 0x0",
            "in worker (arg=",
            "received signal SIGSEGV",
            // reverse-continue: the worker's read, then main's write (an access too).
            "Value = (struct job *) 0x0",
            "in worker (arg=",
            "Value = (struct job *) 0x0",
            "#0  main () at",
        ],
    );
    home.replay_identical(&id);
}

/// gdb's own line stepping backwards (it drives `bs` and `bc` itself) on a
/// program whose lines each keep their own code: on pool's -O1 code, gdb
/// 13's reverse-next goes astray the same way under its own `record full`.
#[test]
fn reverse_next_reverse_step_and_reverse_finish_over_lines() {
    let home = Home::new();
    let run = home.run_guest("lines", &[]);
    assert_eq!(run.status, "exited:0");
    let out = gdb(
        &home,
        &run.id,
        "3",
        &[
            "break lines.c:21",
            "continue",
            "reverse-next",
            "reverse-next",
            "reverse-step",
            "reverse-step",
            "p a + b",
            "reverse-finish",
            "next",
            "next",
            "p total",
        ],
    );
    // The source lines gdb shows: `NN\tcode`.
    let numbers: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, _)| n)
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        .collect();
    // 21 (the breakpoint), back over write to 20, to 19, into the loop's
    // condition 17, into add's last line 12, out to its call 18, then
    // forward to 17 and 19.
    assert_eq!(
        numbers,
        ["21", "20", "19", "17", "12", "18", "17", "19"],
        "{out}"
    );
    assert_has(&out, "$1 = 135");
    // reverse-finish lands mid-line at the call, in main.
    let after = out.stdout.split("$1 = 135").nth(1).unwrap_or_default();
    assert!(after.contains(" in main () at "), "{out}");
    assert_has(&out, "$2 = 0");
    home.replay_identical(&run.id);
}

/// `--listen` prints the gdb command line that connects, and serves the one
/// gdb that does; `--tid` and `--frame` choose where gdb starts.
#[test]
fn listen_prints_the_command_that_connects() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let home = Home::new();
    let id = failing_pool(&home);
    let mut server = Command::new(rewind_tests::rewind_bin())
        .args(["gdb", &id, "30", "--tid", "1000", "--frame", "1"])
        .args(["--listen", "127.0.0.1:0"])
        .env("REWIND_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rewind gdb --listen starts");
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("the command line");
    let words = shell_words(line.trim());
    assert_eq!(words.first().map(String::as_str), Some("gdb"), "{line}");
    assert!(line.contains("-ex 'target remote 127.0.0.1:"), "{line}");
    let mut gdb = Command::new(&words[0]);
    gdb.args(&words[1..])
        .args(["-nx", "-batch", "-ex", "info threads"]);
    let out = rewind_tests::run_command(gdb, rewind_tests::DEADLINE);
    if !out.stdout.contains("Thread 1.1000") {
        let _ = server.kill();
    }
    assert_eq!(
        server.wait().expect("the server ends").code(),
        Some(0),
        "{out}"
    );
    // Thread 1000 first (in clone3 at step 30), frame 1 selected.
    assert!(out.stdout.contains("#1  0x"), "{out}");
    assert!(out.stdout.contains("* 1    Thread 1.1000"), "{out}");
    home.replay_identical(&id);
}

/// Bad arguments: one line on stderr and a non-zero exit, gdb never started.
#[test]
fn bad_arguments_are_one_line_errors() {
    let home = Home::new();
    let id = failing_pool(&home);
    for (args, want) in [
        (vec!["gdb", id.as_str(), "100000"], "past the end"),
        (
            vec!["gdb", id.as_str(), "30", "--tid", "77"],
            "no thread 77",
        ),
        (vec!["gdb", id.as_str(), "30", "--pid", "5"], "no process 5"),
        (vec!["gdb", "nosuchrun", "3"], "nosuchrun"),
        // The gdb protocol has no authentication: loopback unless said.
        (
            vec!["gdb", id.as_str(), "30", "--listen", "0.0.0.0:0"],
            "not a loopback address",
        ),
    ] {
        let out = home.rewind(&args);
        assert_ne!(out.code, 0, "{args:?}: {out}");
        assert_eq!(out.stderr_lines().len(), 1, "{args:?}: {out}");
        assert!(out.stderr.contains(want), "{args:?}: {out}");
    }
}

/// Splits a command line as a POSIX shell does for plain and '-quoted words.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut started) = (false, false);
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                started = true;
            }
            c if c.is_whitespace() && !quoted => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// Thread-locals and glibc's errno in gdb: the stub answers `qGetTLSAddr`
/// from each thread's `fs_base` and the executable's TLS block, on
/// guest/tests/account.c (a `__thread long spent` per thread, an open that
/// fails before the mark).
#[test]
fn thread_locals_and_errno() {
    let home = Home::new();
    let run = home.run_guest("account", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.line);
    let out = gdb(
        &home,
        &run.id,
        "0",
        &[
            "break withdraw",
            "continue",
            "continue",
            "continue",
            "p spent",
            "p balance",
            "thread 1",
            "p spent",
            "delete",
            "break account.c:41",
            "continue",
            "p (int)errno",
        ],
    );
    // The spender thread's second withdrawal: its own 40 spent so far;
    // main's own is 10.
    assert_has(&out, "Thread 2 hit Breakpoint 1, withdraw (amount=40)");
    assert_has(&out, "$1 = 40\n$2 = 50\n");
    assert_has(&out, "$3 = 10\n");
    assert!(
        !out.stdout.contains("qGetTLSAddr") && !out.stderr.contains("qGetTLSAddr"),
        "{out}"
    );
    // open("/no/such/file") failed with ENOENT.
    assert_has(&out, "$4 = 2\n");
    home.replay_identical(&run.id);
}

/// Ctrl-C at the terminal sends SIGINT to gdb and to `rewind gdb` alike;
/// it is gdb's: the server (sent it here from gdb's shell: gdb's parent)
/// goes on serving, gdb still reads the target's registers, and `rewind
/// gdb` exits 0 when gdb is done.
#[test]
fn ctrl_c_is_gdbs_and_the_server_goes_on() {
    let home = Home::new();
    let run = home.run_guest("account", &[]);
    let out = gdb(
        &home,
        &run.id,
        "20",
        &[
            "shell kill -INT $(cut -d' ' -f4 /proc/$PPID/stat)",
            "info registers rip",
        ],
    );
    assert_eq!(out.code, 0, "{out}");
    assert!(out.stdout.contains("rip            0x"), "{out}");
    home.replay_identical(&run.id);
}

/// The `Located in PATH` line of gdb's `info source`: where gdb read the
/// source from.
fn located_in(out: &Output) -> &str {
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("Located in "))
        .unwrap_or_else(|| panic!("gdb found no source:\n{out}"))
}

/// gdb gets what `rewind where` finds. A stripped program whose debug info
/// only a real debuginfod serves, with the host's copy of its source
/// refused (older program), stops at its line with the source debuginfod
/// served (not the host's file); without the server, gdb has no lines. A
/// program whose source is only in the run's image (`--root`, built with
/// `-fdebug-prefix-map`) shows that source.
#[test]
fn gdb_gets_the_split_debug_info_and_the_sources_where_finds() {
    use rewind_tests::debuginfod::{client_env, served_mark_program};
    let dir = tempfile::tempdir().unwrap();
    let (exe, server) = served_mark_program(dir.path());
    let cache = tempfile::tempdir().unwrap();
    let url = server.url();
    let env = client_env(&url, cache.path());
    let home = Home::new();
    let run = home.run(&["--", exe.to_str().unwrap()]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let cmds = ["break work", "continue", "info source"];
    let mut stop_in_work = vec!["gdb", &run.id, "0", "--", "-nx", "-batch"];
    stop_in_work.extend(cmds.iter().flat_map(|c| ["-ex", c]));
    let out = home.rewind_env(&stop_in_work, &env);
    assert_eq!(out.code, 0, "{out}");
    let src = dir.path().join("prog.c");
    assert_has(
        &out,
        &format!("Breakpoint 1, work () at {}:5", src.display()),
    );
    assert_has(&out, "5\t    write(1, \"mark\\n\", 5);");
    let at = located_in(&out);
    assert!(
        at.contains("/rewind-gdb-") && at.ends_with(src.to_str().unwrap()),
        "{out}"
    );
    let plain = home.rewind_env(&stop_in_work, &[("DEBUGINFOD_URLS", "")]);
    assert!(!plain.stdout.contains("prog.c:5"), "{plain}");
    home.replay_identical(&run.id);

    // The source in the run's image only.
    let root = tempfile::tempdir().unwrap();
    let srcdir = root.path().join("src");
    std::fs::create_dir(&srcdir).unwrap();
    std::fs::write(srcdir.join("prog.c"), rewind_tests::MARK_PROGRAM).unwrap();
    let map = format!("-fdebug-prefix-map={}=", root.path().display());
    rewind_tests::tool(
        "cc",
        &[
            "-static".as_ref(),
            "-g".as_ref(),
            "-O0".as_ref(),
            map.as_ref(),
            srcdir.join("prog.c").as_os_str(),
            "-o".as_ref(),
            srcdir.join("prog").as_os_str(),
        ],
    );
    assert!(
        !Path::new("/src/prog.c").exists(),
        "the host has /src/prog.c"
    );
    let run = home.run(&["--root", root.path().to_str().unwrap(), "--", "/src/prog"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let out = gdb(&home, &run.id, "0", &cmds);
    assert_has(&out, "Breakpoint 1, work () at /src/prog.c:5");
    assert_has(&out, "5\t    write(1, \"mark\\n\", 5);");
    let at = located_in(&out);
    assert!(
        at.contains("/rewind-gdb-") && at.ends_with("/src/prog.c"),
        "{out}"
    );
    home.replay_identical(&run.id);
}

/// Forward line stepping and `finish` (gdb drives single steps), and
/// `awatch`, which stops at writes and at reads, on `lines`.
#[test]
fn step_finish_and_awatch_go_forward() {
    let home = Home::new();
    let run = home.run_guest("lines", &[]);
    assert_eq!(run.status, "exited:0");
    let out = gdb(
        &home,
        &run.id,
        "3",
        &[
            "break lines.c:18",
            "continue",
            "step",
            "finish",
            "delete",
            "awatch total",
            "continue",
            "continue",
            "continue",
        ],
    );
    let into = "add (a=0, b=0) at ";
    assert_in_order(&out, &[into, "11\t    return a + b;"]);
    assert_in_order(
        &out,
        &[
            into,
            " in main () at ",
            "Value returned is $1 = 0",
            // total = cost at 19, total = cost * 2 at 21, then the read at 22.
            "Old value = 0\nNew value = 135",
            "Old value = 135\nNew value = 270",
            "Value = 270",
            "lines.c:22",
        ],
    );
    home.replay_identical(&run.id);
}

/// `--pid` debugs another process: in the dynamically linked `where-procs`
/// the child the parent forked and that execed the program again, and the
/// parent waiting for it. gdb finds the PIE where it is loaded and the
/// libraries the loader mapped (read from the run's files, `target:`), so
/// frames in libc and the user's lines both show.
#[test]
fn pid_debugs_an_execd_child_and_its_parent_with_their_libraries() {
    let home = Home::new();
    let run = home.run_guest("where-procs-dynamic", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let events = home.events_json(&run.id);
    let exec = events
        .iter()
        .find(|e| e["name"] == "execve")
        .unwrap_or_else(|| panic!("no execve: {events:?}"));
    let child = exec["pid"].to_string();
    let after = (exec["step"].as_u64().unwrap() + 1).to_string();
    let mut args = vec!["gdb", &run.id, &after, "--pid", &child, "--"];
    let cmds = ["break child_writes", "continue", "bt", "info sharedlibrary"];
    args.extend(["-nx", "-batch"]);
    args.extend(cmds.iter().flat_map(|c| ["-ex", c]));
    let out = home.rewind(&args);
    assert_eq!(out.code, 0, "{out}");
    assert_has(&out, "Breakpoint 1, child_writes () at ");
    assert_has(&out, " in main (");
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains("target:") && l.contains("/libc.so.6") && l.contains("Yes")),
        "{out}"
    );

    let parent = events[0]["pid"].to_string();
    let out = home.rewind(&[
        "gdb", &run.id, &after, "--pid", &parent, "--", "-nx", "-batch", "-ex", "bt",
    ]);
    assert_eq!(out.code, 0, "{out}");
    let wait = out.stdout.find("#0  0x").expect(&out.stdout);
    let caller = out.stdout[wait..]
        .find(" in parent_waits (")
        .expect(&out.stdout);
    assert!(
        out.stdout[wait..wait + caller].contains("wait"),
        "the libc frame of the wait: {out}"
    );
    assert_has(&out, "where-procs.c:");
    home.replay_identical(&run.id);
}

/// At the step of the SIGSEGV that ended the run (issue 24, item 6): gdb
/// stops where the fault was raised, as a core file shows it: the faulting
/// instruction in the worker's frame, its locals, and every thread.
#[test]
fn at_the_step_of_the_fault_gdb_stops_where_it_was_raised() {
    let home = Home::new();
    let id = failing_pool(&home);
    let step = step_of(&home, &id, "SIGSEGV");
    let out = gdb(
        &home,
        &id,
        &step,
        &["bt", "p me", "p pool.queue", "x/i $pc", "info threads"],
    );
    assert_in_order(
        &out,
        &[
            "#0  ",
            "worker (arg=",
            "pool.c:56",
            "$1 = ",
            "$2 = (struct job *) 0x0",
            "=> 0x",
        ],
    );
    // The faulting worker is the current thread; main, blocked in
    // pthread_join, is there too.
    let threads: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.contains(" Thread 1."))
        .collect();
    assert!(
        threads
            .iter()
            .any(|l| l.starts_with('*') && l.contains("worker")),
        "{out}"
    );
    assert!(
        threads.iter().any(|l| l.contains("Thread 1.1000 ")),
        "{out}"
    );
}

/// Backwards from the fault that ended a run (its last step), on tests'
/// `served`, whose fault is in the middle of served.c:19: `reverse-stepi`
/// is the load before the faulting one in the same line, `reverse-continue`
/// to a breakpoint on the line before is there (its local readable), and
/// `continue` raises the same fault at the same instruction again, and
/// `reverse-next` from there goes back to where line 19 starts (gdb 13
/// steps back over the line's three line-table entries one at a time, as
/// under its own `record full`), then to the line before, in the same
/// function. `served` is static: its glibc fills in `_r_debug`, and without
/// the stub's (empty) `qXfer:libraries-svr4` list gdb took the program's
/// `.text` for the dynamic loader's and reverse-next climbed out to
/// `_start` from any position in line 19.
#[test]
fn backwards_from_the_fault_that_ended_the_run() {
    let home = Home::new();
    let run = home.run_guest("served", &[]);
    assert_eq!(run.status, "killed:SIGSEGV");
    let step = run.steps.expect("the run's steps").to_string();
    let out = gdb(
        &home,
        &run.id,
        &step,
        &[
            "x/i $pc",
            "reverse-stepi",
            "x/i $pc",
            "break served.c:18",
            "reverse-continue",
            "bt 1",
            "p s->name",
            "continue",
            "x/i $pc",
            "delete",
            "reverse-next",
            "x/i $pc",
            "reverse-next",
            "bt 1",
        ],
    );
    let pcs: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("=> "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(pcs.len(), 4, "{out}");
    assert_ne!(pcs[0], pcs[1], "reverse-stepi moved:\n{out}");
    assert_eq!(pcs[0], pcs[2], "the same fault again:\n{out}");
    // gdb 13's first reverse-next from the fault stops where line 19 starts
    // (before the load reverse-stepi reached), as under its own `record
    // full`: it steps back over one line-table entry of the line at a time.
    assert!(
        pcs[3] != pcs[0] && pcs[3] != pcs[1],
        "reverse-next moved to the line's start:\n{out}"
    );
    assert_in_order(
        &out,
        &[
            "served.c:19",
            "\t19\t",
            "Breakpoint 1, serve (",
            "served.c:18",
            "#0  serve (",
            "$1 = ",
            "\"carol\"",
            "SIGSEGV",
            "served.c:19",
            // The first reverse-next from the fault's line (three
            // line-table entries) stays in serve at the line's start; the
            // next lands on the line before, in the same function.
            "\n19\t    s->q->served++;",
            "<serve+",
            "\n18\t    printf(\"serving %s\\n\", s->name);",
            "#0  serve (",
            "served.c:18",
        ],
    );
    assert!(
        !out.stdout.contains("_start"),
        "climbed out of serve:\n{out}"
    );
    home.replay_identical(&run.id);
}
