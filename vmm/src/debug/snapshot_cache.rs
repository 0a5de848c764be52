//! A debug session's snapshots, a cache in memory: as its machine passes the starts
//! of steps it keeps states there (the keyframe's format: vCPU, kernel
//! state, page map, with the pages' bytes held here once by hash), denser
//! near where the session stands, within a memory budget. Going to a step
//! restores the latest snapshot or keyframe at or before it in the
//! session's own VM, writing only the pages that differ from what its
//! memory holds (the dirty log says what changed since it was known), and
//! runs forward from there.
//!
//! Nothing of the debugger is kept: the `int3`s in memory are taken out of
//! the pages' copies, and snapshots are taken as an exit was served, when
//! watched pages have the kernel's entries, so a restore is the
//! recording's state exactly.

use super::{DebugCore, DebugError, Origin};
use crate::kernel::Kernel;
use crate::run::keyframe::Keyframe;
use crate::run::pages::{hash_page, PageError, PageHash, PageSource};
use crate::run::Discard;
use crate::run::Limits;
use crate::store::pages::PageStore;
use crate::EngineError;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::rc::Rc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

const PAGE: usize = crate::machine::layout::PAGE_SIZE as usize;
const INT3: u8 = 0xcc;

/// The snapshots' memory when the session is not told otherwise.
pub const DEFAULT_BUDGET: u64 = 256 << 20;

/// What every debug session of this process holds in snapshots: one
/// budget for the process (a `rewind dap --port` server serves many
/// sessions), shared fairly. A session keeps at most the budget divided by
/// the sessions open, and never makes the total pass the budget: it drops
/// its own snapshots first. Counted under one lock, so the total read is
/// never over the budget.
struct Pool {
    budget: u64,
    used: u64,
    members: u64,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    budget: DEFAULT_BUDGET,
    used: 0,
    members: 0,
});

fn pool() -> MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the budget of all this process's snapshots together (bytes).
pub fn set_process_budget(bytes: u64) {
    pool().budget = bytes;
}

/// The bytes all this process's snapshots hold now, and their budget.
pub fn process_usage() -> (u64, u64) {
    let p = pool();
    (p.used, p.budget)
}

/// Near the focus a snapshot every step; `d` steps away, one every `d /
/// DENSITY`: a run forward of `n` steps keeps about `DENSITY * log2(n)`.
const DENSITY: u64 = 8;

/// What one entry of a snapshot's page map costs (address, hash, slack).
const MAP_ENTRY: u64 = 48;

/// Where the time of a session's travels went, for profiling (`rewind dap`
/// prints it with `REWIND_DAP_PROFILE`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// Restores of a snapshot in memory.
    pub from_memory: u64,
    /// Restores of a keyframe on disk.
    pub from_disk: u64,
    /// Boots (nothing at or before the step).
    pub boots: u64,
    /// Travels forward from where the machine stood, with no restore.
    pub onward: u64,
    /// Pages written by restores.
    pub pages_written: u64,
    pub restore_time: Duration,
    /// Steps run forward to reach a travel's step, and how long that took.
    pub steps_run: u64,
    pub run_time: Duration,
    pub taken: u64,
    pub take_time: Duration,
    pub evicted: u64,
    /// Snapshots kept now, and the bytes they hold.
    pub kept: u64,
    pub bytes: u64,
}

/// A page held for the snapshots, and how many of them refer to it.
struct Held {
    bytes: Box<[u8]>,
    refs: u32,
}

/// Pages by hash: those held in memory, else the store's.
#[derive(Clone)]
struct Pages {
    mem: Rc<RefCell<HashMap<PageHash, Held>>>,
    disk: PageStore,
}

impl PageSource for Pages {
    fn page(&self, h: &PageHash) -> Result<Vec<u8>, PageError> {
        match self.mem.borrow().get(h) {
            Some(p) => Ok(p.bytes.to_vec()),
            None => self.disk.page(h),
        }
    }
}

