//! Shell scripts (issue 13): Debian's busybox-static `sh` runs each script
//! in tests/shell/ inside Rewind and natively, and both give the same
//! standard output, standard error and exit status. The scripts cover
//! pipelines, redirections, here-documents, subshells, command
//! substitution, background jobs with `wait`, `trap` on EXIT and on
//! signals, `kill`, `sleep`, `find`, `sort`, `xargs`, `tar` and `gzip`
//! round trips, `#!` scripts, and loops over files the script creates.
//! Busybox runs its own applets (`cat`, `sort`...) by re-executing itself
//! through /proc/self/exe, so every pipeline is fork, exec and pipes.
//! Every recorded run replays identically (`Home` does it when dropped).

use rewind_tests::*;
use std::path::Path;

/// What `rewind run` puts on stderr around the program's own: the lines
/// that start with `rewind: `.
fn program_stderr(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.starts_with("rewind: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Runs tests/shell/NAME.sh with `busybox sh -c` natively (in a fresh
/// directory) and in Rewind (in the overlay's /tmp), asserts that both
/// said and ended the same; the run.
#[track_caller]
fn same_as_native(home: &Home, name: &str) -> Option<Run> {
    let busybox = host_program("/usr/bin/busybox", "busybox-static")?;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("shell/{name}.sh"));
    let script = std::fs::read_to_string(&path).expect("the script");
    let dir = tempfile::tempdir().unwrap();
    let env = ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root"];
    let (want, native) = table::timed(|| {
        native_with_env(
            &env,
            Some(dir.path()),
            &busybox,
            &["sh", "-c", &script],
            b"",
        )
    });
    let (run, wall) =
        table::timed(|| home.run(&["--cwd", "/tmp", "--", &busybox, "sh", "-c", &script]));
    table::figures(&format!("busybox sh {name}.sh"), &run, wall, native);
    assert_eq!(
        run.out.stdout, want.stdout,
        "{name}.sh: standard output differs\nnative:\n{want}\nin rewind:\n{}",
        run.out
    );
    assert_eq!(
        program_stderr(&run.out.stderr),
        want.stderr,
        "{name}.sh: standard error differs\nnative:\n{want}\nin rewind:\n{}",
        run.out
    );
    assert_eq!(
        run.status,
        format!("exited:{}", want.code),
        "{name}.sh: native exit {}:\n{}",
        want.code,
        run.out
    );
    Some(run)
}

#[test]
fn pipelines() {
    let home = Home::new();
    let Some(run) = same_as_native(&home, "pipelines") else {
        return;
    };
    // Each stage is a process of its own, re-executing busybox.
    let events = home.events(&run.id);
    assert!(
        has_event(&events, &["execve(\"/proc/self/exe\""]),
        "{events}"
    );
    assert!(has_event(&events, &["pipe2("]), "{events}");
}

#[test]
fn redirections_and_here_documents() {
    let home = Home::new();
    same_as_native(&home, "redirections");
}

#[test]
fn subshells_and_command_substitution() {
    let home = Home::new();
    same_as_native(&home, "subshells");
}

#[test]
fn background_jobs_wait_and_kill() {
    let home = Home::new();
    let Some(run) = same_as_native(&home, "jobs") else {
        return;
    };
    // The sleeps (2 s, then 1 + 2 + 3 s in parallel) pass on the virtual
    // clock: the run's virtual time covers them.
    let virtual_s: f64 = run
        .line
        .split(", ")
        .find_map(|p| p.strip_suffix("s virtual"))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no virtual time in {}", run.line));
    assert!(virtual_s >= 5.0, "{}", run.line);
}

#[test]
fn traps_on_exit_and_signals() {
    let home = Home::new();
    same_as_native(&home, "traps");
}

#[test]
fn files_find_xargs_tar_and_gzip() {
    let home = Home::new();
    same_as_native(&home, "files");
}

#[test]
fn exit_statuses() {
    let home = Home::new();
    let Some(run) = same_as_native(&home, "status") else {
        return;
    };
    assert_eq!(run.status, "exited:42");
}

#[test]
fn fifos_between_background_writers_and_readers() {
    let home = Home::new();
    let Some(run) = same_as_native(&home, "fifos") else {
        return;
    };
    let events = home.events(&run.id);
    assert!(
        has_event(&events, &["mknodat(", "0o10666", "= 0"]),
        "{events}"
    );
    // The reader's open waited for the writer's, and is recorded once.
    assert!(
        has_event(&events, &["openat(AT_FDCWD, \"p\", O_RDONLY) = 3"]),
        "{events}"
    );
}
