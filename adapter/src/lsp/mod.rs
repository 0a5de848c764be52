//! `rewind lsp`: a language server (tower-lsp, over stdio) that shows what
//! the recordings know in the source: the line where a check's deciding
//! step switched threads, where a thread crashed, where deadlocked threads
//! wait, failed SDK assertions, where a timed-out run spun (docs/lsp.md).
//!
//! - `findings`: from store facts and thread places to findings (no protocol, no I/O);
//! - `index`: which runs are the workspace's, the newest verdict of each program;
//! - `places`: where threads stood, by seeking the machine;
//! - `coverage`: the lines threads stood on, step by step (inlay hints);
//! - `lenses`: where code lenses go;
//! - `commands`: Record and Check, run with work-done progress;
//! - `watch`: noticing new runs and checks;
//! - `input`: standard input, framed (`crate::framing`) and checked before tower-lsp;
//! - `state`: what the protocol side and the commands share;
//! - `server`: the protocol.

pub mod commands;
pub mod coverage;
pub mod findings;
pub mod index;
mod input;
pub mod lenses;
pub mod places;
mod replies;
pub mod server;
mod state;
pub mod watch;

#[cfg(test)]
mod tests;

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct LspArgs {
    /// Speak LSP on standard input and output (the only transport; clients pass it).
    #[arg(long)]
    pub stdio: bool,
}

pub fn main(_args: LspArgs) -> Result<i32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(serve());
    // Standard input's reader may still be blocked in a read: do not wait for it.
    rt.shutdown_background();
    Ok(0)
}

async fn serve() {
    let (service, socket) = tower_lsp::LspService::build(server::Backend::new)
        .custom_method(
            "window/workDoneProgress/cancel",
            server::Backend::cancel_progress,
        )
        .finish();
    let client = service.inner().client.clone();
    let (bad_tx, mut bad_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Some(why) = bad_rx.recv().await {
            client
                .log_message(
                    tower_lsp::lsp_types::MessageType::ERROR,
                    format!("rewind lsp: ignored a malformed message: {why}"),
                )
                .await;
        }
    });
    let (to_server, from_pump) = tokio::io::duplex(1 << 20);
    tokio::spawn(input::pump(tokio::io::stdin(), to_server, move |why| {
        let _ = bad_tx.send(why);
    }));
    tower_lsp::Server::new(from_pump, tokio::io::stdout(), socket)
        .serve(service)
        .await;
}
