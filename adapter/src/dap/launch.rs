//! `launch` and `attach` arguments: open a recorded run at a step, record a
//! program first, or run a check first and open its failing run. The
//! recording and checking fields are those of `rewind run` and `rewind
//! check`, read into the application layer's `RunSpec` and `CheckRequest`.

use super::conn::{Control, Out};
use super::wire;
use crate::app::check::{self, CheckRequest};
use crate::app::record::{prepare, summary, RunSpec};
use crate::progress::{Watch, Watched};
use crate::util::{parse_secs, parse_size};
use anyhow::{anyhow, bail, Result};
use dap::events::{Event, OutputEventBody, ProgressEndEventBody, ProgressStartEventBody};
use dap::types::OutputEventCategory;
use serde_json::{Map, Value};
use std::sync::Arc;
use vmm::check::Strategy;
use vmm::record::fork::ForkWith;
use vmm::run::EventKind;
use vmm::run::Limits;
use vmm::runner;
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

/// JSON field, and the `rewind run`/`rewind check` option it is: the
/// application layer's errors name the option, a launch's the field.
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
    ("env", "--env"),
];
const CHECK_FIELDS: &[(&str, &str)] = &[
    ("schedules", "--schedules"),
    ("budget", "--budget"),
    ("strategy", "--strategy"),
    ("seeds", "--seeds"),
    ("depth", "--depth"),
    ("checkSeed", "--check-seed"),
    ("jobs", "--jobs"),
    ("points", "--points"),
    ("properties", "--property"),
];

/// A launch's (or a request's) fields, read typed; an error names the field.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn get(&self, field: &str) -> Option<&Value> {
        self.0.get(field).filter(|v| !v.is_null())
    }

    /// A scalar field as written: a string, or a number's digits.
    fn text(&self, field: &str) -> Result<Option<String>> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(_) => bail!("launch argument `{field}` must be a string or a number"),
        }
    }

    /// A scalar field through `parse`.
    fn parsed<T>(
        &self,
        field: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<Option<T>> {
        self.text(field)?
            .map(|t| parse(&t).map_err(|why| anyhow!("launch argument `{field}`: {why}")))
            .transpose()
    }

    /// A whole number in `range`.
    fn number<T: TryFrom<u64> + Copy + Into<u64>>(
        &self,
        field: &str,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Option<T>> {
        self.parsed(field, |t| {
            t.parse::<u64>()
                .ok()
                .filter(|n| range.contains(n))
                .and_then(|n| T::try_from(n).ok())
                .ok_or_else(|| {
                    format!(
                        "`{t}` is not a whole number from {} to {}",
                        range.start(),
                        range.end()
                    )
                })
        })
    }

    fn whole(&self, field: &str) -> Result<Option<u64>> {
        self.number(field, 0..=u64::MAX)
    }

    fn strings(&self, field: &str) -> Result<Option<Vec<String>>> {
        let Some(v) = self.get(field) else {
            return Ok(None);
        };
        let bad = || anyhow!("launch argument `{field}` must be an array of strings");
        let a = v.as_array().ok_or_else(bad)?;
        a.iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect::<Result<_>>()
            .map(Some)
    }

    /// `env`: an object of K: V, or an array of "K=V".
    fn env(&self) -> Result<Vec<String>> {
        match self.get("env") {
            None => Ok(Vec::new()),
            Some(Value::Object(env)) => env
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok(format!("{k}={s}")),
                    Value::Number(n) => Ok(format!("{k}={n}")),
                    _ => bail!("launch argument `env` must be a string or a number"),
                })
                .collect(),
            Some(Value::Array(_)) => Ok(self.strings("env")?.unwrap_or_default()),
            Some(_) => bail!("launch argument `env` must be an object or an array of \"K=V\""),
        }
    }

    /// The run a launch records (or checks).
    fn run_spec(&self) -> Result<RunSpec> {
        let d = RunSpec::default();
        let mut spec = RunSpec {
            example: self.text("example")?,
            root: self.text("root")?.map(Into::into),
            cwd: self.text("cwd")?.unwrap_or(d.cwd),
            epoch: self.whole("epoch")?,
            seed: self.whole("seed")?.unwrap_or(d.seed),
            cores: self.number("cores", 1..=1024)?.unwrap_or(d.cores),
            mem: self.parsed("mem", parse_size)?.unwrap_or(d.mem),
            timeout: self.parsed("timeout", parse_secs)?,
            name: self.text("runName")?,
            schedule: self.whole("schedule")?.unwrap_or(d.schedule),
            schedule_from: self.whole("scheduleFrom")?,
            schedule_until: self.whole("scheduleUntil")?,
            env: self.env()?,
            ..d
        };
        match self.0.get("program") {
            Some(Value::String(p)) => spec.command.push(p.clone()),
            Some(_) => bail!("launch argument `program` must be a string"),
            None if self.0.contains_key("example") => {}
            None => bail!("launch arguments need `run`, `program`, `example` or `check`"),
        }
        spec.command
            .extend(self.strings("args")?.unwrap_or_default());
        Ok(spec)
    }

    /// `req` with the check fields (`schedules`, `strategy`, `properties`..).
    fn check_request(&self, mut req: CheckRequest) -> Result<CheckRequest> {
        req.schedules = self.whole("schedules")?.or(req.schedules);
        req.budget = self
            .whole("budget")?
            .map(std::time::Duration::from_secs)
            .or(req.budget);
        req.seeds = self.whole("seeds")?;
        req.depth = self.number("depth", 1..=64)?.unwrap_or(req.depth);
        req.check_seed = self.whole("checkSeed")?.unwrap_or(req.check_seed);
        req.jobs = self
            .whole("jobs")?
            .map(|j| usize::try_from(j).unwrap_or(usize::MAX));
        req.run.points = self.parsed("points", str::parse)?.or(req.run.points);
        req.properties = self.strings("properties")?.unwrap_or_default();
        let strategy = self.parsed("strategy", |s| match s {
            "random" => Ok(Strategy::Random),
            "bounded" => Ok(Strategy::Bounded),
            "pct" => Ok(Strategy::Pct),
            _ => Err(format!("`{s}`: one of random, bounded, pct")),
        })?;
        req.strategy = strategy.or(req.strategy);
        Ok(req)
    }
}

