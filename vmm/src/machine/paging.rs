//! Four-level page tables, built and edited by the monitor in guest memory.

use super::layout::{
    DIRECT_MAP, DIRECT_MAP_PDPT, DIRECT_MAP_PDS, LOW_PAGE_TABLE, MONITOR_END, PAGE_SIZE,
    SYSCALL_ENTRY,
};
use super::memory::{GuestRam, OutOfRange};

pub const PTE_PRESENT: u64 = 1;
pub const PTE_WRITE: u64 = 1 << 1;
pub const PTE_USER: u64 = 1 << 2;
pub const PTE_NX: u64 = 1 << 63;
/// Set by the CPU (KVM's walker, on PVM) when a translation of the page is
/// made; KVM caches no translation of an entry without it (it prefetches
/// only accessed entries). The monitor sets it on every leaf it maps, and
/// `protect` keeps it: then one shadow fault brings in up to 8 neighbouring
/// pages (KVM's pte prefetch) and KVM does not write the bit itself, about
/// a quarter fewer shadow faults for the JVM. Guest code never reads the
/// leaves; `grant_user` clears it for a hidden page's own bookkeeping.
const PTE_ACCESSED: u64 = 1 << 5;
/// Set by the CPU at a page's first store. The monitor sets it on every
/// writable leaf it maps, so that KVM's shadow entry is writable at the
/// first fault instead of read-only until a store faults again to set it
/// (about 3,600 shadow faults of the JVM's start). A look for written
/// pages (`dirty`) reads and clears it; an entry unmapped or narrowed
/// hands it to `GuestRam::mark_written`.
pub(super) const PTE_DIRTY: u64 = 1 << 6;
const PTE_ADDR: u64 = 0x000f_ffff_ffff_f000;
/// Flags of every non-leaf entry: the leaf decides.
const TABLE_FLAGS: u64 = PTE_PRESENT | PTE_WRITE | PTE_USER;

/// Page permissions of a user leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Perm {
    pub write: bool,
    pub exec: bool,
}

impl Perm {
    fn bits(self) -> u64 {
        PTE_PRESENT
            | PTE_USER
            | if self.write { PTE_WRITE | PTE_DIRTY } else { 0 }
            | if self.exec { 0 } else { PTE_NX }
    }
}

/// Writes the monitor's low page table, shared by every address space:
/// 0..2 MiB identity mapped, supervisor only, but the syscall entry page.
pub fn init_low_table(ram: &mut GuestRam) -> Result<(), OutOfRange> {
    for pa in (0..MONITOR_END).step_by(PAGE_SIZE as usize) {
        let flags = if pa == SYSCALL_ENTRY {
            PTE_PRESENT | PTE_USER
        } else {
            PTE_PRESENT | PTE_WRITE
        };
        ram.write_u64(LOW_PAGE_TABLE + pa / PAGE_SIZE * 8, pa | flags)?;
    }
    Ok(())
}

/// PML4 slot of the direct map.
const DIRECT_MAP_SLOT: u64 = (DIRECT_MAP >> 39) & 511;
const PDE_LARGE: u64 = 1 << 7;
const GIB: u64 = 1 << 30;

/// Writes the direct map's tables: every 2 MiB of guest memory, supervisor,
/// writable, not executable (as much as the monitor's region holds tables for).
pub fn init_direct_map(ram: &mut GuestRam) -> Result<(), OutOfRange> {
    let max_pds = (MONITOR_END - DIRECT_MAP_PDS) / PAGE_SIZE;
    for g in 0..ram.size().div_ceil(GIB).min(max_pds) {
        let pd = DIRECT_MAP_PDS + g * PAGE_SIZE;
        ram.write_u64(DIRECT_MAP_PDPT + g * 8, pd | PTE_PRESENT | PTE_WRITE)?;
        for i in 0..512 {
            let pa = g * GIB + i * (2 << 20);
            if pa >= ram.size() {
                break;
            }
            ram.write_u64(
                pd + i * 8,
                pa | PTE_PRESENT | PTE_WRITE | PDE_LARGE | PTE_NX,
            )?;
        }
    }
    Ok(())
}

