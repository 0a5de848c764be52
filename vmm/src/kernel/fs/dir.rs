//! Directories: getdents64 (entries in name order, `.` and `..` first),
//! getcwd, chdir, fchdir, mkdir, mkdirat, rmdir, unlink, unlinkat, rename,
//! renameat, renameat2, link, linkat, symlink, symlinkat. Every change lands
//! in the run's overlay.

use super::super::errno::*;
use super::super::Kernel;
use super::special;
use super::vfs::{self, Ino, Kind, S_IFDIR, S_IFLNK};
use super::*;

/// One entry of a listing: name, inode, DT_ type.
type Entry = (String, Ino, u8);

const DT_DIR: u8 = 4;

impl Kernel<'_> {
    /// A directory's listing: `.`, `..`, then the entries by name.
    fn listing(&mut self, dir: Ino) -> SysResult<Vec<Entry>> {
        let parent = self.vfs.tree.parent_of(dir);
        let mut out = vec![
            (".".to_string(), dir, DT_DIR),
            ("..".to_string(), parent, DT_DIR),
        ];
        let node = self.vfs.tree.node(dir)?;
        if node.nlink == 0 {
            // Removed while open: empty, as on Linux.
            return Ok(Vec::new());
        }
        let generated = matches!(node.kind, Kind::Proc(_)) || self.vfs.tree.is_proc_root(dir);
        match &node.kind {
            Kind::Dir(_) => {
                let entries: Vec<(String, Ino)> = self
                    .vfs
                    .tree
                    .entries(dir)?
                    .iter()
                    .map(|(n, i)| (n.clone(), *i))
                    .collect();
                for (name, ino) in entries {
                    let t = self.vfs.tree.node(ino).map_or(0, |n| n.dtype());
                    out.push((name, ino, t));
                }
            }
            Kind::Proc(p) if p.is_dir() => {}
            _ => return Err(ENOTDIR),
        }
        // `/proc`'s processes, and the entries of directories under it.
        if generated {
            let table = special::Table {
                procs: &self.procs,
                zombies: &self.zombies,
            };
            out.extend(special::proc_listing(&mut self.vfs.tree, table, dir)?);
        }
        Ok(out)
    }
}

/// getdents64(fd, dirp, count): `linux_dirent64` records; the offset is an
/// index into the listing.
/// Getdents64 implements Linux syscall getdents64(2).
pub fn sys_getdents64(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    dents(k, a, Dirent::Linux64)
}

/// getdents(fd, dirp, count): the old `linux_dirent` records, the type in
/// each record's last byte.
/// Getdents implements Linux syscall getdents(2).
pub fn sys_getdents(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    dents(k, a, Dirent::Linux)
}

/// The record layout a getdents call writes.
#[derive(Clone, Copy, PartialEq)]
enum Dirent {
    /// ino, off, reclen, type, name, NUL.
    Linux64,
    /// ino, off, reclen, name, NUL, padding, type last.
    Linux,
}

fn dents(k: &mut Kernel, a: [u64; 6], layout: Dirent) -> SysResult<u64> {
    let (id, d) = k.desc(a[0])?;
    if d.flags & O_PATH != 0 {
        return Err(EBADF);
    }
    let Target::Node(dir) = d.target else {
        return Err(ENOTDIR);
    };
    if k.vfs.tree.node(dir)?.file_type() != S_IFDIR {
        return Err(ENOTDIR);
    }
    let room = a[2] as u32 as usize;
    let list = k.listing(dir)?;
    let mut buf = Vec::new();
    let mut i = d.offset.min(list.len() as u64) as usize;
    while i < list.len() {
        let (name, ino, t) = &list[i];
        let reclen = match layout {
            Dirent::Linux64 => 19 + name.len() + 1,
            Dirent::Linux => 18 + name.len() + 2,
        }
        .next_multiple_of(8);
        if buf.len() + reclen > room {
            break;
        }
        let start = buf.len();
        buf.extend_from_slice(&ino.to_le_bytes());
        buf.extend_from_slice(&((i + 1) as u64).to_le_bytes());
        buf.extend_from_slice(&(reclen as u16).to_le_bytes());
        if layout == Dirent::Linux64 {
            buf.push(*t);
        }
        buf.extend_from_slice(name.as_bytes());
        buf.resize(start + reclen, 0);
        if layout == Dirent::Linux {
            buf[start + reclen - 1] = *t;
        }
        i += 1;
    }
    if buf.is_empty() && i < list.len() {
        return Err(EINVAL);
    }
    k.write_user(a[1], &buf)?;
    k.desc_mut(id).offset = i as u64;
    Ok(buf.len() as u64)
}

