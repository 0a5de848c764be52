//! The system calls over an address space: brk, mmap, munmap, mprotect,
//! mremap, madvise, msync, mincore and the mlock family.

use super::{
    mappable_range, page_down, page_up, user_range, Fault, Mm, Prot, Share, Vma, LEGACY_MAP_MASK,
    MADV_DONTNEED, MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_PRIVATE, MAP_SHARED,
    MAP_SHARED_VALIDATE, MAP_TYPE, MREMAP_FIXED, MREMAP_MAYMOVE,
};
use crate::kernel::errno::*;
use crate::kernel::fs::shared_pages::{self, ObjId};
use crate::kernel::Kernel;
use crate::machine::layout::{MMAP_TOP, MONITOR_END, PAGE_SIZE, USER_END};
use std::collections::BTreeSet;

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

/// MAP_32BIT: Linux's x86-64 window for it, 1 to 2 GiB, so that the
/// address fits in a 32-bit pointer (a far pointer's offset, a 32-bit
/// jump table) as the program asked.
const MAP_32BIT: u64 = 0x40;
const WINDOW_32BIT: (u64, u64) = (0x4000_0000, 0x8000_0000);

/// A free range for MAP_32BIT: the hint when it is free in the window,
/// else the lowest free range there (Linux searches it bottom-up).
fn free_32bit(mm: &Mm, hint: u64, len: u64) -> Option<u64> {
    let (lo, hi) = WINDOW_32BIT;
    let fits = |at: u64| at.checked_add(len).is_some_and(|e| e <= hi);
    if hint >= lo && hint & (PAGE_SIZE - 1) == 0 && fits(hint) && free_range(mm, hint, hint + len) {
        return Some(hint);
    }
    let mut at = lo;
    for (start, v) in mm.vmas.range(..hi) {
        if v.end <= at {
            continue;
        }
        if *start >= at.saturating_add(len) {
            break;
        }
        at = v.end;
    }
    fits(at).then_some(at)
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
        Some(crate::kernel::fs::file_ops::mmap_contents(k, fd, off, len)?)
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
    } else if flags & MAP_32BIT != 0 {
        free_32bit(mm, addr, len).ok_or(ENOMEM)?
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
    if let Some((data, span)) = contents {
        k.fill_pages(start, &data[span]).map_err(|_| ENOMEM)?;
        if prot.exec {
            k.note_mapped_elf(fd, off, start, start + len);
        }
    }
    Ok(start)
}

impl Kernel<'_> {
    /// Copies `bytes` into fresh pages at `start`, ignoring page protection
    /// (used for file contents: ELF segments, file mappings).
    pub(in crate::kernel) fn fill_pages(&mut self, start: u64, bytes: &[u8]) -> Result<(), Fault> {
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
