//! Address spaces: mappings (VMAs), demand paging, brk, mmap, munmap,
//! mprotect, mremap, madvise.

use super::errno::*;
use super::fs::shared_pages::{self, ObjId, SharedPages};
use super::fs::Vfs;
use super::Kernel;
use crate::machine::layout::{MMAP_TOP, MONITOR_END, PAGE_SIZE, USER_END};
use crate::machine::memory::GuestRam;
use crate::machine::{PageTables, Perm};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

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
            self.m.flush_tlb().map_err(|e| self.engine_failure(e))?;
        }
        Ok(())
    }
}

/// Brk implements Linux syscall brk(2).
pub fn sys_brk(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let want = a[0];
    let pid = k.cur_pid();
    let p = k.procs.get_mut(&pid).unwrap();
    let mm = &mut p.mm;
    if want < mm.brk_start {
        return Ok(mm.brk);
    }
    let old_end = page_up(mm.brk).unwrap();
    let new_end = page_up(want).ok_or(ENOMEM)?;
    if new_end > old_end {
        if !free_range(mm, old_end, new_end) {
            return Ok(mm.brk);
        }
        let f = mm.map_range(&mut k.m.ram, old_end, new_end, Prot::RW, "[heap]");
        debug_assert!(!f);
    } else if new_end < old_end {
        let f = mm.unmap_range(&mut k.m.ram, new_end, old_end);
        mm.brk = want;
        k.collect_shared();
        k.flush_if(f)?;
        return Ok(want);
    }
    mm.brk = want;
    Ok(want)
}

fn free_range(mm: &Mm, start: u64, end: u64) -> bool {
    mm.vmas
        .range(..end)
        .next_back()
        .is_none_or(|(_, v)| v.end <= start)
}

/// Mmap implements Linux syscall mmap(2).
/// MAP_SHARED mappings of anonymous memory, /dev/zero and regular files
/// map the same frames in every process (`fs/shared_pages.rs`); a
/// MAP_PRIVATE one of a file copies the file's pages, the pages wholly
/// past its end being SIGBUS.
/// Partial (mmap): MAP_SHARED of a generated file (/proc) is a private copy; a private file mapping copies the file's pages present at mmap, so it does not see later writes to them (Linux shows them until the page's first store); a store through a shared file mapping gives the file its times when the guest next looks (stat, msync, fsync, munmap), and only the first store to a page since the last sync or mmap of the file does, where Linux counts each mapping's first; MAP_DROPPABLE is EINVAL, as before Linux 6.11.
pub fn sys_mmap(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (addr, len, prot, flags, fd, off) = (a[0], a[1], a[2], a[3], a[4] as i32, a[5]);
    if len == 0 || off & (PAGE_SIZE - 1) != 0 {
        return Err(EINVAL);
    }
    let len = page_up(len).filter(|l| *l < USER_END).ok_or(ENOMEM)?;
    let anon = flags & MAP_ANONYMOUS != 0;
    let backing = match flags & MAP_TYPE {
        MAP_PRIVATE => None,
        MAP_SHARED => shared_pages::mmap_backing(k, fd, anon, prot, false)?,
        // Only a file is validated; anonymous memory is EINVAL, as on Linux.
        MAP_SHARED_VALIDATE if !anon => {
            let unknown = flags & !LEGACY_MAP_MASK != 0;
            shared_pages::mmap_backing(k, fd, anon, prot, unknown)?
        }
        _ => return Err(EINVAL),
    };
    let contents = if anon || backing.is_some() {
        None
    } else {
        Some(super::fs::mmap_contents(k, fd, off, len)?)
    };
    // A private mapping of a file names its object: the pages not copied
    // now (past the end, or dropped) are copied when touched, or SIGBUS.
    let backing = match backing {
        None if !anon && flags & MAP_TYPE == MAP_PRIVATE => shared_pages::private_backing(k, fd),
        b => b,
    };
    let fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE) != 0;
    let mm = k.mm();
    mm.room()?;
    let start = if fixed {
        mappable_range(addr, len).ok_or(EINVAL)?;
        if flags & MAP_FIXED_NOREPLACE != 0 && !free_range(mm, addr, addr + len) {
            return Err(EEXIST);
        }
        addr
    } else if addr >= MONITOR_END
        && addr & (PAGE_SIZE - 1) == 0
        && addr.checked_add(len).is_some_and(|e| e <= MMAP_TOP)
        && free_range(mm, addr, addr + len)
    {
        addr
    } else {
        mm.find_free(len).ok_or(ENOMEM)?
    };
    // A file mapping is named by its file's path (/proc/self/maps shows it).
    let name = if anon {
        "[anon]".to_string()
    } else {
        k.desc(fd as i64 as u64)
            .map_or_else(|_| "[file]".to_string(), |(_, d)| d.path)
    };
    let prot = Prot::from_bits(prot);
    let share = backing.map(|b| shared_pages::share_of(&mut k.vfs, &b, off));
    let f = {
        let pid = k.cur_pid();
        let p = k.procs.get_mut(&pid).unwrap();
        p.mm.map_shared(&mut k.m.ram, start, start + len, prot, &name, share)
    };
    // MAP_FIXED may have replaced the last mapping of a shared object.
    k.collect_shared();
    k.flush_if(f)?;
    if let Some(bytes) = contents {
        k.fill_pages(start, &bytes).map_err(|_| ENOMEM)?;
        if prot.exec {
            k.note_mapped_elf(fd, off, start, start + len);
        }
    }
    Ok(start)
}

