//! Go (issue 24, item 4): programs built by Debian's `golang-go`, static
//! (`CGO_ENABLED=0`) and with cgo (dynamically linked, through the C
//! library), with goroutines, channels, `sync.Mutex`, a timer and the
//! garbage collector, run at `--cores 1` and `--cores 4` (GOMAXPROCS follows)
//! and print what they print natively. `rewind check` finds the lost deposit
//! of a Go test binary (`go test -c`, tests/go/bank) and `where` names its
//! Go source line; the fixed twin (`-tags fixed`) passes. Every recorded run
//! is replayed and must be identical (`Home` does it when dropped) where
//! `rewind doctor` says `rdtsc` is trapped (it tries it in a machine): Go
//! seeds its scheduler's randomness from `rdtsc`. On PVM it is trapped
//! while the engine runs the guest (`vmm/src/machine/tsc.rs`); a host that
//! refuses that has the runs compared with native and not replayed, and the
//! checks (whose narrowing replays) skipped.

use rewind_tests::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether the guest's `rdtsc` reads the machine's virtual counter here
/// (`rewind doctor`, asked once).
fn rdtsc_trapped() -> bool {
    static TRAPPED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRAPPED.get_or_init(|| {
        let out = Home::unreplayed().rewind(&["doctor"]);
        out.stdout
            .lines()
            .any(|l| l.starts_with("ok  rdtsc is trapped"))
    })
}

/// `bank_test` for a check, which narrows by replaying: None, said, where
/// Go's runs cannot replay.
fn checked_bank_test(fixed: bool) -> Option<String> {
    let test = bank_test(fixed)?;
    if !rdtsc_trapped() {
        skipped(
            "a check of a Go test: its narrowing replays, and rdtsc is not trapped on this host",
        );
        return None;
    }
    Some(test)
}

/// A home whose runs are replayed at its end where Go's runs can be.
fn home() -> Home {
    if rdtsc_trapped() {
        return Home::new();
    }
    skipped("replaying Go's runs: rdtsc is not trapped on this host, and Go seeds from it");
    Home::unreplayed()
}

/// The Go sources: tests/go (one module, no dependencies).
fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("go")
}

/// `go ARGS` in `dir` with `env`, its cache and GOPATH under target/ (no
/// network: the module has no dependencies). None, said, without `go`.
fn go(dir: &str, args: &[&str], env: &[(&str, &str)]) -> Option<()> {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut cmd = Command::new("go");
    cmd.args(args)
        .current_dir(sources().join(dir))
        .env("GOCACHE", tmp.join("go-cache"))
        .env("GOPATH", tmp.join("go-path"))
        .env("GOFLAGS", "")
        .env("GOTOOLCHAIN", "local")
        .envs(env.iter().copied());
    match cmd.output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            skipped("go is not installed (scripts/setup-tests installs golang-go)");
            None
        }
        Err(e) => panic!("go {args:?}: {e}"),
        Ok(out) => {
            assert!(
                out.status.success(),
                "go {args:?} in tests/go/{dir}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            Some(())
        }
    }
}

/// The program `go build` makes of tests/go/work, with cgo or without.
fn work(cgo: bool) -> Option<String> {
    let name = if cgo { "work-cgo" } else { "work-static" };
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("go-bin")
        .join(name);
    let out = out.to_str().expect("UTF-8 path").to_string();
    let flag = if cgo { "1" } else { "0" };
    go(
        "work",
        &["build", "-o", &out, "."],
        &[("CGO_ENABLED", flag)],
    )?;
    Some(out)
}

/// The test binary `go test -c` makes of tests/go/bank, racy or fixed.
fn bank_test(fixed: bool) -> Option<String> {
    let name = if fixed {
        "bank-fixed.test"
    } else {
        "bank.test"
    };
    let out = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("go-bin")
        .join(name);
    let out = out.to_str().expect("UTF-8 path").to_string();
    let mut args = vec!["test", "-c", "-o", &out];
    if fixed {
        args.extend(["-tags", "fixed"]);
    }
    args.push(".");
    go("bank", &args, &[])?;
    Some(out)
}

/// The work program's output but for its GOMAXPROCS line, which follows
/// the cores (the host's natively).
fn without_gomaxprocs(out: &str) -> String {
    out.lines()
        .filter(|l| !l.starts_with("GOMAXPROCS"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn go_programs_run_as_natively_at_one_and_four_cores() {
    for cgo in [false, true] {
        let Some(prog) = work(cgo) else { return };
        let (native, native_wall) = table::timed(|| native_with_env(&[], None, &prog, &[], b""));
        assert_eq!(native.code, 0, "{prog} natively:\n{native}");
        assert!(
            native
                .stdout
                .contains(&format!("gc ran true, timer waited true, cgo {cgo}")),
            "{native}"
        );
        for cores in ["1", "4"] {
            let h = home();
            let (run, wall) =
                table::timed(|| h.run(&["--cores", cores, "--timeout", "100", "--", &prog]));
            let row = format!("go work (cgo {cgo}) --cores {cores}");
            table::figures(&row, &run, wall, native_wall);
            assert_eq!(
                run.status, "exited:0",
                "{prog} at --cores {cores}:\n{}",
                run.out
            );
            assert_eq!(
                without_gomaxprocs(&run.out.stdout),
                without_gomaxprocs(&native.stdout),
                "{prog} at --cores {cores}: output differs from the native run's"
            );
            run.out.stdout_line_with(&format!("GOMAXPROCS {cores}"));
        }
    }
}

#[test]
fn check_finds_the_lost_deposit_of_a_go_test_and_where_names_its_line() {
    let Some(racy) = checked_bank_test(false) else {
        return;
    };
    let h = Home::new();
    let out = h.rewind(&["check", "--cores", "2", "--schedules", "8", "--", &racy]);
    assert_eq!(out.code, 1, "the check finds the lost deposit:\n{out}");
    let open = out.stdout_line_with("open it: rewind open ");
    let mut words = open.split_whitespace().skip(4);
    let (run, step) = (words.next().unwrap(), words.next().unwrap());
    assert_eq!(run, failing_run_in(&out), "{out}");
    let at = h.rewind(&["where", run, step]);
    assert_eq!(at.code, 0, "{at}");
    // The frame shown is the deposit's, not Go's runtime or fmt beneath it.
    let own = at.stdout_line_with("  at  ");
    assert!(
        own.contains("bank.(*Bank).Deposit (bank.go:"),
        "where names the Go source line of the deposit:\n{at}"
    );
}

#[test]
fn the_fixed_go_test_passes_the_check() {
    let Some(fixed) = checked_bank_test(true) else {
        return;
    };
    let h = Home::new();
    let out = h.rewind(&["check", "--cores", "2", "--schedules", "8", "--", &fixed]);
    assert_eq!(out.code, 0, "the fixed bank loses no deposit:\n{out}");
}
