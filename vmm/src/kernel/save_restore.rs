//! Saving the kernel's state into keyframes and building a kernel back from
//! one. The policy of when to take them is in `run::keyframe`; the vCPU's
//! part is `machine::vcpu_state`, a debug session's in-memory cache of them
//! `debug::snapshot_cache`.

use super::task::{Pid, Process, Thread, Tid};
use super::{futex, sched, time, Kernel};
use crate::machine::Machine;
use crate::run::keyframe::{Keyframe, KEYFRAME_MIN_STEPS, KEYFRAME_STEPS, KEYFRAME_WALL_MS};
use crate::run::pages::{hash_page, zero_page_hash, PageHash, PageSource};
use crate::run::Recorder;
use crate::run::RunInputs;
use crate::schedule::Rng;
use crate::EngineError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const PAGE: usize = crate::machine::layout::PAGE_SIZE as usize;

/// Everything of the kernel a keyframe keeps (the machine's part is in the
/// keyframe itself: vCPU, allocator, pages).
#[derive(Serialize, Deserialize)]
struct KernelState {
    procs: BTreeMap<Pid, Process>,
    threads: BTreeMap<Tid, Thread>,
    sched: sched::Scheduler,
    clock: time::Clock,
    futexes: futex::Futexes,
    rng: Rng,
    step: u64,
    vfs: super::fs::Vfs,
    names: BTreeMap<Tid, String>,
    writers: BTreeMap<String, std::collections::BTreeSet<(Pid, Tid)>>,
    next_id: u32,
    points: super::points::MemPoints,
    zombies: BTreeMap<Pid, super::task::Zombie>,
}

/// Why a keyframe's kernel state is refused: an invariant the kernel
/// relies on does not hold (a crafted file with valid checksums).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadState {
    #[error("the running thread {0} is not on the CPU")]
    RunningOffCpu(Tid),
    #[error("thread {tid} of a missing process {pid}")]
    MissingProcess { tid: Tid, pid: Pid },
    #[error("thread {0} not listed by its process")]
    Unlisted(Tid),
    #[error("thread {0} is off the CPU without its registers")]
    NoRegisters(Tid),
    #[error("process {pid} lists a missing thread {tid}")]
    MissingThread { pid: Pid, tid: Tid },
    #[error("a missing thread {0} is runnable")]
    MissingRunnable(Tid),
    #[error("thread {0} has a bad queued signal")]
    ThreadSignal(Tid),
    #[error("thread {0} has a bad alternate stack")]
    AltStack(Tid),
    #[error("process {0} has a bad queued signal")]
    ProcessSignal(Pid),
    #[error("process {0} has a bad address space")]
    AddressSpace(Pid),
    #[error("{0} processes")]
    TooManyProcesses(usize),
    #[error("{0} threads")]
    TooManyThreads(usize),
    #[error("the next id {0} is already taken")]
    NextId(u32),
    #[error("the clock is before its start")]
    Clock,
}

impl KernelState {
    /// The invariants the kernel relies on: a keyframe that breaks them
    /// (a crafted file with valid checksums) is refused, not run.
    fn check(&self) -> Result<(), BadState> {
        let cur = self.sched.current;
        match self.threads.get(&cur) {
            Some(t) if t.ctx.is_none() => {}
            _ => return Err(BadState::RunningOffCpu(cur)),
        }
        for t in self.threads.values() {
            let p = self.procs.get(&t.pid).ok_or(BadState::MissingProcess {
                tid: t.tid,
                pid: t.pid,
            })?;
            if !p.threads.contains(&t.tid) {
                return Err(BadState::Unlisted(t.tid));
            }
            if t.tid != cur && t.ctx.is_none() {
                return Err(BadState::NoRegisters(t.tid));
            }
        }
        for p in self.procs.values() {
            if let Some(&tid) = p.threads.iter().find(|t| !self.threads.contains_key(t)) {
                return Err(BadState::MissingThread { pid: p.pid, tid });
            }
        }
        if let Some(&t) = self
            .sched
            .runq
            .iter()
            .find(|t| !self.threads.contains_key(t))
        {
            return Err(BadState::MissingRunnable(t));
        }
        // Values that later index an array, shift a mask or size a loop.
        use super::signal::{SigInfo, MAX_QUEUED, NSIG};
        let bad_queue = |q: &[SigInfo]| {
            q.len() > MAX_QUEUED || q.iter().any(|s| !(1..=NSIG as i32).contains(&s.signo))
        };
        for t in self.threads.values() {
            if bad_queue(&t.signals.pending) {
                return Err(BadState::ThreadSignal(t.tid));
            }
            let a = t.signals.altstack;
            if a.sp.checked_add(a.size).is_none() {
                return Err(BadState::AltStack(t.tid));
            }
        }
        for p in self.procs.values() {
            let fatal = p.signals.fatal.as_ref().map(|(_, s)| *s);
            if bad_queue(&p.signals.shared) || fatal.is_some_and(|s| bad_queue(&[s])) {
                return Err(BadState::ProcessSignal(p.pid));
            }
            if !p.mm.is_sane() {
                return Err(BadState::AddressSpace(p.pid));
            }
        }
        if self.procs.len() + self.zombies.len() > super::process::MAX_PROCS {
            return Err(BadState::TooManyProcesses(
                self.procs.len() + self.zombies.len(),
            ));
        }
        if self.threads.len() > super::thread::MAX_THREADS {
            return Err(BadState::TooManyThreads(self.threads.len()));
        }
        let top = self
            .threads
            .keys()
            .chain(self.procs.keys())
            .chain(self.zombies.keys())
            .max()
            .copied();
        if top.is_some_and(|id| id >= self.next_id) || self.next_id == u32::MAX {
            return Err(BadState::NextId(self.next_id));
        }
        if !self.clock.is_sane() {
            return Err(BadState::Clock);
        }
        Ok(())
    }
}