/// Where guest ring-0 code reaches physical address `pa`.
pub fn direct_map_va(pa: u64) -> u64 {
    DIRECT_MAP + pa
}

/// A leaf going away or changing with its Dirty bit set: its frame was
/// written since the last look, which would not find the bit now.
fn keep_dirty(ram: &mut GuestRam, pte: u64) {
    if pte & PTE_DIRTY != 0 {
        ram.mark_written(pte & PTE_ADDR);
    }
}

/// Frees a table frame, which KVM may have written (Accessed and Dirty
/// bits) since the last look for written pages: the next one counts it.
fn free_table(ram: &mut GuestRam, t: u64) {
    ram.mark_written(t);
    ram.free_frame(t);
}

/// Whether a whole page at `pa` lies in guest memory.
fn in_ram(ram: &GuestRam, pa: u64) -> bool {
    pa.saturating_add(PAGE_SIZE) <= ram.size()
}

fn index(va: u64, level: u32) -> u64 {
    (va >> (12 + 9 * level)) & 511
}

/// One address space's page tables, rooted at `pml4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PageTables {
    pub pml4: u64,
}

impl PageTables {
    /// A new address space holding only the monitor's low region.
    pub fn new(ram: &mut GuestRam) -> Option<PageTables> {
        let pml4 = ram.alloc_frame()?;
        let pt = PageTables { pml4 };
        let pdpt = ram.alloc_frame()?;
        let pd = ram.alloc_frame()?;
        ram.write_u64(pml4, pdpt | TABLE_FLAGS).ok()?;
        ram.write_u64(pdpt, pd | TABLE_FLAGS).ok()?;
        ram.write_u64(pd, LOW_PAGE_TABLE | TABLE_FLAGS).ok()?;
        ram.write_u64(
            pml4 + DIRECT_MAP_SLOT * 8,
            DIRECT_MAP_PDPT | PTE_PRESENT | PTE_WRITE,
        )
        .ok()?;
        Some(pt)
    }

    /// The leaf entry's physical address for `va`, creating tables if asked.
    fn leaf(&self, ram: &mut GuestRam, va: u64, create: bool) -> Option<u64> {
        let mut table = self.pml4;
        for level in (1..=3).rev() {
            // Tables are the monitor's own, but a restored keyframe's come
            // from a file: one outside memory is as good as absent.
            if !in_ram(ram, table) {
                return None;
            }
            let entry_pa = table + index(va, level) * 8;
            let entry = ram.read_u64(entry_pa).ok()?;
            if entry & PTE_PRESENT == 0 {
                if !create {
                    return None;
                }
                let t = ram.alloc_frame()?;
                ram.write_u64(entry_pa, t | TABLE_FLAGS).ok()?;
                table = t;
            } else {
                table = entry & PTE_ADDR;
            }
        }
        in_ram(ram, table).then(|| table + index(va, 0) * 8)
    }

    /// The frame and whether it is writable, for a mapped user page.
    pub fn lookup(&self, ram: &mut GuestRam, va: u64) -> Option<(u64, bool)> {
        let leaf = self.leaf(ram, va, false)?;
        let pte = ram.read_u64(leaf).ok()?;
        let frame = pte & PTE_ADDR;
        (pte & PTE_PRESENT != 0 && in_ram(ram, frame)).then_some((frame, pte & PTE_WRITE != 0))
    }