/// An application error, with the option it names said as its JSON field.
fn name_field(e: &anyhow::Error, fields: &[(&str, &str)]) -> anyhow::Error {
    let msg = crate::util::one_line(e);
    for (field, flag) in fields {
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
    let base = CheckRequest {
        run: RunSpec {
            schedule_from: Some(from),
            ..RunSpec::default()
        },
        from_run: Some(run.id.clone()),
        narrow: false,
        ..CheckRequest::default()
    };
    let req = Fields(m).check_request(base)?;
    let store = crate::app::store()?;
    check::spec(&req, &store, Vec::new).map_err(|e| name_field(&e, CHECK_FIELDS))
}

/// Opens what the arguments name; a check stops when `control` says the
/// client left or cancelled the launch.
pub fn open(
    store: &Store,
    args: &Value,
    out: &Out,
    seq: i64,
    control: Arc<Control>,
) -> Result<Opened> {
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
        return check_first(store, cm, out, seq, control);
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
    crate::app::resolve_in(store, spec).map_err(|e| anyhow!("launch argument `{field}`: {e:#}"))
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
pub struct Forward(pub Out);

impl Watch for Forward {
    fn output(&mut self, fd: i32, bytes: &[u8]) {
        self.0.send(wire::event(Event::Output(OutputEventBody {
            category: Some(if fd == 2 {
                OutputEventCategory::Stderr
            } else {
                OutputEventCategory::Stdout
            }),
            output: String::from_utf8_lossy(bytes).into_owned(),
            ..Default::default()
        })));
    }
}

fn record_first(store: &Store, m: &Map<String, Value>, out: &Out, seq: i64) -> Result<Opened> {
    let spec = Fields(m).run_spec()?;
    store.prepare()?;
    let prepared = prepare(&spec, store).map_err(|e| name_field(&e, RUN_FIELDS))?;
    let inputs = &prepared.inputs;
    let id = format!("record-{seq}");
    progress_start(
        out,
        seq,
        &id,
        format!("Recording {}", inputs.manifest.program),
        false,
    );
    let _recording = super::conn::recording();
    let mut rec = store.begin(&inputs.manifest, &inputs.stdin)?;
    rec.set_echo(false);
    let limits = Limits {
        timeout: spec.timeout,
        ..Default::default()
    };
    let outcome = {
        let mut fwd = Watched {
            inner: &mut rec,
            watch: Forward(out.clone()),
        };
        runner::run(inputs, &limits, &mut fwd)
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
            timeout: spec.timeout,
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

/// Progress of a check, as `progressUpdate` events; it stops when the
/// client leaves (or cancels the launch, `seq`).
struct CheckProgress {
    out: Out,
    id: String,
    phase: String,
    seq: i64,
    control: Arc<Control>,
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
    fn stopped(&self) -> bool {
        self.control.is_cancelled(self.seq, &self.id)
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

fn check_first(
    store: &Store,
    m: &Map<String, Value>,
    out: &Out,
    seq: i64,
    control: Arc<Control>,
) -> Result<Opened> {
    let fields = Fields(m);
    let req = fields.check_request(CheckRequest {
        run: fields.run_spec()?,
        ..CheckRequest::default()
    })?;
    store.prepare()?;
    let both: Vec<_> = RUN_FIELDS.iter().chain(CHECK_FIELDS).copied().collect();
    let spec = check::spec(&req, store, Vec::new).map_err(|e| name_field(&e, &both))?;
    let id = format!("check-{seq}");
    progress_start(out, seq, &id, "Checking schedules".into(), false);
    let mut progress = CheckProgress {
        out: out.clone(),
        id: id.clone(),
        phase: String::new(),
        seq,
        control,
    };
    let report = {
        let _recording = super::conn::recording();
        vmm::check::Checker::new(&spec, store).run(&mut progress)
    };
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            progress_end(out, &id, format!("failed: {e}"));
            return Err(e.into());
        }
    };
    // A debug session keeps no command to remake a removed schedule.
    check::keep(store, &report, check::Keep::Found, &|_, _| None, &[]);
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

/// How a fork that names no schedule or seed is made (`restartFrame`, and
/// `rewind/fork` without either): launch's `forkWith`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForkBy {
    /// The next schedule no fork at that step used yet.
    #[default]
    Schedule,
    /// The next seed no fork at that step used yet.
    Seed,
}

impl ForkBy {
    /// Launch's `forkWith` (`"schedule"`, the default, or `"seed"`).
    pub fn of_launch(args: &Value) -> Result<ForkBy> {
        match args.get("forkWith").filter(|v| !v.is_null()) {
            None => Ok(ForkBy::Schedule),
            Some(v) => match v.as_str() {
                Some("schedule") => Ok(ForkBy::Schedule),
                Some("seed") => Ok(ForkBy::Seed),
                _ => bail!("launch argument `forkWith` must be \"schedule\" or \"seed\", not {v}"),
            },
        }
    }

    pub fn with(self, n: u64) -> ForkWith {
        match self {
            ForkBy::Schedule => ForkWith::Schedule(n),
            ForkBy::Seed => ForkWith::Seed(n),
        }
    }
}

/// How a session behaves after launch, from its launch arguments.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// `stepping: "events"`: next/stepIn/stepOut/stepBack move between the
    /// thread's events, as before line stepping.
    pub event_steps: bool,
    /// `forkWith`: what `restartFrame` forks with.
    pub fork_by: ForkBy,
    /// `snapshotMemory`: the debug core's snapshots' budget, bytes.
    pub snapshot_budget: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            event_steps: false,
            fork_by: ForkBy::default(),
            snapshot_budget: vmm::debug::DEFAULT_SNAPSHOT_BUDGET,
        }
    }
}

impl Options {
    /// The options a launch's arguments give, checked before anything is recorded.
    pub fn of_launch(args: &Value) -> Result<Options> {
        let snapshot_budget = match args.get("snapshotMemory") {
            None => vmm::debug::DEFAULT_SNAPSHOT_BUDGET,
            Some(v) => v
                .as_u64()
                .and_then(|mib| mib.checked_mul(1 << 20))
                .ok_or_else(|| {
                    anyhow!("launch argument `snapshotMemory`: {v} is not a size in MiB")
                })?,
        };
        Ok(Options {
            event_steps: args.get("stepping").and_then(Value::as_str) == Some("events"),
            fork_by: ForkBy::of_launch(args)?,
            snapshot_budget,
        })
    }
}
