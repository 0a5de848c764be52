//! What a check or a run says about source lines, without the protocol: a
//! [`Finding`] is a file, a line, a message, the runs and the step. The
//! facts come from the store ([`RunFacts`], [`CheckFacts`]); where threads
//! stood comes from a [`Places`] (the machine, seeking; a table in tests).

use serde::Serialize;
use vmm::run::{Event, EventKind, SdkKind};

/// A frame with a source line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub file: String,
    pub line: u32,
    pub function: Option<String>,
}

/// A live thread at a step, its frames with source lines innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadPlace {
    pub pid: u32,
    pub tid: u32,
    /// It made the step (it holds the CPU).
    pub current: bool,
    pub frames: Vec<Frame>,
}

/// Where threads stood in a recorded run.
pub trait Places {
    /// Every live thread as the exit that is `step` found it.
    fn at_exit(&mut self, run: &str, step: u64) -> Result<Vec<ThreadPlace>, String>;
    /// The frames at an instruction address of the run's program.
    fn at_pc(&mut self, run: &str, pc: u64) -> Result<Vec<Frame>, String>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// Another place a finding points at (LSP `relatedInformation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Related {
    pub file: String,
    pub line: u32,
    pub message: String,
}

/// One diagnostic, before it is a protocol message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The source file, as the program's debug info names it.
    pub file: String,
    /// 1-based.
    pub line: u32,
    pub severity: Severity,
    /// `deciding-step`, `crash`, `deadlock`, `sdk-always`, `sdk-sometimes`, `timed-out`.
    pub kind: &'static str,
    pub message: String,
    pub related: Vec<Related>,
    /// The run to open, the step, and the run to compare it with.
    pub run: String,
    pub step: u64,
    pub compare: Option<String>,
    /// The events of the step and around it, for hover.
    pub events: Vec<String>,
}

/// What the store says of one run.
#[derive(Debug, Clone)]
pub struct RunFacts {
    pub id: String,
    /// `exited:0`, `killed:SIGSEGV`, `deadlocked`, `timed-out`.
    pub status: String,
    pub steps: u64,
    /// For deadlocked and timed-out runs: where each thread was (meta.json).
    pub stuck: Vec<String>,
    pub events: Vec<Event>,
}

/// A perturbation as `check --json` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deciding {
    pub step: u64,
    /// `reschedule`, `stall`, `switch`.
    pub what: String,
    pub ns: Option<u64>,
    pub tid: Option<u32>,
}

/// Where an access stands in the interleaving a deciding step made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceRole {
    /// The switched thread's, before the switch.
    Before,
    /// Another thread's, in between.
    Between,
    /// The switched thread's, when it ran again.
    After,
}

/// An access of that interleaving (`narrowed.race` of `check --json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaceAccess {
    pub role: RaceRole,
    pub step: u64,
    pub pid: u32,
    pub tid: u32,
    /// `read`, `write`, `atomic`.
    pub access: String,
    /// `balance`, else the address.
    pub variable: String,
    pub pc: u64,
}

impl RaceAccess {
    fn from_report(role: RaceRole, v: &serde_json::Value) -> Option<RaceAccess> {
        let num = |k: &str| v.get(k)?.as_u64();
        let text = |k: &str| Some(v.get(k)?.as_str()?.to_string());
        Some(RaceAccess {
            role,
            step: num("step")?,
            pid: u32::try_from(num("pid")?).ok()?,
            tid: u32::try_from(num("tid")?).ok()?,
            access: text("access")?,
            variable: text("variable")?,
            pc: num("pc")?,
        })
    }

    /// `thread 1000/1002's write of balance at step 255 comes in between`.
    fn message(&self) -> String {
        let what = format!(
            "thread {}/{}'s {} of {} at step {}",
            self.pid, self.tid, self.access, self.variable, self.step
        );
        match self.role {
            RaceRole::Before => format!("{what}, before the switch"),
            RaceRole::Between => format!("{what} comes in between"),
            RaceRole::After => format!("{what}, when it runs again"),
        }
    }
}

/// A run of a narrowed pair: `{"run", "status", "label"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideFacts {
    pub run: String,
    pub status: String,
    pub label: String,
}

