//! The diagnostic layer on its own: facts and a table of thread places in,
//! findings out. `testdata/bank-check.json` is a kept `rewind check --json`
//! report of the bank example (schedule 5 fails, step 36 decides it).

use super::findings::*;
use std::collections::HashMap;
use vmm::run::{Event, EventKind, SdkKind};

/// Places from a table: (run, step) -> threads; (run, pc) -> frames.
#[derive(Default)]
struct Table {
    exits: HashMap<(String, u64), Vec<ThreadPlace>>,
    pcs: HashMap<(String, u64), Vec<Frame>>,
    asked: Vec<(String, u64)>,
}

impl Places for Table {
    fn at_exit(&mut self, run: &str, step: u64) -> Result<Vec<ThreadPlace>, String> {
        self.asked.push((run.to_string(), step));
        self.exits
            .get(&(run.to_string(), step))
            .cloned()
            .ok_or_else(|| format!("no step {step} in {run}"))
    }
    fn at_pc(&mut self, run: &str, pc: u64) -> Result<Vec<Frame>, String> {
        self.pcs
            .get(&(run.to_string(), pc))
            .cloned()
            .ok_or_else(|| format!("no pc {pc:#x}"))
    }
}

fn frame(file: &str, line: u32) -> Frame {
    Frame {
        file: file.into(),
        line,
        function: None,
    }
}

fn thread(tid: u32, current: bool, frames: Vec<Frame>) -> ThreadPlace {
    ThreadPlace {
        pid: 1000,
        tid,
        current,
        frames,
    }
}

fn ws(file: &str) -> bool {
    file.starts_with("/ws/")
}

fn event(step: u64, tid: u32, kind: EventKind) -> Event {
    Event {
        step,
        pid: 1000,
        tid,
        kind,
    }
}

fn syscall(step: u64, tid: u32, text: &str) -> Event {
    event(
        step,
        tid,
        EventKind::Syscall {
            nr: 1,
            name: "write".into(),
            text: text.into(),
            ret: 0,
        },
    )
}

fn facts(id: &str, status: &str, events: Vec<Event>) -> RunFacts {
    RunFacts {
        id: id.into(),
        status: status.into(),
        steps: 50,
        stuck: Vec::new(),
        events,
    }
}

fn bank_report() -> CheckFacts {
    let r: serde_json::Value =
        serde_json::from_str(include_str!("testdata/bank-check.json")).unwrap();
    CheckFacts::from_report("bank", &r).expect("a check report")
}

#[test]
fn a_kept_check_report_reads_as_its_deciding_step_and_runs() {
    let c = bank_report();
    let (d, without, with) = c.deciding.clone().unwrap();
    assert_eq!((d.step, d.what.as_str()), (36, "reschedule"));
    assert_eq!(
        (without.label.as_str(), without.status.as_str()),
        ("passing", "exited:0")
    );
    assert_eq!(
        (with.label.as_str(), with.status.as_str()),
        ("failing", "exited:2")
    );
    assert_eq!(c.right_step, Some(37));
    assert_eq!(c.first_violation.as_ref().unwrap().1, "schedule 5");
    assert_eq!(c.bad_run(), Some(with.run.as_str()));
    assert!(CheckFacts::from_report("x", &serde_json::json!({"tried": 3})).is_none());
    assert!(CheckFacts::from_report("x", &serde_json::json!([])).is_none());
}

