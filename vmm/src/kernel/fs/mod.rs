//! Files: descriptor tables, the console (stdin, stdout, stderr).
//!
//! Minimal for now: the console only. Root-image files, the overlay and the
//! rest of the file calls live in this family too.

use super::errno::*;
use super::Kernel;
use std::collections::BTreeMap;

/// Longest single write the monitor copies at once.
const MAX_IO: usize = 1 << 30;

/// Standard input's bytes (read at start) and how far the guest has read.
#[derive(Debug, Clone, Default)]
pub struct Console {
    stdin: Vec<u8>,
    pos: usize,
}

impl Console {
    pub fn new(stdin: Vec<u8>) -> Console {
        Console { stdin, pos: 0 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenFile {
    Stdin,
    Stdout,
    Stderr,
}

#[derive(Debug, Clone)]
pub struct FdTable {
    pub fds: BTreeMap<i32, OpenFile>,
}

impl FdTable {
    pub fn with_console() -> FdTable {
        FdTable {
            fds: BTreeMap::from([(0, OpenFile::Stdin), (1, OpenFile::Stdout), (2, OpenFile::Stderr)]),
        }
    }
}

impl Kernel<'_> {
    fn file(&mut self, fd: u64) -> SysResult<OpenFile> {
        let fd = i32::try_from(fd).map_err(|_| EBADF)?;
        self.cur_proc().files.fds.get(&fd).cloned().ok_or(EBADF)
    }

    fn write_file(&mut self, f: &OpenFile, bytes: &[u8]) -> SysResult<u64> {
        match f {
            OpenFile::Stdout => self.output(1, bytes),
            OpenFile::Stderr => self.output(2, bytes),
            OpenFile::Stdin => return Err(EBADF),
        }
        Ok(bytes.len() as u64)
    }
}

pub fn sys_write(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let f = k.file(a[0])?;
    let bytes = k.read_user(a[1], (a[2] as usize).min(MAX_IO))?;
    k.write_file(&f, &bytes)
}

pub fn sys_writev(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let f = k.file(a[0])?;
    if a[2] > 1024 {
        return Err(EINVAL);
    }
    let mut all = Vec::new();
    for i in 0..a[2] {
        let base = k.read_u64(a[1] + i * 16)?;
        let len = k.read_u64(a[1] + i * 16 + 8)? as usize;
        all.extend(k.read_user(base, len.min(MAX_IO))?);
    }
    k.write_file(&f, &all)
}

pub fn sys_read(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    match k.file(a[0])? {
        OpenFile::Stdin => {
            let c = &k.console;
            let n = (a[2] as usize).min(c.stdin.len() - c.pos);
            let bytes = c.stdin[c.pos..c.pos + n].to_vec();
            k.write_user(a[1], &bytes)?;
            k.console.pos += n;
            Ok(n as u64)
        }
        _ => Err(EBADF),
    }
}

pub fn sys_close(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let fd = i32::try_from(a[0]).map_err(|_| EBADF)?;
    k.cur_proc().files.fds.remove(&fd).map(|_| 0).ok_or(EBADF)
}

const TCGETS: u64 = 0x5401;
const TIOCGWINSZ: u64 = 0x5413;

pub fn sys_ioctl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.file(a[0])?;
    match a[1] {
        TCGETS | TIOCGWINSZ => Err(ENOTTY),
        _ => Err(ENOTTY),
    }
}

/// The bytes a file mapping of `fd` starts with.
pub fn mmap_contents(k: &mut Kernel, fd: i32, _off: u64, _len: u64) -> SysResult<Vec<u8>> {
    k.file(fd as u64)?;
    Err(ENODEV)
}
