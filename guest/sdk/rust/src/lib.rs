//! The Rewind guest SDK for Rust: `always`, `sometimes` and `bookmark`.
//!
//! - [`always`]`(cond, message)`: an assertion every run must keep; a run
//!   where it is false violates the `sdk` property of `rewind check`.
//! - [`sometimes`]`(cond, message)`: something at least one run of a check
//!   must see true (a schedule the check must reach).
//! - [`bookmark`]`(message)`: a named point in the run, shown among its events.
//!
//! Each is one reserved system call (0x5257, "RW") that Rewind records as an
//! event. Outside Rewind, Linux answers it with ENOSYS and the call does
//! nothing; on other targets the functions compile to nothing. No
//! dependencies, and `no_std`.
//!
//! ```
//! rewind_sdk::bookmark("tellers started");
//! let balance = 1150;
//! rewind_sdk::always(balance == 1150, "no deposit is lost");
//! rewind_sdk::sometimes(balance > 1000, "a deposit landed");
//! ```
#![no_std]

/// The reserved system call number ("RW").
pub const SYSCALL: usize = 0x5257;
/// `kind` of an `always` call.
pub const ALWAYS: usize = 0;
/// `kind` of a `sometimes` call.
pub const SOMETIMES: usize = 1;
/// `kind` of a `bookmark` call.
pub const BOOKMARK: usize = 2;

/// The raw call: `sdk(kind, cond, message, length)`. Returns 0 under Rewind,
/// `-38` (ENOSYS) on Linux outside it, and `-38` on other targets.
#[inline]
pub fn call(kind: usize, cond: bool, message: &str) -> isize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let ret: isize;
        // SAFETY: the reserved call reads `message.len()` bytes at
        // `message.as_ptr()`, which `message` owns; it writes no memory.
        // Like every system call it clobbers rcx and r11.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") SYSCALL as isize => ret,
                in("rdi") kind,
                in("rsi") cond as usize,
                in("rdx") message.as_ptr(),
                in("r10") message.len(),
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack, readonly),
            );
        }
        ret
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        let _ = (kind, cond, message);
        -38
    }
}

/// Asserts that `cond` holds in every run; a run where it is false violates
/// the check's `sdk` property. Does not stop the program.
#[inline]
pub fn always(cond: bool, message: &str) {
    call(ALWAYS, cond, message);
}

/// Says that `cond` must hold in at least one run of a check.
#[inline]
pub fn sometimes(cond: bool, message: &str) {
    call(SOMETIMES, cond, message);
}

/// Marks a point of the run with a name.
#[inline]
pub fn bookmark(message: &str) {
    call(BOOKMARK, true, message);
}

#[cfg(test)]
mod tests {
    // Outside Rewind the call is unknown to Linux: ENOSYS, and nothing else happens.
    #[test]
    fn outside_rewind_the_call_is_enosys() {
        assert_eq!(super::call(super::ALWAYS, false, "outside"), -38);
        super::always(false, "does nothing");
        super::sometimes(false, "does nothing");
        super::bookmark("does nothing");
    }
}
