//! What one connection's parts share: the reader's cancellations, the
//! writer's queue, and the lock every session takes to record.

use serde_json::Value;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use tokio::sync::mpsc;

/// What the reader shares with the session thread.
#[derive(Default)]
pub struct Control {
    /// Request seqs and progress ids the client cancelled.
    cancelled: Mutex<HashSet<String>>,
    /// The client is gone: long work should stop.
    closed: AtomicBool,
}

impl Control {
    /// Whether the request (`seq`) or its progress (`progress`) was cancelled,
    /// or the client left.
    pub fn is_cancelled(&self, seq: i64, progress: &str) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return true;
        }
        let c = self.cancelled.lock().unwrap_or_else(|e| e.into_inner());
        c.contains(&seq.to_string()) || c.contains(progress)
    }

    /// The client cancelled this request seq or progress id.
    pub fn cancel(&self, id: String) {
        let mut c = self.cancelled.lock().unwrap_or_else(|e| e.into_inner());
        c.insert(id);
    }

    /// The client is gone.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

/// Held while a session records (a fork, one schedule of a check, a
/// launch's recording or check). The store names what it is writing after
/// the run and the process (`runs/.tmp-<id>-<pid>`, pages alike), so two
/// sessions of one `rewind dap --port` making the same run at once (a fork
/// at the same step with the same schedule) would write into each other's
/// files; in separate processes the names differ.
static RECORDING: Mutex<()> = Mutex::new(());

pub fn recording() -> std::sync::MutexGuard<'static, ()> {
    RECORDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the session sends messages; a closed client makes sends no-ops.
#[derive(Clone)]
pub struct Out(pub mpsc::UnboundedSender<Value>);

impl Out {
    pub fn send(&self, v: Value) {
        let _ = self.0.send(v);
    }
}
