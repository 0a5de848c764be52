//! Who may talk to a `rewind dap` server: a session can launch programs,
//! read files and run property scripts as the user who started it, so only
//! that user may open one.
//!
//! - `--port N` binds 127.0.0.1 and writes a random token to
//!   `$XDG_RUNTIME_DIR/rewind/dap-PORT.token` (directory 0700, file 0600).
//!   A client's first line, before any DAP frame, is that token in hex.
//! - `--socket PATH` makes a Unix socket of mode 0600 and serves only peers
//!   of the same user id; the socket's mode is the secret.
//!
//! A connection that does not present the secret is closed with no reply and
//! one line on standard error.

use anyhow::{bail, Context, Result};
use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;
use subtle::ConstantTimeEq;
use tokio::io::AsyncReadExt;

/// How long a TCP client has to present the token.
const TOKEN_WAIT: Duration = Duration::from_secs(10);
/// 32 random bytes, as 64 hex digits.
const TOKEN_BYTES: usize = 32;

/// A server's token and the file it is kept in.
pub struct Token {
    hex: String,
    pub file: PathBuf,
}

/// The directory of the token files: `$XDG_RUNTIME_DIR/rewind`, else
/// `/tmp/rewind-UID`; made 0700 and refused when another user owns it or
/// others may enter it.
fn runtime_dir() -> Result<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("rewind"),
        None => PathBuf::from(format!("/tmp/rewind-{uid}")),
    };
    match DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot make {}", dir.display())),
    }
    let m = std::fs::symlink_metadata(&dir)
        .with_context(|| format!("cannot read {}", dir.display()))?;
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o077 != 0 {
        bail!(
            "{} is not a directory only this user may enter (mode 0700): refusing to keep a token there",
            dir.display()
        );
    }
    Ok(dir)
}

impl Token {
    /// A fresh token for `port`, written to its file (replacing a stale one).
    pub fn create(port: u16) -> Result<Token> {
        let mut raw = [0u8; TOKEN_BYTES];
        // SAFETY: fills the buffer it is given, of the length it is given.
        let n = unsafe { libc::getrandom(raw.as_mut_ptr().cast(), raw.len(), 0) };
        if n != raw.len() as isize {
            bail!("cannot get random bytes for the token");
        }
        let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let file = runtime_dir()?.join(format!("dap-{port}.token"));
        let _ = std::fs::remove_file(&file);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&file)
            .with_context(|| format!("cannot write {}", file.display()))?;
        writeln!(f, "{hex}").with_context(|| format!("cannot write {}", file.display()))?;
        crate::signals::remove_at_exit(&file);
        Ok(Token { hex, file })
    }

    /// Reads the client's first line and tells whether it is the token. Bytes
    /// are read one at a time, so nothing of the DAP stream after it is taken.
    pub async fn presented<R: tokio::io::AsyncRead + Unpin>(&self, r: &mut R) -> Refusal {
        let read = async {
            let mut line = Vec::with_capacity(self.hex.len() + 2);
            loop {
                let mut b = [0u8; 1];
                match r.read(&mut b).await {
                    Ok(1) if b[0] == b'\n' => break Some(line),
                    Ok(1) if line.len() <= self.hex.len() => line.push(b[0]),
                    _ => break None,
                }
            }
        };
        let Ok(Some(line)) = tokio::time::timeout(TOKEN_WAIT, read).await else {
            return Refusal::NoToken;
        };
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.starts_with(b"Content-Length") {
            return Refusal::NoToken;
        }
        if bool::from(line.ct_eq(self.hex.as_bytes())) {
            Refusal::Accepted
        } else {
            Refusal::WrongToken
        }
    }
}

impl Drop for Token {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

/// Why a connection was turned away, if it was.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Accepted,
    NoToken,
    WrongToken,
    OtherUser(u32),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Accepted => write!(f, "accepted"),
            Refusal::NoToken => write!(f, "it presented no token"),
            Refusal::WrongToken => write!(f, "it presented a wrong token"),
            Refusal::OtherUser(uid) => write!(f, "its user id {uid} is not this server's"),
        }
    }
}

/// The one log line of a refused connection.
pub fn log_refusal(from: &str, why: &Refusal) {
    eprintln!("rewind: dap: closed a connection from {from} without a reply: {why}");
}

/// A Unix socket at `path` of mode 0600 (`private_socket::bind`), for tokio.
pub fn bind_socket(path: &Path) -> Result<tokio::net::UnixListener> {
    let listener = crate::private_socket::bind(path)?;
    listener
        .set_nonblocking(true)
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    tokio::net::UnixListener::from_std(listener)
        .with_context(|| format!("cannot listen on {}", path.display()))
}

/// Whether a Unix socket's peer is this server's user.
pub fn peer_allowed(sock: &tokio::net::UnixStream) -> Refusal {
    match crate::private_socket::same_user(sock) {
        Ok(()) => Refusal::Accepted,
        Err(uid) => Refusal::OtherUser(uid),
    }
}
