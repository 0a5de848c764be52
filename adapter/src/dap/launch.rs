//! `launch` and `attach` arguments: open a recorded run at a step, record a
//! program first, or run a check first and open its failing run. The
//! recording and checking arguments are those of `rewind run` and `rewind
//! check`, given as JSON fields and parsed by the same code.

use super::wire;
use super::Out;
use crate::cmd::check::CheckArgs;
use crate::cmd::run::{prepare, summary, RunArgs};
use anyhow::{anyhow, bail, Result};
use clap::Parser;
use dap::events::{Event, OutputEventBody, ProgressEndEventBody, ProgressStartEventBody};
use dap::types::OutputEventCategory;
use serde_json::{Map, Value};
use vmm::record::{Event as RunEvent, EventKind, Recorder};
use vmm::session::{self, Limits};
use vmm::store::{Run, RunDetails, Store};

/// Why the session first stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstStop {
    Entry,
    Exception,
}

/// A run opened by `launch`/`attach`.
pub struct Opened {
    pub run: Run,
    pub step: u64,
    pub first: FirstStop,
    pub compare: Option<Run>,
    /// The step a check found deciding.
    pub deciding: Option<u64>,
    /// What that check said of it, for the debug console: its `... decides
    /// it` sentence, and the accesses the step interleaved.
    pub said: Vec<String>,
}

/// JSON field, and the `rewind run`/`rewind check` option it is.
const RUN_FIELDS: &[(&str, &str)] = &[
    ("example", "--example"),
    ("root", "--root"),
    ("cwd", "--cwd"),
    ("epoch", "--epoch"),
    ("seed", "--seed"),
    ("cores", "--cores"),
    ("mem", "--mem"),
    ("timeout", "--timeout"),
    ("runName", "--name"),
    ("schedule", "--schedule"),
    ("scheduleFrom", "--schedule-from"),
    ("scheduleUntil", "--schedule-until"),
];
const CHECK_FIELDS: &[(&str, &str)] = &[
    ("schedules", "--schedules"),
    ("strategy", "--strategy"),
    ("seeds", "--seeds"),
    ("depth", "--depth"),
    ("checkSeed", "--check-seed"),
    ("jobs", "--jobs"),
    ("points", "--points"),
];

/// A scalar field as a command-line word; an error names the field.
fn word(field: &str, v: &Value) -> Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => bail!("launch argument `{field}` must be a string or a number"),
    }
}

fn strings(field: &str, v: &Value) -> Result<Vec<String>> {
    let Some(a) = v.as_array() else {
        bail!("launch argument `{field}` must be an array of strings");
    };
    a.iter()
        .map(|x| {
            x.as_str()
                .map(str::to_string)
                .ok_or_else(|| anyhow!("launch argument `{field}` must be an array of strings"))
        })
        .collect()
}

/// The words `rewind run` would be given for these fields.
fn run_words(m: &Map<String, Value>, extra: &[(&str, &str)]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for (field, flag) in RUN_FIELDS.iter().chain(extra) {
        if let Some(v) = m.get(*field).filter(|v| !v.is_null()) {
            out.push(flag.to_string());
            out.push(word(field, v)?);
        }
    }
    match m.get("env") {
        None | Some(Value::Null) => {}
        Some(Value::Object(env)) => {
            for (k, v) in env {
                out.push("--env".into());
                out.push(format!("{k}={}", word("env", v)?));
            }
        }
        Some(v @ Value::Array(_)) => {
            for kv in strings("env", v)? {
                out.push("--env".into());
                out.push(kv);
            }
        }
        Some(_) => bail!("launch argument `env` must be an object or an array of \"K=V\""),
    }
    if let Some(p) = m.get("properties").filter(|_| !extra.is_empty()) {
        for p in strings("properties", p)? {
            out.push("--property".into());
            out.push(p);
        }
    }
    out.push("--".into());
    match m.get("program") {
        Some(Value::String(p)) => out.push(p.clone()),
        Some(_) => bail!("launch argument `program` must be a string"),
        None if m.contains_key("example") => {}
        None => bail!("launch arguments need `run`, `program`, `example` or `check`"),
    }
    if let Some(a) = m.get("args") {
        out.extend(strings("args", a)?);
    }
    Ok(out)
}

