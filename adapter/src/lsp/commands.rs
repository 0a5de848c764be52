//! `workspace/executeCommand`: "Record" and "Check 64 schedules" run this
//! very `rewind` binary (`rewind run`, `rewind check`) with work-done
//! progress, then publish diagnostics from what they left in the store.

use super::replies::{CommandReply, SelectedRun};
use super::state::{lock, Shared};
use crate::util::json_value;
use serde_json::Value;
use std::path::PathBuf;
use tokio::io::AsyncBufReadExt;
use tower_lsp::jsonrpc::{Error, Result};
use tower_lsp::lsp_types::notification::Progress;
use tower_lsp::lsp_types::request::WorkDoneProgressCreate;
use tower_lsp::lsp_types::*;

pub const RECORD: &str = "rewind.record";
pub const CHECK: &str = "rewind.check";
pub const SELECT_RUN: &str = "rewind.selectRun";
pub const COMMANDS: &[&str] = &[RECORD, CHECK, SELECT_RUN];
/// Schedules the "Check" lens tries (as `rewind check` does by default).
pub const SCHEDULES: u64 = crate::app::check::DEFAULT_SCHEDULES;

/// What a command runs: `{"program": PATH, "args": [..]}`.
#[derive(serde::Deserialize)]
struct Target {
    program: PathBuf,
    #[serde(default)]
    args: Vec<String>,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::invalid_params(msg.into())
}

/// `rewind.selectRun {"run": RUN}`: the run whose steps the inlay hints
/// of its program's files show (RUN as `rewind` takes it: id, prefix, @, name).
async fn select_run(b: &Shared, params: ExecuteCommandParams) -> Result<Option<Value>> {
    let spec = params
        .arguments
        .first()
        .and_then(|a| a.get("run"))
        .and_then(|r| r.as_str())
        .map(str::to_string)
        .ok_or_else(|| invalid("the command takes one argument, {\"run\"}"))?;
    let chosen = b
        .with_core(move |c| {
            let run = c.index.store.resolve(&spec).map_err(|e| e.to_string())?;
            let program = super::index::program_path(&run)
                .ok_or_else(|| format!("run {}: its program is not on this host", run.id))?;
            c.selected.insert(program.clone(), run.id.clone());
            Ok::<_, String>(json_value(&SelectedRun {
                run: &run.id,
                program: &program,
            }))
        })
        .await
        .ok_or_else(|| invalid("the server has no store"))?
        .map_err(invalid)?;
    let _ = b.client.inlay_hint_refresh().await;
    Ok(Some(chosen))
}

pub async fn execute(b: &Shared, params: ExecuteCommandParams) -> Result<Option<Value>> {
    let check = match params.command.as_str() {
        SELECT_RUN => return select_run(b, params).await,
        RECORD => false,
        CHECK => true,
        other => return Err(invalid(format!("no command {other:?}"))),
    };
    let arg = params
        .arguments
        .into_iter()
        .next()
        .ok_or_else(|| invalid("the command takes one argument, {\"program\", \"args\"}"))?;
    let target: Target =
        serde_json::from_value(arg).map_err(|e| invalid(format!("the argument: {e}")))?;
    let exe = std::env::current_exe().map_err(|e| Error {
        code: tower_lsp::jsonrpc::ErrorCode::InternalError,
        message: format!("cannot find the rewind binary: {e}").into(),
        data: None,
    })?;
    let name = target
        .program
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let title = if check {
        format!("rewind check {name}")
    } else {
        format!("rewind run {name}")
    };
    let token = progress_token(b, params.work_done_progress_params.work_done_token).await;
    let progress = WorkDone {
        b,
        token: token.clone(),
    };
    let (cancel_tx, cancel_rx) = tokio::sync::oneshot::channel();
    if let Some(t) = &token {
        lock(&b.cancels).insert(token_key(t), cancel_tx);
    }
    progress
        .send(WorkDoneProgress::Begin(WorkDoneProgressBegin {
            title: title.clone(),
            cancellable: Some(token.is_some()),
            message: None,
            percentage: Some(0),
        }))
        .await;

    let cmd = command(exe, check, &target);
    let outcome = run_with_progress(cmd, check, &progress, cancel_rx).await;
    if let Some(t) = &token {
        lock(&b.cancels).remove(&token_key(t));
    }
    let message = match &outcome {
        Ok(r) if r.cancelled => "cancelled".to_string(),
        Ok(r) => format!("exit {}", r.code),
        Err(e) => e.clone(),
    };
    progress
        .send(WorkDoneProgress::End(WorkDoneProgressEnd {
            message: Some(message),
        }))
        .await;
    b.refresh().await;
    reply(b, &title, outcome).await
}