impl Kernel<'_> {
    /// Copies `bytes` into fresh pages at `start`, ignoring page protection
    /// (used for file contents: ELF segments, file mappings).
    pub(super) fn fill_pages(&mut self, start: u64, bytes: &[u8]) -> Result<(), Fault> {
        let pid = self.cur_pid();
        let p = self.procs.get_mut(&pid).unwrap();
        for (i, chunk) in bytes.chunks(PAGE_SIZE as usize).enumerate() {
            let va = start + i as u64 * PAGE_SIZE;
            let frame = match p.mm.pt.lookup(&mut self.m.ram, va) {
                Some((f, _)) => f,
                None => {
                    let f = self.m.ram.alloc_frame().ok_or(Fault::NoMemory)?;
                    let prot =
                        p.mm.vma_at(va)
                            .map(|(_, v)| v.prot)
                            .ok_or(Fault::Unmapped)?;
                    if !p.mm.pt.map(&mut self.m.ram, va, f, prot.perm()) {
                        return Err(Fault::NoMemory);
                    }
                    if !prot.accessible() {
                        p.mm.pt.set_supervisor(&mut self.m.ram, va);
                    }
                    f
                }
            };
            self.m
                .ram
                .write(frame, chunk)
                .map_err(|_| Fault::NoMemory)?;
        }
        Ok(())
    }
}

/// Munmap implements Linux syscall munmap(2).
pub fn sys_munmap(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (addr, len) = (a[0], a[1]);
    if len == 0 {
        return Err(EINVAL);
    }
    let (addr, end) = user_range(addr, len).ok_or(EINVAL)?;
    let pid = k.cur_pid();
    let p = k.procs.get_mut(&pid).unwrap();
    p.mm.room()?;
    let f = p.mm.unmap_range(&mut k.m.ram, addr.max(MONITOR_END), end);
    k.collect_shared();
    k.flush_if(f)?;
    Ok(0)
}

/// Mprotect implements Linux syscall mprotect(2).
pub fn sys_mprotect(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (addr, len, prot) = (a[0], a[1], a[2]);
    if addr & (PAGE_SIZE - 1) != 0 {
        return Err(EINVAL);
    }
    let (addr, end) = mappable_range(addr, len).ok_or(ENOMEM)?;
    if len == 0 {
        return Ok(0);
    }
    let pid = k.cur_pid();
    let p = k.procs.get_mut(&pid).unwrap();
    p.mm.room()?;
    let f =
        p.mm.protect_range(&mut k.m.ram, addr, end, Prot::from_bits(prot))?;
    k.flush_if(f)?;
    Ok(0)
}

