//! Checking: schedules that perturb a run, properties a run must keep, and
//! narrowing a violating schedule to the step that decides it.
//!
//! A check records schedule 0, then tries schedules until one violates a
//! property (or all of them, with `all`). Runs go into the store like any
//! other, so every id a check prints can be replayed, diffed or forked.

pub mod jobs;
pub mod label;
pub mod merge;
pub mod narrow;
pub mod outputs;
mod plan;
pub mod portfolio;
pub mod property;
pub mod race;
mod resume;
pub mod shard;
pub mod window;

use crate::record::diff::Divergence;
use crate::record::fork::{fork_manifest, ForkWith};
use crate::run::keyframe::Keyframe;
use crate::run::{Event, ExitStatus, Perturbed, Points};
use crate::run::{Limits, Outcome, RunInputs};
use crate::runner;
use crate::store::{Created, RunDetails, Store, StoreError};
use crate::EngineError;
use property::{Judged, Property, Verdict};
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot read the events of run {0}: {1}")]
    Trace(String, String),
    #[error("the check was stopped before its end")]
    Stopped,
}

/// A perturbed run may take this many times schedule 0's wall time...
const SPIN_FACTOR: u32 = 20;
/// ...and at least this long, before it ends `timed-out` (without `--timeout`).
const SPIN_FLOOR: std::time::Duration = std::time::Duration::from_secs(10);

/// How the schedules to try are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Seeded schedules 1..=N.
    Random,
    /// PCT schedules 1..=N (`CheckSpec::depth`).
    Pct,
    /// Every schedule with one reschedule in the window, in step order, then every pair.
    Bounded,
    /// Schedule 0 reseeded: the run's own randomness and N other seeds.
    Seeds,
}

/// One strategy of a portfolio, with the points its runs stop at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub strategy: Strategy,
    /// PCT's depth (the other strategies ignore it).
    pub depth: u32,
    pub points: Points,
}

impl Entry {
    /// `random`, `pct`, `bounded`.
    pub fn strategy_name(&self) -> &'static str {
        match self.strategy {
            Strategy::Random => "random",
            Strategy::Pct => "pct",
            Strategy::Bounded => "bounded",
            Strategy::Seeds => "seeds",
        }
    }
}

impl std::fmt::Display for Entry {
    /// `pct depth 3, memory points`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.strategy {
            Strategy::Pct => write!(f, "pct depth {}", self.depth)?,
            _ => f.write_str(self.strategy_name())?,
        }
        write!(f, ", {}", points_name(self.points))
    }
}

/// `syscall points`, `memory points`.
pub fn points_name(p: Points) -> String {
    match p {
        Points::Syscalls => "syscall points".into(),
        p => format!("{p} points"),
    }
}

/// One schedule to try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    Seeded(u64),
    /// A PCT schedule: its seed and depth.
    Pct(u64, u32),
    Explicit(Vec<Perturbed>),
    Seed(u64),
}

impl Candidate {
    pub fn label(&self) -> String {
        match self {
            Candidate::Seeded(n) | Candidate::Pct(n, _) => format!("schedule {n:>3}"),
            Candidate::Explicit(p) => {
                let steps: Vec<String> = p.iter().map(|p| p.step.to_string()).collect();
                format!("reschedule at {}", steps.join("+"))
            }
            Candidate::Seed(s) => format!("seed {s:>5}"),
        }
    }
}