/// What a kept check report says (docs/events.md, `rewind check --json`).
#[derive(Debug, Clone, Default)]
pub struct CheckFacts {
    /// The checked program's name.
    pub name: String,
    /// The first violating run and the label of its schedule (`schedule 5`).
    pub first_violation: Option<(String, String)>,
    /// The one step that decides it, with the runs without and with it.
    pub deciding: Option<(Deciding, SideFacts, SideFacts)>,
    /// The property the narrowed pair differs in.
    pub property: String,
    /// The first differing step of the run with the deciding step.
    pub right_step: Option<u64>,
    /// The accesses to shared memory the deciding step interleaved, in
    /// step order (memory points only).
    pub race: Vec<RaceAccess>,
    pub never_held: Vec<String>,
    /// How many runs the check judged (schedule 0 and the tried ones).
    pub runs: u64,
}

impl CheckFacts {
    /// Reads a kept `check --json` report; None when it is not one.
    pub fn from_report(name: &str, r: &serde_json::Value) -> Option<CheckFacts> {
        let str_of = |v: &serde_json::Value| v.as_str().map(str::to_string);
        r.get("violations")?.as_u64()?;
        let tried = r.get("tried")?.as_array()?;
        let first_violation = r
            .get("first_violation")
            .and_then(|f| str_of(f.get("run")?))
            .map(|run| {
                let label = std::iter::once(r.get("base"))
                    .flatten()
                    .chain(tried)
                    .find(|t| t.get("run").and_then(|v| v.as_str()) == Some(&run))
                    .and_then(|t| str_of(t.get("label")?))
                    .unwrap_or_default();
                (run, label.split_whitespace().collect::<Vec<_>>().join(" "))
            });
        let side = |v: &serde_json::Value| {
            Some(SideFacts {
                run: str_of(v.get("run")?)?,
                status: str_of(v.get("status")?)?,
                label: str_of(v.get("label")?).unwrap_or_default(),
            })
        };
        let narrowed = r.get("narrowed").filter(|n| !n.is_null());
        let deciding = narrowed.and_then(|n| {
            let d = n.get("deciding")?.as_array()?;
            let [one] = d.as_slice() else { return None };
            let deciding = Deciding {
                step: one.get("step")?.as_u64()?,
                what: str_of(one.get("what")?)?,
                ns: one.get("ns").and_then(|v| v.as_u64()),
                tid: one.get("tid").and_then(|v| v.as_u64()).map(|t| t as u32),
            };
            Some((deciding, side(n.get("without")?)?, side(n.get("with")?)?))
        });
        let property = narrowed
            .and_then(|n| str_of(n.get("property")?))
            .unwrap_or_default();
        let right_step = narrowed
            .and_then(|n| n.get("divergence"))
            .and_then(|d| d.get("right_step"))
            .and_then(|v| v.as_u64());
        let race = narrowed
            .and_then(|n| n.get("race"))
            .map(|r| {
                [
                    (RaceRole::Before, "before"),
                    (RaceRole::Between, "between"),
                    (RaceRole::After, "after"),
                ]
                .iter()
                .filter_map(|(role, key)| RaceAccess::from_report(*role, r.get(*key)?))
                .collect()
            })
            .unwrap_or_default();
        let never_held = r
            .get("never_held")
            .and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(str_of).collect())
            .unwrap_or_default();
        Some(CheckFacts {
            name: name.to_string(),
            first_violation,
            deciding,
            property,
            right_step,
            race,
            never_held,
            runs: tried.len() as u64 + 1,
        })
    }

    /// The run that shows what went wrong: the failing side of the narrowed
    /// pair, else the one with the deciding step, else the first violating run.
    pub fn bad_run(&self) -> Option<&str> {
        if let Some((_, without, with)) = &self.deciding {
            return Some(if without.label == "failing" {
                &without.run
            } else {
                &with.run
            });
        }
        self.first_violation.as_ref().map(|(r, _)| r.as_str())
    }
}

/// Which source files are the user's: those in the workspace.
pub trait Workspace {
    fn contains(&self, file: &str) -> bool;
}

impl<F: Fn(&str) -> bool> Workspace for F {
    fn contains(&self, file: &str) -> bool {
        self(file)
    }
}

