//! The merge of a sharded check (`rewind check --merge DIR...`): the shards'
//! records read back in check order into the report the check gives on one
//! machine, its first violation imported and narrowed here.
//!
//! Nothing the shards were to run is run here: the plan is rebuilt from
//! the schedule 0s (imported from their `.rwd`s, as every shard recorded
//! them), each
//! candidate up to the first violation must have a record, and when one has
//! none the merge says which shards are missing or incomplete and stops.

use super::shard::{mode_specs, At, Described, Finished, Plan, Record, Shard, ShardError, VERSION};
use super::{CheckSpec, Checker, Progress, Report, Tried};
use crate::run::{Event, Points};
use crate::store::archive::ArchiveError;
use crate::store::{Run, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The records of every directory, by index.
#[derive(Default)]
struct Shelf {
    /// The check's hash and the directory it was first read from.
    check: Option<(String, PathBuf)>,
    shards: Option<u32>,
    /// Schedule 0s, by which (`At::Base`).
    bases: BTreeMap<u32, (Record, PathBuf)>,
    /// The check's schedules, by index from 1.
    records: BTreeMap<u64, (Record, PathBuf)>,
    finished: BTreeMap<u32, Finished>,
    /// Shards that left at least one record of a candidate.
    seen: BTreeMap<u32, u64>,
}

fn refused(what: String) -> ShardError {
    ShardError::Refused(what)
}

/// `schedule-000012.json` (12), `base-1.json`, `shard-2-of-7.json`.
enum Named {
    Record(At),
    Finished,
}

fn named(name: &str) -> Option<Named> {
    let stem = name.strip_suffix(".json")?;
    if let Some(n) = stem.strip_prefix("schedule-") {
        let at = |i| match i {
            0 => At::Base(0),
            i => At::Schedule(i),
        };
        return n.parse().ok().map(|i| Named::Record(at(i)));
    }
    if let Some(m) = stem.strip_prefix("base-") {
        return m.parse().ok().map(|m| Named::Record(At::Base(m)));
    }
    let (i, n) = stem.strip_prefix("shard-")?.split_once("-of-")?;
    (i.parse::<u32>().is_ok() && n.parse::<u32>().is_ok()).then_some(Named::Finished)
}

/// How far the shards writing into some directories are (`--merge --watch`).
#[derive(Debug, Default)]
pub struct Watch {
    pub shards: Option<u32>,
    /// Schedules recorded by each shard, schedule 0 aside.
    pub done: BTreeMap<u32, u64>,
    pub finished: BTreeSet<u32>,
    /// Violating schedules recorded so far.
    pub violating: u64,
}

impl Watch {
    /// Whether every shard has ended.
    pub fn over(&self) -> bool {
        self.shards
            .is_some_and(|n| (1..=n).all(|s| self.finished.contains(&s)))
    }

    /// The unfinished shard that has recorded the fewest schedules.
    pub fn slowest(&self) -> Option<(u32, u64)> {
        let n = self.shards?;
        (1..=n)
            .filter(|s| !self.finished.contains(s))
            .map(|s| (s, self.done.get(&s).copied().unwrap_or(0)))
            .min_by_key(|(_, d)| *d)
    }
}

/// Reads how far the shards are; directories with no records yet count as
/// shards not started.
pub fn watch(dirs: &[PathBuf]) -> Result<Watch, ShardError> {
    let mut shelf = Shelf::default();
    for dir in dirs {
        shelf.read_dir(dir)?;
    }
    Ok(Watch {
        shards: shelf.shards,
        violating: shelf
            .records
            .iter()
            .filter(|(_, (r, _))| !r.violations.is_empty())
            .count() as u64,
        done: shelf.seen,
        finished: shelf.finished.into_keys().collect(),
    })
}

impl Shelf {
    /// Reads one directory's records; how many it held.
    fn read_dir(&mut self, dir: &Path) -> Result<usize, ShardError> {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| refused(format!("cannot read {}: {e}", dir.display())))?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let before = self.count();
        for name in names {
            if let Some(n) = named(&name) {
                self.add(dir, &name, n)?;
            }
        }
        Ok(self.count() - before)
    }

    fn count(&self) -> usize {
        self.bases.len() + self.records.len() + self.finished.len()
    }

    fn read(dirs: &[PathBuf]) -> Result<Shelf, ShardError> {
        let mut shelf = Shelf::default();
        for dir in dirs {
            if shelf.read_dir(dir)? == 0 {
                return Err(refused(format!(
                    "{} holds no shard records (`rewind check --shard I/N --results DIR` writes them)",
                    dir.display()
                )));
            }
        }
        Ok(shelf)
    }

    fn add(&mut self, dir: &Path, name: &str, n: Named) -> Result<(), ShardError> {
        let path = dir.join(name);
        let bytes = std::fs::read(&path)
            .map_err(|e| refused(format!("cannot read {}: {e}", path.display())))?;
        let bad = |e: serde_json::Error| {
            refused(format!("{} is not a shard record: {e}", path.display()))
        };
        match n {
            Named::Record(at) => {
                let r: Record = serde_json::from_slice(&bytes).map_err(bad)?;
                let (index, base) = match at {
                    At::Base(m) => (0, m),
                    At::Schedule(i) => (i, 0),
                };
                if (r.index, r.base) != (index, base) {
                    return Err(refused(format!(
                        "{} is the record of schedule {} (of schedule 0s, {}), not {index} ({base})",
                        path.display(),
                        r.index,
                        r.base
                    )));
                }
                self.same(dir, r.version, &r.check, r.shard, r.shards)?;
                match at {
                    At::Base(m) => put(&mut self.bases, m, dir, r),
                    At::Schedule(i) => {
                        *self.seen.entry(r.shard).or_default() += 1;
                        put(&mut self.records, i, dir, r)
                    }
                }
            }
            Named::Finished => {
                let f: Finished = serde_json::from_slice(&bytes).map_err(bad)?;
                self.same(dir, f.version, &f.check, f.shard, f.shards)?;
                self.finished.insert(f.shard, f);
                Ok(())
            }
        }
    }

    /// Refuses a record of another check, or of another split of this one.
    fn same(
        &mut self,
        dir: &Path,
        version: u32,
        check: &str,
        shard: u32,
        shards: u32,
    ) -> Result<(), ShardError> {
        if version != VERSION {
            return Err(refused(format!(
                "{} holds shard records of format {version}; this rewind reads format {VERSION}",
                dir.display()
            )));
        }
        Shard::new(shard, shards)
            .map_err(|e| refused(format!("{}: a record of {e}", dir.display())))?;
        match &self.check {
            Some((c, first)) if c != check => {
                return Err(refused(format!(
                    "{} and {} hold the records of two different checks (other inputs); nothing was merged",
                    first.display(),
                    dir.display()
                )))
            }
            Some(_) => {}
            None => self.check = Some((check.to_string(), dir.to_path_buf())),
        }
        match self.shards {
            Some(n) if n != shards => Err(refused(format!(
                "{} holds records of a split into {shards} shards, others of a split into {n}: merge the shards of one split",
                dir.display()
            ))),
            _ => {
                self.shards = Some(shards);
                Ok(())
            }
        }
    }

    /// What shard `s` left, for a message.
    fn state(&self, s: u32) -> String {
        match (self.finished.get(&s), self.seen.get(&s)) {
            (Some(_), _) => "lost records it wrote".into(),
            (None, Some(n)) => format!("incomplete ({n} records, it did not finish)"),
            (None, None) => "missing (no records)".into(),
        }
    }
}

