//! How this family's arguments read in events, as strace writes them:
//! `openat(AT_FDCWD, "/etc/passwd", O_RDONLY|O_CLOEXEC) = 3`.

use super::*;

/// A directory descriptor: `AT_FDCWD` or the number.
pub fn dirfd(v: u64) -> String {
    match v as i32 {
        AT_FDCWD => "AT_FDCWD".to_string(),
        n => n.to_string(),
    }
}

/// Names for the bits of `v` (longest masks first); what is left in hex.
fn bits(mut v: u64, names: &[(u64, &str)]) -> Vec<String> {
    let mut out = Vec::new();
    for &(bit, name) in names {
        if bit != 0 && v & bit == bit {
            out.push(name.to_string());
            v &= !bit;
        }
    }
    if v != 0 {
        out.push(format!("{v:#x}"));
    }
    out
}

/// Open flags, and the mode when the flags create a file (`0o644`, as `Arg::Oct` shows modes).
pub fn open_flags(flags: u64, mode: Option<u64>) -> String {
    let f = flags as u32;
    let acc = match f & O_ACCMODE {
        O_RDONLY => "O_RDONLY",
        O_WRONLY => "O_WRONLY",
        O_RDWR => "O_RDWR",
        _ => "O_ACCMODE",
    };
    let rest = bits(
        (f & !O_ACCMODE) as u64,
        &[
            (O_TMPFILE as u64, "O_TMPFILE"),
            (O_SYNC as u64, "O_SYNC"),
            (O_CREAT as u64, "O_CREAT"),
            (O_EXCL as u64, "O_EXCL"),
            (O_NOCTTY as u64, "O_NOCTTY"),
            (O_TRUNC as u64, "O_TRUNC"),
            (O_APPEND as u64, "O_APPEND"),
            (O_NONBLOCK as u64, "O_NONBLOCK"),
            (O_DSYNC as u64, "O_DSYNC"),
            (O_ASYNC as u64, "O_ASYNC"),
            (O_DIRECT as u64, "O_DIRECT"),
            (O_LARGEFILE as u64, "O_LARGEFILE"),
            (O_DIRECTORY as u64, "O_DIRECTORY"),
            (O_NOFOLLOW as u64, "O_NOFOLLOW"),
            (O_NOATIME as u64, "O_NOATIME"),
            (O_CLOEXEC as u64, "O_CLOEXEC"),
            (O_PATH as u64, "O_PATH"),
        ],
    );
    let mut s = std::iter::once(acc.to_string())
        .chain(rest)
        .collect::<Vec<_>>()
        .join("|");
    let creates = f & O_CREAT != 0 || f & O_TMPFILE == O_TMPFILE;
    if let (true, Some(m)) = (creates, mode) {
        s.push_str(&format!(", {m:#o}"));
    }
    s
}

/// `AT_*` flags, or 0.
pub fn at_flags(v: u64) -> String {
    if v == 0 {
        return "0".to_string();
    }
    bits(
        v,
        &[
            (AT_SYMLINK_NOFOLLOW, "AT_SYMLINK_NOFOLLOW"),
            (AT_SYMLINK_FOLLOW, "AT_SYMLINK_FOLLOW"),
            (AT_NO_AUTOMOUNT, "AT_NO_AUTOMOUNT"),
            (AT_EMPTY_PATH, "AT_EMPTY_PATH"),
        ],
    )
    .join("|")
}

/// lseek's whence.
pub fn whence(v: u64) -> String {
    match v {
        0 => "SEEK_SET".to_string(),
        1 => "SEEK_CUR".to_string(),
        2 => "SEEK_END".to_string(),
        3 => "SEEK_DATA".to_string(),
        4 => "SEEK_HOLE".to_string(),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_strace_writes() {
        assert_eq!(dirfd(-100i64 as u64), "AT_FDCWD");
        assert_eq!(dirfd(3), "3");
        assert_eq!(open_flags(0, Some(0)), "O_RDONLY");
        assert_eq!(open_flags(0o2000000, None), "O_RDONLY|O_CLOEXEC");
        assert_eq!(
            open_flags(0x241, Some(0o644)),
            "O_WRONLY|O_CREAT|O_TRUNC, 0o644"
        );
        assert_eq!(
            open_flags(0o20200002, Some(0o600)),
            "O_RDWR|O_TMPFILE, 0o600"
        );
        assert_eq!(at_flags(0x1000), "AT_EMPTY_PATH");
        assert_eq!(at_flags(0x1200), "AT_EMPTY_PATH|0x200");
        assert_eq!(whence(2), "SEEK_END");
    }
}
