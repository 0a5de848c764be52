//! The examples whose racy window has no system call in it (issue 7):
//! `counter`, `flag`, `lazy`, `lockfree`, `twolocks`. Each is found by
//! `rewind check --example NAME --schedules 64` (the default portfolio,
//! its first 64 schedules: a count, where the default is a budget of time,
//! so that the verdict does not depend on the host's load) and narrowed to
//! one step on the points that found it (race-directed, or memory points
//! in the widening rounds), whose sentence names the deciding access
//! (the variable and the function); the deciding step is real (the
//! command `rewind show` prints for the failing run makes it again and it
//! fails; schedule 0, without it, passes); and each `-fixed` twin passes
//! `--all` over the same 64. Every check keeps every run (`--keep all`),
//! and every run recorded here is replayed.

use rewind_tests::{Home, DEADLINE};
use std::time::Duration;

/// Narrowing a memory-points failure replays about 100 runs of 6,600
/// steps (`tally`: 58 s in a release build on a quiet host), well over
/// [`DEADLINE`] in a debug build beside the other tests on two cores.
const MEMORY_POINTS_DEADLINE: Duration = Duration::from_secs(480);

/// The flags that perturb one step, in `rewind run`'s arguments.
const PERTURB: [&str; 3] = ["--reschedule-at", "--stall-at", "--switch-at"];

/// Found within the portfolio's first 64 schedules, narrowed to one memory
/// access naming `variable`, and real: the failing run exits 2.
fn found(example: &str, variable: &str) {
    found_within(example, Some(variable), &["exited:2"], 64, &[]);
}

/// Found within the portfolio's first `schedules`, narrowed to one memory
/// access naming `variable` (when it has a name), and real: the failing
/// run ends as one of `statuses`. The narrowed report.
fn found_within(
    example: &str,
    variable: Option<&str>,
    statuses: &[&str],
    schedules: u64,
    pinned: &[&str],
) -> serde_json::Value {
    let h = Home::new();
    let n = schedules.to_string();
    let args = ["--example", example, "--schedules", &n, "--keep", "all"];
    let deadline = if pinned.contains(&"memory") {
        MEMORY_POINTS_DEADLINE
    } else {
        DEADLINE
    };
    let (out, v) = h.check_json_within(&[&args[..], pinned].concat(), &[], deadline);
    assert_eq!(out.code, 1, "the race of `{example}` was not found:\n{out}");
    assert_eq!(v["base"]["status"], "exited:0", "{v:#}");
    let tried = v["tried"].as_array().unwrap();
    assert!((1..=schedules as usize).contains(&tried.len()), "{v:#}");
    let n = &v["narrowed"];
    let deciding = n["deciding"].as_array().unwrap();
    assert_eq!(deciding.len(), 1, "not narrowed to one step: {n:#}");
    let step = deciding[0]["step"].as_u64().unwrap();
    let sentence = n["sentence"].as_str().unwrap();
    let head = format!("step {step} decides it: ");
    assert!(
        (sentence.starts_with(&format!("{head}switching away from thread 1000/"))
            || sentence.starts_with(&format!("{head}switching from thread 1000/"))
            || sentence.starts_with(&format!("{head}stalling thread 1000/")))
            && sentence.contains(" before its ")
            && variable.is_none_or(|var| sentence.contains(&format!("({var}, in ")))
            && sentence.ends_with(" makes the run violate ends-differently"),
        "{sentence}"
    );
    let failing = n["failing"].as_str().unwrap();
    let passing = n["passing"].as_str().unwrap();
    assert_eq!(passing, v["base"]["run"].as_str().unwrap(), "{n:#}");
    // The deciding step is real: the command show prints makes the failing
    // run again, and it fails; without that step's perturbation it passes.
    let args = h.remake_args(failing);
    assert!(
        args.windows(2).any(|w| PERTURB.contains(&w[0].as_str())
            && w[1].split(':').next() == Some(step.to_string().as_str())),
        "{args:?}"
    );
    // The points of the entry that found it (race-directed or memory).
    let points = v["first_violation"]["found_by"]["points"]
        .as_str()
        .unwrap_or("memory");
    assert!(["races", "memory"].contains(&points), "{v:#}");
    assert!(
        args.windows(2).any(|w| w == ["--points", points]),
        "{args:?}"
    );
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.push("-q");
    let again = h.run(&a);
    assert_eq!(again.id, failing);
    assert!(statuses.contains(&again.status.as_str()), "{}", again.out);
    let without: Vec<&str> = a
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            let flag_or_value = PERTURB.contains(s) || (*i > 0 && PERTURB.contains(&a[i - 1]));
            !flag_or_value
        })
        .map(|(_, s)| *s)
        .collect();
    let base = h.run(&without);
    assert_eq!(base.id, passing, "{}", base.out);
    assert_eq!(base.status, "exited:0", "{}", base.out);
    for t in tried {
        h.replay_identical(t["run"].as_str().unwrap());
    }
    h.replay_identical(failing);
    h.replay_identical(passing);
    v
}

