//! Which guest pages were written since the last look: the pages a
//! keyframe or a debugger's snapshot must read again.
//!
//! KVM's dirty log on the memory slot would tell, but a slot with a log
//! costs every first touch of a page: KVM then maps one 4 KiB page a fault
//! and fills none of its neighbours (bench line (h): 14.8 us a shadow
//! fault with the log, 2.4 us without; the JVM's start takes about 6,500).
//! The monitor owns the guest's page tables, so it reads their Dirty bits
//! instead. A look finds:
//!
//! - each user leaf with its Dirty bit set (KVM sets it at the first store
//!   through the leaf, and the monitor at mapping a writable page): the
//!   bit is cleared and KVM's translations of the frame are dropped
//!   (`GuestRam::renew_host_pages`), so the next store faults and sets it
//!   again. A leaf unmapped or narrowed in between hands its bit to
//!   `GuestRam::mark_written` (`PageTables`);
//! - every page-table frame, whose Accessed and Dirty bits KVM writes;
//! - every page of the monitor's region ever written (ring-0 stacks, the
//!   routines' slots, the GDT and TSS, its tables): a few dozen pages,
//!   found by the low table's Dirty bits and the monitor's writes, and read
//!   at every look; ring 0 writes through the direct map only page-table
//!   entries, which every look reads;
//! - the pages the monitor wrote itself (`GuestRam`'s own bitmap).
//!
//! `REWIND_KVM_DIRTY_LOG` in the environment keeps KVM's log instead (to
//! compare the two). Debug builds keep the log too, and fail a look that
//! missed a page the log has: every test checks the bits against it
//! (`REWIND_DIRTY_BITS_ALONE` turns that off, for the test of the bits
//! with KVM as a release build has it, tests/tests/dirty_bits.rs).

use std::collections::BTreeSet;

use super::layout::{LOW_PAGE_TABLE, MONITOR_END, PAGE_SIZE};
use super::memory::GuestRam;
use super::paging::{PageTables, PTE_DIRTY, PTE_PRESENT};

/// Set (to anything), guest writes are found by KVM's dirty log alone.
pub const KVM_LOG_ENV: &str = "REWIND_KVM_DIRTY_LOG";
/// Set (to anything), a debug build finds them by the bits alone, as a
/// release build does: for a test of what KVM does without a log.
pub const BITS_ALONE_ENV: &str = "REWIND_DIRTY_BITS_ALONE";

/// What KVM's dirty log on the memory slot is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogUse {
    /// No log: the page tables' Dirty bits say what the guest wrote.
    None,
    /// The log says what the guest wrote (`KVM_LOG_ENV`).
    Only,
    /// The bits say, and the log checks them (debug builds).
    Check,
}

impl LogUse {
    pub fn from_env() -> LogUse {
        if std::env::var_os(KVM_LOG_ENV).is_some() {
            LogUse::Only
        } else if cfg!(debug_assertions) && std::env::var_os(BITS_ALONE_ENV).is_none() {
            LogUse::Check
        } else {
            LogUse::None
        }
    }

    /// Whether the memory slot keeps a dirty log.
    pub fn slot_logs(self) -> bool {
        self != LogUse::None
    }
}

/// What a look by Dirty bits keeps between looks.
#[derive(Debug)]
pub struct Written {
    pub log: LogUse,
    /// Pages of the monitor's region ever written, read at every look.
    monitor: BTreeSet<u64>,
    /// KVM's log as the slot lost it at a re-add (`Machine::flush_tlb`),
    /// kept for the next look's check (`LogUse::Check`).
    held: Vec<u64>,
}

impl Written {
    pub fn new(log: LogUse) -> Written {
        Written {
            log,
            monitor: BTreeSet::new(),
            held: Vec::new(),
        }
    }

    /// Keeps `log`, KVM's bitmap of a slot about to be re-added, for the
    /// next look's check.
    pub fn hold(&mut self, log: &[u64]) {
        if self.held.len() < log.len() {
            self.held.resize(log.len(), 0);
        }
        for (h, l) in self.held.iter_mut().zip(log) {
            *h |= l;
        }
    }

    /// `log` with what was held since the last look, which it clears.
    pub fn with_held(&mut self, mut log: Vec<u64>) -> Vec<u64> {
        for (l, h) in log.iter_mut().zip(self.held.drain(..)) {
            *l |= h;
        }
        log
    }

    /// The pages written since the last look, by the Dirty bits of
    /// `spaces` (each address space's tables; repeats are skipped) and the
    /// monitor's own writes, sorted; the frames whose bits it cleared go
    /// into `zap`, whose translations the caller must drop.
    pub fn look(
        &mut self,
        ram: &mut GuestRam,
        spaces: &[PageTables],
        zap: &mut Vec<u64>,
    ) -> Vec<u64> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for pt in spaces {
            if seen.insert(pt.pml4) {
                pt.take_dirty(ram, &mut |f| zap.push(f), &mut |t| out.push(t));
            }
        }
        out.extend_from_slice(zap);
        for i in 0..MONITOR_END / PAGE_SIZE {
            let pte = ram.read_u64(LOW_PAGE_TABLE + i * 8).unwrap_or(0);
            if pte & (PTE_PRESENT | PTE_DIRTY) == PTE_PRESENT | PTE_DIRTY {
                self.monitor.insert(i * PAGE_SIZE);
            }
        }
        out.extend(self.take_own(ram));
        out.extend(self.monitor.iter().copied());
        out.sort_unstable();
        out.dedup();
        zap.sort_unstable();
        zap.dedup();
        out
    }
}

