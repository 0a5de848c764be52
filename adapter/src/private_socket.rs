//! Unix sockets only their user may use, for the servers that act as that
//! user (`rewind dap --socket`, `rewind gdb`): made with mode 0600, and each
//! peer's user id checked on accept.

use anyhow::{bail, Context, Result};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixListener;
use std::path::Path;

/// A Unix socket at `path` of mode 0600, removed when the process exits. A
/// socket left there by this user is replaced; anything else there is
/// refused.
pub fn bind(path: &Path) -> Result<UnixListener> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if let Ok(m) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !m.file_type().is_socket() || m.uid() != uid {
            bail!(
                "{} exists and is not a socket of this user: not replacing it",
                path.display()
            );
        }
        std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))?;
    }
    // The socket is made with the process's umask: make it 0600 from the
    // start, not chmod it after another user could have connected.
    // SAFETY: umask only sets the process's file mode mask.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let listener = bound.with_context(|| format!("cannot listen on {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot set the mode of {}", path.display()))?;
    crate::signals::remove_at_exit(path);
    Ok(listener)
}

/// The user id of a connected Unix socket's peer, when the kernel says.
pub fn peer_uid(sock: &impl AsRawFd) -> Option<u32> {
    // SAFETY: zeroed is a valid ucred; getsockopt fills at most `len` bytes.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the fd is a socket the caller holds; cred and len are ours.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.uid)
}

/// Whether a Unix socket's peer is this process's user; else its user id
/// (`u32::MAX` when unknown).
pub fn same_user(sock: &impl AsRawFd) -> Result<(), u32> {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    match peer_uid(sock) {
        Some(u) if u == uid => Ok(()),
        other => Err(other.unwrap_or(u32::MAX)),
    }
}
