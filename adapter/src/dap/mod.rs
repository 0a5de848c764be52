//! `rewind dap`: a recorded run as a reversible debug session for any
//! Debug Adapter Protocol client, on stdio or a loopback TCP port.
//!
//! Each connection gets three parts: a reader task (tokio) that parses
//! frames and answers `cancel` itself, so a cancel reaches a busy session;
//! a session thread that owns the machine (a KVM vCPU stays on one thread)
//! and serves requests in order; and a writer task that numbers and frames
//! what the session sends. The protocol surface is in docs/dap.md.

mod backward;
mod breakpoints;
mod conn;
mod custom;
mod dispatch;
mod handles;
mod launch;
mod listen;
mod live;
mod memory;
mod moves;
mod open;
mod profile;
#[cfg(test)]
mod protocol_ts;
mod replies;
mod session;
mod set_breakpoints;
mod sources;
mod stack;
mod variables;
mod view;
mod wire;

use crate::framing::{Frame, Reader};
use anyhow::{Context, Result};
use clap::Args;
use conn::{Control, Out};
use serde_json::Value;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

#[derive(Args, Debug)]
#[command(
    after_help = "Without --port or --socket, DAP is spoken on standard input and output \
                  (what editors start). With --port, on 127.0.0.1:N, one session per \
                  connection (0 picks a free port): the port is printed on stderr as `rewind: \
                  dap listening on 127.0.0.1:N`, and each client first sends the line in \
                  $XDG_RUNTIME_DIR/rewind/dap-N.token (mode 0600). With --socket, on a Unix \
                  socket of mode 0600 that only this user may use. A connection without the \
                  secret is closed unanswered. A server's sessions share one snapshot budget \
                  (--snapshot-memory). The protocol and its custom requests are in \
                  docs/dap.md."
)]
pub struct DapArgs {
    /// Listen on this loopback TCP port instead of stdio; clients present
    /// the token first.
    #[arg(long, value_name = "N", conflicts_with = "socket")]
    pub port: Option<u16>,
    /// Listen on a Unix socket made at PATH with mode 0600.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<std::path::PathBuf>,
    /// The memory all sessions' snapshots may hold together, in MiB
    /// [default: 256 with --port or --socket; on stdio, the session's own
    /// `snapshotMemory`].
    #[arg(long, value_name = "MIB")]
    pub snapshot_memory: Option<u64>,
}

pub fn main(args: DapArgs) -> Result<i32> {
    let served = args.port.is_some() || args.socket.is_some();
    let budget = match args.snapshot_memory {
        Some(mib) => mib
            .checked_mul(1 << 20)
            .context("--snapshot-memory: too large")?,
        // One session on stdio: its launch's `snapshotMemory` bounds it.
        None if !served => u64::MAX,
        None => vmm::debug::DEFAULT_SNAPSHOT_BUDGET,
    };
    vmm::debug::set_process_snapshot_budget(budget);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .context("cannot start the DAP server")?;
    let result = rt.block_on(async {
        match (args.port, args.socket) {
            (Some(port), _) => serve_tcp(port).await,
            (None, Some(path)) => serve_socket(&path).await,
            (None, None) => {
                serve(tokio::io::stdin(), tokio::io::stdout()).await;
                Ok(0)
            }
        }
    });
    // Standard input's reader may still be blocked in read(2): do not wait.
    rt.shutdown_background();
    result
}

/// One session per loopback connection that first presents the token.
async fn serve_tcp(port: u16) -> Result<i32> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
    let addr = listener.local_addr()?;
    let token = Arc::new(listen::Token::create(addr.port())?);
    eprintln!(
        "rewind: dap listening on {addr}; clients first send the line in {}",
        token.file.display()
    );
    loop {
        let (mut sock, from) = listener.accept().await?;
        let token = token.clone();
        tokio::spawn(async move {
            match token.presented(&mut sock).await {
                listen::Refusal::Accepted => {
                    let (r, w) = sock.into_split();
                    serve(r, w).await;
                }
                why => listen::log_refusal(&from.to_string(), &why),
            }
        });
    }
}

/// One session per connection of this user to a Unix socket of mode 0600.
async fn serve_socket(path: &std::path::Path) -> Result<i32> {
    let listener = listen::bind_socket(path)?;
    eprintln!("rewind: dap listening on {}", path.display());
    loop {
        let (sock, _) = listener.accept().await?;
        match listen::peer_allowed(&sock) {
            listen::Refusal::Accepted => {
                let (r, w) = sock.into_split();
                tokio::spawn(serve(r, w));
            }
            why => listen::log_refusal(&path.display().to_string(), &why),
        }
    }
}

/// Serves one client until it disconnects or the session ends.
async fn serve<R, W>(r: R, mut w: W)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(async move {
        let mut seq = 0i64;
        while let Some(msg) = out_rx.recv().await {
            seq += 1;
            if wire::write_message(&mut w, seq, msg).await.is_err() {
                // The client is gone; keep draining so senders never block.
                while out_rx.recv().await.is_some() {}
                break;
            }
        }
    });
    let control = Arc::new(Control::default());
    let (req_tx, req_rx) = std::sync::mpsc::channel::<wire::Incoming>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let out = Out(out_tx.clone());
    let c = control.clone();
    let session = std::thread::Builder::new()
        .name("dap-session".into())
        .spawn(move || {
            dispatch::Server::new(out, c).serve(req_rx);
            let _ = done_tx.send(());
        });
    if session.is_err() {
        return;
    }
    let reader = read_loop(r, req_tx, Out(out_tx.clone()), control.clone());
    tokio::select! {
        _ = reader => {}
        _ = done_rx => {}
    }
    // The reader is dropped here, and with it the session's request channel:
    // the session ends after the request it is serving.
    control.close();
    if let Ok(h) = session {
        let _ = tokio::task::spawn_blocking(move || h.join()).await;
    }
    drop(out_tx);
    let _ = writer.await;
}

async fn read_loop<R: AsyncRead + Unpin>(
    r: R,
    req_tx: std::sync::mpsc::Sender<wire::Incoming>,
    out: Out,
    control: Arc<Control>,
) {
    let mut frames = Reader::new(r);
    loop {
        let body = match frames.next().await {
            None => return,
            Some(Frame::Body(b)) => b,
            // Nowhere to answer a frame that is not one: the session ends.
            Some(Frame::Bad(why)) => {
                out.send(wire::event(dap::events::Event::Output(
                    dap::events::OutputEventBody {
                        category: Some(dap::types::OutputEventCategory::Important),
                        output: format!(
                            "rewind: the DAP stream is broken ({why}); ending the session\n"
                        ),
                        ..Default::default()
                    },
                )));
                out.send(wire::event(dap::events::Event::Terminated(None)));
                return;
            }
        };
        let msg = wire::parse(&body);
        if let wire::Incoming::Standard { seq, name, command } = &msg {
            // The client is leaving: long work (a check) stops now, and the
            // session reads the disconnect once it has.
            if let dap::requests::Command::Disconnect(_) = command.as_ref() {
                control.close();
            }
            if let dap::requests::Command::Cancel(a) = command.as_ref() {
                if let Some(id) = a.request_id {
                    control.cancel(id.to_string());
                }
                if let Some(p) = &a.progress_id {
                    control.cancel(p.clone());
                }
                out.send(wire::response(*seq, name, None));
                continue;
            }
        }
        if req_tx.send(msg).is_err() {
            return;
        }
    }
}