#[derive(Clone)]
pub struct CheckSpec {
    /// Schedule 0's inputs.
    pub base: RunInputs,
    pub name: String,
    pub limits: Limits,
    pub schedules: u64,
    pub all: bool,
    pub jobs: usize,
    pub narrow: bool,
    pub properties: Vec<Property>,
    pub strategy: Strategy,
    /// PCT's depth: `depth` - 1 priority change points a schedule.
    pub depth: u32,
    /// Which schedules a seeded strategy tries: with N schedules, check
    /// seed S tries S*N+1..=S*N+N (0: 1..=N).
    pub check_seed: u64,
    pub from: Option<u64>,
    pub until: Option<u64>,
    /// Note where each thread was at the deciding step.
    pub want_where: bool,
    /// Checking from a recorded run: schedules are its forks at `from`.
    pub parent: Option<Parent>,
    /// The strategies and points tried in turn (`portfolio`); empty when
    /// `strategy` and the base's points are the check's only ones.
    pub portfolio: Vec<Entry>,
    /// No schedule starts after this long (schedules already running end).
    pub budget: Option<std::time::Duration>,
    /// How the outputs properties name a kept tree (None: BLAKE3).
    pub digest: Option<outputs::Digest>,
}

/// The recorded run a check starts from (`rewind check --run`).
#[derive(Debug, Clone)]
pub struct Parent {
    pub id: String,
    /// The perturbations its own schedule applied.
    pub applied: Vec<Perturbed>,
}

/// A run the check made, and what the properties said of it.
#[derive(Debug, Clone)]
pub struct Tried {
    pub label: String,
    pub id: String,
    pub status: ExitStatus,
    pub steps: u64,
    pub perturbed: Vec<Perturbed>,
    /// (property, why) for each property violated.
    pub violations: Vec<(String, String)>,
    /// Property judges that failed (a crashing script), with why.
    pub broken: Vec<String>,
    /// The SDK's `sometimes` messages and whether each held in this run.
    pub sometimes: Vec<(String, bool)>,
    /// How long the run took.
    pub wall: std::time::Duration,
    /// The portfolio's strategy and points that made it (None outside a
    /// portfolio, and for schedule 0).
    pub entry: Option<Entry>,
    /// Cut off slow by the check's time limit, not judged (`property::cut_off`).
    pub cut_off: bool,
}

impl Tried {
    pub fn violated(&self) -> bool {
        !self.violations.is_empty()
    }
}

/// One run of the pair narrowing compares.
#[derive(Debug, Clone)]
pub struct Side {
    pub run: String,
    pub status: ExitStatus,
    /// What a person calls it (`label`).
    pub label: label::Label,
}

#[derive(Debug, Clone)]
pub struct Narrowed {
    /// The smallest set of perturbations found that makes the run violate; one when a single step decides it.
    pub deciding: Vec<Perturbed>,
    pub property: String,
    /// The run without the deciding step (schedule 0's when one step decides it).
    pub without: Side,
    /// The run with it.
    pub with: Side,
    /// `step 36 decides it: switching away from thread 1000/1001 after its
    /// write makes the run violate ends-differently`.
    pub sentence: String,
    pub divergence: Option<Divergence>,
    /// Where each thread was at the deciding step.
    pub where_: Vec<String>,
    /// The accesses to shared memory the deciding step interleaved (memory
    /// points record them), when one step decides it.
    pub race: Option<race::Race>,
    pub runs: u64,
    pub wall: std::time::Duration,
}

#[derive(Debug, Clone)]
pub struct Report {
    /// Schedule 0 with the check's own points (or, in a portfolio, with
    /// the points of the schedule that violated first).
    pub base: Tried,
    /// Every schedule 0: one per points a portfolio tries.
    pub bases: Vec<Tried>,
    pub tried: Vec<Tried>,
    /// Said when the budget ran out before every schedule was tried.
    pub out_of_budget: Option<String>,
    /// Every run the check put in the store where none had its id,
    /// narrowing's included: what a front end may drop again (while no
    /// other recording has replaced it: `Created::is_in`).
    pub made: Vec<Created>,
    /// Said when a bounded search ran out of schedules.
    pub exhausted: Option<String>,
    pub narrowed: Option<Narrowed>,
    /// The properties checked (the SDK's is added when schedule 0 uses it).
    pub properties: Vec<Property>,
    /// `sometimes` messages that held in no run of the check.
    pub never_held: Vec<String>,
    /// What the store went on without (keyframes it could not write or
    /// read), for the front end to show.
    pub warnings: Vec<String>,
    /// With `--points races`: the learning run and the pages it saw race,
    /// which every run after it traps from the start.
    pub learned: Option<Learned>,
}

