//! How long `rewind run --root DIR` takes before its first step over a
//! large tree, cold (a new store: every file is read and hashed, which is
//! what every run cost before the store kept file hashes) and warm (the
//! same store again: the tree is walked, files unchanged since are not
//! read), in one process, with the load average; then warm over the host's
//! `/` (hundreds of thousands of entries), beside the 30,000-file tree.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench root_start
//!
//! "first output" is the time from the command's start to the guest's first
//! byte on its standard output (`echo` as the first thing a shell does): what
//! a user waits before the program runs. The image's identity (a walk of
//! the tree) is found beside the run, so "whole command" less the run's own
//! wall time (its status line's) is what the walk added to the command.
//! The host's `/` is walked with a store kept in `target/bench-root-home`:
//! the first time on a machine it reads every file (minutes); with
//! `REWIND_BENCH_ROOT=DIR` it also times DIR cold, then warm.

use rewind_tests::{host_program, rewind_bin, run_wall, Home};
use std::io::Read;
use std::time::Instant;

const DIRS: usize = 300;
const FILES_PER_DIR: usize = 100;
const BYTES: usize = 8 << 10;

/// How long one `rewind run --root ROOT -- PROG ARGS` in `home` took, in
/// seconds: to the guest's first output, and the whole command less the
/// run's own wall time. No deadline: a cold start over a host takes minutes.
#[derive(Clone, Copy)]
struct Start {
    first_output: f64,
    beside_run: f64,
}

fn start(home: &Home, seed: u32, root: &str, prog: &[&str]) -> Start {
    let t = Instant::now();
    let mut child = std::process::Command::new(rewind_bin())
        .env("REWIND_HOME", home.path())
        .args(["run", "--seed", &seed.to_string(), "--root", root, "--"])
        .args(prog)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    let got = stdout.read(&mut first).unwrap();
    let first_output = t.elapsed().as_secs_f64();
    let mut rest = Vec::new();
    stdout.read_to_end(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    let total = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && got == 1, "{stderr}");
    let wall = run_wall(&stderr).unwrap_or_else(|| panic!("no status line:\n{stderr}"));
    Start {
        first_output,
        beside_run: total - wall,
    }
}

/// The better of two starts, measure by measure.
fn best(a: Start, b: Start) -> Start {
    Start {
        first_output: a.first_output.min(b.first_output),
        beside_run: a.beside_run.min(b.beside_run),
    }
}

const NEVER: Start = Start {
    first_output: f64::MAX,
    beside_run: f64::MAX,
};

/// Cold and warm starts over `root` in new stores, the best of `rounds`.
fn cold_and_warm(root: &str, prog: &[&str], rounds: u32) -> (Start, Start) {
    let (mut cold, mut warm) = (NEVER, NEVER);
    for round in 0..rounds {
        // A new store: nothing hashed yet.
        let home = Home::unreplayed();
        cold = best(cold, start(&home, 2 * round, root, prog));
        // Another seed, so that the run is recorded, not found again.
        warm = best(warm, start(&home, 2 * round + 1, root, prog));
    }
    (cold, warm)
}

/// Warm starts over `root` in the store kept at `home` (its first run
/// there fills the cache and is not counted), the best of `rounds`.
fn warm_in(home: &Home, root: &str, prog: &[&str], rounds: u32) -> Start {
    let seed = std::process::id();
    start(home, seed, root, prog);
    (1..=rounds).fold(NEVER, |w, r| best(w, start(home, seed + r, root, prog)))
}

fn show(what: &str, s: Start) {
    println!(
        "{what:<44} first output {:7.3} s, whole command less the run {:7.3} s",
        s.first_output, s.beside_run
    );
}

fn main() {
    let files = DIRS * FILES_PER_DIR;
    println!(
        "rewind run --root start benchmark: {files} files of {} KiB in {DIRS} directories",
        BYTES >> 10
    );
    let busybox = host_program("/bin/busybox", "busybox-static").expect("busybox-static");
    println!("load average before: {}", rewind_tests::load_average());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    for d in 0..DIRS {
        let sub = root.join(format!("data/d{d:03}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..FILES_PER_DIR {
            let bytes: Vec<u8> = (0..BYTES).map(|b| (b * 31 + d * 7 + f) as u8).collect();
            std::fs::write(sub.join(format!("f{f:03}")), bytes).unwrap();
        }
    }
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy(&busybox, root.join("bin/busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", root.join("bin/sh")).unwrap();
    // The files are older than the racy margin, as a tree that is not
    // being written is: the first run may keep all their hashes.
    std::thread::sleep(std::time::Duration::from_secs(3));

    let r = root.to_str().unwrap();
    let echo = ["/bin/sh", "-c", "echo started"];
    let (cold, warm) = cold_and_warm(r, &echo, 3);
    show("30,000 files, cold (every file read):", cold);
    show("30,000 files, warm (the tree unchanged):", warm);
    println!(
        "ratio cold / warm, whole command less the run: {:7.1}",
        cold.beside_run / warm.beside_run
    );

    let kept = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-root-home");
    println!(
        "load average before --root /: {}",
        rewind_tests::load_average()
    );
    let host = warm_in(&Home::kept_at(&kept), "/", &echo, 3);
    show("--root / warm (the host's tree):", host);
    println!(
        "ratio --root / warm / 30,000 files warm: first output {:7.1}, whole command less the run {:7.1}",
        host.first_output / warm.first_output,
        host.beside_run / warm.beside_run
    );

    if let Some(given) = std::env::var_os("REWIND_BENCH_ROOT") {
        let given = given.to_string_lossy().into_owned();
        let (cold, warm) = cold_and_warm(&given, &echo, 1);
        show(&format!("--root {given} cold:"), cold);
        show(&format!("--root {given} warm:"), warm);
    }
    println!("load average after: {}", rewind_tests::load_average());
}
