//! Control registers and the initial system register state.

use super::gdt;
use super::layout::{EXCEPTION_VECTORS, IDT};
use kvm_bindings::kvm_sregs;

const CR0_PE: u64 = 1;
const CR0_MP: u64 = 1 << 1;
const CR0_ET: u64 = 1 << 4;
const CR0_NE: u64 = 1 << 5;
const CR0_WP: u64 = 1 << 16;
const CR0_AM: u64 = 1 << 18;
const CR0_PG: u64 = 1 << 31;
/// Time stamp disable: `rdtsc` and `rdtscp` from ring 3 fault (`tsc.rs`).
const CR4_TSD: u64 = 1 << 2;
const CR4_PAE: u64 = 1 << 5;
const CR4_OSFXSR: u64 = 1 << 9;
const CR4_OSXMMEXCPT: u64 = 1 << 10;
const CR4_OSXSAVE: u64 = 1 << 18;
const EFER_SCE: u64 = 1;
const EFER_LME: u64 = 1 << 8;
const EFER_LMA: u64 = 1 << 10;
const EFER_NXE: u64 = 1 << 11;

/// RFLAGS with only the always-one bit set.
pub const RFLAGS_DEFAULT: u64 = 2;
/// RFLAGS.TF: trap after the next instruction.
pub const RFLAGS_TF: u64 = 1 << 8;
/// The flags ring 3 may set for itself: CF, PF, AF, ZF, SF, TF, IF, DF, OF,
/// AC and ID (never IOPL, NT, RF or VM).
const USER_FLAGS: u64 = 0x0024_0fd5;

/// RFLAGS to resume ring 3 with after a `syscall` whose R11 held `r11`: a
/// program that enters the syscall entry by a jump chooses R11 itself.
pub fn user_rflags(r11: u64) -> u64 {
    (r11 & USER_FLAGS) | RFLAGS_DEFAULT
}

/// Long mode, paging with `cr3`, ring 3 segments.
pub fn initial_sregs(mut s: kvm_sregs, cr3: u64, xsave: bool) -> kvm_sregs {
    s.cr0 = CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_AM | CR0_PG;
    s.cr3 = cr3;
    s.cr4 = CR4_TSD | CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT | if xsave { CR4_OSXSAVE } else { 0 };
    s.efer = EFER_SCE | EFER_LME | EFER_LMA | EFER_NXE;
    s.gdt.base = gdt::GDT_BASE;
    s.gdt.limit = gdt::GDT_LIMIT;
    s.idt.base = IDT;
    s.idt.limit = (EXCEPTION_VECTORS * 16 - 1) as u16;
    s.cs = gdt::user_code();
    s.ds = gdt::user_data();
    s.es = gdt::user_data();
    s.fs = gdt::user_data();
    s.gs = gdt::user_data();
    s.ss = gdt::user_data();
    s.tr = gdt::task_state();
    s
}
