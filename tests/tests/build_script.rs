//! `cargo build` at the root runs this crate's build.rs: without musl-gcc it
//! must still succeed, say why the musl program is missing and what installs
//! it, and build every other guest program; under scripts/test
//! (`REWIND_REQUIRE_ALL_GUESTS=1`) the same absence fails the build.

use rewind_tests::{run_command, Output};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Compiles build.rs as cargo does (it uses std alone) and runs it with
/// musl-gcc missing.
fn build_script_without_musl(dir: &Path, require_all: bool) -> Output {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join("build-script");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = run_command(
        {
            let mut c = Command::new(&rustc);
            c.args(["--edition", "2021", "-o"])
                .arg(&exe)
                .arg(manifest_dir.join("build.rs"));
            c
        },
        Duration::from_secs(120),
    );
    assert_eq!(out.code, 0, "build.rs does not compile:\n{out}");
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut c = Command::new(&exe);
    c.env("CARGO_MANIFEST_DIR", manifest_dir)
        .env("OUT_DIR", &out_dir)
        .env("RUSTC", &rustc)
        .env("REWIND_MUSL_CC", dir.join("no-musl-gcc-here"))
        .env_remove("REWIND_REQUIRE_ALL_GUESTS");
    if require_all {
        c.env("REWIND_REQUIRE_ALL_GUESTS", "1");
    }
    run_command(c, Duration::from_secs(300))
}

#[test]
fn no_musl_gcc_is_a_warning_and_a_skipped_test() {
    let dir = tempfile::tempdir().unwrap();
    let out = build_script_without_musl(dir.path(), false);
    assert_eq!(out.code, 0, "build.rs failed without musl-gcc:\n{out}");
    let warning = out
        .stdout
        .lines()
        .find(|l| l.starts_with("cargo:warning="))
        .unwrap_or_else(|| panic!("no cargo:warning:\n{out}"));
    assert!(
        warning.contains("scripts/setup") && warning.contains("skipped"),
        "{warning}"
    );
    let built = dir.path().join("out");
    assert!(!built.join("threads-musl").exists());
    for other in [
        "threads",
        "threads-rust",
        "hello-dynamic",
        "bank",
        "pool-sleep",
    ] {
        assert!(built.join(other).exists(), "{other} was not built:\n{out}");
    }
}

#[test]
fn scripts_test_requires_musl_gcc() {
    let dir = tempfile::tempdir().unwrap();
    let out = build_script_without_musl(dir.path(), true);
    assert_ne!(out.code, 0, "{out}");
    assert!(
        out.stderr.contains("scripts/setup"),
        "the failure does not say what installs musl-gcc:\n{out}"
    );
}