    /// Maps the page at `va` to `frame`, Accessed (`PTE_ACCESSED`). False
    /// when out of memory. A frame mapped there before is noted stale
    /// (`GuestRam::note_stale`).
    pub fn map(&self, ram: &mut GuestRam, va: u64, frame: u64, perm: Perm) -> bool {
        let Some(e) = self.leaf(ram, va, true) else {
            return false;
        };
        let Ok(old) = ram.read_u64(e) else {
            return false;
        };
        if old & PTE_PRESENT != 0 {
            ram.note_stale(old & PTE_ADDR);
            keep_dirty(ram, old);
        }
        ram.write_u64(e, frame | perm.bits() | PTE_ACCESSED).is_ok()
    }

    /// The physical address of the leaf entry of a present page at `va`.
    pub fn leaf_of_present(&self, ram: &mut GuestRam, va: u64) -> Option<u64> {
        let e = self.leaf(ram, va, false)?;
        (ram.read_u64(e).ok()? & PTE_PRESENT != 0).then_some(e)
    }

    /// Whether ring 3 may reach the present page at `va` (None: not present).
    pub fn user_access(&self, ram: &mut GuestRam, va: u64) -> Option<bool> {
        let e = self.leaf_of_present(ram, va)?;
        Some(ram.read_u64(e).ok()? & PTE_USER != 0)
    }

    /// Lets ring 3 reach the present page at `va`, or not, keeping its frame
    /// and permissions (a memory point's hidden page). True when it changed.
    /// Taking access away needs a flush of cached translations.
    pub fn set_user_access(&self, ram: &mut GuestRam, va: u64, user: bool) -> bool {
        let Some(e) = self.leaf_of_present(ram, va) else {
            return false;
        };
        let Ok(pte) = ram.read_u64(e) else {
            return false;
        };
        let new = if user {
            pte | PTE_USER
        } else {
            pte & !PTE_USER
        };
        new != pte && ram.write_u64(e, new).is_ok()
    }

    /// Lets ring 3 reach the present page at `va` again and clears its
    /// Accessed bit, so that `revoke_user` can tell whether a translation
    /// was made since. True when it changed.
    pub fn grant_user(&self, ram: &mut GuestRam, va: u64) -> bool {
        let Some(e) = self.leaf_of_present(ram, va) else {
            return false;
        };
        let Ok(pte) = ram.read_u64(e) else {
            return false;
        };
        pte & PTE_USER == 0 && ram.write_u64(e, (pte | PTE_USER) & !PTE_ACCESSED).is_ok()
    }

    /// Takes ring 3's access to the present page at `va` away. None when
    /// it had none; else whether the page was reached since `grant_user`
    /// (its Accessed bit): only then may KVM hold a translation the guest
    /// must drop (the hide routine); an entry never reached has none.
    pub fn revoke_user(&self, ram: &mut GuestRam, va: u64) -> Option<bool> {
        let e = self.leaf_of_present(ram, va)?;
        let pte = ram.read_u64(e).ok()?;
        if pte & PTE_USER == 0 {
            return None;
        }
        ram.write_u64(e, pte & !PTE_USER).ok()?;
        Some(pte & PTE_ACCESSED != 0)
    }

    /// Unmaps the page at `va`, returning its frame.
    pub fn unmap(&self, ram: &mut GuestRam, va: u64) -> Option<u64> {
        let e = self.leaf(ram, va, false)?;
        let pte = ram.read_u64(e).ok()?;
        if pte & PTE_PRESENT == 0 || !in_ram(ram, pte & PTE_ADDR) {
            return None;
        }
        ram.write_u64(e, 0).ok()?;
        ram.note_stale(pte & PTE_ADDR);
        keep_dirty(ram, pte);
        Some(pte & PTE_ADDR)
    }

    /// Changes the permissions of a mapped page, keeping its Accessed bit.
    pub fn protect(&self, ram: &mut GuestRam, va: u64, perm: Perm) {
        self.edit_present(ram, va, |pte| {
            (pte & (PTE_ADDR | PTE_ACCESSED)) | perm.bits()
        });
    }

    /// The leaf entry for `va` as it is, when its tables exist (a debugger's view).
    pub fn entry(&self, ram: &mut GuestRam, va: u64) -> Option<u64> {
        let e = self.leaf(ram, va, false)?;
        ram.read_u64(e).ok()
    }

