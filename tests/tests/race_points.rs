//! Race-directed memory points (`--points races`, issue 22): a check first
//! records a learning run, in which a page traps only once two threads
//! touch it with nothing ordering them; its pages are then every schedule's
//! `race_pages`, an input of the run (`rewind show` makes it again). The
//! examples whose race has no system call in its window are still found and
//! narrowed to one access, their fixed twins pass, and a run's points are
//! far fewer than with `--points memory`. Every run recorded here is
//! replayed.

use rewind_tests::{guest_arg, Home};

/// Found with race-directed points and narrowed to one step naming
/// `variable`; the learning run learned at least one page; the failing run
/// is made again by the command `rewind show` prints. The report.
fn found(example: &str, variable: &str) -> serde_json::Value {
    let h = Home::new();
    let (out, v) = h.check_json(&["--points", "races", "--keep", "all", "--example", example]);
    assert_eq!(out.code, 1, "the race of `{example}` was not found:\n{out}");
    let learned = &v["learned"];
    let pages = learned["pages"].as_array().expect("learned pages");
    assert!(!pages.is_empty(), "{v:#}");
    h.replay_identical(learned["run"].as_str().unwrap());
    let n = &v["narrowed"];
    assert_eq!(n["deciding"].as_array().unwrap().len(), 1, "{n:#}");
    let sentence = n["sentence"].as_str().unwrap();
    assert!(
        sentence.contains(&format!("({variable}, in ")),
        "{sentence}"
    );
    let failing = n["failing"].as_str().unwrap();
    assert_eq!(n["passing"], v["base"]["run"], "{n:#}");
    let args = h.remake_args(failing);
    let at = args
        .iter()
        .position(|a| a == "--race-pages")
        .expect("--race-pages");
    let listed: Vec<&str> = args[at + 1].split(',').collect();
    let want: Vec<&str> = pages.iter().map(|p| p.as_str().unwrap()).collect();
    assert_eq!(listed, want, "{args:?}");
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.push("-q");
    let again = h.run(&a);
    assert_eq!(again.id, failing);
    assert_eq!(again.status, "exited:2", "{}", again.out);
    for t in v["tried"].as_array().unwrap() {
        h.replay_identical(t["run"].as_str().unwrap());
    }
    v
}

/// The fixed twin passes 16 schedules, every one replayed.
fn passes(example: &str) {
    let h = Home::new();
    let (out, v) = h.check_json(&[
        "--points",
        "races",
        "--keep",
        "all",
        "--example",
        example,
        "--all",
        "--schedules",
        "16",
    ]);
    assert_eq!(out.code, 0, "`{example}` failed a check:\n{out}");
    for t in v["tried"].as_array().unwrap() {
        h.replay_identical(t["run"].as_str().unwrap());
    }
}

#[test]
fn counter_is_found_and_its_twin_passes() {
    found("counter", "total");
    passes("counter-fixed");
}

#[test]
fn flag_is_found_and_its_twin_passes() {
    found("flag", "sold");
    passes("flag-fixed");
}

#[test]
fn lockfree_is_found_and_its_twin_passes() {
    found("lockfree", "top");
    passes("lockfree-fixed");
}

#[test]
fn lazy_is_found_and_its_twin_passes() {
    found("lazy", "storage");
    passes("lazy-fixed");
}

/// The buffers `handoff` hands through a mutex and a condition variable
/// (mapped afresh by the C library, far above the program's data) are
/// sharing, not a race: no page of theirs is learned, and the unlocked
/// page count is found all the same.
#[test]
fn handed_over_buffers_are_not_race_pages() {
    let v = found("handoff", "pages");
    for page in v["learned"]["pages"].as_array().unwrap() {
        let p = page.as_str().and_then(|p| p.strip_prefix("0x")).unwrap();
        let addr = u64::from_str_radix(p, 16).unwrap();
        assert!(
            addr < 0x1000_0000,
            "a buffer's page {page} is learned: {v:#}"
        );
    }
    passes("handoff-fixed");
}

/// Pages only one thread at a time uses, handed over in order, make no
/// points: `bank`'s learning run has far fewer steps than its run with
/// every shared page trapping.
#[test]
fn ordered_handovers_make_no_points() {
    let h = Home::new();
    let steps = |points: &str| {
        let r = h.run(&["-q", "--points", points, "--example", "bank"]);
        h.replay_identical(&r.id);
        r.steps.expect("a step count")
    };
    let (memory, races) = (steps("memory"), steps("races"));
    assert!(races < memory, "races {races} steps, memory {memory}");
}

/// `counter 2500` (guest/tests/counter.c): in the learning run each
/// thread makes its 2,500 increments of `total` in one stretch, the second
/// after the first has ended, so the two never touch the page at the same
/// time. The ended thread stays the page's owner, the page's copy tells
/// the bytes it wrote (`total`), and the second thread's first read of
/// them, ordered after nothing of the first's, confirms the race: the
/// page is learned, and the lost update memory points find is found with
/// race-directed points. Every run is replayed.
#[test]
fn threads_that_never_overlap_still_race() {
    let h = Home::new();
    let prog = guest_arg("counter");
    let (out, v) = h.check_json(&[
        "--points",
        "races",
        "--keep",
        "all",
        "--no-narrow",
        "--schedules",
        "8",
        "--",
        &prog,
        "2500",
    ]);
    assert_eq!(out.code, 1, "the lost update was not found:\n{out}");
    let learned = &v["learned"];
    assert!(
        !learned["pages"]
            .as_array()
            .expect("learned pages")
            .is_empty(),
        "{v:#}"
    );
    h.replay_identical(learned["run"].as_str().unwrap());
    for t in v["tried"].as_array().unwrap() {
        h.replay_identical(t["run"].as_str().unwrap());
    }
}