/// The frame to show of a thread: the innermost one in a workspace file,
/// a source file before a header (an SDK call inlined from `rewind.h` is
/// shown at its caller's line).
pub fn pick<'a>(frames: &'a [Frame], ws: &dyn Workspace) -> Option<&'a Frame> {
    let header = |f: &Frame| f.file.ends_with(".h") || f.file.ends_with(".hpp");
    // Line 0 is code the compiler made, with no line of its own.
    let mine = |f: &&Frame| f.line > 0 && ws.contains(&f.file);
    frames
        .iter()
        .filter(mine)
        .find(|f| !header(f))
        .or_else(|| frames.iter().find(mine))
}

/// Events shown for a step: the step's and those just before it.
fn events_near(events: &[Event], step: u64) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.step + 3 >= step && e.step <= step)
        .map(|e| e.to_string().trim_start().to_string())
        .collect()
}

/// Findings of a check: its deciding step, what its bad run shows, and the
/// SDK `sometimes` that never held. `bad` is the bad run's facts.
pub fn of_check(
    check: &CheckFacts,
    bad: Option<&RunFacts>,
    base: Option<&RunFacts>,
    places: &mut dyn Places,
    ws: &dyn Workspace,
    log: &mut Vec<String>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let schedule = check
        .first_violation
        .as_ref()
        .map(|(_, l)| l.clone())
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "a schedule".into());
    if let (Some((d, without, with)), Some(bad)) = (&check.deciding, bad) {
        let runs_events = if bad.id == with.run { Some(bad) } else { None };
        match deciding_finding(check, d, without, with, runs_events, &schedule, places, ws) {
            Ok(Some(f)) => out.push(f),
            Ok(None) => log.push(format!(
                "check of {}: no workspace line for the thread at step {}",
                check.name, d.step
            )),
            Err(e) => log.push(format!("check of {}: {e}", check.name)),
        }
    }
    if let Some(bad) = bad {
        let compare = check
            .deciding
            .as_ref()
            .map(|(_, w, x)| if w.run == bad.id { &x.run } else { &w.run })
            .cloned();
        let what = format!("check of {}, {schedule}", check.name);
        for mut f in of_run(bad, &what, places, ws, log) {
            f.compare = compare.clone();
            out.push(f);
        }
    }
    if let Some(base) = base {
        for message in &check.never_held {
            let call = base.events.iter().find(|e| {
                matches!(&e.kind, EventKind::Sdk { kind: SdkKind::Sometimes, message: m, .. } if m == message)
            });
            let Some(call) = call else { continue };
            match thread_line(places, &base.id, call.step, call.tid, ws) {
                Ok(Some(frame)) => out.push(Finding {
                    file: frame.file,
                    line: frame.line,
                    severity: Severity::Warning,
                    kind: "sdk-sometimes",
                    message: format!(
                        "sometimes({message:?}) held in none of the {} runs of the check of {}",
                        check.runs, check.name
                    ),
                    related: Vec::new(),
                    run: base.id.clone(),
                    step: call.step,
                    compare: None,
                    events: events_near(&base.events, call.step),
                }),
                Ok(None) => {}
                Err(e) => log.push(format!("run {}: {e}", base.id)),
            }
        }
    }
    out
}

/// The warning on the line of the thread a deciding step switched away from.
#[allow(clippy::too_many_arguments)]
fn deciding_finding(
    check: &CheckFacts,
    d: &Deciding,
    without: &SideFacts,
    with: &SideFacts,
    with_facts: Option<&RunFacts>,
    schedule: &str,
    places: &mut dyn Places,
    ws: &dyn Workspace,
) -> Result<Option<Finding>, String> {
    let threads = places.at_exit(&with.run, d.step)?;
    let Some(away) = threads.iter().find(|t| t.current) else {
        return Ok(None);
    };
    let Some(here) = pick(&away.frames, ws) else {
        return Ok(None);
    };
    let (other, mut related) = match other_thread(check, away.tid, with, with_facts, places, ws)? {
        Some(o) => (Some((o.pid, o.tid)), o.line.into_iter().collect()),
        None => (None, Vec::new()),
    };
    related.extend(race_lines(check, &with.run, places, ws));
    let message = deciding_message(check, d, without, with, other, schedule);
    Ok(Some(Finding {
        file: here.file.clone(),
        line: here.line,
        severity: Severity::Warning,
        kind: "deciding-step",
        message,
        related,
        run: with.run.clone(),
        step: d.step,
        compare: Some(without.run.clone()),
        events: with_facts
            .map(|f| events_near(&f.events, d.step))
            .unwrap_or_default(),
    }))
}