/// A clap or preparation error, with the option named as its JSON field.
fn name_field(e: &anyhow::Error, extra: &[(&str, &str)]) -> anyhow::Error {
    let msg = crate::util::one_line(e);
    for (field, flag) in RUN_FIELDS.iter().chain(extra).chain(&[("env", "--env")]) {
        if msg.contains(&format!("{flag} "))
            || msg.contains(&format!("{flag}:"))
            || msg.contains(&format!("'{flag}"))
            || msg.contains(&format!("`{flag}"))
        {
            return anyhow!("launch argument `{field}`: {msg}");
        }
    }
    if msg.contains("cannot run") || msg.contains("no program") {
        return anyhow!("launch argument `program`: {msg}");
    }
    anyhow!("launch: {msg}")
}

#[derive(Parser)]
#[command(name = "launch", no_binary_name = true)]
struct RunWords {
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Parser)]
#[command(name = "launch", no_binary_name = true)]
struct CheckWords {
    #[command(flatten)]
    check: CheckArgs,
}

fn parse_words<P: Parser>(words: &[String], extra: &[(&str, &str)]) -> Result<P> {
    P::try_parse_from(words)
        .map_err(|e| name_field(&anyhow!(crate::util::clap_one_line(&e)), extra))
}

/// The check `rewind check --run RUN --schedule-from FROM --no-narrow`
/// would run, with `rewind/check`'s fields (`schedules`, `strategy`,
/// `properties`..) as its options.
pub fn check_from(run: &Run, from: u64, args: &Value) -> Result<vmm::check::CheckSpec> {
    let empty = Map::new();
    let m = match args {
        Value::Null => &empty,
        Value::Object(m) => m,
        _ => bail!("arguments must be an object"),
    };
    let mut words: Vec<String> = [
        "--run",
        &run.id,
        "--schedule-from",
        &from.to_string(),
        "--no-narrow",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (field, flag) in CHECK_FIELDS {
        if let Some(v) = m.get(*field).filter(|v| !v.is_null()) {
            words.push(flag.to_string());
            words.push(word(field, v)?);
        }
    }
    if let Some(p) = m.get("properties") {
        for p in strings("properties", p)? {
            words.push("--property".into());
            words.push(p);
        }
    }
    let args = parse_words::<CheckWords>(&words, CHECK_FIELDS)?.check;
    let store = crate::cmd::store()?;
    crate::cmd::check::spec(&args, &store, Vec::new).map_err(|e| name_field(&e, CHECK_FIELDS))
}

/// Opens what the arguments name.
pub fn open(store: &Store, args: &Value, out: &Out, seq: i64) -> Result<Opened> {
    let empty = Map::new();
    let m = match args {
        Value::Null => &empty,
        Value::Object(m) => m,
        _ => bail!("launch arguments must be an object"),
    };
    if let Some(c) = m.get("check") {
        let Some(cm) = c.as_object() else {
            bail!("launch argument `check` must be an object");
        };
        return check_first(store, cm, out, seq);
    }
    if m.contains_key("run") {
        return open_recorded(store, m);
    }
    record_first(store, m, out, seq)
}

fn resolve(store: &Store, field: &str, v: &Value) -> Result<Run> {
    let Some(spec) = v.as_str() else {
        bail!("launch argument `{field}` must be a run id, prefix, @ or name");
    };
    store
        .resolve(spec)
        .map_err(|e| anyhow!("launch argument `{field}`: {e}"))
}

fn open_recorded(store: &Store, m: &Map<String, Value>) -> Result<Opened> {
    let run = resolve(store, "run", &m["run"])?;
    let compare = match m.get("compare").filter(|v| !v.is_null()) {
        Some(v) => Some(resolve(store, "compare", v)?),
        None => None,
    };
    let (step, first) = match m.get("step").filter(|v| !v.is_null()) {
        Some(v) => {
            let Some(s) = v.as_u64() else {
                bail!("launch argument `step` must be a whole number");
            };
            if s > run.meta.steps {
                bail!(
                    "launch argument `step`: {s} is past the end of run {} ({} steps)",
                    run.id,
                    run.meta.steps
                );
            }
            (s, FirstStop::Entry)
        }
        None => default_stop(&run)?,
    };
    let (deciding, said) = deciding_of(store, &run).unzip();
    Ok(Opened {
        run,
        step,
        first,
        compare,
        deciding,
        said: said.unwrap_or_default(),
    })
}

/// The deciding step of `run` when a kept check (`$REWIND_HOME/checks/`)
/// narrowed to it as its failing run, and what the check said of it: a run
/// opened by id (a code action, a link, the Runs view) shows the mark as a
/// check launch does.
fn deciding_of(store: &Store, run: &Run) -> Option<(u64, Vec<String>)> {
    store.checks().0.iter().find_map(|c| {
        let n = c.report.get("narrowed")?;
        if n.get("with")?.get("run")?.as_str()? != run.id {
            return None;
        }
        let step = n
            .get("deciding")?
            .as_array()?
            .last()?
            .get("step")?
            .as_u64()?;
        let sentence = n
            .get("sentence")
            .and_then(|s| s.as_str())
            .map(str::to_string);
        let race = n
            .get("race")
            .and_then(|r| r.get("sentence")?.as_str())
            .map(|s| format!("the interleaving: {s}"));
        let said = sentence.into_iter().chain(race).collect();
        Some((step.min(run.meta.steps), said))
    })
}

/// Where a run opens without a step: at its fatal signal, else at step 0.
pub fn default_stop(run: &Run) -> Result<(u64, FirstStop)> {
    if run.meta.status.starts_with("killed") {
        let events = run.events()?;
        if let Some(e) = events
            .iter()
            .rev()
            .find(|e| matches!(e.kind, EventKind::Signal { .. }))
        {
            return Ok((e.step, FirstStop::Exception));
        }
    }
    Ok((0, FirstStop::Entry))
}

fn progress_start(out: &Out, seq: i64, id: &str, title: String, cancellable: bool) {
    out.send(wire::event(Event::ProgressStart(ProgressStartEventBody {
        progress_id: id.to_string(),
        title,
        request_id: Some(seq),
        cancellable: Some(cancellable),
        ..Default::default()
    })));
}

fn progress_end(out: &Out, id: &str, message: String) {
    out.send(wire::event(Event::ProgressEnd(ProgressEndEventBody {
        progress_id: id.to_string(),
        message: Some(message),
    })));
}

/// Sends what the guest writes as `output` events while recording.
pub struct Forward<'a> {
    pub inner: &'a mut dyn Recorder,
    pub out: Out,
}