/// Keeps a record; one already read for the same schedule must agree.
fn put<K: Ord>(
    map: &mut BTreeMap<K, (Record, PathBuf)>,
    key: K,
    dir: &Path,
    r: Record,
) -> Result<(), ShardError> {
    if let Some((old, _)) = map.get(&key) {
        if (&old.run, &old.status, &old.violations) != (&r.run, &r.status, &r.violations) {
            return Err(refused(format!(
                "two records of schedule {} disagree (runs {} and {}); nothing was merged",
                r.index, old.run, r.run
            )));
        }
        if old.rwd.is_some() || r.rwd.is_none() {
            return Ok(());
        }
    }
    map.insert(key, (r, dir.to_path_buf()));
    Ok(())
}

/// A sharded check ready to merge: its spec and its schedule 0s.
pub struct Prepared {
    pub spec: CheckSpec,
    /// The points of each schedule 0, and the check each is recorded with.
    modes: Vec<Points>,
    specs: Vec<CheckSpec>,
    /// Each schedule 0: its record, its run here and the run's events.
    bases: Vec<(Tried, Run, Vec<Event>)>,
    shelf: Shelf,
}

/// Imports the run a record's `.rwd` carries.
fn import(store: &Store, dir: &Path, r: &Record) -> Result<Run, ShardError> {
    let Some(name) = &r.rwd else {
        return Err(refused(format!(
            "the record of schedule {} in {} names no .rwd",
            r.index,
            dir.display()
        )));
    };
    if name.contains('/') || name.starts_with('.') {
        return Err(refused(format!(
            "the record of schedule {} in {} names `{name}`, not a file of its directory",
            r.index,
            dir.display()
        )));
    }
    let file = dir.join(name);
    let s = store.import(&file).map_err(|e| match e {
        ArchiveError::Refused(why) => refused(format!("cannot import {}: {why}", file.display())),
        ArchiveError::Store(e) => e.into(),
    })?;
    if s.run.id != r.run {
        return Err(refused(format!(
            "{} holds run {}, not run {} as its record says",
            file.display(),
            s.run.id,
            r.run
        )));
    }
    Ok(s.run)
}

