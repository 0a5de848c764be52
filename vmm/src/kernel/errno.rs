//! Linux error numbers, as the guest sees them.

/// A failed call's error; the guest sees `-errno` in rax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

macro_rules! errnos {
    ($($name:ident = $v:expr),* $(,)?) => {
        $(pub const $name: Errno = Errno($v);)*
        impl Errno {
            pub fn name(self) -> &'static str {
                match self.0 { $($v => stringify!($name),)* _ => "E?" }
            }
        }
    };
}

errnos! {
    EPERM = 1, ENOENT = 2, ESRCH = 3, EINTR = 4, EIO = 5, ENXIO = 6, E2BIG = 7, ENOEXEC = 8,
    EBADF = 9, ECHILD = 10, EAGAIN = 11, ENOMEM = 12, EACCES = 13, EFAULT = 14, EBUSY = 16,
    EEXIST = 17, EXDEV = 18, ENODEV = 19, ENOTDIR = 20, EISDIR = 21, EINVAL = 22, ENFILE = 23,
    EMFILE = 24, ENOTTY = 25, EFBIG = 27, ENOSPC = 28, ESPIPE = 29, EROFS = 30, EMLINK = 31,
    EPIPE = 32, EDOM = 33, ERANGE = 34, EDEADLK = 35, ENAMETOOLONG = 36, ENOLCK = 37,
    ENOSYS = 38, ENOTEMPTY = 39, ELOOP = 40, ENODATA = 61, EOVERFLOW = 75, ENOTSOCK = 88,
    EOPNOTSUPP = 95, EAFNOSUPPORT = 97, ETIMEDOUT = 110, ECONNREFUSED = 111,
    EDESTADDRREQ = 89, EMSGSIZE = 90, EPROTOTYPE = 91, ENOPROTOOPT = 92, EPROTONOSUPPORT = 93,
    ESOCKTNOSUPPORT = 94,
    EADDRINUSE = 98, EADDRNOTAVAIL = 99, ENETUNREACH = 101, ECONNRESET = 104, EISCONN = 106,
    ENOBUFS = 105, ENOTCONN = 107, EALREADY = 114, EINPROGRESS = 115,
}

pub type SysResult<T> = Result<T, Errno>;
