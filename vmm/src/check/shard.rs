//! Shards: one check's schedules dealt out to N machines (`--shard I/N`),
//! each writing one record per schedule into a directory, for the merge
//! (`merge.rs`) to read back into the report the check gives on one machine.
//!
//! The plan is the check's own, a function of its schedule 0s, which every
//! shard records: one for a pinned search (`Checker::plan`), one per points
//! for the default portfolio (`portfolio::plan`, its `--schedules` count:
//! a time budget ends at a different schedule on every machine, so a
//! sharded check has none). Candidate k (0-based, in check order) is shard
//! `k % N + 1`'s, so every shard's share spans the whole order, and a check
//! that stops at its first violation runs about as far on each. A shard
//! stops at its own first violation: its later candidates come after it in
//! check order, so the one-machine report never needs them.
//!
//! Each record is written to a temporary name and renamed, so a shard killed
//! at any point leaves whole records only; a violating run's replayable
//! `.rwd` is renamed into place before the record that names it.

use super::portfolio::{self, Planned};
use super::{jobs, Candidate, CheckError, CheckSpec, Checker, Entry, Parent, Progress, Strategy};
use super::{Report, Tried};
use crate::run::{ExitStatus, Perturbed, Points};
use crate::run::{Limits, RunInputs};
use crate::store::Store;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The version of the records' format.
pub const VERSION: u32 = 2;

#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error(transparent)]
    Check(#[from] CheckError),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Records that cannot be merged, and why.
    #[error("{0}")]
    Refused(String),
}

impl From<crate::store::StoreError> for ShardError {
    fn from(e: crate::store::StoreError) -> ShardError {
        ShardError::Check(CheckError::Store(e))
    }
}

/// Shard `index` (from 1) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 || index == 0 || index > count {
            return Err(format!(
                "shard {index}/{count}: a shard is I/N with 1 <= I <= N"
            ));
        }
        Ok(Shard { index, count })
    }

    /// `I/N`, I from 1.
    pub fn parse(s: &str) -> Result<Shard, String> {
        let bad = || format!("--shard {s}: expected I/N, e.g. 2/7 (I from 1 to N)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let i = i.trim().parse().map_err(|_| bad())?;
        let n = n.trim().parse().map_err(|_| bad())?;
        Shard::new(i, n)
    }

    /// The shard that runs candidate `k` (0-based, in check order).
    pub fn of(k: usize, count: u32) -> u32 {
        (k as u64 % u64::from(count.max(1))) as u32 + 1
    }

    /// Whether candidate `k` is this shard's.
    pub fn deals(&self, k: usize) -> bool {
        Shard::of(k, self.count) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What a check is, besides schedule 0's inputs (which its run id names):
/// everything its plan and its report depend on, and nothing they do not
/// (`--jobs`). Its hash names the check in every record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Described {
    /// Schedule 0's run id: a hash of its manifest (program, image,
    /// arguments, standard input, points, seed...).
    pub base: String,
    pub name: String,
    pub timeout: Option<Duration>,
    pub schedules: u64,
    pub all: bool,
    pub narrow: bool,
    pub properties: Vec<String>,
    pub strategy: String,
    pub depth: u32,
    pub check_seed: u64,
    pub from: Option<u64>,
    pub until: Option<u64>,
    pub want_where: bool,
    pub parent: Option<(String, Vec<Perturbed>)>,
    /// The default portfolio's entries: strategy, depth, points (none when
    /// the search is pinned).
    pub portfolio: Vec<(String, u32, Points)>,
}

fn strategy_name(s: Strategy) -> &'static str {
    Entry {
        strategy: s,
        depth: 0,
        points: Points::Syscalls,
    }
    .strategy_name()
}

fn strategy_of(name: &str) -> Result<Strategy, ShardError> {
    use Strategy::*;
    Ok(match name {
        "random" => Random,
        "pct" => Pct,
        "bounded" => Bounded,
        "seeds" => Seeds,
        s => {
            return Err(ShardError::Refused(format!(
                "a shard record names an unknown strategy `{s}`"
            )))
        }
    })
}

