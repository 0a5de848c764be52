//! What the tests of `rewind dap` share: running a scenario of the
//! DebugClient of `@vscode/debugadapter-testsupport` (tests/dap-client,
//! installed by scripts/setup-tests) under Node.js against the built binary.

use crate::{rewind_bin, run_command, Home, Output, DEADLINE};
use std::io::Write;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The DebugClient scenarios' directory.
pub fn client_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dap-client")
}

/// Runs `node --test` on `script` in tests/dap-client with `REWIND_BIN` and
/// `env` set, and asserts that every test passed.
#[track_caller]
pub fn debug_client(script: &str, env: &[(&str, &std::ffi::OsStr)]) -> Output {
    let dir = client_dir();
    assert!(
        dir.join("node_modules/@vscode/debugadapter-testsupport")
            .exists(),
        "{} has no node_modules: run scripts/setup-tests",
        dir.display()
    );
    let mut cmd = Command::new("node");
    cmd.arg("--test")
        .arg("--test-reporter=tap")
        .arg(script)
        .current_dir(&dir)
        .env("REWIND_BIN", rewind_bin());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_command(cmd, Duration::from_secs(600));
    out.assert_tap_passed(&format!("node --test {script}"));
    out
}

/// A guest source file's path (`guest/tests/NAME`), for the scenarios that
/// find lines in it.
pub fn guest_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../guest/tests")
        .join(name)
        .canonicalize()
        .unwrap_or_else(|e| panic!("guest/tests/{name}: {e}"))
}

/// A raw DAP connection to `rewind dap`, over its standard input and output
/// (the benchmarks that time requests in one adapter process) or to a
/// `rewind dap --port` server with its token (the soak test): requests out,
/// messages in (read by a thread).
pub struct Client {
    child: Option<std::process::Child>,
    to: Box<dyn std::io::Write + Send>,
    /// The connection, when over TCP.
    sock: Option<std::net::TcpStream>,
    rx: std::sync::mpsc::Receiver<serde_json::Value>,
    seq: i64,
    /// The thread of the last stop.
    pub tid: i64,
}

/// Reads DAP frames from `out` into a channel until it ends.
fn read_messages(
    out: impl std::io::Read + Send + 'static,
) -> std::sync::mpsc::Receiver<serde_json::Value> {
    use std::io::{BufRead, BufReader, Read};
    let mut out = BufReader::new(out);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || loop {
        let mut len = 0usize;
        loop {
            let mut line = String::new();
            if out.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim();
            if line.is_empty() {
                break;
            }
            if let Some(n) = line.strip_prefix("Content-Length: ") {
                len = n.parse().expect("a length");
            }
        }
        let mut body = vec![0; len];
        if out.read_exact(&mut body).is_err() {
            return;
        }
        let Ok(v) = serde_json::from_slice(&body) else {
            return;
        };
        if tx.send(v).is_err() {
            return;
        }
    });
    rx
}

