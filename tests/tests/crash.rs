//! A crash-safe store (issue 12 item 4): `rewind` killed with SIGKILL at
//! seeded points during `run`, `fork`, `check`, `import`, `gc`, `remove` and
//! `prune`. After every kill, `ls` lists exactly the run directories there
//! are, each complete: a run seen for the first time replays identically, one
//! seen before has the very bytes it had then, and every page a listed run's
//! keyframes use is in the store; `gc` then succeeds (and the pages are still
//! there); the commands' working directory and `TMPDIR` stay empty. A full
//! disk (a small tmpfs, as root) gives one clear line and no half run.
//!
//! The kill points: each command is timed once unkilled, then killed after a
//! seeded fraction (0 to 1.2) of that time. `REWIND_CRASH_ROUNDS=N` runs N
//! times as many kills, with other seeds (a developer's longer run).

use rewind_tests::{guest_arg, rewind_bin, run_command, Home, Output, DEADLINE};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use vmm::run::pages::{hex, PageHash};
use vmm::store::maintain::run_pages;

/// The engine's SplitMix64: every kill point comes from the seed.
struct Rng(vmm::schedule::Rng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A fraction in [0, 1.2): most kills land inside the command, some after.
    fn fraction(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 1.2
    }
}

/// What the kills found, and what every command shares.
struct Crashes {
    rng: Rng,
    /// The working directory and `TMPDIR` of every command: they must stay
    /// empty (nothing is left outside `$REWIND_HOME`).
    outside: tempfile::TempDir,
    /// Kills per command.
    kills: BTreeMap<&'static str, u32>,
    /// Kills after which `gc` found leftovers: they hit a command mid-write.
    interrupted: u32,
    /// Kills that came after the command had finished.
    late: u32,
    /// Each run directory as first seen: its files' identities, and the
    /// digest of what a run recorded again under its id must repeat.
    digests: BTreeMap<PathBuf, (Vec<FileId>, blake3::Hash)>,
    /// The pages each run directory's keyframes use.
    pages: BTreeMap<PathBuf, Vec<PageHash>>,
}

impl Crashes {
    fn new(seed: u64) -> Crashes {
        let outside = tempfile::Builder::new()
            .prefix("rewind-crash-outside-")
            .tempdir()
            .unwrap();
        for d in ["cwd", "tmp"] {
            std::fs::create_dir(outside.path().join(d)).unwrap();
        }
        Crashes {
            rng: Rng(vmm::schedule::Rng::new(seed)),
            outside,
            kills: BTreeMap::new(),
            interrupted: 0,
            late: 0,
            digests: BTreeMap::new(),
            pages: BTreeMap::new(),
        }
    }

    fn command(&self, home: &Home, args: &[&str]) -> Command {
        // As Home::rewind does: what a remove or prune may take is replayed
        // first (a run recorded again under its id is only compared with
        // the run it was, and a kill may then remove it).
        if matches!(args.first(), Some(&"remove") | Some(&"prune")) {
            home.replay_recorded();
        }
        let mut cmd = Command::new(rewind_bin());
        cmd.args(args)
            .env("REWIND_HOME", home.path())
            .env("TMPDIR", self.outside.path().join("tmp"))
            .current_dir(self.outside.path().join("cwd"));
        cmd
    }

    /// Runs `rewind ARGS` to the end, asserting success; returns how long it took.
    fn timed(&self, home: &Home, args: &[&str]) -> (Duration, Output) {
        let start = Instant::now();
        let out = run_command(self.command(home, args), DEADLINE);
        assert_eq!(out.code, 0, "`rewind {}` failed:\n{out}", args.join(" "));
        (start.elapsed(), out)
    }

