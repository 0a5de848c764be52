//! Who may drive a `rewind dap` server (issue 25): over TCP only a client
//! that first sends the token from `$XDG_RUNTIME_DIR/rewind/dap-PORT.token`,
//! over `--socket` only the user who started it. Anyone else is closed
//! without a reply, launches nothing, and leaves one line in the log.

use rewind_tests::dap::{port_of, Server};
use rewind_tests::{host_program, run_command, skipped, Home, DEADLINE};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// One DAP request as framed on the wire.
fn frame(seq: i64, command: &str, arguments: serde_json::Value) -> Vec<u8> {
    let body = serde_json::json!({
        "seq": seq, "type": "request", "command": command, "arguments": arguments,
    })
    .to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// `initialize`, then `launch` recording the example `bank`.
fn initialize_and_launch() -> Vec<u8> {
    let mut b = frame(1, "initialize", serde_json::json!({"adapterID": "rewind"}));
    b.extend(frame(2, "launch", serde_json::json!({"example": "bank"})));
    b
}

/// Everything the server sends until it closes the connection: a refused
/// client must see it closed, not left hanging.
fn reply_until_closed(mut s: impl Read) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("the refused connection was not closed ({e}); got {got:?}"),
        }
    }
}

/// The first message of a DAP stream, read to the end of its body.
fn first_message(mut s: impl Read) -> serde_json::Value {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).expect("a DAP header");
        head.push(b[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let len: usize = head
        .trim()
        .strip_prefix("Content-Length: ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a Content-Length header: {head}"));
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).expect("a DAP body");
    serde_json::from_slice(&body).expect("a JSON message")
}

/// A runtime directory others may enter, so that only Rewind's own modes
/// keep the token and the socket from them.
fn open_runtime_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("rewind-runtime-")
        .tempdir()
        .expect("a temporary directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod the runtime directory");
    dir
}

#[test]
fn a_tcp_client_without_the_token_gets_no_reply_and_launches_nothing() {
    let home = Home::new();
    let runtime = open_runtime_dir();
    let (server, listening) = Server::start(&home, runtime.path(), &["--port", "0"]);
    let port = port_of(&listening);
    let file = runtime.path().join(format!("rewind/dap-{port}.token"));
    assert!(
        listening.contains(&file.display().to_string()),
        "{listening}"
    );
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o777;
    assert_eq!(mode(&file), 0o600, "the token file's mode");
    assert_eq!(mode(file.parent().unwrap()), 0o700, "its directory's mode");
    let token = std::fs::read_to_string(&file).expect("the token");
    assert_eq!(token.trim().len(), 64, "{token:?}");

    let connect = || {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    let wrong = format!("{}\n", "0".repeat(64));
    for (first, why) in [
        (String::new(), "it presented no token"),
        (wrong, "it presented a wrong token"),
    ] {
        let mut s = connect();
        s.write_all(first.as_bytes()).unwrap();
        s.write_all(&initialize_and_launch()).unwrap();
        let got = reply_until_closed(&s);
        assert!(
            got.is_empty(),
            "a refused client got {:?}",
            String::from_utf8_lossy(&got)
        );
        let line = server.line();
        assert!(
            line.contains("closed a connection from 127.0.0.1:") && line.contains(why),
            "{line}"
        );
    }
    assert_eq!(
        home.unreplayed_runs(),
        Vec::<String>::new(),
        "a refused client launched"
    );

    // The token opens a session.
    let mut s = connect();
    s.write_all(token.as_bytes()).unwrap();
    s.write_all(&frame(
        1,
        "initialize",
        serde_json::json!({"adapterID": "rewind"}),
    ))
    .unwrap();
    let reply = first_message(&s);
    assert_eq!(reply["command"], "initialize", "{reply}");
    assert_eq!(reply["success"], true, "{reply}");
    drop(server);
    assert!(!file.exists(), "the token file outlived its server");
}

/// A local user made for the test, removed after it.
struct OtherUser(String);

impl OtherUser {
    fn create() -> Option<OtherUser> {
        if unsafe { libc::geteuid() } != 0 {
            skipped("making a second local user needs root");
            return None;
        }
        // One a test: the tests of this binary run at once.
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("rwtrust{}x{n}", std::process::id());
        let mut add = Command::new("useradd");
        add.args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            &name,
        ]);
        let out = run_command(add, DEADLINE);
        assert_eq!(out.code, 0, "useradd {name}:\n{out}");
        Some(OtherUser(name))
    }

    /// `program ARGS` under this user's uid and gid, no supplementary groups.
    fn run(&self, program: &str, args: &[&str]) -> rewind_tests::Output {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={}", self.0))
            .arg(format!("--regid={}", self.0))
            .args(["--clear-groups", "--", program])
            .args(args);
        run_command(cmd, DEADLINE)
    }
}

impl Drop for OtherUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.0).status();
    }
}

