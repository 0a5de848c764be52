//! gdb's file access (`vFile:` packets) answered from the run's file
//! system as the guest saw it at the session's position, read-only: gdb
//! reads the dynamic loader and the libraries the process mapped from the
//! run's image (an imported run's or a `--root` tree's included), not
//! from whatever the host has at those paths.

use super::stub::Stub;
use gdbstub::target::ext::host_io::{
    HostIo, HostIoClose, HostIoCloseOps, HostIoErrno, HostIoError, HostIoFstat, HostIoFstatOps,
    HostIoOpen, HostIoOpenFlags, HostIoOpenMode, HostIoOpenOps, HostIoPread, HostIoPreadOps,
    HostIoResult, HostIoStat,
};

/// At most this many files open at once.
const MAX_OPEN: usize = 64;

fn errno<T>(e: HostIoErrno) -> HostIoResult<T, Stub> {
    Err(HostIoError::Errno(e))
}

impl HostIo for Stub {
    fn support_open(&mut self) -> Option<HostIoOpenOps<'_, Self>> {
        Some(self)
    }
    fn support_close(&mut self) -> Option<HostIoCloseOps<'_, Self>> {
        Some(self)
    }
    fn support_pread(&mut self) -> Option<HostIoPreadOps<'_, Self>> {
        Some(self)
    }
    fn support_fstat(&mut self) -> Option<HostIoFstatOps<'_, Self>> {
        Some(self)
    }
}

impl HostIoOpen for Stub {
    fn open(
        &mut self,
        filename: &[u8],
        flags: HostIoOpenFlags,
        _mode: HostIoOpenMode,
    ) -> HostIoResult<u32, Self> {
        let write = HostIoOpenFlags::O_WRONLY
            | HostIoOpenFlags::O_RDWR
            | HostIoOpenFlags::O_CREAT
            | HostIoOpenFlags::O_TRUNC;
        if flags.intersects(write) {
            return errno(HostIoErrno::EROFS);
        }
        let Ok(path) = std::str::from_utf8(filename) else {
            return errno(HostIoErrno::ENOENT);
        };
        if self.files.files.len() >= MAX_OPEN {
            return errno(HostIoErrno::EMFILE);
        }
        let Some(bytes) = self.session.kernel().file_contents(path) else {
            return errno(HostIoErrno::ENOENT);
        };
        let fd = self.files.next;
        self.files.next += 1;
        self.files.files.insert(fd, bytes);
        Ok(fd)
    }
}

impl HostIoClose for Stub {
    fn close(&mut self, fd: u32) -> HostIoResult<(), Self> {
        match self.files.files.remove(&fd) {
            Some(_) => Ok(()),
            None => errno(HostIoErrno::EBADF),
        }
    }
}

impl HostIoPread for Stub {
    fn pread(
        &mut self,
        fd: u32,
        count: usize,
        offset: u64,
        buf: &mut [u8],
    ) -> HostIoResult<usize, Self> {
        let Some(bytes) = self.files.files.get(&fd) else {
            return errno(HostIoErrno::EBADF);
        };
        let from = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let n = count.min(buf.len()).min(bytes.len() - from);
        buf[..n].copy_from_slice(&bytes[from..from + n]);
        Ok(n)
    }
}

impl HostIoFstat for Stub {
    fn fstat(&mut self, fd: u32) -> HostIoResult<HostIoStat, Self> {
        let Some(bytes) = self.files.files.get(&fd) else {
            return errno(HostIoErrno::EBADF);
        };
        Ok(HostIoStat {
            st_dev: 0,
            st_ino: 0,
            st_mode: HostIoOpenMode::S_IFREG | HostIoOpenMode::S_IRUSR,
            st_nlink: 1,
            st_uid: 0,
            st_gid: 0,
            st_rdev: 0,
            st_size: bytes.len() as u64,
            st_blksize: 4096,
            st_blocks: (bytes.len() as u64).div_ceil(512),
            st_atime: 0,
            st_mtime: 0,
            st_ctime: 0,
        })
    }
}
