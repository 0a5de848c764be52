//! Signals: an interrupted `rewind run` (Ctrl-C, SIGTERM, SIGHUP) leaves no
//! run behind.
//!
//! [`install`] blocks SIGINT, SIGTERM and SIGHUP in every thread (call it
//! before any thread starts: threads inherit the mask) and starts one thread
//! that waits for them. When one arrives, that thread removes the runs this
//! process is still writing (`vmm::store::abandon_unfinished`), then dies of
//! the same signal, so the shell sees the usual status (130 for Ctrl-C).

/// Files a signal's end removes (a server's token file or socket).
static REMOVE_AT_EXIT: std::sync::Mutex<Vec<std::path::PathBuf>> =
    std::sync::Mutex::new(Vec::new());

/// Removes `path` when SIGINT, SIGTERM or SIGHUP ends the process.
pub fn remove_at_exit(path: &std::path::Path) {
    REMOVE_AT_EXIT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path.to_path_buf());
}

pub fn install() {
    // SAFETY: plain libc signal-mask calls on local, initialized sets.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("rewind-signals".into())
            .spawn(move || {
                let mut sig: libc::c_int = 0;
                loop {
                    if libc::sigwait(&set, &mut sig) == 0 {
                        break;
                    }
                }
                vmm::store::abandon_unfinished();
                for p in REMOVE_AT_EXIT
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                {
                    let _ = std::fs::remove_file(p);
                }
                libc::signal(sig, libc::SIG_DFL);
                let mut one: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut one);
                libc::sigaddset(&mut one, sig);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
                libc::raise(sig);
                // Not reached: the default action of these signals ends the process.
                libc::_exit(128 + sig);
            });
        if spawned.is_err() {
            // No waiter: let the signals act as usual.
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
    }
}

/// For commands that print to a pipe: `rewind events .. | head` ends
/// quietly, as other Unix tools do.
pub fn die_on_broken_pipe() {
    // SAFETY: restores the default action of one signal.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
