//! The examples whose racy window has no system call in it (issue 7):
//! `counter`, `flag`, `lazy`, `lockfree`, `twolocks`. Each is found by
//! `rewind check --example NAME` (check's points default to memory) within
//! the default schedules and narrowed to one step, whose sentence names the deciding access (the
//! variable and the function); the deciding step is real (the
//! command `rewind show` prints for the failing run makes it again and it
//! fails; schedule 0, without it, passes); and each `-fixed` twin passes
//! `--all` over the default schedules. Every run recorded here is replayed.

use rewind_tests::Home;

/// The flags that perturb one step, in `rewind run`'s arguments.
const PERTURB: [&str; 3] = ["--reschedule-at", "--stall-at", "--switch-at"];

/// Found, narrowed to one memory access naming `variable`, and real.
fn found(example: &str, variable: &str) {
    let h = Home::new();
    let (out, v) = h.check_json(&["--example", example]);
    assert_eq!(out.code, 1, "the race of `{example}` was not found:\n{out}");
    assert_eq!(v["base"]["status"], "exited:0", "{v:#}");
    let tried = v["tried"].as_array().unwrap();
    assert!((1..=64).contains(&tried.len()), "{v:#}");
    let n = &v["narrowed"];
    let deciding = n["deciding"].as_array().unwrap();
    assert_eq!(deciding.len(), 1, "not narrowed to one step: {n:#}");
    let step = deciding[0]["step"].as_u64().unwrap();
    let sentence = n["sentence"].as_str().unwrap();
    let head = format!("step {step} decides it: ");
    assert!(
        (sentence.starts_with(&format!("{head}switching away from thread 1000/"))
            || sentence.starts_with(&format!("{head}stalling thread 1000/")))
            && sentence.contains(" before its ")
            && sentence.contains(&format!("({variable}, in "))
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
    assert!(
        args.windows(2).any(|w| w == ["--points", "memory"]),
        "{args:?}"
    );
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.push("-q");
    let again = h.run(&a);
    assert_eq!(again.id, failing);
    assert_eq!(again.status, "exited:2", "{}", again.out);
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
}

/// The fixed twin passes every default schedule.
fn passes(example: &str) {
    let h = Home::new();
    let (out, v) = h.check_json(&["--example", example, "--all"]);
    assert_eq!(out.code, 0, "`{example}` failed a check:\n{out}");
    assert_eq!(v["violations"], 0, "{v:#}");
    let tried = v["tried"].as_array().unwrap();
    assert_eq!(tried.len(), 64, "{v:#}");
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
    found("twolocks", "balance");
}

#[test]
fn twolocks_fixed() {
    passes("twolocks-fixed");
}