/// Getcwd implements Linux syscall getcwd(2).
pub fn sys_getcwd(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let mut cwd = k.cur_proc().cwd.clone().into_bytes();
    cwd.push(0);
    if (a[1] as usize) < cwd.len() {
        return Err(ERANGE);
    }
    k.write_user(a[0], &cwd)?;
    Ok(cwd.len() as u64)
}

/// Makes `ino` the working directory.
fn set_cwd(k: &mut Kernel, ino: Ino, fallback: String) -> SysResult<u64> {
    let n = k.vfs.tree.node(ino)?;
    if n.file_type() != S_IFDIR {
        return Err(ENOTDIR);
    }
    let path = match n.kind {
        Kind::Dir(_) => k.vfs.tree.dir_path(ino),
        _ => fallback,
    };
    k.cur_proc().cwd = path;
    Ok(0)
}

/// Chdir implements Linux syscall chdir(2).
pub fn sys_chdir(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    let ino = k.lookup_at(AT_FDCWD as u64, &path, true)?;
    let lexical = vfs::resolve::normalize(&k.cur_proc().cwd.clone(), &path);
    set_cwd(k, ino, lexical)
}

/// Fchdir implements Linux syscall fchdir(2).
pub fn sys_fchdir(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (_, d) = k.desc(a[0])?;
    let Target::Node(ino) = d.target else {
        return Err(ENOTDIR);
    };
    set_cwd(k, ino, d.path)
}

fn mkdir(k: &mut Kernel, dirfd: u64, path_va: u64, mode: u64) -> SysResult<u64> {
    let path = k.read_path(path_va)?;
    let r = k.resolve_at(dirfd, &path, false)?;
    if r.ino.is_some() || r.name.is_empty() {
        return Err(EEXIST);
    }
    let umask = k.cur_proc().umask;
    let now = k.fs_now();
    let perm = mode as u32 & 0o7777 & !umask;
    k.vfs.tree.create(
        r.parent,
        &r.name,
        S_IFDIR | perm,
        vfs::empty_dir(r.parent, &r.name),
        now,
    )?;
    Ok(0)
}

/// Mkdir implements Linux syscall mkdir(2).
pub fn sys_mkdir(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    mkdir(k, AT_FDCWD as u64, a[0], a[1])
}

/// Mkdirat implements Linux syscall mkdirat(2).
pub fn sys_mkdirat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    mkdir(k, a[0], a[1], a[2])
}

/// mknod's node types: regular files (type 0 too), FIFOs (`fifo.rs`) and
/// sockets' nodes (which nothing is bound to). Device nodes are EPERM, as
/// for a process without CAP_MKNOD: the machine's devices are the
/// monitor's fixed few (`/dev/null`, `/dev/zero`, `/dev/urandom`...), so
/// a node naming another device would name hardware the run does not have.
fn mknod(k: &mut Kernel, dirfd: u64, path_va: u64, mode: u64) -> SysResult<u64> {
    let mode = mode as u32;
    let ftype = match mode & vfs::S_IFMT {
        0 | vfs::S_IFREG => vfs::S_IFREG,
        t @ (vfs::S_IFIFO | vfs::S_IFSOCK) => t,
        vfs::S_IFCHR | vfs::S_IFBLK | S_IFDIR => return Err(EPERM),
        _ => return Err(EINVAL),
    };
    let path = k.read_path(path_va)?;
    let r = k.resolve_at(dirfd, &path, false)?;
    if r.ino.is_some() || r.name.is_empty() {
        return Err(EEXIST);
    }
    if r.want_dir {
        return Err(ENOENT);
    }
    let umask = k.cur_proc().umask;
    let now = k.fs_now();
    let kind = Kind::File(vfs::FileData::empty());
    let perm = mode & 0o7777 & !umask;
    k.vfs
        .tree
        .create(r.parent, &r.name, ftype | perm, kind, now)?;
    Ok(0)
}

/// Mknod implements Linux syscall mknod(2).
/// Partial (mknod): device nodes are EPERM (the machine has only its own few devices).
pub fn sys_mknod(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    mknod(k, AT_FDCWD as u64, a[0], a[1])
}

