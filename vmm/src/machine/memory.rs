//! Guest physical memory and the pool of frames the kernel hands out.
//!
//! Memory is one anonymous, sparse mapping (`MAP_NORESERVE`): only pages the
//! guest touches cost host memory. Frames are handed out lowest-first and
//! reused last-freed-first, so the physical layout is a function of the run.

use super::layout::{PAGE_SIZE, USER_FRAMES_START};
use crate::EngineError;
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

pub struct GuestRam {
    /// Owns the mapping `base` points into; dropped with the RAM.
    _mmap: GuestMemoryMmap,
    base: *mut u8,
    size: u64,
    next_frame: u64,
    free: Vec<u64>,
    /// Pages the monitor wrote since the last `take_dirty` (KVM logs the guest's own writes).
    dirty: Vec<u64>,
}

/// The frame allocator's state, saved in keyframes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FrameAllocator {
    pub next_frame: u64,
    pub free: Vec<u64>,
}

// SAFETY: the raw pointer is into the mapping `mmap` owns; access goes through bounds checks.
unsafe impl Send for GuestRam {}

impl GuestRam {
    pub fn new(size: u64) -> Result<GuestRam, EngineError> {
        let mmap = GuestMemoryMmap::from_ranges(&[(GuestAddress(0), size as usize)])
            .map_err(|e| EngineError::Memory(size, e.to_string()))?;
        let base = mmap
            .get_host_address(GuestAddress(0))
            .map_err(|e| EngineError::Memory(size, e.to_string()))?;
        Ok(GuestRam {
            _mmap: mmap,
            base,
            size,
            next_frame: USER_FRAMES_START,
            free: Vec::new(),
            dirty: vec![0; (size / PAGE_SIZE).div_ceil(64) as usize],
        })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn host_base(&self) -> u64 {
        self.base as u64
    }

    /// The bytes at `[pa, pa+len)`, which must lie inside memory.
    pub fn slice(&self, pa: u64, len: usize) -> &[u8] {
        assert!(pa.checked_add(len as u64).is_some_and(|e| e <= self.size));
        // SAFETY: bounds checked above; the mapping lives as long as self.
        unsafe { std::slice::from_raw_parts(self.base.add(pa as usize), len) }
    }

    pub fn slice_mut(&mut self, pa: u64, len: usize) -> &mut [u8] {
        assert!(pa.checked_add(len as u64).is_some_and(|e| e <= self.size));
        if len > 0 {
            for page in pa / PAGE_SIZE..=(pa + len as u64 - 1) / PAGE_SIZE {
                self.dirty[(page / 64) as usize] |= 1 << (page % 64);
            }
        }
        // SAFETY: bounds checked above; &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(pa as usize), len) }
    }

    pub fn read_u64(&self, pa: u64) -> u64 {
        u64::from_le_bytes(self.slice(pa, 8).try_into().unwrap())
    }

    pub fn write_u64(&mut self, pa: u64, v: u64) {
        self.slice_mut(pa, 8).copy_from_slice(&v.to_le_bytes());
    }

    pub fn write(&mut self, pa: u64, bytes: &[u8]) {
        self.slice_mut(pa, bytes.len()).copy_from_slice(bytes);
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
        self.slice_mut(pa, PAGE_SIZE as usize).fill(0);
        Some(pa)
    }

    pub fn free_frame(&mut self, pa: u64) {
        self.free.push(pa);
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
        if !next_ok || !a.free.iter().all(|pa| frame_ok(*pa) && *pa < a.next_frame) {
            return false;
        }
        self.next_frame = a.next_frame;
        self.free = a.free;
        true
    }

    /// Frames handed out and not freed.
    pub fn frames_in_use(&self) -> u64 {
        (self.next_frame - USER_FRAMES_START) / PAGE_SIZE - self.free.len() as u64
    }
}
