//! Memory scheduling points (`--points memory`, issue 7): every access to a
//! page two threads touch is a step at which the schedule may switch, so a
//! race with no system call in its window is found, narrowed to the access
//! that decides it, and made again by `--reschedule-at`. Programs from
//! `guest/tests/`: `counter` (`total = total + 1` from two threads, and its
//! `--locked` twin), `spin-flag` (two threads waiting on plain flags) and
//! `two-writers` (`where`, `threads`, `cat` and `diff` at memory points).
//! Every recorded run replays identically.

use rewind_tests::{assert_lines, guest_arg, Home};

/// A fixed epoch: the same inputs, the same ids, whenever the test runs.
const EPOCH: &str = "1700000000";

fn memory_run(h: &Home, extra: &[&str], prog: &str, args: &[&str]) -> rewind_tests::Run {
    let prog = guest_arg(prog);
    let mut full = vec!["-q", "--epoch", EPOCH, "--points", "memory"];
    full.extend_from_slice(extra);
    full.extend(["--", prog.as_str()]);
    full.extend_from_slice(args);
    h.run(&full)
}

/// A run of `counter` on the points a check found its race with: memory
/// points, or race-directed ones with the pages the check learned.
fn found_points_run(
    h: &Home,
    v: &serde_json::Value,
    extra: &[&str],
    args: &[&str],
) -> rewind_tests::Run {
    let points = v["first_violation"]["found_by"]["points"]
        .as_str()
        .unwrap_or_else(|| panic!("found by no points: {v:#}"));
    let pages: Vec<&str> = v["learned"]["pages"]
        .as_array()
        .map(|p| p.iter().filter_map(|p| p.as_str()).collect())
        .unwrap_or_default();
    let pages = pages.join(",");
    let prog = guest_arg("counter");
    let mut full = vec!["-q", "--epoch", EPOCH, "--points", points];
    if points == "races" && !pages.is_empty() {
        full.extend(["--race-pages", pages.as_str()]);
    }
    full.extend_from_slice(extra);
    full.extend(["--", prog.as_str()]);
    full.extend_from_slice(args);
    h.run(&full)
}

/// The default check finds `counter 50`'s lost update (race-directed
/// points, whose learning run sees the two threads' unordered accesses to
/// `total`, or memory points) and narrows it to one access of `add`; that
/// perturbation alone, on the same points, loses an update, and none does
/// not. The deciding step may be a `switch` (a PCT schedule's): the failing
/// run is then the PCT schedule itself, not the one-perturbation run, which
/// is the same machine only up to the deciding step.
#[test]
fn a_race_without_a_system_call_is_found_by_default_and_narrowed_to_one_access() {
    let h = Home::new();
    let prog = guest_arg("counter");
    let (out, v) = h.check_json(&["--epoch", EPOCH, "--", &prog, "50"]);
    assert_eq!(out.code, 1, "{out}");
    let n = &v["narrowed"];
    let deciding = n["deciding"].as_array().unwrap();
    assert_eq!(deciding.len(), 1, "one step decides it: {n:#}");
    let step = deciding[0]["step"].as_u64().unwrap();
    // The deciding step is a memory access of `add`, not a system call.
    let failing = n["failing"].as_str().unwrap();
    let at_step: Vec<serde_json::Value> = h
        .events_json(failing)
        .into_iter()
        .filter(|e| e["step"] == step)
        .collect();
    assert!(
        at_step
            .iter()
            .any(|e| e["kind"] == "access"
                && e["at"].as_str().is_some_and(|a| a.contains("in add+"))),
        "step {step} is no access of `add`: {at_step:?}"
    );
    // The step is real: that perturbation alone (a reschedule, a stall or
    // a switch, as `show` would print it) loses an update, none does not.
    let flag = match deciding[0]["what"].as_str() {
        Some("reschedule") => ["--reschedule-at".to_string(), step.to_string()],
        Some("stall") => [
            "--stall-at".to_string(),
            format!("{step}:{}", deciding[0]["ns"].as_u64().unwrap()),
        ],
        Some("switch") => [
            "--switch-at".to_string(),
            format!("{step}:{}", deciding[0]["tid"].as_u64().unwrap()),
        ],
        other => panic!("a deciding {other:?}: {n:#}"),
    };
    let flag: Vec<&str> = flag.iter().map(String::as_str).collect();
    let alone = found_points_run(&h, &v, &flag, &["50"]);
    let none = found_points_run(&h, &v, &[], &["50"]);
    assert_eq!(alone.status, "exited:1", "{}", alone.out);
    assert_eq!(none.status, "exited:0", "{}", none.out);
    if deciding[0]["what"] != "switch" {
        assert_eq!(alone.id, failing);
    }
    assert_eq!(none.id, n["passing"].as_str().unwrap());
    assert_lines(&h.log(&none.id), &["total 100, expected 100"]);
    h.replay_identical(&alone.id);
    h.replay_identical(&none.id);
    h.replay_identical(failing);
    // With system-call points only there is no step inside the window.
    let syscalls = h.rewind(&[
        "check",
        "--epoch",
        EPOCH,
        "--points",
        "syscalls",
        "--schedules",
        "16",
        "--",
        &prog,
        "50",
    ]);
    assert_eq!(syscalls.code, 0, "{syscalls}");
}