/// Mknodat implements Linux syscall mknodat(2).
/// Partial (mknodat): device nodes are EPERM (the machine has only its own few devices).
pub fn sys_mknodat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    mknod(k, a[0], a[1], a[2])
}

fn rmdir(k: &mut Kernel, dirfd: u64, path: &str) -> SysResult<u64> {
    let r = k.resolve_at(dirfd, path, false)?;
    let ino = r.ino.ok_or(ENOENT)?;
    if r.name.is_empty() {
        return Err(if ino == vfs::ROOT_INO {
            EBUSY
        } else if path.trim_end_matches('/').ends_with("..") {
            ENOTEMPTY
        } else {
            EINVAL
        });
    }
    if !matches!(k.vfs.tree.node(ino)?.kind, Kind::Dir(_)) {
        return Err(ENOTDIR);
    }
    if k.vfs.tree.is_fixed(r.parent) || k.vfs.tree.is_fixed(ino) {
        return Err(EPERM);
    }
    if !k.vfs.tree.entries(ino)?.is_empty() {
        return Err(ENOTEMPTY);
    }
    let now = k.fs_now();
    k.vfs.tree.unlink_entry(r.parent, &r.name, now);
    Ok(0)
}

fn unlink(k: &mut Kernel, dirfd: u64, path: &str) -> SysResult<u64> {
    let r = k.resolve_at(dirfd, path, false)?;
    let ino = r.ino.ok_or(ENOENT)?;
    if r.name.is_empty() {
        return Err(EISDIR);
    }
    let n = k.vfs.tree.node(ino)?;
    if n.file_type() == S_IFDIR {
        return Err(EISDIR);
    }
    if r.want_dir {
        return Err(ENOTDIR);
    }
    if k.vfs.tree.is_fixed(r.parent) {
        return Err(EACCES);
    }
    let now = k.fs_now();
    k.vfs.tree.unlink_entry(r.parent, &r.name, now);
    Ok(0)
}

/// Rmdir implements Linux syscall rmdir(2).
pub fn sys_rmdir(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    rmdir(k, AT_FDCWD as u64, &path)
}

/// Unlink implements Linux syscall unlink(2).
pub fn sys_unlink(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let path = k.read_path(a[0])?;
    unlink(k, AT_FDCWD as u64, &path)
}

/// Unlinkat implements Linux syscall unlinkat(2).
pub fn sys_unlinkat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[2] & !AT_REMOVEDIR != 0 {
        return Err(EINVAL);
    }
    let path = k.read_path(a[1])?;
    if a[2] & AT_REMOVEDIR != 0 {
        rmdir(k, a[0], &path)
    } else {
        unlink(k, a[0], &path)
    }
}

const RENAME_NOREPLACE: u64 = 1;
const RENAME_EXCHANGE: u64 = 2;

fn rename(
    k: &mut Kernel,
    olddir: u64,
    old_va: u64,
    newdir: u64,
    new_va: u64,
    flags: u64,
) -> SysResult<u64> {
    if flags & !(RENAME_NOREPLACE | RENAME_EXCHANGE) != 0
        || flags == RENAME_NOREPLACE | RENAME_EXCHANGE
    {
        return Err(EINVAL);
    }
    let old = k.read_path(old_va)?;
    let new = k.read_path(new_va)?;
    let ro = k.resolve_at(olddir, &old, false)?;
    let src = ro.ino.ok_or(ENOENT)?;
    let rn = k.resolve_at(newdir, &new, false)?;
    if ro.name.is_empty() || rn.name.is_empty() {
        return Err(EBUSY);
    }
    let tree = &mut k.vfs.tree;
    if tree.is_fixed(ro.parent) || tree.is_fixed(rn.parent) {
        return Err(EXDEV);
    }
    let src_dir = tree.node(src)?.file_type() == S_IFDIR;
    if !src_dir && (ro.want_dir || rn.want_dir) {
        return Err(ENOTDIR);
    }
    let now = k.clock.realtime();
    let tree = &mut k.vfs.tree;
    if flags & RENAME_EXCHANGE != 0 {
        let dst = rn.ino.ok_or(ENOENT)?;
        let dst_dir = tree.node(dst)?.file_type() == S_IFDIR;
        if (src_dir && tree.is_ancestor(src, rn.parent))
            || (dst_dir && tree.is_ancestor(dst, ro.parent))
        {
            return Err(EINVAL);
        }
        if src == dst {
            return Ok(0);
        }
        tree.exchange(ro.parent, &ro.name, rn.parent, &rn.name, now)?;
        return Ok(0);
    }
    if let Some(dst) = rn.ino {
        if dst == src {
            return Ok(0);
        }
        if flags & RENAME_NOREPLACE != 0 {
            return Err(EEXIST);
        }
        let dst_dir = tree.node(dst)?.file_type() == S_IFDIR;
        if src_dir && !dst_dir {
            return Err(ENOTDIR);
        }
        if !src_dir && dst_dir {
            return Err(EISDIR);
        }
        if dst_dir && !tree.entries(dst)?.is_empty() {
            return Err(ENOTEMPTY);
        }
    }
    if src_dir && tree.is_ancestor(src, rn.parent) {
        return Err(EINVAL);
    }
    tree.move_entry(ro.parent, &ro.name, rn.parent, &rn.name, now)?;
    Ok(0)
}

