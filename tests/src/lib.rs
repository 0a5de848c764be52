//! Helpers for the end-to-end tests: they drive the real `rewind` binary as a
//! person does, each test in its own temporary `REWIND_HOME`.
//!
//! The binary is `target/<profile>/rewind` next to the test executable (the
//! test command builds the workspace first: `cargo build --workspace`), or
//! whatever `REWIND_BIN` names. The guest programs are built by this crate's
//! `build.rs` from `guest/tests/`; [`guest`] finds them.

pub mod dap;
pub mod debuginfod;
pub mod lsp;
pub mod roots;
pub mod table;

use std::cell::RefCell;
use std::collections::BTreeSet;
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

/// A guest program built by `build.rs` (`threads`, `threads-musl`,
/// `threads-rust`, `segv`, `hello-dynamic`, ...).
pub fn guest(name: &str) -> PathBuf {
    let path = Path::new(env!("REWIND_GUESTS")).join(name);
    assert!(path.exists(), "no guest program {}", path.display());
    path
}

/// A guest program that build.rs may leave out (`threads-musl`, without
/// musl-gcc): its path, or None after saying on the test's stderr (not
/// captured, so `cargo test` shows it) that the test is skipped.
pub fn optional_guest(name: &str) -> Option<String> {
    let path = Path::new(env!("REWIND_GUESTS")).join(name);
    if path.exists() {
        return Some(path.to_str().expect("UTF-8 path").to_string());
    }
    skipped(&format!(
        "the guest program {name} was not built (build.rs warned why; \
         scripts/setup-tests installs what it needs)"
    ));
    None
}

/// Says on the test's stderr that the test is skipped, and why: written to
/// the process's stderr, not through the harness's capture, so that
/// `cargo test` shows it even when the test passes.
pub fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// `guest(name)` as a string, for argument lists.
pub fn guest_arg(name: &str) -> String {
    guest(name).to_str().expect("UTF-8 path").to_string()
}

/// Whether this CPU has AVX-512 Foundation (`avx512f` in /proc/cpuinfo).
pub fn cpu_has(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|f| f == flag))
        })
        .unwrap_or(false)
}

/// What a finished command gave.
#[derive(Debug, Clone)]
pub struct Output {
    /// The exit status as a shell reports it (128+signal if the `rewind`
    /// process itself was killed by one: a monitor crash).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The non-empty lines of stderr.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }

    /// The first line of stdout that contains `needle`; panics with the
    /// whole output when none does.
    #[track_caller]
    pub fn stdout_line_with(&self, needle: &str) -> &str {
        match self.stdout.lines().find(|l| l.contains(needle)) {
            Some(line) => line,
            None => panic!("no line with `{needle}` in:\n{self}"),
        }
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let clip = |s: &str| -> String {
            if s.len() > 4000 {
                format!(
                    "{}\n[... {} bytes ...]\n{}",
                    &s[..floor(s, 2000)],
                    s.len(),
                    &s[ceil(s, s.len() - 2000)..]
                )
            } else {
                s.to_string()
            }
        };
        write!(
            f,
            "exit code {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            clip(&self.stdout),
            clip(&self.stderr)
        )
    }
}

fn floor(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// A recorded run, from `rewind run`'s output.
#[derive(Debug, Clone)]
pub struct Run {
    pub out: Output,
    /// The run id from the status line.
    pub id: String,
    /// `exited:3`, `killed:SIGSEGV`, `deadlocked`, `timed-out`.
    pub status: String,
    /// The whole status line: `rewind: run <id> <status> after <N> steps, ...`.
    pub line: String,
    /// The step count from the status line, when it says `after N steps`.
    pub steps: Option<u64>,
}

/// Parses the status line: the last line of stderr that starts with `rewind: run `.
pub fn parse_status(out: &Output) -> Option<Run> {
    let line = out
        .stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())?
        .trim();
    let rest = line.strip_prefix("rewind: run ")?;
    let mut words = rest.split_whitespace();
    let id = words.next()?.to_string();
    let status = words.next()?.trim_end_matches([',', ':']).to_string();
    let steps = line
        .split_once(" after ")
        .and_then(|(_, after)| after.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    Some(Run {
        out: out.clone(),
        id,
        status,
        line: line.to_string(),
        steps,
    })
}

/// The run a `rewind check`'s output names on its `failing: run ID` line:
/// panics when there is none.
#[track_caller]
pub fn failing_run_in(out: &Output) -> String {
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("failing: run "))
        .unwrap_or_else(|| panic!("no failing run in:\n{out}"))
        .trim()
        .to_string()
}