/// The fixed twin passes the portfolio's first 64 schedules.
fn passes(example: &str) {
    passes_within(example, 64);
}

/// The fixed twin passes the portfolio's first `schedules`.
fn passes_within(example: &str, schedules: u64) {
    let h = Home::new();
    let n = schedules.to_string();
    let (out, v) = h.check_json(&[
        "--example",
        example,
        "--all",
        "--schedules",
        &n,
        "--keep",
        "all",
    ]);
    assert_eq!(out.code, 0, "`{example}` failed a check:\n{out}");
    assert_eq!(v["violations"], 0, "{v:#}");
    let tried = v["tried"].as_array().unwrap();
    assert_eq!(tried.len() as u64, schedules, "{v:#}");
    h.replay_identical(v["base"]["run"].as_str().unwrap());
    for t in tried {
        assert_eq!(t["status"], "exited:0", "{t:#}");
        h.replay_identical(t["run"].as_str().unwrap());
    }
}

#[test]
fn counter() {
    found("counter", "total");
}

#[test]
fn counter_fixed() {
    passes("counter-fixed");
}

#[test]
fn flag() {
    found("flag", "sold");
}

#[test]
fn flag_fixed() {
    passes("flag-fixed");
}

#[test]
fn lazy() {
    // The deciding access is the store that fills in the published storage.
    found("lazy", "storage");
}

#[test]
fn lazy_fixed() {
    passes("lazy-fixed");
}

#[test]
fn lockfree() {
    found("lockfree", "top");
}

#[test]
fn lockfree_fixed() {
    passes("lockfree-fixed");
}

#[test]
fn twolocks() {
    // Found by race-directed points since a lock's handover puts its page
    // on probation (a PCT switch decides it); before, by the widening
    // rounds' memory points (schedule 71).
    found_within("twolocks", Some("balance"), &["exited:2"], 128, &[]);
}

#[test]
fn twolocks_fixed() {
    passes("twolocks-fixed");
}

/// Buffers handed through a mutex and a condition variable, and a page
/// count updated outside the lock: the count is found.
#[test]
fn handoff() {
    found_within("handoff", Some("pages"), &["exited:2"], 128, &[]);
}

#[test]
fn handoff_fixed() {
    passes_within("handoff-fixed", 16);
}

/// Two threads drop a reference with a load and a store: the session is
/// leaked (exit 2) or freed twice (the C library aborts).
#[test]
fn refcount() {
    // Memory points pinned: the default finds it with race-directed points
    // (random, schedule 37), where narrowing leaves 5 perturbations, not one.
    let statuses = ["exited:2", "killed:SIGABRT"];
    found_within("refcount", None, &statuses, 256, &["--points", "memory"]);
}

#[test]
fn refcount_fixed() {
    passes_within("refcount-fixed", 16);
}

/// A `cargo test` binary whose `Counter` loses an update: the deciding
/// step is in `Counter::incr` (lib.rs), and the interleaving is on the
/// counter's bytes, the ones the deciding step's access touches.
#[test]
fn tally() {
    // Memory points pinned: the default finds it only in the widening
    // rounds (schedule 57, random on memory points; none of the 56
    // schedules before it did), which with
    // narrowing's memory-point runs can pass the 120 s a command may take.
    let v = found_within("tally", None, &["exited:101"], 64, &["--points", "memory"]);
    let n = &v["narrowed"];
    let sentence = n["sentence"].as_str().unwrap();
    assert!(
        sentence.contains(" in lib::Counter::incr (lib.rs:"),
        "{sentence}"
    );
    let race = &n["race"];
    let addr = race["between"]["addr"].as_u64().unwrap();
    let after = &race["after"];
    assert_eq!(after["addr"].as_u64(), Some(addr), "{race:#}");
    assert_eq!(after["step"], n["deciding"][0]["step"], "{race:#}");
    // Each access is made in the Rust core's atomic_load or atomic_store,
    // and told by the line of lib.rs that called it, in both threads: the
    // load, then the other thread's store, then this thread's store.
    let lib = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../guest/examples/tally/lib.rs"
    );
    let text = std::fs::read_to_string(lib).unwrap();
    let line = |needle: &str| 1 + text.lines().position(|l| l.contains(needle)).unwrap();
    let load = line("let v = self.n.load(Ordering::Relaxed);");
    let store = line("self.n.store(v + 1, Ordering::Relaxed);");
    for (access, at) in [("before", load), ("between", store), ("after", store)] {
        assert_eq!(
            race[access]["place"],
            format!("lib::Counter::incr (lib.rs:{at})"),
            "{race:#}"
        );
    }
    assert_ne!(race["between"]["tid"], race["after"]["tid"], "{race:#}");
}

#[test]
fn tally_fixed() {
    passes_within("tally-fixed", 8);
}
