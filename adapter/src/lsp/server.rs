//! The protocol side: tower-lsp's `LanguageServer`. Everything that reads
//! the store or seeks a run happens in [`Core`], on tokio's blocking pool;
//! this file turns findings into LSP messages.

use super::commands;
use super::findings::{Finding, Severity};
use super::index::Index;
use super::lenses;
use super::places::Machine;
use super::replies::{OpenArgs, ProgramArgs};
use super::state::{lock, Core, Shared};
use crate::util::json_value;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tower_lsp::jsonrpc::Result;
use tower_lsp::lsp_types::*;
use tower_lsp::{Client, LanguageServer};

/// The client command that opens a run in the debugger (the VS Code
/// extension registers it; the Neovim plugin defines it).
pub const OPEN_COMMAND: &str = "rewind.open";

/// What tower-lsp serves.
pub struct Backend(Arc<Shared>);

impl std::ops::Deref for Backend {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl Backend {
    pub fn new(client: Client) -> Backend {
        Backend(Arc::new(Shared {
            client,
            core: Arc::new(Mutex::new(None)),
            docs: Mutex::new(HashMap::new()),
            published: tokio::sync::Mutex::new(HashSet::new()),
            progress_capable: Default::default(),
            cancels: Mutex::new(HashMap::new()),
        }))
    }

    /// `window/workDoneProgress/cancel` (tower-lsp 0.20 has no method for it).
    pub async fn cancel_progress(&self, params: WorkDoneProgressCancelParams) {
        commands::cancel(self, &params.token);
    }
}

impl Shared {
    /// Runs `f` on the core in tokio's blocking pool; a panic is logged
    /// and gives None.
    pub async fn with_core<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Core) -> R + Send + 'static,
    ) -> Option<R> {
        let core = self.core.clone();
        let r = tokio::task::spawn_blocking(move || lock(&core).as_mut().map(f)).await;
        match r {
            Ok(r) => r,
            Err(e) => {
                self.client
                    .log_message(
                        MessageType::ERROR,
                        format!("rewind lsp: internal error: {e}"),
                    )
                    .await;
                None
            }
        }
    }

    /// Reads the store again and publishes every file's diagnostics
    /// (an empty list where they went away).
    pub async fn refresh(&self) {
        let Some((findings, log)) = self
            .with_core(|c| {
                let (f, log) = c.index.refresh(&mut c.machine);
                c.findings = f.clone();
                (f, log)
            })
            .await
        else {
            return;
        };
        for l in log {
            self.client.log_message(MessageType::WARNING, l).await;
        }
        let mut published = self.published.lock().await;
        let mut now = HashSet::new();
        for (file, fs) in &findings {
            let Ok(uri) = Url::from_file_path(file) else {
                continue;
            };
            let diags = fs.iter().map(|f| self.diagnostic(f)).collect();
            self.client
                .publish_diagnostics(uri.clone(), diags, None)
                .await;
            now.insert(uri);
        }
        for gone in published.difference(&now) {
            self.client
                .publish_diagnostics(gone.clone(), Vec::new(), None)
                .await;
        }
        *published = now;
    }

    fn text_of(&self, file: &str) -> Option<String> {
        let uri = Url::from_file_path(file).ok()?;
        if let Some(t) = lock(&self.docs).get(&uri) {
            return Some(t.clone());
        }
        std::fs::read_to_string(file).ok()
    }

    /// The range of a 1-based line: from its first non-blank character to its end.
    fn line_range(&self, file: &str, line: u32) -> Range {
        let l = line.saturating_sub(1);
        let (start, end) = self
            .text_of(file)
            .and_then(|t| {
                let text = t.lines().nth(l as usize)?.to_string();
                let indent = text.len() - text.trim_start().len();
                Some((
                    text[..indent].encode_utf16().count() as u32,
                    text.encode_utf16().count() as u32,
                ))
            })
            .unwrap_or((0, 0));
        Range::new(Position::new(l, start), Position::new(l, end.max(start)))
    }

    fn diagnostic(&self, f: &Finding) -> Diagnostic {
        let related: Vec<DiagnosticRelatedInformation> = f
            .related
            .iter()
            .filter_map(|r| {
                Some(DiagnosticRelatedInformation {
                    location: Location::new(
                        Url::from_file_path(&r.file).ok()?,
                        self.line_range(&r.file, r.line),
                    ),
                    message: r.message.clone(),
                })
            })
            .collect();
        Diagnostic {
            range: self.line_range(&f.file, f.line),
            severity: Some(match f.severity {
                Severity::Error => DiagnosticSeverity::ERROR,
                Severity::Warning => DiagnosticSeverity::WARNING,
            }),
            code: Some(NumberOrString::String(f.kind.to_string())),
            source: Some("rewind".into()),
            message: f.message.clone(),
            related_information: (!related.is_empty()).then_some(related),
            data: Some(open_args(f)),
            ..Default::default()
        }
    }

    /// Findings of a file whose line (0-based) is in `lines`.
    fn findings_at(&self, uri: &Url, lines: std::ops::RangeInclusive<u32>) -> Vec<Finding> {
        let Some(path) = uri.to_file_path().ok() else {
            return Vec::new();
        };
        let core = lock(&self.core);
        let Some(core) = core.as_ref() else {
            return Vec::new();
        };
        core.findings
            .iter()
            .filter(|(file, _)| super::index::same_file(file, &path.to_string_lossy()))
            .flat_map(|(_, fs)| fs.iter())
            .filter(|f| lines.contains(&f.line.saturating_sub(1)))
            .cloned()
            .collect()
    }
}

