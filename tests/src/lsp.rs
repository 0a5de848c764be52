//! A raw connection to `rewind lsp` for tests and benchmarks that speak the
//! protocol themselves (frames in, JSON messages out); the editor tests use
//! Neovim's client.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A raw LSP connection to `rewind lsp`: frames in, messages out.
pub struct Raw {
    pub child: std::process::Child,
    stdin: std::process::ChildStdin,
    rx: std::sync::mpsc::Receiver<Value>,
}

impl Raw {
    /// `rewind lsp` with this `REWIND_HOME`.
    pub fn start(home: &Path) -> Raw {
        let mut child = Command::new(crate::rewind_bin())
            .arg("lsp")
            .env("REWIND_HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rewind lsp");
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || loop {
            let mut length = None;
            loop {
                let mut line = String::new();
                if out.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some(v) = line.strip_prefix("Content-Length: ") {
                    length = v.parse::<usize>().ok();
                }
            }
            let mut body = vec![0; length.expect("the server sends Content-Length")];
            out.read_exact(&mut body).unwrap();
            let _ = tx.send(serde_json::from_slice(&body).expect("the server sends JSON"));
        });
        Raw { child, stdin, rx }
    }

    /// Bytes as they are.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.stdin.write_all(bytes).unwrap();
        self.stdin.flush().unwrap();
    }

    /// One message, framed.
    pub fn send(&mut self, msg: Value) {
        let body = msg.to_string();
        self.raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    /// Messages up to the responses with these ids (panics after 60 s).
    pub fn until(&mut self, ids: &[u64]) -> Vec<Value> {
        let mut seen: Vec<Value> = Vec::new();
        let answered = |seen: &[Value], id: u64| {
            seen.iter()
                .any(|m| m["id"] == id && m.get("method").is_none())
        };
        while !ids.iter().all(|id| answered(&seen, *id)) {
            let m = self
                .rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no response to {ids:?}; got {seen:#?}"));
            seen.push(m);
        }
        seen
    }

    /// The next message the server sends, if one comes within `wait`.
    pub fn next(&mut self, wait: Duration) -> Option<Value> {
        self.rx.recv_timeout(wait).ok()
    }
}

/// A workspace (an editor's folder) holding `guest/<dir>/<name>.c`, the SDK
/// header it may include, and its program `<name>` compiled there with -g as
/// the guest build compiles it (`cc -static -O1 -g -pthread`), so the
/// program's line tables name the workspace's file. It must outlive the
/// `Home` whose runs replay from that program.
pub fn workspace(dir: &str, name: &str) -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ws = tempfile::Builder::new()
        .prefix("rewind-ws-")
        .tempdir()
        .expect("a temporary workspace");
    let src = root.join(format!("guest/{dir}/{name}.c"));
    let text = std::fs::read_to_string(&src).expect("the example's source");
    // The SDK header, where the example includes it from.
    let text = text.replace("\"../sdk/rewind.h\"", "\"rewind.h\"");
    std::fs::write(ws.path().join(format!("{name}.c")), text).expect("the source");
    std::fs::copy(root.join("guest/sdk/rewind.h"), ws.path().join("rewind.h")).expect("rewind.h");
    let mut c = Command::new("cc");
    c.args(["-static", "-O1", "-g", "-pthread", "-o", name])
        .arg(format!("{name}.c"))
        .current_dir(ws.path());
    let cc = crate::run_command(c, Duration::from_secs(120));
    assert_eq!(cc.code, 0, "cc failed:\n{cc}");
    ws
}
