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
        Raw::start_with(home, Command::new(crate::rewind_bin()))
    }

    /// `rewind lsp` with SIGINT ignored, as a shell leaves it for a job it
    /// starts in the background (`&`) and as the server's children inherit.
    pub fn start_ignoring_sigint(home: &Path) -> Raw {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(crate::rewind_bin());
        // SAFETY: signal(2) is async-signal-safe; nothing else runs here.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_IGN);
                Ok(())
            });
        }
        Raw::start_with(home, cmd)
    }

    fn start_with(home: &Path, mut cmd: Command) -> Raw {
        let mut child = cmd
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

    /// `initialize` (with these client capabilities) for the workspace
    /// folder `root`, then `initialized`; gives `root`'s URI.
    pub fn initialize(&mut self, root: &Path, capabilities: Value) -> String {
        let uri = format!("file://{}", root.display());
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"processId": null, "rootUri": uri, "capabilities": capabilities}}),
        );
        self.until(&[1]);
        self.send(serde_json::json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
        uri
    }

    /// A request `id`'s response, the messages before it left out.
    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        let seen = self.until(&[id]);
        seen.into_iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .expect("until returns the response")
    }

    /// `shutdown`, then `exit`: the process must end with status 0.
    pub fn shut_down(mut self, id: u64) {
        self.request(id, "shutdown", Value::Null);
        self.send(serde_json::json!({"jsonrpc": "2.0", "method": "exit"}));
        let status = self.child.wait().expect("rewind lsp ends");
        assert!(status.success(), "rewind lsp exited with {status:?}");
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
    let ws = empty_workspace();
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
    compile(c);
    ws
}

/// A workspace holding `guest/tests/<name>.rs` and, compiled there with -g
/// (static, as the guest build compiles Rust), the program `<name>` and its
/// test harness `<name>-test` (`rustc --test`). It must outlive the `Home`
/// whose runs replay from them.
pub fn rust_workspace(name: &str) -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ws = empty_workspace();
    let file = format!("{name}.rs");
    std::fs::copy(root.join("guest/tests").join(&file), ws.path().join(&file)).expect("the source");
    for (exe, harness) in [(name.to_string(), false), (format!("{name}-test"), true)] {
        let mut c = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()));
        c.args(["--edition", "2021", "-g"]);
        // The program static-pie, the harness as cargo builds it (dynamically
        // linked, with the host's loader and libraries in its image).
        if harness {
            c.arg("--test");
        } else {
            c.args(["-C", "target-feature=+crt-static"]);
        }
        c.args(["-o", &exe, &file]).current_dir(ws.path());
        compile(c);
    }
    ws
}

fn empty_workspace() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("rewind-ws-")
        .tempdir()
        .expect("a temporary workspace")
}

fn compile(c: Command) {
    let out = crate::run_command(c, Duration::from_secs(120));
    assert_eq!(out.code, 0, "the compiler failed:\n{out}");
}
