//! Registers and memory of the debugged process, through its page tables;
//! the monitor's `int3`s are hidden from every read.

use super::{DebugCore, DebugError, PTE_ADDR};
use crate::kernel::task::Tid;
use crate::machine::layout::{PAGE_SIZE, USER_END};
use crate::machine::paging::PTE_PRESENT;

use kvm_bindings::kvm_regs;

/// A thread's registers as a debugger shows them.
#[derive(Debug, Clone)]
pub struct ThreadRegs {
    pub regs: kvm_regs,
    pub fs_base: u64,
    pub gs_base: u64,
    /// The x87/SSE legacy area (FXSAVE layout, 512 bytes), when known.
    pub fxsave: Option<Vec<u8>>,
}

/// The FXSAVE (legacy) part of an XSAVE image.
const FXSAVE_LEN: usize = 512;

fn fxsave_of(x: &crate::machine::ExtendedState) -> Vec<u8> {
    x.0.region
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .take(FXSAVE_LEN)
        .collect()
}

impl DebugCore {
    pub fn registers(&self, tid: Tid) -> Result<ThreadRegs, DebugError> {
        let k = &self.live.k;
        let t = k.threads.get(&tid).ok_or(DebugError::NoThread(tid))?;
        if t.pid != self.pid {
            return Err(DebugError::NoThread(tid));
        }
        Ok(match &t.ctx {
            Some(c) => ThreadRegs {
                regs: c.regs,
                fs_base: c.fs_base,
                gs_base: c.gs_base,
                fxsave: c.xstate.as_ref().map(fxsave_of),
            },
            None => ThreadRegs {
                regs: k.m.regs(),
                fs_base: k.m.fs_base(),
                gs_base: k.m.gs_base(),
                fxsave: k.m.save_xstate()?.as_ref().map(fxsave_of),
            },
        })
    }

    /// Writes a thread's general registers and segment bases (the x87/SSE
    /// area is not written). The session then is no longer the recording.
    pub fn set_registers(&mut self, tid: Tid, r: &ThreadRegs) -> Result<(), DebugError> {
        let before = self.registers(tid)?;
        if before.regs == r.regs && before.fs_base == r.fs_base && before.gs_base == r.gs_base {
            return Ok(());
        }
        self.modified = true;
        let k = &mut self.live.k;
        let t = k.threads.get_mut(&tid).ok_or(DebugError::NoThread(tid))?;
        match &mut t.ctx {
            Some(c) => {
                c.regs = r.regs;
                c.fs_base = r.fs_base;
                c.gs_base = r.gs_base;
            }
            None => {
                *k.m.regs_mut() = r.regs;
                k.m.set_segment_bases(r.fs_base, r.gs_base);
            }
        }
        Ok(())
    }

    /// The frame of a present user page, or None for a page of a mapping
    /// not yet touched (it reads as zeros); an error outside every mapping.
    fn frame_of(&mut self, page: u64) -> Result<Option<u64>, DebugError> {
        let k = &mut self.live.k;
        let p = k
            .procs
            .get(&self.pid)
            .ok_or(DebugError::NoProcess(self.pid))?;
        if !(crate::machine::layout::MONITOR_END..USER_END).contains(&page) {
            return Err(DebugError::BadAddress(page));
        }
        let pt = p.mm.pt;
        match pt.entry(&mut k.m.ram, page) {
            Some(e) if e & PTE_PRESENT != 0 && (e & PTE_ADDR) + PAGE_SIZE <= k.m.ram.size() => {
                Ok(Some(e & PTE_ADDR))
            }
            _ if p.mm.vma_at(page).is_some() => Ok(None),
            _ => Err(DebugError::BadAddress(page)),
        }
    }

    /// Reads memory as the program sees it (breakpoints hidden).
    pub fn read_memory(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, DebugError> {
        let end = addr
            .checked_add(len as u64)
            .ok_or(DebugError::BadAddress(addr))?;
        let mut out = Vec::with_capacity(len);
        let mut a = addr;
        while a < end {
            let page = a & !(PAGE_SIZE - 1);
            let n = page.saturating_add(PAGE_SIZE).min(end) - a;
            match self.frame_of(page)? {
                Some(frame) => out.extend_from_slice(
                    self.live
                        .k
                        .m
                        .ram
                        .slice(frame + (a - page), n as usize)
                        .map_err(|_| DebugError::BadAddress(a))?,
                ),
                None => out.resize(out.len() + n as usize, 0),
            }
            a += n;
        }
        for (va, (_, orig)) in self.live.inserted.range(addr..end) {
            out[(va - addr) as usize] = *orig;
        }
        Ok(out)
    }

    /// Writes memory (code too, whatever the mapping's protection). The
    /// session then is no longer the recording.
    pub fn write_memory(&mut self, addr: u64, bytes: &[u8]) -> Result<(), DebugError> {
        if self.read_memory(addr, bytes.len())? == bytes {
            return Ok(());
        }
        self.modified = true;
        for (i, b) in bytes.iter().enumerate() {
            let a = addr + i as u64;
            let page = a & !(PAGE_SIZE - 1);
            if let Some((_, orig)) = self.live.inserted.get_mut(&a) {
                *orig = *b;
                continue;
            }
            let frame = match self.frame_of(page)? {
                Some(f) => f,
                None => {
                    let pid = self.pid;
                    let k = &mut self.live.k;
                    let p = k.procs.get_mut(&pid).ok_or(DebugError::NoProcess(pid))?;
                    p.mm.fault_in(&mut k.m.ram, &mut k.vfs, page, false, false)
                        .map_err(|_| DebugError::BadAddress(a))?
                }
            };
            self.live
                .k
                .m
                .ram
                .write(frame + (a - page), &[*b])
                .map_err(|_| DebugError::BadAddress(a))?;
        }
        Ok(())
    }
}
