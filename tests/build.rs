//! Builds the guest programs the end-to-end tests run, into OUT_DIR, and
//! tells the tests where they are (`REWIND_GUESTS`):
//!
//! - `guest/tests/*.c` with glibc: `cc -static -O1 -g -pthread`, named after the file;
//! - `threads.c` and `account.c` with musl too: `musl-gcc -static` ->
//!   `threads-musl`, `account-musl`;
//! - `threads.rs` with Rust std, static-pie: `rustc -C target-feature=+crt-static` -> `threads-rust`;
//! - `flaky.rs`, a libtest binary (`rustc --test`) with a flaky test -> `flaky-test`;
//! - `values.rs` the same way unoptimized (its variables in memory, for the
//!   debug adapter's variables tests) -> `values-rust`;
//! - `hello.c` dynamically linked -> `hello-dynamic` (run with its interpreter and libc);
//! - `where-procs.c` dynamically linked -> `where-procs-dynamic` (stacks through libc);
//! - `guest/examples/bank.c` -> `bank`, so the benchmark can time it natively,
//!   and `bank-fixed.c` -> `bank-fixed` (both builders' programs in tests/tests/nix.rs);
//! - `guest/examples/pool.c` with a sleep where main yields -> `pool-sleep`;
//! - `deadlock` and `long` with their debug info split off (`objcopy
//!   --only-keep-debug`, then `--strip-debug`; the build id stays) ->
//!   `deadlock-split`, `long-split` and `split-debug/*.debug`, for the
//!   debuginfod test and the `where` benchmark.
//!
//! Only musl-gcc is optional (`REWIND_MUSL_CC` names another): without it an
//! ordinary `cargo build` still succeeds, a `cargo:warning` says that
//! `scripts/setup-tests` installs it, and the test that runs `threads-musl` says it
//! was skipped. `scripts/test` sets `REWIND_REQUIRE_ALL_GUESTS=1`, so that the
//! suite itself never skips it.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("..");
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap());
    let tests = root.join("guest/tests");
    let examples = root.join("guest/examples");
    println!("cargo:rerun-if-changed={}", tests.display());
    for example in ["bank.c", "bank-fixed.c", "pool.c"] {
        println!(
            "cargo:rerun-if-changed={}",
            examples.join(example).display()
        );
    }
    println!("cargo:rustc-env=REWIND_GUESTS={}", out.display());
    println!("cargo:rerun-if-env-changed=REWIND_MUSL_CC");
    println!("cargo:rerun-if-env-changed=REWIND_REQUIRE_ALL_GUESTS");
    let musl = env::var("REWIND_MUSL_CC").unwrap_or_else(|_| "musl-gcc".into());
    let have_musl = found(&musl);
    if !have_musl && env::var_os("REWIND_REQUIRE_ALL_GUESTS").is_some_and(|v| v == "1") {
        panic!("`{musl}` not found: scripts/setup-tests installs it (musl-tools)");
    }

    let mut c_sources: Vec<PathBuf> = std::fs::read_dir(&tests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    c_sources.sort();
    for src in &c_sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let name = src.file_stem().unwrap().to_str().unwrap();
        build(
            "cc",
            &["-static", "-O1", "-g", "-pthread", "-Wall"],
            src,
            &out.join(name),
        );
    }
    if have_musl {
        for name in ["threads", "account"] {
            build(
                &musl,
                &["-static", "-O1", "-g", "-pthread", "-Wall"],
                &tests.join(format!("{name}.c")),
                &out.join(format!("{name}-musl")),
            );
        }
    } else {
        println!(
            "cargo:warning=`{musl}` not found: the static musl test program is not built \
             and its test is skipped (scripts/setup-tests installs musl-tools)"
        );
        // Look again when something is installed.
        for dir in env::split_paths(&env::var_os("PATH").unwrap_or_default()) {
            if dir.is_dir() {
                println!("cargo:rerun-if-changed={}", dir.display());
            }
        }
    }
    build(
        "cc",
        &["-O1", "-g", "-pthread"],
        &tests.join("hello.c"),
        &out.join("hello-dynamic"),
    );
    build(
        "cc",
        &["-O1", "-g"],
        &tests.join("where-procs.c"),
        &out.join("where-procs-dynamic"),
    );
    for name in ["bank", "bank-fixed"] {
        build(
            "cc",
            &["-static", "-O1", "-g", "-pthread"],
            &examples.join(format!("{name}.c")),
            &out.join(name),
        );
    }
    build(
        "cc",
        &[
            "-static",
            "-O1",
            "-g",
            "-pthread",
            "-DLET_WORKERS_START()=usleep(100)",
        ],
        &examples.join("pool.c"),
        &out.join("pool-sleep"),
    );
    for name in ["deadlock", "long"] {
        split_debug(
            &out.join(name),
            &out.join(format!("{name}-split")),
            &out.join("split-debug"),
        );
    }
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    build(
        &rustc,
        &[
            "--edition",
            "2021",
            "-C",
            "target-feature=+crt-static",
            "-O",
            "-g",
        ],
        &tests.join("threads.rs"),
        &out.join("threads-rust"),
    );
    build(
        &rustc,
        &[
            "--edition",
            "2021",
            "-C",
            "target-feature=+crt-static",
            "-C",
            "opt-level=0",
            "-g",
        ],
        &tests.join("values.rs"),
        &out.join("values-rust"),
    );
    build(
        &rustc,
        &[
            "--edition",
            "2021",
            "--test",
            "-C",
            "target-feature=+crt-static",
            "-O",
        ],
        &tests.join("flaky.rs"),
        &out.join("flaky-test"),
    );
}

/// Whether `program` names an executable file, directly or through `PATH`.
fn found(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    env::split_paths(&env::var_os("PATH").unwrap_or_default()).any(|d| executable(&d.join(program)))
}

fn build(compiler: &str, flags: &[&str], src: &Path, exe: &Path) {
    let output = Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(exe)
        .arg(src)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run `{compiler}` for {} (scripts/setup-tests installs it): {e}",
                src.display()
            )
        });
    if !output.status.success() {
        panic!(
            "`{compiler}` failed for {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// `exe` copied to `stripped` without its debug info, which goes to
/// `debug_dir/<name>.debug`.
fn split_debug(exe: &Path, stripped: &Path, debug_dir: &Path) {
    std::fs::create_dir_all(debug_dir).unwrap();
    std::fs::copy(exe, stripped).unwrap();
    let name = stripped.file_name().unwrap().to_str().unwrap();
    let debug = debug_dir.join(format!("{name}.debug"));
    for args in [
        vec![
            "--only-keep-debug".as_ref(),
            stripped.as_os_str(),
            debug.as_os_str(),
        ],
        vec!["--strip-debug".as_ref(), stripped.as_os_str()],
    ] {
        let st = Command::new("objcopy")
            .args(&args)
            .status()
            .expect("objcopy (binutils; scripts/setup-tests installs it)");
        assert!(st.success(), "objcopy {args:?} failed");
    }
}