impl Client {
    /// `rewind dap` with this `REWIND_HOME`.
    pub fn start(home: &Path) -> Client {
        let mut child = Command::new(rewind_bin())
            .arg("dap")
            .env("REWIND_HOME", home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("rewind dap starts");
        let stdin = child.stdin.take().expect("stdin");
        let rx = read_messages(child.stdout.take().expect("stdout"));
        Client {
            child: Some(child),
            to: Box::new(stdin),
            sock: None,
            rx,
            seq: 0,
            tid: 1000,
        }
    }

    /// A connection to `rewind dap --port PORT` that presents `token` (the
    /// line of its token file) first.
    pub fn connect(port: u16, token: &str) -> std::io::Result<Client> {
        use std::io::Write;
        let mut sock = std::net::TcpStream::connect(("127.0.0.1", port))?;
        writeln!(sock, "{}", token.trim())?;
        let rx = read_messages(sock.try_clone()?);
        Ok(Client {
            child: None,
            to: Box::new(sock.try_clone()?),
            sock: Some(sock),
            rx,
            seq: 0,
            tid: 1000,
        })
    }

    /// Sends a request; its seq.
    pub fn send(&mut self, command: &str, args: serde_json::Value) -> std::io::Result<i64> {
        self.seq += 1;
        let body = serde_json::json!({"seq": self.seq, "type": "request", "command": command, "arguments": args})
            .to_string();
        write!(self.to, "Content-Length: {}\r\n\r\n{body}", body.len())?;
        self.to.flush()?;
        Ok(self.seq)
    }

    /// Sends a request and waits for its response and, when `stop` and it
    /// succeeded, for the `stopped` event after it (whose thread becomes
    /// `tid`). The response's body, or its error message.
    pub fn try_request(
        &mut self,
        command: &str,
        args: serde_json::Value,
        stop: bool,
    ) -> Result<serde_json::Value, String> {
        let seq = self.send(command, args).expect("write to rewind dap");
        let mut response = None;
        let mut stopped = !stop;
        while response.is_none() || !stopped {
            let m = self
                .rx
                .recv_timeout(Duration::from_secs(300))
                .unwrap_or_else(|_| panic!("no answer from rewind dap to {command}"));
            if m["type"] == "response" && m["request_seq"] == seq {
                if m["success"] != true {
                    return Err(m["message"].as_str().unwrap_or_default().to_string());
                }
                response = Some(m["body"].clone());
            } else if m["type"] == "event" && m["event"] == "stopped" {
                stopped = true;
                self.tid = m["body"]["threadId"].as_i64().unwrap_or(self.tid);
            }
        }
        Ok(response.expect("a response"))
    }

    /// `try_request`, which must succeed.
    #[track_caller]
    pub fn request(
        &mut self,
        command: &str,
        args: serde_json::Value,
        stop: bool,
    ) -> serde_json::Value {
        self.try_request(command, args, stop)
            .unwrap_or_else(|e| panic!("{command}: {e}"))
    }

    /// `request`, timed.
    pub fn timed(
        &mut self,
        command: &str,
        args: serde_json::Value,
        stop: bool,
    ) -> (Duration, serde_json::Value) {
        let t = std::time::Instant::now();
        let body = self.request(command, args, stop);
        (t.elapsed(), body)
    }

    /// Whether the response to request `seq` has come, among the messages
    /// that came so far (read and dropped: for a client about to leave).
    pub fn answered(&mut self, seq: i64) -> bool {
        self.rx
            .try_iter()
            .any(|m| m["type"] == "response" && m["request_seq"] == seq)
    }

    /// The next message `want` accepts, dropping those before it; None when
    /// the adapter's output ended first.
    pub fn wait_for(
        &mut self,
        want: impl Fn(&serde_json::Value) -> bool,
    ) -> Option<serde_json::Value> {
        loop {
            match self.rx.recv_timeout(Duration::from_secs(300)) {
                Ok(m) if want(&m) => return Some(m),
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
                Err(_) => panic!("no message from rewind dap in 300 s"),
            }
        }
    }

    /// How `rewind dap` (started by `start`) ended, once it has; a guard
    /// of 300 s against a test that would wait forever.
    pub fn exit_status(&mut self) -> std::process::ExitStatus {
        let child = self
            .child
            .as_mut()
            .expect("a rewind dap this client started");
        for _ in 0..3000 {
            if let Some(status) = child.try_wait().expect("wait for rewind dap") {
                return status;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("rewind dap is still running");
    }

    /// Closes a TCP connection as a client that crashed or lost its network
    /// would: no `disconnect`, whatever it was waiting for.
    pub fn hang_up(self) {
        if let Some(s) = &self.sock {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// `initialize`, `launch` with these arguments and
    /// `configurationDone`, until the first stop.
    pub fn open(&mut self, launch: serde_json::Value) {
        self.request(
            "initialize",
            serde_json::json!({"adapterID": "rewind"}),
            false,
        );
        self.send("launch", launch).expect("write to rewind dap");
        self.request("configurationDone", serde_json::json!({}), true);
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.send("disconnect", serde_json::json!({}));
        if let Some(c) = &mut self.child {
            let _ = c.wait();
        }
    }
}

/// A `rewind dap` server and the lines of its log.
pub struct Server {
    pub child: Child,
    log: mpsc::Receiver<String>,
}

impl Server {
    /// `rewind dap ARGS` with this home and runtime directory, once it says
    /// where it listens; that line is returned too.
    pub fn start(home: &Home, runtime: &Path, args: &[&str]) -> (Server, String) {
        Server::start_env(home, runtime, args, &[])
    }

    /// `start`, with these variables in its environment too.
    pub fn start_env(
        home: &Home,
        runtime: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Server, String) {
        let mut child = Command::new(rewind_bin())
            .arg("dap")
            .args(args)
            .env("REWIND_HOME", home.path())
            .env("XDG_RUNTIME_DIR", runtime)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rewind dap starts");
        let err = BufReader::new(child.stderr.take().expect("stderr"));
        let (tx, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in err.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let server = Server { child, log };
        let first = server.line();
        assert!(first.contains("dap listening on"), "{first}");
        (server, first)
    }

    /// The next line of the server's log.
    pub fn line(&self) -> String {
        self.log
            .recv_timeout(DEADLINE)
            .expect("a line in the server's log")
    }

    /// The lines of its log that came so far.
    pub fn lines_so_far(&self) -> Vec<String> {
        self.log.try_iter().collect()
    }
}

impl Drop for Server {
    /// SIGTERM, as a person's Ctrl-C or a service manager stops it.
    fn drop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// The port in the server's `listening on 127.0.0.1:N` line.
pub fn port_of(line: &str) -> u16 {
    line.split("127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line}"))
}

/// The median of some durations.
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