impl Shared {
    /// The events of the steps threads stood on this (1-based) line, in the
    /// chosen run; empty when there are none.
    async fn steps_hover(&self, uri: &Url, line: u32) -> String {
        let Ok(path) = uri.to_file_path() else {
            return String::new();
        };
        let file = path.to_string_lossy().into_owned();
        let got = self
            .with_core(move |c| {
                let fl = c.file_lines(&file).ok()??;
                let at = fl.lines().find(|(l, _)| **l == line)?.1.clone();
                let run = c.index.store.resolve(&fl.run).ok()?;
                let steps: std::collections::BTreeSet<u64> =
                    super::coverage::steps(&at).take(HOVER_STEPS).collect();
                let events: Vec<String> = run
                    .events()
                    .ok()?
                    .into_iter()
                    .filter(|e| steps.contains(&e.step))
                    .map(|e| e.to_string().trim_start().to_string())
                    .collect();
                Some((fl.run, super::coverage::label(&at), events))
            })
            .await
            .flatten();
        match got {
            Some((run, label, events)) => format!(
                "**{label}** (run `{run}`)\n\n```\n{}\n```\n\n",
                events.join("\n")
            ),
            None => String::new(),
        }
    }
}

/// Steps whose events a hover shows, at most.
const HOVER_STEPS: usize = 8;

/// `{"run", "step", "compare"?}`: the argument of `rewind.open`, and a diagnostic's `data`.
pub fn open_args(f: &Finding) -> Value {
    json_value(&OpenArgs {
        run: &f.run,
        step: f.step,
        compare: f.compare.as_deref(),
    })
}

fn workspace_roots(params: &InitializeParams) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = params
        .workspace_folders
        .iter()
        .flatten()
        .filter_map(|f| f.uri.to_file_path().ok())
        .collect();
    #[allow(deprecated)]
    if roots.is_empty() {
        if let Some(p) = params.root_uri.as_ref().and_then(|u| u.to_file_path().ok()) {
            roots.push(p);
        } else if let Some(p) = params.root_path.as_ref() {
            roots.push(PathBuf::from(p));
        }
    }
    if roots.is_empty() {
        roots.extend(std::env::current_dir().ok());
    }
    roots
}

fn is_rust(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "rs")
}