struct Snap {
    kf: Keyframe,
    /// Its own bytes (kernel state and page map), besides shared pages.
    cost: u64,
}

pub(super) struct Snapshots {
    budget: u64,
    kept: BTreeMap<u64, Snap>,
    pages: Pages,
    /// Bytes of the held pages and of every snapshot's own.
    used: u64,
    /// The page map of the machine's memory as last known: right but for
    /// the pages written since (the dirty log) and `stale`.
    map: BTreeMap<u64, PageHash>,
    /// Pages whose memory differs from `map` beyond the dirty log (they
    /// held the debugger's `int3`s when their copies were taken).
    stale: BTreeSet<u64>,
    /// File-content pages held (`Kernel::keyframe_now`).
    blob_pages: HashSet<PageHash>,
    /// Where the session is headed or stands: snapshots are densest here.
    focus: u64,
    stats: Stats,
}

impl Snapshots {
    pub(super) fn new(disk: PageStore) -> Snapshots {
        pool().members += 1;
        Snapshots {
            budget: DEFAULT_BUDGET,
            kept: BTreeMap::new(),
            pages: Pages {
                mem: Rc::default(),
                disk,
            },
            used: 0,
            map: BTreeMap::new(),
            stale: BTreeSet::new(),
            blob_pages: HashSet::new(),
            focus: 0,
            stats: Stats::default(),
        }
    }

    /// This session's share: its own budget, within the process's divided
    /// among the sessions open.
    fn limit(&self, p: &Pool) -> u64 {
        self.budget.min(p.budget / p.members.max(1))
    }

    /// Whether a snapshot at `step` is worth its cost now.
    fn wants(&self, step: u64) -> bool {
        if self.limit(&pool()) == 0 || self.kept.contains_key(&step) {
            return false;
        }
        let spacing = (step.abs_diff(self.focus) / DENSITY).max(1);
        let near = |s: u64| s.abs_diff(step) < spacing;
        !(self
            .kept
            .range(..step)
            .next_back()
            .is_some_and(|(s, _)| near(*s))
            || self
                .kept
                .range(step..)
                .next()
                .is_some_and(|(s, _)| near(*s)))
    }

    /// Takes a snapshot of `k` (at the start of a step) when one is wanted
    /// there; `inserted` are the debugger's `int3`s in memory (physical
    /// address, the program's byte).
    fn offer(&mut self, k: &mut Kernel<'static>, inserted: &[(u64, u8)]) -> Result<(), DebugError> {
        if !self.wants(k.step) {
            return Ok(());
        }
        let t = Instant::now();
        let mut dirty: BTreeSet<u64> = k.take_written()?.into_iter().collect();
        dirty.append(&mut self.stale);
        let mut mem = self.pages.mem.borrow_mut();
        let mut new_bytes = 0u64;
        for pa in dirty {
            let mut bytes = k.m.ram.slice(pa, PAGE).map_err(EngineError::from)?.to_vec();
            let mut patched = false;
            for (at, orig) in inserted
                .iter()
                .filter(|(at, _)| at & !(PAGE as u64 - 1) == pa)
            {
                // Still ours (the kernel may have reused the frame since).
                let b = &mut bytes[(at - pa) as usize];
                if *b == INT3 {
                    *b = *orig;
                    patched = true;
                }
            }
            if patched {
                self.stale.insert(pa);
            }
            let h = hash_page(&bytes);
            self.map.insert(pa, h);
            mem.entry(h).or_insert_with(|| {
                new_bytes += PAGE as u64;
                Held {
                    bytes: bytes.into_boxed_slice(),
                    refs: 0,
                }
            });
        }
        // The other pages are as the map says: held once, from memory.
        for (pa, h) in &self.map {
            if !mem.contains_key(h) {
                let bytes = k.m.ram.slice(*pa, PAGE).map_err(EngineError::from)?;
                new_bytes += PAGE as u64;
                mem.insert(
                    *h,
                    Held {
                        bytes: bytes.into(),
                        refs: 0,
                    },
                );
            }
        }
        let frames: Vec<(u64, PageHash)> = self.map.iter().map(|(p, h)| (*p, *h)).collect();
        let (kf, blobs) = k.keyframe_now(frames, &mut self.blob_pages)?;
        for (h, b) in blobs {
            mem.entry(h).or_insert_with(|| {
                new_bytes += b.len() as u64;
                Held {
                    bytes: b.into_boxed_slice(),
                    refs: 0,
                }
            });
        }
        for h in kf.frames.iter().map(|(_, h)| h).chain(&kf.file_pages) {
            if let Some(p) = mem.get_mut(h) {
                p.refs += 1;
            }
        }
        drop(mem);
        let cost = kf.kernel.len() as u64 + kf.frames.len() as u64 * MAP_ENTRY;
        let mut p = pool();
        self.used += cost + new_bytes;
        p.used += cost + new_bytes;
        self.kept.insert(kf.step, Snap { kf, cost });
        self.stats.taken += 1;
        self.stats.take_time += t.elapsed();
        self.thin_in(&mut p);
        Ok(())
    }

