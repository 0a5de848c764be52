//! The programs the tests run: the guest programs `build.rs` made, the
//! host's programs, the same programs run natively to compare with, and
//! what a test skips when one is missing.

use crate::{run_command, run_command_with_input, Output, DEADLINE};
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Whether this CPU has the feature `flag` (a word of /proc/cpuinfo's
/// `flags`: `avx512f`, AVX-512 Foundation).
pub fn cpu_has(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|f| f == flag))
        })
        .unwrap_or(false)
}

/// A self-checking guest program run natively, on the host's Linux: it must
/// print `all passed`. Its output, which the same program inside Rewind
/// should give too.
pub fn native_passing(name: &str) -> String {
    let out = run_command(Command::new(guest(name)), DEADLINE);
    // The failing lines first: a long output is cut in its middle.
    let failed: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .collect();
    assert!(
        out.code == 0 && out.stdout.contains("all passed"),
        "{name} natively:\n{}\n{out}",
        failed.join("\n")
    );
    out.stdout
}

/// `prog ARGS` run natively with exactly the environment `env` (in that
/// order: `env -i`, as the guest gets it), in `cwd` (None: the test's),
/// `input` on standard input, and every signal at its default action, as
/// the guest starts: a test run from a background job inherits SIGINT and
/// SIGQUIT ignored, which a shell's `trap` cannot undo.
pub fn native_with_env(
    env: &[&str],
    cwd: Option<&Path>,
    prog: &str,
    args: &[&str],
    input: &[u8],
) -> Output {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("/usr/bin/env");
    cmd.arg("-i").args(env).arg(prog).args(args);
    // SAFETY: signal(2) is async-signal-safe; nothing else runs here.
    unsafe {
        cmd.pre_exec(|| {
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            Ok(())
        });
    }
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    run_command_with_input(cmd, DEADLINE, input)
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

/// A small C program for the tests that build one themselves: `work()`
/// writes `mark` at line 5, called from `main` at line 10.
pub const MARK_PROGRAM: &str = "#include <unistd.h>\n\nstatic void work(void)\n{\n    write(1, \"mark\\n\", 5);\n}\n\nint main(void)\n{\n    work();\n    return 0;\n}\n";

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
