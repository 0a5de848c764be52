//! Calls rendered strace-style for events: `write(1, "job 27 done\n") = 12`.

use super::syscalls::{self, row::Arg};
use super::task::{PendingCall, Tid};
use super::Kernel;
use std::fmt::Write;

/// Bytes of a buffer shown before the rest is elided.
const SHOWN_BYTES: usize = 64;

pub fn escape(bytes: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in bytes.iter().take(SHOWN_BYTES) {
        match b {
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\r' => s.push_str("\\r"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    if bytes.len() > SHOWN_BYTES {
        s.push_str("...");
    }
    s
}

/// `name(args)` for a call of thread `tid` (memory read from the current
/// address space, which every thread of a process shares). `ret` is known
/// for buffers the call filled. Written into one string: it is made at
/// every system call's step.
pub fn call_text_with(k: &mut Kernel, _tid: Tid, call: PendingCall, ret: Option<i64>) -> String {
    let Some((def, _)) = syscalls::served(call.nr) else {
        return format!(
            "syscall_{}({:#x}, {:#x}, {:#x})",
            call.nr, call.args[0], call.args[1], call.args[2]
        );
    };
    let mut s = String::with_capacity(64);
    s.push_str(def.name);
    s.push('(');
    let mut i = 0;
    for (n, arg) in def.args.iter().enumerate() {
        if n > 0 {
            s.push_str(", ");
        }
        let v = call.args[i];
        i += 1;
        push_arg(k, &mut s, call, *arg, v, &mut i, ret);
    }
    s.push(')');
    s
}

/// Appends the text of argument `v`, shown as `arg` says: a number, or
/// the memory it points at, or flags. `i` is the next argument's index; an
/// argument that takes a length with it moves it on.
fn push_arg(
    k: &mut Kernel,
    s: &mut String,
    call: PendingCall,
    arg: Arg,
    v: u64,
    i: &mut usize,
    ret: Option<i64>,
) {
    let text = match arg {
        // Numbers are written in place; writing to a String cannot fail.
        Arg::Int => {
            let _ = write!(s, "{}", v as i64);
            return;
        }
        Arg::Fd => {
            let _ = write!(s, "{}", v as i32);
            return;
        }
        Arg::Hex => {
            let _ = write!(s, "{v:#x}");
            return;
        }
        Arg::Oct => {
            let _ = write!(s, "{v:#o}");
            return;
        }
        Arg::Str => match k.read_cstr(v, super::uaccess::PATH_MAX) {
            Ok(b) => escape(&b),
            Err(_) => format!("{v:#x}"),
        },
        Arg::InBuf => {
            let len = call.args[*i] as usize;
            *i += 1;
            match k.read_user(v, len.min(SHOWN_BYTES + 1)) {
                Ok(b) if len <= SHOWN_BYTES => escape(&b),
                Ok(b) => escape(&b) + &format!(" ({len} bytes)"),
                Err(_) => format!("{v:#x}"),
            }
        }
        Arg::OutBuf => {
            *i += 1;
            match ret {
                Some(n) if n >= 0 => match k.read_user(v, (n as usize).min(SHOWN_BYTES + 1)) {
                    Ok(b) => escape(&b),
                    Err(_) => format!("{v:#x}"),
                },
                _ => format!("{v:#x}"),
            }
        }
        Arg::FutexOp => futex_op(v as u32),
        Arg::DirFd => super::fs::show::dirfd(v),
        Arg::OpenFlags => {
            let mode = call.args.get(*i).copied();
            *i += 1;
            super::fs::show::open_flags(v, mode)
        }
        Arg::AtFlags => super::fs::show::at_flags(v),
        Arg::Whence => super::fs::show::whence(v),
        Arg::Signal => crate::run::signal_name(v as i32),
        Arg::SockAddr => {
            let len = (call.args[*i] as usize).min(128);
            match k.read_user(v, len) {
                Ok(b) => super::net::addr::show_raw(&b).unwrap_or(format!("{v:#x}")),
                Err(_) => format!("{v:#x}"),
            }
        }
        Arg::MsgHdr => super::net::cmsg::show(k, v),
    };
    s.push_str(&text);
}

pub fn call_text(k: &mut Kernel, tid: Tid, call: PendingCall) -> String {
    call_text_with(k, tid, call, None)
}

pub fn with_result(text: &str, ret: i64) -> String {
    let mut s = text.to_string();
    push_result(&mut s, ret);
    s
}

/// Appends ` = RESULT` to a call's text: `-1 ERRNO`, hex past 0xffff.
pub fn push_result(text: &mut String, ret: i64) {
    // Writing to a String cannot fail.
    let _ = if (-4095..0).contains(&ret) {
        write!(text, " = -1 {}", super::errno::Errno(-ret as i32).name())
    } else if ret > 0xffff {
        write!(text, " = {ret:#x}")
    } else {
        write!(text, " = {ret}")
    };
}

fn futex_op(op: u32) -> String {
    use super::futex::*;
    let cmd = match op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) {
        FUTEX_WAIT => "FUTEX_WAIT",
        FUTEX_WAKE => "FUTEX_WAKE",
        FUTEX_REQUEUE => "FUTEX_REQUEUE",
        FUTEX_CMP_REQUEUE => "FUTEX_CMP_REQUEUE",
        FUTEX_WAKE_OP => "FUTEX_WAKE_OP",
        FUTEX_WAIT_BITSET => "FUTEX_WAIT_BITSET",
        FUTEX_WAKE_BITSET => "FUTEX_WAKE_BITSET",
        other => return format!("{other:#x}"),
    };
    let mut s = cmd.to_string();
    if op & FUTEX_PRIVATE_FLAG != 0 {
        s.push_str("_PRIVATE");
    }
    if op & FUTEX_CLOCK_REALTIME != 0 {
        s.push_str("|FUTEX_CLOCK_REALTIME");
    }
    s
}
