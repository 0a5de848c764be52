//! A host file mapped read-only, whole, so that only the pages something
//! reads are read from it (the JVM's 128 MB `lib/modules`, node's 98 MB
//! binary).
//!
//! A mapped file that another host process shrinks would raise SIGBUS at
//! the next read of a page past its new end and end the monitor. The
//! monitor never dies of what the host does to a file under a run: a
//! process-wide handler maps a page of zeros over such a page instead and
//! notes it on the mapping (`shrank`); a fault anywhere else goes to the
//! handler that was there before (Rust's own, or the default: the process
//! ends as it would have).

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

const PAGE: usize = 4096;
/// Mappings alive at once; past this a file is read instead (`new` says None).
const SLOTS: usize = 512;

/// Where each live mapping starts and ends (0: a free slot), read by the
/// signal handler without a lock.
static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static ENDS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static SHRANK: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
/// The SIGBUS action before ours, once ours is installed.
static PREVIOUS: OnceLock<Option<Previous>> = OnceLock::new();

#[derive(Clone, Copy)]
struct Previous(libc::sigaction);
// SAFETY: plain data (a handler address, flags and a mask), only read.
unsafe impl Send for Previous {}
unsafe impl Sync for Previous {}

/// A host file mapped private and read-only, whole.
pub struct HostMap {
    ptr: *mut libc::c_void,
    len: usize,
    slot: usize,
}

// SAFETY: the mapping is read-only and owned by this value alone.
unsafe impl Send for HostMap {}
unsafe impl Sync for HostMap {}

impl HostMap {
    /// Maps `len` (> 0) bytes of open file `f`; None when it cannot (mmap
    /// refuses, the guard cannot be installed, or too many are live): the
    /// caller reads the file instead.
    pub fn new(f: &std::fs::File, len: usize) -> Option<HostMap> {
        use std::os::unix::io::AsRawFd;
        if len == 0 || !guard_installed() {
            return None;
        }
        // SAFETY: a fresh private read-only mapping of a file we hold open;
        // nothing else aliases it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        match claim(ptr as usize, len) {
            Some(slot) => Some(HostMap { ptr, len, slot }),
            None => {
                // SAFETY: unmaps what was just mapped, once.
                unsafe { libc::munmap(ptr, len) };
                None
            }
        }
    }

    /// Whether the file shrank under the mapping: a page past its new end
    /// was read, and read as zeros.
    pub fn shrank(&self) -> bool {
        SHRANK[self.slot].load(Ordering::Acquire)
    }
}

impl Deref for HostMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until drop (pages past a
        // shrunken file's end are replaced by zeros, never unmapped).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for HostMap {
    fn drop(&mut self) {
        ENDS[self.slot].store(0, Ordering::Release);
        SHRANK[self.slot].store(false, Ordering::Release);
        STARTS[self.slot].store(0, Ordering::Release);
        // SAFETY: unmaps what `new` mapped (and any zero page put over it), once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// A free slot for the mapping at `start`, `len` long.
fn claim(start: usize, len: usize) -> Option<usize> {
    (0..SLOTS).find(|&i| {
        let won = STARTS[i]
            .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if won {
            SHRANK[i].store(false, Ordering::Release);
            ENDS[i].store(start + len, Ordering::Release);
        }
        won
    })
}

/// Installs the SIGBUS handler once; false if the system refused it.
fn guard_installed() -> bool {
    PREVIOUS
        .get_or_init(|| {
            // SAFETY: a zeroed sigaction is a valid value to fill in; the
            // handler only touches atomics and calls mmap and sigaction.
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = on_sigbus as *const () as usize;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut new.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                (libc::sigaction(libc::SIGBUS, &new, &mut old) == 0).then_some(Previous(old))
            }
        })
        .is_some()
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..SLOTS {
        let start = STARTS[i].load(Ordering::Acquire);
        if start == 0 || addr < start || addr >= ENDS[i].load(Ordering::Acquire) {
            continue;
        }
        let page = (addr & !(PAGE - 1)) as *mut libc::c_void;
        // SAFETY: replaces one page inside our own live mapping with zeros.
        let p = unsafe {
            libc::mmap(
                page,
                PAGE,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            SHRANK[i].store(true, Ordering::Release);
            return;
        }
    }
    pass_on(sig, info, ctx);
}

/// A fault that is not a shrunken mapping's: what was there before us.
fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let prev = PREVIOUS.get().copied().flatten();
    match prev {
        Some(Previous(p)) if p.sa_sigaction > libc::SIG_IGN => {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed with SA_SIGINFO.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(p.sa_sigaction) };
                f(sig, info, ctx);
            } else {
                // SAFETY: the previous handler takes the signal number alone.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(p.sa_sigaction) };
                f(sig);
            }
        }
        _ => {
            // The default action: the fault repeats on return and ends the process.
            // SAFETY: signal(2) is async-signal-safe.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_shrunk_under_its_mapping_reads_as_zeros_past_its_new_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 3 * PAGE]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let map = HostMap::new(&f, 3 * PAGE).expect("mapped");
        assert_eq!(map[0], 7);
        assert!(!map.shrank());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(PAGE as u64)
            .unwrap();
        // Without the guard this read ends the test process with SIGBUS.
        assert_eq!(map[2 * PAGE + 5], 0);
        assert!(map.shrank());
        assert_eq!(
            map[PAGE - 1],
            7,
            "the pages still in the file are the file's"
        );
    }

    #[test]
    fn a_dropped_mapping_frees_its_slot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; PAGE]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        for _ in 0..(2 * SLOTS) {
            let m = HostMap::new(&f, PAGE).expect("a slot is free again after a drop");
            assert_eq!(m[0], 1);
        }
    }
}