impl Described {
    pub fn of(spec: &CheckSpec) -> Described {
        Described {
            base: spec.base.manifest.id(),
            name: spec.name.clone(),
            timeout: spec.limits.timeout,
            schedules: spec.schedules,
            all: spec.all,
            narrow: spec.narrow,
            properties: spec.properties.iter().map(|p| p.name()).collect(),
            strategy: strategy_name(spec.strategy).into(),
            depth: spec.depth,
            check_seed: spec.check_seed,
            from: spec.from,
            until: spec.until,
            want_where: spec.want_where,
            parent: spec
                .parent
                .as_ref()
                .map(|p| (p.id.clone(), p.applied.clone())),
            portfolio: spec
                .portfolio
                .iter()
                .map(|e| (e.strategy_name().to_string(), e.depth, e.points))
                .collect(),
        }
    }

    /// The check's hash: the same for the same inputs on any machine.
    pub fn hash(&self) -> String {
        let json = serde_json::to_vec(self).expect("a description serializes");
        blake3::hash(&json).to_hex()[..16].to_string()
    }

    /// The check it describes, with schedule 0's `base` inputs, on `jobs` threads.
    pub fn spec(&self, base: RunInputs, jobs: usize) -> Result<CheckSpec, ShardError> {
        let bad = |what: String| ShardError::Refused(format!("a shard record {what}"));
        let strategy = strategy_of(&self.strategy)?;
        let portfolio = self
            .portfolio
            .iter()
            .map(|(s, depth, points)| {
                Ok(Entry {
                    strategy: strategy_of(s)?,
                    depth: *depth,
                    points: *points,
                })
            })
            .collect::<Result<Vec<_>, ShardError>>()?;
        let properties = self
            .properties
            .iter()
            .map(|p| super::property::Property::parse(p, None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("names a property this rewind cannot read: {e}")))?;
        Ok(CheckSpec {
            base,
            name: self.name.clone(),
            limits: Limits {
                timeout: self.timeout,
                ..Default::default()
            },
            schedules: self.schedules,
            all: self.all,
            jobs,
            narrow: self.narrow,
            properties,
            strategy,
            depth: self.depth,
            check_seed: self.check_seed,
            from: self.from,
            until: self.until,
            want_where: self.want_where,
            parent: self
                .parent
                .clone()
                .map(|(id, applied)| Parent { id, applied }),
            portfolio,
            budget: None,
            digest: None,
        })
    }
}

/// One schedule a shard ran: `schedule-N.json` (N 0 for schedule 0, k+1
/// for candidate k).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub version: u32,
    /// The check's hash (`Described::hash`).
    pub check: String,
    pub shard: u32,
    pub shards: u32,
    pub index: u64,
    /// For schedule 0 (index 0): which one, 0 for the check's own points, m
    /// for the portfolio's m-th other points (`base-M.json`).
    #[serde(default)]
    pub base: u32,
    pub label: String,
    pub run: String,
    pub status: ExitStatus,
    pub steps: u64,
    pub perturbed: Vec<Perturbed>,
    pub violations: Vec<(String, String)>,
    pub broken: Vec<String>,
    pub sometimes: Vec<(String, bool)>,
    pub duration: Duration,
    /// The replayable export of a violating run (and of schedule 0), a
    /// file name in the same directory.
    pub rwd: Option<String>,
    /// Schedule 0's record says what the check is...
    pub described: Option<Described>,
    /// ...and what its learning run learned (race-directed points).
    #[serde(default)]
    pub learned: Option<super::Learned>,
}

impl Record {
    pub fn tried(&self) -> Tried {
        Tried {
            label: self.label.clone(),
            id: self.run.clone(),
            status: self.status,
            steps: self.steps,
            perturbed: self.perturbed.clone(),
            violations: self.violations.clone(),
            broken: self.broken.clone(),
            sometimes: self.sometimes.clone(),
            wall: self.duration,
            entry: None,
            cut_off: false,
        }
    }
}