impl Recorder for Forward<'_> {
    fn event(&mut self, e: &RunEvent) {
        self.inner.event(e);
    }
    fn output(&mut self, fd: i32, bytes: &[u8]) {
        self.out.send(wire::event(Event::Output(OutputEventBody {
            category: Some(if fd == 2 {
                OutputEventCategory::Stderr
            } else {
                OutputEventCategory::Stdout
            }),
            output: String::from_utf8_lossy(bytes).into_owned(),
            ..Default::default()
        })));
        self.inner.output(fd, bytes);
    }
    fn switch(&mut self, step: u64, pid: u32, tid: u32) {
        self.inner.switch(step, pid, tid);
    }
    fn keyframe(
        &mut self,
        kf: &vmm::record::keyframe::Keyframe,
        pages: &[(vmm::store::pages::PageHash, &[u8])],
    ) {
        self.inner.keyframe(kf, pages);
    }
    fn wants_keyframes(&self) -> bool {
        self.inner.wants_keyframes()
    }
}

fn record_first(store: &Store, m: &Map<String, Value>, out: &Out, seq: i64) -> Result<Opened> {
    let words = run_words(m, &[])?;
    let args = parse_words::<RunWords>(&words, &[])?.run;
    store.prepare()?;
    let prepared = prepare(&args, store).map_err(|e| name_field(&e, &[]))?;
    let inputs = &prepared.inputs;
    let id = format!("record-{seq}");
    progress_start(
        out,
        seq,
        &id,
        format!("Recording {}", inputs.manifest.program),
        false,
    );
    let _recording = super::recording();
    let mut rec = store.begin(&inputs.manifest, &inputs.stdin)?;
    rec.set_echo(false);
    let limits = Limits {
        timeout: args.timeout,
        ..Default::default()
    };
    let outcome = {
        let mut fwd = Forward {
            inner: &mut rec,
            out: out.clone(),
        };
        session::run(inputs, &limits, &mut fwd)
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            progress_end(out, &id, format!("failed: {e}"));
            return Err(e.into());
        }
    };
    let run = rec.finish(
        &outcome,
        &RunDetails {
            name: prepared.name.clone(),
            image: inputs.image.clone(),
            timeout: args.timeout,
        },
    )?;
    progress_end(out, &id, summary(&run.id, &outcome));
    let (step, first) = default_stop(&run)?;
    Ok(Opened {
        run,
        step,
        first,
        compare: None,
        deciding: None,
        said: Vec::new(),
    })
}

