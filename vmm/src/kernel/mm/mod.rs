//! Address spaces: mappings (VMAs), demand paging, brk, mmap, munmap,
//! mprotect, mremap, madvise.

use super::errno::*;
use super::fs::shared_pages::{ObjId, SharedPages};
use super::fs::Vfs;
use super::Kernel;
use crate::machine::layout::{MMAP_TOP, MONITOR_END, PAGE_SIZE, USER_END};
use crate::machine::memory::GuestRam;
use crate::machine::{PageTables, Perm};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod calls;

pub const PROT_READ: u64 = 1;
pub const PROT_WRITE: u64 = 2;
pub const PROT_EXEC: u64 = 4;
pub const MAP_SHARED: u64 = 0x01;
pub const MAP_PRIVATE: u64 = 0x02;
pub const MAP_FIXED: u64 = 0x10;
pub const MAP_ANONYMOUS: u64 = 0x20;
pub const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
/// MAP_SHARED that refuses flags it does not know (EOPNOTSUPP).
pub const MAP_SHARED_VALIDATE: u64 = 0x03;
/// The bits of the flags saying shared or private.
const MAP_TYPE: u64 = 0x0f;
/// The flags every mapping takes (Linux's LEGACY_MAP_MASK): all that
/// MAP_SHARED_VALIDATE accepts, the run's files supporting none of the
/// newer ones (MAP_SYNC needs DAX). MAP_FIXED_NOREPLACE is not one.
const LEGACY_MAP_MASK: u64 = MAP_SHARED
    | MAP_PRIVATE
    | MAP_FIXED
    | MAP_ANONYMOUS
    | 0x0040 // MAP_32BIT
    | 0x0100 // MAP_GROWSDOWN
    | 0x0800 // MAP_DENYWRITE
    | 0x1000 // MAP_EXECUTABLE
    | 0x2000 // MAP_LOCKED
    | 0x4000 // MAP_NORESERVE
    | 0x8000 // MAP_POPULATE
    | 0x1_0000 // MAP_NONBLOCK
    | 0x2_0000 // MAP_STACK
    | 0x4_0000 // MAP_HUGETLB
    | 0x400_0000 // MAP_UNINITIALIZED
    | 21 << 26 // MAP_HUGE_2MB
    | 30 << 26; // MAP_HUGE_1GB
pub const MREMAP_MAYMOVE: u64 = 1;
pub const MREMAP_FIXED: u64 = 2;
pub const MADV_DONTNEED: u64 = 4;
/// Most mappings one address space holds (Linux's default
/// vm.max_map_count): a call that could pass it fails with ENOMEM, so the
/// monitor's walks over mappings stay bounded.
pub const MAX_MAP_COUNT: usize = 65_530;

pub fn page_down(a: u64) -> u64 {
    a & !(PAGE_SIZE - 1)
}

pub fn page_up(a: u64) -> Option<u64> {
    a.checked_add(PAGE_SIZE - 1).map(page_down)
}

/// The range a call names by address and length: `addr` page aligned, the
/// length rounded up to pages, the end at most [`USER_END`]. Every memory
/// call checks its arguments here, and picks its own errno.
pub fn user_range(addr: u64, len: u64) -> Option<(u64, u64)> {
    if addr & (PAGE_SIZE - 1) != 0 {
        return None;
    }
    let end = addr.checked_add(page_up(len)?)?;
    (end <= USER_END).then_some((addr, end))
}