    /// Sets the leaf entry of a present page (a debugger's page protection).
    pub fn set_entry(&self, ram: &mut GuestRam, va: u64, pte: u64) {
        self.edit_present(ram, va, |_| pte);
    }

    /// Keeps the page's frame but makes it inaccessible to ring 3 (PROT_NONE).
    pub fn set_supervisor(&self, ram: &mut GuestRam, va: u64) {
        self.edit_present(ram, va, |pte| pte & !(PTE_USER | PTE_WRITE));
    }

    /// Rewrites the leaf entry of a present page at `va` as `edit` says,
    /// noting its frame stale.
    fn edit_present(&self, ram: &mut GuestRam, va: u64, edit: impl FnOnce(u64) -> u64) {
        if let Some(e) = self.leaf_of_present(ram, va) {
            if let Ok(pte) = ram.read_u64(e) {
                // The leaf is inside memory (`leaf` checked its table).
                let _ = ram.write_u64(e, edit(pte));
                ram.note_stale(pte & PTE_ADDR);
                keep_dirty(ram, pte);
            }
        }
    }

    /// The addresses of the present user pages in `[start, end)`, lowest
    /// first. The walk visits only tables that exist, so its cost follows
    /// the memory touched, never the size of the range (a 64 TiB
    /// reservation with nothing in it costs a few reads).
    pub fn present(&self, ram: &GuestRam, start: u64, end: u64) -> Vec<u64> {
        struct Walk<'a> {
            ram: &'a GuestRam,
            start: u64,
            end: u64,
            out: Vec<u64>,
            /// Tables left to visit: a restored keyframe's tables come from
            /// a file, and may point at each other many times over.
            budget: u64,
        }
        fn walk(w: &mut Walk, table: u64, level: u32, base: u64) {
            if !in_ram(w.ram, table) || w.budget == 0 {
                return;
            }
            w.budget -= 1;
            let span = 1u64 << (12 + 9 * level);
            let first = w.start.saturating_sub(base) / span;
            for i in first..512 {
                let lo = base + i * span;
                if lo >= w.end {
                    break;
                }
                let Ok(e) = w.ram.read_u64(table + i * 8) else {
                    return;
                };
                if e & PTE_PRESENT == 0 {
                    continue;
                }
                if level == 0 {
                    w.out.push(lo);
                } else if e & PTE_ADDR != LOW_PAGE_TABLE {
                    walk(w, e & PTE_ADDR, level - 1, lo);
                }
            }
        }
        let mut w = Walk {
            ram,
            start: start.max(MONITOR_END),
            end: end.min(1 << 47),
            out: Vec::new(),
            budget: ram.size() / PAGE_SIZE,
        };
        if w.start < w.end {
            walk(&mut w, self.pml4, 3, 0);
        }
        w.out
    }

    /// Clears the Dirty bit of every user leaf that has it, calling
    /// `written` with the leaf's frame, and calls `table` with every table
    /// frame of this space's own (not the shared low table nor the direct
    /// map): KVM writes their Accessed and Dirty bits. The caller must drop
    /// KVM's translations of the frames `written` got before the guest
    /// runs, or a store through one would not set the bit again.
    pub fn take_dirty(
        &self,
        ram: &mut GuestRam,
        written: &mut impl FnMut(u64),
        table: &mut impl FnMut(u64),
    ) {
        struct Walk<'a, W, T> {
            written: &'a mut W,
            table: &'a mut T,
            /// Tables left to visit (as in `present`).
            budget: u64,
        }
        fn walk<W: FnMut(u64), T: FnMut(u64)>(
            ram: &mut GuestRam,
            w: &mut Walk<W, T>,
            t: u64,
            level: u32,
        ) {
            if !in_ram(ram, t) || w.budget == 0 {
                return;
            }
            w.budget -= 1;
            (w.table)(t);
            for i in 0..512 {
                let Ok(e) = ram.read_u64(t + i * 8) else {
                    return;
                };
                if e & PTE_PRESENT == 0 {
                    continue;
                }
                let next = e & PTE_ADDR;
                if level > 0 {
                    if next != LOW_PAGE_TABLE && next != DIRECT_MAP_PDPT {
                        walk(ram, w, next, level - 1);
                    }
                } else if e & PTE_DIRTY != 0 && in_ram(ram, next) {
                    let _ = ram.write_u64(t + i * 8, e & !PTE_DIRTY);
                    (w.written)(next);
                }
            }
        }
        let mut w = Walk {
            written,
            table,
            budget: ram.size() / PAGE_SIZE,
        };
        walk(ram, &mut w, self.pml4, 3);
    }

    /// Frees the table frames (not the low table nor the direct map, which
    /// every space shares).
    /// The leaves must already be unmapped.
    pub fn release(&self, ram: &mut GuestRam) {
        fn walk(ram: &mut GuestRam, table: u64, level: u32) {
            if level == 0 || !in_ram(ram, table) {
                return;
            }
            for i in 0..512 {
                let Ok(e) = ram.read_u64(table + i * 8) else {
                    return;
                };
                let t = e & PTE_ADDR;
                let shared = t == LOW_PAGE_TABLE || t == DIRECT_MAP_PDPT;
                if e & PTE_PRESENT != 0 && !shared && in_ram(ram, t) {
                    walk(ram, t, level - 1);
                    free_table(ram, t);
                }
            }
        }
        walk(ram, self.pml4, 3);
        free_table(ram, self.pml4);
    }
}