    /// Drops snapshots until this session's share holds and the process's
    /// total is within its budget.
    pub(super) fn thin(&mut self) {
        self.thin_in(&mut pool());
    }

    /// `thin` with the pool held: each time the snapshot that leaves the
    /// smallest gap for its distance from the focus.
    fn thin_in(&mut self, p: &mut Pool) {
        while (self.used > self.limit(p) || p.used > p.budget) && !self.kept.is_empty() {
            let steps: Vec<u64> = self.kept.keys().copied().collect();
            let score = |i: usize| {
                let prev = if i == 0 { 0 } else { steps[i - 1] };
                let next = steps.get(i + 1).copied().unwrap_or(steps[i] + 1);
                (next - prev) as f64 / (steps[i].abs_diff(self.focus) + 1) as f64
            };
            let worst = (0..steps.len())
                .min_by(|a, b| score(*a).total_cmp(&score(*b)))
                .expect("not empty");
            self.drop_snapshot(steps[worst], p);
        }
    }

    fn drop_snapshot(&mut self, step: u64, p: &mut Pool) {
        let Some(s) = self.kept.remove(&step) else {
            return;
        };
        let mut mem = self.pages.mem.borrow_mut();
        let mut freed = s.cost;
        for h in s.kf.frames.iter().map(|(_, h)| h).chain(&s.kf.file_pages) {
            if let Some(held) = mem.get_mut(h) {
                held.refs -= 1;
                if held.refs == 0 {
                    freed += held.bytes.len() as u64;
                    self.blob_pages.remove(h);
                    mem.remove(h);
                }
            }
        }
        self.used -= freed;
        p.used = p.used.saturating_sub(freed);
        self.stats.evicted += 1;
    }

    /// Sets the budget, dropping what no longer fits (0: none kept).
    pub(super) fn set_budget(&mut self, bytes: u64) {
        self.budget = bytes;
        self.thin();
    }