#[test]
fn the_deciding_step_is_a_warning_on_the_switched_thread_with_the_other_threads_line() {
    let c = bank_report();
    let (_, without, with) = c.deciding.clone().unwrap();
    let mut t = Table::default();
    let libc = frame("/build/glibc-x/io/write.c", 26);
    t.exits.insert(
        (with.run.clone(), 36),
        vec![
            thread(1000, false, vec![frame("/ws/bank.c", 38)]),
            thread(1001, true, vec![libc.clone(), frame("/ws/bank.c", 26)]),
            thread(1002, false, vec![]),
        ],
    );
    // Bob has no line of his own at the first difference (thread start), one at his write.
    t.exits
        .insert((with.run.clone(), 37), vec![thread(1002, true, vec![libc])]);
    t.exits.insert(
        (with.run.clone(), 40),
        vec![thread(1002, true, vec![frame("/ws/bank.c", 26)])],
    );
    let bad = facts(
        &with.run,
        "exited:2",
        vec![
            syscall(
                36,
                1001,
                "write(1, \"alice: balance 1000, depositing 100\\n\") = 36",
            ),
            syscall(37, 1002, "set_robust_list(0x7ffff77fd9a0, 24) = 0"),
            syscall(
                40,
                1002,
                "write(1, \"bob: balance 1000, depositing 50\\n\") = 33",
            ),
        ],
    );
    let mut log = Vec::new();
    let found = of_check(&c, Some(&bad), None, &mut t, &ws, &mut log);
    assert_eq!(found.len(), 1, "{found:#?} {log:?}");
    let f = &found[0];
    assert_eq!((f.file.as_str(), f.line), ("/ws/bank.c", 26));
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(
        f.message,
        "a reschedule after this line lets thread 1000/1002 run: the run ends exited:2 \
         instead of exited:0 (check of bank, schedule 5, step 36)"
    );
    assert_eq!((f.run.as_str(), f.step), (with.run.as_str(), 36));
    assert_eq!(f.compare.as_deref(), Some(without.run.as_str()));
    assert_eq!(f.related.len(), 1);
    assert_eq!(
        (f.related[0].line, f.related[0].file.as_str()),
        (26, "/ws/bank.c")
    );
    assert!(f.related[0].message.contains("at step 40"), "{f:#?}");
    assert!(
        f.events.iter().any(|e| e.contains("alice: balance")),
        "{f:#?}"
    );
}

#[test]
fn the_racing_accesses_are_related_lines_of_the_deciding_step() {
    let mut r: serde_json::Value =
        serde_json::from_str(include_str!("testdata/bank-check.json")).unwrap();
    let access = |step: u64, tid: u32, access: &str, pc: u64| {
        serde_json::json!({"step": step, "pid": 1000, "tid": tid, "access": access,
            "addr": 0x4b90f0u64, "size": 8, "pc": pc, "variable": "balance", "place": "teller"})
    };
    r["narrowed"]["race"] = serde_json::json!({
        "sentence": "...",
        "before": access(20, 1001, "read", 0x401670),
        "between": access(45, 1002, "write", 0x4016b1),
        // A pc with no workspace line is left out, not fatal.
        "after": access(48, 1001, "write", 0x999999),
    });
    let c = CheckFacts::from_report("bank", &r).expect("a check report");
    assert_eq!(c.race.len(), 3);
    assert_eq!(c.race[1].role, RaceRole::Between);
    let (_, _, with) = c.deciding.clone().unwrap();
    let mut t = Table::default();
    t.exits.insert(
        (with.run.clone(), 36),
        vec![thread(1001, true, vec![frame("/ws/bank.c", 26)])],
    );
    t.pcs
        .insert((with.run.clone(), 0x401670), vec![frame("/ws/bank.c", 22)]);
    t.pcs.insert(
        (with.run.clone(), 0x4016b1),
        vec![frame("/build/libc.c", 3), frame("/ws/bank.c", 27)],
    );
    let bad = facts(&with.run, "exited:2", vec![]);
    let mut log = Vec::new();
    let found = of_check(&c, Some(&bad), None, &mut t, &ws, &mut log);
    assert_eq!(found.len(), 1, "{found:#?} {log:?}");
    let related: Vec<(u32, &str)> = found[0]
        .related
        .iter()
        .map(|r| (r.line, r.message.as_str()))
        .collect();
    assert_eq!(
        related,
        [
            (
                22,
                "thread 1000/1001's read of balance at step 20, before the switch"
            ),
            (
                27,
                "thread 1000/1002's write of balance at step 45 comes in between"
            ),
        ]
    );
    // A report without a race (syscall points, an older rewind) has none.
    assert!(bank_report().race.is_empty());
}