/// Where the engine is in its keyframe policy.
#[derive(Debug)]
pub struct KeyframeClock {
    pub last_step: u64,
    pub last_wall: std::time::Duration,
    /// The CPU time the last keyframe took: the wall-time rule waits at least
    /// ten times that, so keyframes of a large state (thousands of
    /// threads) take at most about a tenth of the run's time.
    pub last_cost: std::time::Duration,
    /// Every page with contents and its hash, kept up to date at each keyframe.
    pub pages: BTreeMap<u64, PageHash>,
    /// Pages of file contents (`blobs`) already given to the recorder.
    pub blob_pages: std::collections::HashSet<PageHash>,
}

// Read at every step inside a `machine::tsc::Trap`: a coarse clock, which
// needs no `rdtsc`.
use crate::machine::tsc::coarse_now as coarse_wall;
// What a keyframe costs: the wall time overstates it on a loaded host (a
// keyframe descheduled for a second would put the next one ten seconds off).
use crate::machine::tsc::thread_cpu_time;

impl KeyframeClock {
    pub fn new(step: u64) -> KeyframeClock {
        KeyframeClock {
            last_step: step,
            last_wall: coarse_wall(),
            last_cost: Default::default(),
            pages: BTreeMap::new(),
            blob_pages: Default::default(),
        }
    }

    fn due(&self, step: u64) -> bool {
        let steps = step - self.last_step;
        steps >= KEYFRAME_STEPS
            || (steps >= KEYFRAME_MIN_STEPS
                && coarse_wall().saturating_sub(self.last_wall)
                    >= (self.last_cost * 10)
                        .max(std::time::Duration::from_millis(KEYFRAME_WALL_MS)))
    }
}

impl Kernel<'_> {
    /// The pages written since the last look, by the guest or the monitor
    /// (`machine::dirty`), sorted.
    pub fn take_written(&mut self) -> Result<Vec<u64>, EngineError> {
        let spaces: Vec<crate::machine::PageTables> =
            self.procs.values().map(|p| p.mm.pt).collect();
        self.m.take_dirty_pages(&spaces)
    }

    /// Takes a keyframe when the policy says one is due.
    pub(super) fn maybe_keyframe(&mut self) {
        let due = match &self.keyframes {
            Some(k) => k.due(self.step),
            None => false,
        };
        if due {
            if let Err(e) = self.take_keyframe() {
                self.engine_failure(e);
            }
        }
    }

    pub fn take_keyframe(&mut self) -> Result<(), EngineError> {
        let started = thread_cpu_time();
        let Some(mut clock) = self.keyframes.take() else {
            return Ok(());
        };
        let first = clock.pages.is_empty();
        let dirty = self.take_written()?;
        let mut new_pages: Vec<(PageHash, &[u8])> = Vec::new();
        for pa in &dirty {
            let bytes = self.m.ram.slice(*pa, PAGE)?;
            let h = hash_page(bytes);
            if clock.pages.insert(*pa, h) != Some(h) {
                new_pages.push((h, bytes));
            }
        }
        let frames = clock.pages.iter().map(|(pa, h)| (*pa, *h)).collect();
        let (kf, blobs) = self.keyframe_now(frames, &mut clock.blob_pages)?;
        new_pages.extend(blobs.iter().map(|(h, b)| (*h, b.as_slice())));
        self.rec.keyframe(&kf, &new_pages);
        // The first keyframe of a recording hashes every page the program
        // was loaded into, which no later one does again: its cost would
        // put the second keyframe up to `KEYFRAME_STEPS` off, and a seek
        // there would replay all of them.
        clock.last_step = self.step;
        clock.last_wall = coarse_wall();
        clock.last_cost = if first {
            std::time::Duration::ZERO
        } else {
            thread_cpu_time().saturating_sub(started)
        };
        self.keyframes = Some(clock);
        Ok(())
    }
}