    /// Puts `k` in `kf`'s state on its own machine, writing the pages that
    /// may differ: those of `kf` that the map says differ or that were
    /// written since it was known; zeroing those `kf` has no contents for.
    fn reset<P: PageSource + Clone + 'static>(
        &mut self,
        k: &mut Kernel<'static>,
        kf: &Keyframe,
        pages: &P,
        same_run: bool,
    ) -> Result<(), DebugError> {
        let mut unsure: BTreeSet<u64> = k.take_written()?.into_iter().collect();
        unsure.append(&mut self.stale);
        let target: BTreeMap<u64, PageHash> = kf.frames.iter().copied().collect();
        let write: Vec<(u64, PageHash)> = kf
            .frames
            .iter()
            .filter(|(pa, h)| unsure.contains(pa) || self.map.get(pa) != Some(h))
            .copied()
            .collect();
        let zero: BTreeSet<u64> = self
            .map
            .keys()
            .chain(&unsure)
            .filter(|pa| !target.contains_key(pa))
            .copied()
            .collect();
        for pa in &zero {
            k.m.ram.write(*pa, &[0; PAGE]).map_err(EngineError::from)?;
        }
        // Until the reset is whole, nothing is known of the memory.
        self.map.clear();
        k.reset_to(kf, &write, pages, same_run)?;
        self.stats.pages_written += (write.len() + zero.len()) as u64;
        self.map = target;
        Ok(())
    }

    /// The machine was built anew with memory `map` (a keyframe's, or
    /// empty for a boot: the dirty log then holds every page written).
    fn known(&mut self, map: &[(u64, PageHash)]) {
        self.map = map.iter().copied().collect();
        self.stale.clear();
    }

    pub(super) fn stats(&self) -> Stats {
        Stats {
            kept: self.kept.len() as u64,
            bytes: self.used,
            ..self.stats
        }
    }
}

impl Drop for Snapshots {
    /// Its memory goes back to the process's budget, and its share to the
    /// sessions left.
    fn drop(&mut self) {
        let mut p = pool();
        p.used = p.used.saturating_sub(self.used);
        p.members = p.members.saturating_sub(1);
    }
}

/// Where a travel to a step starts.
enum Start {
    /// Onward from where the machine stands.
    Here,
    /// The snapshot at this step.
    Memory(u64),
    /// A keyframe of the origin, with whether it is the run's own.
    Disk(Box<Keyframe>, bool),
    Boot,
}

/// The latest start at or before `step`; `here`: the step the machine
/// stands at, when it can go on from there.
fn pick(origin: &Origin, snaps: &Snapshots, step: u64, here: Option<u64>) -> Start {
    let mem = snaps.kept.range(..=step).next_back().map(|(s, _)| *s);
    let disk = origin.last_keyframe_at_or_before(step);
    let disk_step = disk.map(|i| origin.keyframe_step(i));
    let best = [mem, disk_step, here].into_iter().flatten().max();
    match best {
        None => Start::Boot,
        Some(b) if here == Some(b) => Start::Here,
        Some(b) if mem == Some(b) => Start::Memory(b),
        // One this build cannot restore gives way to the one before it.
        Some(_) => match disk.and_then(|i| origin.keyframe(i)) {
            Some((kf, own)) => Start::Disk(Box::new(kf), own),
            None => Start::Boot,
        },
    }
}

impl Snapshots {
    /// A kernel on a new machine right after `step` was served (opening a
    /// session), leaving snapshots on the way.
    pub(super) fn kernel_at(
        &mut self,
        origin: &Origin,
        step: u64,
    ) -> Result<Kernel<'static>, DebugError> {
        // Discard is a unit: leaking one allocates nothing.
        let rec: &'static mut Discard = Box::leak(Box::new(Discard));
        self.focus = step;
        let t = Instant::now();
        let mut k = match pick(origin, self, step, None) {
            Start::Memory(at) => {
                self.stats.from_memory += 1;
                let kf = &self.kept[&at].kf;
                let k = Kernel::restore(&origin.inputs, kf, &self.pages, true, rec)?;
                self.map = kf.frames.iter().copied().collect();
                self.stale.clear();
                k
            }
            Start::Disk(kf, own) => {
                self.stats.from_disk += 1;
                let k = Kernel::restore(&origin.inputs, &kf, &origin.pages, own, rec)?;
                self.known(&kf.frames);
                k
            }
            Start::Here | Start::Boot => {
                self.stats.boots += 1;
                self.known(&[]);
                Kernel::boot(&origin.inputs, rec)?
            }
        };
        self.stats.restore_time += t.elapsed();
        self.run_forward(&mut k, step)?;
        Ok(k)
    }

    /// Runs `k` (with no debugger traps in it) to `step`, leaving snapshots
    /// denser toward it.
    fn run_forward(&mut self, k: &mut Kernel<'static>, step: u64) -> Result<(), DebugError> {
        let t = Instant::now();
        let from = k.step;
        self.offer(k, &[])?;
        while k.step < step && !k.is_finished() {
            // The next step a snapshot is wanted at, toward `step`.
            let gap = ((step - k.step) / DENSITY).max(1);
            let next = (k.step + gap).min(step);
            k.run_to(next, &Limits::default())?;
            if k.is_finished() {
                break;
            }
            self.offer(k, &[])?;
        }
        self.stats.steps_run += k.step - from;
        self.stats.run_time += t.elapsed();
        if k.is_finished() {
            return Err(DebugError::Ended(k.step));
        }
        Ok(())
    }
}

