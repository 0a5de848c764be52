//! Reading and writing user memory on the guest's behalf. A bad pointer is
//! EFAULT, never a panic; pages the mapping allows are faulted in, as
//! Linux's copy_from_user does.

use super::errno::*;
use super::Kernel;
use crate::machine::layout::PAGE_SIZE;

/// Longest path the guest may pass (PATH_MAX).
pub const PATH_MAX: usize = 4096;

/// Most bytes the monitor copies from or to user memory at once for a
/// read or write: a guest's length never becomes one allocation.
pub const IO_CHUNK: usize = 64 << 10;

impl Kernel<'_> {
    /// Calls `f` on each page of `[va, va+len)` in turn; on a bad page,
    /// the error and how many bytes came before it.
    fn user_pages(
        &mut self,
        va: u64,
        len: usize,
        write: bool,
        f: impl FnMut(
            &mut crate::machine::memory::GuestRam,
            u64,
            usize,
            usize,
        ) -> Result<(), crate::machine::memory::OutOfRange>,
    ) -> Result<(), (usize, Errno)> {
        let pid = self.cur_pid();
        self.user_pages_of(pid, va, len, write, f)
    }

    /// [`Kernel::user_pages`] in process `pid`'s memory (a wait status
    /// written for a parent that is off the CPU).
    fn user_pages_of(
        &mut self,
        pid: super::task::Pid,
        va: u64,
        len: usize,
        write: bool,
        mut f: impl FnMut(
            &mut crate::machine::memory::GuestRam,
            u64,
            usize,
            usize,
        ) -> Result<(), crate::machine::memory::OutOfRange>,
    ) -> Result<(), (usize, Errno)> {
        va.checked_add(len as u64).ok_or((0, EFAULT))?;
        // The current thread may be gone (a wait status written for a
        // parent as its child's last thread exits): then it races nothing.
        let current = self.threads.get(&self.sched.current).map(|t| t.pid);
        if current == Some(pid) {
            self.race_monitor_access(va, len as u64, write);
        }
        let p = self.procs.get_mut(&pid).ok_or((0, ESRCH))?;
        let mut done = 0usize;
        while done < len {
            let a = va + done as u64;
            let n = ((PAGE_SIZE - (a & (PAGE_SIZE - 1))) as usize).min(len - done);
            let pa =
                p.mm.translate(&mut self.m.ram, &mut self.vfs, a, write)
                    .map_err(|_| (done, EFAULT))?;
            f(&mut self.m.ram, pa, done, n).map_err(|_| (done, EFAULT))?;
            done += n;
        }
        Ok(())
    }

    /// The `len` bytes at `va`. The buffer grows page by page as they are
    /// read, so a bad pointer with a huge length costs nothing; callers
    /// with a guest-chosen length use [`Kernel::read_user_some`].
    pub fn read_user(&mut self, va: u64, len: usize) -> SysResult<Vec<u8>> {
        let mut out = Vec::new();
        self.user_pages(va, len, false, |ram, pa, _, n| {
            out.extend_from_slice(ram.slice(pa, n)?);
            Ok(())
        })
        .map_err(|(_, e)| e)?;
        Ok(out)
    }

    /// The bytes at `va`, at most `len`, up to the first page that cannot
    /// be read (EFAULT when that is the first one).
    pub fn read_user_some(&mut self, va: u64, len: usize) -> SysResult<Vec<u8>> {
        let mut out = Vec::new();
        match self.user_pages(va, len, false, |ram, pa, _, n| {
            out.extend_from_slice(ram.slice(pa, n)?);
            Ok(())
        }) {
            Err((0, e)) => Err(e),
            _ => Ok(out),
        }
    }

    /// The bytes at `va` in process `pid`'s memory, at most `len`, up to
    /// the first page that cannot be read (`/proc/<pid>/environ`).
    pub fn read_user_of(&mut self, pid: super::task::Pid, va: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = self.user_pages_of(pid, va, len, false, |ram, pa, _, n| {
            out.extend_from_slice(ram.slice(pa, n)?);
            Ok(())
        });
        out
    }

    /// Writes `bytes` at `va` in process `pid`'s memory.
    pub fn write_user_of(&mut self, pid: super::task::Pid, va: u64, bytes: &[u8]) -> SysResult<()> {
        self.user_pages_of(pid, va, bytes.len(), true, |ram, pa, off, n| {
            ram.write(pa, &bytes[off..off + n])
        })
        .map_err(|(_, e)| e)
    }

    pub fn write_user(&mut self, va: u64, bytes: &[u8]) -> SysResult<()> {
        let pid = self.cur_pid();
        self.write_user_of(pid, va, bytes)
    }

    /// Writes `bytes` at `va` up to the first page that cannot be written:
    /// how many were (EFAULT when none could be).
    pub fn write_user_some(&mut self, va: u64, bytes: &[u8]) -> SysResult<usize> {
        match self.user_pages(va, bytes.len(), true, |ram, pa, off, n| {
            ram.write(pa, &bytes[off..off + n])
        }) {
            Ok(()) => Ok(bytes.len()),
            Err((0, e)) if !bytes.is_empty() => Err(e),
            Err((done, _)) => Ok(done),
        }
    }

    pub fn read_u32(&mut self, va: u64) -> SysResult<u32> {
        Ok(u32::from_le_bytes(
            self.read_user(va, 4)?.try_into().unwrap(),
        ))
    }

    pub fn read_u64(&mut self, va: u64) -> SysResult<u64> {
        Ok(u64::from_le_bytes(
            self.read_user(va, 8)?.try_into().unwrap(),
        ))
    }

    pub fn write_u32(&mut self, va: u64, v: u32) -> SysResult<()> {
        self.write_user(va, &v.to_le_bytes())
    }

    pub fn write_u64(&mut self, va: u64, v: u64) -> SysResult<()> {
        self.write_user(va, &v.to_le_bytes())
    }

    /// Reads a plain-old-data struct (`#[repr(C)]`, any bit pattern valid).
    pub fn read_struct<T: Copy + Default>(&mut self, va: u64) -> SysResult<T> {
        let bytes = self.read_user(va, std::mem::size_of::<T>())?;
        let mut v = T::default();
        // SAFETY: T is plain data of exactly this size; callers use it only for repr(C) structs of integers.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), &mut v as *mut T as *mut u8, bytes.len())
        };
        Ok(v)
    }

    pub fn write_struct<T: Copy>(&mut self, va: u64, v: &T) -> SysResult<()> {
        // SAFETY: T is plain data; viewing it as bytes is sound for repr(C) integer structs.
        let bytes = unsafe {
            std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>())
        };
        self.write_user(va, bytes)
    }

    /// A NUL-terminated string of at most `max` bytes (ENAMETOOLONG past it).
    pub fn read_cstr(&mut self, va: u64, max: usize) -> SysResult<Vec<u8>> {
        let mut out = Vec::new();
        let mut a = va;
        loop {
            let n = (PAGE_SIZE - (a & (PAGE_SIZE - 1))) as usize;
            let chunk = self.read_user(a, n)?;
            if let Some(z) = chunk.iter().position(|b| *b == 0) {
                out.extend_from_slice(&chunk[..z]);
                return Ok(out);
            }
            out.extend_from_slice(&chunk);
            if out.len() > max {
                return Err(ENAMETOOLONG);
            }
            a += n as u64;
        }
    }

    pub fn read_path(&mut self, va: u64) -> SysResult<String> {
        let b = self.read_cstr(va, PATH_MAX)?;
        String::from_utf8(b).map_err(|_| EINVAL)
    }
}
