//! Narrowing a violating schedule to the perturbation that decides it.
//!
//! A schedule with memory points applies tens of perturbations, and a run
//! costs hundreds of exits, so the search is ordered by what usually decides
//! a race and bounded:
//!
//! 1. the shortest prefix of the applied perturbations that still violates
//!    (the prefixes ending at the failing run's own lost updates first,
//!    then a bisection: about log2(n) runs); its last perturbation is the one
//!    that tips the run, and the prefix without it is a run that does not
//!    violate and is the same machine until that step;
//! 2. that last perturbation alone;
//! 3. one reschedule of the same thread at each step where schedule 0 makes
//!    the access that perturbation interrupted (memory points: the race's
//!    access happens at another step in schedule 0);
//! 4. ddmin over the prefix, the last perturbation kept, within a budget of
//!    runs; when a set is left, each of its perturbations alone (a run is
//!    not monotonic in them: one before the last may decide it alone), then
//!    one reschedule near it or at the accesses it interrupted, still
//!    within the budget.
//!
//! Lists of single candidates run on the check's jobs, the first violating
//! one in order winning, so the result does not depend on `--jobs`. Every
//! run starts where it parts from a run already recorded (`resume`).

use super::label::{self, Judged, Label};
use super::race::{self, Race};
use super::resume::Donor;
use super::{Candidate, CheckError, Checker, Narrowed, Progress, Side, Tried};
use crate::record::diff::first_divergence;
use crate::run::Limits;
use crate::run::{Access, Event, EventKind, Perturbation, Perturbed};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Shared events shown before the first difference, and events of each side after it.
const CONTEXT: usize = 3;
/// How far before a deciding set's first step a single reschedule is tried.
const NEAR: u64 = 16;
/// Single reschedules tried at schedule 0's steps of the same accesses.
const SAME_ACCESS_TRIES: usize = 16;
/// Prefixes ending at a lost update of the failing run tried before bisecting.
const TIPS: usize = 2;
/// Shorter prefixes tried below a tip that violates.
const WALK: usize = 4;
/// Runs narrowing makes after the prefix bisection, at most: when the
/// budget runs out, the smallest set found so far is reported.
const BUDGET: u64 = 96;

struct Search<'c, 'a> {
    checker: &'c Checker<'a>,
    property: String,
    runs: u64,
    /// Every explicit schedule run so far, and how it went.
    seen: HashMap<Vec<Perturbed>, Tried>,
    /// Schedule 0 and the failing schedule: runs recorded before
    /// narrowing that its runs can start from (`resume`).
    recorded: Vec<Donor>,
}

/// Narrowing's runs are not listed as the check's schedules are.
struct Quiet;

impl Progress for Quiet {
    fn phase(&mut self, _: &str) {}
    fn tried(&mut self, _: &Tried, _: u64, _: u64) {}
}

impl Search<'_, '_> {
    fn hit(&self, t: &Tried) -> bool {
        t.violations.iter().any(|(p, _)| *p == self.property)
    }

    /// The run with exactly these perturbations.
    fn run(&mut self, set: &[Perturbed]) -> Result<Tried, CheckError> {
        if let Some(t) = self.seen.get(set) {
            return Ok(t.clone());
        }
        self.runs += 1;
        let t = self.checker.try_resumed(set, &self.donors())?;
        self.seen.insert(set.to_vec(), t.clone());
        Ok(t)
    }

    /// Every run recorded so far, to start a run from where it parts from one.
    fn donors(&self) -> Vec<Donor> {
        let made = self.seen.values().map(Donor::of);
        self.recorded.iter().cloned().chain(made).collect()
    }

    /// The run with exactly these perturbations, if it violates the property.
    fn fails(&mut self, set: &[Perturbed]) -> Result<Option<Tried>, CheckError> {
        let t = self.run(set)?;
        Ok(self.hit(&t).then_some(t))
    }