/// The run of the two a `rewind check --json` report narrowed between
/// that a signal killed: the crash the check found.
#[track_caller]
pub fn killed_narrowed_run(report: &serde_json::Value) -> String {
    ["with", "without"]
        .iter()
        .map(|k| &report["narrowed"][k])
        .find(|r| {
            r["status"]
                .as_str()
                .is_some_and(|s| s.starts_with("killed"))
        })
        .and_then(|r| r["run"].as_str())
        .unwrap_or_else(|| panic!("no narrowed run was killed:\n{report:#}"))
        .to_string()
}

/// Where a home is: a temporary directory, or one that stays.
enum HomeDir {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

/// A temporary `REWIND_HOME`, removed when dropped, and the commands that use it.
///
/// Every run recorded in it is replayed and must be identical (the promise of
/// the README's "Tests"): after each command the home notes the runs that
/// appeared in `runs/` (made by `run`, `check`, `fork`, or by a process a
/// test started itself with this `REWIND_HOME`); `replay_identical` checks one
/// when the test wants it at a point; before `remove` or `prune`, and when the
/// home is dropped at the end of a test that passed, every noted run not yet
/// replayed is. Runs that `import` added are not noted: replaying them is the
/// import tests' own business, and only `--replayable` exports can be.
/// A run's directory as made: its inode and birth time. A test damaging
/// files inside it leaves it the same run; a new recording moves a new
/// directory into place.
type RunDir = Option<(u64, Option<std::time::SystemTime>)>;

pub struct Home {
    dir: HomeDir,
    /// Runs present in `runs/` at the last look.
    seen: RefCell<std::collections::BTreeMap<String, RunDir>>,
    /// Runs recorded here and not yet replayed.
    unreplayed: RefCell<BTreeSet<String>>,
    /// False for benchmarks' homes: they measure, the tests check.
    replay_at_drop: bool,
}

impl Default for Home {
    fn default() -> Self {
        Self::new()
    }
}

impl Home {
    pub fn new() -> Home {
        Home {
            dir: HomeDir::Temp(
                tempfile::Builder::new()
                    .prefix("rewind-test-home-")
                    .tempdir()
                    .expect("a temporary directory"),
            ),
            seen: RefCell::default(),
            unreplayed: RefCell::default(),
            replay_at_drop: true,
        }
    }

    /// A home whose runs are not replayed when it is dropped: for the
    /// benchmarks only, which time commands and check none of them twice.
    pub fn unreplayed() -> Home {
        let mut home = Home::new();
        home.replay_at_drop = false;
        home
    }

    /// A home in `dir` that stays after the process (created when
    /// missing), whose runs are not replayed when it is dropped: for a
    /// benchmark that records a long run once and measures it again.
    pub fn kept_at(dir: &Path) -> Home {
        std::fs::create_dir_all(dir).expect("the home directory");
        Home {
            dir: HomeDir::Kept(dir.to_path_buf()),
            seen: RefCell::default(),
            unreplayed: RefCell::default(),
            replay_at_drop: false,
        }
    }

    /// Notes the runs that appeared since the last look; `imported` when the
    /// command that added them was `rewind import`.
    fn note_new_runs(&self, imported: bool) {
        let mut seen = self.seen.borrow_mut();
        let now: std::collections::BTreeMap<String, RunDir> = self
            .finished_run_dirs()
            .into_iter()
            .map(|id| {
                let dir = std::fs::metadata(self.path().join("runs").join(&id)).ok();
                let made = dir.map(|m| {
                    use std::os::unix::fs::MetadataExt;
                    (m.ino(), m.created().ok())
                });
                (id, made)
            })
            .collect();
        // A run recorded again under a known id (same inputs, after a
        // remove or over the old one) is a new recording in a new directory.
        for (id, made) in &now {
            if seen.get(id) != Some(made) && !imported {
                self.unreplayed.borrow_mut().insert(id.clone());
            }
        }
        *seen = now;
    }

