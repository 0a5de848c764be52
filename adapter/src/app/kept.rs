//! What a check keeps in the store: schedule 0 (each, in a portfolio),
//! the violating runs and the narrowed pair. The runs of passing schedules
//! and narrowing's other runs are removed when the check ends (unless
//! `--keep all`), so a check of a thousand schedules does not leave a
//! thousand runs; the check's record (`checks/`) keeps every schedule's
//! id and status, and the command that makes a removed one again, which
//! `rewind show` of its id prints. Their pages go at the next `rewind gc`.

use anyhow::Result;
use serde_json::Value;
use std::collections::BTreeSet;
use vmm::check::Report;
use vmm::store::checks::CheckRecord;
use vmm::store::{Created, Run, Store};

/// The runs a check keeps.
fn kept(r: &Report) -> BTreeSet<&str> {
    let mut keep: BTreeSet<&str> = r.bases.iter().map(|b| b.id.as_str()).collect();
    keep.extend(
        r.tried
            .iter()
            .filter(|t| t.violated())
            .map(|t| t.id.as_str()),
    );
    if let Some(n) = &r.narrowed {
        keep.extend(n.sides().map(|s| s.run.as_str()));
    }
    keep
}

/// The command that makes a run again, when there is one (`rewind show`'s).
pub type Remake<'a> = &'a dyn Fn(&Store, &Run) -> Option<String>;

/// A run not in the store, and the command that makes it again.
pub type Gone = (String, Option<String>);

/// Removes the runs `r` made and does not keep (a run another was forked
/// from stays); those removed, with the command that makes each again.
pub fn drop_unkept(store: &Store, r: &Report, remake: Remake) -> Result<Vec<Gone>> {
    drop_runs(store, &r.made, &kept(r), remake)
}

/// Removes the runs of `made` not in `keep` (a run another was forked from
/// stays, and so does one another command recorded again since: it may be
/// that command's to keep); those removed, with the command that makes
/// each again.
pub fn drop_runs(
    store: &Store,
    made: &[Created],
    keep: &BTreeSet<&str>,
    remake: Remake,
) -> Result<Vec<Gone>> {
    let doomed: Vec<&Created> = made
        .iter()
        .filter(|c| !keep.contains(c.id.as_str()))
        .collect();
    let mut removed: Vec<Gone> = Vec::new();
    if !doomed.is_empty() {
        let lock = store.lock_exclusive(&mut || {
            eprintln!("rewind: waiting for the runs being recorded in this store to finish...")
        })?;
        let all = store.list()?;
        for made in doomed {
            let id = &made.id;
            let forked = all
                .iter()
                .any(|o| o.manifest.fork_of.as_ref().is_some_and(|f| f.parent == *id));
            let Some(run) = all.iter().find(|o| o.id == *id) else {
                continue;
            };
            if forked || !made.is_in(&run.dir) {
                continue;
            }
            let line = remake(store, run);
            store.remove_run(&lock, run)?;
            removed.push((id.clone(), line));
        }
    }
    Ok(removed)
}

/// Marks each schedule of a check's `json`: `kept`, and for one whose run
/// is `gone`, `remake`: the command that makes it again.
pub fn mark(json: &mut Value, gone: &[Gone]) {
    for t in json["tried"].as_array_mut().into_iter().flatten() {
        let gone = gone.iter().find(|(id, _)| t["run"] == id.as_str());
        t["kept"] = Value::Bool(gone.is_none());
        if let Some((_, remake)) = gone {
            t["remake"] = remake.clone().into();
        }
    }
}

/// A schedule a check tried and did not keep: its check, its line there.
pub struct NotKept {
    pub check: CheckRecord,
    pub tried: Value,
}

/// The schedule of a kept check whose run is `spec` (an id or a unique
/// prefix of one) and was not kept, if any.
pub fn find(store: &Store, spec: &str) -> Option<NotKept> {
    if spec.len() < 4 || !spec.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (checks, _) = store.checks();
    let mut found: Vec<NotKept> = Vec::new();
    for c in checks {
        let tried = c.report["tried"].as_array().cloned().unwrap_or_default();
        for t in tried {
            let id = t["run"].as_str().unwrap_or_default();
            let fresh = !found.iter().any(|f| f.tried["run"] == id);
            if t["kept"] == false && id.starts_with(spec) && fresh {
                found.push(NotKept {
                    check: c.clone(),
                    tried: t,
                });
            }
        }
    }
    (found.len() == 1).then(|| found.remove(0))
}
