//! The language server's state: what reads the store ([`Core`]: the
//! index, the machine for seeks, the last findings) and what the protocol
//! side and the commands share ([`Shared`]).

use super::findings::Finding;
use super::index::Index;
use super::places::Machine;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tower_lsp::lsp_types::*;
use tower_lsp::Client;

/// What reads the store: the index, the machine for seeks, the last findings.
pub struct Core {
    pub index: Index,
    pub machine: Machine,
    pub findings: BTreeMap<String, Vec<Finding>>,
    /// The run chosen for inlay hints, by program (`rewind.selectRun`).
    pub selected: HashMap<PathBuf, String>,
}

/// The lines of one file that threads stood on in one run.
pub struct FileLines {
    pub run: String,
    all: std::sync::Arc<super::coverage::Lines>,
    /// The file's key in `all` (as debug info names it).
    key: Option<String>,
}

impl FileLines {
    /// Per 1-based line: the spans of steps threads stood on it.
    pub fn lines(&self) -> impl Iterator<Item = (&u32, &Vec<super::coverage::Span>)> {
        self.key
            .as_ref()
            .and_then(|k| self.all.get(k))
            .into_iter()
            .flatten()
    }
}

impl Core {
    /// The steps at each line of `file` in the chosen run of its program
    /// (by default the program's newest run).
    pub fn file_lines(&mut self, file: &str) -> std::result::Result<Option<FileLines>, String> {
        let programs = self.index.programs_of(file);
        let Some((p, run)) = programs.into_iter().find_map(|p| {
            let run = self
                .selected
                .get(&p.path)
                .cloned()
                .or(p.newest_run.clone())?;
            Some((p, run))
        }) else {
            return Ok(None);
        };
        let index = &self.index;
        let all = self.machine.lines(&run, &|f: &str| index.in_workspace(f))?;
        let key = p
            .sources
            .iter()
            .find(|s| all.contains_key(*s) && super::index::same_file(s, file))
            .cloned();
        Ok(Some(FileLines { run, all, key }))
    }
}

/// Locks a mutex even after a panic in another holder: the state is
/// caches, and a panic is logged where it happened.
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The server's state, shared with the store watcher.
pub struct Shared {
    pub client: Client,
    pub core: Arc<Mutex<Option<Core>>>,
    /// Open documents' text.
    pub docs: Mutex<HashMap<Url, String>>,
    /// Files that have diagnostics published now.
    pub published: tokio::sync::Mutex<HashSet<Url>>,
    /// The client shows progress the server starts (`window.workDoneProgress`).
    pub progress_capable: std::sync::atomic::AtomicBool,
    /// Commands running, by progress token: what cancels each.
    pub cancels: Mutex<HashMap<String, tokio::sync::oneshot::Sender<()>>>,
}
