//! Where separate debug info is looked for, in order: the host's
//! `/usr/lib/debug/.build-id/xx/yyyy.debug` (and any other directory given),
//! then debuginfod.

use crate::debuginfod::{Artifact, Debuginfod};
use crate::module::{hex, DebugOrigin};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Looks for debug info by build id, and keeps what went wrong on the way
/// (a server that cannot be reached) for the caller to say.
#[derive(Debug, Clone)]
pub struct DebugFinder {
    /// Directories holding `.build-id/xx/yyyy.debug`.
    pub debug_dirs: Vec<PathBuf>,
    pub debuginfod: Option<Arc<Debuginfod>>,
    notes: Arc<Mutex<Vec<String>>>,
}

impl Default for DebugFinder {
    fn default() -> Self {
        DebugFinder {
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            debuginfod: None,
            notes: Default::default(),
        }
    }
}

impl DebugFinder {
    /// The host's debug directory, and debuginfod when `$DEBUGINFOD_URLS` names servers.
    pub fn from_env(timeout: std::time::Duration) -> DebugFinder {
        DebugFinder {
            debuginfod: Debuginfod::from_env(timeout).map(Arc::new),
            ..DebugFinder::default()
        }
    }

    /// A finder that looks nowhere.
    pub fn none() -> DebugFinder {
        DebugFinder {
            debug_dirs: Vec::new(),
            ..DebugFinder::default()
        }
    }

    /// The separate debug file's bytes for a build id, and where it came from.
    pub fn find(&self, build_id: Option<&[u8]>) -> Option<(Vec<u8>, DebugOrigin)> {
        let id = hex(build_id?);
        if id.len() < 3 {
            return None;
        }
        for dir in &self.debug_dirs {
            let p = dir
                .join(".build-id")
                .join(&id[..2])
                .join(format!("{}.debug", &id[2..]));
            if let Ok(bytes) = std::fs::read(&p) {
                return Some((bytes, DebugOrigin::HostFile(p)));
            }
        }
        let d = self.debuginfod.as_ref()?;
        match d.fetch(&id, Artifact::Debuginfo) {
            Ok(p) => match std::fs::read(&p) {
                Ok(bytes) => Some((bytes, DebugOrigin::Debuginfod(p))),
                Err(e) => {
                    self.note(format!("cannot read {}: {e}", p.display()));
                    None
                }
            },
            Err(e) => {
                self.note(format!("no debug info for build id {id}: {e}"));
                None
            }
        }
    }

    pub(crate) fn note(&self, line: String) {
        let mut notes = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        if !notes.contains(&line) {
            notes.push(line);
        }
    }

    /// What went wrong while looking (each said once), for the caller to print.
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