/// Reads the directories and imports the schedule 0s: the check they merge.
pub fn prepare(dirs: &[PathBuf], store: &Store, jobs: usize) -> Result<Prepared, ShardError> {
    let shelf = Shelf::read(dirs)?;
    let Some((base, dir)) = shelf.bases.get(&0) else {
        return Err(refused(
            "no directory holds schedule 0's record: every shard writes it first, so no shard got that far"
                .into(),
        ));
    };
    let described: &Described = base.described.as_ref().ok_or_else(|| {
        refused(format!(
            "schedule 0's record in {} does not say what the check is",
            dir.display()
        ))
    })?;
    if Some(&described.hash()) != shelf.check.as_ref().map(|c| &c.0) {
        return Err(refused(format!(
            "schedule 0's record in {} does not match its check",
            dir.display()
        )));
    }
    // Records are files anyone may have written: a merge runs no program they name.
    if let Some(p) = described
        .properties
        .iter()
        .find(|p| p.starts_with("script="))
    {
        return Err(refused(format!(
            "the shards' check has the property {p}: a merge does not run a script that records name; check on one machine instead"
        )));
    }
    let run = import(store, dir, base)?;
    let spec = described.spec(run.inputs()?, jobs)?;
    let (modes, specs) = mode_specs(&spec);
    let mut bases = Vec::new();
    for (m, s) in specs.iter().enumerate() {
        let Some((r, dir)) = shelf.bases.get(&(m as u32)) else {
            return Err(refused(format!(
                "no directory holds the record of schedule 0 with {} points: every shard writes it before its schedules, so no shard got that far",
                modes[m]
            )));
        };
        // The schedule 0 the check's inputs make, and no other.
        if r.run != s.base.manifest.id() {
            return Err(refused(format!(
                "the record of schedule 0 with {} points in {} names run {}, where the check's inputs make run {}",
                modes[m],
                dir.display(),
                r.run,
                s.base.manifest.id()
            )));
        }
        // Schedule 0 with the first points is the run imported above.
        let run = if m == 0 {
            run.clone()
        } else {
            import(store, dir, r)?
        };
        let events = run
            .events()
            .map_err(|e| super::CheckError::Trace(run.id.clone(), e.to_string()))?;
        bases.push((r.tried(), run, events));
    }
    Ok(Prepared {
        spec,
        modes,
        specs,
        bases,
        shelf,
    })
}

/// A merged check: the report, notes on shards whose missing records the
/// answer does not need, and the runs its schedules made on the shards'
/// machines that are not in this store (as they were made: what a check
/// removes says how to make them again).
pub struct Merged {
    pub report: Report,
    pub notes: Vec<String>,
    pub elsewhere: Vec<Run>,
}

/// The shards' records of the plan's schedules up to the first violation
/// (every one with `all`), each judged as it was; the shards missing one.
fn gather(p: &Prepared, plan: &Plan) -> Result<(Vec<Tried>, BTreeSet<u32>), ShardError> {
    let shards = p.shelf.shards.unwrap_or(1);
    let mut tried = Vec::new();
    let mut missing = BTreeSet::new();
    for (k, (_, _, entry)) in plan.steps.iter().enumerate() {
        let Some((r, _)) = p.shelf.records.get(&(k as u64 + 1)) else {
            missing.insert(Shard::of(k, shards));
            continue;
        };
        if r.label != plan.label(k) {
            return Err(refused(format!(
                "the record of schedule {} is of `{}` where the check's plan has `{}`",
                k + 1,
                r.label,
                plan.label(k)
            )));
        }
        let mut t = r.tried();
        t.entry = *entry;
        tried.push(t);
        if r.violations.is_empty() || p.spec.all {
            continue;
        }
        break;
    }
    Ok((tried, missing))
}