#[test]
fn a_crash_is_an_error_on_the_faulting_line_with_signal_and_address() {
    let mut t = Table::default();
    t.exits.insert(
        ("r1".into(), 120),
        vec![thread(
            1002,
            true,
            vec![frame("/ws/pool.c", 60), frame("/ws/pool.c", 80)],
        )],
    );
    let run = facts(
        "r1",
        "killed:SIGSEGV",
        vec![event(
            120,
            1002,
            EventKind::Signal {
                signo: 11,
                code: 1,
                addr: 0x10,
            },
        )],
    );
    let mut log = Vec::new();
    let found = of_run(&run, "run of pool", &mut t, &ws, &mut log);
    assert_eq!(found.len(), 1, "{log:?}");
    assert_eq!((found[0].line, found[0].severity), (60, Severity::Error));
    assert_eq!(
        found[0].message,
        "thread 1000/1002 dies of SIGSEGV at address 0x10: the run ends killed:SIGSEGV \
         (run of pool, run r1, step 120)"
    );
}

#[test]
fn a_deadlock_is_an_error_on_each_waiting_threads_line() {
    let mut t = Table::default();
    t.exits.insert(
        ("d".into(), 50),
        vec![
            thread(1000, false, vec![frame("/ws/philosophers.c", 52)]),
            thread(1001, false, vec![frame("/ws/philosophers.c", 36)]),
            thread(1002, true, vec![frame("/elsewhere/lib.c", 3)]),
        ],
    );
    let mut log = Vec::new();
    let found = of_run(
        &facts("d", "deadlocked", vec![]),
        "run",
        &mut t,
        &ws,
        &mut log,
    );
    let lines: Vec<u32> = found.iter().map(|f| f.line).collect();
    assert_eq!(
        lines,
        vec![52, 36],
        "a thread outside the workspace has no line"
    );
    assert!(found
        .iter()
        .all(|f| f.kind == "deadlock" && f.severity == Severity::Error));
    assert!(found[1]
        .message
        .starts_with("thread 1000/1001 waits here forever"));
}

#[test]
fn a_timed_out_run_points_at_the_spinning_line_and_sdk_calls_at_the_callers_line() {
    let mut t = Table::default();
    t.pcs
        .insert(("s".into(), 0x401136), vec![frame("/ws/spin.c", 12)]);
    let mut run = facts(
        "s",
        "timed-out",
        vec![event(
            7,
            1001,
            EventKind::Sdk {
                kind: SdkKind::Always,
                cond: false,
                message: "no seat is sold twice".into(),
            },
        )],
    );
    run.stuck = vec![
        "thread 1000/1000: blocked in futex(0x1, FUTEX_WAIT, 0), at 0x460ce6 in __futex+0xc6"
            .into(),
        "thread 1000/1001: running, at 0x401136 in spin+0x6".into(),
    ];
    // The SDK call is inlined from the header: its caller's line is shown.
    t.exits.insert(
        ("s".into(), 7),
        vec![thread(
            1001,
            true,
            vec![frame("/ws/rewind.h", 40), frame("/ws/sdk.c", 33)],
        )],
    );
    let mut log = Vec::new();
    let found = of_run(&run, "run", &mut t, &ws, &mut log);
    assert_eq!(found.len(), 2, "{found:#?} {log:?}");
    assert_eq!((found[0].kind, found[0].line), ("timed-out", 12));
    assert!(found[0]
        .message
        .starts_with("thread 1000/1001 was still running here"));
    assert_eq!((found[1].kind, found[1].line), ("sdk-always", 33));
    assert_eq!(
        found[1].message,
        "always(\"no seat is sold twice\") failed (run, run s, step 7)"
    );
}

#[test]
fn places_that_cannot_be_had_are_logged_not_fatal() {
    let mut t = Table::default();
    let run = facts(
        "gone",
        "killed:SIGSEGV",
        vec![event(
            3,
            1000,
            EventKind::Signal {
                signo: 11,
                code: 1,
                addr: 0,
            },
        )],
    );
    let mut log = Vec::new();
    assert!(of_run(&run, "run", &mut t, &ws, &mut log).is_empty());
    assert_eq!(log, vec!["run gone: no step 3 in gone".to_string()]);
}