/// The thread the deciding step let run, and its line.
struct OtherThread {
    pid: u32,
    tid: u32,
    line: Option<Related>,
}

/// The other thread, whose event is the first difference after the
/// deciding step (not `away`, the one the step stopped), and its line there,
/// else at its next steps (a thread that just started has no line of its
/// own yet).
fn other_thread(
    check: &CheckFacts,
    away: u32,
    with: &SideFacts,
    with_facts: Option<&RunFacts>,
    places: &mut dyn Places,
    ws: &dyn Workspace,
) -> Result<Option<OtherThread>, String> {
    let first_diff = check.right_step.and_then(|s| {
        with_facts?
            .events
            .iter()
            .find(|e| e.step >= s && e.tid != away)
    });
    let Some(e) = first_diff else {
        return Ok(None);
    };
    let mut other = OtherThread {
        pid: e.pid,
        tid: e.tid,
        line: None,
    };
    let later = with_facts
        .map(|f| {
            f.events
                .iter()
                .filter(|x| x.tid == e.tid && x.step >= e.step)
                .map(|x| x.step)
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    for step in later.into_iter().filter(|s| seen.insert(*s)).take(4) {
        if let Some(f) = thread_line(places, &with.run, step, e.tid, ws)? {
            other.line = Some(Related {
                file: f.file,
                line: f.line,
                message: format!(
                    "thread {}/{} runs here instead, at step {step} of run {}",
                    e.pid, e.tid, with.run
                ),
            });
            break;
        }
    }
    Ok(Some(other))
}

/// The racing accesses' own lines, when they are the user's.
fn race_lines(
    check: &CheckFacts,
    run: &str,
    places: &mut dyn Places,
    ws: &dyn Workspace,
) -> Vec<Related> {
    let mut related = Vec::new();
    for a in &check.race {
        let Ok(frames) = places.at_pc(run, a.pc) else {
            continue;
        };
        if let Some(f) = pick(&frames, ws) {
            related.push(Related {
                file: f.file.clone(),
                line: f.line,
                message: a.message(),
            });
        }
    }
    related
}

/// What the deciding step does and what follows: `a switch to thread 3
/// after this line lets thread 1/3 run: the run violates ...`.
fn deciding_message(
    check: &CheckFacts,
    d: &Deciding,
    without: &SideFacts,
    with: &SideFacts,
    other: Option<(u32, u32)>,
    schedule: &str,
) -> String {
    let action = match (d.what.as_str(), d.ns, d.tid) {
        ("stall", Some(ns), _) => format!("a stall of {} us after this line", ns / 1000),
        ("switch", _, Some(t)) => format!("a switch to thread {t} after this line"),
        (what, _, _) => format!("a {what} after this line"),
    };
    let lets = match other {
        Some((pid, tid)) => format!(" lets thread {pid}/{tid} run"),
        None => String::new(),
    };
    let effect = if with.status != without.status {
        format!("the run ends {} instead of {}", with.status, without.status)
    } else if with.label == "failing" {
        format!("the run violates {}", check.property)
    } else {
        format!("the run keeps {}", check.property)
    };
    format!(
        "{action}{lets}: {effect} (check of {}, {schedule}, step {})",
        check.name, d.step
    )
}

/// The workspace line of thread `tid` at the exit that is `step`.
fn thread_line(
    places: &mut dyn Places,
    run: &str,
    step: u64,
    tid: u32,
    ws: &dyn Workspace,
) -> Result<Option<Frame>, String> {
    let threads = places.at_exit(run, step)?;
    Ok(threads
        .iter()
        .find(|t| t.tid == tid)
        .and_then(|t| pick(&t.frames, ws))
        .cloned())
}

/// Findings of one run: a crash, a deadlock, a failed `always`, a timeout.
/// `what` names where the run came from (`run`, `check of bank, schedule 5`).
pub fn of_run(
    run: &RunFacts,
    what: &str,
    places: &mut dyn Places,
    ws: &dyn Workspace,
    log: &mut Vec<String>,
) -> Vec<Finding> {
    let mut of = OfRun {
        run,
        what,
        places,
        ws,
        log,
        out: Vec::new(),
    };
    if run.status.starts_with("killed:") {
        of.crash();
    }
    if run.status == "deadlocked" && run.steps > 0 {
        of.deadlock();
    }
    if run.status == "timed-out" {
        of.timed_out();
    }
    of.failed_always();
    of.out
}

/// What `of_run` finds with, and what it found.
struct OfRun<'a> {
    run: &'a RunFacts,
    what: &'a str,
    places: &'a mut dyn Places,
    ws: &'a dyn Workspace,
    log: &'a mut Vec<String>,
    out: Vec<Finding>,
}

impl OfRun<'_> {
    fn found(&mut self, frame: Frame, kind: &'static str, message: String, step: u64) {
        self.out.push(Finding {
            file: frame.file,
            line: frame.line,
            severity: Severity::Error,
            kind,
            message,
            related: Vec::new(),
            run: self.run.id.clone(),
            step,
            compare: None,
            events: events_near(&self.run.events, step),
        });
    }

    /// `(check of bank, schedule 5, run ID, step N)`.
    fn tail(&self, step: u64) -> String {
        format!("({}, run {}, step {step})", self.what, self.run.id)
    }

    /// Where thread `tid` was at `step`; a failure to say is logged.
    fn thread_line(&mut self, step: u64, tid: u32) -> Option<Frame> {
        match thread_line(self.places, &self.run.id, step, tid, self.ws) {
            Ok(f) => f,
            Err(e) => {
                self.log.push(format!("run {}: {e}", self.run.id));
                None
            }
        }
    }

    /// The fault: the last signal that is a fault (a fault signo).
    fn crash(&mut self) {
        let run = self.run;
        let fault = run.events.iter().rev().find(|e| {
            matches!(e.kind, EventKind::Signal { signo, .. } if matches!(signo, 4 | 5 | 7 | 8 | 11))
        });
        let Some(e) = fault else { return };
        let EventKind::Signal { signo, addr, .. } = e.kind else {
            return;
        };
        if let Some(frame) = self.thread_line(e.step, e.tid) {
            let sig = vmm::run::signal_name(signo);
            let message = format!(
                "thread {}/{} dies of {sig} at address {addr:#x}: the run ends {} {}",
                e.pid,
                e.tid,
                run.status,
                self.tail(e.step)
            );
            self.found(frame, "crash", message, e.step);
        }
    }

    fn deadlock(&mut self) {
        let run = self.run;
        let threads = match self.places.at_exit(&run.id, run.steps) {
            Ok(threads) => threads,
            Err(e) => return self.log.push(format!("run {}: {e}", run.id)),
        };
        for t in threads {
            if let Some(frame) = pick(&t.frames, self.ws).cloned() {
                let message = format!(
                    "thread {}/{} waits here forever: the run ends deadlocked {}",
                    t.pid,
                    t.tid,
                    self.tail(run.steps)
                );
                self.found(frame, "deadlock", message, run.steps);
            }
        }
    }

    fn timed_out(&mut self) {
        let run = self.run;
        for line in &run.stuck {
            // `thread 1000/1001: running, at 0x401136 in spin+0x6...`
            let Some((who, rest)) = line.split_once(": running, at ") else {
                continue;
            };
            let pc = rest
                .split(|c: char| !c.is_ascii_hexdigit() && c != 'x')
                .next()
                .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok());
            let Some(pc) = pc else { continue };
            let frames = match self.places.at_pc(&run.id, pc) {
                Ok(f) => f,
                Err(e) => {
                    self.log.push(format!("run {}: {e}", run.id));
                    continue;
                }
            };
            if let Some(frame) = pick(&frames, self.ws).cloned() {
                let message = format!(
                    "{who} was still running here when the run timed out {}",
                    self.tail(run.steps)
                );
                self.found(frame, "timed-out", message, run.steps);
            }
        }
    }

    fn failed_always(&mut self) {
        let run = self.run;
        for e in &run.events {
            if let EventKind::Sdk {
                kind: SdkKind::Always,
                cond: false,
                message,
            } = &e.kind
            {
                if let Some(frame) = self.thread_line(e.step, e.tid) {
                    let message = format!("always({message:?}) failed {}", self.tail(e.step));
                    self.found(frame, "sdk-always", message, e.step);
                }
            }
        }
    }
}