#[tower_lsp::async_trait]
impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let roots = workspace_roots(&params);
        let progress = params
            .capabilities
            .window
            .as_ref()
            .and_then(|w| w.work_done_progress)
            .unwrap_or(false);
        self.progress_capable
            .store(progress, std::sync::atomic::Ordering::Relaxed);
        match vmm::store::Store::from_env() {
            Ok(store) => {
                *lock(&self.core) = Some(Core {
                    index: Index::new(store.clone(), roots),
                    machine: Machine::new(store),
                    findings: BTreeMap::new(),
                    selected: HashMap::new(),
                })
            }
            Err(e) => {
                self.client
                    .log_message(MessageType::ERROR, format!("rewind lsp: {e}"))
                    .await
            }
        }
        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                text_document_sync: Some(TextDocumentSyncCapability::Kind(
                    TextDocumentSyncKind::FULL,
                )),
                code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
                code_lens_provider: Some(CodeLensOptions {
                    resolve_provider: Some(false),
                }),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: commands::COMMANDS.iter().map(|c| c.to_string()).collect(),
                    work_done_progress_options: WorkDoneProgressOptions {
                        work_done_progress: Some(true),
                    },
                }),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                inlay_hint_provider: Some(OneOf::Left(true)),
                ..Default::default()
            },
            server_info: Some(ServerInfo {
                name: "rewind".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        let home = lock(&self.core)
            .as_ref()
            .map(|c| c.index.store.home().to_path_buf());
        let roots = lock(&self.core)
            .as_ref()
            .map(|c| c.index.roots().to_vec())
            .unwrap_or_default();
        self.client
            .log_message(
                MessageType::INFO,
                format!(
                    "rewind lsp: store {}, workspace {}",
                    home.as_deref()
                        .map_or("(none)".into(), |h| h.display().to_string()),
                    roots
                        .iter()
                        .map(|r| r.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .await;
        self.refresh().await;
        if let Some(home) = home {
            let shared = self.0.clone();
            tokio::spawn(async move {
                let dirs = super::watch::watched(&home);
                let mut last = super::watch::stamp(&dirs);
                loop {
                    tokio::time::sleep(super::watch::INTERVAL).await;
                    let now = super::watch::stamp(&dirs);
                    if now != last {
                        last = now;
                        shared.refresh().await;
                    }
                }
            });
        }
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        lock(&self.docs).insert(params.text_document.uri, params.text_document.text);
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        if let Some(c) = params.content_changes.into_iter().last() {
            lock(&self.docs).insert(params.text_document.uri, c.text);
        }
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        lock(&self.docs).remove(&params.text_document.uri);
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let r = params.range;
        let found = self.findings_at(&params.text_document.uri, r.start.line..=r.end.line);
        let actions: Vec<CodeActionOrCommand> = found
            .iter()
            .map(|f| {
                let title = format!("Open in debugger at step {}", f.step);
                CodeActionOrCommand::CodeAction(CodeAction {
                    title: title.clone(),
                    kind: Some(CodeActionKind::QUICKFIX),
                    diagnostics: Some(vec![self.0.diagnostic(f)]),
                    command: Some(Command {
                        title,
                        command: OPEN_COMMAND.into(),
                        arguments: Some(vec![open_args(f)]),
                    }),
                    ..Default::default()
                })
            })
            .collect();
        Ok(Some(actions))
    }

    async fn code_lens(&self, params: CodeLensParams) -> Result<Option<Vec<CodeLens>>> {
        let uri = params.text_document.uri;
        let Ok(path) = uri.to_file_path() else {
            return Ok(None);
        };
        let file = path.to_string_lossy().into_owned();
        let Some(text) = self.text_of(&file) else {
            return Ok(Some(Vec::new()));
        };
        let entries = lenses::entries(&text, is_rust(&path));
        if entries.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let f = file.clone();
        let Some((programs, failing)) = self
            .with_core(move |c| {
                let programs = c.index.programs_of(&f);
                // The newest failing run of each program: a finding in any of its files.
                let failing: Vec<Option<Value>> = programs
                    .iter()
                    .map(|p| {
                        let mut fs: Vec<&Finding> = c
                            .findings
                            .iter()
                            .filter(|(file, _)| p.sources.contains(file))
                            .flat_map(|(_, fs)| fs.iter())
                            .collect();
                        fs.sort_by_key(|f| f.kind != "deciding-step");
                        fs.first().map(|f| open_args(f))
                    })
                    .collect();
                (programs, failing)
            })
            .await
        else {
            return Ok(None);
        };
        let module = lenses::module_of(&path);
        let mut out = Vec::new();
        for e in &entries {
            let range = Range::new(Position::new(e.line, 0), Position::new(e.line, 0));
            // `main`'s lenses run the programs, a test's the test harnesses.
            let runs: Vec<_> = programs
                .iter()
                .zip(&failing)
                .filter(|(p, _)| p.test_harness == e.test.is_some())
                .collect();
            for &(p, failing) in &runs {
                let args = match &e.test {
                    Some(name) => {
                        let full = module.iter().chain([name]).cloned().collect::<Vec<_>>();
                        vec![full.join("::"), "--exact".into(), "--test-threads=1".into()]
                    }
                    None => p.args.clone(),
                };
                let arg = json_value(&ProgramArgs {
                    program: &p.path,
                    args,
                });
                let suffix = if runs.len() > 1 {
                    format!(
                        " ({})",
                        p.path.file_name().unwrap_or_default().to_string_lossy()
                    )
                } else {
                    String::new()
                };
                let lens = |title: String, command: &str, arg: Value| CodeLens {
                    range,
                    command: Some(Command {
                        title,
                        command: command.into(),
                        arguments: Some(vec![arg]),
                    }),
                    data: None,
                };
                out.push(lens(
                    format!("Record{suffix}"),
                    commands::RECORD,
                    arg.clone(),
                ));
                out.push(lens(
                    format!("Check {} schedules{suffix}", commands::SCHEDULES),
                    commands::CHECK,
                    arg.clone(),
                ));
                if let Some(open) = failing {
                    out.push(lens(
                        format!("Open last failing run{suffix}"),
                        OPEN_COMMAND,
                        open.clone(),
                    ));
                }
            }
        }
        Ok(Some(out))
    }

    async fn inlay_hint(&self, params: InlayHintParams) -> Result<Option<Vec<InlayHint>>> {
        let Ok(path) = params.text_document.uri.to_file_path() else {
            return Ok(None);
        };
        let file = path.to_string_lossy().into_owned();
        let f = file.clone();
        let Some(got) = self.with_core(move |c| c.file_lines(&f)).await else {
            return Ok(None);
        };
        let fl = match got {
            Ok(Some(fl)) => fl,
            Ok(None) => return Ok(Some(Vec::new())),
            Err(e) => {
                self.client
                    .log_message(MessageType::WARNING, format!("rewind lsp: {e}"))
                    .await;
                return Ok(Some(Vec::new()));
            }
        };
        let range = params.range;
        let text = self.text_of(&file).unwrap_or_default();
        let ends: Vec<u32> = text
            .lines()
            .map(|l| l.encode_utf16().count() as u32)
            .collect();
        let hints = fl
            .lines()
            .filter(|(line, _)| (range.start.line..=range.end.line).contains(&(*line - 1)))
            .map(|(line, at)| InlayHint {
                position: Position::new(
                    line - 1,
                    ends.get(*line as usize - 1).copied().unwrap_or(0),
                ),
                label: InlayHintLabel::String(super::coverage::label(at)),
                kind: None,
                text_edits: None,
                tooltip: Some(InlayHintTooltip::String(format!(
                    "steps and threads at this line in run {}",
                    fl.run
                ))),
                padding_left: Some(true),
                padding_right: None,
                data: None,
            })
            .collect();
        Ok(Some(hints))
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        commands::execute(self, params).await
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let p = params.text_document_position_params;
        let line = p.position.line;
        let found = self.findings_at(&p.text_document.uri, line..=line);
        let mut md = self.steps_hover(&p.text_document.uri, line + 1).await;
        if found.is_empty() && md.is_empty() {
            return Ok(None);
        }
        for f in &found {
            md.push_str(&format!(
                "**{}**\n\nrun `{}`, step {}\n\n```\n{}\n```\n\n",
                f.message,
                f.run,
                f.step,
                f.events.join("\n")
            ));
        }
        Ok(Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value: md,
            }),
            range: None,
        }))
    }
}