#[cfg(test)]
mod tests {
    use super::super::memory::MIN_MEM;
    use super::*;

    const VA: u64 = 0x40_0000;
    const USER_FRAME: u64 = super::super::layout::USER_FRAMES_START;
    const PERM: Perm = Perm {
        write: true,
        exec: false,
    };

    /// Guest memory with one address space and a free frame to map.
    fn one_address_space() -> (GuestRam, PageTables, u64) {
        let mut ram = GuestRam::new(MIN_MEM).unwrap();
        init_low_table(&mut ram).unwrap();
        let pt = PageTables::new(&mut ram).unwrap();
        let frame = ram.alloc_frame().unwrap();
        (ram, pt, frame)
    }

    /// Tables a keyframe file restored may point anywhere: outside memory
    /// they are absent, never a monitor panic.
    #[test]
    fn tables_pointing_outside_memory_are_absent() {
        let mut ram = GuestRam::new(MIN_MEM).unwrap();
        init_low_table(&mut ram).unwrap();
        init_direct_map(&mut ram).unwrap();
        let beyond = PageTables { pml4: 1 << 40 };
        let pt = PageTables::new(&mut ram).unwrap();
        ram.write_u64(pt.pml4, (1 << 40) | TABLE_FLAGS).unwrap();
        for t in [beyond, pt] {
            assert_eq!(t.lookup(&mut ram, VA), None);
            assert_eq!(t.entry(&mut ram, VA), None);
            assert_eq!(t.unmap(&mut ram, VA), None);
            assert!(!t.set_user_access(&mut ram, VA, false));
            t.protect(&mut ram, VA, PERM);
            t.set_supervisor(&mut ram, VA);
            assert!(t.present(&ram, 0, 1 << 47).is_empty());
        }
        assert!(!beyond.map(&mut ram, VA, USER_FRAME, PERM));
        beyond.release(&mut ram);
    }

