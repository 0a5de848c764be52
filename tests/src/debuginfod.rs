//! A real `debuginfod` server for the tests and the benchmark: Debian's,
//! started on a free loopback port over one directory, killed when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `debuginfod` process serving one directory; killed when dropped.
pub struct Server {
    child: Child,
    port: u16,
    _db: tempfile::TempDir,
}

impl Server {
    pub fn start(dir: &Path) -> Server {
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
            .expect("debuginfod (scripts/setup-tests installs it)");
        Server {
            child,
            port,
            _db: db,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Waits (bounded) until it answers for `build_id`: its first scan is done.
    pub fn wait_for(&self, build_id: &str) {
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

    pub fn stop(mut self) {
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
pub fn build_id(exe: &Path) -> String {
    let out = Command::new("readelf").arg("-n").arg(exe).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .expect("the split program keeps its build id")
}

/// The environment that has a debuginfod client ask the server at `url`
/// and keep what it downloads in `cache`.
pub fn client_env<'a>(url: &'a str, cache: &'a Path) -> [(&'static str, &'a str); 2] {
    [
        ("DEBUGINFOD_URLS", url),
        (
            "DEBUGINFOD_CACHE_PATH",
            cache.to_str().expect("a UTF-8 path"),
        ),
    ]
}

/// [`split_mark_program`] in `dir`, served by a [`Server`] that answers for
/// it already: the stripped program and the server.
pub fn served_mark_program(dir: &Path) -> (std::path::PathBuf, Server) {
    let (exe, served) = split_mark_program(dir);
    let server = Server::start(&served);
    server.wait_for(&build_id(&exe));
    (exe, server)
}

/// `MARK_PROGRAM` built in `dir` (`prog.c`, `-static -g -O0`), its debug
/// info split off into `served/prog.debug` (the directory a [`Server`]
/// serves) and the program stripped, build id kept, made older than its
/// source so that the host's copy of the source is refused: the stripped
/// program and the served directory.
pub fn split_mark_program(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let src = dir.join("prog.c");
    std::fs::write(&src, crate::MARK_PROGRAM).unwrap();
    let full = dir.join("prog-full");
    let exe = dir.join("prog");
    let served = dir.join("served");
    std::fs::create_dir(&served).unwrap();
    let debug = served.join("prog.debug");
    let run = crate::tool;
    run(
        "cc",
        &[
            "-static".as_ref(),
            "-g".as_ref(),
            "-O0".as_ref(),
            src.as_os_str(),
            "-o".as_ref(),
            full.as_os_str(),
        ],
    );
    run(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            full.as_os_str(),
            debug.as_os_str(),
        ],
    );
    run(
        "objcopy",
        &["--strip-debug".as_ref(), full.as_os_str(), exe.as_os_str()],
    );
    run(
        "touch",
        &["-d".as_ref(), "2020-01-01".as_ref(), exe.as_os_str()],
    );
    (exe, served)
}