/// Pages of file contents, by hash (`kernel::blobs`).
pub type BlobPages = Vec<(PageHash, Vec<u8>)>;

impl Kernel<'_> {
    /// The machine as it stands as a keyframe whose page map is `frames`
    /// (every page with contents and its hash, kept by the caller), with
    /// the pages of file contents not in `blob_pages` yet (now added).
    /// For the disk's keyframes and a debug session's in-memory ones.
    pub fn keyframe_now(
        &self,
        frames: Vec<(u64, PageHash)>,
        blob_pages: &mut std::collections::HashSet<PageHash>,
    ) -> Result<(Keyframe, BlobPages), EngineError> {
        let state = KernelState {
            procs: self.procs.clone(),
            threads: self.threads.clone(),
            sched: self.sched.clone(),
            clock: self.clock.clone(),
            futexes: self.futexes.clone(),
            rng: self.rng.clone(),
            step: self.step,
            vfs: self.vfs.clone(),
            names: self.names.clone(),
            writers: self.writers.clone(),
            next_id: self.next_id,
            points: self.points.clone(),
            zombies: self.zombies.clone(),
        };
        let (kernel, blobs) = super::blobs::saving(blob_pages, || postcard::to_allocvec(&state));
        let kernel = kernel
            .map_err(|e| EngineError::BadKeyframe(format!("cannot encode the kernel: {e}")))?;
        let kf = Keyframe {
            step: self.step,
            recorded: self.recorded,
            vcpu: self.m.vcpu_state()?,
            allocator: self.m.ram.allocator(),
            frames,
            file_pages: blobs.referenced,
            kernel,
        };
        Ok((kf, blobs.new))
    }
}

/// Whether this build can restore `kf`: its kernel state decodes. A
/// keyframe written by another build of the engine may not; then seeks and
/// forks fall back to an earlier keyframe, or to step 0.
pub fn restorable<P: PageSource + Clone + 'static>(kf: &Keyframe, pages: &P) -> bool {
    super::blobs::restoring(pages, || postcard::from_bytes::<KernelState>(&kf.kernel)).is_ok()
}

impl<'r> Kernel<'r> {
    /// A kernel in the state `kf` saved, ready to run step `kf.step + 1`.
    ///
    /// `same_run`: the inputs are those of the run that took the keyframe
    /// (a seek), so its schedule's state is the saved one; otherwise (a
    /// fork) the schedule comes fresh from the new manifest, which agrees
    /// with the old one up to the fork.
    pub fn restore<P: PageSource + Clone + 'static>(
        inputs: &RunInputs,
        kf: &Keyframe,
        pages: &P,
        same_run: bool,
        rec: &'r mut dyn Recorder,
    ) -> Result<Kernel<'r>, EngineError> {
        let man = &inputs.manifest;
        man.validate()?;
        let first = super::elf::first_program(&inputs.image, man)?;
        let mut m = Machine::new(man.mem)?;
        let st = restore_machine(&mut m, &kf.frames, kf, pages, inputs, same_run)?;
        let mut k = Kernel {
            m,
            procs: st.procs,
            zombies: st.zombies,
            threads: st.threads,
            sched: st.sched,
            clock: st.clock,
            futexes: st.futexes,
            rng: st.rng,
            step: st.step,
            inputs: inputs.clone(),
            symbols: super::symbols::SymbolTable::default(),
            vfs: st.vfs,
            next_id: st.next_id,
            points: st.points,
            names: st.names,
            writers: st.writers,
            status: None,
            failure: None,
            recorded: kf.recorded,
            keyframes: None,
            rec,
        };
        k.keyframes = k.rec.wants_keyframes().then(|| keyframe_clock(kf));
        k.symbols = super::symbols::SymbolTable::from_elf(
            &first.path,
            first.bytes.clone(),
            super::elf::load_bias(&first.bytes),
        );
        Ok(k)
    }

    /// Puts this kernel, on its own machine, in the state `kf` (a keyframe
    /// of its inputs' run, or of a parent's, as `restore`'s `same_run`)
    /// saved, as `restore` would build it: of `kf`'s
    /// pages only `write` are written, as the caller knows the others
    /// already hold theirs (and has zeroed its pages with contents that
    /// `kf` has not). The machine and the parsed symbols are kept: a debug
    /// session goes back and forth this way without building a VM.
    pub fn reset_to<P: PageSource + Clone + 'static>(
        &mut self,
        kf: &Keyframe,
        write: &[(u64, PageHash)],
        pages: &P,
        same_run: bool,
    ) -> Result<(), EngineError> {
        let inputs = self.inputs.clone();
        let st = restore_machine(&mut self.m, write, kf, pages, &inputs, same_run)?;
        // The page tables were written behind the MMU's back.
        self.m.flush_tlb()?;
        self.m.forget_written()?;
        self.procs = st.procs;
        self.zombies = st.zombies;
        self.threads = st.threads;
        self.sched = st.sched;
        self.clock = st.clock;
        self.futexes = st.futexes;
        self.rng = st.rng;
        self.step = st.step;
        self.vfs = st.vfs;
        self.next_id = st.next_id;
        self.points = st.points;
        self.names = st.names;
        self.writers = st.writers;
        self.status = None;
        self.failure = None;
        self.recorded = kf.recorded;
        self.keyframes = self.rec.wants_keyframes().then(|| keyframe_clock(kf));
        Ok(())
    }
}