#[test]
fn the_lock_protected_twin_is_not_flagged() {
    let h = Home::new();
    let prog = guest_arg("counter");
    let out = h.rewind(&[
        "check", "--all", "--epoch", EPOCH, "--points", "memory", "--", &prog, "--locked", "5",
    ]);
    assert_eq!(out.code, 0, "{out}");
    let base = memory_run(&h, &[], "counter", &["--locked", "5"]);
    assert_eq!(base.status, "exited:0", "{}", base.out);
    let accesses = h
        .events_json(&base.id)
        .iter()
        .filter(|e| e["kind"] == "access")
        .count();
    assert!(
        accesses > 20,
        "only {accesses} memory points:\n{}",
        base.out
    );
    h.replay_identical(&base.id);
}

#[test]
fn a_spin_wait_on_a_plain_flag_ends_under_schedule_0() {
    let h = Home::new();
    let run = memory_run(&h, &["--timeout", "60"], "spin-flag", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(&h.log(&run.id), &["both finished"]);
    h.replay_identical(&run.id);
}

#[test]
fn accesses_are_events_shown_on_request() {
    let h = Home::new();
    let run = memory_run(&h, &[], "counter", &["10"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let plain = h.events(&run.id);
    assert!(
        !plain.contains(" in add+"),
        "accesses shown by default:\n{plain}"
    );
    let all = h.ok(&["events", &run.id, "--accesses"]).stdout;
    let access = all
        .lines()
        .find(|l| l.contains("write 0x") && l.contains(" in add+"))
        .unwrap_or_else(|| panic!("no write access in add:\n{all}"));
    assert!(access.contains("(8 bytes)"), "{access}");
    let json = h.events_json(&run.id);
    let a = json
        .iter()
        .find(|e| {
            e["kind"] == "access"
                && e["access"] == "write"
                && e["at"].as_str().is_some_and(|at| at.contains(" in add+"))
        })
        .expect("a write access in --json");
    assert_eq!(a["size"], 8, "{a}");
    // Same inputs, same run: the same id and the same points.
    let again = memory_run(&h, &[], "counter", &["10"]);
    assert_eq!(again.id, run.id);
    assert_eq!(h.events_json(&again.id), json);
    // The points mode is an input: it changes the run id.
    let syscalls = h.run(&["-q", "--epoch", EPOCH, "--", &guest_arg("counter"), "10"]);
    assert_ne!(syscalls.id, run.id);
    h.replay_identical(&run.id);
}

#[test]
fn forks_at_a_memory_point_and_keyframes_between_points_replay_identically() {
    let h = Home::new();
    // Long enough for keyframes (every 100 ms of wall time past 1000 steps).
    let run = memory_run(&h, &[], "counter", &["4000"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    h.replay_identical(&run.id);
    let events = h.events_json(&run.id);
    let points: Vec<u64> = events
        .iter()
        .filter(|e| e["kind"] == "access")
        .map(|e| e["step"].as_u64().unwrap())
        .collect();
    assert!(points.len() > 10_000, "{} points", points.len());
    // A fork at a late memory point with schedule 0 runs exactly as its
    // parent: the trap state came through the keyframe, one the recording
    // took between two points.
    let late = points[points.len() * 3 / 4].to_string();
    let same = h.ok(&["fork", &run.id, &late, "--schedule", "0", "-q"]);
    assert!(
        same.stderr.contains("does not differ from its parent"),
        "{same}"
    );
    let keyframe: u64 = same
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("rewind: forking from the keyframe at step "))
        .and_then(|l| l.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the fork did not start from a keyframe:\n{same}"));
    assert!(
        points.iter().any(|p| *p <= keyframe) && points.iter().any(|p| *p > keyframe),
        "keyframe at step {keyframe}, not between points {}..{}",
        points[0],
        points[points.len() - 1]
    );
    assert!(
        points.contains(&keyframe) || points.contains(&(keyframe + 1)),
        "step {keyframe} is not next to a point"
    );
    // Another schedule from there (it may find the race: exit 1), and it replays.
    let other = h.rewind(&["fork", &run.id, &late, "--schedule", "3", "-q"]);
    assert!(other.code == 0 || other.code == 1, "{other}");
    let id = other.run_id();
    h.replay_identical(&id);
    // A seek to a point sees the machine then.
    let ps = h.ok(&["ps", &run.id, "--at", &late]);
    assert!(ps.stdout.contains("in add"), "{ps}");
}

/// `counter 20` recorded with system-call points, its events, and the step
/// of its second clone (after both workers exist).
fn counter_to_its_second_clone(h: &Home) -> (rewind_tests::Run, Vec<serde_json::Value>, u64) {
    let prog = guest_arg("counter");
    let parent = h.run(&["-q", "--epoch", EPOCH, "--", &prog, "20"]);
    assert_eq!(parent.status, "exited:0", "{}", parent.out);
    let events = h.events_json(&parent.id);
    let step = events
        .iter()
        .filter(|e| e["kind"] == "syscall" && e["name"] == "clone3")
        .nth(1)
        .and_then(|e| e["step"].as_u64())
        .unwrap_or_else(|| panic!("two clones: {events:?}"));
    (parent, events, step)
}

/// `rewind fork --points`: a fork of a syscall-point run with memory points
/// from its step on (and back): equal to its parent up to the step, with
/// points only after it, made again by the command `rewind show` prints, and
/// replayed identically. Without `--points` a fork keeps its parent's.
#[test]
fn a_fork_changes_points_at_its_step() {
    let h = Home::new();
    let (parent, events, step) = counter_to_its_second_clone(&h);
    let at = step.to_string();
    let out = h.ok(&[
        "fork",
        &parent.id,
        &at,
        "--schedule",
        "0",
        "--points",
        "memory",
        "-q",
    ]);
    let mem = out.run_id();
    let forked = h.events_json(&mem);
    let accesses: Vec<u64> = forked
        .iter()
        .filter(|e| e["kind"] == "access")
        .map(|e| e["step"].as_u64().unwrap())
        .collect();
    assert!(
        accesses.len() > 10 && accesses.iter().all(|s| *s > step),
        "points only after step {step}: {accesses:?}"
    );
    let upto = |evs: &[serde_json::Value]| -> Vec<serde_json::Value> {
        evs.iter()
            .filter(|e| e["step"].as_u64().is_some_and(|s| s <= step))
            .cloned()
            .collect()
    };
    assert_eq!(
        upto(&forked),
        upto(&events),
        "the fork differs before its step"
    );
    // `rewind show` names the change; its command makes the same run.
    let show = h.show_json(&mem);
    let cmds = show["commands"].as_array().unwrap();
    let last: Vec<&str> = cmds.last().unwrap()["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        last[1..],
        [
            "fork",
            &parent.id,
            &at,
            "--schedule",
            "0",
            "--points",
            "memory"
        ],
        "{show:#}"
    );
    let fresh = Home::new();
    let again = fresh.run(&["-q", "--epoch", EPOCH, "--", &guest_arg("counter"), "20"]);
    assert_eq!(again.id, parent.id);
    let remade = fresh.ok(&[&last[1..], &["-q"][..]].concat());
    assert_eq!(remade.run_id(), mem, "{remade}");
    // A fork of the memory fork keeps memory points; with `--points
    // syscalls` it has none after its step.
    let later = accesses[accesses.len() / 2];
    // (Schedule 2 may find the race from there: exit 1.)
    let keeps = h.rewind(&["fork", &mem, &later.to_string(), "--schedule", "2", "-q"]);
    assert!(keeps.code == 0 || keeps.code == 1, "{keeps}");
    let keeps = keeps.run_id();
    assert!(h
        .events_json(&keeps)
        .iter()
        .any(|e| e["kind"] == "access" && e["step"].as_u64().unwrap() > later));
    let back = h
        .ok(&[
            "fork",
            &mem,
            &later.to_string(),
            "--schedule",
            "0",
            "--points",
            "syscalls",
            "-q",
        ])
        .run_id();
    let back_events = h.events_json(&back);
    assert!(!back_events
        .iter()
        .any(|e| e["kind"] == "access" && e["step"].as_u64().unwrap() > later));
    assert_lines(&h.log(&back), &["total 40, expected 40"]);
    for id in [&mem, &keeps, &back] {
        h.replay_identical(id);
    }
}

/// `rewind check --run RUN --points memory --schedule-from S`: a check from
/// a syscall-point run with memory points from S on finds the race that
/// its own points cannot, and its runs are RUN up to S.
#[test]
fn a_check_from_a_syscall_run_with_memory_points_finds_the_race() {
    let h = Home::new();
    let (parent, _, step) = counter_to_its_second_clone(&h);
    let step = step.to_string();
    let (out, v) = h.check_json(&[
        "--run",
        &parent.id,
        "--schedule-from",
        &step,
        "--points",
        "memory",
    ]);
    assert_eq!(out.code, 1, "{out}");
    let n = &v["narrowed"];
    assert_eq!(n["deciding"].as_array().map(Vec::len), Some(1), "{n:#}");
    assert!(
        n["sentence"]
            .as_str()
            .is_some_and(|s| s.contains("(total, in add)")),
        "{n:#}"
    );
    // Without memory points (the run's own) nothing is found.
    let own = h.rewind(&[
        "check",
        "--run",
        &parent.id,
        "--schedule-from",
        &step,
        "--schedules",
        "16",
    ]);
    assert_eq!(own.code, 0, "{own}");
}

/// Pages are shared only while they are: bank's main thread makes no point
/// once the tellers have exited (the last thread of a process owns every
/// page), and a teller that keeps writing the page of its own stack and
/// thread block (which main touched, linking it into glibc's list of
/// stacks) takes it back after a few points instead of trapping on every
/// access to its own frame.
#[test]
fn pages_one_thread_uses_alone_stop_trapping() {
    let h = Home::new();
    let run = h.run(&["-q", "--points", "memory", "--example", "bank"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    h.replay_identical(&run.id);
    let events = h.events_json(&run.id);
    let last_exit = events
        .iter()
        .filter(|e| e["kind"] == "thread_exit")
        .filter_map(|e| e["step"].as_u64())
        .max()
        .expect("the tellers exit");
    let late: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["kind"] == "access" && e["step"].as_u64().unwrap() > last_exit)
        .collect();
    assert!(late.is_empty(), "points after the tellers exited: {late:?}");
    let mut per_page = std::collections::BTreeMap::new();
    for e in events.iter().filter(|e| e["kind"] == "access") {
        let page = e["addr"].as_u64().unwrap() >> 12;
        *per_page
            .entry((e["tid"].as_u64().unwrap(), page))
            .or_insert(0) += 1;
    }
    let most = per_page.values().max().copied().unwrap_or(0);
    assert!(
        (1..=64).contains(&most),
        "at most 64 points by one thread on one page: {per_page:?}"
    );
}

/// At a memory point, every command that looks at a step sees the machine
/// stopped before that access: `where` at the access's instruction, `threads`
/// with the accessing thread on the CPU, `cat` the file as written so far,
/// and `diff` the first event after a reschedule there. `two-writers shared`:
/// two threads format a line with `snprintf` (reading the C library's shared
/// data: memory points) and append it to /shared.log.
#[test]
fn rewind_where_threads_cat_and_diff_work_at_memory_points() {
    let h = Home::new();
    let run = memory_run(&h, &[], "two-writers", &["shared"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let events = h.events_json(&run.id);
    let writes: Vec<(u64, u64)> = events
        .iter()
        .filter(|e| {
            e["name"] == "write" && e["text"].as_str().is_some_and(|t| t.contains("writer "))
        })
        .map(|e| (e["step"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    assert_eq!(writes.len(), 2, "{events:?}");
    let access_in = |from: u64, to: u64| -> &serde_json::Value {
        events
            .iter()
            .rev()
            .find(|e| {
                e["kind"] == "access" && e["step"].as_u64().is_some_and(|s| s > from && s < to)
            })
            .unwrap_or_else(|| panic!("no access between steps {from} and {to}"))
    };
    // The last access before the second write, and one after it.
    let before = access_in(writes[0].0, writes[1].0);
    let after = access_in(writes[1].0, u64::MAX);
    let step = |e: &serde_json::Value| e["step"].as_u64().unwrap().to_string();
    let first_line = h.ok(&["cat", &run.id, &step(before), "/shared.log"]).stdout;
    let both = h.ok(&["cat", &run.id, &step(after), "/shared.log"]).stdout;
    assert_eq!(first_line.lines().count(), 1, "{first_line:?}");
    assert!(first_line.starts_with("writer "), "{first_line:?}");
    assert!(
        both.starts_with(&first_line) && both.lines().count() == 2,
        "{both:?}"
    );

    // `where`: the thread that makes the access, stopped at its instruction.
    let tid = before["tid"].as_u64().unwrap().to_string();
    let w = h.ok(&["where", &run.id, &step(before), "--tid", &tid, "--json"]);
    let w: serde_json::Value = serde_json::from_str(w.stdout.trim()).unwrap();
    assert_eq!(w["frames"][0]["pc"], before["pc"], "{w:#}");
    let text = h.ok(&["where", &run.id, &step(before)]).stdout;
    assert!(
        text.contains("running") && text.contains("two-writers.c:"),
        "{text}"
    );

    // `threads`: the accessing thread held the CPU at that step.
    let t = h.ok(&[
        "threads",
        &run.id,
        "--from",
        &step(before),
        "--to",
        &step(before),
        "--json",
    ]);
    let held: Vec<serde_json::Value> = t
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(held.len(), 1, "{}", t.stdout);
    assert_eq!(held[0]["tid"], before["tid"], "{}", t.stdout);

    // `diff`: a reschedule at the first writer's last access before its
    // write lets the other thread run there; the runs differ from the next step.
    let (w0, writer) = writes[0];
    let last = events
        .iter()
        .rev()
        .find(|e| {
            e["kind"] == "access"
                && e["tid"] == writer
                && e["step"].as_u64().is_some_and(|s| s < w0)
        })
        .expect("an access before the first write");
    let other = memory_run(
        &h,
        &["--reschedule-at", &step(last)],
        "two-writers",
        &["shared"],
    );
    assert_eq!(other.status, "exited:0", "{}", other.out);
    let d = h.rewind(&["diff", &run.id, &other.id, "--json"]);
    assert_eq!(d.code, 1, "{d}");
    let d: serde_json::Value = serde_json::from_str(d.stdout.trim()).unwrap();
    let div = &d["divergence"];
    let next = last["step"].as_u64().unwrap() + 1;
    assert_eq!(div["left_step"], next, "{d:#}");
    assert_eq!(div["right_step"], next, "{d:#}");
    assert_eq!(
        div["shared"].as_array().unwrap().last().unwrap()["step"],
        last["step"]
    );
    assert_ne!(div["right"][0]["tid"], writer, "{d:#}");
    h.replay_identical(&run.id);
    h.replay_identical(&other.id);
}

/// Plain moves at memory points are completed by the monitor in the
/// guest's place (`guest/tests/moves.c`: every size, sign and zero
/// extension, high-byte registers, immediates, rip-relative): the program
/// prints what it prints natively, its accesses are points, and the run
/// replays identically.
#[test]
fn plain_moves_completed_by_the_monitor_do_what_the_cpu_does() {
    let h = Home::new();
    let run = memory_run(&h, &[], "moves", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let native = rewind_tests::native_with_env(&[], None, &guest_arg("moves"), &[], b"");
    assert_eq!(native.code, 0, "natively:\n{native}");
    assert_eq!(h.log(&run.id), native.stdout, "natively:\n{native}");
    let accesses = h
        .events_json(&run.id)
        .into_iter()
        .filter(|e| {
            e["kind"] == "access" && e["at"].as_str().is_some_and(|a| a.contains("in main+"))
        })
        .count();
    assert!(
        accesses >= 30,
        "main's moves on the shared page are points: {accesses}"
    );
    h.replay_identical(&run.id);
}