    /// The runs recorded here that were not replayed yet.
    pub fn unreplayed_runs(&self) -> Vec<String> {
        self.note_new_runs(false);
        self.unreplayed.borrow().iter().cloned().collect()
    }

    /// Leaves a run out of the replays: only for a run a test damaged on
    /// purpose, after it showed what it wanted to about it.
    pub fn forget(&self, id: &str) {
        self.note_new_runs(false);
        self.unreplayed.borrow_mut().remove(id);
    }

    /// Replays every run recorded here that was not replayed yet.
    pub fn replay_recorded(&self) {
        self.note_new_runs(false);
        let ids: Vec<String> = self.unreplayed.borrow().iter().cloned().collect();
        for id in ids {
            self.replay_identical(&id);
        }
    }

    pub fn path(&self) -> &Path {
        match &self.dir {
            HomeDir::Temp(t) => t.path(),
            HomeDir::Kept(p) => p,
        }
    }

    /// The failing run `rewind check --points POINTS --example EXAMPLE`
    /// finds (the check must find one).
    pub fn failing_example(&self, example: &str, points: &str) -> String {
        let out = self.rewind(&["check", "--points", points, "--example", example]);
        assert_eq!(out.code, 1, "check finds {example}'s failure:\n{out}");
        failing_run_in(&out)
    }

    /// `rewind check --json ARGS`: it must exit 0 (nothing found) or 1 (a
    /// violation) and print one JSON object. Its output and that object.
    #[track_caller]
    pub fn check_json(&self, args: &[&str]) -> (Output, serde_json::Value) {
        self.check_json_env(args, &[])
    }

    /// [`Home::check_json`] with extra host environment variables.
    #[track_caller]
    pub fn check_json_env(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (Output, serde_json::Value) {
        let mut full = vec!["check", "--json"];
        full.extend_from_slice(args);
        let out = self.rewind_env(&full, env);
        assert!(
            out.code == 0 || out.code == 1,
            "`rewind {}` exited {}:\n{out}",
            full.join(" "),
            out.code
        );
        let v = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| {
            panic!("`rewind check --json` printed no JSON object ({e}):\n{out}")
        });
        (out, v)
    }

    /// `rewind ARGS` with this home, standard input empty.
    pub fn rewind(&self, args: &[&str]) -> Output {
        self.rewind_env(args, &[])
    }

    /// `rewind ARGS` with this home and extra host environment variables.
    pub fn rewind_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.rewind_env_within(args, env, DEADLINE)
    }

    /// [`Home::rewind_env`] killed after `deadline` instead of [`DEADLINE`]
    /// (a check whose every schedule is a build).
    pub fn rewind_env_within(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        deadline: Duration,
    ) -> Output {
        // Runs a test made with its own processes were noted at the last look.
        self.note_new_runs(false);
        if matches!(args.first(), Some(&"remove") | Some(&"prune")) {
            self.replay_recorded();
        }
        let mut cmd = Command::new(rewind_bin());
        cmd.args(args).env("REWIND_HOME", self.path());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = run_command(cmd, deadline);
        self.note_new_runs(args.first() == Some(&"import"));
        out
    }

    /// `rewind ARGS` with this home, as a user without privileges ([`unprivileged`]).
    pub fn rewind_unprivileged(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(rewind_bin());
        cmd.args(args).env("REWIND_HOME", self.path());
        let out = run_command(unprivileged(cmd), DEADLINE);
        self.note_new_runs(false);
        out
    }