/// A run a check recorded: its id, how it went, its events.
type Recorded = (String, Outcome, Vec<Event>);

/// A check's learning run (`--points races`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Learned {
    pub run: String,
    pub steps: u64,
    pub wall: std::time::Duration,
    /// The pages it saw race (addresses, sorted): the schedules' `race_pages`.
    pub pages: Vec<u64>,
}

impl Narrowed {
    /// The two runs, the one without the deciding step first.
    pub fn sides(&self) -> [&Side; 2] {
        [&self.without, &self.with]
    }
    /// The run called `label`, if either is.
    pub fn run_called(&self, label: label::Label) -> Option<&str> {
        self.sides()
            .into_iter()
            .find(|s| s.label == label)
            .map(|s| s.run.as_str())
    }
}

impl Report {
    /// Violating runs, schedule 0 included.
    pub fn violations(&self) -> usize {
        self.runs().filter(|t| t.violated()).count()
    }
    /// Every schedule 0, then every schedule tried.
    pub fn runs(&self) -> impl Iterator<Item = &Tried> {
        self.bases.iter().chain(&self.tried)
    }
    /// Whether the check found anything wrong.
    pub fn failed(&self) -> bool {
        self.violations() > 0 || !self.never_held.is_empty()
    }
    /// Schedules cut off slow by the check's time limit, not judged.
    pub fn cut_off(&self) -> usize {
        self.tried.iter().filter(|t| t.cut_off).count()
    }
    /// The first violating run: schedule 0 itself, or the first candidate.
    pub fn first_violation(&self) -> Option<&Tried> {
        self.runs().find(|t| t.violated())
    }
}

/// Told of a check's progress; called from one thread at a time, in order.
pub trait Progress: Send {
    fn phase(&mut self, what: &str);
    fn tried(&mut self, t: &Tried, done: u64, total: u64);
    /// Whether the check is to stop (its front end's client left): asked
    /// as the budget's deadline is, before each schedule starts, and
    /// before narrowing. A check stopped is `CheckError::Stopped`.
    fn stopped(&self) -> bool {
        false
    }
}

pub struct Checker<'a> {
    spec: &'a CheckSpec,
    store: &'a Store,
    base_status: Option<ExitStatus>,
    properties: Vec<Property>,
    /// Schedule 0's wall time (for `candidate_limits`).
    base_wall: std::time::Duration,
    /// Schedule 0's steps (PCT draws its change points among them, without a window).
    base_steps: u64,
    /// Where schedule 0 has more than one thread (`bounded` and `pct` start there).
    window: Option<window::Window>,
    /// The keyframe a check from a recorded run starts its forks from.
    parent_keyframe: std::sync::OnceLock<Option<Keyframe>>,
    /// What the store went on without (`Report::warnings`).
    warnings: Mutex<Vec<String>>,
    /// Every run this check created (`Report::made`).
    made: Mutex<Vec<Created>>,
    /// With `--points races`: the pages every run traps from the start,
    /// learned by the check's first run (`learn`).
    race_pages: Vec<u64>,
    /// That learning run (`Report::learned`).
    learned: Option<Learned>,
    /// The trees schedule 0 left at its kept paths (`same-outputs`).
    base_kept: Option<std::collections::BTreeMap<String, crate::run::FileTree>>,
    /// Schedule 0's run, whose keyframes a windowed schedule starts from.
    base_run: Option<String>,
}

