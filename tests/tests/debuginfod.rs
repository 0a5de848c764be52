//! Debug info from a real debuginfod server: `deadlock-split` has no DWARF
//! (split off into a separate file, the build id kept), and only Debian's
//! `debuginfod`, started here on loopback over a directory holding that file,
//! serves it. Reports and `rewind where` then name source lines, the file
//! is downloaded once, and with the server stopped there is a clear message
//! and frames named by symbol.

use rewind_tests::debuginfod::{build_id, client_env, served_mark_program, Server};
use rewind_tests::{guest, guest_arg, Home, Output};
use std::path::Path;

fn downloads(out: &Output) -> usize {
    out.stderr
        .lines()
        .filter(|l| l.contains("rewind: downloaded debug info"))
        .count()
}

#[test]
fn split_debug_info_comes_from_debuginfod_once_and_its_absence_is_said() {
    let exe = guest("deadlock-split");
    let id = build_id(&exe);
    let server = Server::start(&guest("split-debug"));
    server.wait_for(&id);
    let cache = tempfile::tempdir().unwrap();
    let url = server.url();
    let env = client_env(&url, cache.path());
    let h = Home::new();
    let prog = guest_arg("deadlock-split");

    // Without debuginfod the report names places by symbol only.
    let plain = h.rewind_env(&["run", "--", &prog], &[("DEBUGINFOD_URLS", "")]);
    assert_eq!(plain.code, 125, "{plain}");
    assert!(!plain.stderr.contains("deadlock.c:"), "{plain}");
    assert!(plain.stderr.contains("__lll_lock_wait+0x"), "{plain}");

    // With it, the deadlock report names the lines: downloaded once.
    let out = h.rewind_env(&["run", "--", &prog], &env);
    assert_eq!(out.code, 125, "{out}");
    let status = rewind_tests::parse_status(&out).unwrap();
    let run = status.id;
    let waits = line_of("pthread_mutex_lock(&audit); /* waits forever");
    assert!(
        out.stderr
            .contains(&format!("from transfer (deadlock.c:{waits})")),
        "{out}"
    );
    assert_eq!(downloads(&out), 1, "{out}");
    assert!(cache.path().join(&id).join("debuginfo").is_file());

    // `where` reads the cache: source lines and the source, no download.
    // At the last step every thread waits.
    let step = status.steps.unwrap().to_string();
    let w = h.rewind_env(&["where", &run, &step, "--tid", "1001"], &env);
    assert_eq!(w.code, 0, "{w}");
    assert!(
        w.stdout
            .contains(&format!("at  transfer (deadlock.c:{waits})")),
        "{w}"
    );
    assert!(w.stdout.contains("waits forever: auditor holds it"), "{w}");
    assert_eq!(downloads(&w), 0, "downloaded twice: {w}");

    // The server stopped and nothing cached: a clear message, frames by symbol.
    server.stop();
    let empty = tempfile::tempdir().unwrap();
    let env = client_env(&url, empty.path());
    let w = h.rewind_env(&["where", &run, &step, "--tid", "1001"], &env);
    assert_eq!(w.code, 0, "{w}");
    assert!(
        w.stderr
            .contains(&format!("debuginfod server {url} cannot be reached")),
        "{w}"
    );
    assert!(w.stderr.contains("named by symbol"), "{w}");
    assert!(w.stdout.contains("transfer+0x"), "{w}");
    assert!(!w.stdout.contains("deadlock.c:"), "{w}");

    h.replay_identical(&run);
}

fn line_of(needle: &str) -> u32 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest/tests/deadlock.c");
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1
}

/// The source from debuginfod (`/buildid/<id>/source/<path>`): a program
/// built here, its debug info split off and served, with the host's copy
/// of the source refused (changed after the program was built), is shown
/// with the source debuginfod serves, downloaded once.
#[test]
fn the_source_comes_from_debuginfod_when_the_hosts_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The program is older than its source here: the host's copy is refused.
    let (exe, server) = served_mark_program(dir.path());
    let cache = tempfile::tempdir().unwrap();
    let url = server.url();
    let env = client_env(&url, cache.path());
    let h = Home::new();
    let out = h.rewind_env(
        &["run", "--", exe.to_str().unwrap()],
        &[("DEBUGINFOD_URLS", "")],
    );
    let status = rewind_tests::parse_status(&out).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(status.status, "exited:0", "{out}");
    let step = h.first_call(&status.id, "write").to_string();
    let w = h.rewind_env(&["where", &status.id, &step], &env);
    assert_eq!(w.code, 0, "{w}");
    assert!(w.stdout.contains("at  work (prog.c:5)"), "{w}");
    assert!(
        w.stdout.contains(">     5 |     write(1, \"mark\\n\", 5);"),
        "{w}"
    );
    assert!(w.stdout.contains("prog.c from debuginfod ("), "{w}");
    assert_eq!(downloads(&w), 1, "the debug info: {w}");
    assert!(
        w.stderr.lines().any(|l| l.contains("downloaded source")),
        "{w}"
    );
    // Again: from the cache, nothing downloaded.
    let again = h.rewind_env(&["where", &status.id, &step], &env);
    assert!(again.stdout.contains("prog.c from debuginfod ("), "{again}");
    assert!(!again.stderr.contains("downloaded"), "{again}");
    h.replay_identical(&status.id);
}
