//! Taking things out of the store: removing runs (with every run forked
//! from them), collecting pages and images no run uses, and finding forks
//! that ran exactly as an older run did.
//!
//! Each of these needs the store's lock held exclusive (`store::lock`): the
//! functions take it as an argument to say so. A run is removed by renaming
//! its directory to a dot name (which no listing shows) and then deleting
//! that, so a run is either listed whole or not at all.

use super::lock::{LockKind, StoreLock};
use super::{io, Run, Store, StoreError};
use crate::record::diff::first_divergence;
use crate::run::pages::PageHash;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// Where imported images live: `images/<image hash>/`.
pub const IMAGES_DIR: &str = "images";
/// Where built-in example programs are written: `examples/<blake3>-<name>`.
pub const EXAMPLES_DIR: &str = "examples";

fn exclusive(lock: &StoreLock) {
    assert_eq!(
        lock.kind(),
        LockKind::Exclusive,
        "the store must be locked exclusive"
    );
}

/// The pages a run's keyframes use (none when it has no keyframes).
pub fn run_pages(run_dir: &Path) -> Result<Vec<PageHash>, StoreError> {
    crate::run::keyframe::referenced_pages(run_dir).map_err(|e| StoreError::Corrupt {
        path: run_dir.join(crate::run::keyframe::KEYFRAMES_FILE),
        what: e.to_string(),
    })
}

/// Bytes in the files under `path` (not following symbolic links).
pub fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|d| d.flatten().map(|e| disk_bytes(&e.path())).sum())
        .unwrap_or(0)
}

/// Removes a directory tree, first making its directories writable (an
/// imported image may hold read-only ones). Never follows symbolic links.
pub fn remove_tree(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fn open_up(p: &Path) {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            return;
        };
        if m.is_dir() {
            let mode = m.permissions().mode();
            if mode & 0o700 != 0o700 {
                let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o700));
            }
            if let Ok(d) = std::fs::read_dir(p) {
                for e in d.flatten() {
                    open_up(&e.path());
                }
            }
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            open_up(path);
            std::fs::remove_dir_all(path)
        }
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// `runs` and every run forked from them, directly or not: forks before
/// their parents.
pub fn with_descendants(all: &[Run], roots: &[String]) -> Vec<Run> {
    let mut children: HashMap<&str, Vec<&Run>> = HashMap::new();
    for r in all {
        if let Some(f) = &r.manifest.fork_of {
            children.entry(f.parent.as_str()).or_default().push(r);
        }
    }
    let by_id: HashMap<&str, &Run> = all.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    // Depth-first, post-order: a run comes after all of its forks.
    fn visit<'a>(
        id: &'a str,
        children: &HashMap<&str, Vec<&'a Run>>,
        seen: &mut BTreeSet<&'a str>,
        order: &mut Vec<&'a str>,
    ) {
        if !seen.insert(id) {
            return;
        }
        if let Some(cs) = children.get(id) {
            for c in cs {
                visit(&c.id, children, seen, order);
            }
        }
        order.push(id);
    }
    for r in roots {
        if let Some(run) = by_id.get(r.as_str()) {
            visit(&run.id, &children, &mut seen, &mut order);
        }
    }
    order
        .into_iter()
        .filter_map(|id| by_id.get(id).map(|r| (*r).clone()))
        .collect()
}

/// What `gc` removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GcReport {
    pub pages_removed: u64,
    pub page_bytes: u64,
    pub pages_kept: u64,
    pub images_removed: u64,
    pub image_bytes: u64,
    /// Root files kept for runs' image views (`store::view`).
    pub files_removed: u64,
    pub file_bytes: u64,
    /// Leftovers of interrupted commands (temporary runs, pages, files).
    pub leftovers_removed: u64,
    pub leftover_bytes: u64,
    /// Page packs whose header is damaged: their pages cannot be told, so
    /// the packs are kept as they are.
    pub damaged_packs: Vec<PathBuf>,
}

impl GcReport {
    pub fn freed(&self) -> u64 {
        self.page_bytes + self.image_bytes + self.file_bytes + self.leftover_bytes
    }
}