impl Written {
    /// The pages the monitor wrote (or leaves gone handed on) since the
    /// last look, minding those of its own region, which every look after
    /// reads: KVM writes the tables there too.
    fn take_own(&mut self, ram: &mut GuestRam) -> Vec<u64> {
        let own = ram.take_dirty(&[]);
        self.monitor
            .extend(own.iter().copied().filter(|pa| *pa < MONITOR_END));
        own
    }

    /// Forgets what was written (a machine just reset to a keyframe),
    /// but not which pages of the monitor's region were.
    pub fn forget(&mut self, ram: &mut GuestRam) {
        self.take_own(ram);
        self.held.clear();
    }
}

/// The first page of `log` (KVM's dirty bitmap) that `found` lacks.
pub fn missed(log: &[u64], found: &[u64]) -> Option<u64> {
    for (i, word) in log.iter().enumerate() {
        let mut w = *word;
        while w != 0 {
            let pa = (i as u64 * 64 + w.trailing_zeros() as u64) * PAGE_SIZE;
            if found.binary_search(&pa).is_err() {
                return Some(pa);
            }
            w &= w - 1;
        }
    }
    None
}

/// Runs of adjacent frames in sorted `frames`: (start, length in bytes).
pub fn runs(frames: &[u64]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &f in frames {
        match out.last_mut() {
            Some((start, len)) if *start + *len == f => *len += PAGE_SIZE,
            _ => out.push((f, PAGE_SIZE)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::memory::MIN_MEM;
    use super::super::paging::{self, Perm};
    use super::*;

    /// What a simulated store does: KVM sets the leaf's Dirty bit.
    fn store(ram: &mut GuestRam, pt: PageTables, va: u64) {
        let e = pt.leaf_of_present(ram, va).unwrap();
        let pte = ram.read_u64(e).unwrap();
        ram.write_u64(e, pte | PTE_DIRTY).unwrap();
    }

    #[test]
    fn a_look_finds_each_dirty_leaf_once_and_the_bit_of_a_leaf_gone() {
        const VA: u64 = 0x40_0000;
        let mut ram = GuestRam::new(MIN_MEM).unwrap();
        paging::init_low_table(&mut ram).unwrap();
        let pt = PageTables::new(&mut ram).unwrap();
        let (a, b) = (ram.alloc_frame().unwrap(), ram.alloc_frame().unwrap());
        let rw = Perm {
            write: true,
            exec: false,
        };
        assert!(pt.map(&mut ram, VA, a, rw));
        assert!(pt.map(&mut ram, VA + PAGE_SIZE, b, rw));
        let mut w = Written::new(LogUse::None);
        let look = |w: &mut Written, ram: &mut GuestRam| {
            let mut zap = Vec::new();
            let found = w.look(ram, &[pt, pt], &mut zap);
            (found, zap)
        };

        let (found, zap) = look(&mut w, &mut ram);
        assert_eq!(zap, [a, b], "a writable page is mapped Dirty");
        for pa in [a, b, pt.pml4, LOW_PAGE_TABLE] {
            assert!(found.contains(&pa), "{pa:#x} in {found:x?}");
        }

        let (found, zap) = look(&mut w, &mut ram);
        assert!(zap.is_empty(), "the first look cleared the bits");
        assert!(!found.contains(&a) && !found.contains(&b), "{found:x?}");
        assert!(
            found.contains(&pt.pml4) && found.contains(&LOW_PAGE_TABLE),
            "tables and the monitor's written pages are read at every look"
        );

        store(&mut ram, pt, VA);
        store(&mut ram, pt, VA + PAGE_SIZE);
        assert_eq!(pt.unmap(&mut ram, VA + PAGE_SIZE), Some(b));
        let (found, zap) = look(&mut w, &mut ram);
        assert_eq!(zap, [a], "only a present leaf's translations are dropped");
        assert!(found.contains(&a), "a store sets the bit again");
        assert!(found.contains(&b), "an unmapped leaf hands its bit on");

        pt.unmap(&mut ram, VA);
        pt.release(&mut ram);
        let mut zap = Vec::new();
        let found = w.look(&mut ram, &[], &mut zap);
        assert!(
            found.contains(&pt.pml4),
            "a released space's tables count once more: {found:x?}"
        );
    }

    #[test]
    fn adjacent_frames_make_one_run() {
        assert_eq!(
            runs(&[0x1000, 0x2000, 0x3000, 0x8000, 0xa000, 0xb000]),
            [(0x1000, 0x3000), (0x8000, 0x1000), (0xa000, 0x2000)]
        );
        assert_eq!(runs(&[]), []);
    }

    #[test]
    fn a_logged_page_the_look_lacks_is_named() {
        let log = [0b1010u64, 1 << 3];
        let pa = |n: u64| n * PAGE_SIZE;
        assert_eq!(missed(&log, &[pa(1), pa(3), pa(67)]), None);
        assert_eq!(missed(&log, &[pa(1), pa(3)]), Some(pa(67)));
        assert_eq!(missed(&log, &[pa(3), pa(67)]), Some(pa(1)));
    }

    #[test]
    fn a_log_held_at_a_re_add_is_checked_at_the_next_look_only() {
        let mut w = Written::new(LogUse::Check);
        w.hold(&[0b10]);
        w.hold(&[0b100, 1]);
        let log = w.with_held(vec![1, 0]);
        assert_eq!(log, [0b111, 1]);
        assert_eq!(missed(&log, &[0, PAGE_SIZE]), Some(2 * PAGE_SIZE));
        assert_eq!(w.with_held(vec![0, 0]), [0, 0], "held once");
    }
}
