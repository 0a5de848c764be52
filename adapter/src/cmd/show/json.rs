//! `rewind show --json`, typed: a run's inputs and the commands that make
//! it again, or a schedule a check did not keep. Printed through
//! `util::json_value`, so the bytes are those of the `json!` it replaced.

use super::{Line, Pair};
use crate::app::kept::NotKept;
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use vmm::check::label::Label;
use vmm::run::manifest::ForkOf;
use vmm::store::ImageLocation;

/// A run, what it was given and how to make it again.
#[derive(Serialize)]
pub struct ShowJson<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub status: &'a str,
    pub steps: u64,
    pub fork_of: &'a Option<ForkOf>,
    pub inputs: Value,
    pub image: &'a ImageLocation,
    pub stdin_bytes: u64,
    pub stdin_file: &'a Option<PathBuf>,
    pub timeout_secs: Option<f64>,
    pub commands: &'a [Line],
    pub reproducible: bool,
    pub why_not: &'a Option<String>,
    pub check_command: &'a Option<Line>,
    pub narrowing: Option<NarrowingJson<'a>>,
    pub notes: &'a [String],
}

/// The other run of the narrowed pair this run is one of.
#[derive(Serialize)]
pub struct NarrowingJson<'a> {
    pub label: Label,
    pub other_run: &'a str,
    pub other_label: Label,
    pub other_status: &'a str,
    pub added: &'a str,
}

impl<'a> NarrowingJson<'a> {
    pub fn of(p: &'a Pair) -> NarrowingJson<'a> {
        NarrowingJson {
            label: p.this,
            other_run: &p.other_run.id,
            other_label: p.other,
            other_status: &p.other_run.meta.status,
            added: &p.added,
        }
    }
}

/// A schedule a check tried and did not keep, as its kept report says.
#[derive(Serialize)]
pub struct NotKeptJson<'a> {
    pub id: &'a str,
    pub kept: bool,
    pub check: &'a str,
    pub label: &'a Value,
    pub status: &'a Value,
    pub steps: &'a Value,
    pub remake: Option<&'a str>,
}

impl<'a> NotKeptJson<'a> {
    pub fn of(n: &'a NotKept) -> NotKeptJson<'a> {
        let t = &n.tried;
        NotKeptJson {
            id: t["run"].as_str().unwrap_or_default(),
            kept: false,
            check: &n.check.base,
            label: &t["label"],
            status: &t["status"],
            steps: &t["steps"],
            remake: t["remake"].as_str(),
        }
    }
}
