//! The `--json` report of a check, typed: what `rewind check --json`
//! prints, what is kept for the language server (docs/lsp.md) and what a
//! shard's merge reads back. Made a `Value` by `util::json_value`, so its
//! bytes are those of the `json!` it replaced; `kept.rs` then marks which
//! runs were kept.

use serde::Serialize;
use serde_json::Value;
use vmm::check::label::{self, Label};
use vmm::check::race::{Race, Told};
use vmm::check::{Entry, Learned, Narrowed, Report, Side, Strategy, Tried};
use vmm::run::Access;

/// The report of a check as its `--json`.
pub fn json_report(r: &Report) -> Value {
    crate::util::json_value(&ReportJson::of(r))
}

#[derive(Serialize)]
struct ReportJson<'a> {
    properties: Vec<String>,
    never_held: &'a [String],
    learned: Option<LearnedJson<'a>>,
    base: TriedJson<'a>,
    bases: Vec<TriedJson<'a>>,
    tried: Vec<TriedJson<'a>>,
    violations: usize,
    cut_off: usize,
    exhausted: &'a Option<String>,
    out_of_budget: &'a Option<String>,
    first_violation: Option<FirstViolation<'a>>,
    narrowed: Option<NarrowedJson<'a>>,
}

impl<'a> ReportJson<'a> {
    fn of(r: &'a Report) -> ReportJson<'a> {
        ReportJson {
            properties: r.properties.iter().map(|p| p.name()).collect(),
            never_held: &r.never_held,
            learned: r.learned.as_ref().map(LearnedJson::of),
            base: TriedJson::of(&r.base),
            bases: r.bases.iter().map(TriedJson::of).collect(),
            tried: r.tried.iter().map(TriedJson::of).collect(),
            violations: r.violations(),
            cut_off: r.cut_off(),
            exhausted: &r.exhausted,
            out_of_budget: &r.out_of_budget,
            first_violation: r.first_violation().map(|bad| FirstViolation {
                run: &bad.id,
                label: label::unnarrowed(r, bad),
                found_by: bad.entry.as_ref().map(EntryJson::of),
            }),
            narrowed: r.narrowed.as_ref().map(NarrowedJson::of),
        }
    }
}

/// What a learning run found: `{"run", "steps", "wall_s", "pages"}`.
#[derive(Serialize)]
struct LearnedJson<'a> {
    run: &'a str,
    steps: u64,
    wall_s: f64,
    pages: Vec<String>,
}

impl<'a> LearnedJson<'a> {
    fn of(l: &'a Learned) -> LearnedJson<'a> {
        LearnedJson {
            run: &l.run,
            steps: l.steps,
            wall_s: l.wall.as_secs_f64(),
            pages: l.pages.iter().map(|p| format!("{p:#x}")).collect(),
        }
    }
}

/// A schedule tried.
#[derive(Serialize)]
struct TriedJson<'a> {
    entry: Option<EntryJson>,
    label: &'a str,
    run: &'a str,
    status: String,
    steps: u64,
    perturbed: Value,
    violations: Vec<ViolationJson<'a>>,
    broken: &'a [String],
    cut_off: bool,
}

impl<'a> TriedJson<'a> {
    fn of(t: &'a Tried) -> TriedJson<'a> {
        TriedJson {
            entry: t.entry.as_ref().map(EntryJson::of),
            label: t.label.trim(),
            run: &t.id,
            status: t.status.to_string(),
            steps: t.steps,
            perturbed: vmm::record::json::perturbations(&t.perturbed),
            violations: t
                .violations
                .iter()
                .map(|(property, why)| ViolationJson { property, why })
                .collect(),
            broken: &t.broken,
            cut_off: t.cut_off,
        }
    }
}

#[derive(Serialize)]
struct ViolationJson<'a> {
    property: &'a str,
    why: &'a str,
}

/// `{"strategy", "depth", "points"}` of a portfolio's entry (depth for pct alone).
#[derive(Serialize)]
struct EntryJson {
    strategy: &'static str,
    depth: Option<u32>,
    points: String,
}

impl EntryJson {
    fn of(e: &Entry) -> EntryJson {
        EntryJson {
            strategy: e.strategy_name(),
            depth: (e.strategy == Strategy::Pct).then_some(e.depth),
            points: e.points.to_string(),
        }
    }
}

#[derive(Serialize)]
struct FirstViolation<'a> {
    run: &'a str,
    label: Label,
    found_by: Option<EntryJson>,
}

#[derive(Serialize)]
struct NarrowedJson<'a> {
    deciding: Value,
    property: &'a str,
    sentence: &'a str,
    without: SideJson<'a>,
    with: SideJson<'a>,
    passing: Option<&'a str>,
    failing: Option<&'a str>,
    divergence: Option<DivergenceJson>,
    #[serde(rename = "where")]
    where_: &'a [String],
    race: Option<RaceJson<'a>>,
    runs: u64,
    wall_secs: f64,
}

impl<'a> NarrowedJson<'a> {
    fn of(n: &'a Narrowed) -> NarrowedJson<'a> {
        NarrowedJson {
            deciding: vmm::record::json::perturbations(&n.deciding),
            property: &n.property,
            sentence: &n.sentence,
            without: SideJson::of(&n.without),
            with: SideJson::of(&n.with),
            passing: n.run_called(Label::Passing),
            failing: n.run_called(Label::Failing),
            divergence: n.divergence.as_ref().map(|d| DivergenceJson {
                left_step: d.left_step(),
                right_step: d.right_step(),
                lines: d.lines(),
            }),
            where_: &n.where_,
            race: n.race.as_ref().map(RaceJson::of),
            runs: n.runs,
            wall_secs: n.wall.as_secs_f64(),
        }
    }
}

/// One run of a narrowed pair: `{"run", "status", "label"}`.
#[derive(Serialize)]
struct SideJson<'a> {
    run: &'a str,
    status: String,
    label: Label,
}

impl<'a> SideJson<'a> {
    fn of(s: &'a Side) -> SideJson<'a> {
        SideJson {
            run: &s.run,
            status: s.status.to_string(),
            label: s.label,
        }
    }
}

#[derive(Serialize)]
struct DivergenceJson {
    left_step: Option<u64>,
    right_step: Option<u64>,
    lines: Vec<String>,
}

/// `{"sentence", "before", "between", "after"}`.
#[derive(Serialize)]
struct RaceJson<'a> {
    sentence: &'a str,
    before: Option<ToldJson<'a>>,
    between: ToldJson<'a>,
    after: Option<ToldJson<'a>>,
}

impl<'a> RaceJson<'a> {
    fn of(r: &'a Race) -> RaceJson<'a> {
        RaceJson {
            sentence: &r.sentence,
            before: r.before.as_ref().map(ToldJson::of),
            between: ToldJson::of(&r.between),
            after: r.after.as_ref().map(ToldJson::of),
        }
    }
}

/// An access of a race: `{"step", "pid", "tid", "access", "addr", "size",
/// "pc", "variable", "place"}`.
#[derive(Serialize)]
struct ToldJson<'a> {
    step: u64,
    pid: u32,
    tid: u32,
    access: Access,
    addr: u64,
    size: u32,
    pc: u64,
    variable: &'a str,
    place: &'a str,
}

impl<'a> ToldJson<'a> {
    fn of(t: &'a Told) -> ToldJson<'a> {
        ToldJson {
            step: t.touch.step,
            pid: t.touch.pid,
            tid: t.touch.tid,
            access: t.touch.access,
            addr: t.touch.addr,
            size: t.touch.size,
            pc: t.touch.pc,
            variable: &t.variable,
            place: &t.place,
        }
    }
}