    /// The first of `sets`, in order, whose run violates the property, run
    /// on the check's jobs; at most what is left of `budget` runs.
    fn first_failing(
        &mut self,
        sets: Vec<Vec<Perturbed>>,
        budget: u64,
    ) -> Result<Option<(Vec<Perturbed>, Tried)>, CheckError> {
        let left = budget.saturating_sub(self.runs) as usize;
        let mut sets: Vec<Vec<Perturbed>> = sets
            .into_iter()
            .filter(|s| !s.is_empty() && !self.seen.contains_key(s))
            .collect();
        sets.dedup();
        sets.truncate(left);
        let property = self.property.clone();
        let hit = move |t: &Tried| t.violations.iter().any(|(p, _)| *p == property);
        let donors = self.donors();
        let one = |i: usize| self.checker.try_resumed(&sets[i], &donors);
        let jobs = self.checker.spec.jobs;
        let (tried, _) = super::jobs::try_each(sets.len(), jobs, None, &mut Quiet, &hit, &one)?;
        self.runs += tried.len() as u64;
        let mut found = None;
        for (set, t) in sets.into_iter().zip(tried) {
            if found.is_none() && self.hit(&t) {
                found = Some((set.clone(), t.clone()));
            }
            self.seen.insert(set, t);
        }
        Ok(found)
    }