/// Progress of a check, as `progressUpdate` events.
struct CheckProgress {
    out: Out,
    id: String,
    phase: String,
}

impl vmm::check::Progress for CheckProgress {
    fn phase(&mut self, what: &str) {
        self.phase = what.to_string();
        self.update(what.to_string(), None);
    }
    fn tried(&mut self, t: &vmm::check::Tried, done: u64, total: u64) {
        let pct = (total > 0).then(|| (done * 100 / total) as i64);
        self.update(format!("{}: {} {}", t.label.trim(), t.status, t.id), pct);
        let _ = &self.phase;
    }
}

impl CheckProgress {
    fn update(&self, message: String, percentage: Option<i64>) {
        self.out.send(wire::event(Event::ProgressUpdate(
            dap::events::ProgressUpdateEventBody {
                progress_id: self.id.clone(),
                message: Some(message),
                percentage,
            },
        )));
    }
}

fn check_first(store: &Store, m: &Map<String, Value>, out: &Out, seq: i64) -> Result<Opened> {
    let words = run_words(m, CHECK_FIELDS)?;
    let args = parse_words::<CheckWords>(&words, CHECK_FIELDS)?.check;
    store.prepare()?;
    let spec = crate::cmd::check::spec(&args, store, Vec::new)
        .map_err(|e| name_field(&e, CHECK_FIELDS))?;
    let id = format!("check-{seq}");
    progress_start(out, seq, &id, "Checking schedules".into(), false);
    let mut progress = CheckProgress {
        out: out.clone(),
        id: id.clone(),
        phase: String::new(),
    };
    let report = {
        let _recording = super::recording();
        vmm::check::Checker::new(&spec, store).run(&mut progress)
    };
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            progress_end(out, &id, format!("failed: {e}"));
            return Err(e.into());
        }
    };
    crate::cmd::check::keep(store, &report);
    progress_end(
        out,
        &id,
        format!(
            "{} of {} schedules violate",
            report.violations(),
            report.tried.len()
        ),
    );
    if let Some(n) = &report.narrowed {
        let run = store.resolve(&n.with.run)?;
        let passing = store.resolve(&n.without.run)?;
        let step = n.deciding.last().map_or(0, |p| p.step).min(run.meta.steps);
        return Ok(Opened {
            run,
            step,
            first: FirstStop::Entry,
            compare: Some(passing),
            deciding: Some(step),
            said: std::iter::once(n.sentence.clone())
                .chain(
                    n.race
                        .as_ref()
                        .map(|r| format!("the interleaving: {}", r.sentence)),
                )
                .collect(),
        });
    }
    if let Some(bad) = report.first_violation() {
        let run = store.resolve(&bad.id)?;
        let (step, first) = default_stop(&run)?;
        return Ok(Opened {
            run,
            step,
            first,
            compare: Some(store.resolve(&report.base.id)?),
            deciding: None,
            said: Vec::new(),
        });
    }
    bail!(
        "check: none of the {} schedules violates a property; nothing to open",
        report.tried.len()
    )
}