/// What a shard did: `shard-I-of-N.json`, written when it ends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finished {
    pub version: u32,
    pub check: String,
    pub shard: u32,
    pub shards: u32,
    /// Its share of the plan...
    pub planned: u64,
    /// ...and how many of them it ran.
    pub tried: u64,
    /// Whether it stopped at a violation (the rest of its share is not needed).
    pub stopped: bool,
}

/// Where a record goes: schedule 0 on the check's points (0) or on a
/// portfolio's other points (from 1), or the check's schedule N (from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    Base(u32),
    Schedule(u64),
}

impl At {
    /// The file name of its record, without `.json` (or `.rwd`).
    pub fn stem(self) -> String {
        match self {
            At::Base(0) => "schedule-000000".into(),
            At::Base(m) => format!("base-{m}"),
            At::Schedule(i) => format!("schedule-{i:06}"),
        }
    }
}

pub fn record_name(index: u64) -> String {
    format!("{}.json", At::Schedule(index).stem())
}

pub fn finished_name(shard: Shard) -> String {
    format!("shard-{}-of-{}.json", shard.index, shard.count)
}

/// A name nobody else writing into the same (perhaps shared) directory uses.
fn temp_name(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(".{name}.{}-{nanos}.tmp", std::process::id())
}

/// Writes `bytes` to `dir/name` whole or not at all.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ShardError> {
    let tmp = dir.join(temp_name(name));
    let path = dir.join(name);
    let w = |e| ShardError::Write {
        path: path.clone(),
        source: e,
    };
    std::fs::write(&tmp, bytes).map_err(w)?;
    std::fs::rename(&tmp, &path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        w(e)
    })
}

/// Exports run `id` replayable to `dir/name`, renamed into place whole.
pub fn export_atomic(store: &Store, id: &str, dir: &Path, name: &str) -> Result<(), ShardError> {
    let run = store.resolve(id)?;
    let tmp = dir.join(temp_name(name));
    store.export(&run, true, &tmp)?;
    std::fs::rename(&tmp, dir.join(name)).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ShardError::Write {
            path: dir.join(name),
            source: e,
        }
    })
}

/// Where a shard writes, and what it writes each record with.
struct Writer<'a> {
    store: &'a Store,
    dir: &'a Path,
    shard: Shard,
    check: String,
}

impl Writer<'_> {
    fn write(
        &self,
        at: At,
        t: &Tried,
        described: Option<(Described, Option<super::Learned>)>,
    ) -> Result<(), ShardError> {
        let (described, learned) = described.unzip();
        let (index, base) = match at {
            At::Base(m) => (0, m),
            At::Schedule(i) => (i, 0),
        };
        let rwd = (t.violated() || index == 0).then(|| format!("{}.rwd", at.stem()));
        if let Some(name) = &rwd {
            export_atomic(self.store, &t.id, self.dir, name)?;
        }
        let r = Record {
            version: VERSION,
            check: self.check.clone(),
            shard: self.shard.index,
            shards: self.shard.count,
            index,
            base,
            label: t.label.clone(),
            run: t.id.clone(),
            status: t.status,
            steps: t.steps,
            perturbed: t.perturbed.clone(),
            violations: t.violations.clone(),
            broken: t.broken.clone(),
            sometimes: t.sometimes.clone(),
            duration: t.wall,
            rwd,
            described,
            learned: learned.flatten(),
        };
        let json = serde_json::to_vec_pretty(&r).expect("a record serializes");
        write_atomic(self.dir, &format!("{}.json", at.stem()), &json)
    }
}

/// Passes a shard's runs on to the front end's progress and writes each
/// one's record as it comes (in check order, from one thread at a time).
struct Recording<'a, 'p> {
    writer: &'a Writer<'a>,
    /// The shard's candidates' indices in the plan.
    mine: &'a [usize],
    inner: &'p mut dyn Progress,
    error: Option<ShardError>,
}

impl Progress for Recording<'_, '_> {
    fn phase(&mut self, what: &str) {
        self.inner.phase(what);
    }

    fn tried(&mut self, t: &Tried, done: u64, total: u64) {
        let k = self.mine[done as usize - 1];
        if self.error.is_none() {
            self.error = self.writer.write(At::Schedule(k as u64 + 1), t, None).err();
        }
        self.inner.tried(t, done, total);
    }
}