    /// `rewind run ARGS`: panics unless it ends with a status line.
    pub fn run(&self, args: &[&str]) -> Run {
        let mut full = vec!["run"];
        full.extend_from_slice(args);
        let out = self.rewind(&full);
        if let Some(run) = parse_status(&out) {
            return run;
        }
        if out.stderr.lines().any(|l| l.starts_with("rewind: run ")) {
            panic!(
                "`rewind {}`: the status line `rewind: run <id> ...` is not the last line of \
                 stderr (issue 2, part 6: the last line on stderr is the status line):\n{out}",
                full.join(" ")
            );
        }
        panic!(
            "`rewind {}` did not end with a status line `rewind: run <id> ...`:\n{out}",
            full.join(" ")
        );
    }

    /// `rewind run ARGS` with `input` on its standard input: panics unless
    /// it ends with a status line.
    pub fn run_with_stdin(&self, args: &[&str], input: &[u8]) -> Run {
        self.note_new_runs(false);
        let mut cmd = Command::new(rewind_bin());
        cmd.arg("run").args(args).env("REWIND_HOME", self.path());
        let out = run_command_with_input(cmd, DEADLINE, input);
        self.note_new_runs(false);
        parse_status(&out).unwrap_or_else(|| panic!("no status line:\n{out}"))
    }

    /// `rewind run -- PROG ARGS...` of a guest program built by build.rs.
    pub fn run_guest(&self, name: &str, args: &[&str]) -> Run {
        let prog = guest_arg(name);
        let mut full = vec!["--", prog.as_str()];
        full.extend_from_slice(args);
        self.run(&full)
    }

    /// Runs a self-checking guest program: it must exit 0 having printed
    /// `all passed` and no `FAIL` line, and replay identically. Returns the
    /// run and its output.
    pub fn run_passing(&self, name: &str) -> (Run, String) {
        let run = self.run_guest(name, &[]);
        let log = self.log(&run.id);
        let failed: Vec<&str> = log.lines().filter(|l| l.starts_with("FAIL")).collect();
        assert!(
            failed.is_empty(),
            "{name}: checks failed:\n{}\n{}",
            failed.join("\n"),
            run.out
        );
        assert_eq!(run.status, "exited:0", "{name}:\n{}", run.out);
        assert_lines(&log, &["all passed"]);
        self.replay_identical(&run.id);
        (run, log)
    }

    /// `rewind events RUN` (one line per event), asserting success.
    pub fn events(&self, run: &str) -> String {
        self.ok(&["events", run]).stdout
    }

    /// `rewind events RUN --json`, parsed: one object per line.
    pub fn events_json(&self, run: &str) -> Vec<serde_json::Value> {
        let out = self.ok(&["events", run, "--json"]);
        out.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| {
                    panic!("`rewind events --json` printed a line that is not JSON ({e}): {l}")
                })
            })
            .collect()
    }

    /// `rewind log RUN`, asserting success.
    pub fn log(&self, run: &str) -> String {
        self.ok(&["log", run]).stdout
    }

    /// The first step at which RUN has a second thread (from `rewind
    /// events --json`): where `bounded` and `pct` start perturbing.
    #[track_caller]
    pub fn second_thread_step(&self, run: &str) -> u64 {
        let out = self.ok(&["events", run, "--json"]).stdout;
        let tids: Vec<(u64, u64)> = out
            .lines()
            .map(|l| {
                let e: serde_json::Value = serde_json::from_str(l).expect("events --json");
                (e["step"].as_u64().unwrap(), e["tid"].as_u64().unwrap())
            })
            .collect();
        let first = tids.first().expect("an event").1;
        let second = tids.iter().find(|(_, t)| *t != first);
        second
            .unwrap_or_else(|| panic!("run {run} has one thread"))
            .0
    }

    /// `rewind replay RUN` must say `identical` and exit 0.
    #[track_caller]
    pub fn replay_identical(&self, run: &str) {
        // A replay takes as long as the recording, a minute or more for a
        // build (rustc in tests/tests/nix.rs).
        let out = self.rewind_env_within(&["replay", run], &[], Duration::from_secs(600));
        assert!(
            out.code == 0 && (out.stdout.contains("identical") || out.stderr.contains("identical")),
            "`rewind replay {run}` did not report identical:\n{out}"
        );
        let id = if self.seen.borrow().contains_key(run) {
            run.to_string()
        } else {
            self.show_json(run)["id"]
                .as_str()
                .expect("show --json has the id")
                .to_string()
        };
        self.unreplayed.borrow_mut().remove(&id);
    }

    /// `rewind ARGS`, asserting exit 0.
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.rewind(args);
        assert_eq!(out.code, 0, "`rewind {}` failed:\n{out}", args.join(" "));
        out
    }

    /// The entries of `$REWIND_HOME/runs` whose names do not start with a dot
    /// (dot entries are a run still being written, or one that never finished).
    pub fn finished_run_dirs(&self) -> Vec<String> {
        match std::fs::read_dir(self.path().join("runs")) {
            Err(_) => Vec::new(),
            Ok(dir) => dir
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect(),
        }
    }
}

