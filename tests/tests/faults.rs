//! How runs end when the program misbehaves: a NULL dereference, an
//! unimplemented call, a deadlock, a spin, garbage passed to every call.
//! The monitor lives on and reports each; every recorded run replays.

use rewind_tests::{assert_lines, Home};

/// A symbol's address in a guest program, from `nm` (binutils, installed
/// with build-essential by scripts/setup).
fn symbol_address(program: &str, symbol: &str) -> u64 {
    let out = std::process::Command::new("nm")
        .arg(rewind_tests::guest(program))
        .output()
        .expect("nm runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            let (addr, _, name) = (w.next()?, w.next()?, w.next()?);
            (name == symbol).then(|| u64::from_str_radix(addr, 16).ok())?
        })
        .unwrap_or_else(|| panic!("no symbol {symbol} in {program}"))
}

#[test]
fn null_dereference_is_sigsegv_with_its_address() {
    let home = Home::new();
    let run = home.run_guest("segv", &[]);
    assert_eq!(run.status, "killed:SIGSEGV", "{}", run.out);
    assert_eq!(run.out.code, 139, "{}", run.out);
    let log = home.log(&run.id);
    assert_lines(&log, &["paying carol"]);
    assert!(
        !log.contains("paid"),
        "the program went on after the fault:\n{log}"
    );
    let events = home.events(&run.id);
    assert!(
        events
            .lines()
            .any(|l| l.contains("SIGSEGV") && l.contains("addr=0x108")),
        "no SIGSEGV event with addr=0x108:\n{events}"
    );
    // The same events as flat JSON (docs/events.md).
    let json = home.events_json(&run.id);
    let (first, last) = (&json[0], json.last().unwrap());
    assert_eq!(first["kind"], "thread_start", "{first}");
    assert_eq!(first["parent"], 0, "{first}");
    assert!(first["step"].is_u64() && first["pid"].is_u64() && first["tid"].is_u64());
    let signal = json
        .iter()
        .find(|e| e["kind"] == "signal")
        .expect("a signal event");
    assert_eq!(
        (&signal["signo"], &signal["addr"]),
        (&11.into(), &0x108.into()),
        "{signal}"
    );
    assert_eq!(last["kind"], "process_exit", "{last}");
    assert_eq!(last["status"], "killed:SIGSEGV", "{last}");
    let brk = json
        .iter()
        .find(|e| e["kind"] == "syscall")
        .expect("a syscall event");
    assert!(
        brk["name"].is_string() && brk["text"].is_string() && brk["ret"].is_i64(),
        "{brk}"
    );
    home.replay_identical(&run.id);
}

