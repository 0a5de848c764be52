//! File-system calls (issue 13, part 5) from C guest programs that print
//! one line per fact: each program also runs natively on the host, and the
//! two outputs must be the same. Every recorded run is replayed and must be
//! identical (`Home` does it when dropped).

use rewind_tests::*;
use std::process::Command;

/// Runs guest program `name` natively (with `native_args`) and in rewind
/// (with `args`): both print the same, with no "FAIL" line.
#[track_caller]
fn same_as_native(name: &str, args: &[&str], native_args: &[&str]) -> (Home, Run) {
    let mut cmd = Command::new(guest(name));
    cmd.args(native_args);
    let want = run_command(cmd, DEADLINE);
    assert_eq!(want.code, 0, "natively:\n{want}");
    assert!(!want.stdout.contains("FAIL"), "natively:\n{want}");
    let home = Home::new();
    let run = home.run_guest(name, args);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(
        run.out.stdout, want.stdout,
        "natively:\n{want}\nin rewind:\n{}",
        run.out
    );
    (home, run)
}

#[test]
fn flock_and_record_locks_exclude_as_on_linux() {
    let dir = tempfile::tempdir().unwrap();
    let native = dir.path().join("locked");
    let (home, run) = same_as_native("fs-locks", &[], &[native.to_str().unwrap()]);
    // The waiters were blocked in the calls, and the same every time.
    let events = home.events(&run.id);
    assert!(events.contains("flock(3, 2) = 0"), "{events}");
    let again = home.run_guest("fs-locks", &[]);
    assert_eq!(again.id, run.id);
}

/// `/proc/<pid>/environ` (`guest/tests/proc-environ.c`): a process's own,
/// a child's after its execve with another environment, what the program
/// wrote over its strings, a zombie's (empty): as natively.
#[test]
fn proc_environ_is_the_environment_execve_gave_as_natively() {
    let (home, run) = same_as_native("proc-environ", &[], &[]);
    assert_lines(
        &run.out.stdout,
        &[
            "the child's own (33 bytes):A=1|BB=two words|EMPTY=|NOEQUALS|",
            "after writing over A and setenv (33 bytes):Z=1|BB=two words|EMPTY=|NOEQUALS|",
            "the parent reads the child's (33 bytes):Z=1|BB=two words|EMPTY=|NOEQUALS|",
        ],
    );
    let events = home.events(&run.id);
    assert!(events.contains("/environ"), "{events}");
}

#[test]
fn proc_dev_and_cpu_files_agree_with_the_run() {
    let home = Home::new();
    let run = home.run(&["--cores", "3", "--", &guest_arg("fs-proc")]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert!(!run.out.stdout.contains("FAIL"), "{}", run.out);
    assert!(
        run.out
            .stdout
            .contains("cpuinfo processors: 3, get_nprocs: 3, online: 0-2\n"),
        "{}",
        run.out
    );
    // A parent reads its child's /proc/<pid>/ from the process table.
    assert_lines(
        &run.out.stdout,
        &[
            "ok /proc lists the child",
            "ok /proc/<child>/stat: pid (comm) state ppid pgrp",
            "ok /proc/<child>/status: name, ppid, threads",
            "ok /proc/<child>/cmdline",
            "ok /proc/<child>/task/<tid>/comm",
            "ok /proc/<child>/fd",
            "ok /proc/<zombie>/stat: state Z",
            "ok /proc/<zombie>/status",
            "ok /proc/<child> gone once reaped",
            "ok /proc/self/task/<tid>/comm",
        ],
    );
    // The same facts natively (pids and CPU counts differ there).
    let native = run_command(Command::new(guest("fs-proc")), DEADLINE);
    assert!(!native.stdout.contains("FAIL"), "natively:\n{native}");
}
