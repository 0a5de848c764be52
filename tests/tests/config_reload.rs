//! The `config-reload` example (issue 13, part 8): a writer rewrites a
//! config file in place (truncate, then write) while a reader rereads it.
//! `rewind check` finds a schedule where the reader sees a torn config and
//! narrows it, both by the exit status (ends-differently, to one step) and
//! by the example's property script, which reads the run's output; the fix
//! (a temporary file renamed over the config) passes all 32 schedules the
//! test tries, by the status and by the script. Every
//! run recorded here is replayed.

use rewind_tests::*;

/// The property script, and a PATH with `rewind` on it.
fn script_property() -> (String, String) {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../guest/examples/config-reload.check"
    );
    let bin_dir = rewind_bin().parent().unwrap().to_str().unwrap().to_string();
    let path = format!("{bin_dir}:{}", std::env::var("PATH").unwrap_or_default());
    (format!("script={script}"), path)
}

/// Found, and narrowed to at most `steps` deciding steps.
#[track_caller]
fn found_and_narrowed(out: &Output, v: &serde_json::Value, property: &str, steps: usize) {
    assert_eq!(out.code, 1, "the torn read was not found:\n{out}");
    assert_eq!(v["base"]["status"], "exited:0", "{v:#}");
    let n = &v["narrowed"];
    let deciding = n["deciding"].as_array().map_or(0, Vec::len);
    assert!(
        (1..=steps).contains(&deciding),
        "not narrowed to {steps} step(s): {n:#}"
    );
    let sentence = n["sentence"].as_str().unwrap();
    assert!(sentence.contains(property), "{sentence}");
    let failing = n["failing"].as_str().unwrap();
    assert!(!failing.is_empty(), "{n:#}");
}

#[test]
fn the_torn_read_is_found_and_narrowed_by_exit_status() {
    let home = Home::new();
    // With syscall points one switch after the truncation decides it. (With
    // memory points, check's default, it is found too, but narrowing stops
    // at several steps together: the torn read it finds first is a later
    // update's, where the reader is napping and a stall must wake it.)
    let (out, v) = home.check_json(&["--example", "config-reload", "--points", "syscalls"]);
    found_and_narrowed(&out, &v, "ends-differently", 1);
    // The deciding step is in the writer, between truncation and writing.
    let sentence = v["narrowed"]["sentence"].as_str().unwrap();
    assert!(
        sentence.contains("write_config (config-reload.c:"),
        "{sentence}"
    );
    let failing = v["narrowed"]["failing"].as_str().unwrap();
    let log = home.log(failing);
    assert!(log.lines().any(|l| l.starts_with("torn: ")), "{log}");
}

#[test]
fn the_property_script_spots_the_torn_read() {
    let home = Home::new();
    let (prop, path) = script_property();
    let (out, v) = home.check_json_env(
        &[
            "--example",
            "config-reload",
            "--points",
            "syscalls",
            "--property",
            &prop,
        ],
        &[("PATH", &path)],
    );
    // With syscall points: at most two steps (one, since the writer starts
    // first and the reader is runnable during its first update).
    found_and_narrowed(&out, &v, "script=", 2);
    assert!(
        out.stdout.contains("the reader saw a torn config")
            || out.stderr.contains("the reader saw a torn config")
            || v.to_string().contains("the reader saw a torn config"),
        "{out}"
    );
}

#[test]
fn the_fix_passes_every_schedule() {
    let home = Home::new();
    let (prop, path) = script_property();
    let (out, v) = home.check_json_env(
        &[
            "--example",
            "config-reload-fixed",
            "--all",
            // The window is between system calls: syscall points reach it
            // (and keep 32 schedules within the test's deadline).
            "--points",
            "syscalls",
            "--schedules",
            "32",
            "--property",
            &prop,
        ],
        &[("PATH", &path)],
    );
    assert_eq!(out.code, 0, "the fix failed a check:\n{out}");
    assert_eq!(v["violations"], 0, "{v:#}");
    let tried = v["tried"].as_array().unwrap();
    assert!(!tried.is_empty(), "{v:#}");
    for t in tried {
        assert_eq!(t["status"], "exited:0", "{t:#}");
    }
}
