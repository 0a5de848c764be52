//! What the `rewind check` tests share (check.rs, check_properties.rs):
//! running a check, parsing its report, replaying every run it printed.
// Each test binary uses part of it.
#![allow(dead_code)]

use rewind_tests::{Home, Output};

/// One `schedule   3: exited:2       5147 steps  run ecacaa2d59cfd019` line.
#[derive(Debug, Clone)]
pub struct Tried {
    pub label: String,
    pub status: String,
    pub id: String,
}

/// What `rewind check` printed, parsed.
#[derive(Debug)]
pub struct Check {
    pub out: Output,
    /// Schedule 0 first, then every schedule tried, in order.
    pub tried: Vec<Tried>,
    /// `step N decides it: ...`: (N, the whole line).
    pub deciding: Option<(u64, String)>,
    pub passing: Option<String>,
    pub failing: Option<String>,
}

impl Check {
    pub fn base(&self) -> &Tried {
        &self.tried[0]
    }

    /// Every run id the check printed.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.tried.iter().map(|t| t.id.clone()).collect();
        ids.extend(self.passing.iter().cloned());
        ids.extend(self.failing.iter().cloned());
        ids.sort();
        ids.dedup();
        ids
    }

    /// Whether some schedule's line is followed by `<label> violates ...`.
    pub fn any_violation(&self) -> bool {
        self.tried.iter().any(|t| {
            self.out
                .stdout
                .lines()
                .any(|l| l.starts_with(&format!("{} violates ", t.label)))
        })
    }

    /// The line `<label> violates <property>: <why>`, if any.
    pub fn violation_line(&self, property: &str) -> Option<&str> {
        self.out
            .stdout
            .lines()
            .find(|l| l.contains(&format!(" violates {property}: ")))
    }
}

pub fn parse_tried(line: &str) -> Option<Tried> {
    let (label, rest) = line.split_once(": ")?;
    let (_, id) = rest.rsplit_once("  run ")?;
    if id.len() != 16 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let status = rest.split_whitespace().next()?.to_string();
    Some(Tried {
        label: label.trim().to_string(),
        status,
        id: id.to_string(),
    })
}

pub fn parse_check(out: Output) -> Check {
    let mut tried = Vec::new();
    let mut deciding = None;
    let mut passing = None;
    let mut failing = None;
    for line in out.stdout.lines() {
        if let Some(t) = parse_tried(line) {
            tried.push(t);
        } else if let Some(rest) = line.strip_prefix("step ") {
            if let Some((n, _)) = rest.split_once(" decides it: ") {
                deciding = Some((n.parse().expect("a step number"), line.to_string()));
            }
        } else if let Some(id) = line.strip_prefix("passing: run ") {
            passing = Some(id.trim().to_string());
        } else if let Some(id) = line.strip_prefix("failing: run ") {
            failing = Some(id.trim().to_string());
        }
    }
    assert!(
        tried
            .first()
            .is_some_and(|t| t.label == "schedule   0" || t.label == "schedule 0"),
        "the check did not print schedule 0's line first:\n{out}"
    );
    Check {
        out,
        tried,
        deciding,
        passing,
        failing,
    }
}

/// `rewind check ARGS`; panics on a usage error or a crash of rewind itself.
pub fn check(home: &Home, args: &[&str]) -> Check {
    let mut full = vec!["check", "--keep", "all"];
    if !args
        .iter()
        .any(|a| ["--points", "--strategy", "--seeds"].contains(a))
    {
        full.extend(["--points", "memory"]);
    }
    full.extend_from_slice(args);
    let out = home.rewind(&full);
    assert!(
        out.code == 0 || out.code == 1,
        "`rewind {}` exited {}, not 0 or 1:\n{out}",
        full.join(" "),
        out.code
    );
    parse_check(out)
}

/// Every run the check printed replays identically.
pub fn replay_all(home: &Home, c: &Check) {
    for id in c.ids() {
        home.replay_identical(&id);
    }
}