/// [`user_range`], and above the monitor's region: where a mapping may be.
pub fn mappable_range(addr: u64, len: u64) -> Option<(u64, u64)> {
    user_range(addr, len).filter(|(a, _)| *a >= MONITOR_END)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prot {
    pub read: bool,
    pub write: bool,
    pub exec: bool,
}

impl Prot {
    pub fn from_bits(p: u64) -> Prot {
        Prot {
            read: p & PROT_READ != 0,
            write: p & PROT_WRITE != 0,
            exec: p & PROT_EXEC != 0,
        }
    }
    pub const RW: Prot = Prot {
        read: true,
        write: true,
        exec: false,
    };
    fn accessible(self) -> bool {
        self.read || self.write || self.exec
    }
    /// Whether an access of this kind is allowed (else SEGV_ACCERR).
    pub fn allows(self, write: bool, exec: bool) -> bool {
        self.accessible() && (!write || self.write) && (!exec || self.exec)
    }
    fn perm(self) -> Perm {
        Perm {
            write: self.write,
            exec: self.exec,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vma {
    pub end: u64,
    pub prot: Prot,
    /// What a person calls it in a fault report (`[heap]`, `[stack]`, a path).
    pub name: String,
    /// A MAP_SHARED mapping: whose pages it maps (None: its own, private).
    pub share: Option<Share>,
}

/// What a mapping of a shared object (`fs::shared_pages`: shared memory,
/// or a file's pages) maps: its pages from page `pgoff` at the mapping's
/// start, taken as `access` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    pub obj: ObjId,
    pub pgoff: u64,
    pub access: Access,
}

/// How a mapping takes its object's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Access {
    /// MAP_SHARED: the object's frames themselves, so a store is every
    /// mapping's and the file's. `may_write`: whether it may be made
    /// writable (a file opened for writing, or anonymous memory).
    Shared { may_write: bool },
    /// MAP_PRIVATE of a file: a page is a copy of the file's as it is when
    /// the mapping first touches it, and its stores stay its own; a page
    /// wholly past the file's end is SIGBUS, as for a shared mapping.
    Private,
}

impl Vma {
    /// The share of the part of this mapping (starting at `start`) from `a` on.
    fn share_from(&self, start: u64, a: u64) -> Option<Share> {
        self.share.map(|s| Share {
            pgoff: s.pgoff + (a - start) / PAGE_SIZE,
            ..s
        })
    }

    /// Whether its pages are its object's frames (MAP_SHARED), not copies.
    pub fn maps_shared(&self) -> bool {
        self.share
            .is_some_and(|s| matches!(s.access, Access::Shared { .. }))
    }
}

/// Why an access to user memory failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// No mapping there (SEGV_MAPERR).
    Unmapped,
    /// A mapping that forbids this access (SEGV_ACCERR).
    Denied,
    /// Guest memory is exhausted.
    NoMemory,
    /// A page of a shared file mapping wholly past the file's end (SIGBUS).
    PastEnd,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Mm {
    pub pt: PageTables,
    /// Keyed by start address.
    vmas: BTreeMap<u64, Vma>,
    pub brk_start: u64,
    pub brk: u64,
    /// The ELF files mapped, for symbols (the program, its interpreter,
    /// the libraries mapped executable).
    pub elves: Vec<super::symbols::MappedElf>,
}

impl Mm {
    pub fn new(ram: &mut GuestRam) -> Option<Mm> {
        Some(Mm {
            pt: PageTables::new(ram)?,
            vmas: BTreeMap::new(),
            brk_start: 0,
            brk: 0,
            elves: Vec::new(),
        })
    }

    pub fn vma_at(&self, va: u64) -> Option<(u64, &Vma)> {
        let (start, v) = self.vmas.range(..=va).next_back()?;
        (va < v.end).then_some((*start, v))
    }

    pub fn vmas(&self) -> impl Iterator<Item = (u64, &Vma)> {
        self.vmas.iter().map(|(s, v)| (*s, v))
    }

    /// ENOMEM when a call that may add two mappings (one by splitting,
    /// one new) would pass [`MAX_MAP_COUNT`].
    pub fn room(&self) -> SysResult<()> {
        if self.vmas.len() + 2 > MAX_MAP_COUNT {
            return Err(ENOMEM);
        }
        Ok(())
    }

    /// Whether a restored address space is one this code could have made:
    /// mappings ordered, inside user memory, not overlapping; brk sane.
    pub fn is_sane(&self) -> bool {
        let mut last = MONITOR_END;
        for (start, v) in &self.vmas {
            if *start < last || v.end <= *start || v.end > USER_END {
                return false;
            }
            last = v.end;
        }
        self.vmas.len() <= MAX_MAP_COUNT
            && self.elves.len() <= MAX_MAP_COUNT
            && self.brk_start <= self.brk
            && self.brk <= USER_END
    }

    /// Splits VMAs so that `a` is a boundary.
    fn split_at(&mut self, a: u64) {
        if let Some((start, v)) = self.vma_at(a).map(|(s, v)| (s, v.clone())) {
            if start < a {
                let share = v.share_from(start, a);
                self.vmas.insert(a, Vma { share, ..v });
                self.vmas.get_mut(&start).unwrap().end = a;
            }
        }
    }

    /// Removes the mappings in `[start, end)`, freeing their frames. True
    /// when a present page was unmapped (the TLB then needs a flush).
    pub fn unmap_range(&mut self, ram: &mut GuestRam, start: u64, end: u64) -> bool {
        self.split_at(start);
        self.split_at(end);
        let starts: Vec<u64> = self.vmas.range(start..end).map(|(s, _)| *s).collect();
        for s in starts {
            self.vmas.remove(&s);
        }
        self.drop_pages(ram, start, end)
    }

    /// Frees the present pages of `[start, end)`, keeping the mappings.
    /// True when there was one (the TLB then needs a flush).
    fn drop_pages(&mut self, ram: &mut GuestRam, start: u64, end: u64) -> bool {
        let mut flushed = false;
        for va in self.pt.present(ram, start, end) {
            if let Some(frame) = self.pt.unmap(ram, va) {
                ram.free_frame(frame);
                flushed = true;
            }
        }
        flushed
    }

    /// Adds a mapping over `[start, end)`, replacing what was there.
    pub fn map_range(
        &mut self,
        ram: &mut GuestRam,
        start: u64,
        end: u64,
        prot: Prot,
        name: &str,
    ) -> bool {
        self.map_shared(ram, start, end, prot, name, None)
    }

    /// [`Mm::map_range`] of the pages of a shared object (`share`), or private ones.
    pub fn map_shared(
        &mut self,
        ram: &mut GuestRam,
        start: u64,
        end: u64,
        prot: Prot,
        name: &str,
        share: Option<Share>,
    ) -> bool {
        let flushed = self.unmap_range(ram, start, end);
        self.vmas.insert(
            start,
            Vma {
                end,
                prot,
                name: name.to_string(),
                share,
            },
        );
        flushed
    }

    /// Changes protection over `[start, end)`; fails if any part is unmapped.
    pub fn protect_range(
        &mut self,
        ram: &mut GuestRam,
        start: u64,
        end: u64,
        prot: Prot,
    ) -> SysResult<bool> {
        if !self.covered(start, end) {
            return Err(ENOMEM);
        }
        // A shared mapping of a file opened read-only never becomes writable.
        let read_only = self
            .vmas
            .range(..end)
            .rev()
            .take_while(|(_, v)| v.end > start)
            .any(|(_, v)| {
                v.share
                    .is_some_and(|s| s.access == Access::Shared { may_write: false })
            });
        if prot.write && read_only {
            return Err(EACCES);
        }
        if prot.write && !self.unshare(ram, start, end) {
            return Err(ENOMEM);
        }
        self.split_at(start);
        self.split_at(end);
        for (_, v) in self.vmas.range_mut(start..end) {
            v.prot = prot;
        }
        let present = self.pt.present(ram, start, end);
        for &va in &present {
            if prot.accessible() {
                self.pt.protect(ram, va, prot.perm());
            } else {
                self.pt.set_supervisor(ram, va);
            }
        }
        Ok(!present.is_empty())
    }

    /// Whether `[start, end)` is wholly mapped.
    pub fn covered(&self, start: u64, end: u64) -> bool {
        let mut a = start;
        while a < end {
            match self.vma_at(a) {
                Some((_, v)) => a = v.end,
                None => return false,
            }
        }
        true
    }

    /// A free range of `len` bytes below the mmap top, highest first.
    pub fn find_free(&self, len: u64) -> Option<u64> {
        let mut top = MMAP_TOP;
        for (start, v) in self.vmas.range(..MMAP_TOP).rev() {
            if v.end <= top && top - v.end >= len {
                return Some(top - len);
            }
            top = top.min(*start);
        }
        (top >= MONITOR_END + len).then(|| top - len)
    }

    /// Makes the page at `va` present for this access, as a page fault
    /// would: a fresh frame, or for a shared mapping the shared object's
    /// (`vfs` keeps them).
    pub fn fault_in(
        &mut self,
        ram: &mut GuestRam,
        vfs: &mut Vfs,
        va: u64,
        write: bool,
        exec: bool,
    ) -> Result<u64, Fault> {
        let page = page_down(va);
        let (start, v) = self.vma_at(va).ok_or(Fault::Unmapped)?;
        let prot = v.prot;
        if !prot.allows(write, exec) {
            return Err(Fault::Denied);
        }
        let share = v.share_from(start, page);
        if let Some((frame, _)) = self.pt.lookup(ram, page) {
            // Present already: a stale TLB entry (after an upgrade), or a hidden page.
            self.pt.protect(ram, page, prot.perm());
            return Ok(frame);
        }
        let frame = match share {
            // The object keeps its frame; this mapping holds one more reference.
            Some(
                s @ Share {
                    access: Access::Shared { .. },
                    ..
                },
            ) => SharedPages::frame(vfs, ram, s.obj, s.pgoff)?,
            Some(s) => SharedPages::copy(vfs, ram, s.obj, s.pgoff)?,
            None => ram.alloc_frame().ok_or(Fault::NoMemory)?,
        };
        if !self.pt.map(ram, page, frame, prot.perm()) {
            ram.free_frame(frame);
            return Err(Fault::NoMemory);
        }
        Ok(frame)
    }

    /// Frame for `va` for a monitor access, faulting it in if the mapping allows.
    pub fn translate(
        &mut self,
        ram: &mut GuestRam,
        vfs: &mut Vfs,
        va: u64,
        write: bool,
    ) -> Result<u64, Fault> {
        if !(MONITOR_END..USER_END).contains(&va) {
            return Err(Fault::Unmapped);
        }
        let (_, v) = self.vma_at(va).ok_or(Fault::Unmapped)?;
        if !v.prot.write && (write || !v.prot.read) {
            return Err(Fault::Denied);
        }
        match self.pt.lookup(ram, page_down(va)) {
            Some((frame, w)) if w || !write => Ok(frame + (va & (PAGE_SIZE - 1))),
            _ => self
                .fault_in(ram, vfs, va, write, false)
                .map(|f| f + (va & (PAGE_SIZE - 1))),
        }
    }

    /// A copy of this address space for a child process (fork): the same
    /// mappings; every present page of a writable private mapping copied
    /// into a fresh frame, so neither process sees the other's writes, and
    /// the frames of read-only ones (code, constants) shared, counted by
    /// `GuestRam::share_frame` until `protect_range` makes one writable.
    /// The pages of MAP_SHARED mappings are left to the child's faults,
    /// which map the shared object's frames.
    /// The parent's page tables are not touched: no access is taken away
    /// from the host, which PVM's shadow MMU would not see. None when guest
    /// memory runs out, with every frame taken given back.
    pub fn fork_copy(&self, ram: &mut GuestRam) -> Option<Mm> {
        let mut child = Mm::new(ram)?;
        child.vmas = self.vmas.clone();
        child.brk_start = self.brk_start;
        child.brk = self.brk;
        child.elves = self.elves.clone();
        for va in self.pt.present(ram, MONITOR_END, USER_END) {
            let (Some((src, _)), Some((_, v))) = (self.pt.lookup(ram, va), self.vma_at(va)) else {
                continue;
            };
            if v.maps_shared() {
                continue;
            }
            let prot = v.prot;
            let frame = if prot.write {
                match copy_frame(ram, src) {
                    Some(f) => f,
                    None => {
                        child.release(ram);
                        return None;
                    }
                }
            } else {
                ram.share_frame(src);
                src
            };
            if !child.pt.map(ram, va, frame, prot.perm()) {
                ram.free_frame(frame);
                child.release(ram);
                return None;
            }
            if !prot.accessible() {
                child.pt.set_supervisor(ram, va);
            }
        }
        Some(child)
    }

    /// Gives the present pages of `[start, end)` whose frames other address
    /// spaces map a frame of their own (before they become writable), but
    /// those of MAP_SHARED mappings, whose frames are meant to be shared.
    /// False when guest memory runs out.
    fn unshare(&mut self, ram: &mut GuestRam, start: u64, end: u64) -> bool {
        for va in self.pt.present(ram, start, end) {
            let Some((src, _)) = self.pt.lookup(ram, va) else {
                continue;
            };
            if !ram.is_shared(src) || self.vma_at(va).is_some_and(|(_, v)| v.maps_shared()) {
                continue;
            }
            let Some(frame) = copy_frame(ram, src) else {
                return false;
            };
            let perm = self.vma_at(va).map_or(
                Perm {
                    write: false,
                    exec: false,
                },
                |(_, v)| v.prot.perm(),
            );
            self.pt.map(ram, va, frame, perm);
            ram.free_frame(src);
        }
        true
    }

    /// Unmaps the pages of object `obj` from page `from` on wherever this
    /// address space maps them, shared or copied (a file shrunk under its
    /// mappings). True when one was present (the TLB then needs a flush).
    pub fn unmap_share_pages(&mut self, ram: &mut GuestRam, obj: ObjId, from: u64) -> bool {
        let mut flushed = false;
        for (start, v) in &self.vmas {
            let Some(s) = v.share.filter(|s| s.obj == obj) else {
                continue;
            };
            let first = from
                .saturating_sub(s.pgoff)
                .checked_mul(PAGE_SIZE)
                .and_then(|o| start.checked_add(o))
                .filter(|a| *a < v.end);
            let Some(first) = first else {
                continue;
            };
            for va in self.pt.present(ram, first, v.end) {
                if let Some(frame) = self.pt.unmap(ram, va) {
                    ram.free_frame(frame);
                    flushed = true;
                }
            }
        }
        flushed
    }

    /// Frees every frame of the address space, page tables included.
    pub fn release(&mut self, ram: &mut GuestRam) {
        self.unmap_range(ram, 0, USER_END);
        self.pt.release(ram);
    }
}

/// A fresh frame holding a copy of `src`; None when guest memory runs out.
fn copy_frame(ram: &mut GuestRam, src: u64) -> Option<u64> {
    let mut page = [0u8; PAGE_SIZE as usize];
    page.copy_from_slice(ram.slice(src, PAGE_SIZE as usize).ok()?);
    let frame = ram.alloc_frame()?;
    if ram.write(frame, &page).is_err() {
        ram.free_frame(frame);
        return None;
    }
    Some(frame)
}

impl Kernel<'_> {
    fn mm(&mut self) -> &mut Mm {
        let pid = self.cur_pid();
        &mut self.procs.get_mut(&pid).expect("current process").mm
    }

    pub(super) fn flush_if(&mut self, flushed: bool) -> SysResult<()> {
        if flushed {
            self.m.flush_stale().map_err(|e| self.engine_failure(e))?;
        }
        Ok(())
    }
}
