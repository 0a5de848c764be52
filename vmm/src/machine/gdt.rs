//! The global descriptor table, the TSS and the segments ring 3 runs with.

use super::layout::{GDT, RING0_STACK_TOP, TSS};
use kvm_bindings::kvm_segment;

// Linux's x86-64 layout (arch/x86/include/asm/segment.h), so that a far
// transfer, an `iretq` frame or a segment load naming a selector ends as it
// does there, and what a program reads of its selectors (a signal frame's
// cs and ss) is Linux's.
pub const KERNEL_CS: u16 = 0x10;
pub const KERNEL_DS: u16 = 0x18;
/// Linux's 32-bit user code segment's selector, the base `sysret` adds to:
/// user data is 0x28|3 and 64-bit user code 0x30|3. The descriptor itself
/// is left out (its entry is null): Rewind runs 64-bit programs only, and
/// a thread that jumped into compatibility mode would come back from the
/// monitor in 64-bit mode, so a selector naming it faults instead.
pub const USER32_CS: u16 = 0x23;
pub const USER_DS: u16 = 0x2b;
pub const USER_CS: u16 = 0x33;
pub const TSS_SELECTOR: u16 = 0x40;

/// 64-bit TSS size minus one.
const TSS_LIMIT: u32 = 0x67;
/// Offset of RSP0 in the 64-bit TSS.
const TSS_RSP0: u64 = 4;
/// Entries, as Linux's GDT has.
const ENTRIES: usize = 16;

/// The GDT's entries, in selector order: null, 32-bit kernel code, kernel
/// code, kernel data, (32-bit user code: null), user data, user code,
/// null, the TSS (two entries), the LDT's and the three TLS entries
/// (null: no LDT, no `set_thread_area`), and Linux's per-CPU entry (a
/// present read-only data segment whose limit is the CPU and node: 0).
pub fn entries() -> [u64; ENTRIES] {
    let mut e = [0; ENTRIES];
    e[1] = 0x00cf_9b00_0000_ffff;
    e[2] = 0x00af_9b00_0000_ffff;
    e[3] = 0x00cf_9300_0000_ffff;
    e[5] = 0x00cf_f300_0000_ffff;
    e[6] = 0x00af_fb00_0000_ffff;
    // Busy, as `ltr` leaves it in Linux's GDT (KVM loads TR without it).
    e[8] = TSS_LIMIT as u64 | (TSS << 16) | (0x8b << 40);
    e[15] = 0x0040_f500_0000_0000;
    e
}

/// Byte offset in the TSS and value to store: the ring-0 stack top.
pub fn tss_rsp0() -> (u64, u64) {
    (TSS + TSS_RSP0, RING0_STACK_TOP)
}

pub const GDT_BASE: u64 = GDT;
pub const GDT_LIMIT: u16 = ENTRIES as u16 * 8 - 1;

pub fn user_code() -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector: USER_CS,
        present: 1,
        type_: 11,
        dpl: 3,
        s: 1,
        l: 1,
        g: 1,
        ..Default::default()
    }
}

pub fn user_data() -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector: USER_DS,
        present: 1,
        type_: 3,
        dpl: 3,
        db: 1,
        s: 1,
        g: 1,
        ..Default::default()
    }
}

pub fn task_state() -> kvm_segment {
    kvm_segment {
        base: TSS,
        limit: TSS_LIMIT,
        selector: TSS_SELECTOR,
        present: 1,
        type_: 11,
        ..Default::default()
    }
}

pub fn kernel_code() -> kvm_segment {
    kvm_segment {
        selector: KERNEL_CS,
        dpl: 0,
        ..user_code()
    }
}

pub fn kernel_data() -> kvm_segment {
    kvm_segment {
        selector: KERNEL_DS,
        dpl: 0,
        ..user_data()
    }
}