/// How a recorded run ended (`exited:2`, `killed:SIGSEGV`, `deadlocked`),
/// from the first line of `rewind show`: `run ID  STATUS  N steps  NAME`.
pub fn status_of(home: &Home, id: &str) -> String {
    let show = home.ok(&["show", id]).stdout;
    let first = show.lines().next().unwrap_or("");
    let mut words = first.split_whitespace();
    assert_eq!(words.next(), Some("run"), "{show}");
    assert_eq!(words.next(), Some(id), "{show}");
    words.next().unwrap_or("").to_string()
}

/// The last event of a run (how it ended).
pub fn last_event(home: &Home, id: &str) -> String {
    let events = home.events(id);
    events
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

/// A buggy example: found within the default schedules (the check exits 1
/// with a violating schedule among them), narrowed to one step whose
/// failing run ends as `want_status` and replays, whose passing run is
/// schedule 0's.
pub fn found_and_narrowed(example: &str, property: &str, want_status: &str) -> Check {
    found_and_narrowed_with(example, property, want_status, &[])
}

pub fn found_and_narrowed_with(
    example: &str,
    property: &str,
    want_status: &str,
    extra: &[&str],
) -> Check {
    let home = Home::new();
    let mut args = vec!["--example", example];
    args.extend_from_slice(extra);
    let c = check(&home, &args);
    assert_eq!(
        c.out.code, 1,
        "the bug of `{example}` was not found:\n{}",
        c.out
    );
    let tried = c.tried.len() - 1;
    assert!(
        (1..=64).contains(&tried),
        "{tried} schedules tried (default 64):\n{}",
        c.out
    );
    let bad = c
        .tried
        .iter()
        .skip(1)
        .find(|t| {
            c.out
                .stdout
                .lines()
                .any(|l| l.starts_with(&format!("{} violates {property}: ", t.label)))
        })
        .unwrap_or_else(|| panic!("no schedule line violates {property}:\n{}", c.out));
    assert_eq!(bad.status, want_status, "{}", c.out);
    let (step, line) = c.deciding.clone().unwrap_or_else(|| {
        panic!(
            "no `step N decides it` line: not narrowed to one step:\n{}",
            c.out
        )
    });
    assert!(
        line.ends_with(&format!(" makes the run violate {property}")),
        "{line}"
    );
    assert!(step > 0, "{line}");
    let failing = c.failing.clone().expect("a failing run");
    let passing = c.passing.clone().expect("a passing run");
    // One perturbation from schedule 0: the passing side is schedule 0 itself.
    assert_eq!(passing, c.base().id, "{}", c.out);
    assert_eq!(
        status_of(&home, &failing),
        want_status,
        "the failing run {failing}"
    );
    assert_eq!(
        status_of(&home, &passing),
        c.base().status,
        "the passing run {passing}"
    );
    // The first difference, with the shared events before it.
    assert!(
        c.out.stdout.lines().any(|l| l.starts_with("both ")),
        "{}",
        c.out
    );
    assert!(
        c.out
            .stdout
            .lines()
            .any(|l| l.starts_with("left ") || l.starts_with("right ")),
        "{}",
        c.out
    );
    replay_all(&home, &c);
    c
}

/// A fixed example: no schedule of the default 64 violates anything.
pub fn passes(example: &str, extra: &[&str]) -> Check {
    let home = Home::new();
    let mut args = vec!["--example", example];
    args.extend_from_slice(extra);
    let c = check(&home, &args);
    assert_eq!(c.out.code, 0, "`{example}` failed a check:\n{}", c.out);
    assert!(
        !c.any_violation(),
        "a violation in a passing check:\n{}",
        c.out
    );
    assert!(c.failing.is_none() && c.deciding.is_none(), "{}", c.out);
    let statuses: Vec<&str> = c.tried.iter().map(|t| t.status.as_str()).collect();
    assert!(
        statuses.iter().all(|s| *s == statuses[0]),
        "schedules of `{example}` ended differently without a violation:\n{}",
        c.out
    );
    replay_all(&home, &c);
    c
}