impl Drop for Home {
    /// Replays what the test recorded and did not replay (unless it failed
    /// already: its own message is the one that matters).
    fn drop(&mut self) {
        if self.replay_at_drop && !std::thread::panicking() {
            self.replay_recorded();
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

/// A self-checking guest program run natively, on the host's Linux: it must
/// print `all passed`. Its output, which the same program inside Rewind
/// should give too.
pub fn native_passing(name: &str) -> String {
    let out = run_command(Command::new(guest(name)), DEADLINE);
    assert!(
        out.code == 0 && out.stdout.contains("all passed"),
        "{name} natively:\n{out}"
    );
    out.stdout
}

/// `prog ARGS` run natively with exactly the environment `env` (in that
/// order: `env -i`, as the guest gets it), in `cwd` (None: the test's),
/// `input` on standard input.
pub fn native_with_env(
    env: &[&str],
    cwd: Option<&Path>,
    prog: &str,
    args: &[&str],
    input: &[u8],
) -> Output {
    let mut cmd = Command::new("/usr/bin/env");
    cmd.arg("-i").args(env).arg(prog).args(args);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    run_command_with_input(cmd, DEADLINE, input)
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

/// The run's own wall seconds, from its status line (`rewind: run ID
/// STATUS after N steps, Xs virtual, Ys wall`), the last of `stderr`.
pub fn run_wall(stderr: &str) -> Option<f64> {
    let last = stderr.lines().last()?;
    let wall = last.rsplit(", ").next()?;
    wall.strip_suffix("s wall")?.parse().ok()
}

/// The host's load averages over 1, 5 and 15 minutes (`/proc/loadavg`),
/// which a benchmark prints beside its wall times.
/// Text of `len` bytes: words from a fixed PRNG, the same every time, for
/// programs that compress or sort it (pbzip2 in its test and bench).
pub fn word_text(len: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "thread", "page", "clock", "owner", "race", "buffer", "queue", "lock", "block", "schedule",
        "point", "memory", "wake", "join", "compress", "the", "a", "of", "and", "to",
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
        out.push(if x.is_multiple_of(11) { b'\n' } else { b' ' });
    }
    out.truncate(len);
    out
}

pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// A host program a test runs (`/usr/bin/sqlite3`, `/usr/bin/busybox`),
/// installed by scripts/setup-tests as `package`: Some(path) when it is there;
/// else the test is skipped (said on stderr), unless
/// `REWIND_REQUIRE_ALL_GUESTS=1` (scripts/test sets it), where its absence
/// fails the test as a missing guest program fails the build.
pub fn host_program(path: &str, package: &str) -> Option<String> {
    if Path::new(path).exists() {
        return Some(path.to_string());
    }
    skip_unless_required(&format!(
        "{path} is not installed (scripts/setup-tests installs {package})"
    ));
    None
}

/// Skips what `why` says is missing: visibly ([`skipped`]), or, under
/// `REWIND_REQUIRE_ALL_GUESTS=1` (scripts/test sets it), by failing the test.
#[track_caller]
pub fn skip_unless_required(why: &str) {
    assert!(
        std::env::var_os("REWIND_REQUIRE_ALL_GUESTS").is_none_or(|v| v != "1"),
        "{why}, and REWIND_REQUIRE_ALL_GUESTS=1 requires it"
    );
    skipped(why);
}

/// Whether some line of `events` contains every one of `parts`.
pub fn has_event(events: &str, parts: &[&str]) -> bool {
    events.lines().any(|l| parts.iter().all(|p| l.contains(p)))
}

/// Asserts that every line in `want` occurs in `text`, in any order.
#[track_caller]
pub fn assert_lines(text: &str, want: &[&str]) {
    for w in want {
        assert!(
            text.lines().any(|l| l.trim_end() == *w),
            "missing the line {w:?} in:\n{text}"
        );
    }
}

/// A small C program for the tests that build one themselves: `work()`
/// writes `mark` at line 5, called from `main` at line 10.
pub const MARK_PROGRAM: &str = "#include <unistd.h>\n\nstatic void work(void)\n{\n    write(1, \"mark\\n\", 5);\n}\n\nint main(void)\n{\n    work();\n    return 0;\n}\n";

/// Runs a build tool (`cc`, `objcopy`, `touch`...) and asserts it succeeded.
#[track_caller]
pub fn tool(cmd: &str, args: &[&std::ffi::OsStr]) {
    let st = Command::new(cmd)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{cmd}: {e} (scripts/setup installs build-essential)"));
    assert!(st.success(), "{cmd} {args:?}: {st}");
}

impl Home {
    /// Makes RUN again with the last `rewind run` command that plain
    /// `rewind show` prints for it: the run made, which must be RUN.
    #[track_caller]
    pub fn run_as_shown(&self, run: &str) -> Run {
        let show = self.ok(&["show", run]);
        let again = show
            .stdout
            .lines()
            .map(str::trim)
            .rfind(|l| l.starts_with("rewind run "))
            .unwrap_or_else(|| panic!("{show}"))
            .to_string();
        let args: Vec<&str> = again
            .trim_end_matches("< /dev/null")
            .split_whitespace()
            .skip(2)
            .collect();
        let made = self.run(&args);
        assert_eq!(made.id, run);
        made
    }

    /// `rewind show RUN --json`, parsed.
    #[track_caller]
    pub fn show_json(&self, run: &str) -> serde_json::Value {
        let out = self.ok(&["show", run, "--json"]);
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("`rewind show --json` is not JSON ({e}):\n{out}"))
    }

    /// The arguments after `rewind run` of the one command `rewind show
    /// --json` gives to make RUN again (a run with no parent).
    #[track_caller]
    pub fn remake_args(&self, run: &str) -> Vec<String> {
        let v = self.show_json(run);
        let cmds = v["commands"].as_array().unwrap_or_else(|| panic!("{v:#}"));
        assert_eq!(cmds.len(), 1, "{v:#}");
        cmds[0]["argv"].as_array().unwrap()[2..]
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    }

    /// `rewind fork RUN STEP --seed 5 -q` of a run that ended after its
    /// step count: the fork must end as RUN did, after as many steps, and
    /// say it does not differ from its parent. Its output, whose `forking
    /// from ...` line the caller checks.
    #[track_caller]
    pub fn fork_ends_the_same(&self, run: &Run, step: &str) -> Output {
        let steps = run.steps.expect("a step count");
        let fork = self.rewind(&["fork", &run.id, step, "--seed", "5", "-q"]);
        assert_eq!(fork.code, 0, "{fork}");
        assert!(
            fork.stderr
                .contains(&format!(" {} after {steps} steps", run.status)),
            "{fork}"
        );
        assert!(
            fork.stderr
                .contains("the fork does not differ from its parent"),
            "{fork}"
        );
        fork
    }

    /// The step of the first event of a run that is this system call.
    pub fn first_call(&self, run: &str, name: &str) -> u64 {
        self.events_json(run)
            .into_iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["step"].as_u64())
            .unwrap_or_else(|| panic!("no {name} in run {run}"))
    }
}

/// A check's report with narrowing's wall time (the one thing that differs
/// between two runs of the same check) masked.
pub fn without_wall_time(report: &str) -> String {
    report
        .lines()
        .map(|l| match l.strip_prefix("narrowed in ") {
            Some(rest) => format!("narrowed in {}", rest.split(',').next().unwrap_or("")),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
