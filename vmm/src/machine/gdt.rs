//! The global descriptor table, the TSS and the segments ring 3 runs with.

use super::layout::{GDT, RING0_STACK_TOP, TSS};
use kvm_bindings::kvm_segment;

pub const KERNEL_CS: u16 = 0x08;
pub const KERNEL_DS: u16 = 0x10;
/// STAR's sysret base is KERNEL_DS, so user data is 0x18|3 and code 0x20|3.
pub const USER_DS: u16 = 0x1b;
pub const USER_CS: u16 = 0x23;
pub const TSS_SELECTOR: u16 = 0x28;

/// 64-bit TSS size minus one.
const TSS_LIMIT: u32 = 0x67;
/// Offset of RSP0 in the 64-bit TSS.
const TSS_RSP0: u64 = 4;

/// The GDT's entries, in selector order (null, kcode, kdata, udata, ucode, tss lo, tss hi).
pub fn entries() -> [u64; 7] {
    [
        0,
        0x00af_9b00_0000_ffff,
        0x00cf_9300_0000_ffff,
        0x00cf_f300_0000_ffff,
        0x00af_fb00_0000_ffff,
        TSS_LIMIT as u64 | (TSS << 16) | (0x89 << 40),
        0,
    ]
}

/// Byte offset in the TSS and value to store: the ring-0 stack top.
pub fn tss_rsp0() -> (u64, u64) {
    (TSS + TSS_RSP0, RING0_STACK_TOP)
}

pub const GDT_BASE: u64 = GDT;
pub const GDT_LIMIT: u16 = 7 * 8 - 1;

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
