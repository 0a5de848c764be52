//! Guest physical memory and the pool of frames the kernel hands out.
//!
//! Memory is one anonymous, sparse mapping (`MAP_NORESERVE`): only pages the
//! guest touches cost host memory. Frames are handed out lowest-first and
//! reused last-freed-first, so the physical layout is a function of the run.

use super::layout::{PAGE_SIZE, USER_FRAMES_START};
use crate::EngineError;
use std::collections::BTreeMap;
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

/// An access outside guest memory: an address from a file or the guest
/// that does not fit `--mem`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("guest physical range {pa:#x}+{len:#x} is outside the {size:#x} bytes of guest memory")]
pub struct OutOfRange {
    pub pa: u64,
    pub len: usize,
    pub size: u64,
}

/// Least guest memory a machine is built with: the monitor's region and room for the program.
pub const MIN_MEM: u64 = 16 << 20;

/// The address of a word of the monitor's region (the trampoline's slots):
/// below [`MIN_MEM`], so inside every guest memory, and reading or writing
/// it cannot fail ([`GuestRam::word`]). Made by `MonitorWord::at` in
/// constants, where an address past the region does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MonitorWord(u64);

impl MonitorWord {
    pub const fn at(pa: u64) -> MonitorWord {
        assert!(
            pa.is_multiple_of(8) && pa + 8 <= MIN_MEM,
            "a word of the monitor's region"
        );
        MonitorWord(pa)
    }

    pub const fn pa(self) -> u64 {
        self.0
    }
}

pub struct GuestRam {
    /// Owns the mapping `base` points into; dropped with the RAM.
    _mmap: GuestMemoryMmap,
    base: *mut u8,
    size: u64,
    next_frame: u64,
    free: Vec<u64>,
    /// Frames more than one address space maps (a forked child's read-only
    /// pages), with how many references they have beyond the first: a free
    /// drops one reference, and only the last frees the frame.
    shares: BTreeMap<u64, u32>,
    /// Pages the monitor wrote since the last `take_dirty`, and those whose
    /// leaves went with their Dirty bit set (`mark_written`).
    dirty: Vec<u64>,
    /// Frames a page table stopped mapping, or mapped with less access,
    /// whose translations KVM may still cache (`Machine::flush_stale`);
    /// None once more than `STALE_MAX` were noted.
    stale: Option<Vec<u64>>,
}

/// Past this many stale frames, dropping every translation at once (a
/// memory slot re-added) is cheaper than dropping theirs one by one.
const STALE_MAX: usize = 1024;

/// The frame allocator's state, saved in keyframes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FrameAllocator {
    pub next_frame: u64,
    pub free: Vec<u64>,
    pub shares: BTreeMap<u64, u32>,
}

// SAFETY: the raw pointer is into the mapping `mmap` owns; access goes through bounds checks.
unsafe impl Send for GuestRam {}