/// Madvise implements Linux syscall madvise(2).
/// Partial (madvise): only MADV_DONTNEED does anything; other advice is accepted and ignored.
pub fn sys_madvise(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (addr, len, advice) = (a[0], a[1], a[2]);
    let (addr, end) = user_range(addr, len).ok_or(EINVAL)?;
    if advice == MADV_DONTNEED {
        let pid = k.cur_pid();
        let p = k.procs.get_mut(&pid).unwrap();
        if !p.mm.covered(addr, end) {
            return Err(ENOMEM);
        }
        let flushed = p.mm.drop_pages(&mut k.m.ram, addr, end);
        k.flush_if(flushed)?;
    }
    Ok(0)
}

const MS_ASYNC: u64 = 1;
const MS_INVALIDATE: u64 = 2;
const MS_SYNC: u64 = 4;

/// Whether the current process maps all of `[start, end)` (ENOMEM if not).
fn mapped(k: &mut Kernel, start: u64, end: u64) -> SysResult<()> {
    if k.cur_proc().mm.covered(start, end) {
        Ok(())
    } else {
        Err(ENOMEM)
    }
}

/// Msync implements Linux syscall msync(2): the files mapped shared in the
/// range get their pages' stores (as every read of them does anyway), and
/// the times those made due; MS_SYNC cleans the pages (`settle_times`).
pub fn sys_msync(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let flags = a[2];
    if flags & !(MS_ASYNC | MS_INVALIDATE | MS_SYNC) != 0
        || flags & (MS_ASYNC | MS_SYNC) == MS_ASYNC | MS_SYNC
    {
        return Err(EINVAL);
    }
    let (start, end) = user_range(a[0], a[1]).ok_or(if a[0] & (PAGE_SIZE - 1) != 0 {
        EINVAL
    } else {
        ENOMEM
    })?;
    mapped(k, start, end)?;
    let objs: BTreeSet<ObjId> = k
        .cur_proc()
        .mm
        .vmas
        .range(..end)
        .rev()
        .take_while(|(_, v)| v.end > start)
        .filter_map(|(_, v)| v.share.map(|s| s.obj))
        .collect();
    let files: Vec<_> = objs
        .into_iter()
        .filter_map(|o| k.vfs.shared.file_of(o))
        .collect();
    for ino in files {
        // Only MS_SYNC writes back on Linux (cleaning the pages): MS_ASYNC does nothing.
        k.settle_times(ino, flags & MS_SYNC != 0)?;
    }
    Ok(0)
}

/// Mincore implements Linux syscall mincore(2).
/// Partial (mincore): every page of a mapping is reported resident (the monitor never swaps).
pub fn sys_mincore(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    // Not the pages present now: those depend on what a keyframe restored.
    if a[0] & (PAGE_SIZE - 1) != 0 {
        return Err(EINVAL);
    }
    let (start, end) = user_range(a[0], a[1]).ok_or(ENOMEM)?;
    mapped(k, start, end)?;
    let pages = ((end - start) / PAGE_SIZE) as usize;
    for chunk in 0..pages.div_ceil(4096) {
        let n = (pages - chunk * 4096).min(4096);
        k.write_user(a[2].wrapping_add(chunk as u64 * 4096), &vec![1u8; n])?;
    }
    Ok(0)
}

/// The pages of `[addr, addr + len)`, widened to whole pages as mlock does.
fn lock_range(addr: u64, len: u64) -> SysResult<(u64, u64)> {
    let end = addr
        .checked_add(len)
        .and_then(page_up)
        .filter(|e| *e <= USER_END)
        .ok_or(ENOMEM)?;
    Ok((page_down(addr), end))
}

