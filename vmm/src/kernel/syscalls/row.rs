//! What a row of the system call table holds, and the constructors the
//! table is written with: `full`, `partial` (with what is missing) and
//! `missing` (ENOSYS, with why).

use super::super::errno::SysResult;
use super::super::sched::Sys;
use super::super::Kernel;

/// How an argument is shown in events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    Int,
    Fd,
    Hex,
    Oct,
    /// A NUL-terminated string (a path).
    Str,
    /// Bytes the guest hands in; the next argument is their length (not shown).
    InBuf,
    /// Bytes the call fills; the next argument is the room (not shown), the result the count.
    OutBuf,
    FutexOp,
    Signal,
    /// A directory descriptor of an `*at` call (`AT_FDCWD`).
    DirFd,
    /// Open flags; with O_CREAT or O_TMPFILE the next argument is the mode (shown), else it is not shown.
    OpenFlags,
    /// `AT_*` flags.
    AtFlags,
    /// lseek's whence.
    Whence,
    /// A socket address; the next argument is its length (shown too).
    SockAddr,
    /// A `struct msghdr` (sendmsg, recvmsg): its ancillary records shown.
    MsgHdr,
}

type Simple = fn(&mut Kernel, [u64; 6]) -> SysResult<u64>;
type Blocking = fn(&mut Kernel, [u64; 6]) -> SysResult<Sys>;

#[derive(Clone, Copy)]
pub enum Handler {
    Simple(Simple),
    /// May block the thread, or not return to the caller.
    Blocking(Blocking),
}

/// How far a system call is supported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    Implemented,
    /// Served, with this missing.
    Partial(&'static str),
    /// Returns ENOSYS, for this reason.
    Missing(&'static str),
}

/// One system call number: what it is called, what serves it, how far.
pub struct Row {
    pub nr: u32,
    pub name: &'static str,
    pub support: Support,
    /// None exactly when `support` is `Missing`: the constructors keep it so.
    handler: Option<Handler>,
    pub args: &'static [Arg],
    /// Recorded before it runs: it does not return (exit, rt_sigreturn).
    pub noreturn: bool,
}

const fn row(support: Support, handler: Option<Handler>, args: &'static [Arg]) -> Row {
    Row {
        nr: 0,
        name: "",
        support,
        handler,
        args,
        noreturn: false,
    }
}

/// Implemented as Linux does.
pub const fn full(handler: Handler, args: &'static [Arg]) -> Row {
    row(Support::Implemented, Some(handler), args)
}

/// Served, with `what` missing.
pub const fn partial(handler: Handler, args: &'static [Arg], what: &'static str) -> Row {
    row(Support::Partial(what), Some(handler), args)
}

/// Not implemented: ENOSYS, for this reason.
pub const fn missing(why: &'static str) -> Row {
    row(Support::Missing(why), None, &[])
}

impl Row {
    /// The row at its number, under its name (the table's macro sets both).
    pub const fn at(self, nr: u32, name: &'static str) -> Row {
        Row { nr, name, ..self }
    }

    /// Recorded before it runs: it does not return.
    pub const fn noreturn(self) -> Row {
        Row {
            noreturn: true,
            ..self
        }
    }

    /// What serves the call; None for a call that gets ENOSYS.
    pub fn handler(&self) -> Option<Handler> {
        self.handler
    }
}
