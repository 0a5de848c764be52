//! Debugging a recorded run: a session opens the run at a step as a fork
//! that records nothing (the recorded run is never changed), and then reads
//! and writes registers and memory, steps one instruction, continues to
//! breakpoints and watchpoints, and goes backwards, for the gdb stub and the
//! DAP server alike. Kept apart from recording, as rr keeps its session
//! types apart.
//!
//! - A **debug trap** (an `int3` the monitor wrote, a single step by
//!   RFLAGS.TF, a page the monitor protected for a watchpoint) is served
//!   here and is never a step: the kernel never sees it, so the fork runs
//!   exactly as the recording did. Debug registers are not used (they are
//!   not honoured on the paravirtual hosts the engine is built on).
//! - A **position** between two exits is (step, pc, hit): the hit-th time the
//!   instruction at pc was about to run since step `step` was served.
//!   Nothing preempts a thread between exits, so that names one moment.
//!   The hit is counted only for addresses that carry an `int3` for the whole
//!   span; otherwise it is found when asked for by replaying the span
//!   from its start along the route that led here (`DebugCore::position`).
//! - **Reverse execution** restores a keyframe, replays, and stops at the
//!   previous instruction or the previous breakpoint or watchpoint hit.
//!   After memory or registers were written, the session is no longer the
//!   recording and reverse execution says so instead of lying.

mod exec;
mod memory;
mod reverse;
mod snapshot_cache;

use crate::kernel::task::{Pid, Tid};
use crate::kernel::Kernel;
use crate::run::keyframe::{Keyframe, KeyframeFile};
use crate::run::ExitStatus;
use crate::run::RunInputs;
use crate::store::pages::PageStore;
use crate::EngineError;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

pub use memory::ThreadRegs;
pub use snapshot_cache::{
    process_usage as snapshot_process_usage, set_process_budget as set_process_snapshot_budget,
    Stats as SnapshotStats, DEFAULT_BUDGET as DEFAULT_SNAPSHOT_BUDGET,
};

/// The frame bits of a page-table entry.
const PTE_ADDR: u64 = 0x000f_ffff_ffff_f000;

/// Why a debugging request failed.
#[derive(Debug, thiserror::Error)]
pub enum DebugError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the run ended at step {0}, before that step")]
    Ended(u64),
    #[error("no thread {0} in the process")]
    NoThread(Tid),
    #[error("no process {0} at that step")]
    NoProcess(Pid),
    #[error("memory at {0:#x} is not mapped")]
    BadAddress(u64),
    #[error(
        "the session is no longer the recording (memory or registers were written), \
         so it cannot go backwards"
    )]
    Diverged,
    #[error("the process has ended")]
    Exited,
    #[error("position {0} is not in the run")]
    NoSuchPosition(Position),
}

/// A moment between two exits: before the `hit`-th run of the instruction at
/// `pc` since step `step` was served (hit 1 is the first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub step: u64,
    pub pc: u64,
    pub hit: u64,
}

impl std::fmt::Display for Position {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {} pc {:#x} hit {}", self.step, self.pc, self.hit)
    }
}

/// What a watchpoint watches for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WatchKind {
    Write,
    Read,
    Access,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Watch {
    pub addr: u64,
    pub len: u64,
    pub kind: WatchKind,
}

/// Why the machine stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// One instruction ran (or one system call: the step it was).
    Stepped { tid: Tid },
    /// At a breakpoint, before its instruction runs.
    Breakpoint { tid: Tid, pc: u64 },
    /// Just after an instruction that touched a watched range.
    Watch { tid: Tid, watch: Watch, addr: u64 },
    /// A fault about to become this signal (not yet delivered).
    Signal { tid: Tid, signo: i32 },
    /// The process ended.
    Exited(ExitStatus),
    /// Reverse execution reached the start of the run.
    Beginning { tid: Tid },
}

/// Where the session can start again: the run's inputs and keyframes.
pub struct Origin {
    pub inputs: RunInputs,
    /// Keyframes to restore from, in step order, decoded only when one is
    /// restored: a long run has hundreds, and a session uses a few.
    keyframes: Vec<KeyframeAt>,
    pub pages: PageStore,
}

/// One keyframe of an origin: its step, and where to decode it from.
struct KeyframeAt {
    step: u64,
    file: Arc<KeyframeFile>,
    index: usize,
    /// It is the run's own (`Kernel::restore`'s `same_run`).
    own: bool,
}