impl Store {
    /// Removes one run (not its forks): renamed aside, then deleted.
    /// Returns the bytes freed.
    pub fn remove_run(&self, lock: &StoreLock, run: &Run) -> Result<u64, StoreError> {
        exclusive(lock);
        let aside = self
            .runs_dir()
            .join(format!(".old-{}-{}", run.id, std::process::id()));
        let _ = remove_tree(&aside);
        match std::fs::rename(&run.dir, &aside) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io(&run.dir)(e)),
        }
        let bytes = disk_bytes(&aside);
        remove_tree(&aside).map_err(io(&aside))?;
        Ok(bytes)
    }

    /// Removes pages no run's keyframes use, images no run uses, and what
    /// interrupted commands left behind. Fails, removing nothing, when a
    /// run's keyframes cannot be read (the pages it uses cannot be known).
    pub fn gc(&self, lock: &StoreLock) -> Result<GcReport, StoreError> {
        exclusive(lock);
        let mut report = GcReport::default();
        let runs = self.list()?;

        // With the lock held exclusive nothing is being written: every
        // temporary name is a leftover.
        let mut leftover = |p: PathBuf| {
            let bytes = disk_bytes(&p);
            if remove_tree(&p).is_ok() {
                report.leftovers_removed += 1;
                report.leftover_bytes += bytes;
            }
        };
        let is_temp = |name: &str| name.starts_with('.');
        for dir in [
            self.runs_dir(),
            self.home().join(IMAGES_DIR),
            self.home().join(EXAMPLES_DIR),
        ] {
            if let Ok(d) = std::fs::read_dir(&dir) {
                for e in d.flatten() {
                    if is_temp(&e.file_name().to_string_lossy()) {
                        leftover(e.path());
                    }
                }
            }
        }
        for r in &runs {
            if let Ok(d) = std::fs::read_dir(&r.dir) {
                for e in d.flatten() {
                    if is_temp(&e.file_name().to_string_lossy()) {
                        leftover(e.path());
                    }
                }
            }
        }

        // Pages: those of every run directory, listed or not (one whose
        // manifest or meta is damaged still keeps its pages).
        let mut used: BTreeSet<PageHash> = BTreeSet::new();
        let mut used_images: BTreeSet<String> = BTreeSet::new();
        let mut unknown_image = false;
        // Root files: all kept while a run's image view is unreadable.
        let mut used_files: Option<BTreeSet<String>> = Some(BTreeSet::new());
        let entries = match std::fs::read_dir(self.runs_dir()) {
            Ok(d) => d.flatten().collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(&self.runs_dir())(e)),
        };
        for e in entries {
            if is_temp(&e.file_name().to_string_lossy()) || !e.path().is_dir() {
                continue;
            }
            let dir = e.path();
            used.extend(run_pages(&dir).map_err(|err| StoreError::Corrupt {
                path: dir.clone(),
                what: format!(
                    "cannot tell which pages this run uses ({err}); nothing was removed \
                     (`rewind remove` the run to collect the rest)"
                ),
            })?);
            match (super::view::named_files(&dir), used_files.as_mut()) {
                (Ok(named), Some(used)) => used.extend(named),
                _ => used_files = None,
            }
            // Images are named by their hash: kept while any run has it.
            match super::read_json::<crate::run::Manifest>(&dir.join("manifest.json")) {
                Ok(m) => {
                    used_images.insert(m.image);
                }
                Err(_) => unknown_image = true,
            }
        }
        let pages = self.pages();
        report.damaged_packs = pages
            .unreadable_packs()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let (removed, bytes) = pages.retain(|h| used.contains(h))?;
        report.pages_removed += removed;
        report.page_bytes += bytes;
        report.pages_kept += pages.list()?.len() as u64;
        if let Ok(d) = std::fs::read_dir(pages.dir()) {
            for sub in d.flatten() {
                if let Ok(files) = std::fs::read_dir(sub.path()) {
                    for f in files.flatten() {
                        if is_temp(&f.file_name().to_string_lossy()) {
                            leftover(f.path());
                        }
                    }
                }
                // Only removed when empty.
                let _ = std::fs::remove_dir(sub.path());
            }
        }
        let _ = std::fs::remove_dir(pages.dir());

        // Imported images (all kept while a run's manifest is unreadable).
        let images = self.home().join(IMAGES_DIR);
        let listing = if unknown_image {
            None
        } else {
            std::fs::read_dir(&images).ok()
        };
        if let Some(d) = listing {
            for e in d.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if is_temp(&name) || used_images.contains(&name) {
                    continue;
                }
                let bytes = disk_bytes(&e.path());
                remove_tree(&e.path()).map_err(io(&e.path()))?;
                report.images_removed += 1;
                report.image_bytes += bytes;
            }
        }
        let _ = std::fs::remove_dir(&images);
        if let Some(used) = used_files {
            self.remove_files(&used, &mut report)?;
        }
        Ok(report)
    }

    /// Removes the root files (`files/`) no run's image view names.
    fn remove_files(
        &self,
        used: &BTreeSet<String>,
        report: &mut GcReport,
    ) -> Result<(), StoreError> {
        let files = self.home().join(super::view::FILES_DIR);
        let Ok(d) = std::fs::read_dir(&files) else {
            return Ok(());
        };
        for sub in d.flatten() {
            for f in std::fs::read_dir(sub.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = f.file_name().to_string_lossy().into_owned();
                if used.contains(&name) {
                    continue;
                }
                let bytes = disk_bytes(&f.path());
                std::fs::remove_file(f.path()).map_err(io(&f.path()))?;
                report.files_removed += 1;
                report.file_bytes += bytes;
            }
            let _ = std::fs::remove_dir(sub.path());
        }
        let _ = std::fs::remove_dir(&files);
        Ok(())
    }

    /// Forks that ran exactly as an older run did (the same events, output
    /// and ending), each with the older run it equals. A fork is listed only
    /// when every fork of it is listed too, so that pruning them all leaves
    /// no fork whose parent is gone. Forks before their parents.
    pub fn identical_forks(&self) -> Result<Vec<(Run, String)>, StoreError> {
        let mut runs = self.list()?;
        // Oldest first.
        runs.reverse();
        let mut events: HashMap<String, Vec<crate::run::Event>> = HashMap::new();
        let mut outputs: HashMap<String, Vec<u8>> = HashMap::new();
        let mut same_as: BTreeMap<String, String> = BTreeMap::new();
        let key = |r: &Run| {
            (
                r.manifest.image.clone(),
                r.meta.status.clone(),
                r.meta.steps,
                r.meta.events,
                r.meta.output_bytes,
            )
        };
        for (i, fork) in runs.iter().enumerate() {
            if fork.manifest.fork_of.is_none() {
                continue;
            }
            // Its parent first, then the other older runs, oldest first.
            let parent = fork.manifest.fork_of.as_ref().map(|f| f.parent.as_str());
            let mut older: Vec<&Run> = runs[..i].iter().filter(|r| key(r) == key(fork)).collect();
            older.sort_by_key(|r| Some(r.id.as_str()) != parent);
            for o in older {
                if Self::same_run(&mut events, &mut outputs, o, fork)? {
                    same_as.insert(fork.id.clone(), o.id.clone());
                    break;
                }
            }
        }
        // Keep a fork that has a fork that stays (newest first: forks are
        // decided before their parents).
        let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
        for r in &runs {
            if let Some(f) = &r.manifest.fork_of {
                children
                    .entry(f.parent.as_str())
                    .or_default()
                    .push(r.id.as_str());
            }
        }
        let mut out = Vec::new();
        let mut pruned: BTreeSet<String> = BTreeSet::new();
        for r in runs.iter().rev() {
            let Some(older) = same_as.get(&r.id) else {
                continue;
            };
            let kids_go = children
                .get(r.id.as_str())
                .is_none_or(|k| k.iter().all(|c| pruned.contains(*c)));
            if kids_go {
                pruned.insert(r.id.clone());
                out.push((r.clone(), older.clone()));
            }
        }
        Ok(out)
    }

    fn same_run(
        events: &mut HashMap<String, Vec<crate::run::Event>>,
        outputs: &mut HashMap<String, Vec<u8>>,
        a: &Run,
        b: &Run,
    ) -> Result<bool, StoreError> {
        if a.meta.exit != b.meta.exit || a.meta.steps != b.meta.steps {
            return Ok(false);
        }
        for r in [a, b] {
            if !outputs.contains_key(&r.id) {
                outputs.insert(r.id.clone(), r.output()?);
            }
        }
        if outputs[&a.id] != outputs[&b.id] {
            return Ok(false);
        }
        for r in [a, b] {
            if !events.contains_key(&r.id) {
                events.insert(r.id.clone(), r.events()?);
            }
        }
        Ok(first_divergence(&events[&a.id], &events[&b.id], 0).is_none())
    }
}