/// Rename implements Linux syscall rename(2).
pub fn sys_rename(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    rename(k, AT_FDCWD as u64, a[0], AT_FDCWD as u64, a[1], 0)
}

/// Renameat implements Linux syscall renameat(2).
pub fn sys_renameat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    rename(k, a[0], a[1], a[2], a[3], 0)
}

/// Renameat2 implements Linux syscall renameat2(2).
pub fn sys_renameat2(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    rename(k, a[0], a[1], a[2], a[3], a[4])
}

fn link(
    k: &mut Kernel,
    olddir: u64,
    old_va: u64,
    newdir: u64,
    new_va: u64,
    flags: u64,
) -> SysResult<u64> {
    if flags & !(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH) != 0 {
        return Err(EINVAL);
    }
    let src =
        match k.lookup_at_flags(olddir, old_va, flags & AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)? {
            NodeRef::Node(i) => i,
            NodeRef::Console(_) => return Err(EXDEV),
        };
    let src = if flags & AT_SYMLINK_FOLLOW != 0 && k.vfs.tree.node(src)?.is_link() {
        let old = k.read_path(old_va)?;
        k.lookup_at(olddir, &old, true)?
    } else {
        src
    };
    let n = k.vfs.tree.node(src)?;
    if n.file_type() == S_IFDIR {
        return Err(EPERM);
    }
    if matches!(n.kind, Kind::Proc(_)) {
        return Err(EXDEV);
    }
    let new = k.read_path(new_va)?;
    let rn = k.resolve_at(newdir, &new, false)?;
    if rn.ino.is_some() || rn.name.is_empty() {
        return Err(EEXIST);
    }
    if rn.want_dir {
        return Err(ENOENT);
    }
    if k.vfs.tree.is_fixed(rn.parent) {
        return Err(EPERM);
    }
    let now = k.fs_now();
    k.vfs.tree.link_existing(rn.parent, &rn.name, src, now)?;
    Ok(0)
}

/// Link implements Linux syscall link(2).
pub fn sys_link(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    link(k, AT_FDCWD as u64, a[0], AT_FDCWD as u64, a[1], 0)
}

/// Linkat implements Linux syscall linkat(2).
pub fn sys_linkat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    link(k, a[0], a[1], a[2], a[3], a[4])
}

fn symlink(k: &mut Kernel, target_va: u64, dirfd: u64, path_va: u64) -> SysResult<u64> {
    let target = k.read_path(target_va)?;
    if target.is_empty() {
        return Err(ENOENT);
    }
    let path = k.read_path(path_va)?;
    let r = k.resolve_at(dirfd, &path, false)?;
    if r.ino.is_some() || r.name.is_empty() {
        return Err(EEXIST);
    }
    let now = k.fs_now();
    k.vfs.tree.create(
        r.parent,
        &r.name,
        S_IFLNK | 0o777,
        Kind::Symlink(target),
        now,
    )?;
    Ok(0)
}

/// Symlink implements Linux syscall symlink(2).
pub fn sys_symlink(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    symlink(k, a[0], AT_FDCWD as u64, a[1])
}

/// Symlinkat implements Linux syscall symlinkat(2).
pub fn sys_symlinkat(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    symlink(k, a[0], a[1], a[2])
}