impl Origin {
    /// Every keyframe usable for `run` (its own, and its parents' up to the
    /// fork), in step order; each keyframes file read once.
    pub fn of_run(
        run: &crate::store::Run,
        store: &crate::store::Store,
    ) -> Result<Origin, DebugError> {
        let inputs = run
            .inputs()
            .map_err(|e| EngineError::BadKeyframe(format!("the run's inputs: {e}")))?;
        let mut keyframes = Vec::new();
        for (file, upto, own) in run.keyframe_chain(store) {
            // A file whose steps cannot be read serves nothing: slower, as exact.
            let Ok(steps) = file.steps() else { continue };
            let file = Arc::new(file);
            for (index, step) in steps.into_iter().enumerate() {
                if step <= upto {
                    keyframes.push(KeyframeAt {
                        step,
                        file: file.clone(),
                        index,
                        own,
                    });
                }
            }
        }
        // The latest at or before a step wins; at one step, the run's own.
        keyframes.sort_by_key(|k| (k.step, !k.own));
        keyframes.dedup_by_key(|k| k.step);
        Ok(Origin {
            inputs,
            keyframes,
            pages: store.pages(),
        })
    }

    /// The index of the last keyframe at or after step 1 and at or before
    /// `step`.
    fn last_keyframe_at_or_before(&self, step: u64) -> Option<usize> {
        self.keyframes
            .iter()
            .rposition(|k| k.step <= step && k.step > 0)
    }

    /// The step of keyframe `i`.
    fn keyframe_step(&self, i: usize) -> u64 {
        self.keyframes[i].step
    }

    /// Keyframe `i` decoded, or the latest before it that this build can
    /// restore (a keyframe it cannot decode is skipped, as seeks skip it),
    /// with whether it is the run's own; None: boot.
    fn keyframe(&self, i: usize) -> Option<(Keyframe, bool)> {
        self.keyframes[..=i].iter().rev().find_map(|k| {
            let kf = k.file.get(k.index).ok()?;
            crate::kernel::save_restore::restorable(&kf, &self.pages).then_some((kf, k.own))
        })
    }

    /// Keyframe steps at or before `step`, latest first, then 0 (a boot).
    fn starts_before(&self, step: u64) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .keyframes
            .iter()
            .map(|k| k.step)
            .filter(|s| *s <= step && *s > 0)
            .collect();
        v.reverse();
        v.push(0);
        v
    }
}

/// One route step from a span's start to a stop (see `DebugCore::position`).
#[derive(Debug, Clone)]
enum Op {
    Step,
    /// A continue, with the breakpoints and watchpoints of that moment.
    Continue(BTreeSet<u64>, Vec<Watch>),
    Arrive(Position),
}

/// The machine of a session: a fork at some position.
struct Live {
    k: Kernel<'static>,
    /// `int3`s in memory: address -> (physical address, the byte under it).
    inserted: BTreeMap<u64, (u64, u8)>,
    /// Addresses whose hits are counted besides breakpoints (positions).
    tracked: BTreeSet<u64>,
    /// Breakpoints removed during this span, still counted until it ends
    /// (gdb takes its breakpoints out at every stop and puts them back).
    ghosts: BTreeSet<u64>,
    /// Hits since the span began, for addresses trapped since it began.
    counts: HashMap<u64, u64>,
    /// Count every instruction (while stepping through a whole span).
    count_all: bool,
    /// The operations since the span began that led here.
    route: Vec<Op>,
    /// An instruction ran (or trapped) since the span began.
    moved: bool,
    /// A fault seen and not yet served (a stop before its signal).
    pending: Option<crate::machine::Exit>,
    /// Pages protected for watchpoints, over the kernel's entries.
    protected: BTreeMap<u64, exec::Layer>,
    ended: Option<ExitStatus>,
}

/// The debug core: a debugging session on one process of a run, the run
/// opened at a step as a fork that records nothing. The gdb stub and the
/// DAP server drive it (the DAP's own `Session` is the protocol's side).
pub struct DebugCore {
    origin: Rc<Origin>,
    live: Live,
    pid: Pid,
    breakpoints: BTreeSet<u64>,
    watches: Vec<Watch>,
    /// Set when memory or registers were written: no longer the recording.
    modified: bool,
    snaps: snapshot_cache::Snapshots,
}

impl DebugCore {
    /// Opens the run at `step` (after that step was served), on process `pid`
    /// (default: the process of the thread on the CPU). At the step of the
    /// fault that ended the run, there is no after: the session stands where
    /// the fault was raised, its signal pending, every thread as it was (as
    /// a core file shows them).
    pub fn open(origin: Origin, step: u64, pid: Option<Pid>) -> Result<DebugCore, DebugError> {
        let origin = Rc::new(origin);
        match DebugCore::open_after(origin.clone(), step, pid) {
            Err(DebugError::Ended(at)) if at == step && step > 0 => {
                DebugCore::at_fatal_fault(origin, step, pid)
            }
            r => r,
        }
    }

    /// Opens at `step - 1` and runs to the fault that is `step`.
    fn at_fatal_fault(
        origin: Rc<Origin>,
        step: u64,
        pid: Option<Pid>,
    ) -> Result<DebugCore, DebugError> {
        let mut s = DebugCore::open_after(origin, step - 1, pid)?;
        match s.cont()? {
            Stop::Signal { .. } => {
                if pid.is_none() {
                    s.pid = s.live.k.cur_pid();
                }
                Ok(s)
            }
            // Killed by a signal sent, not raised by an instruction.
            _ => Err(DebugError::Ended(step)),
        }
    }

