//! `rdtsc` and `rdtscp` from ring 3 fault where the guest's CR4.TSD is
//! honoured (hardware KVM), so the kernel can answer them with a virtual
//! time stamp counter (`Kernel::read_tsc`).
//!
//! PVM runs guest ring 3 with the host's CR4, where TSD is clear, so there
//! they read the host's counter (`rewind doctor` says so). The host thread
//! could ask Linux for the fault (`PR_SET_TSC`, `PR_TSC_SIGSEGV`), but that
//! mode is inherited by every process the thread starts, across `execve`
//! (gdb, nix, a check's property scripts, a test's next `rewind`), which
//! then die on their first `clock_gettime`; not done until the guest runs on
//! a thread that starts nothing.

/// The length of the instruction at the start of `bytes` when it reads the
/// time stamp counter, and whether it is `rdtscp`.
pub fn reads_tsc(bytes: &[u8]) -> Option<(u64, bool)> {
    match bytes {
        [0x0f, 0x31, ..] => Some((2, false)),
        [0x0f, 0x01, 0xf9, ..] => Some((3, true)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::reads_tsc;

    #[test]
    fn time_stamp_reads_are_told_from_other_instructions() {
        assert_eq!(reads_tsc(&[0x0f, 0x31, 0x48]), Some((2, false)));
        assert_eq!(reads_tsc(&[0x0f, 0x01, 0xf9]), Some((3, true)));
        assert_eq!(reads_tsc(&[0x0f, 0x01, 0xd0]), None);
        assert_eq!(reads_tsc(&[0x0f, 0x0b]), None);
        assert_eq!(reads_tsc(&[0x0f]), None);
    }
}