/// The merged report (`Merged`).
pub fn merge(
    p: &Prepared,
    store: &Store,
    progress: &mut dyn Progress,
) -> Result<Merged, ShardError> {
    let mut checkers: Vec<Checker> = p
        .specs
        .iter()
        .zip(&p.bases)
        .map(|(s, (t, _, events))| {
            Checker::new(s, store).with_base(t.status, t.wall, t.steps, events)
        })
        .collect();
    // What the shards' learning run learned: its pages are in schedule 0's
    // inputs, so every schedule's; the report says it.
    checkers[0].learned = p.shelf.bases.get(&0).and_then(|b| b.0.learned.clone());
    let bases: Vec<Tried> = p.bases.iter().map(|b| b.0.clone()).collect();
    let plan = Plan::of(&p.spec, &p.modes, &checkers, &bases);
    let (tried, missing) = gather(p, &plan)?;
    let shards = p.shelf.shards.unwrap_or(1);
    if !missing.is_empty() {
        return Err(refused(missing_message(&p.shelf, &missing, shards)));
    }
    let elsewhere = elsewhere(p, store, &plan, &checkers, &tried)?;
    let notes = (1..=shards)
        .filter(|s| !p.shelf.finished.contains_key(s))
        .map(|s| {
            format!(
                "shard {s}/{shards} is {}, but the answer needs none of its missing schedules",
                p.shelf.state(s)
            )
        })
        .collect();
    show(
        p,
        &checkers,
        &bases,
        &tried,
        plan.steps.len() as u64,
        progress,
    );
    // Every candidate up to the first violation has its record: its index is its place.
    if let Some(k) = tried.iter().position(|t| t.violated()) {
        if let Some((r, dir)) = p.shelf.records.get(&(k as u64 + 1)) {
            import(store, dir, r)?;
        }
    }
    let report = plan.report(&p.spec, &p.modes, &checkers, bases, tried, progress)?;
    Ok(Merged {
        report,
        notes,
        elsewhere: elsewhere.into_iter().filter(|r| !r.dir.exists()).collect(),
    })
}

/// Tells `progress` of the schedule 0s and the schedules in the order a
/// check on one machine does: a widening schedule 0 after the rounds before
/// the widening, and only when the schedules went past them.
fn show(
    p: &Prepared,
    checkers: &[Checker],
    bases: &[Tried],
    tried: &[Tried],
    total: u64,
    progress: &mut dyn Progress,
) {
    let (shown, wide, prefix) = match p.spec.portfolio.is_empty() {
        true => (bases.to_vec(), bases.len(), usize::MAX),
        false => super::portfolio::shown(&p.spec, &p.modes, checkers, bases.to_vec(), tried),
    };
    let wide = wide.min(shown.len());
    for b in &shown[..wide] {
        progress.tried(b, 0, 0);
    }
    for (k, t) in tried.iter().enumerate() {
        if k == prefix {
            for b in &shown[wide..] {
                progress.tried(b, 0, 0);
            }
        }
        progress.tried(t, k as u64 + 1, total);
    }
}

/// The runs the tried schedules made, as this store would hold them:
/// each the run its plan entry makes (a record naming another run is
/// refused).
fn elsewhere(
    p: &Prepared,
    store: &Store,
    plan: &Plan,
    checkers: &[Checker],
    tried: &[Tried],
) -> Result<Vec<Run>, ShardError> {
    let mut out = Vec::new();
    for (k, t) in tried.iter().enumerate() {
        let (m, c, _) = &plan.steps[k];
        let manifest = checkers[*m].inputs_for(c).manifest;
        if manifest.id() != t.id {
            return Err(refused(format!(
                "the record of schedule {} names run {}, where the check's plan makes run {}; nothing was merged",
                k + 1,
                t.id,
                manifest.id()
            )));
        }
        let dir = store.runs_dir().join(&t.id);
        let mut meta = p.bases[*m].1.meta.clone();
        meta.id = t.id.clone();
        meta.status = t.status.to_string();
        meta.exit = t.status;
        meta.exit_code = t.status.shell_code();
        meta.steps = t.steps;
        meta.perturbed = t.perturbed.clone();
        let limits = checkers[*m].candidate_limits();
        meta.timeout_secs = checkers[*m]
            .recorded_timeout(&limits, t.status)
            .map(|d| d.as_secs_f64());
        out.push(Run {
            id: t.id.clone(),
            dir,
            manifest,
            meta,
        });
    }
    Ok(out)
}

fn missing_message(shelf: &Shelf, missing: &BTreeSet<u32>, shards: u32) -> String {
    let told: Vec<String> = missing
        .iter()
        .map(|s| format!("shard {s}/{shards} is {}", shelf.state(*s)))
        .collect();
    format!(
        "cannot merge: {}; run {} (again) with the same check and --results; nothing was merged",
        told.join(", "),
        if missing.len() == 1 { "it" } else { "them" }
    )
}
