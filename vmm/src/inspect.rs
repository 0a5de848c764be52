//! Looking inside a run at a step: seek there (restore the last keyframe at
//! or before it, run forward), then read the machine's state: files as the
//! guest saw them, processes and threads and what each was blocked in.

use crate::kernel::fs::AT_FDCWD;
use crate::kernel::Kernel;
use crate::run::keyframe::Keyframe;
use crate::run::Discard;
use crate::run::Recorder;
use crate::run::{Limits, RunInputs};
use crate::store::pages::PageStore;
use crate::EngineError;

/// Why a step cannot be looked at.
#[derive(Debug, thiserror::Error)]
pub enum SeekError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the run ended at step {0}, before that step")]
    Ended(u64),
}

/// Runs `inputs` to `step` (from `keyframe` when given: the last one at or
/// before the step, with whether it is this very run's, as
/// `Run::best_keyframe` gives it) and hands the machine to `look`.
pub fn at_step<R>(
    inputs: &RunInputs,
    keyframe: Option<(&Keyframe, bool)>,
    pages: &PageStore,
    step: u64,
    limits: &Limits,
    look: impl FnOnce(&mut Kernel) -> R,
) -> Result<R, SeekError> {
    let mut rec = Discard;
    let mut k = seek(inputs, keyframe, pages, step, limits, &mut rec)?;
    Ok(look(&mut k))
}

/// Runs `inputs` to `step` as `at_step` does, with `rec` hearing what the
/// machine does on the way and after: the machine, there.
pub fn seek<'r>(
    inputs: &RunInputs,
    keyframe: Option<(&Keyframe, bool)>,
    pages: &PageStore,
    step: u64,
    limits: &Limits,
    rec: &'r mut dyn Recorder,
) -> Result<Kernel<'r>, SeekError> {
    let mut k = match keyframe {
        Some((kf, same_run)) => Kernel::restore(inputs, kf, pages, same_run, rec)?,
        None => Kernel::boot(inputs, rec)?,
    };
    k.run_to(step, limits)?;
    if k.is_finished() {
        return Err(SeekError::Ended(k.step));
    }
    Ok(k)
}

/// Runs `inputs` to the exit that is `step` and hands the machine to `look`
/// as that exit found it, before the monitor serves it: the thread that
/// made it is the current one, its registers where the call or fault left
/// them. `keyframe` must be at or before `step - 1`.
pub fn at_exit<R>(
    inputs: &RunInputs,
    keyframe: Option<(&Keyframe, bool)>,
    pages: &PageStore,
    step: u64,
    limits: &Limits,
    look: impl FnOnce(&mut Kernel) -> R,
) -> Result<R, SeekError> {
    let Some(before) = step.checked_sub(1) else {
        return at_step(inputs, None, pages, 0, limits, look);
    };
    at_step(inputs, keyframe, pages, before, limits, |k| {
        k.run_to_next_exit().map(|()| look(k))
    })?
    .map_err(SeekError::Engine)
}

/// Runs `inputs` from step 0 to its end (or until `limits.timeout`),
/// handing the machine to `look` at every exit before it is served, with
/// the step that exit is: the thread that makes it is the current one.
/// Nothing is recorded. For a pass over a whole run (the language server's
/// lines per step); a seek to one step is `at_exit`.
pub fn each_exit(
    inputs: &RunInputs,
    limits: &Limits,
    mut look: impl FnMut(&mut Kernel, u64),
) -> Result<(), EngineError> {
    let mut rec = Discard;
    let mut k = Kernel::boot(inputs, &mut rec)?;
    let watchdog = crate::machine::watchdog::Watchdog::start(limits.timeout);
    // `look` runs inside it too: it must start no thread or process.
    let trap = crate::machine::tsc::Trap::hold();
    while !k.is_finished() && !watchdog.fired() {
        let exit = k.run_guest(&trap)?;
        if let crate::machine::Exit::Interrupted = exit {
            continue;
        }
        let step = k.step + 1;
        look(&mut k, step);
        k.serve(exit);
        if let Some(e) = k.take_failure() {
            return Err(e);
        }
        if k.is_finished() || k.schedule_next().is_err() {
            break;
        }
    }
    Ok(())
}

impl Kernel<'_> {
    /// Runs the current thread to its next exit without serving it. Through
    /// `run_guest`, as a recording runs: after a memory point it first lets
    /// that access complete, or the machine would fault on it again and
    /// show the previous step's instruction.
    fn run_to_next_exit(&mut self) -> Result<(), EngineError> {
        let trap = crate::machine::tsc::Trap::hold();
        while let crate::machine::Exit::Interrupted = self.run_guest(&trap)? {}
        Ok(())
    }
}

/// A thread as a debugger shows it at a step.
#[derive(Debug, Clone)]
pub struct ThreadAt {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    /// `running`, `runnable`, `blocked in futex(..)`..
    pub doing: String,
    /// Whether it holds the CPU.
    pub current: bool,
    pub regs: kvm_bindings::kvm_regs,
    pub fs_base: u64,
    pub gs_base: u64,
    /// Its instruction pointer named as `0x401136 in worker+0x16`.
    pub place: String,
}

impl Kernel<'_> {
    /// Every live thread: registers, what it does, where its code is.
    pub fn threads_at(&mut self) -> Vec<ThreadAt> {
        let cur = self.cur_tid();
        let (cur_regs, cur_fs, cur_gs) = (self.m.regs(), self.m.fs_base(), self.m.gs_base());
        let tids: Vec<u32> = self.threads.keys().copied().collect();
        tids.into_iter()
            .map(|tid| {
                let t = self.threads[&tid].clone();
                let (regs, fs_base, gs_base) = match &t.ctx {
                    Some(c) => (c.regs, c.fs_base, c.gs_base),
                    None => (cur_regs, cur_fs, cur_gs),
                };
                ThreadAt {
                    pid: t.pid,
                    tid,
                    name: self.names.get(&tid).cloned().unwrap_or(t.name.clone()),
                    doing: self.thread_doing(tid, cur),
                    current: tid == cur,
                    regs,
                    fs_base,
                    gs_base,
                    place: self.describe_in(t.pid, regs.rip),
                }
            })
            .collect()
    }

    /// A file's contents as the guest sees them now; None when it does not exist.
    pub fn file_contents(&mut self, path: &str) -> Option<Vec<u8>> {
        let ino = self.lookup_at(AT_FDCWD as u64, path, true).ok()?;
        let node = self.vfs.tree.node(ino).ok()?;
        if node.is_dir() {
            return None;
        }
        self.file_data(ino).ok().map(|b| b.to_vec())
    }

    /// A line per process, then its threads' lines; then the zombies.
    pub fn process_lines(&mut self) -> Vec<String> {
        let threads = self.where_threads_are();
        let mut out = Vec::new();
        let procs: Vec<(u32, u32, String, String)> = self
            .procs
            .values()
            .map(|p| (p.pid, p.ppid, p.exe.clone(), p.cwd.clone()))
            .collect();
        for (pid, ppid, exe, cwd) in procs {
            out.push(format!("process {pid} (parent {ppid}): {exe}, cwd {cwd}"));
            let prefix = format!("thread {pid}/");
            out.extend(
                threads
                    .iter()
                    .filter(|l| l.starts_with(&prefix))
                    .map(|l| format!("  {l}")),
            );
        }
        for (pid, z) in &self.zombies {
            out.push(format!(
                "process {pid} (parent {}): a zombie, {}",
                z.ppid, z.status
            ));
        }
        out
    }
}
