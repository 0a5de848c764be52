//! The program's files: loadedSources, source (a file not on this host,
//! from the run's image or debuginfod) and modules, and the file a
//! request's `source` names. docs/dap.md says what each answers.

use super::replies::{body, page, Source, SourcesReply};
use super::session::Session;
use anyhow::{anyhow, bail, Result};
use dap::requests::{ModulesArguments, SourceArguments};
use dap::responses::{ModulesResponse, SourceResponse};
use dap::types::{Module, ModuleId};
use serde_json::Value;

impl Session {
    /// The file a request's `source` names: its path, or the file behind its
    /// `sourceReference`.
    pub(super) fn path_of(&self, source: &dap::types::Source) -> Result<String> {
        match (&source.path, source.source_reference) {
            (Some(p), _) => Ok(p.clone()),
            (None, Some(r)) if r > 0 => self
                .source_path(r as i64)
                .ok_or_else(|| anyhow!("`source.sourceReference`: no source {r}")),
            _ => bail!("`source.path` is required"),
        }
    }

    /// The source files of the program's line tables.
    pub fn loaded_sources(&mut self) -> Result<Option<Value>> {
        let files: Vec<String> = self.live()?.lines.files().to_vec();
        let sources: Vec<Source> = files.iter().map(|p| self.source_of(p)).collect();
        Ok(Some(body(&SourcesReply { sources })))
    }

    /// `path` as DAP names it, with a `sourceReference` when the file is
    /// not on this host (the client then asks `source` for it).
    pub fn source_of(&mut self, path: &str) -> Source {
        let mut s = Source::local(path);
        if !std::path::Path::new(path).exists() {
            s.source_reference = Some(self.source_ref(path));
            s.origin = Some("from the run's image or debuginfod".into());
        }
        s
    }

    pub fn source(&mut self, a: SourceArguments) -> Result<Option<Value>> {
        let path = match a.source.as_ref().and_then(|s| s.path.clone()) {
            Some(p) if a.source_reference == 0 => p,
            _ => self
                .source_path(a.source_reference)
                .ok_or_else(|| anyhow!("`sourceReference`: no source {}", a.source_reference))?,
        };
        let live = self.live()?;
        let sym = live
            .sym
            .clone()
            .ok_or_else(|| anyhow!("the program has no symbols"))?;
        let k = live.core.kernel();
        let mut image = |p: &str| k.file_contents(p);
        let src = sym
            .source(&path, None, &mut image)
            .map_err(|e| anyhow!("`source`: {e}"))?;
        Ok(Some(body(&SourceResponse {
            content: src.text,
            mime_type: Some("text/x-c".into()),
        })))
    }

    pub fn modules(&mut self, a: ModulesArguments) -> Result<Option<Value>> {
        let live = self.live()?;
        let Some(sym) = live.sym.clone() else {
            return Ok(Some(body(&ModulesResponse {
                modules: Vec::new(),
                total_modules: Some(0),
            })));
        };
        let all: Vec<Module> = sym
            .modules()
            .iter()
            .map(|m| {
                let origin = m.module.debug_origin();
                let status = match origin {
                    symbols::DebugOrigin::None => "symbols only (no debug info)".to_string(),
                    symbols::DebugOrigin::Embedded => "debug info loaded".to_string(),
                    symbols::DebugOrigin::HostFile(p) => format!("debug info from {}", p.display()),
                    symbols::DebugOrigin::Debuginfod(p) => {
                        format!("debug info from debuginfod ({})", p.display())
                    }
                };
                let file = match origin {
                    symbols::DebugOrigin::HostFile(p) | symbols::DebugOrigin::Debuginfod(p) => {
                        Some(p.display().to_string())
                    }
                    _ => None,
                };
                Module {
                    id: ModuleId::String(m.module.build_id_hex().unwrap_or_else(|| m.path.clone())),
                    name: m.path.rsplit('/').next().unwrap_or(&m.path).to_string(),
                    path: Some(m.path.clone()),
                    is_optimized: None,
                    is_user_code: Some(true),
                    version: None,
                    symbol_status: Some(status),
                    symbol_file_path: file,
                    date_time_stamp: None,
                    address_range: Some(format!("{:#x}-{:#x}", m.start, m.end)),
                }
            })
            .collect();
        let total = all.len();
        let modules = page(all, a.start_module, a.module_count);
        Ok(Some(body(&ModulesResponse {
            modules,
            total_modules: Some(total as i64),
        })))
    }
}