impl DebugCore {
    /// The session's machine right after `step` was served, with no trap
    /// in it: onward from where it stands when that is the nearest, else
    /// from the latest snapshot or keyframe at or before `step` restored
    /// in place, then forward.
    pub(super) fn travel(&mut self, step: u64) -> Result<(), DebugError> {
        let l = &self.live;
        let here = (!l.moved
            && l.pending.is_none()
            && l.ended.is_none()
            && l.protected.is_empty()
            && !self.modified)
            .then_some(l.k.step)
            .filter(|s| *s <= step);
        self.snaps.focus = step;
        let t = Instant::now();
        // Out with the debugger's traps: the machine is the program's again.
        let kept = (
            std::mem::take(&mut self.breakpoints),
            std::mem::take(&mut self.watches),
        );
        self.live.tracked.clear();
        self.live.ghosts.clear();
        self.sync_traps();
        (self.breakpoints, self.watches) = kept;
        let origin = self.origin.clone();
        let snaps = &mut self.snaps;
        let k = &mut self.live.k;
        match pick(&origin, snaps, step, here) {
            Start::Here => snaps.stats.onward += 1,
            Start::Memory(at) => {
                snaps.stats.from_memory += 1;
                // Out of the set while it is restored, back in after.
                let snap = snaps.kept.remove(&at).expect("picked");
                let pages = snaps.pages.clone();
                let r = snaps.reset(k, &snap.kf, &pages, true);
                snaps.kept.insert(at, snap);
                r?;
            }
            Start::Disk(kf, own) => {
                snaps.stats.from_disk += 1;
                snaps.reset(k, &kf, &origin.pages, own)?;
            }
            Start::Boot => {
                snaps.stats.boots += 1;
                let rec: &'static mut Discard = Box::leak(Box::new(Discard));
                let symbols = k.symbols.clone();
                *k = Kernel::boot(&origin.inputs, rec)?;
                k.symbols = symbols;
                snaps.known(&[]);
            }
        }
        snaps.stats.restore_time += t.elapsed();
        snaps.run_forward(k, step)?;
        self.live.clear();
        Ok(())
    }

    /// Offers the snapshots the machine as it stands, at the start of a
    /// step, its watched pages' entries the kernel's (`lift_watches`, as
    /// an exit is served): not once memory or registers were written (not
    /// the recording).
    pub(super) fn offer_snapshot(&mut self) -> Result<(), DebugError> {
        if self.modified {
            return Ok(());
        }
        let inserted: Vec<(u64, u8)> = self.live.inserted.values().copied().collect();
        self.snaps.offer(&mut self.live.k, &inserted)
    }

    /// Bounds the memory of the session's snapshots (0: none), within the
    /// process's budget (`set_process_budget`).
    pub fn set_snapshot_budget(&mut self, bytes: u64) {
        self.snaps.set_budget(bytes);
    }

    /// Drops snapshots over this session's share of the process's budget,
    /// which shrinks as other sessions open: a session that stays idle
    /// calls it now and then to give its excess back.
    pub fn fit_snapshot_budget(&mut self) {
        self.snaps.thin();
    }

    /// Where the session's travels spent their time.
    pub fn snapshot_stats(&self) -> Stats {
        self.snaps.stats()
    }
}