    /// Starts `rewind ARGS`, kills it with SIGKILL after a seeded fraction
    /// of `typical`, then checks the store.
    fn kill(&mut self, what: &'static str, home: &Home, args: &[&str], typical: Duration) {
        let delay = typical.mul_f64(self.rng.fraction());
        let mut child = self
            .command(home, args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start rewind");
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_some() {
            self.late += 1;
        } else {
            child.kill().unwrap();
        }
        child.wait().unwrap();
        *self.kills.entry(what).or_default() += 1;
        let after = format!("after killing `rewind {}` at {delay:?}", args.join(" "));
        self.verify(home, &after);
    }

    /// Every promise of a store after a crash (see the module's doc).
    fn verify(&mut self, home: &Home, after: &str) {
        let ls = home.rewind(&["ls", "--json"]);
        assert!(
            ls.code == 0 && ls.stderr.trim().is_empty(),
            "{after}: `rewind ls` is not clean:\n{ls}"
        );
        let listed: BTreeSet<String> = ls
            .stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["id"].as_str().unwrap().to_string()
            })
            .collect();
        let dirs: BTreeSet<String> = home.finished_run_dirs().into_iter().collect();
        assert_eq!(
            listed, dirs,
            "{after}: `rewind ls` does not list exactly the run directories"
        );
        let runs = home.path().join("runs");
        let gone = |dir: &Path| {
            dir.parent() == Some(&runs)
                && !listed.contains(dir.file_name().unwrap().to_str().unwrap())
        };
        self.digests.retain(|dir, _| !gone(dir));
        self.pages.retain(|dir, _| !gone(dir));
        for id in &listed {
            let dir = runs.join(id);
            let files = file_ids(&dir);
            match self.digests.get(&dir) {
                Some((seen, _)) if *seen == files => continue,
                Some((_, digest)) => {
                    // Recorded again under its id (or changed): it must be
                    // the same run, which replayed identically already.
                    assert_eq!(
                        *digest,
                        recorded(&dir),
                        "{after}: run {id} changed, and is not the run it was"
                    );
                }
                None => home.replay_identical(id),
            }
            let pages = run_pages(&dir).unwrap_or_else(|e| {
                panic!("{after}: the keyframes of run {id} are unreadable: {e}")
            });
            self.digests.insert(dir.clone(), (files, recorded(&dir)));
            self.pages.insert(dir, pages);
        }
        self.pages_present(home, after);
        for d in ["cwd", "tmp"] {
            let left: Vec<_> = std::fs::read_dir(self.outside.path().join(d))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert!(left.is_empty(), "{after}: left outside the store: {left:?}");
        }
        let gc = home.rewind(&["gc", "--json"]);
        assert_eq!(gc.code, 0, "{after}: `rewind gc` failed:\n{gc}");
        let report: serde_json::Value = serde_json::from_str(gc.stdout.trim()).unwrap();
        if report["leftovers_removed"].as_u64().unwrap() > 0 {
            self.interrupted += 1;
        }
        self.pages_present(home, &format!("{after} and `rewind gc`"));
    }

    /// Every page a listed run's keyframes use is in the store.
    fn pages_present(&self, home: &Home, after: &str) {
        let used: BTreeSet<&PageHash> = self
            .pages
            .iter()
            .filter(|(dir, _)| dir.starts_with(home.path()))
            .flat_map(|(_, pages)| pages)
            .collect();
        // A page has a file of its own, or is in a pack (`store::pack`).
        let store = vmm::store::pages::PageStore::at(home.path().join("pages"));
        for h in used {
            assert!(
                store.get(h).is_ok(),
                "{after}: page {} of a listed run is gone",
                hex(h)
            );
        }
    }

    /// A run of `home` other than `keep`, chosen by the seed, if there is one.
    fn pick(&mut self, home: &Home, keep: &str, with_pages: bool) -> Option<String> {
        let ids: Vec<String> = self
            .pages
            .iter()
            .filter(|(dir, pages)| {
                dir.starts_with(home.path()) && (!with_pages || !pages.is_empty())
            })
            .map(|(dir, _)| dir.file_name().unwrap().to_string_lossy().into_owned())
            .filter(|id| id != keep)
            .collect();
        if ids.is_empty() {
            return None;
        }
        let i = self.rng.below(ids.len() as u64) as usize;
        Some(ids[i].clone())
    }
}

/// A file of a run directory: name, inode, size and modification time.
type FileId = (String, u64, u64, i64, i64);

