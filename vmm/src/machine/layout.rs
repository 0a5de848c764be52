//! The guest's physical and virtual layout, named once.
//!
//! The low 2 MiB are the monitor's: identity mapped, supervisor-only except
//! the syscall entry page, which PVM needs user-readable. Everything from
//! [`USER_FRAMES_START`] up is a pool of 4 KiB frames the kernel hands out
//! for user pages and page tables.

/// Size of a page and of a frame.
pub const PAGE_SIZE: u64 = 4096;
/// `syscall` lands here (LSTAR): one `out SYSCALL_PORT, al`.
pub const SYSCALL_ENTRY: u64 = 0x1000;
/// Exception vector `v` lands at `IDT_STUBS + v * IDT_STUB_SIZE`: one `out`.
pub const IDT_STUBS: u64 = 0x2000;
pub const IDT_STUB_SIZE: u64 = 4;
/// The slots the in-guest #DB handler shares with the monitor (memory
/// points): see `trampoline::debug_handler`.
pub const POINT_SLOTS: u64 = 0x4000;
/// The in-guest #DB handler (vector 1), after the one-`out` stubs.
pub const DEBUG_HANDLER: u64 = 0x2400;
/// The in-guest routine that takes ring-3 access away from a list of pages
/// before a thread runs (see `trampoline::hide_routine`).
pub const HIDE_ROUTINE: u64 = 0x2600;
/// Top of the ring-0 stack (TSS.RSP0): the CPU pushes exception frames here.
pub const RING0_STACK_TOP: u64 = 0x8000;
/// The one page table for 0..2 MiB, shared by every address space.
pub const LOW_PAGE_TABLE: u64 = 0x13000;
pub const GDT: u64 = 0x20000;
pub const IDT: u64 = 0x21000;
pub const TSS: u64 = 0x30000;
/// All of guest memory, mapped supervisor-only at this address in every
/// address space (PML4 slot 256) with 2 MiB pages, so that guest ring-0
/// code can write a page-table entry by its physical address.
pub const DIRECT_MAP: u64 = 0xffff_8000_0000_0000;
/// The direct map's page-directory-pointer table, and its page directories
/// (one per GiB of guest memory) from `DIRECT_MAP_PDS` to the end of the
/// monitor's region.
pub const DIRECT_MAP_PDPT: u64 = 0x14000;
pub const DIRECT_MAP_PDS: u64 = 0x40000;
/// End of the monitor's identity-mapped region; user mappings start above.
pub const MONITOR_END: u64 = 0x20_0000;
/// First frame of the pool for user pages and page tables.
pub const USER_FRAMES_START: u64 = MONITOR_END;

/// Number of exception vectors with a stub.
pub const EXCEPTION_VECTORS: u64 = 32;
/// I/O port the syscall stub writes to.
pub const SYSCALL_PORT: u16 = 0x20;
/// I/O port of exception vector 0; vector `v` writes to `EXCEPTION_PORT_BASE + v`.
pub const EXCEPTION_PORT_BASE: u16 = 0x80;

/// Highest user address plus one (47-bit canonical lower half).
pub const USER_END: u64 = 0x7fff_ffff_f000;
/// Top of the initial stack.
pub const STACK_TOP: u64 = 0x7fff_ffff_e000;
/// Room reserved for the main thread's stack (grows on demand within it).
pub const STACK_MAX: u64 = 8 << 20;
/// Top of the mmap area, which grows down from here.
pub const MMAP_TOP: u64 = 0x7fff_f7ff_f000;
/// Where a position-independent executable is loaded (Linux's ELF_ET_DYN_BASE).
pub const PIE_BASE: u64 = 0x5555_5555_4000;