    fn open_after(
        origin: Rc<Origin>,
        step: u64,
        pid: Option<Pid>,
    ) -> Result<DebugCore, DebugError> {
        let mut snaps = snapshot_cache::Snapshots::new(origin.pages.clone());
        let k = snaps.kernel_at(&origin, step)?;
        let pid = match pid {
            Some(p) if k.procs.contains_key(&p) => p,
            Some(p) => return Err(DebugError::NoProcess(p)),
            None => k.cur_pid(),
        };
        let mut s = DebugCore {
            origin,
            live: Live::new(k),
            pid,
            breakpoints: BTreeSet::new(),
            watches: Vec::new(),
            modified: false,
            snaps,
        };
        s.span_started();
        Ok(s)
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// The step last served.
    pub fn step(&self) -> u64 {
        self.live.k.step
    }

    /// The thread on the CPU.
    pub fn current_thread(&self) -> Tid {
        self.live.k.cur_tid()
    }

    /// Whether gdb (or the client) wrote memory or registers.
    pub fn is_modified(&self) -> bool {
        self.modified
    }

    /// How the process ended, once it has.
    pub fn ended(&self) -> Option<ExitStatus> {
        self.live.ended
    }

    /// The live threads of the process, in creation order.
    pub fn threads(&self) -> Vec<Tid> {
        match self.live.k.procs.get(&self.pid) {
            Some(p) if self.live.ended.is_none() => p
                .threads
                .iter()
                .copied()
                .filter(|t| self.live.k.threads.contains_key(t))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A thread's name (prctl PR_SET_NAME, else the program's).
    pub fn thread_name(&self, tid: Tid) -> Option<String> {
        self.live.k.threads.get(&tid).map(|t| t.name.clone())
    }

    /// The kernel, to read what else it knows (symbols, files, processes).
    pub fn kernel(&mut self) -> &mut Kernel<'static> {
        &mut self.live.k
    }

    /// The ELF bytes of the program the run started.
    pub fn program(&self) -> Result<Vec<u8>, DebugError> {
        let i = &self.origin.inputs;
        Ok(crate::kernel::elf::first_program(&i.image, &i.manifest)?
            .bytes
            .to_vec())
    }

    pub fn breakpoints(&self) -> impl Iterator<Item = u64> + '_ {
        self.breakpoints.iter().copied()
    }

    pub fn add_breakpoint(&mut self, addr: u64) {
        self.breakpoints.insert(addr);
        self.sync_traps();
    }

    pub fn remove_breakpoint(&mut self, addr: u64) -> bool {
        let had = self.breakpoints.remove(&addr);
        if self.live.counts.contains_key(&addr) {
            self.live.ghosts.insert(addr);
        }
        self.sync_traps();
        had
    }

    /// Replaces every breakpoint at once (one pass over the traps); the
    /// removed ones keep being counted until the span ends, as with
    /// `remove_breakpoint`.
    pub fn set_breakpoints(&mut self, want: BTreeSet<u64>) {
        for a in self.breakpoints.difference(&want) {
            if self.live.counts.contains_key(a) {
                self.live.ghosts.insert(*a);
            }
        }
        self.breakpoints = want;
        self.sync_traps();
    }

    /// The position the machine stands at, when its hit was counted (a
    /// breakpoint set since its span began); else `position` finds it.
    pub fn here_position(&self) -> Option<Position> {
        let h = self.here();
        Some(Position {
            step: h.step,
            pc: h.pc,
            hit: h.hit?,
        })
    }

    /// Whether the machine is at the start of its span (right after an
    /// exit was served), not moved since.
    pub fn at_span_start(&self) -> bool {
        self.live.route.is_empty()
    }

    pub fn watches(&self) -> &[Watch] {
        &self.watches
    }

    pub fn add_watch(&mut self, w: Watch) {
        if !self.watches.contains(&w) {
            self.watches.push(w);
        }
        self.sync_traps();
    }

    pub fn remove_watch(&mut self, w: Watch) -> bool {
        let n = self.watches.len();
        self.watches.retain(|x| *x != w);
        self.sync_traps();
        n != self.watches.len()
    }
}

impl Live {
    /// As new: nothing inserted, counted or pending.
    fn clear(&mut self) {
        self.inserted.clear();
        self.tracked.clear();
        self.ghosts.clear();
        self.counts.clear();
        self.count_all = false;
        self.route.clear();
        self.moved = false;
        self.pending = None;
        self.protected.clear();
        self.ended = None;
    }

    fn new(k: Kernel<'static>) -> Live {
        Live {
            k,
            inserted: BTreeMap::new(),
            tracked: BTreeSet::new(),
            ghosts: BTreeSet::new(),
            counts: HashMap::new(),
            count_all: false,
            route: Vec::new(),
            moved: false,
            pending: None,
            protected: BTreeMap::new(),
            ended: None,
        }
    }
}