/// What a shard ran.
pub struct ShardRun {
    /// Its schedule 0s (one per points a portfolio uses).
    pub bases: Vec<Tried>,
    /// The shard's runs, in check order.
    pub tried: Vec<Tried>,
    /// The whole plan's length and this shard's share of it.
    pub planned: usize,
    pub share: usize,
    /// Every run the shard put in the store (`Report::made`).
    pub made: Vec<crate::store::Created>,
}

impl ShardRun {
    /// Whether any run of the shard (schedule 0 included) violates a property.
    pub fn violated(&self) -> bool {
        self.bases.iter().chain(&self.tried).any(|t| t.violated())
    }

    /// The runs a check keeps of those the shard made: its schedule 0s and
    /// its violating runs, whose `.rwd` its directory holds too (the
    /// narrowed pair is the merge's). The others are its passing schedules'.
    pub fn kept(&self) -> std::collections::BTreeSet<&str> {
        let violating = self.tried.iter().filter(|t| t.violated());
        self.bases
            .iter()
            .chain(violating)
            .map(|t| t.id.as_str())
            .collect()
    }
}

/// Refuses a directory that holds another check's records.
fn same_check(dir: &Path, check: &str) -> Result<(), ShardError> {
    let Ok(bytes) = std::fs::read(dir.join(record_name(0))) else {
        return Ok(());
    };
    match serde_json::from_slice::<Record>(&bytes) {
        Ok(r) if r.check == check => Ok(()),
        _ => Err(ShardError::Refused(format!(
            "{} holds the records of another check (other inputs): give each check its own --results directory",
            dir.display()
        ))),
    }
}

/// Whether `dir` holds a violating schedule before `index` (another
/// shard's, when shards share the directory: `same_check` made sure it is
/// this check's): this shard's schedules after `index` are then not needed.
/// A violating schedule's `.rwd` is there before its record.
fn violation_before(dir: &Path, index: u64) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.filter_map(|e| e.ok()).any(|e| {
        let name = e.file_name();
        let n = name.to_string_lossy();
        n.strip_prefix("schedule-")
            .and_then(|n| n.strip_suffix(".rwd"))
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|i| (1..index).contains(&i))
    })
}

/// The checks a check's schedule 0s are recorded with: the check itself
/// when its search is pinned, one per points for a portfolio; and those points.
pub(super) fn mode_specs(spec: &CheckSpec) -> (Vec<Points>, Vec<CheckSpec>) {
    if spec.portfolio.is_empty() {
        return (vec![spec.base.manifest.points], vec![spec.clone()]);
    }
    let modes = portfolio::modes(spec);
    let specs = portfolio::mode_specs(spec, &modes);
    (modes, specs)
}

/// What a check tries after its schedule 0s, in order: each schedule with
/// the schedule 0 it perturbs and, in a portfolio, the entry it comes
/// from; and the bound of a pinned bounded search.
pub(super) struct Plan {
    pub steps: Vec<(usize, Candidate, Option<Entry>)>,
    pub bound: Option<u32>,
}

impl Plan {
    /// The plan of `spec` (`mode_specs`), from its schedule 0s.
    pub(super) fn of(
        spec: &CheckSpec,
        modes: &[Points],
        checkers: &[Checker],
        bases: &[Tried],
    ) -> Plan {
        if spec.portfolio.is_empty() {
            let (cands, bound) = checkers[0].plan(&bases[0]);
            let steps = cands.into_iter().map(|c| (0, c, None)).collect();
            return Plan { steps, bound };
        }
        let planned = portfolio::plan_after(spec, modes, checkers, bases, true);
        let steps = planned
            .into_iter()
            .map(|(m, c, e)| (m, c, Some(e)))
            .collect();
        Plan { steps, bound: None }
    }

    /// Schedule `k`'s label, as its run's report line says it.
    pub(super) fn label(&self, k: usize) -> String {
        match &self.steps[k] {
            (_, c, Some(e)) => portfolio::planned_label(c, e),
            (_, c, None) => c.label(),
        }
    }