    /// The shortest prefix of `applied` that violates, by bisection: the
    /// empty one (schedule 0) does not, the whole does (the schedule's own
    /// run, `bad`). The failing run's own lost updates come first (`tips`):
    /// a prefix ending at one that violates, and the prefixes up to `WALK`
    /// shorter, until one passes: the prefix one longer is the answer in a
    /// few runs; else bisection, as without them.
    /// Its length, and its run.
    fn prefix(&mut self, applied: &[Perturbed], bad: &Tried) -> Result<(usize, Tried), CheckError> {
        for h in self.tips(applied, bad)? {
            if h >= applied.len() {
                continue;
            }
            let Some(mut t) = self.fails(&applied[..h])? else {
                continue;
            };
            // The racing thread's read may come a few perturbations before.
            for k in (h.saturating_sub(WALK)..h).rev() {
                match self.fails(&applied[..k])? {
                    None => return Ok((k + 1, t)),
                    Some(shorter) => t = shorter,
                }
            }
            break;
        }
        let (mut lo, mut hi) = (0, applied.len());
        let mut failing = bad.clone();
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match self.fails(&applied[..mid])? {
                Some(t) => {
                    hi = mid;
                    failing = t;
                }
                None => lo = mid,
            }
        }
        Ok((hi, failing))
    }

    /// The lengths of the prefixes of `applied` that end with a
    /// perturbation at which, in `bad`'s run, a thread was switched away
    /// between its read and its write of bytes another thread then wrote
    /// (none of them a locked instruction): a lost update, what most
    /// races that end a run differently are. At most `TIPS`, in step order;
    /// read from the run's events, no run made.
    fn tips(&self, applied: &[Perturbed], bad: &Tried) -> Result<Vec<usize>, CheckError> {
        let events = load(self.checker, &bad.id)?;
        if !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Access { .. }))
        {
            return Ok(Vec::new());
        }
        let switches = self.checker.store.resolve(&bad.id)?.switches()?;
        let mut tips = Vec::new();
        for (i, p) in applied.iter().enumerate() {
            let Some(x) = race::exposed(&events, &switches, p.step, &|_| true) else {
                continue;
            };
            let lost = x.before.is_some_and(|b| b.access == Access::Read)
                && x.between.access == Access::Write
                && x.after
                    .is_some_and(|a| a.step == p.step && a.access == Access::Write);
            if lost {
                tips.push(i + 1);
            }
            if tips.len() == TIPS {
                break;
            }
        }
        Ok(tips)
    }

    /// When several perturbations together decide it, one reschedule at a
    /// nearby step often does too (the schedule's own perturbations are only
    /// where its dice fell): each step from `NEAR` steps before the set's
    /// first to `NEAR` after its last, nearest the last first, later before
    /// earlier at the same distance (a PCT schedule's switches lead threads
    /// to where one reschedule of the policy's order would decide it later).
    fn single_near(
        &mut self,
        set: &[Perturbed],
        budget: u64,
    ) -> Result<Option<(Vec<Perturbed>, Tried)>, CheckError> {
        let (Some(first), Some(last)) = (set.first(), set.last()) else {
            return Ok(None);
        };
        let lowest = first.step.saturating_sub(NEAR).max(1);
        let mut steps: Vec<u64> = (lowest..=last.step + NEAR).collect();
        steps.sort_by_key(|s| (s.abs_diff(last.step), *s < last.step));
        let singles = steps
            .into_iter()
            .map(|step| Perturbed {
                step,
                what: Perturbation::Reschedule,
            })
            .filter(|one| !set.contains(one))
            .map(|one| vec![one])
            .collect();
        self.first_failing(singles, budget)
    }

    /// The accesses `set` interrupted (memory points) happen at other steps
    /// in schedule 0, where one reschedule may decide it: a single
    /// reschedule at each step where schedule 0 makes an access at the same
    /// instruction as one the set interrupted (its last first, the same
    /// thread's before other threads'), at most `SAME_ACCESS_TRIES` of them.
    fn same_access(
        &mut self,
        set: &[Perturbed],
        failing: &Tried,
        budget: u64,
    ) -> Result<Option<(Vec<Perturbed>, Tried)>, CheckError> {
        let events = load(self.checker, &failing.id)?;
        let switches = self.checker.store.resolve(&failing.id)?.switches()?;
        let base_id = self
            .checker
            .inputs_for(&Candidate::Explicit(Vec::new()))
            .manifest
            .id();
        let Ok(base) = load(self.checker, &base_id) else {
            return Ok(None);
        };
        let mut singles = Vec::new();
        for p in set.iter().rev() {
            let Some((_, tid)) = label::thread_at(&switches, p.step) else {
                continue;
            };
            let pc = events.iter().find_map(|e| match e.kind {
                EventKind::Access { pc, .. } if e.step == p.step && e.tid == tid => Some(pc),
                _ => None,
            });
            let Some(pc) = pc else { continue };
            // The same thread's first: the same code in another thread
            // (who initialises, who waits) comes after.
            let at_pc = |same: bool| {
                base.iter().filter_map(move |e| match e.kind {
                    EventKind::Access { pc: at, .. } if at == pc && (e.tid == tid) == same => {
                        Some(vec![Perturbed {
                            step: e.step,
                            what: Perturbation::Reschedule,
                        }])
                    }
                    _ => None,
                })
            };
            singles.extend(at_pc(true).chain(at_pc(false)));
        }
        singles.truncate(SAME_ACCESS_TRIES);
        self.first_failing(singles, budget)
    }

    /// Zeller's ddmin: a 1-minimal subset of `set` that, with `keep`, still
    /// fails; the smallest found when `budget` runs are spent.
    fn ddmin(
        &mut self,
        mut set: Vec<Perturbed>,
        keep: &[Perturbed],
        budget: u64,
    ) -> Result<Vec<Perturbed>, CheckError> {
        let with_keep = |s: &[Perturbed]| {
            let mut v = s.to_vec();
            v.extend_from_slice(keep);
            v
        };
        let mut n = 2usize;
        while set.len() >= 2 && self.runs < budget {
            let chunk = set.len().div_ceil(n);
            let parts: Vec<Vec<Perturbed>> = set.chunks(chunk).map(|c| c.to_vec()).collect();
            let mut reduced = false;
            for p in &parts {
                if self.runs >= budget {
                    break;
                }
                if self.fails(&with_keep(p))?.is_some() {
                    set = p.clone();
                    n = 2;
                    reduced = true;
                    break;
                }
            }
            if !reduced && parts.len() > 2 {
                for i in 0..parts.len() {
                    if self.runs >= budget {
                        break;
                    }
                    let rest: Vec<Perturbed> = parts
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .flat_map(|(_, p)| p.iter().copied())
                        .collect();
                    if self.fails(&with_keep(&rest))?.is_some() {
                        set = rest;
                        n = (n - 1).max(2);
                        reduced = true;
                        break;
                    }
                }
            }
            if !reduced {
                if n >= set.len() {
                    break;
                }
                n = (2 * n).min(set.len());
            }
        }
        // A single remaining perturbation may be droppable too.
        if set.len() == 1 && self.runs < budget && self.fails(keep)?.is_some() {
            set.clear();
        }
        Ok(with_keep(&set))
    }

    /// The deciding perturbations of `bad` and the run they make.
    fn deciding(&mut self, bad: &Tried) -> Result<(Vec<Perturbed>, Tried), CheckError> {
        let applied = &bad.perturbed;
        let (k, prefix_run) = self.prefix(applied, bad)?;
        let last = applied[k - 1];
        if k == 1 {
            return Ok((vec![last], prefix_run));
        }
        let budget = self.runs + BUDGET;
        if let Some(t) = self.fails(&[last])? {
            return Ok((vec![last], t));
        }
        if let Some(one) = self.same_access(&[last], &prefix_run, budget)? {
            return Ok(one);
        }
        // Without `last` kept: a run is not monotonic in its perturbations,
        // and a set that must keep it may hold others that decide it alone.
        // A 1-minimal set's run without its last perturbation does not
        // violate, so the pair reported is always a passing and a failing run.
        let set = self.ddmin(applied[..k].to_vec(), &[], budget)?;
        let Some(t) = self.fails(&set)? else {
            return Ok((applied[..k].to_vec(), prefix_run));
        };
        if set.len() == 1 {
            return Ok((set, t));
        }
        // ddmin kept `last` in every set it tried, but a run is not
        // monotonic in its perturbations: one of the set alone (a stall
        // before `last`, say) may decide it where the prefix without
        // `last` did not. A few runs, so past the budget too.
        // ...and so may a reschedule where one of them (a stall) was.
        let mut alone: Vec<Vec<Perturbed>> = set.iter().map(|p| vec![*p]).collect();
        alone.extend(set.iter().rev().map(|p| {
            vec![Perturbed {
                step: p.step,
                what: Perturbation::Reschedule,
            }]
        }));
        let spare = self.runs + alone.len() as u64;
        if let Some(one) = self.first_failing(alone, spare)? {
            return Ok(one);
        }
        // The accesses the set interrupted first: at most SAME_ACCESS_TRIES
        // runs, where the steps near a set that spans a run are hundreds.
        if let Some(one) = self.same_access(&set, &t, budget)? {
            return Ok(one);
        }
        if let Some(one) = self.single_near(&set, budget)? {
            return Ok(one);
        }
        // ddmin stopped by the budget may leave a set whose run without its
        // last perturbation violates too: then the prefix is the honest pair.
        if self.fails(&set[..set.len() - 1])?.is_some() {
            return Ok((applied[..k].to_vec(), prefix_run));
        }
        Ok((set, t))
    }
}

