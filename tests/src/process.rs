//! Running commands: the `rewind` binary under test, a command with a
//! deadline and its output captured, as a user without privileges, and
//! what the host says of the children's cost and its own load.

use crate::Output;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long any one `rewind` command may take before the test kills it and
/// fails: a hung engine must fail a test, not hang the suite.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// The `rewind` binary under test.
pub fn rewind_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("REWIND_BIN") {
        return PathBuf::from(bin);
    }
    // target/<profile>/deps/<test>-<hash>  ->  target/<profile>/rewind
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir = exe.parent().expect("a parent directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("target/<profile>");
    }
    let bin = dir.join("rewind");
    assert!(
        bin.exists(),
        "{} does not exist: build it first (`cargo build --workspace`, or scripts/test), \
         or set REWIND_BIN",
        bin.display()
    );
    static FRESH: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    FRESH.get_or_init(|| assert_not_stale(&bin));
    bin
}

/// Fails when a source of the crates linked into `rewind` is newer than
/// the binary: `cargo test -p rewind-tests` does not rebuild it, and a
/// stale one fails tests for changes long since made or undone.
fn assert_not_stale(bin: &Path) {
    let built = std::fs::metadata(bin).and_then(|m| m.modified());
    let Ok(built) = built else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<PathBuf> = ["vmm/src", "adapter/src", "symbols/src", "nixstore/src"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(path);
            } else if meta.modified().is_ok_and(|t| t > built) {
                panic!(
                    "{} is older than {}: build it first (`cargo build -p rewind-adapter`)",
                    bin.display(),
                    path.display()
                );
            }
        }
    }
}

/// `cmd` as a user without privileges: as it is when the tests do not run as
/// root; as root (CI), inside a new user namespace (`unshare --user`, no
/// mapping), where the process keeps its own files but loses root's right to
/// read and write everyone's: a mode-000 directory is refused to it.
pub fn unprivileged(cmd: Command) -> Command {
    if unsafe { libc::geteuid() } != 0 {
        return cmd;
    }
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--user", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        wrapped.current_dir(d);
    }
    wrapped
}

/// Runs a command with standard input empty, capturing its output, killing it
/// and panicking if it takes longer than `deadline`.
pub fn run_command(cmd: Command, deadline: Duration) -> Output {
    run_command_with_input(cmd, deadline, &[])
}

/// [`run_command`] with `input` on standard input (empty: `/dev/null`).
pub fn run_command_with_input(mut cmd: Command, deadline: Duration, input: &[u8]) -> Output {
    cmd.stdin(if input.is_empty() {
        Stdio::null()
    } else {
        Stdio::piped()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let described = format!("{cmd:?}");
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {described}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_vec();
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(&input);
        });
    }
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the command") {
            break Some(status);
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = Output {
        code: status.map(shell_code).unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned(),
    };
    if status.is_none() {
        panic!("{described} was still running after {deadline:?}; killed it:\n{out}");
    }
    out
}

fn shell_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => -1,
    }
}

/// Runs a build tool (`cc`, `objcopy`, `touch`...) and asserts it succeeded.
#[track_caller]
pub fn tool(cmd: &str, args: &[&std::ffi::OsStr]) {
    let st = Command::new(cmd)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{cmd}: {e} (scripts/setup installs build-essential)"));
    assert!(st.success(), "{cmd} {args:?}: {st}");
}

/// User plus system time of this process's waited-for children so far
/// (what a benchmark's `rewind` processes cost beside their wall time).
pub fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut r);
        r
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(r.ru_utime) + tv(r.ru_stime)
}

/// The host's load averages over 1, 5 and 15 minutes (`/proc/loadavg`),
/// which a benchmark prints beside its wall times.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
