//! What the tests of `rewind dap` share: running a scenario of the
//! DebugClient of `@vscode/debugadapter-testsupport` (tests/dap-client,
//! installed by scripts/setup-tests) under Node.js against the built binary.

use crate::{rewind_bin, run_command, Output};
use std::path::{Path, PathBuf};
use std::process::Command;
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
    assert_eq!(out.code, 0, "node --test {script} failed:\n{out}");
    assert!(out.stdout.contains("# fail 0"), "{out}");
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

/// A raw DAP connection to `rewind dap` over its standard input and output,
/// for the benchmarks that time requests in one adapter process: requests
/// out, messages in (read by a thread).
pub struct Client {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    rx: std::sync::mpsc::Receiver<serde_json::Value>,
    seq: i64,
    /// The thread of the last stop.
    pub tid: i64,
}

impl Client {
    /// `rewind dap` with this `REWIND_HOME`.
    pub fn start(home: &Path) -> Client {
        use std::io::{BufRead, BufReader, Read};
        let mut child = Command::new(rewind_bin())
            .arg("dap")
            .env("REWIND_HOME", home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("rewind dap starts");
        let stdin = child.stdin.take().expect("stdin");
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
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
        Client {
            child,
            stdin,
            rx,
            seq: 0,
            tid: 1000,
        }
    }

    /// Sends a request; its seq.
    pub fn send(&mut self, command: &str, args: serde_json::Value) -> std::io::Result<i64> {
        use std::io::Write;
        self.seq += 1;
        let body = serde_json::json!({"seq": self.seq, "type": "request", "command": command, "arguments": args})
            .to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len())?;
        self.stdin.flush()?;
        Ok(self.seq)
    }

    /// Sends a request and waits for its response (which must succeed) and,
    /// when `stop`, for the `stopped` event after it (whose thread becomes
    /// `tid`). The response's body.
    pub fn request(
        &mut self,
        command: &str,
        args: serde_json::Value,
        stop: bool,
    ) -> serde_json::Value {
        let seq = self.send(command, args).expect("write to rewind dap");
        let mut response = None;
        let mut stopped = !stop;
        while response.is_none() || !stopped {
            let m = self
                .rx
                .recv_timeout(Duration::from_secs(300))
                .expect("an answer from rewind dap");
            if m["type"] == "response" && m["request_seq"] == seq {
                assert_eq!(m["success"], true, "{command}: {m}");
                response = Some(m["body"].clone());
            } else if m["type"] == "event" && m["event"] == "stopped" {
                stopped = true;
                self.tid = m["body"]["threadId"].as_i64().unwrap_or(self.tid);
            }
        }
        response.expect("a response")
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
        let _ = self.child.wait();
    }
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
