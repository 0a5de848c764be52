//! Where threads stood, from the machine: a seek to the step (the last
//! keyframe at or before it, then forward: `vmm::inspect`) and each
//! thread's stack, unwound by the `symbols` crate.

use super::coverage::{self, Lines};
use super::findings::{Frame, Places, ThreadPlace, Workspace};
use std::collections::HashMap;
use std::sync::Arc;
use vmm::store::Store;

pub struct Machine {
    store: Store,
    /// By (run, step): seeks are the cost; a diagnostic asks for a step once.
    memo: HashMap<(String, u64), Vec<ThreadPlace>>,
    /// Lines per step, by run: one pass over the run each.
    lines: HashMap<String, Arc<Lines>>,
}

impl Machine {
    pub fn new(store: Store) -> Machine {
        Machine {
            store,
            memo: HashMap::new(),
            lines: HashMap::new(),
        }
    }

    /// The workspace line each step's thread stood on, in run `run` (one
    /// pass over the run the first time).
    pub fn lines(&mut self, run: &str, ws: &dyn Workspace) -> Result<Arc<Lines>, String> {
        if let Some(l) = self.lines.get(run) {
            return Ok(l.clone());
        }
        let r = self.store.resolve(run).map_err(|e| e.to_string())?;
        let inputs = r
            .inputs()
            .map_err(|e| format!("cannot look inside run {}: {e}", r.id))?;
        let limits = vmm::run::Limits {
            timeout: Some(std::time::Duration::from_secs(
                r.meta.timeout_secs.map_or(60, |s| s.ceil() as u64),
            )),
            ..Default::default()
        };
        let mut lines = Lines::new();
        vmm::inspect::each_exit(&inputs, &limits, |k, step| {
            let tid = k.cur_tid();
            let frames = thread_frames(k, tid, true);
            coverage::note(&mut lines, &frames, ws, step, tid);
        })
        .map_err(|e| format!("run {}: {e}", r.id))?;
        let lines = Arc::new(lines);
        self.lines.insert(r.id.clone(), lines.clone());
        Ok(lines)
    }
}

/// A thread's frames with source lines, innermost first; `at_exit`: it
/// made the exit the machine stands at.
fn thread_frames(k: &mut vmm::kernel::Kernel, tid: u32, at_exit: bool) -> Vec<Frame> {
    let bt = k.backtrace(tid);
    let innermost = bt.as_ref().and_then(|b| b.frames.first()).map(|f| f.pc);
    let mut frames = bt.map(|b| frames_of(&b)).unwrap_or_default();
    // Only when the innermost frame is the program's own code.
    if at_exit && frames.first().map(|f| f.0) == innermost {
        syscall_site(k, &mut frames);
    }
    frames.into_iter().map(|f| f.1).collect()
}

/// The frames with a source line, each with its physical frame's pc.
fn frames_of(bt: &symbols::Backtrace) -> Vec<(u64, Frame)> {
    bt.frames
        .iter()
        .filter_map(|f| {
            let l = f.location.as_ref()?;
            Some((
                f.pc,
                Frame {
                    file: l.file.clone(),
                    line: l.line,
                    function: f.function.clone(),
                },
            ))
        })
        .collect()
}

/// At a system call made by the program's own code (inline assembly: the
/// SDK's calls), the thread's pc is the instruction after `syscall`, which
/// may belong to the next statement: its innermost frames are read again at
/// the `syscall` itself. Calls made through the C library are placed by
/// their callers' return addresses already.
fn syscall_site(k: &mut vmm::kernel::Kernel, frames: &mut Vec<(u64, Frame)>) {
    let Some(pc) = frames.first().map(|f| f.0) else {
        return;
    };
    let mut insn = [0u8; 2];
    if !k.peek_user(pc.wrapping_sub(2), &mut insn) || insn != [0x0f, 0x05] {
        return;
    }
    let pid = k.cur_pid();
    let Some(s) = k.symbolizer_of(pid) else {
        return;
    };
    let at: Vec<(u64, Frame)> = s
        .frames_at(pc - 2)
        .into_iter()
        .filter_map(|f| {
            let l = f.location?;
            Some((
                pc,
                Frame {
                    file: l.file,
                    line: l.line,
                    function: f.function,
                },
            ))
        })
        .collect();
    if at.is_empty() {
        return;
    }
    let inner = frames.iter().take_while(|f| f.0 == pc).count();
    frames.splice(..inner, at);
}

impl Places for Machine {
    fn at_exit(&mut self, run: &str, step: u64) -> Result<Vec<ThreadPlace>, String> {
        let key = (run.to_string(), step);
        if let Some(t) = self.memo.get(&key) {
            return Ok(t.clone());
        }
        let r = self.store.resolve(run).map_err(|e| e.to_string())?;
        let inputs = r
            .inputs()
            .map_err(|e| format!("cannot look inside run {}: {e}", r.id))?;
        let kf = r
            .usable_keyframe(&self.store, step.saturating_sub(1))
            .keyframe;
        let kf = kf.as_ref().map(|(k, own)| (k, *own));
        let limits = vmm::run::Limits {
            timeout: Some(std::time::Duration::from_secs(
                r.meta.timeout_secs.map_or(60, |s| s.ceil() as u64),
            )),
            ..Default::default()
        };
        let threads = vmm::inspect::at_exit(&inputs, kf, &self.store.pages(), step, &limits, |k| {
            let cur = k.cur_tid();
            let tids: Vec<(u32, u32)> = k.threads.values().map(|t| (t.pid, t.tid)).collect();
            tids.into_iter()
                .map(|(pid, tid)| ThreadPlace {
                    pid,
                    tid,
                    current: tid == cur,
                    frames: thread_frames(k, tid, tid == cur),
                })
                .collect::<Vec<_>>()
        })
        .map_err(|e| format!("run {} at step {step}: {e}", r.id))?;
        self.memo.insert(key, threads.clone());
        Ok(threads)
    }

    fn at_pc(&mut self, run: &str, pc: u64) -> Result<Vec<Frame>, String> {
        let r = self.store.resolve(run).map_err(|e| e.to_string())?;
        let image = r.meta.image.to_image();
        let path = image
            .host_path(&r.manifest.program)
            .ok_or_else(|| format!("run {}: its program is not on this host", r.id))?;
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if blake3_matches(&r).is_some_and(|same| !same) {
            return Err(format!("run {}: its program was rebuilt since", r.id));
        }
        // Only a program loaded where it was linked (ET_EXEC) has its
        // addresses as the run saw them.
        if bytes.get(16) != Some(&2) {
            return Err(format!(
                "run {}: a position-independent program's addresses need its load address",
                r.id
            ));
        }
        let mut s = symbols::Symbolizer::new(symbols::DebugFinder::none());
        s.add(&path.to_string_lossy(), &bytes, 0)
            .map_err(|e| e.to_string())?;
        Ok(s.frames_at(pc)
            .iter()
            .filter_map(|f| {
                let l = f.location.as_ref()?;
                Some(Frame {
                    file: l.file.clone(),
                    line: l.line,
                    function: f.function.clone(),
                })
            })
            .collect())
    }
}

/// Whether the image still hashes to what the run recorded (None: unknown).
fn blake3_matches(r: &vmm::store::Run) -> Option<bool> {
    r.image_hash_now().ok().map(|h| h == r.manifest.image)
}
