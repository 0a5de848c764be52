//! Which code is the C library's synchronisation (`races.rs`): an atomic
//! there (a mutex, a condition variable, an allocator's arena lock) hands
//! a page over; any other (a lock-free variable) makes it trap for good.

use super::task::Pid;
use super::Kernel;

/// Functions of a C library's synchronisation, by name prefix: glibc's
/// and musl's mutexes, condition variables, semaphores, barriers, `once`,
/// internal locks (stdio, the allocator's arenas) and thread bookkeeping,
/// Go's runtime locks and `sync` types.
const SYNC_PREFIXES: &[&str] = &[
    "pthread_",
    "__pthread",
    "___pthread",
    "__lll_",
    "__condvar_",
    "__new_sem",
    "__old_sem",
    "sem_",
    "__sem",
    "_IO_",
    "__GI_",
    "__nptl_",
    "__libc_",
    "start_thread",
    "_int_",
    "arena_",
    "tcache",
    "__malloc",
    "__lock",
    "__unlock",
    "__futex",
    "__wait",
    "__wake",
    "runtime.",
    "sync.(*",
];

/// The allocator's entry points, by exact name.
const SYNC_NAMES: &[&str] = &[
    "malloc",
    "free",
    "calloc",
    "realloc",
    "cfree",
    "memalign",
    "posix_memalign",
    "aligned_alloc",
    "valloc",
    "pvalloc",
];

/// Whether a function (by its symbol) is a C library's synchronisation.
fn sync_function(name: &str) -> bool {
    SYNC_NAMES.contains(&name) || SYNC_PREFIXES.iter().any(|p| name.starts_with(p))
}

impl Kernel<'_> {
    /// Whether the instruction at `rip` is the C library's
    /// synchronisation: in a shared library (`libc.so.6`, the dynamic
    /// loader), or, in a static program, in a function of its mutexes,
    /// condition variables, semaphores, barriers, stdio locks or
    /// allocator (`SYNC_FUNCTIONS`), by the program's own symbol table.
    pub(super) fn sync_code(&mut self, pid: Pid, rip: u64) -> bool {
        let vma = self.procs.get(&pid).and_then(|p| p.mm.vma_at(rip));
        let file = vma.map(|(_, v)| v.name.rsplit('/').next().unwrap_or_default());
        if file.is_some_and(|f| f.contains(".so")) {
            return true;
        }
        let at = self.describe_in(pid, rip);
        let name = at.split_once(" in ").map_or("", |(_, n)| n);
        sync_function(name.rsplit_once('+').map_or(name, |(n, _)| n))
    }
}