impl<'a> Checker<'a> {
    pub fn new(spec: &'a CheckSpec, store: &'a Store) -> Checker<'a> {
        Checker {
            spec,
            store,
            base_status: None,
            properties: spec.properties.clone(),
            parent_keyframe: std::sync::OnceLock::new(),
            warnings: Mutex::new(Vec::new()),
            made: Mutex::new(Vec::new()),
            base_wall: std::time::Duration::ZERO,
            base_steps: 0,
            window: None,
            race_pages: Vec::new(),
            learned: None,
            base_kept: None,
            base_run: None,
        }
    }

    /// Whether the check learns where races can be before its schedule 0:
    /// race-directed points from the start, and no pages given.
    fn learns(&self) -> bool {
        let m = &self.spec.base.manifest;
        self.spec.parent.is_none()
            && m.points == crate::run::Points::Races
            && m.race_pages.is_empty()
    }

    /// The learning run: schedule 0 with race-directed points and no pages
    /// given, which finds the pages that race as it goes. Its pages are then
    /// every later run's `race_pages` (schedule 0 included, so that each run
    /// narrowing compares is the same machine up to its deciding step);
    /// when it found none, it is schedule 0 itself.
    fn learn(&mut self) -> Result<Option<(Learned, Recorded)>, CheckError> {
        if !self.learns() {
            return Ok(None);
        }
        let (id, o, events) = self.record(&self.spec.base, &self.spec.limits)?;
        self.race_pages = o.race_pages.clone();
        let learned = Learned {
            run: id.clone(),
            steps: o.steps,
            wall: o.wall,
            pages: o.race_pages.clone(),
        };
        Ok(Some((learned, (id, o, events))))
    }

    /// The first step `bounded` and `pct` perturb: the window's start, or
    /// later where schedule 0 still has one thread. A check from a recorded
    /// run forks at its `from`, whatever came before.
    fn start(&self) -> Option<u64> {
        match (&self.spec.parent, &self.window) {
            (None, Some(w)) => Some(self.spec.from.unwrap_or(0).max(w.from)),
            _ => self.spec.from,
        }
    }

    /// Judges candidates against a run already recorded (how it ended, how
    /// long it took, its steps and events, from which PCT and `bounded` take
    /// their steps as `run` takes them from schedule 0), for trying them one
    /// at a time with `try_one` instead of `run`.
    pub fn with_base(
        mut self,
        status: ExitStatus,
        wall: std::time::Duration,
        steps: u64,
        events: &[Event],
    ) -> Checker<'a> {
        self.base_status = Some(status);
        self.base_wall = wall;
        self.base_steps = steps;
        self.window = Some(window::Window::of(events, steps));
        self.add_sdk(events);
        self
    }

    fn inputs_for(&self, c: &Candidate) -> RunInputs {
        let mut i = self.spec.base.clone();
        if self.learns() {
            i.manifest.race_pages = self.race_pages.clone();
        }
        if let (Some(p), Candidate::Seeded(n) | Candidate::Pct(n, _) | Candidate::Seed(n)) =
            (&self.spec.parent, c)
        {
            let with = match c {
                Candidate::Seeded(_) | Candidate::Pct(..) => ForkWith::Schedule(*n),
                _ => ForkWith::Seed(*n),
            };
            let step = self.spec.from.unwrap_or(0);
            i.manifest = fork_manifest(&p.id, &i.manifest, &p.applied, step, with);
            i.manifest.pct = match c {
                Candidate::Pct(_, d) => Some(self.pct(*d)),
                _ => None,
            };
            return i;
        }
        let m = &mut i.manifest;
        match c {
            Candidate::Seeded(n) | Candidate::Pct(n, _) => {
                m.schedule = *n;
                m.schedule_until = self.spec.until;
                if let Candidate::Pct(_, d) = c {
                    m.schedule_from = self.pct_range().0;
                    m.pct = Some(self.pct(*d));
                } else {
                    m.schedule_from = self.spec.from;
                }
            }
            Candidate::Explicit(p) => {
                m.perturb = p.clone();
            }
            Candidate::Seed(s) => {
                m.reseed = Some((self.spec.from.unwrap_or(0), *s));
            }
        }
        i
    }

    fn warn(&self, w: String) {
        let mut all = self.warnings.lock().unwrap_or_else(|e| e.into_inner());
        if !all.contains(&w) {
            all.push(w);
        }
    }

    /// Records one run into the store and returns it with its events.
    pub fn record(&self, inputs: &RunInputs, limits: &Limits) -> Result<Recorded, CheckError> {
        // A fork of the checked run: from its last keyframe before the fork.
        let start = self.parent_keyframe(inputs)?;
        self.record_from(inputs, limits, start)
    }

    /// `record`, from `start` when given: a keyframe of a run in the store
    /// that is the same machine as `inputs`' up to its step.
    fn record_from(
        &self,
        inputs: &RunInputs,
        limits: &Limits,
        start: Option<(crate::store::Run, Keyframe)>,
    ) -> Result<Recorded, CheckError> {
        let mut rec = self.store.begin(&inputs.manifest, &inputs.stdin)?;
        rec.set_echo(false);
        let outcome = match start {
            Some((run, kf)) => run.run_fork(self.store, Some(&kf), inputs, limits, &mut rec)?,
            None => runner::run(inputs, limits, &mut rec)?,
        };
        for w in rec.take_warnings() {
            self.warn(w.to_string());
        }
        // A run already in the store is not the check's to drop (`Report::made`).
        let (run, created) = rec.finish_created(
            &outcome,
            &RunDetails {
                name: self.spec.name.clone(),
                image: inputs.image.clone(),
                timeout: self.recorded_timeout(limits, outcome.status),
            },
        )?;
        self.claim(&run, created);
        let events = run
            .events()
            .map_err(|e| CheckError::Trace(run.id.clone(), e.to_string()))?;
        Ok((run.id, outcome, events))
    }

    /// Counts `run` as the check's to drop when its recording created it,
    /// or when the check had created it and recorded it again.
    fn claim(&self, run: &crate::store::Run, created: Option<Created>) {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        match created {
            Some(c) => made.push(c),
            None => {
                if let Some(c) = made.iter_mut().find(|c| c.id == run.id) {
                    c.renew(&run.dir);
                }
            }
        }
    }

    fn judge(&self, label: String, id: String, o: &Outcome, events: &[Event]) -> Tried {
        let base_status = self.base_status.unwrap_or(o.status);
        let j = Judged {
            id: &id,
            status: o.status,
            events,
            writers: &o.writers,
            base_status,
            kept: &o.kept,
            base_kept: self.base_kept.as_ref(),
            digest: self.spec.digest.unwrap_or(outputs::blake3_digest),
        };
        let mut violations = Vec::new();
        let mut broken = Vec::new();
        let stopped = property::Stopped {
            status: o.status,
            steps: o.steps,
            by_check: self.spec.limits.timeout.is_none(),
        };
        let cut_off = property::cut_off(&stopped, base_status, self.base_steps);
        for p in self.properties.iter().filter(|_| !cut_off) {
            match p.judge(&j) {
                Verdict::Holds => {}
                Verdict::Violated(why) => violations.push((p.name(), why)),
                Verdict::Broken(why) => broken.push(format!("{why} (run {id})")),
            }
        }
        Tried {
            label,
            id,
            status: o.status,
            steps: o.steps,
            perturbed: o.perturbed.clone(),
            violations,
            broken,
            sometimes: property::sometimes(events),
            wall: o.wall,
            entry: None,
            cut_off,
        }
    }

    /// For a fork of the run a check starts from: that run and its last
    /// keyframe at or before the fork step.
    fn parent_keyframe(
        &self,
        inputs: &RunInputs,
    ) -> Result<Option<(crate::store::Run, Keyframe)>, CheckError> {
        let (Some(p), Some(f)) = (&self.spec.parent, &inputs.manifest.fork_of) else {
            return Ok(None);
        };
        if f.parent != p.id {
            return Ok(None);
        }
        let run = self.store.resolve(&p.id)?;
        // Every candidate forks at the same step: find its keyframe once.
        let kf = match self.parent_keyframe.get() {
            Some(k) => k.clone(),
            None => {
                let usable = run.usable_keyframe(self.store, f.step);
                if let Some(w) = usable.warning {
                    self.warn(w.to_string());
                }
                let k = usable.keyframe.map(|(k, _)| k);
                self.parent_keyframe.get_or_init(|| k).clone()
            }
        };
        Ok(kf.map(|k| (run, k)))
    }

    /// The limits of every run after schedule 0: without `--timeout`, a
    /// perturbed schedule that spins forever (a thread that never makes a
    /// system call is never preempted) would hang the check, so it ends
    /// `timed-out` after `SPIN_FACTOR` times schedule 0's wall time (at
    /// least `SPIN_FLOOR`), and is judged like any run.
    pub(crate) fn candidate_limits(&self) -> Limits {
        let mut l = self.spec.limits.clone();
        if l.timeout.is_none() {
            l.timeout = Some((self.base_wall * SPIN_FACTOR).max(SPIN_FLOOR));
        }
        l
    }

    /// The timeout a run of the check is kept with (what `rewind show`'s
    /// command to make it again says): the user's, unless the spin limit
    /// of `limits` ended it. The spin limit is drawn from schedule 0's wall
    /// time, so a report that named it for every run would differ from
    /// machine to machine, and from a merge of shards.
    pub(crate) fn recorded_timeout(
        &self,
        limits: &Limits,
        status: ExitStatus,
    ) -> Option<std::time::Duration> {
        match status {
            ExitStatus::TimedOut => limits.timeout,
            _ => self.spec.limits.timeout,
        }
    }

    /// Records schedule 0 and learns from it what the schedules after it
    /// need (its status, wall time, steps, window, whether it uses the
    /// SDK); returns it judged, called `label`. With `--points races` a
    /// learning run comes first (`learn`), and schedule 0 traps its pages.
    fn schedule0(&mut self, label: &str) -> Result<Tried, CheckError> {
        let limits = self.spec.limits.clone();
        self.schedule0_within(label, &limits)
    }

    /// `schedule0` within `limits` (a portfolio's widening schedule 0 ends
    /// with its budget).
    fn schedule0_within(&mut self, label: &str, limits: &Limits) -> Result<Tried, CheckError> {
        let learned = self.learn()?;
        let (learned, (id, o, events)) = match learned {
            Some((l, recorded)) if l.pages.is_empty() => (Some(l), recorded),
            l => {
                let base_inputs = self.inputs_for(&Candidate::Explicit(Vec::new()));
                let learned = l.map(|l| l.0);
                (learned, self.record(&base_inputs, limits)?)
            }
        };
        self.learned = learned;
        self.base_status = Some(o.status);
        self.base_wall = o.wall;
        self.base_steps = o.steps;
        self.base_kept = Some(o.kept.clone());
        self.base_run = Some(id.clone());
        self.window = Some(window::Window::of(&events, o.steps));
        self.add_sdk(&events);
        Ok(self.judge(label.into(), id, &o, &events))
    }

    /// Checks the SDK's property too when schedule 0 uses the SDK.
    fn add_sdk(&mut self, events: &[Event]) {
        if property::uses_sdk(events) && !self.properties.contains(&Property::Sdk) {
            self.properties.push(Property::Sdk);
        }
    }

    /// The schedules to try after schedule 0 (none when it violates and
    /// the check stops at the first violation), and the bound of a bounded search.
    fn plan(&self, base: &Tried) -> (Vec<Candidate>, Option<u32>) {
        if base.violated() && !self.spec.all {
            (Vec::new(), None)
        } else {
            self.candidates(self.base_steps)
        }
    }

    /// The whole check: the portfolio's when the spec has one.
    pub fn run(mut self, progress: &mut dyn Progress) -> Result<Report, CheckError> {
        if self.learns() {
            progress.phase("learning where races can be");
        }
        if !self.spec.portfolio.is_empty() {
            return portfolio::run(self.spec, self.store, progress);
        }
        let deadline = self.spec.budget.map(|b| std::time::Instant::now() + b);
        progress.phase("schedule 0");
        let base = self.schedule0("schedule   0")?;
        progress.tried(&base, 0, 0);
        let (candidates, bound) = self.plan(&base);
        progress.phase("schedules");
        let all = self.spec.all;
        let stop = |t: &Tried| !all && t.violated();
        let one = |i: usize| self.try_one(&candidates[i]);
        let (tried, late) = jobs::try_each(
            candidates.len(),
            self.spec.jobs,
            deadline,
            progress,
            &stop,
            &one,
        )?;
        let total = candidates.len();
        let mut report = self.report(base, tried, bound.filter(|_| !late), total);
        report.out_of_budget =
            late.then(|| jobs::out_of_budget(self.spec, report.tried.len(), total as u64));
        self.finish(report, progress)
    }

    /// The report of schedule 0 and the schedules tried after it, out of
    /// `total` planned, before narrowing.
    fn report(&self, base: Tried, tried: Vec<Tried>, bound: Option<u32>, total: usize) -> Report {
        let exhausted = bound
            .filter(|_| !tried.iter().any(|t| t.violated()))
            .map(|k| {
                let (_, steps) = self.bounded_steps(self.base_steps);
                let what = if k == 1 { "1 reschedule" } else { "1 or 2 reschedules" };
                format!(
                    "every schedule with {what} {steps} was tried ({total}); none violates a property"
                )
            });
        let mut report = Report {
            base: base.clone(),
            bases: vec![base],
            tried,
            exhausted,
            out_of_budget: None,
            made: Vec::new(),
            narrowed: None,
            properties: self.properties.clone(),
            never_held: Vec::new(),
            warnings: Vec::new(),
            learned: self.learned.clone(),
        };
        report.never_held = never_held(&report);
        report
    }

    /// Narrows the report's first violation (unless a schedule 0 is it: no
    /// perturbation to narrow) and hands over what the store went on
    /// without and the runs recorded.
    fn finish(
        &self,
        mut report: Report,
        progress: &mut dyn Progress,
    ) -> Result<Report, CheckError> {
        if self.spec.narrow && !report.bases.iter().any(|b| b.violated()) {
            if let Some(bad) = report.first_violation().cloned() {
                if progress.stopped() {
                    return Err(CheckError::Stopped);
                }
                progress.phase("narrowing");
                report.narrowed = Some(narrow::narrow(self, &bad, &report.bases)?);
            }
        }
        self.hand_over(&mut report);
        Ok(report)
    }

    /// Adds what the store went on without and the runs recorded to the report.
    fn hand_over(&self, r: &mut Report) {
        for w in std::mem::take(&mut *self.warnings.lock().unwrap_or_else(|e| e.into_inner())) {
            if !r.warnings.contains(&w) {
                r.warnings.push(w);
            }
        }
        r.made.extend(self.take_made());
    }

    /// The runs recorded since the last call (`Report::made`).
    pub(super) fn take_made(&self) -> Vec<Created> {
        std::mem::take(&mut *self.made.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The SDK's `sometimes` messages that held in no run of the report.
fn never_held(r: &Report) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if !r.properties.contains(&Property::Sdk) {
        return out;
    }
    let runs = || r.runs();
    for t in runs() {
        for (m, _) in &t.sometimes {
            let held = runs().any(|t| t.sometimes.iter().any(|(m2, h)| m2 == m && *h));
            if !held && !out.contains(m) {
                out.push(m.clone());
            }
        }
    }
    out
}
