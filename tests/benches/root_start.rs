//! How long `rewind run --root DIR` takes before its first step over a
//! large tree, cold (a new store: every file is read and hashed, which is
//! what every run cost before the store kept file hashes) and warm (the
//! same store again: the tree is walked, files unchanged since are not
//! read), in one process, with the load average.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench root_start
//!
//! "start" is the command's wall time less the run's own (its status
//! line's): the image's identity, the run's setup and writing it. With
//! `REWIND_BENCH_ROOT=/` it also times a root given (once cold, then warm),
//! e.g. the host's `/`, whose cold start reads every file of the host.

use rewind_tests::{host_program, rewind_bin, run_wall, Home};
use std::time::Instant;

const DIRS: usize = 300;
const FILES_PER_DIR: usize = 100;
const BYTES: usize = 8 << 10;

/// The start of `rewind run --root ROOT -- PROG ARGS` in `home`, in
/// seconds. No deadline: a cold start over a whole host takes minutes.
fn start(home: &Home, seed: u32, root: &str, prog: &[&str]) -> f64 {
    let t = Instant::now();
    let out = std::process::Command::new(rewind_bin())
        .env("REWIND_HOME", home.path())
        .args(["run", "--seed", &seed.to_string(), "--root", root, "--"])
        .args(prog)
        .output()
        .unwrap();
    let total = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let wall = run_wall(&stderr).unwrap_or_else(|| panic!("no status line:\n{stderr}"));
    total - wall
}

/// Cold and warm starts over `root`, the best of `rounds`.
fn cold_and_warm(root: &str, prog: &[&str], rounds: u32) -> (f64, f64) {
    let (mut cold, mut warm) = (f64::MAX, f64::MAX);
    for round in 0..rounds {
        // A new store: nothing hashed yet.
        let home = Home::unreplayed();
        cold = cold.min(start(&home, 2 * round, root, prog));
        // Another seed, so that the run is recorded, not found again.
        warm = warm.min(start(&home, 2 * round + 1, root, prog));
    }
    (cold, warm)
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
    let (cold, warm) = cold_and_warm(r, &["/bin/sh", "-c", "true"], 3);
    println!("cold start (every file read, as every run was before): {cold:7.3} s (best of 3)");
    println!("warm start (the same store, the tree unchanged):       {warm:7.3} s (best of 3)");
    println!(
        "ratio cold / warm:                                     {:7.1}",
        cold / warm
    );

    if let Some(given) = std::env::var_os("REWIND_BENCH_ROOT") {
        let given = given.to_string_lossy().into_owned();
        let (cold, warm) = cold_and_warm(&given, &["/bin/true"], 1);
        println!("--root {given}: cold start {cold:8.3} s, warm start {warm:7.3} s");
    }
    println!("load average after: {}", rewind_tests::load_average());
}
