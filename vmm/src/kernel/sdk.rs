//! The guest SDK's one reserved system call: `always`, `sometimes`,
//! `bookmark` (guest/sdk). Outside Rewind the number is unused by Linux, so
//! the call fails with ENOSYS and the SDK does nothing. Its number,
//! `syscalls::nr::rewind_sdk`, is "RW" in ASCII, far above Linux's.

use super::errno::*;
use super::Kernel;
use crate::run::{EventKind, SdkKind};

pub const SDK_ALWAYS: u64 = 0;
pub const SDK_SOMETIMES: u64 = 1;
pub const SDK_BOOKMARK: u64 = 2;
/// Longest message kept.
const MAX_MESSAGE: usize = 1024;

/// sdk(kind, cond, message, length)
/// Sdk implements Linux syscall rewind_sdk(2).
pub fn sys_sdk(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let kind = match a[0] {
        SDK_ALWAYS => SdkKind::Always,
        SDK_SOMETIMES => SdkKind::Sometimes,
        SDK_BOOKMARK => SdkKind::Bookmark,
        _ => return Err(EINVAL),
    };
    let bytes = k.read_user(a[2], (a[3] as usize).min(MAX_MESSAGE))?;
    k.emit(EventKind::Sdk {
        kind,
        cond: a[1] != 0,
        message: String::from_utf8_lossy(&bytes).into_owned(),
    });
    Ok(0)
}
