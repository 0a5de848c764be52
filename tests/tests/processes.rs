//! Processes end to end (issue 13 part 1): fork, vfork, wait4 and waitid
//! with their options, exit statuses, SIGCHLD, zombies, orphans, process
//! groups and sessions (`guest/tests/proc-fork.c`); execve and execveat of a
//! static program and of `#!` scripts (`guest/tests/proc-exec.c`); every
//! process in events, `ps` and `threads`; a fork at a step inside a child,
//! of a run long enough to hold keyframes, reaching the same end; and the `waiter` example found by
//! `rewind check` as a deadlock in the parent's pause; a forked TCP and
//! Unix-socket server with POSIX record locks between the two processes
//! (`guest/tests/proc-net.c`); job control in orphaned process groups
//! (`guest/tests/job-orphans.c`, the same lines as natively). The guest
//! programs check themselves and print `all passed`; every run recorded
//! here replays.

use rewind_tests::{assert_lines, failing_run_in, has_event, native_passing, Home};

#[test]
fn fork_wait_statuses_sigchld_orphans_and_groups() {
    let home = Home::new();
    let (run, log) = home.run_passing("proc-fork");
    assert_lines(
        &log,
        &[
            "ok: waitpid: the child exited 7 and saw its parent with getppid",
            "ok: the child's write stayed in its own memory",
            "ok: WNOHANG with live children: 0",
            "ok: SIGABRT with RLIMIT_CORE raised: the core flag",
            "ok: a wait the child ends returns its pid, the handler runs after",
            "ok: SA_NOCLDWAIT: reaped by itself, ECHILD",
            "ok: waitid WNOWAIT: the child's siginfo, left a zombie",
            "ok: waitid P_PGID",
            "ok: WUNTRACED: stopped by SIGSTOP",
            "ok: WCONTINUED after SIGCONT",
            "ok: waitid WSTOPPED: stopped by SIGTSTP in pause",
            "ok: a stopped child dies of SIGKILL",
            "ok: fork and a pipe: the child's bytes, then EOF when it exits",
            "ok: vfork and _exit",
            "ok: an orphan's getppid is the first process",
            "ok: PR_SET_PDEATHSIG: SIGUSR1 when its parent died",
            "ok: both members of the group were killed",
            "ok: kill(-1) reached the child, not me",
            "ok: a child inherits its parent's limits",
        ],
    );
    let events = home.events(&run.id);
    // The child's events carry its own pid, from its first step.
    assert!(
        events
            .lines()
            .any(|l| l.contains("1001/1001") && l.contains("thread start (from 1000)")),
        "{events}"
    );
    assert!(
        events
            .lines()
            .any(|l| l.contains("1001/1001") && l.contains("exit_group(7)")),
        "{events}"
    );
    assert!(
        events.lines().any(|l| l.contains("1000/1000")
            && l.contains("wait4(1001, ")
            && l.ends_with("= 1001")),
        "{events}"
    );
    let threads = home.ok(&["threads", &run.id]).stdout;
    assert!(threads.contains("1001/1001"), "{threads}");
    // `kill(z, 0)` of a zombie: `ps` shows it there, not yet reaped.
    let step = events
        .lines()
        .find(|l| l.contains(" kill(") && l.ends_with(", signal 0) = 0"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{events}"));
    let ps = home.ok(&["ps", &run.id, "--at", step]).stdout;
    assert!(
        ps.lines()
            .any(|l| l.contains("(parent 1000): a zombie, exited:0")),
        "{ps}"
    );
}

#[test]
fn exec_of_a_static_program_and_of_scripts() {
    let home = Home::new();
    let (run, log) = home.run_passing("proc-exec");
    assert_lines(
        &log,
        &[
            "ok: exec: close-on-exec closed, handlers reset, SIG_IGN, mask, fds and env kept",
            "ok: neither ELF nor #!: ENOEXEC",
            "ok: a missing interpreter: ENOENT",
            "ok: no execute permission: EACCES",
            "ok: five scripts deep: ELOOP",
            // argv[0] gives way to the interpreter, its one argument (inner
            // blanks kept) and the script's path.
            "interp: [self] [interp  one arg] [/script] [a] [b]",
            "interp: [self] [interp] [/s1] [/s2] [/s3] [/s4] [x]",
            "interp: [self] [interp  one arg] [/dev/fd/3/script] [a] [b]",
            "interp: [self] [interp] [by-fd]",
        ],
    );
    let events = home.events(&run.id);
    assert!(
        events
            .lines()
            .any(|l| l.contains("1001/1001") && l.contains("execve(\"/") && l.ends_with(") = 0")),
        "{events}"
    );
    assert!(
        events
            .lines()
            .any(|l| l.contains("execve(\"/garbage\"") && l.ends_with("= -1 ENOEXEC")),
        "{events}"
    );
}

/// A two-process run long enough to hold keyframes: `ps` shows both
/// processes at a step inside the child, and a fork at that step (of a run
/// long enough to hold keyframes; which one the fork restores is not
/// checked) runs to the same end.
#[test]
fn ps_and_a_fork_inside_a_child() {
    let home = Home::new();
    let run = home.run_guest("proc-fork", &["long", "30000"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(
        &home.log(&run.id),
        &["child: 30000 calls", "parent: the child exited 0"],
    );
    let steps = run.steps.expect("a step count");
    let inside = (steps - 100).to_string();
    let ps = home.ok(&["ps", &run.id, "--at", &inside]).stdout;
    assert!(ps.contains("process 1000 (parent 999)"), "{ps}");
    assert!(ps.contains("process 1001 (parent 1000)"), "{ps}");
    assert!(ps.contains("thread 1000/1000: blocked in wait4("), "{ps}");
    assert!(ps.contains("thread 1001/1001: running"), "{ps}");
    let fork = home.fork_ends_the_same(&run, &inside);
    // From the last keyframe (it holds both processes) when the build can
    // restore it, else from step 0: either way the same run.
    assert!(
        fork.stderr.contains("forking from the keyframe at step ")
            || fork.stderr.contains("forking from step 0"),
        "{fork}"
    );
    home.replay_identical(&run.id);
}

#[test]
fn waiter_deadlocks_in_the_parents_pause_and_its_fix_passes() {
    let home = Home::new();
    let out = home.rewind(&["check", "--example", "waiter"]);
    assert_eq!(out.code, 1, "the bug of `waiter` was not found:\n{out}");
    let stdout = &out.stdout;
    assert!(
        stdout.lines().any(|l| l.contains(
            " violates ends-differently: ended deadlocked where schedule 0 ended exited:0"
        )),
        "{out}"
    );
    let decides = stdout
        .lines()
        .find(|l| l.contains(" decides it: "))
        .unwrap_or_else(|| panic!("not narrowed:\n{out}"));
    assert!(decides.contains("waiter.c:"), "{decides}");
    let failing = failing_run_in(&out);
    // Made again as `rewind show` says, its report names the parent's pause.
    let made = home.run_as_shown(&failing);
    assert_eq!(made.status, "deadlocked", "{}", made.out);
    assert!(
        made.out
            .stderr_lines()
            .iter()
            .any(|l| l.contains("thread 1000/1000: blocked in pause(), at ")
                && l.contains("from main (waiter.c:")),
        "{}",
        made.out
    );
    // A count, not the 60 s budget a passing default check spends.
    let fixed = home.rewind(&["check", "--example", "waiter-fixed", "--schedules", "64"]);
    assert_eq!(fixed.code, 0, "{fixed}");
    assert!(
        fixed
            .stdout
            .contains("0 of 64 perturbed schedules ended differently"),
        "{fixed}"
    );
}

#[test]
fn a_forked_server_sockets_and_record_locks_between_processes() {
    rewind_tests::native_passing("proc-net");
    let home = Home::new();
    let (run, log) = home.run_passing("proc-net");
    assert_lines(
        &log,
        &[
            "ok child: F_SETLK on the parent's range: EAGAIN",
            "ok child: F_GETLK names the parent's lock",
            "ok child: accepted the parent from 127.0.0.1",
            "ok child: read ping, then the half-close's end of file",
            "ok parent: read pong, then end of file",
            "ok child: echoed over the Unix socket",
            "ok child: F_SETLKW got the range once free",
            "ok parent: the child's write under its lock",
        ],
    );
    // The child waited in F_SETLKW (fcntl 7) while the parent slept, and
    // got the lock at the step of the parent's unlock.
    let events = home.events(&run.id);
    let step_of = |pred: &dyn Fn(&str) -> bool| -> u64 {
        let line = events
            .lines()
            .find(|l| pred(l))
            .unwrap_or_else(|| panic!("no such event in:\n{events}"));
        line.split_whitespace().next().unwrap().parse().unwrap()
    };
    let granted = step_of(&|l: &str| l.contains(" 1001/1001 ") && l.contains(", 7, "));
    let slept = step_of(&|l: &str| l.contains(" 1000/1000 ") && l.contains("clock_nanosleep("));
    let ps = home.ok(&["ps", &run.id, "--at", &slept.to_string()]).stdout;
    assert!(
        ps.contains("thread 1001/1001: blocked in fcntl("),
        "the child was not waiting for the lock at step {slept}:\n{ps}"
    );
    assert!(granted > slept, "{events}");
}

/// SIGTSTP, SIGTTIN and SIGTTOU do nothing to a process of an orphaned
/// group, where SIGSTOP stops it; a group its members' parent or its
/// linking member leaves orphaned with a stopped member gets SIGHUP and
/// SIGCONT, and one with none stopped, or still linked, gets nothing. The
/// same lines as natively.
#[test]
fn orphaned_process_groups_as_on_linux() {
    let home = Home::new();
    let (run, log) = home.run_passing("job-orphans");
    assert_lines(
        &log,
        &[
            "ok: SIGTSTP to an orphaned group does nothing: the process runs on",
            "ok: SIGTTOU to an orphaned group does nothing: the process runs on",
            "ok: SIGSTOP stops a process of an orphaned group",
            "ok: SIGTSTP stops a child in a group its parent links",
            "ok: the orphaned group has a stopped member: SIGHUP (si_code SI_KERNEL) and SIGCONT",
            "ok: the orphaned group has no stopped member: no SIGHUP (0 SIGCONT)",
            "ok: another member still links the group: no SIGHUP (1 SIGCONT)",
            "ok: its parent exited: SIGHUP (si_code SI_KERNEL) and SIGCONT",
        ],
    );
    assert_eq!(
        log,
        native_passing("job-orphans"),
        "the same lines natively"
    );
    let events = home.events(&run.id);
    assert!(has_event(&events, &["SIGHUP code=128"]), "{events}");
}

/// posix_spawn with POSIX_SPAWN_RESETIDS, as GNU make starts a recipe's
/// command (issue 24, item 5): its child's setresuid is served, where it was
/// ENOSYS and the child ended 127 (make's `Error 127` for `cc -c`); as natively.
#[test]
fn posix_spawn_resetting_ids_runs_the_child() {
    let home = Home::new();
    let (_, log) = home.run_passing("spawn-ids");
    assert_eq!(log, native_passing("spawn-ids"));
}