/// The progress token: the client's, else one the server makes for a
/// client that says it shows progress the server starts.
async fn progress_token(b: &Shared, given: Option<NumberOrString>) -> Option<NumberOrString> {
    if given.is_some() {
        return given;
    }
    if !b
        .progress_capable
        .load(std::sync::atomic::Ordering::Relaxed)
    {
        return None;
    }
    let t = NumberOrString::String(format!("rewind-{}", next_token()));
    b.client
        .send_request::<WorkDoneProgressCreate>(WorkDoneProgressCreateParams { token: t.clone() })
        .await
        .ok()
        .map(|()| t)
}

/// `rewind check` or `rewind run -q` of the target, its output piped.
fn command(exe: std::path::PathBuf, check: bool, target: &Target) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(exe);
    if check {
        cmd.args(["check", "--schedules", &SCHEDULES.to_string()]);
    } else {
        cmd.args(["run", "-q"]);
    }
    cmd.arg("--")
        .arg(&target.program)
        .args(&target.args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    // A cancel is a SIGINT: the child must not inherit the server's SIG_IGN
    // (an editor started in the background), or one sent before its handler
    // is in place is lost. SAFETY: signal(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    cmd
}

/// The command's answer: its exit, output and whether it was cancelled;
/// trouble (an exit above 1) is also shown to the user.
async fn reply(
    b: &Shared,
    title: &str,
    outcome: std::result::Result<Ran, String>,
) -> Result<Option<Value>> {
    match outcome {
        Ok(r) => {
            if r.code != 0 && r.code != 1 && !r.cancelled {
                b.client
                    .show_message(
                        MessageType::WARNING,
                        format!("{title}: {}", r.stderr.lines().last().unwrap_or("failed")),
                    )
                    .await;
            }
            Ok(Some(json_value(&CommandReply {
                exit: r.code,
                cancelled: r.cancelled,
                stdout: &r.stdout,
                stderr: &r.stderr,
            })))
        }
        Err(e) => Err(Error {
            code: tower_lsp::jsonrpc::ErrorCode::InternalError,
            message: e.into(),
            data: None,
        }),
    }
}

/// `window/workDoneProgress/cancel`: stops the command with that token.
pub fn cancel(b: &Shared, token: &NumberOrString) {
    if let Some(tx) = lock(&b.cancels).remove(&token_key(token)) {
        let _ = tx.send(());
    }
}

fn token_key(t: &NumberOrString) -> String {
    match t {
        NumberOrString::Number(n) => format!("n{n}"),
        NumberOrString::String(s) => format!("s{s}"),
    }
}

/// Work-done progress of one command; nothing when the client takes none.
struct WorkDone<'a> {
    b: &'a Shared,
    token: Option<NumberOrString>,
}

impl WorkDone<'_> {
    async fn send(&self, value: WorkDoneProgress) {
        if let Some(token) = &self.token {
            self.b
                .client
                .send_notification::<Progress>(ProgressParams {
                    token: token.clone(),
                    value: ProgressParamsValue::WorkDone(value),
                })
                .await;
        }
    }
}

/// How a command ended.
struct Ran {
    code: i32,
    cancelled: bool,
    stdout: String,
    stderr: String,
}

fn next_token() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Runs the command; a check's `schedule N:` lines are progress reports.
/// A cancel interrupts it (SIGINT: `rewind` stops as at Ctrl-C, and a run
/// not finished never lands in the store).
async fn run_with_progress(
    mut cmd: tokio::process::Command,
    check: bool,
    progress: &WorkDone<'_>,
    mut cancel: tokio::sync::oneshot::Receiver<()>,
) -> std::result::Result<Ran, String> {
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start rewind: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let err_task = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let mut out = String::new();
    let mut tried = 0u64;
    let mut cancelled = false;
    loop {
        let line = tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(l)) => l,
                _ => break,
            },
            Ok(()) = &mut cancel, if !cancelled => {
                cancelled = true;
                if let Some(pid) = child.id() {
                    // SAFETY: signalling our own child by its pid.
                    unsafe { libc::kill(pid as i32, libc::SIGINT) };
                }
                continue;
            }
        };
        if check && line.starts_with("schedule ") && line.contains(" run ") {
            tried += 1;
            progress
                .send(WorkDoneProgress::Report(WorkDoneProgressReport {
                    cancellable: Some(true),
                    message: Some(format!("{tried} of {} schedules", SCHEDULES + 1)),
                    percentage: Some((tried * 100 / (SCHEDULES + 1)).min(100) as u32),
                }))
                .await;
        }
        out.push_str(&line);
        out.push('\n');
    }
    let status = child
        .wait()
        .await
        .map_err(|e| format!("rewind did not finish: {e}"))?;
    let err = err_task.await.unwrap_or_default();
    use std::os::unix::process::ExitStatusExt;
    Ok(Ran {
        code: status
            .code()
            .or_else(|| status.signal().map(|s| 128 + s))
            .unwrap_or(-1),
        cancelled,
        stdout: out,
        stderr: err,
    })
}
