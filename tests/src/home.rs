//! `Home`: a `REWIND_HOME` for a test, the `rewind` commands run with it,
//! and the replay of every run recorded in it.

use crate::{
    assert_lines, failing_run_in, guest_arg, parse_status, rewind_bin, run_command,
    run_command_with_input, unprivileged, Output, Run, DEADLINE,
};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where a home is: a temporary directory, or one that stays.
enum HomeDir {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

/// A run's directory as made: its inode and birth time. A test damaging
/// files inside it leaves it the same run; a new recording moves a new
/// directory into place.
type RunDir = Option<(u64, Option<std::time::SystemTime>)>;

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
        self.check_json_within(args, env, DEADLINE)
    }

    /// [`Home::check_json_env`] killed after `deadline` instead of
    /// [`DEADLINE`] (a check that narrows over many long runs).
    #[track_caller]
    pub fn check_json_within(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        deadline: Duration,
    ) -> (Output, serde_json::Value) {
        let mut full = vec!["check", "--json"];
        full.extend_from_slice(args);
        let out = self.rewind_env_within(&full, env, deadline);
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

    /// `rewind cat RUN STEP PATH`'s bytes as they are (`Output` is text).
    #[track_caller]
    pub fn cat_bytes(&self, run: &str, step: u64, path: &str) -> Vec<u8> {
        let out = Command::new(rewind_bin())
            .args(["cat", run, &step.to_string(), path])
            .env("REWIND_HOME", self.path())
            .output()
            .expect("rewind cat runs");
        assert!(
            out.status.success(),
            "rewind cat {run} {step} {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
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

impl Drop for Home {
    /// Replays what the test recorded and did not replay (unless it failed
    /// already: its own message is the one that matters).
    fn drop(&mut self) {
        if self.replay_at_drop && !std::thread::panicking() {
            self.replay_recorded();
        }
    }
}

/// Every file and directory under `dir` with its size (directories 0), but
/// the lock file, which exists once any command has run.
pub fn store_tree(dir: &Path) -> std::collections::BTreeMap<String, u64> {
    store_entries(dir)
        .into_iter()
        .map(|(rel, m)| {
            if m.is_dir() {
                (format!("{rel}/"), 0)
            } else {
                (rel, m.len())
            }
        })
        .collect()
}

/// Every file under `dir` with its size and time of change, but the lock
/// file: what a command that must leave a store as it was may not move.
pub fn store_files(dir: &Path) -> std::collections::BTreeMap<String, (u64, std::time::SystemTime)> {
    store_entries(dir)
        .into_iter()
        .filter(|(_, m)| !m.is_dir())
        .map(|(rel, m)| (rel, (m.len(), m.modified().unwrap())))
        .collect()
}

/// Every entry under `dir` (its path from `dir`) with its `lstat`, but the lock file.
fn store_entries(dir: &Path) -> Vec<(String, std::fs::Metadata)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, std::fs::Metadata)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let is_dir = m.is_dir();
            out.push((rel, m));
            if is_dir {
                walk(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.retain(|(rel, _)| rel != "lock");
    out
}