/// The keyframe policy's state right after restoring `kf`.
fn keyframe_clock(kf: &Keyframe) -> KeyframeClock {
    let mut clock = KeyframeClock::new(kf.step);
    clock.pages.extend(kf.frames.iter().copied());
    clock
}

/// Writes `write` (pages of `kf`) into `m`'s memory, sets its allocator
/// and vCPU as `kf` saved them, and decodes and checks `kf`'s kernel
/// state, its schedule made `inputs`' when it is a fork's (`!same_run`).
fn restore_machine<P: PageSource + Clone + 'static>(
    m: &mut Machine,
    write: &[(u64, PageHash)],
    kf: &Keyframe,
    pages: &P,
    inputs: &RunInputs,
    same_run: bool,
) -> Result<KernelState, EngineError> {
    let man = &inputs.manifest;
    let zero = zero_page_hash();
    for (pa, h) in write {
        // A zero page where memory is zero already (a new machine's) needs no write.
        if *h == zero
            && m.ram
                .slice(*pa, PAGE)
                .is_ok_and(|b| b.iter().all(|x| *x == 0))
        {
            continue;
        }
        let bytes = pages
            .page(h)
            .map_err(|e| EngineError::BadKeyframe(format!("page {pa:#x}: {e}")))?;
        if bytes.len() != PAGE {
            return Err(EngineError::BadKeyframe(format!(
                "page {pa:#x} holds {} bytes",
                bytes.len()
            )));
        }
        m.ram
            .write(*pa, &bytes)
            .map_err(|e| EngineError::BadKeyframe(format!("page {pa:#x}: {e}")))?;
    }
    if !m.ram.set_allocator(kf.allocator.clone()) {
        return Err(EngineError::BadKeyframe(
            "frame allocator outside guest memory".into(),
        ));
    }
    m.restore_vcpu(&kf.vcpu)?;
    // What was just written is the keyframe, not news for the next one.
    m.forget_written()?;
    let mut st: KernelState =
        super::blobs::restoring(pages, || postcard::from_bytes(&kf.kernel))
            .map_err(|e| EngineError::BadKeyframe(format!("kernel state: {e}")))?;
    st.check()
        .map_err(|why| EngineError::BadKeyframe(format!("kernel state: {why}")))?;
    // Not saved: where the image's answers come from is the inputs' say.
    st.vfs.tree.image.set_view(inputs.image.view().clone());
    if !same_run {
        st.sched.perturber = crate::schedule::Perturber::from_manifest(man).map(|mut p| {
            p.applied = man
                .perturb
                .iter()
                .filter(|q| q.step <= kf.step)
                .copied()
                .collect();
            p
        });
    }
    Ok(st)
}

/// Serde for fixed arrays longer than serde's 32 (signal dispositions), as a sequence.
pub mod array_serde {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: Serialize, const N: usize>(
        a: &[T; N],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(a.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>, const N: usize>(
        d: D,
    ) -> Result<[T; N], D::Error> {
        let v: Vec<T> = Vec::deserialize(d)?;
        let len = v.len();
        v.try_into()
            .map_err(|_| serde::de::Error::invalid_length(len, &"a fixed-size array"))
    }
}