#[test]
fn another_local_user_cannot_read_the_token_or_use_the_socket() {
    let Some(python) = host_program("/usr/bin/python3", "python3") else {
        return;
    };
    let Some(other) = OtherUser::create() else {
        return;
    };
    let home = Home::new();
    let runtime = open_runtime_dir();
    let (tcp, listening) = Server::start(&home, runtime.path(), &["--port", "0"]);
    let file = runtime
        .path()
        .join(format!("rewind/dap-{}.token", port_of(&listening)));
    let cat = other.run("/bin/cat", &[file.to_str().unwrap()]);
    assert_ne!(cat.code, 0, "{} read the token:\n{cat}", other.0);
    assert!(cat.stderr.contains("Permission denied"), "{cat}");
    drop(tcp);

    let sock: PathBuf = runtime.path().join("dap.sock");
    let (_server, _) = Server::start(&home, runtime.path(), &["--socket", sock.to_str().unwrap()]);
    assert_eq!(std::fs::metadata(&sock).unwrap().mode() & 0o777, 0o600);
    let connect = "import socket, sys\n\
                   s = socket.socket(socket.AF_UNIX)\n\
                   s.connect(sys.argv[1])\n\
                   print('connected')\n";
    let out = other.run(&python, &["-c", connect, sock.to_str().unwrap()]);
    assert_ne!(out.code, 0, "{} connected to the socket:\n{out}", other.0);
    assert!(out.stderr.contains("PermissionError"), "{out}");
    assert!(!out.stdout.contains("connected"), "{out}");

    // Its owner is served.
    let mut s = std::os::unix::net::UnixStream::connect(&sock).expect("connect as the owner");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(&frame(
        1,
        "initialize",
        serde_json::json!({"adapterID": "rewind"}),
    ))
    .unwrap();
    let reply = first_message(&s);
    assert_eq!(reply["success"], true, "{reply}");
}

/// Scripts run only when a check names them (issue 25): a run made by a
/// check whose property was a host script, carried in a .rwd, is imported,
/// opened (`rewind open`, a DAP session) and checked again without naming
/// the script, and the script never runs.
#[test]
fn importing_and_opening_a_run_never_runs_its_property_script() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let marker = dir.path().join("script-ran");
    let judge = dir.path().join("judge.sh");
    std::fs::write(
        &judge,
        format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&judge, std::fs::Permissions::from_mode(0o755)).unwrap();
    let made = Home::new();
    let script = format!("script={}", judge.display());
    let (_, report) = made.check_json(&[
        "--example",
        "bank",
        "--schedules",
        "1",
        "--keep",
        "all",
        "--property",
        &script,
    ]);
    assert_eq!(report["properties"][0], script.as_str(), "{report}");
    assert!(marker.exists(), "the check that names the script runs it");
    std::fs::remove_file(&marker).unwrap();
    let run = report["tried"][0]["run"]
        .as_str()
        .expect("schedule 1's run")
        .to_string();
    let rwd = dir.path().join("checked.rwd");
    made.ok(&["export", &run, "--replayable", "-o", rwd.to_str().unwrap()]);

    let home = Home::new();
    home.ok(&["import", rwd.to_str().unwrap()]);
    home.ok(&["open", &run]);
    {
        let mut dap = rewind_tests::dap::Client::start(home.path());
        dap.open(serde_json::json!({"run": run}));
        dap.request("next", serde_json::json!({"threadId": dap.tid}), true);
    }
    // A check of the run that names no script runs none.
    home.check_json(&["--run", &run, "--schedule-from", "10", "--schedules", "1"]);
    assert!(
        !marker.exists(),
        "importing, opening or checking the run ran its check's script"
    );
    home.replay_identical(&run);
}

/// `rewind gdb` without `--listen` serves the gdb it starts on a Unix
/// socket of mode 0600 in a directory of mode 0700, not on a loopback port
/// anyone could take first: another local user cannot connect to it, while
/// the session is served.
#[test]
fn another_local_user_cannot_take_the_gdb_session() {
    let Some(python) = host_program("/usr/bin/python3", "python3") else {
        return;
    };
    let Some(other) = OtherUser::create() else {
        return;
    };
    let home = Home::new();
    let run = home.run(&["-q", "--example", "bank"]);
    let tmp = open_runtime_dir();
    let probe = tmp.path().join("probe.out");
    // Run by gdb once it is connected: the socket's mode, then a connection
    // to it as the other user.
    let connect = "import socket, sys\n\
                   s = socket.socket(socket.AF_UNIX)\n\
                   s.connect(sys.argv[1])\n\
                   print('connected')\n";
    let script = format!(
        "shell for s in {tmp}/rewind-gdb-*/gdb.sock; do \
         stat -c 'mode=%a' \"$s\" > {probe}; stat -c 'dir=%a' \"$(dirname \"$s\")\" >> {probe}; \
         setpriv --reuid={u} --regid={u} --clear-groups -- {python} -c \"{connect}\" \"$s\" >> {probe} 2>&1; \
         echo exit=$? >> {probe}; done",
        tmp = tmp.path().display(),
        probe = probe.display(),
        u = other.0,
    );
    let out = home.rewind_env(
        &[
            "gdb",
            &run.id,
            "10",
            "--",
            "-nx",
            "-batch",
            "-ex",
            &script,
            "-ex",
            "info threads",
        ],
        &[("TMPDIR", tmp.path().to_str().unwrap())],
    );
    assert_eq!(out.code, 0, "{out}");
    assert!(out.stdout.contains("Thread 1.1000"), "{out}");
    let probe = std::fs::read_to_string(&probe).expect("gdb ran the probe");
    assert!(
        probe.contains("mode=600") && probe.contains("dir=700"),
        "{probe}"
    );
    assert!(probe.contains("PermissionError"), "{probe}");
    assert!(
        !probe.contains("connected"),
        "{} took the session:\n{probe}",
        other.0
    );
    assert!(!probe.contains("exit=0"), "{probe}");
}
