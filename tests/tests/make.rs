//! Toolchains in the machine (issue 24, item 5): `make -j2 all check` of a
//! small C project (`tests/make-project/`: two library sources archived
//! with `ar`, a program and a test linked against the archive, the test
//! run by `check`) with Debian's gcc, over a `--root` tree made of the
//! installed packages' own files, builds object files, an archive and
//! binaries byte-identical to the same build run natively, with two
//! compilers alive at once as `-j2` asks, and the run replays identically.

use rewind_tests::roots::{add_package, add_program, missing_packages, new_root};
use rewind_tests::*;
use std::path::Path;
use std::time::{Duration, SystemTime};
use vmm::run::manifest::DEFAULT_ENV;

/// What `make`, `sh`, `cc` and what they start need, Debian 12's names.
const PACKAGES: &[&str] = &[
    "make",
    "dash",
    "gcc",
    "gcc-12",
    "cpp-12",
    "binutils",
    "binutils-x86-64-linux-gnu",
    "libc6",
    "libc6-dev",
    "linux-libc-dev",
    "libgcc-12-dev",
    "libgcc-s1",
];

/// What the build makes, each compared byte for byte.
const OUTPUTS: &[&str] = &[
    "stats.o",
    "words.o",
    "main.o",
    "test.o",
    "libtally.a",
    "tally",
    "test_tally",
];

/// The project's directory in the guest (and, under a temporary directory, natively).
const PROJ: &str = "/work/proj";

/// Copies the project's sources into `dir` (made), their times set to one
/// fixed instant before any clock of the build, natively or in the run.
fn copy_project(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("make-project");
    let then = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dir.join(e.file_name());
        std::fs::copy(e.path(), &to).unwrap();
        let f = std::fs::File::options().write(true).open(&to).unwrap();
        f.set_modified(then).unwrap();
    }
}

/// The most `cc` processes of the run alive at one step (from the
/// execve that made each to its exit_group): `-j2`'s two jobs at a time.
fn most_compilers_at_once(home: &Home, run: &str) -> usize {
    let mut live = std::collections::BTreeSet::new();
    let mut most = 0;
    for e in home.events_json(run) {
        let text = e["text"].as_str().unwrap_or("");
        let pid = e["pid"].as_u64();
        if text.starts_with("execve(\"/usr/bin/cc\"") && e["ret"] == 0 {
            live.insert(pid);
            most = most.max(live.len());
        } else if e["name"] == "exit_group" {
            live.remove(&pid);
        }
    }
    most
}

#[test]
fn make_j2_builds_a_c_project_byte_identical_to_native() {
    let missing = missing_packages(PACKAGES);
    if !missing.is_empty() {
        skip_unless_required(&format!(
            "packages {} are not installed (scripts/setup-tests installs make; \
             the rest come with build-essential)",
            missing.join(", ")
        ));
        return;
    }
    let root = new_root("rewind-make-root-");
    for p in PACKAGES {
        add_package(root.path(), p);
    }
    // `cc` is an alternative (/usr/bin/cc -> /etc/alternatives/cc -> gcc),
    // which no package lists.
    add_program(root.path(), "/usr/bin/cc");
    copy_project(&root.path().join(PROJ.trim_start_matches('/')));
    // Natively: the same command, environment and relative paths (the
    // Makefile maps the build directory to `.` in the debug info).
    let native_dir = tempfile::tempdir().unwrap();
    let native_proj = native_dir.path().join(PROJ.trim_start_matches('/'));
    copy_project(&native_proj);
    let args = ["-j2", "all", "check"];
    let (native, native_wall) = table::timed(|| {
        native_with_env(DEFAULT_ENV, Some(&native_proj), "/usr/bin/make", &args, b"")
    });
    assert_eq!(native.code, 0, "natively:\n{native}");
    let passed = "all 6 checks passed";
    native.stdout_line_with(passed);

    let home = Home::new();
    let r = root.path().to_str().unwrap();
    let (run, wall) = table::timed(|| {
        home.run(&[
            "--root",
            r,
            "--cwd",
            PROJ,
            "--",
            "/usr/bin/make",
            "-j2",
            "all",
            "check",
        ])
    });
    assert_eq!(run.status, "exited:0", "{}", run.out);
    run.out.stdout_line_with(passed);
    // Every command native make ran, inside Rewind too (-j2 may order them otherwise).
    // Natively the build directory is the temporary one.
    let native_out = native
        .stdout
        .replace(native_dir.path().to_str().unwrap(), "");
    let mut want: Vec<&str> = native_out.lines().collect();
    let mut got: Vec<&str> = run.out.stdout.lines().collect();
    want.sort();
    got.sort();
    assert_eq!(got, want, "{}", run.out);
    // The files as the guest left them, before its last step (the exit,
    // after which no process is live to read them through).
    let steps = run.steps.expect("a step count");
    for f in OUTPUTS {
        let native = std::fs::read(native_proj.join(f)).unwrap();
        let inside = home.cat_bytes(&run.id, steps - 1, &format!("{PROJ}/{f}"));
        assert!(
            inside == native,
            "{f}: {} bytes inside Rewind, {} natively, not the same bytes",
            inside.len(),
            native.len()
        );
    }
    assert_eq!(most_compilers_at_once(&home, &run.id), 2, "make -j2");
    home.replay_identical(&run.id);
    table::figures("make -j2 all check", &run, wall, native_wall);
}
