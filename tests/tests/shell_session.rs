//! `rewind shell` as a person uses it: on a pseudo-terminal, at a step of a
//! recorded run, typing commands to busybox's shell inside the machine. It
//! sees the run's files as they were at that step, in the working directory
//! of the run's process, and leaves the run and the store as they were.

use rewind_tests::{rewind_bin, Home};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A pseudo-terminal: (master, slave).
fn openpty() -> (std::fs::File, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors it opened; null name, termios and winsize are allowed.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both are open descriptors owned by nobody else.
    unsafe {
        (
            std::fs::File::from_raw_fd(master),
            OwnedFd::from_raw_fd(slave),
        )
    }
}

/// Runs `rewind shell ARGS` on a new terminal, types `input`, and returns
/// everything the terminal showed and the exit status.
fn shell_on_a_terminal(home: &Home, args: &[&str], input: &str) -> (String, Option<i32>) {
    let (mut master, slave) = openpty();
    let mut child = Command::new(rewind_bin())
        .arg("shell")
        .args(args)
        .env("REWIND_HOME", home.path())
        .stdin(Stdio::from(slave.try_clone().expect("dup")))
        .stdout(Stdio::from(slave.try_clone().expect("dup")))
        .stderr(Stdio::from(slave))
        .spawn()
        .expect("rewind shell starts");
    master.write_all(input.as_bytes()).expect("typing");
    let mut reader = master.try_clone().expect("dup");
    let shown = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the last slave descriptor is closed: the session is over.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            all.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&all).into_owned()
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rewind shell did not end in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(master);
    (shown.join().expect("reader"), status.code())
}

#[test]
fn a_shell_at_a_step_sees_the_runs_files_there_and_leaves_the_run_as_it_was() {
    let home = Home::new();
    let prog = rewind_tests::guest_arg("write-twice");
    let run = home.run(&["--cwd", "/tmp", "--", &prog]);
    let first = home.first_call(&run.id, "write");
    let before = home.ok(&["ls", "--json"]).stdout;
    let events = home.events(&run.id);

    let host = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(host.path().join("note"), "from the host\n").expect("note");
    let with = host.path().to_str().expect("a UTF-8 path");
    let dir = host
        .path()
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a name");
    let (shown, code) = shell_on_a_terminal(
        &home,
        &[&run.id, &first.to_string(), "--with", with],
        &format!(
            "pwd\nls /\ncat /out.txt\nsleep 30; echo slept\ncat /rewind/with/{dir}/note\nexit 7\n"
        ),
    );
    assert_eq!(
        code,
        Some(7),
        "the shell's exit status is rewind's:\n{shown}"
    );
    let prompt = format!("rewind {}@{first}$ ", &run.id[..8]);
    assert!(
        shown.contains(&prompt),
        "the prompt names the run and step:\n{shown}"
    );
    let lines: Vec<&str> = shown
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .map(|l| l.trim_start_matches(&prompt))
        .collect();
    assert!(
        lines.contains(&"/tmp"),
        "pwd is the process's working directory:\n{shown}"
    );
    assert!(
        lines.contains(&"out.txt"),
        "ls / lists the file the run made:\n{shown}"
    );
    // The file as it was after the first write: the second is later.
    assert!(
        lines.contains(&"first"),
        "cat shows the run's write:\n{shown}"
    );
    assert!(
        !lines.contains(&"second"),
        "and nothing the run wrote later:\n{shown}"
    );
    // sleep is virtual time: 30 s pass at once.
    assert!(lines.contains(&"slept"), "{shown}");
    assert!(
        lines.contains(&"from the host"),
        "--with puts host files under /rewind/with:\n{shown}"
    );

    // The recording and the store are as they were.
    assert_eq!(
        home.ok(&["ls", "--json"]).stdout,
        before,
        "no run was added"
    );
    assert_eq!(home.events(&run.id), events);
    home.replay_identical(&run.id);
}

#[test]
fn a_shell_past_the_end_or_in_no_such_process_is_one_line_and_nothing_written() {
    let home = Home::new();
    let run = home.run_guest("write-twice", &[]);
    let past = home.rewind(&["shell", &run.id, "999999"]);
    assert_eq!(past.code, 2, "{past}");
    assert!(past.stderr.contains("past the end"), "{past}");
    let nobody = home.rewind(&["shell", &run.id, "3", "--pid", "4242"]);
    assert_ne!(nobody.code, 0, "{nobody}");
    assert_eq!(nobody.stderr.lines().count(), 1, "one line: {nobody}");
    assert!(nobody.stderr.contains("no process 4242"), "{nobody}");
    home.replay_identical(&run.id);
}

#[test]
fn a_shell_in_another_process_has_its_environment_and_directory() {
    let home = Home::new();
    let prog = rewind_tests::guest_arg("shell-env");
    let run = home.run(&["--env", "ROLE=the-run", "--env", "PATH=/bin", "--", &prog]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let log = home.log(&run.id);
    let child = log
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .unwrap_or_else(|| panic!("no child line:\n{log}"))
        .trim()
        .to_string();
    // The child's sleep, after its execve.
    let sleep = home.first_call(&run.id, "clock_nanosleep");
    let script = "echo role=$ROLE; pwd; echo path=$PATH\nexit\n";
    let (shown, code) = shell_on_a_terminal(
        &home,
        &[&run.id, &sleep.to_string(), "--pid", &child],
        script,
    );
    assert_eq!(code, Some(0), "{shown}");
    let lines: Vec<&str> = shown.lines().map(|l| l.trim_end_matches('\r')).collect();
    let has = |want: &str| lines.iter().any(|l| l.ends_with(want));
    assert!(
        has("role=child-of-exec"),
        "the child's own environment:\n{shown}"
    );
    assert!(has("/tmp/work"), "the child's working directory:\n{shown}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("path=/rewind/with:/opt/child/bin:/rewind/busybox")),
        "its PATH between the shell's directories:\n{shown}"
    );
    // The first process still has the run's.
    let (shown, _) = shell_on_a_terminal(
        &home,
        &[&run.id, &sleep.to_string(), "--pid", "1000"],
        script,
    );
    let lines: Vec<&str> = shown.lines().map(|l| l.trim_end_matches('\r')).collect();
    assert!(
        lines.iter().any(|l| l.ends_with("role=the-run")),
        "the run's environment in the first process:\n{shown}"
    );
    home.replay_identical(&run.id);
}