    #[test]
    fn a_mapped_page_is_found_edited_and_unmapped() {
        let (mut ram, pt, frame) = one_address_space();
        assert!(pt.map(&mut ram, VA, frame, PERM));
        assert_eq!(pt.lookup(&mut ram, VA), Some((frame, true)));
        assert_eq!(pt.present(&ram, 0, 1 << 47), [VA]);
        assert!(pt.set_user_access(&mut ram, VA, false));
        assert_eq!(pt.user_access(&mut ram, VA), Some(false));
        pt.set_supervisor(&mut ram, VA);
        assert_eq!(pt.lookup(&mut ram, VA), Some((frame, false)));
        assert_eq!(pt.unmap(&mut ram, VA), Some(frame));
        assert_eq!(pt.lookup(&mut ram, VA), None);
        pt.release(&mut ram);
    }

    /// A leaf is mapped Accessed and `protect` keeps the bit, so KVM may
    /// prefetch its translation at once: a revoke before any grant must
    /// count the page as reached (the hide routine drops that translation).
    #[test]
    fn a_mapped_page_is_accessed_so_its_first_revoke_hides_it() {
        let (mut ram, pt, frame) = one_address_space();
        assert!(pt.map(&mut ram, VA, frame, PERM));
        pt.protect(&mut ram, VA, PERM);
        let e = pt.leaf_of_present(&mut ram, VA).unwrap();
        assert_ne!(ram.read_u64(e).unwrap() & PTE_ACCESSED, 0);
        assert_eq!(pt.revoke_user(&mut ram, VA), Some(true));
    }

    /// A writable leaf is mapped Dirty, so KVM's shadow entry is writable
    /// at its first fault; a read-only one is not, and `protect` gives and
    /// takes the bit with write access.
    #[test]
    fn a_writable_page_is_mapped_dirty_and_a_read_only_one_is_not() {
        let (mut ram, pt, frame) = one_address_space();
        let read_only = Perm {
            write: false,
            exec: false,
        };
        let dirty = |ram: &mut GuestRam| {
            let e = pt.leaf_of_present(ram, VA).unwrap();
            ram.read_u64(e).unwrap() & PTE_DIRTY != 0
        };
        assert!(pt.map(&mut ram, VA, frame, read_only));
        assert!(!dirty(&mut ram));
        pt.protect(&mut ram, VA, PERM);
        assert!(PERM.write && dirty(&mut ram));
        pt.protect(&mut ram, VA, read_only);
        assert!(!dirty(&mut ram));
        assert_eq!(pt.unmap(&mut ram, VA), Some(frame));
        assert!(pt.map(&mut ram, VA, frame, PERM));
        assert!(dirty(&mut ram));
    }

    /// A switch hides with the hide routine only the pages reached since
    /// their grant: the grant clears the Accessed bit the CPU sets.
    #[test]
    fn a_revoke_says_whether_the_page_was_reached_since_its_grant() {
        let (mut ram, pt, frame) = one_address_space();
        assert!(pt.map(&mut ram, VA, frame, PERM));
        let e = pt.leaf_of_present(&mut ram, VA).unwrap();
        let reach = |ram: &mut GuestRam| {
            let pte = ram.read_u64(e).unwrap();
            ram.write_u64(e, pte | PTE_ACCESSED).unwrap();
        };
        reach(&mut ram);
        assert_eq!(pt.revoke_user(&mut ram, VA), Some(true));
        assert_eq!(pt.revoke_user(&mut ram, VA), None, "hidden already");
        assert!(pt.grant_user(&mut ram, VA));
        assert!(!pt.grant_user(&mut ram, VA), "open already");
        assert_eq!(pt.user_access(&mut ram, VA), Some(true));
        assert_eq!(pt.revoke_user(&mut ram, VA), Some(false), "not reached");
        assert!(pt.grant_user(&mut ram, VA));
        reach(&mut ram);
        assert_eq!(pt.revoke_user(&mut ram, VA), Some(true));
        assert_eq!(
            pt.lookup(&mut ram, VA),
            Some((frame, true)),
            "frame and write kept"
        );
        assert_eq!(
            pt.revoke_user(&mut ram, VA + (1 << 21)),
            None,
            "not present"
        );
    }
}