/// Narrows `bad`, a violating schedule of `checker`'s; `bases` are the
/// check's schedule 0s (one a set of points), the one of this checker's
/// not made again.
pub fn narrow(checker: &Checker, bad: &Tried, bases: &[Tried]) -> Result<Narrowed, CheckError> {
    let started = Instant::now();
    let property = bad.violations[0].0.clone();
    let base_id = checker
        .inputs_for(&Candidate::Explicit(Vec::new()))
        .manifest
        .id();
    let mut s = Search {
        checker,
        property: property.clone(),
        runs: 0,
        seen: HashMap::new(),
        recorded: vec![
            Donor::of(bad),
            Donor {
                id: base_id.clone(),
                applied: Vec::new(),
            },
        ],
    };
    // Schedule 0 is the run with no perturbation.
    if let Some(base) = bases.iter().find(|b| b.id == base_id) {
        s.seen.insert(Vec::new(), base.clone());
    }
    if bad.perturbed.is_empty() {
        // No schedule perturbation: another seed decides it. Compare with schedule 0.
        let base = checker.try_one(&Candidate::Explicit(Vec::new()))?;
        let divergence =
            first_divergence(&load(checker, &base.id)?, &load(checker, &bad.id)?, CONTEXT);
        let (without, with) = sides(&base, bad, true);
        let who = bad.label.trim();
        let sentence = match with.label {
            Label::Failing => format!(
                "{who} decides it: the run with it violates {property} where schedule 0 does not"
            ),
            Label::Passing => format!(
                "{who} decides it: the run with it passes: it ends {} where schedule 0 ends {}",
                with.status, without.status
            ),
            _ => format!(
                "{who} decides it: the run with it ends {} where schedule 0 ends {} (neither passes; it violates {property})",
                with.status, without.status
            ),
        };
        return Ok(Narrowed {
            deciding: Vec::new(),
            property,
            without,
            with,
            sentence,
            divergence,
            where_: Vec::new(),
            race: None,
            runs: 1,
            wall: started.elapsed(),
        });
    }
    let (deciding, failing) = s.deciding(bad)?;
    // The passing side: the same perturbations but the last, so both runs
    // are one machine until the deciding step.
    let without_last = &deciding[..deciding.len().saturating_sub(1)];
    let passing = s.run(without_last)?;
    let failing_events = load(checker, &failing.id)?;
    let switches = checker.store.resolve(&failing.id)?.switches()?;
    let mut names = Program::of(checker);
    // The interleaving a single deciding step made, read from the failing
    // run's events (the program's own accesses first: code with debug info
    // of its own; a library's has none in the program's).
    let exposed = match deciding.as_slice() {
        [one] => race::exposed(&failing_events, &switches, one.step, &|t| names.own(t.pc)),
        _ => None,
    };
    // Where each thread was at the deciding step: the sentence names the
    // place of the thread that made it, `--where` prints every thread.
    // The same run gives the ELF files mapped then, to name addresses in
    // the libraries, and the caller in the program's own code of each of
    // the interleaving's accesses made elsewhere (the Rust core's atomics).
    let (where_, callers) = match deciding.last() {
        Some(last) => {
            let limits = Limits {
                where_at: Some(last.step),
                places_at: exposed
                    .as_ref()
                    .map(race::Interleaving::steps)
                    .unwrap_or_default(),
                ..checker.candidate_limits()
            };
            let mut donors = s.donors();
            donors.push(Donor::of(&failing));
            let o = checker.notes_of(&deciding, &donors, &limits)?;
            names.mapped = o.symbols_at;
            (o.where_at, o.places_at)
        }
        _ => (Vec::new(), Vec::new()),
    };
    let divergence = first_divergence(&load(checker, &passing.id)?, &failing_events, CONTEXT);
    let (without, with) = sides(&passing, &failing, without_last.is_empty());
    let other = match without.label {
        Label::Schedule0 => "schedule 0",
        _ if without_last.is_empty() => "schedule 0",
        _ => "the run without it",
    };
    let effect = label::effect(&property, other, without.status, (with.label, with.status));
    let mut race = None;
    let sentence = match deciding.as_slice() {
        [one] => {
            // An access is told by its caller in the program's own code when
            // it was made elsewhere.
            let place = |t: &race::Touch| {
                callers
                    .iter()
                    .find(|(step, tid, _)| *step == t.step && *tid == t.tid)
                    .map_or_else(|| names.place(t.pc), |(_, _, p)| p.clone())
            };
            race = exposed
                .as_ref()
                .map(|i| Race::tell(i, one.step, &|a| names.variable(a), &place));
            let thread = label::thread_at(&switches, one.step);
            let what = label::deciding(one, &failing_events, thread, &names.names);
            let place = thread
                .and_then(|(pid, tid)| {
                    let prefix = format!("thread {pid}/{tid}: ");
                    let line = where_.iter().find(|l| l.starts_with(&prefix))?;
                    crate::kernel::symbols::place_in(line)
                })
                .map_or_else(String::new, |p| format!(" in {p}"));
            format!(
                "step {} decides it: {what}{place} makes the run {effect}",
                one.step
            )
        }
        set => format!(
            "no single step decides it; these {} together make the run {effect}: {}",
            set.len(),
            set.iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Ok(Narrowed {
        deciding,
        property,
        without,
        with,
        sentence,
        divergence,
        where_,
        race,
        runs: s.runs,
        wall: started.elapsed(),
    })
}

/// Every event of a run the check recorded.
fn load(checker: &Checker, id: &str) -> Result<Vec<Event>, CheckError> {
    let run = checker.store.resolve(id)?;
    run.events()
        .map_err(|e| CheckError::Trace(id.into(), e.to_string()))
}

/// The pair's sides, each with what a person calls it.
fn sides(without: &Tried, with: &Tried, without_is_schedule_0: bool) -> (Side, Side) {
    let (a, b) = label::labels(Judged::of(without), Judged::of(with), without_is_schedule_0);
    let side = |t: &Tried, label| Side {
        run: t.id.clone(),
        status: t.status,
        label,
    };
    (side(without, a), side(with, b))
}

/// The checked program's names: its symbol table for recorded text, and
/// its debug info (found as `rewind where` finds it, parsed on first use)
/// for source lines; the libraries it had mapped at the deciding step for
/// addresses outside it.
struct Program {
    path: String,
    names: label::Names,
    lines: Option<crate::kernel::symbols::SymbolTable>,
    mapped: Option<Arc<symbols::Symbolizer>>,
}

impl Program {
    /// None of the program's own when its file cannot be read; no
    /// library's until `mapped` is set.
    fn of(checker: &Checker) -> Program {
        let mapped = None;
        let base = &checker.spec.base;
        let path = &base.manifest.program;
        let Ok(elf) = crate::kernel::elf::read_program(&base.image, path) else {
            return Program {
                path: path.clone(),
                names: label::Names::default(),
                lines: None,
                mapped,
            };
        };
        let bias = crate::kernel::elf::load_bias(&elf);
        Program {
            path: path.clone(),
            names: label::Names::from_elf(&elf, bias),
            lines: Some(crate::kernel::symbols::SymbolTable::from_elf(
                path,
                std::sync::Arc::new(elf),
                bias,
            )),
            mapped,
        }
    }

    /// The library (not the program) mapped at `addr`: its symbolizer's module.
    fn library_at(&self, addr: u64) -> Option<&symbols::Mapped> {
        let m = self.mapped.as_ref()?.module_at(addr)?;
        (m.path != self.path).then_some(m)
    }

    /// `sym+0x17 (libc.so.6)`: an address of a library, by its symbol.
    fn in_library(&self, addr: u64) -> Option<String> {
        let m = self.library_at(addr)?;
        let file = m.path.rsplit('/').next().unwrap_or(&m.path);
        Some(match m.module.symbol(addr.wrapping_sub(m.bias)) {
            Some((name, 0)) => format!("{} ({file})", symbols::demangle(&name)),
            Some((name, off)) => format!("{}+{off:#x} ({file})", symbols::demangle(&name)),
            None => format!("{addr:#x} ({file})"),
        })
    }

    /// `balance`, `pool+0x8`, `sym+0x8 (libc.so.6)`, else the address.
    fn variable(&self, addr: u64) -> String {
        self.names
            .variable(addr)
            .or_else(|| self.in_library(addr))
            .unwrap_or_else(|| format!("{addr:#x}"))
    }

    /// `teller (bank.c:27)`, else `teller+0x4c`, else `sym+0x17
    /// (libc.so.6)`, else the address.
    fn place(&self, pc: u64) -> String {
        if let Some(lib) = self.in_library(pc) {
            return lib;
        }
        match self.lines.as_ref().and_then(|t| t.symbolizer()) {
            Some(s) => s.place(pc),
            None => self
                .names
                .function_at(pc)
                .unwrap_or_else(|| format!("{pc:#x}")),
        }
    }

    /// Whether `pc` is the program's own code (its debug info names a
    /// source file of its own, not the C library's or a runtime's).
    fn own(&self, pc: u64) -> bool {
        self.library_at(pc).is_none()
            && self
                .lines
                .as_ref()
                .and_then(|t| t.symbolizer())
                .and_then(|s| s.frames_at(pc).first().map(|f| f.own))
                .unwrap_or(false)
    }
}
