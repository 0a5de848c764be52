//! Model-specific registers: where `syscall` goes.

use super::gdt::{KERNEL_CS, USER32_CS};
use super::layout::SYSCALL_ENTRY;
use kvm_bindings::{kvm_msr_entry, Msrs};

const MSR_STAR: u32 = 0xc000_0081;
const MSR_LSTAR: u32 = 0xc000_0082;
const MSR_SYSCALL_MASK: u32 = 0xc000_0084;
/// RFLAGS bits cleared on `syscall`: TF, IF, DF, AC (as Linux does).
const SYSCALL_RFLAGS_MASK: u64 = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 18);

pub fn syscall_msrs() -> Msrs {
    let entries = [
        (
            MSR_STAR,
            ((USER32_CS as u64) << 48) | ((KERNEL_CS as u64) << 32),
        ),
        (MSR_LSTAR, SYSCALL_ENTRY),
        (MSR_SYSCALL_MASK, SYSCALL_RFLAGS_MASK),
    ]
    .map(|(index, data)| kvm_msr_entry {
        index,
        data,
        ..Default::default()
    });
    Msrs::from_entries(&entries).expect("three MSRs fit")
}
