//! Debug info from a real debuginfod server: `deadlock-split` has no DWARF
//! (split off into a separate file, the build id kept), and only Debian's
//! `debuginfod`, started here on loopback over a directory holding that file,
//! serves it. Reports and `rewind where` then name source lines, the file
//! is downloaded once, and with the server stopped there is a clear message
//! and frames named by symbol.

use rewind_tests::{guest, guest_arg, Home, Output};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `debuginfod` process serving one directory; killed when dropped.
struct Server {
    child: Child,
    port: u16,
    _db: tempfile::TempDir,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let db = tempfile::tempdir().unwrap();
        let child = Command::new("debuginfod")
            .arg("-F")
            .arg("-p")
            .arg(port.to_string())
            .arg("-d")
            .arg(db.path().join("db.sqlite"))
            .arg(dir)
            // Not a federation: it answers from the directory only.
            .env_remove("DEBUGINFOD_URLS")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("debuginfod (scripts/setup installs it)");
        Server {
            child,
            port,
            _db: db,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Waits (bounded) until it answers for `build_id`: its first scan is done.
    fn wait_for(&self, build_id: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let path = format!("/buildid/{build_id}/debuginfo");
        while Instant::now() < deadline {
            if http_status(self.port, &path) == Some(200) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("debuginfod on port {} never served {path}", self.port);
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status of a GET request (debuginfod answers GET only), None when
/// nothing answers.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut head = Vec::new();
    s.read_to_end(&mut head).ok()?;
    let line = String::from_utf8_lossy(&head);
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The build id of an ELF file, as `readelf -n` prints it.
fn build_id(exe: &Path) -> String {
    let out = Command::new("readelf").arg("-n").arg(exe).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("the split program keeps its build id")
}

fn downloads(out: &Output) -> usize {
    out.stderr
        .lines()
        .filter(|l| l.contains("rewind: downloaded debug info"))
        .count()
}

#[test]
fn split_debug_info_comes_from_debuginfod_once_and_its_absence_is_said() {
    let exe = guest("deadlock-split");
    let id = build_id(&exe);
    let server = Server::start(&guest("split-debug"));
    server.wait_for(&id);
    let cache = tempfile::tempdir().unwrap();
    let cache_path = cache.path().to_str().unwrap().to_string();
    let url = server.url();
    let env = [
        ("DEBUGINFOD_URLS", url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", cache_path.as_str()),
    ];
    let h = Home::new();
    let prog = guest_arg("deadlock-split");

    // Without debuginfod the report names places by symbol only.
    let plain = h.rewind_env(&["run", "--", &prog], &[("DEBUGINFOD_URLS", "")]);
    assert_eq!(plain.code, 125, "{plain}");
    assert!(!plain.stderr.contains("deadlock.c:"), "{plain}");
    assert!(plain.stderr.contains("__lll_lock_wait+0x"), "{plain}");

    // With it, the deadlock report names the lines: downloaded once.
    let out = h.rewind_env(&["run", "--", &prog], &env);
    assert_eq!(out.code, 125, "{out}");
    let status = rewind_tests::parse_status(&out).unwrap();
    let run = status.id;
    let waits = line_of("pthread_mutex_lock(&audit); /* waits forever");
    assert!(
        out.stderr
            .contains(&format!("from transfer (deadlock.c:{waits})")),
        "{out}"
    );
    assert_eq!(downloads(&out), 1, "{out}");
    assert!(cache.path().join(&id).join("debuginfo").is_file());

    // `where` reads the cache: source lines and the source, no download.
    // At the last step every thread waits.
    let step = status.steps.unwrap().to_string();
    let w = h.rewind_env(&["where", &run, &step, "--tid", "1001"], &env);
    assert_eq!(w.code, 0, "{w}");
    assert!(
        w.stdout
            .contains(&format!("at  transfer (deadlock.c:{waits})")),
        "{w}"
    );
    assert!(w.stdout.contains("waits forever: auditor holds it"), "{w}");
    assert_eq!(downloads(&w), 0, "downloaded twice: {w}");

    // The server stopped and nothing cached: a clear message, frames by symbol.
    server.stop();
    let empty = tempfile::tempdir().unwrap();
    let env = [
        ("DEBUGINFOD_URLS", url.as_str()),
        ("DEBUGINFOD_CACHE_PATH", empty.path().to_str().unwrap()),
    ];
    let w = h.rewind_env(&["where", &run, &step, "--tid", "1001"], &env);
    assert_eq!(w.code, 0, "{w}");
    assert!(
        w.stderr
            .contains(&format!("debuginfod server {url} cannot be reached")),
        "{w}"
    );
    assert!(w.stderr.contains("named by symbol"), "{w}");
    assert!(w.stdout.contains("transfer+0x"), "{w}");
    assert!(!w.stdout.contains("deadlock.c:"), "{w}");

    h.replay_identical(&run);
}

fn line_of(needle: &str) -> u32 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest/tests/deadlock.c");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1
}