    /// Runs schedule `k` and judges it.
    pub(super) fn try_one(&self, checkers: &[Checker], k: usize) -> Result<Tried, CheckError> {
        match &self.steps[k] {
            (m, c, Some(e)) => portfolio::try_planned(checkers, &(*m, c.clone(), *e) as &Planned),
            (m, c, None) => checkers[*m].try_one(c),
        }
    }

    /// The report of the schedule 0s and the schedules tried, narrowed:
    /// the one-machine check's.
    pub(super) fn report(
        &self,
        spec: &CheckSpec,
        modes: &[Points],
        checkers: &[Checker],
        bases: Vec<Tried>,
        tried: Vec<Tried>,
        progress: &mut dyn Progress,
    ) -> Result<Report, CheckError> {
        if !spec.portfolio.is_empty() {
            return portfolio::report(spec, modes, checkers, bases, tried, None, progress);
        }
        let base = bases.into_iter().next().expect("a check has a schedule 0");
        let report = checkers[0].report(base, tried, self.bound, self.steps.len());
        checkers[0].finish(report, progress)
    }
}

/// Runs shard `shard` of the check: its schedule 0s (every shard needs
/// them to plan), then its share of the check's candidates, a record each
/// into `dir`.
pub fn run_shard(
    spec: &CheckSpec,
    store: &Store,
    shard: Shard,
    dir: &Path,
    progress: &mut dyn Progress,
) -> Result<ShardRun, ShardError> {
    std::fs::create_dir_all(dir).map_err(|e| ShardError::Write {
        path: dir.to_path_buf(),
        source: e,
    })?;
    let described = Described::of(spec);
    let check = described.hash();
    same_check(dir, &check)?;
    let writer = Writer {
        store,
        dir,
        shard,
        check: check.clone(),
    };
    let (modes, specs) = mode_specs(spec);
    let mut checkers: Vec<Checker> = specs.iter().map(|s| Checker::new(s, store)).collect();
    progress.phase("schedule 0");
    let mut bases = Vec::new();
    for (m, c) in checkers.iter_mut().enumerate() {
        let base = c.schedule0(&portfolio::base_label(&modes, m))?;
        let described = (m == 0).then(|| (described.clone(), c.learned.clone()));
        writer.write(At::Base(m as u32), &base, described)?;
        progress.tried(&base, 0, 0);
        bases.push(base);
    }
    let plan = Plan::of(spec, &modes, &checkers, &bases);
    let mine: Vec<usize> = (0..plan.steps.len()).filter(|k| shard.deals(*k)).collect();
    progress.phase("schedules");
    let mut rec = Recording {
        writer: &writer,
        mine: &mine,
        inner: progress,
        error: None,
    };
    // Labels name candidates (the first of any two alike, to stay safe).
    let mut index_of = std::collections::HashMap::new();
    for &k in mine.iter().rev() {
        index_of.insert(plan.label(k), k as u64 + 1);
    }
    let all = spec.all;
    let stop = |t: &Tried| {
        !all && (t.violated()
            || index_of
                .get(&t.label)
                .is_some_and(|&i| violation_before(dir, i)))
    };
    let one = |i: usize| plan.try_one(&checkers, mine[i]);
    let (tried, _) = jobs::try_each(mine.len(), spec.jobs, None, &mut rec, &stop, &one)?;
    if let Some(e) = rec.error {
        return Err(e);
    }
    let done = Finished {
        version: VERSION,
        check,
        shard: shard.index,
        shards: shard.count,
        planned: mine.len() as u64,
        tried: tried.len() as u64,
        stopped: tried.len() < mine.len(),
    };
    let json = serde_json::to_vec_pretty(&done).expect("a shard's summary serializes");
    write_atomic(dir, &finished_name(shard), &json)?;
    Ok(ShardRun {
        bases,
        tried,
        planned: plan.steps.len(),
        share: mine.len(),
        made: checkers.iter().flat_map(|c| c.take_made()).collect(),
    })
}