/// What a partial call lacks is refused as Linux refuses what it does not
/// support (EINVAL), so ENOSYS means "not implemented" (the table's
/// `Missing`), except futex's priority-inheritance operations, which Linux
/// built without them answers with ENOSYS too.
#[test]
fn partial_calls_refuse_what_they_lack_with_linux_errnos() {
    let home = Home::new();
    let run = home.run_guest("partial", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(
        &home.log(&run.id),
        &[
            "clone(CLONE_NEWNS) = -1 (EINVAL)",
            "clone(CLONE_FILES) = -1 (EINVAL)",
            "clone3(set_tid) = -1 (EINVAL)",
            "clone3(CLONE_PIDFD) = -1 (EINVAL)",
            "futex(FUTEX_LOCK_PI) = -1 (ENOSYS)",
            "fcntl(F_SETOWN) = 0 (ok)",
            "fcntl(F_GETOWN) = 0 (ok)",
            "raw fcntl(F_GETOWN) = 0 (ok)",
            "fcntl(F_SETSIG) = -1 (EINVAL)",
            "still running",
        ],
    );
    let missing: Vec<String> = home
        .ok(&["doctor", "--syscalls", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
        .filter(|r| r["support"] == "not implemented")
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    assert!(missing.iter().any(|n| n == "rseq"), "{missing:?}");
    let events = home.events(&run.id);
    // FUTEX_LOCK_PI is futex operation 6.
    let futex_pi = |l: &str| l.contains(" futex(0x") && l.contains(", 0x6,");
    for line in events.lines().filter(|l| l.contains("ENOSYS")) {
        let call = line.split_whitespace().nth(2).unwrap_or("");
        let name = call.split('(').next().unwrap();
        assert!(
            missing.iter().any(|n| n == name) || futex_pi(line),
            "ENOSYS from {name}, which the table does not mark missing:\n{events}"
        );
    }
}

#[test]
fn unimplemented_calls_get_enosys_and_are_named() {
    let home = Home::new();
    let run = home.run_guest("enosys", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(
        &home.log(&run.id),
        &[
            "syscall(999) = -1 (ENOSYS)",
            "io_uring_setup = -1 (ENOSYS)",
            "still running",
        ],
    );
    let events = home.events(&run.id);
    assert!(
        events
            .lines()
            .any(|l| l.contains("io_uring_setup") && l.contains("ENOSYS")),
        "no io_uring_setup event with ENOSYS:\n{events}"
    );
    assert!(
        events
            .lines()
            .any(|l| l.contains("999") && l.contains("ENOSYS")),
        "no event for call 999 with ENOSYS:\n{events}"
    );
    home.replay_identical(&run.id);
}

#[test]
fn opposite_lock_order_ends_deadlocked_naming_both_waits() {
    let home = Home::new();
    let run = home.run_guest("deadlock", &[]);
    assert_eq!(run.status, "deadlocked", "{}", run.out);
    assert_eq!(run.out.code, 125, "{}", run.out);
    assert_lines(&run.out.stdout, &["starting transfer and auditor"]);
    // Each locker waits for the mutex the other holds: transfer (the first
    // thread created) for `audit`, auditor for `accounts`; main waits in join.
    let lines = run.out.stderr_lines();
    let waiting_in = |tid: u32| -> &str {
        let prefix = format!("rewind:   thread 1000/{tid}: ");
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no line for thread {tid}:\n{}", run.out))
    };
    for (tid, mutex) in [(1001, "audit"), (1002, "accounts")] {
        let wait = waiting_in(tid);
        let addr = format!("{:#x}", symbol_address("deadlock", mutex));
        assert!(
            wait.starts_with(&format!("blocked in futex({addr}, FUTEX_WAIT_PRIVATE"))
                && wait.contains("__lll_lock_wait"),
            "thread {tid} does not wait for `{mutex}` ({addr}) in pthread_mutex_lock: {wait}"
        );
    }
    let main = waiting_in(1000);
    assert!(
        main.starts_with("blocked in futex(") && !main.contains("__lll_lock_wait"),
        "main is not waiting in pthread_join: {main}"
    );
    home.replay_identical(&run.id);
}

#[test]
fn spinning_thread_times_out_naming_where() {
    let home = Home::new();
    let prog = rewind_tests::guest_arg("spin");
    let run = home.run(&["--timeout", "1", "--", &prog]);
    assert_eq!(run.status, "timed-out", "{}", run.out);
    assert_eq!(run.out.code, 124, "{}", run.out);
    assert!(
        run.out.stderr.contains("spin_forever"),
        "the report does not name spin_forever:\n{}",
        run.out
    );
    assert_lines(&home.log(&run.id), &["starting the spinner"]);
    // The replay runs to the recorded step, whatever the host clock says...
    home.replay_identical(&run.id);
    // ...and one its own clock cuts short, with fewer events, differs.
    let short = home.rewind(&["replay", &run.id, "--timeout", "0.00001"]);
    assert_eq!(short.code, 1, "{short}");
    assert!(short.stdout.starts_with("different: "), "{short}");
}

/// `REWIND_FUZZ_CALLS_SEED` runs another seed (default: the program's own)
/// and `REWIND_FUZZ_CALLS_ROUNDS` more rounds a call (default 24).
#[test]
fn garbage_to_every_call_never_crashes_the_monitor() {
    let home = Home::new();
    let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    let seed = var("REWIND_FUZZ_CALLS_SEED").unwrap_or_else(|| "0".into());
    let rounds = var("REWIND_FUZZ_CALLS_ROUNDS").unwrap_or_else(|| "24".into());
    let run = home.run_guest("fuzz", &[&seed, &rounds]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.code, 0, "{}", run.out);
    assert!(
        run.steps.is_some_and(|s| s > 5000),
        "too few steps for 300 calls x 24 rounds: {}",
        run.line
    );
    let events = home.events(&run.id);
    for call in [
        "read(",
        "write(",
        "openat(",
        "futex(",
        "mmap(",
        "clock_gettime(",
        "execve(",
        "execveat(",
        "wait4(",
        "waitid(",
        "setpgid(",
    ] {
        assert!(events.contains(call), "no {call}..) event");
    }
    home.replay_identical(&run.id);
}
