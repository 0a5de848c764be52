//! Bad input: one line on stderr, a non-zero exit, and nothing half-written:
//! `rewind ls` shows nothing and `runs/` holds no finished run.

use rewind_tests::{guest_arg, Home, Output};
use std::os::unix::fs::PermissionsExt;

/// The permission cases run as a user without privileges (root reads and
/// writes everything, and CI runs as root); this shows the restriction holds
/// there, so that a case that passes proves something.
fn unprivileged_is_refused(dir: &std::path::Path) {
    let mut ls = std::process::Command::new("ls");
    ls.arg(dir);
    let out = rewind_tests::run_command(rewind_tests::unprivileged(ls), rewind_tests::DEADLINE);
    assert_ne!(
        out.code, 0,
        "an unprivileged `ls` reads a mode-000 directory:\n{out}"
    );
}

#[track_caller]
fn refused(home: &Home, out: &Output, mentions: &[&str]) {
    assert_ne!(out.code, 0, "{out}");
    let lines = out.stderr_lines();
    assert_eq!(lines.len(), 1, "want one line on stderr:\n{out}");
    for m in mentions {
        assert!(
            lines[0].to_lowercase().contains(&m.to_lowercase()),
            "stderr does not mention {m:?}:\n{out}"
        );
    }
    assert_eq!(
        home.finished_run_dirs(),
        Vec::<String>::new(),
        "a run was left behind"
    );
    let ls = home.ok(&["ls", "--json"]);
    assert_eq!(ls.stdout.trim(), "", "`rewind ls` shows runs");
}

#[test]
fn missing_program() {
    let home = Home::new();
    let missing = home.path().join("no-such-program");
    let missing = missing.to_str().unwrap();
    let out = home.rewind(&["run", "--", missing]);
    refused(&home, &out, &[missing]);
}

#[test]
fn not_an_elf() {
    let home = Home::new();
    let script = home.path().join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho hello\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.to_str().unwrap();
    let out = home.rewind(&["run", "--", script]);
    refused(&home, &out, &[script, "ELF"]);
}

#[test]
fn unreadable_root() {
    let home = Home::new();
    let prog = "/hello";
    // A root that does not exist.
    let gone = home.path().join("no-such-root");
    let out = home.rewind(&["run", "--root", gone.to_str().unwrap(), "--", prog]);
    refused(&home, &out, &[]);
    // A root that is a file.
    let file = home.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let out = home.rewind(&["run", "--root", file.to_str().unwrap(), "--", prog]);
    refused(&home, &out, &[]);
    // A root with no read permission, for a user without privileges.
    let dir = home.path().join("locked");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(rewind_tests::guest("hello"), dir.join("hello")).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o000)).unwrap();
    unprivileged_is_refused(&dir);
    let out = home.rewind_unprivileged(&["run", "--root", dir.to_str().unwrap(), "--", prog]);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    refused(&home, &out, &[dir.to_str().unwrap()]);
}

#[test]
fn unwritable_rewind_home() {
    let base = Home::new();
    let prog = guest_arg("hello");
    // A REWIND_HOME below a regular file can never be created, even by root.
    let file = base.path().join("a-file");
    std::fs::write(&file, "in the way").unwrap();
    let home_under_file = file.join("rewind");
    let out = rewind_tests::run_command(
        {
            let mut c = std::process::Command::new(rewind_tests::rewind_bin());
            c.args(["run", "--", &prog])
                .env("REWIND_HOME", &home_under_file);
            c
        },
        rewind_tests::DEADLINE,
    );
    assert_ne!(out.code, 0, "{out}");
    assert_eq!(
        out.stderr_lines().len(),
        1,
        "want one line on stderr:\n{out}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "in the way");
    // A REWIND_HOME without write permission, for a user without privileges.
    let locked = base.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut touch = std::process::Command::new("touch");
    touch.arg(locked.join("probe"));
    let probe =
        rewind_tests::run_command(rewind_tests::unprivileged(touch), rewind_tests::DEADLINE);
    assert_ne!(
        probe.code, 0,
        "an unprivileged `touch` writes a mode-555 directory:\n{probe}"
    );
    let out = rewind_tests::run_command(
        {
            let mut c = std::process::Command::new(rewind_tests::rewind_bin());
            c.args(["run", "--", &prog]).env("REWIND_HOME", &locked);
            rewind_tests::unprivileged(c)
        },
        rewind_tests::DEADLINE,
    );
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_ne!(out.code, 0, "{out}");
    assert_eq!(
        out.stderr_lines().len(),
        1,
        "want one line on stderr:\n{out}"
    );
    assert_eq!(std::fs::read_dir(&locked).unwrap().count(), 0);
}

#[test]
fn interrupted_run_leaves_no_finished_run() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        let home = Home::new();
        let prog = guest_arg("spin");
        let mut child = std::process::Command::new(rewind_tests::rewind_bin())
            .args(["run", "--", &prog])
            .env("REWIND_HOME", home.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(500));
        unsafe { libc::kill(child.id() as i32, signal) };
        let status = child.wait().unwrap();
        assert!(!status.success(), "signal {signal}: {status:?}");
        assert_eq!(
            home.finished_run_dirs(),
            Vec::<String>::new(),
            "signal {signal}"
        );
        assert_eq!(
            home.ok(&["ls", "--json"]).stdout.trim(),
            "",
            "signal {signal}"
        );
    }
}

/// A manifest.json edited by hand (or by an attacker) is checked before
/// anything is built from it: replay, fork and seek give one line naming
/// the bad value, never a panic.
#[test]
fn a_tampered_manifest_is_one_line_error() {
    for (field, from, to, says) in [
        (
            "mem",
            r#""mem": 2147483648"#,
            r#""mem": 4096"#,
            "manifest: mem 4096",
        ),
        (
            "cores",
            r#""cores": 1"#,
            r#""cores": 0"#,
            "manifest: cores 0",
        ),
        (
            "quantum_ns",
            r#""quantum_ns": 5000"#,
            r#""quantum_ns": 0"#,
            "manifest: quantum_ns 0",
        ),
        ("image", r#""image": ""#, r#""image": "../"#, "image"),
    ] {
        let home = Home::new();
        let run = home.run(&["-q", "--example", "bank"]);
        let path = home.path().join("runs").join(&run.id).join("manifest.json");
        let json = std::fs::read_to_string(&path).unwrap();
        assert!(json.contains(from), "{field}: {json}");
        std::fs::write(&path, json.replacen(from, to, 1)).unwrap();
        for args in [
            vec!["replay", run.id.as_str()],
            vec!["fork", run.id.as_str(), "10", "--schedule", "2", "-q"],
            vec!["cat", run.id.as_str(), "10", "/etc/passwd"],
        ] {
            let out = home.rewind(&args);
            assert_ne!(out.code, 0, "{field}: {args:?}\n{out}");
            // `fork` first says where it starts from; the error itself is one line.
            let lines: Vec<_> = out
                .stderr_lines()
                .into_iter()
                .filter(|l| !l.starts_with("rewind: forking from"))
                .collect();
            assert!(
                lines.len() == 1 && lines[0].contains(says) && !out.stderr.contains("panicked"),
                "{field}: `rewind {}` should say {says:?} in one line:\n{out}",
                args.join(" ")
            );
        }
        // Put the manifest back, so that `Home` replays the run as it was recorded.
        std::fs::write(&path, &json).unwrap();
    }
}