/// The identities of a run directory's files: they change only when a file
/// is written (or the run replaced), and cost no reading.
fn file_ids(dir: &Path) -> Vec<FileId> {
    use std::os::unix::fs::MetadataExt;
    let mut ids: Vec<FileId> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, m.ino(), m.size(), m.mtime(), m.mtime_nsec())
        })
        .collect();
    ids.sort();
    ids
}

/// The BLAKE3 of what a run recorded again under its id repeats: its inputs,
/// events, output and switches (not `meta.json`, which says when it was
/// made, nor its keyframes, taken by wall time).
fn recorded(dir: &Path) -> blake3::Hash {
    let mut h = blake3::Hasher::new();
    for name in [
        "manifest.json",
        "stdin.bin",
        "events",
        "output",
        "output.fds",
        "switches",
    ] {
        h.update(name.as_bytes());
        match std::fs::read(dir.join(name)) {
            Ok(bytes) => h.update(&bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => h.update(b"none"),
            Err(e) => panic!("{}: {e}", dir.join(name).display()),
        };
    }
    h.finalize()
}

/// The id on the status line `rewind: run <id> ...`.
fn run_id(out: &Output) -> String {
    rewind_tests::parse_status(out)
        .unwrap_or_else(|| panic!("no status line:\n{out}"))
        .id
}

fn rounds() -> u32 {
    std::env::var("REWIND_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

#[test]
fn sigkill_at_seeded_points_leaves_a_whole_store() {
    let rounds = rounds();
    let mut c = Crashes::new(0x5eed_c4a5);
    let home = Home::new();
    let long = guest_arg("long");
    let run_args = |seed: u64| -> Vec<String> {
        [
            "run",
            "-q",
            "--seed",
            &seed.to_string(),
            "--",
            &long,
            "2500",
        ]
        .map(String::from)
        .to_vec()
    };

    // The parent of forks, and the file imports read.
    let (t_run, out) = c.timed(&home, &argv_of(&run_args(0)));
    let parent = run_id(&out);
    c.verify(&home, "after the first run");
    let steps = home.show_json(&parent)["steps"].as_u64().unwrap();
    let rwd_dir = tempfile::tempdir().unwrap();
    let rwd = rwd_dir.path().join("parent.rwd");
    let rwd = rwd.to_str().unwrap().to_string();
    home.ok(&["export", "--replayable", &parent, "-o", &rwd]);

    let started = Instant::now();
    let phase = |name: &str| eprintln!("crash: {name} done at {:?}", started.elapsed());
    for round in 0..rounds {
        let r = u64::from(round) * 1000;
        // run: the seed repeats now and then, so a run is also replaced.
        for i in 0..25u64 {
            let args = run_args(r + c.rng.below(3) + (i % 2) * 100);
            c.kill("run", &home, &argv_of(&args), t_run);
        }

        phase("run");
        // fork
        // Four forks, each made again and again: one early (before the
        // parent's first keyframe, when it has one), three late.
        let fork = |c: &mut Crashes| {
            let k = c.rng.below(4);
            let step = (steps * (1 + 2 * k) / 8).to_string();
            let schedule = (1 + k).to_string();
            ["fork", "-q", &parent, &step, "--schedule", &schedule]
                .map(String::from)
                .to_vec()
        };
        let first = fork(&mut c);
        let (t_fork, _) = c.timed(&home, &argv_of(&first));
        for _ in 0..15 {
            let args = fork(&mut c);
            c.kill("fork", &home, &argv_of(&args), t_fork);
        }

        phase("fork");
        // check
        // Every schedule's run kept (--keep all): the kills land while
        // runs are written, and each run a kill left whole is replayed at the end.
        let check = [
            "check",
            "--example",
            "bank-fixed",
            "--schedules",
            "8",
            "--no-narrow",
            "--keep",
            "all",
        ];
        let (t_check, _) = c.timed(&home, &check);
        c.verify(&home, "after a check");
        for _ in 0..15 {
            c.kill("check", &home, &check, t_check);
        }

        phase("check");
        // gc, each time with pages to collect: a run with keyframes removed.
        let mut t_gc = None;
        for i in 0..11u64 {
            let victim = match c.pick(&home, &parent, true) {
                Some(id) => id,
                None => run_id(&c.timed(&home, &argv_of(&run_args(r + 600 + i))).1),
            };
            home.ok(&["remove", &victim]);
            match t_gc {
                None => {
                    t_gc = Some(c.timed(&home, &["gc"]).0);
                    c.verify(&home, "after a gc");
                }
                Some(t) => c.kill("gc", &home, &["gc"], t),
            }
        }

        phase("gc");
        // remove (a run, with its forks when it has some)
        let (mut t_remove, mut timed) = (Duration::ZERO, false);
        for _ in 0..10 {
            let victim = match c.pick(&home, &parent, false) {
                Some(id) => id,
                None => run_id(&c.timed(&home, &argv_of(&run_args(r + 500))).1),
            };
            if !timed {
                t_remove = c.timed(&home, &["remove", &victim]).0;
                timed = true;
                c.verify(&home, "after a remove");
                continue;
            }
            c.kill("remove", &home, &["remove", &victim], t_remove);
        }
        c.kill("remove", &home, &["remove", &parent], t_remove);

        phase("remove");
        // prune, each time with forks to prune: the same schedule 0 as the run.
        let small = run_id(&c.timed(&home, &["run", "-q", "--", &long, "200"]).1);
        let mut t_prune = None;
        for _ in 0..11 {
            for _ in 0..2 {
                let step = (1 + c.rng.below(200)).to_string();
                home.ok(&["fork", "-q", &small, &step, "--schedule", "0"]);
            }
            c.verify(&home, "after making forks to prune");
            match t_prune {
                None => t_prune = Some(c.timed(&home, &["prune", "--identical"]).0),
                Some(t) => c.kill("prune", &home, &["prune", "--identical"], t),
            }
        }

        phase("prune");
        // import, into a store of its own.
        let other = Home::new();
        let (t_import, out) = c.timed(&other, &["import", &rwd]);
        assert!(out.code == 0, "{out}");
        for _ in 0..15 {
            if !other.finished_run_dirs().is_empty() {
                other.ok(&["remove", &parent]);
            }
            c.kill("import", &other, &["import", &rwd], t_import);
        }
        // The parent was removed: export it again for the next round.
        if round + 1 < rounds {
            let args = run_args(0);
            let (_, out) = c.timed(&home, &argv_of(&args));
            assert_eq!(run_id(&out), parent);
            c.verify(&home, "after the parent was made again");
            home.ok(&["export", "--replayable", &parent, "-o", &rwd]);
        }
        let left: Vec<_> = std::fs::read_dir(rwd_dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "the export's directory holds more than it");
    }

    let total: u32 = c.kills.values().sum();
    eprintln!(
        "crash: {total} kills ({:?}); {} hit a command mid-write (gc removed what it left), \
         {} came after the command had finished",
        c.kills, c.interrupted, c.late
    );
    assert!(total >= 100 * rounds, "only {total} kills");
    // A kill that came after the command ended tests nothing: most must land
    // while it runs, and a good part of them while it writes (seen here: 68
    // of 100 landed, 46 mid-write).
    let landed = total - c.late;
    assert!(
        landed >= 30 * rounds,
        "only {landed} of {total} kills landed while the command ran"
    );
    assert!(
        c.interrupted >= 10 * rounds,
        "only {} kills left anything behind: too few hit a command mid-write",
        c.interrupted
    );
}

fn argv_of(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// A tmpfs mounted on a directory until dropped (then unmounted, and the
/// directory removed).
#[derive(Default)]
struct Mount(Option<PathBuf>);

impl Mount {
    /// Mounts a tmpfs of `size` on `dir`, or says why that was refused.
    fn tmpfs(&mut self, dir: &Path, size: &str) -> Result<(), String> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        self.0 = Some(dir.to_path_buf());
        Ok(())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = Command::new("umount").arg(&dir).status();
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// Bytes free on the file system that holds `dir`.
fn free_bytes(dir: &Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs to fill.
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
    st.f_bavail as u64 * st.f_frsize as u64
}

/// Fills the disk of `home` but for about `leave` bytes.
fn fill(home: &Path, leave: u64) -> PathBuf {
    let filler = home.join("filler");
    let _ = std::fs::remove_file(&filler);
    let n = free_bytes(home).saturating_sub(leave);
    std::fs::write(&filler, vec![0u8; n as usize]).unwrap();
    filler
}

/// The entries under `dir` whose names start with a dot (temporary ones).
fn dot_entries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if e.file_name().to_string_lossy().starts_with('.') {
            out.push(p.clone());
        }
        if p.is_dir() && !p.is_symlink() {
            out.extend(dot_entries(&p));
        }
    }
    out
}

/// A command refused for a full disk: one line that says so, and nothing
/// half-written left in the store.
#[track_caller]
fn refused_for_space(home: &Home, out: &Output, what: &str, runs_before: &[String]) {
    let lines = out.stderr_lines();
    assert!(
        out.code != 0
            && lines.len() == 1
            && lines[0].starts_with("rewind: error: ")
            && lines[0].contains("no space left on the disk that holds"),
        "{what} on a full disk: not one clear line:\n{out}"
    );
    let mut now = home.finished_run_dirs();
    now.sort();
    assert_eq!(now, runs_before, "{what} on a full disk left a run");
    let dots = dot_entries(home.path());
    assert!(dots.is_empty(), "{what} on a full disk left {dots:?}");
}

#[test]
fn a_full_disk_is_one_clear_line_and_no_half_run() {
    if unsafe { libc::geteuid() } != 0 {
        rewind_tests::skipped("a_full_disk_is_one_clear_line_and_no_half_run: a small tmpfs for the store needs root (CI runs as root)");
        return;
    }
    // Dropped after the home (which replays its runs first).
    let mut mount = Mount::default();
    let home = Home::new();
    if let Err(why) = mount.tmpfs(home.path(), "4m") {
        rewind_tests::skipped(&format!(
            "a_full_disk_is_one_clear_line_and_no_half_run: `mount -t tmpfs` was refused: {why}"
        ));
        return;
    }
    let long = guest_arg("long");
    // A replayable export to import later, made while there is room.
    let made = home.run(&["-q", "--", &long, "2500"]);
    let outside = tempfile::tempdir().unwrap();
    let rwd = outside.path().join("long.rwd");
    let rwd = rwd.to_str().unwrap();
    home.ok(&["export", "--replayable", &made.id, "-o", rwd]);
    home.ok(&["remove", &made.id]);
    home.ok(&["gc"]);

    let mut refused = 0;
    let levels = [
        0u64,
        4 << 10,
        16 << 10,
        48 << 10,
        128 << 10,
        320 << 10,
        640 << 10,
        1536 << 10,
    ];
    for leave in levels {
        let before = home.finished_run_dirs();
        let filler = fill(home.path(), leave);
        let run = home.rewind(&["run", "-q", "--", &long, "2500"]);
        if run.code == 0 {
            // It fit: a whole run (replayed when the test ends).
            let id = rewind_tests::parse_status(&run).unwrap().id;
            std::fs::remove_file(&filler).unwrap();
            home.ok(&["remove", &id]);
        } else {
            refused += 1;
            refused_for_space(
                &home,
                &run,
                &format!("`rewind run` with {leave} bytes free"),
                &before,
            );
            let check = home.rewind(&["check", "--example", "bank-fixed", "--schedules", "2"]);
            if check.code != 0 {
                refused_for_space(&home, &check, "`rewind check`", &before);
            }
            let import = home.rewind(&["import", rwd]);
            refused_for_space(&home, &import, "`rewind import`", &before);
            std::fs::remove_file(&filler).unwrap();
        }
        // With room again, gc succeeds and the store works.
        home.ok(&["gc"]);
    }
    eprintln!(
        "full disk: {refused} of {} runs refused for space, the others fit",
        levels.len()
    );
    assert!(refused > 0, "no run was refused for space");
    let again = home.run(&["-q", "--", &long, "2500"]);
    assert_eq!(again.status, "exited:0");
    home.ok(&["import", rwd]);
}
