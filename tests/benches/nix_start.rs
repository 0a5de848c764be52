//! How long `rewind nix` takes to start a build whose input closure is
//! 1,000 store paths (64 KiB each), beside `rewind run --root` of a
//! directory holding the same files at the same paths: a store image's
//! identity is its paths' names, a root's is the hash of every file.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench nix_start
//!
//! "start" is the command's wall time less the run's own (its status
//! line's), so it counts asking Nix, making the image and writing the run,
//! and for `rewind nix` also the outputs' check after the run (`nix
//! path-info`, the substituters): an upper bound of the time before step 0.
//! Needs Debian's nix-bin (scripts/setup-tests installs it); skipped without.

use rewind_tests::{host_program, run_wall, Home};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const PATHS: usize = 1000;
const BYTES: usize = 64 << 10;

fn config() -> &'static str {
    "experimental-features = nix-command flakes\nsandbox = false\nbuild-users-group =\nsubstituters =\n"
}

fn timed(home: &Home, args: &[&str]) -> (f64, f64) {
    let t = Instant::now();
    let out = home.rewind_env(args, &[("NIX_CONFIG", config())]);
    let total = t.elapsed().as_secs_f64();
    assert_eq!(out.code, 0, "{out}");
    (
        total,
        run_wall(&out.stderr).unwrap_or_else(|| panic!("no status line:\n{out}")),
    )
}

fn main() {
    println!(
        "rewind nix start benchmark: {PATHS} store paths of {} KiB",
        BYTES >> 10
    );
    if host_program("/usr/bin/nix-build", "nix-bin").is_none() {
        return;
    }
    let busybox = host_program("/bin/busybox", "busybox-static").expect("busybox-static");
    println!("load average before: {}", rewind_tests::load_average());
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let mut names = Vec::new();
    for i in 0..PATHS {
        let p = src.join(format!("wide-input-{i:04}"));
        std::fs::create_dir_all(&p).unwrap();
        let bytes: Vec<u8> = (0..BYTES).map(|b| (b * 7 + i) as u8).collect();
        std::fs::write(p.join("data"), bytes).unwrap();
        names.push(p.to_str().unwrap().to_string());
    }
    let bb = dir.path().join("busybox/bin");
    std::fs::create_dir_all(&bb).unwrap();
    std::fs::copy(&busybox, bb.join("busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", bb.join("sh")).unwrap();
    let added = Command::new("nix-store")
        .arg("--add")
        .args(&names)
        .env("NIX_CONFIG", config())
        .output()
        .unwrap();
    assert!(
        added.status.success(),
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let paths: Vec<String> = String::from_utf8(added.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(paths.len(), PATHS);
    let list: Vec<String> = paths.iter().map(|p| format!("\"{p}\"")).collect();
    let file = dir.path().join("wide.nix");
    std::fs::write(
        &file,
        format!(
            "let bb = builtins.path {{ path = ./busybox; name = \"busybox\"; }}; in\n\
             derivation {{ name = \"wide\"; system = \"x86_64-linux\"; builder = \"${{bb}}/bin/sh\";\n\
             args = [ \"-c\" \"echo $deps > $out\" ];\n\
             deps = map builtins.storePath [ {} ]; }}\n",
            list.join(" ")
        ),
    )
    .unwrap();
    // The same files at the same paths under a root, with the shell.
    let root = dir.path().join("root");
    let store = root.join("nix/store");
    std::fs::create_dir_all(&store).unwrap();
    let bb_store = {
        // What `builtins.path` of the directory named busybox adds.
        let out = Command::new("nix-store")
            .arg("--add")
            .arg(dir.path().join("busybox"))
            .env("NIX_CONFIG", config())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    for p in paths.iter().chain([&bb_store]) {
        let to = store.join(Path::new(p).file_name().unwrap());
        let st = Command::new("cp")
            .arg("-a")
            .arg(p)
            .arg(&to)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let sh = format!("{bb_store}/bin/sh");

    let f = file.to_str().unwrap();
    let r = root.to_str().unwrap();
    let (mut nix_start, mut root_start) = (f64::MAX, f64::MAX);
    for round in 0..3 {
        // A fresh home each time: the run is recorded, not found again.
        let home = Home::unreplayed();
        let (total, wall) = timed(&home, &["nix", "-q", "--seed", &round.to_string(), f]);
        nix_start = nix_start.min(total - wall);
        let home = Home::unreplayed();
        let (total, wall) = timed(
            &home,
            &[
                "run",
                "-q",
                "--seed",
                &round.to_string(),
                "--root",
                r,
                "--",
                &sh,
                "-c",
                "true",
            ],
        );
        root_start = root_start.min(total - wall);
    }
    println!("rewind nix, start before the first step:       {nix_start:7.3} s (best of 3)");
    println!("rewind run --root of the same files, start:     {root_start:7.3} s (best of 3)");
    println!(
        "ratio root / nix:                               {:7.1}",
        root_start / nix_start
    );
    println!("load average after: {}", rewind_tests::load_average());
}