/// Mlock implements Linux syscall mlock(2): guest memory is never swapped,
/// so a mapped range is locked already.
pub fn sys_mlock(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (start, end) = lock_range(a[0], a[1])?;
    mapped(k, start, end)?;
    Ok(0)
}

/// Mlock2 implements Linux syscall mlock2(2) (MLOCK_ONFAULT or no flag).
pub fn sys_mlock2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[2] & !1 != 0 {
        return Err(EINVAL);
    }
    sys_mlock(k, a)
}

/// Munlock implements Linux syscall munlock(2).
pub fn sys_munlock(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    sys_mlock(k, a)
}

/// Mlockall implements Linux syscall mlockall(2): MCL_CURRENT, MCL_FUTURE,
/// MCL_ONFAULT with one of them.
pub fn sys_mlockall(_: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let flags = a[0];
    if flags == 0 || flags & !7 != 0 || flags & 3 == 0 {
        return Err(EINVAL);
    }
    Ok(0)
}

/// Munlockall implements Linux syscall munlockall(2).
pub fn sys_munlockall(_: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(0)
}

/// Mremap implements Linux syscall mremap(2).
pub fn sys_mremap(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (old, old_len, new_len, flags, new_addr) = (a[0], a[1], a[2], a[3], a[4]);
    if old & (PAGE_SIZE - 1) != 0 || new_len == 0 || flags & !(MREMAP_MAYMOVE | MREMAP_FIXED) != 0 {
        return Err(EINVAL);
    }
    let (old, old_end) = user_range(old, old_len).ok_or(EFAULT)?;
    let old_len = old_end - old;
    let new_len = page_up(new_len).filter(|l| *l < USER_END).ok_or(ENOMEM)?;
    let pid = k.cur_pid();
    let p = k.procs.get_mut(&pid).unwrap();
    p.mm.room()?;
    let (start, v) = p.mm.vma_at(old).ok_or(EFAULT)?;
    if old_end > v.end && !p.mm.covered(old, old_end) {
        return Err(EFAULT);
    }
    // A shared mapping stays one, of the same pages, grown or moved.
    let (prot, name, share) = (v.prot, v.name.clone(), v.share_from(start, old));
    if new_len <= old_len {
        let f = p.mm.unmap_range(&mut k.m.ram, old + new_len, old_end);
        k.collect_shared();
        k.flush_if(f)?;
        return Ok(old);
    }
    if flags & MREMAP_FIXED == 0 && free_range(&p.mm, old_end, old + new_len) {
        let grown = share.map(|s| Share {
            pgoff: s.pgoff + old_len / PAGE_SIZE,
            ..s
        });
        p.mm.map_shared(&mut k.m.ram, old_end, old + new_len, prot, &name, grown);
        return Ok(old);
    }
    if flags & MREMAP_MAYMOVE == 0 {
        return Err(ENOMEM);
    }
    let dest = if flags & MREMAP_FIXED != 0 {
        let (to, to_end) = mappable_range(new_addr, new_len).ok_or(EINVAL)?;
        if to < old_end && old < to_end {
            return Err(EINVAL);
        }
        p.mm.unmap_range(&mut k.m.ram, new_addr, new_addr + new_len);
        new_addr
    } else {
        p.mm.find_free(new_len).ok_or(ENOMEM)?
    };
    p.mm.vmas.insert(
        dest,
        Vma {
            end: dest + new_len,
            prot,
            name,
            share,
        },
    );
    // Move the frames, not the bytes.
    for va in p.mm.pt.present(&k.m.ram, old, old_end) {
        let off = va - old;
        if let Some(frame) = p.mm.pt.unmap(&mut k.m.ram, va) {
            p.mm.pt.map(&mut k.m.ram, dest + off, frame, prot.perm());
            if !prot.accessible() {
                p.mm.pt.set_supervisor(&mut k.m.ram, dest + off);
            }
        }
    }
    p.mm.unmap_range(&mut k.m.ram, old, old_end);
    k.collect_shared();
    k.flush_if(true)?;
    Ok(dest)
}
