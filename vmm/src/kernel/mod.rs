//! The kernel: a deterministic implementation of the Linux x86-64 ABI,
//! served from the monitor. One module per family (`mm`, `fs`, `futex`,
//! `signal`, `time`, `sched`, `thread`, `identity`); `syscalls` is the one
//! table from call number to handler.

pub mod blobs;
pub mod elf;
pub mod errno;
pub mod fault;
pub mod fs;
pub mod futex;
pub mod identity;
pub mod inject;
pub mod mm;
pub mod net;
pub mod points;
pub mod posix_timer;
pub mod process;
pub mod races;
pub mod render;
pub mod save_restore;
pub mod sched;
pub mod sdk;
pub mod signal;
pub mod stack;
pub mod symbols;
mod sync_code;
pub mod syscalls;
pub mod task;
pub mod thread;
pub mod time;
pub mod uaccess;

use crate::machine::tsc::Trap;
use crate::machine::watchdog::Watchdog;
use crate::machine::{Exit, Machine};
use crate::run::{Event, EventKind, ExitStatus, Recorder};
use crate::run::{Limits, Outcome, RunInputs};
use crate::schedule::Rng;
use crate::EngineError;
use errno::Errno;
use std::collections::BTreeMap;
use std::time::Instant;
use task::{Pid, Process, Thread, ThreadState, Tid};

/// What the run loop noticed on the way.
#[derive(Default)]
struct Notes {
    /// Where every thread was when the run deadlocked or timed out.
    stuck: Vec<String>,
    /// Where every thread was after `Limits::where_at`.
    where_at: Vec<String>,
    /// The running process's ELF files then (`Outcome::symbols_at`).
    symbols_at: Option<std::sync::Arc<::symbols::Symbolizer>>,
    /// `Outcome::places_at`.
    places_at: Vec<(u64, u32, String)>,
}

/// The first pid handed out; later ones count up from it.
pub const FIRST_PID: Pid = 1000;

pub struct Kernel<'r> {
    pub m: Machine,
    pub procs: BTreeMap<Pid, Process>,
    /// Ended processes their parents have not reaped.
    pub zombies: BTreeMap<Pid, task::Zombie>,
    pub threads: BTreeMap<Tid, Thread>,
    pub sched: sched::Scheduler,
    pub clock: time::Clock,
    pub futexes: futex::Futexes,
    pub rng: Rng,
    pub step: u64,
    pub inputs: RunInputs,
    pub symbols: symbols::SymbolTable,
    /// Files: the tree (image and overlay), open descriptions, standard input.
    pub vfs: fs::Vfs,
    next_id: u32,
    /// Memory scheduling points: which pages trap, and the access in flight.
    pub points: points::MemPoints,
    /// Every thread's name, kept after it exits.
    pub names: BTreeMap<Tid, String>,
    /// Each regular file written, and by which (pid, tid).
    pub writers: BTreeMap<String, std::collections::BTreeSet<(Pid, Tid)>>,
    /// How much has been recorded: events, output bytes, switches.
    pub recorded: crate::run::keyframe::Recorded,
    /// The keyframe policy's state; None when the recorder keeps none.
    keyframes: Option<save_restore::KeyframeClock>,
    /// Set when the run is over.
    status: Option<ExitStatus>,
    /// A failure of the monitor itself (not of the guest) ends the run with it.
    failure: Option<EngineError>,
    pub(crate) rec: &'r mut dyn Recorder,
}

