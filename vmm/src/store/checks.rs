//! Check results: what `rewind check` concluded, kept in
//! `checks/<created_ns>-<base run id>.json` (the `--json` report, docs/events.md,
//! under `report`), so that a reader that was not watching the terminal (the
//! language server) knows which runs a check compared and what it decided.
//! Written to a temporary name and renamed; not inputs of any run.

use super::{bookmarks::write_atomic, Store, StoreError};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

pub const CHECKS_DIR: &str = "checks";

/// The contents of one check file: versioned so that a later format can be told apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    pub version: u32,
    /// When the check ended: nanoseconds since the Unix epoch.
    pub created_ns: u64,
    /// Schedule 0's run: which program, with which inputs, was checked.
    pub base: String,
    /// The `rewind check --json` report.
    pub report: serde_json::Value,
}

const VERSION: u32 = 1;

impl Store {
    pub fn checks_dir(&self) -> PathBuf {
        self.home().join(CHECKS_DIR)
    }

    /// Keeps a check's report; returns the file it went to.
    pub fn save_check(
        &self,
        base: &str,
        report: &serde_json::Value,
    ) -> Result<PathBuf, StoreError> {
        let dir = self.checks_dir();
        std::fs::create_dir_all(&dir).map_err(super::io(&dir))?;
        let created_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let rec = CheckRecord {
            version: VERSION,
            created_ns,
            base: base.to_string(),
            report: report.clone(),
        };
        let path = dir.join(format!("{created_ns:020}-{base}.json"));
        let bytes = serde_json::to_vec(&rec).expect("a check record serializes");
        write_atomic(&path, &bytes)?;
        Ok(path)
    }

    /// Every kept check, newest first, and the files that could not be read
    /// (with why): a damaged file is reported, never fatal.
    pub fn checks(&self) -> (Vec<CheckRecord>, Vec<(PathBuf, StoreError)>) {
        let dir = self.checks_dir();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return (Vec::new(), Vec::new());
        };
        let (mut ok, mut bad) = (Vec::new(), Vec::new());
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            match read_check(&path) {
                Ok(r) => ok.push(r),
                Err(err) => bad.push((path, err)),
            }
        }
        ok.sort_by_key(|c: &CheckRecord| std::cmp::Reverse(c.created_ns));
        (ok, bad)
    }
}

fn read_check(path: &std::path::Path) -> Result<CheckRecord, StoreError> {
    let rec: CheckRecord = super::read_json(path)?;
    if rec.version != VERSION {
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            what: format!(
                "check format version {} (this rewind reads {VERSION})",
                rec.version
            ),
        });
    }
    Ok(rec)
}