impl GuestRam {
    pub fn new(size: u64) -> Result<GuestRam, EngineError> {
        if size < MIN_MEM || !size.is_multiple_of(PAGE_SIZE) {
            return Err(EngineError::Memory(
                size,
                format!("guest memory must be whole 4 KiB pages, at least {MIN_MEM} bytes"),
            ));
        }
        let mmap = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), size as usize)])
            .map_err(|e| EngineError::Memory(size, e.to_string()))?;
        let base = mmap
            .get_host_address(GuestAddress(0))
            .map_err(|e| EngineError::Memory(size, e.to_string()))?;
        // Transparent huge pages back the frames the allocator hands out in
        // order: a 2 MiB host fault instead of 512 (node's run: 12 % less
        // CPU). Only advice: where THP is off the mapping works as before.
        // SAFETY: advice on our own fresh mapping.
        unsafe {
            libc::madvise(base.cast(), size as usize, libc::MADV_HUGEPAGE);
        }
        Ok(GuestRam {
            _mmap: mmap,
            base,
            size,
            next_frame: USER_FRAMES_START,
            free: Vec::new(),
            shares: BTreeMap::new(),
            dirty: vec![0; (size / PAGE_SIZE).div_ceil(64) as usize],
            stale: Some(Vec::new()),
        })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn host_base(&self) -> u64 {
        self.base as u64
    }

    fn check(&self, pa: u64, len: usize) -> Result<(), OutOfRange> {
        if pa.checked_add(len as u64).is_some_and(|e| e <= self.size) {
            Ok(())
        } else {
            Err(OutOfRange {
                pa,
                len,
                size: self.size,
            })
        }
    }

    /// The bytes at `[pa, pa+len)`, or an error when they are not all in memory.
    pub fn slice(&self, pa: u64, len: usize) -> Result<&[u8], OutOfRange> {
        self.check(pa, len)?;
        // SAFETY: bounds checked above; the mapping lives as long as self.
        Ok(unsafe { std::slice::from_raw_parts(self.base.add(pa as usize), len) })
    }

    pub fn slice_mut(&mut self, pa: u64, len: usize) -> Result<&mut [u8], OutOfRange> {
        self.check(pa, len)?;
        if len > 0 {
            for page in pa / PAGE_SIZE..=(pa + len as u64 - 1) / PAGE_SIZE {
                self.dirty[(page / 64) as usize] |= 1 << (page % 64);
            }
        }
        // SAFETY: bounds checked above; &mut self gives exclusive access.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.base.add(pa as usize), len) })
    }

    /// The little-endian word at `pa` (a page-table entry, a word of the
    /// ring-0 stack): these addresses come from tables and registers a
    /// keyframe file restores, so one outside memory is an error.
    pub fn read_u64(&self, pa: u64) -> Result<u64, OutOfRange> {
        let mut w = [0; 8];
        w.copy_from_slice(self.slice(pa, 8)?);
        Ok(u64::from_le_bytes(w))
    }

    /// See [`GuestRam::read_u64`].
    pub fn write_u64(&mut self, pa: u64, v: u64) -> Result<(), OutOfRange> {
        self.write(pa, &v.to_le_bytes())
    }

    /// A word of the monitor's region, which every guest memory holds.
    pub fn word(&self, w: MonitorWord) -> u64 {
        // SAFETY: w.0 + 8 <= MIN_MEM (MonitorWord::at) <= self.size (GuestRam::new).
        u64::from_le(unsafe { std::ptr::read_unaligned(self.base.add(w.0 as usize).cast()) })
    }

    /// See [`GuestRam::word`].
    pub fn set_word(&mut self, w: MonitorWord, v: u64) {
        let page = w.0 / PAGE_SIZE;
        self.dirty[(page / 64) as usize] |= 1 << (page % 64);
        // SAFETY: as in `word`; &mut self gives exclusive access.
        unsafe { std::ptr::write_unaligned(self.base.add(w.0 as usize).cast(), v.to_le()) }
    }

    pub fn write(&mut self, pa: u64, bytes: &[u8]) -> Result<(), OutOfRange> {
        self.slice_mut(pa, bytes.len())?.copy_from_slice(bytes);
        Ok(())
    }

    /// A zeroed frame, or None when memory is exhausted.
    pub fn alloc_frame(&mut self) -> Option<u64> {
        let pa = match self.free.pop() {
            Some(pa) => pa,
            None if self.next_frame + PAGE_SIZE <= self.size => {
                let pa = self.next_frame;
                self.next_frame += PAGE_SIZE;
                return Some(pa); // never used: already zero
            }
            None => return None,
        };
        self.slice_mut(pa, PAGE_SIZE as usize).ok()?.fill(0);
        Some(pa)
    }

    pub fn free_frame(&mut self, pa: u64) {
        if let Some(n) = self.shares.get_mut(&pa) {
            *n -= 1;
            if *n == 0 {
                self.shares.remove(&pa);
            }
            return;
        }
        self.free.push(pa);
    }

    /// One more address space maps the frame: it is freed after one more
    /// `free_frame`.
    pub fn share_frame(&mut self, pa: u64) {
        *self.shares.entry(pa).or_insert(0) += 1;
    }

    /// Whether more than one address space maps the frame (a write to it
    /// would be seen by each).
    pub fn is_shared(&self, pa: u64) -> bool {
        self.shares.contains_key(&pa)
    }

    /// Notes that a page table stopped mapping `frame`, or narrowed its
    /// access: KVM's cached translations of it must go before the guest runs.
    pub fn note_stale(&mut self, frame: u64) {
        match &mut self.stale {
            Some(v) if v.len() < STALE_MAX => v.push(frame),
            _ => self.stale = None,
        }
    }

    /// The frames noted stale since the last call, sorted, each once; None
    /// when there were too many to list (then every translation must go).
    pub fn take_stale(&mut self) -> Option<Vec<u64>> {
        let mut v = self.stale.replace(Vec::new())?;
        v.sort_unstable();
        v.dedup();
        Some(v)
    }

    /// Takes write access away from the host pages of `[pa, pa+len)` and
    /// gives it back: the change fires KVM's MMU notifier, which drops every
    /// translation KVM made of those frames, and keeps their contents.
    pub fn renew_host_pages(&mut self, pa: u64, len: u64) -> std::io::Result<()> {
        self.check(pa, len as usize)
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a range of our own mapping (checked above), its
        // protection lowered and restored; nothing reads or writes it between.
        unsafe {
            let at = self.base.add(pa as usize).cast::<libc::c_void>();
            for prot in [libc::PROT_READ, libc::PROT_READ | libc::PROT_WRITE] {
                if libc::mprotect(at, len as usize, prot) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }

    /// Counts the page at `pa` written (by the guest, as a page table's
    /// Dirty bit said), for the next `take_dirty`.
    pub fn mark_written(&mut self, pa: u64) {
        if self.check(pa, 1).is_ok() {
            let page = pa / PAGE_SIZE;
            self.dirty[(page / 64) as usize] |= 1 << (page % 64);
        }
    }

    /// Remembers KVM's dirty bitmap (the slot is about to lose it).
    pub fn take_dirty_into(&mut self, kvm_log: &[u64]) {
        for (w, l) in self.dirty.iter_mut().zip(kvm_log) {
            *w |= l;
        }
    }

    /// Physical addresses of the pages written since the last call, by the
    /// monitor or (per `kvm_log`, KVM's dirty bitmap) by the guest.
    pub fn take_dirty(&mut self, kvm_log: &[u64]) -> Vec<u64> {
        let mut out = Vec::new();
        for (i, word) in self.dirty.iter_mut().enumerate() {
            let mut w = *word | kvm_log.get(i).copied().unwrap_or(0);
            *word = 0;
            while w != 0 {
                let bit = w.trailing_zeros() as u64;
                out.push((i as u64 * 64 + bit) * PAGE_SIZE);
                w &= w - 1;
            }
        }
        out
    }

    pub fn allocator(&self) -> FrameAllocator {
        FrameAllocator {
            next_frame: self.next_frame,
            free: self.free.clone(),
            shares: self.shares.clone(),
        }
    }

    /// Restores a saved allocator; false (and nothing changed) when it
    /// names frames outside the pool.
    pub fn set_allocator(&mut self, a: FrameAllocator) -> bool {
        let frame_ok = |pa: u64| {
            pa >= USER_FRAMES_START
                && pa.is_multiple_of(PAGE_SIZE)
                && pa.saturating_add(PAGE_SIZE) <= self.size
        };
        let next_ok = a.next_frame >= USER_FRAMES_START
            && a.next_frame.is_multiple_of(PAGE_SIZE)
            && a.next_frame <= self.size;
        if !next_ok
            || !a.free.iter().all(|pa| frame_ok(*pa) && *pa < a.next_frame)
            || !a
                .shares
                .iter()
                .all(|(pa, n)| frame_ok(*pa) && *pa < a.next_frame && *n > 0)
        {
            return false;
        }
        self.next_frame = a.next_frame;
        self.free = a.free;
        self.shares = a.shares;
        true
    }

    /// Frames handed out and not freed.
    pub fn frames_in_use(&self) -> u64 {
        (self.next_frame - USER_FRAMES_START) / PAGE_SIZE - self.free.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_outside_memory_are_errors_and_monitor_words_cannot_be() {
        let mut ram = GuestRam::new(MIN_MEM).unwrap();
        for pa in [MIN_MEM - 4, MIN_MEM, u64::MAX - 3] {
            assert!(ram.read_u64(pa).is_err(), "{pa:#x}");
            assert!(ram.write_u64(pa, 1).is_err(), "{pa:#x}");
        }
        ram.write_u64(MIN_MEM - 8, 7).unwrap();
        assert_eq!(ram.read_u64(MIN_MEM - 8), Ok(7));
        const W: MonitorWord = MonitorWord::at(0x1_0008);
        ram.take_dirty(&[]);
        ram.set_word(W, 0x1122_3344_5566_7788);
        assert_eq!(ram.word(W), 0x1122_3344_5566_7788);
        assert_eq!(ram.read_u64(W.pa()), Ok(0x1122_3344_5566_7788));
        assert_eq!(
            ram.take_dirty(&[]),
            [0x1_0000],
            "the monitor's write is a dirty page"
        );
    }
}