impl<'r> Kernel<'r> {
    /// Builds the machine and loads the program as the first process.
    pub fn boot(inputs: &RunInputs, rec: &'r mut dyn Recorder) -> Result<Kernel<'r>, EngineError> {
        let man = &inputs.manifest;
        man.validate()?;
        let first = elf::first_program(&inputs.image, man)?;
        let m = Machine::new(man.mem)?;
        let mut k = Kernel {
            m,
            procs: BTreeMap::new(),
            zombies: BTreeMap::new(),
            threads: BTreeMap::new(),
            sched: sched::Scheduler::new(FIRST_PID),
            clock: time::Clock::new(man.epoch, man.quantum_ns),
            futexes: futex::Futexes::default(),
            // A reseed at step 0 is a different seed from the start (AT_RANDOM too).
            rng: Rng::new(match man.reseed {
                Some((0, seed)) => seed,
                _ => man.seed,
            }),
            step: 0,
            inputs: inputs.clone(),
            symbols: symbols::SymbolTable::default(),
            vfs: fs::Vfs::new(&inputs.image, inputs.stdin.clone(), man.epoch, man.cores),
            next_id: FIRST_PID,
            points: points::MemPoints::of(man.points, &man.race_pages),
            names: BTreeMap::new(),
            writers: BTreeMap::new(),
            recorded: Default::default(),
            keyframes: rec
                .wants_keyframes()
                .then(|| save_restore::KeyframeClock::new(0)),
            status: None,
            failure: None,
            rec,
        };
        k.sched.perturber = crate::schedule::Perturber::from_manifest(man);
        k.spawn_init(&first)?;
        Ok(k)
    }

    pub fn alloc_id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub fn cur_tid(&self) -> Tid {
        self.sched.current
    }

    pub fn cur_pid(&self) -> Pid {
        self.threads[&self.sched.current].pid
    }

    pub fn cur_thread(&mut self) -> &mut Thread {
        self.threads
            .get_mut(&self.sched.current)
            .expect("current thread")
    }

    pub fn cur_proc(&mut self) -> &mut Process {
        let pid = self.cur_pid();
        self.procs.get_mut(&pid).expect("current process")
    }

    /// Records an event of the current thread at this step.
    pub fn emit(&mut self, kind: EventKind) {
        let tid = self.cur_tid();
        self.emit_for(tid, kind);
    }

    pub fn emit_for(&mut self, tid: Tid, kind: EventKind) {
        let pid = self.threads.get(&tid).map_or(0, |t| t.pid);
        self.rec_event(pid, tid, kind);
    }

    pub fn rec_event(&mut self, pid: Pid, tid: Tid, kind: EventKind) {
        self.recorded.events += 1;
        self.rec.event(&Event {
            step: self.step,
            pid,
            tid,
            kind,
        });
    }

    pub fn output(&mut self, fd: i32, bytes: &[u8]) {
        self.recorded.output_bytes += bytes.len() as u64;
        self.rec.output(fd, bytes);
    }

    /// Ends the run with this status (the first one wins).
    pub fn finish(&mut self, status: ExitStatus) {
        self.status.get_or_insert(status);
    }

    pub fn is_finished(&self) -> bool {
        self.status.is_some()
    }

    /// Turns a monitor failure met inside a call into an ended run.
    pub fn engine_failure(&mut self, e: EngineError) -> Errno {
        self.failure.get_or_insert(e);
        errno::EIO
    }

    /// Runs until the program ends, deadlocks or times out.
    pub fn run(mut self, limits: &Limits) -> Result<Outcome, EngineError> {
        let started = Instant::now();
        let watchdog = Watchdog::start(limits.timeout);
        let mut notes = Notes::default();
        self.advance(limits, &watchdog, None, &mut notes)?;
        let status = self.status.expect("the loop ends with a status");
        Ok(Outcome {
            status,
            steps: self.step,
            virtual_ns: self.clock.elapsed_ns(),
            wall: started.elapsed(),
            stuck: notes.stuck,
            perturbed: self
                .sched
                .perturber
                .take()
                .map(|p| p.applied)
                .unwrap_or_default(),
            where_at: notes.where_at,
            symbols_at: notes.symbols_at,
            places_at: notes.places_at,
            writers: std::mem::take(&mut self.writers),
            race_pages: self
                .points
                .race
                .as_ref()
                .map(|r| r.confirmed())
                .unwrap_or_default(),
            thread_names: {
                let live: Vec<(Tid, String)> = self
                    .threads
                    .values()
                    .map(|t| (t.tid, t.name.clone()))
                    .collect();
                self.names.extend(live);
                std::mem::take(&mut self.names)
            },
            kept: limits
                .keep
                .iter()
                .filter_map(|p| Some((p.clone(), self.file_tree(p)?)))
                .collect(),
        })
    }

    /// Runs until step `step` has been handled (or the program ends before
    /// it): the kernel then shows the machine as it was at that step.
    pub fn run_to(&mut self, step: u64, limits: &Limits) -> Result<(), EngineError> {
        let watchdog = Watchdog::start(limits.timeout);
        self.advance(limits, &watchdog, Some(step), &mut Notes::default())
    }

    fn advance(
        &mut self,
        limits: &Limits,
        watchdog: &Watchdog,
        stop_at: Option<u64>,
        notes: &mut Notes,
    ) -> Result<(), EngineError> {
        // Held until the caller has control again; nothing is started meanwhile.
        let trap = Trap::hold();
        while self.status.is_none() && stop_at.is_none_or(|s| self.step < s) {
            if let Some(e) = self.failure.take() {
                return Err(e);
            }
            if watchdog.fired() || limits.max_steps.is_some_and(|m| self.step >= m) {
                notes.stuck = self.where_threads_are();
                self.finish(ExitStatus::TimedOut);
                break;
            }
            match self.run_guest(&trap)? {
                Exit::Interrupted => continue,
                exit => self.serve(exit),
            }
            if self.status.is_some() {
                break;
            }
            if limits.where_at == Some(self.step) {
                notes.where_at = self.where_threads_are();
                let pid = self.threads.get(&self.cur_tid()).map(|t| t.pid);
                notes.symbols_at = pid.and_then(|p| self.symbolizer_of(p));
            }
            if limits.places_at.contains(&self.step) {
                let tid = self.cur_tid();
                if let Some(place) = self.own_caller(tid) {
                    notes.places_at.push((self.step, tid, place));
                }
            }
            if let Err(dead) = self.schedule_next() {
                notes.stuck = dead;
                self.finish(ExitStatus::Deadlocked);
                break;
            }
            self.maybe_keyframe();
        }
        match self.failure.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Serves one exit of the guest: the step it is (an interruption is none).
    pub fn serve(&mut self, exit: Exit) {
        match exit {
            Exit::Interrupted => {}
            Exit::Syscall => {
                self.tick();
                self.syscall();
            }
            Exit::Exception {
                vector,
                error_code,
                cr2,
            } => {
                self.tick();
                self.exception(vector, error_code, cr2);
            }
        }
    }

    /// After a served exit: timers, signals, and the thread that runs next.
    /// Err: every thread is blocked for good, with where each one waits.
    pub fn schedule_next(&mut self) -> Result<(), Vec<String>> {
        self.fire_timers();
        self.grant_locks();
        self.signals_and_schedule()
    }

    /// How the run ended, once it has.
    pub fn status(&self) -> Option<ExitStatus> {
        self.status
    }

    /// A failure of the monitor met while serving an exit, taken once.
    pub fn take_failure(&mut self) -> Option<EngineError> {
        self.failure.take()
    }

    fn tick(&mut self) {
        self.step += 1;
        self.clock.tick();
        if let Some((step, seed)) = self.inputs.manifest.reseed {
            if step == self.step {
                self.rng = Rng::new(seed);
            }
        }
    }

    /// One line per live thread: what it waits in, and where its code is.
    pub fn where_threads_are(&mut self) -> Vec<String> {
        let cur = self.cur_tid();
        let cur_rip = self.m.regs().rip;
        let tids: Vec<Tid> = self.threads.keys().copied().collect();
        tids.into_iter()
            .map(|tid| {
                let t = self.threads[&tid].clone();
                let rip = t.ctx.as_ref().map_or(cur_rip, |c| c.regs.rip);
                let what = self.thread_doing(tid, cur);
                format!(
                    "thread {}/{}: {what}, at {}",
                    t.pid,
                    tid,
                    self.describe_thread(tid, rip)
                )
            })
            .collect()
    }

    /// What a thread is doing: `running`, `runnable`, `blocked in CALL`..
    pub fn thread_doing(&mut self, tid: Tid, cur: Tid) -> String {
        let Some(t) = self.threads.get(&tid).cloned() else {
            return "gone".to_string();
        };
        match (&t.state, t.pending_call) {
            (ThreadState::Blocked { .. }, Some(call)) => {
                format!("blocked in {}", render::call_text(self, tid, call))
            }
            (
                ThreadState::Blocked {
                    wait: task::Wait::Stall,
                    ..
                },
                None,
            ) => "stalled by the schedule".to_string(),
            (ThreadState::Blocked { wait, .. }, None) => format!("blocked in {wait:?}"),
            (ThreadState::Runnable, _) if !self.can_run(tid) => {
                let sig = self.procs.get(&t.pid).and_then(|p| p.stopped);
                format!("stopped by {}", crate::run::signal_name(sig.unwrap_or(0)))
            }
            (ThreadState::Runnable, _) if tid == cur => "running".to_string(),
            (ThreadState::Runnable, _) => "runnable".to_string(),
        }
    }
}
