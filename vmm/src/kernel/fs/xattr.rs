//! Extended attributes: the tree keeps none. Reading one gives ENODATA and
//! listing gives an empty list, as on a file system where none was set;
//! setting one gives EOPNOTSUPP, as on a file system without them. The
//! path or descriptor is checked first, as Linux does, so a missing file is
//! still ENOENT and a bad descriptor EBADF.

use super::*;

/// Longest attribute name (Linux's XATTR_NAME_MAX).
const XATTR_NAME_MAX: usize = 255;

/// The node a path-taking call names (`follow`: the last link too).
fn path_node(k: &mut Kernel, path: u64, follow: bool) -> SysResult<()> {
    let path = k.read_path(path)?;
    k.lookup_at(AT_FDCWD as u64, &path, follow)?;
    Ok(())
}

/// The attribute name must be readable and not too long.
fn check_name(k: &mut Kernel, name: u64) -> SysResult<()> {
    let n = k.read_cstr(name, XATTR_NAME_MAX + 1)?;
    if n.is_empty() || n.len() > XATTR_NAME_MAX {
        return Err(ERANGE);
    }
    Ok(())
}

/// Getxattr implements Linux syscall getxattr(2).
/// Partial (getxattr): no extended attributes are kept: ENODATA.
pub fn sys_getxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    path_node(k, a[0], true)?;
    check_name(k, a[1])?;
    Err(ENODATA)
}

/// Lgetxattr implements Linux syscall lgetxattr(2).
/// Partial (lgetxattr): no extended attributes are kept: ENODATA.
pub fn sys_lgetxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    path_node(k, a[0], false)?;
    check_name(k, a[1])?;
    Err(ENODATA)
}

/// Fgetxattr implements Linux syscall fgetxattr(2).
/// Partial (fgetxattr): no extended attributes are kept: ENODATA.
pub fn sys_fgetxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.fd(a[0])?;
    check_name(k, a[1])?;
    Err(ENODATA)
}

/// Listxattr implements Linux syscall listxattr(2).
/// Partial (listxattr): no extended attributes are kept: an empty list.
pub fn sys_listxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    path_node(k, a[0], true)?;
    Ok(0)
}

/// Llistxattr implements Linux syscall llistxattr(2).
/// Partial (llistxattr): no extended attributes are kept: an empty list.
pub fn sys_llistxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    path_node(k, a[0], false)?;
    Ok(0)
}

/// Flistxattr implements Linux syscall flistxattr(2).
/// Partial (flistxattr): no extended attributes are kept: an empty list.
pub fn sys_flistxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.fd(a[0])?;
    Ok(0)
}

/// Setxattr implements Linux syscall setxattr(2).
/// Partial (setxattr): no extended attributes are kept: EOPNOTSUPP.
pub fn sys_setxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    path_node(k, a[0], true)?;
    check_name(k, a[1])?;
    Err(EOPNOTSUPP)
}

/// Lsetxattr implements Linux syscall lsetxattr(2).
/// Partial (lsetxattr): no extended attributes are kept: EOPNOTSUPP.
pub fn sys_lsetxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    path_node(k, a[0], false)?;
    check_name(k, a[1])?;
    Err(EOPNOTSUPP)
}

/// Fsetxattr implements Linux syscall fsetxattr(2).
/// Partial (fsetxattr): no extended attributes are kept: EOPNOTSUPP.
pub fn sys_fsetxattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.fd(a[0])?;
    check_name(k, a[1])?;
    Err(EOPNOTSUPP)
}

/// Removexattr implements Linux syscall removexattr(2).
/// Partial (removexattr): no extended attributes are kept: ENODATA.
pub fn sys_removexattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    path_node(k, a[0], true)?;
    check_name(k, a[1])?;
    Err(ENODATA)
}

/// Lremovexattr implements Linux syscall lremovexattr(2).
/// Partial (lremovexattr): no extended attributes are kept: ENODATA.
pub fn sys_lremovexattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    path_node(k, a[0], false)?;
    check_name(k, a[1])?;
    Err(ENODATA)
}

/// Fremovexattr implements Linux syscall fremovexattr(2).
/// Partial (fremovexattr): no extended attributes are kept: ENODATA.
pub fn sys_fremovexattr(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.fd(a[0])?;
    check_name(k, a[1])?;
    Err(ENODATA)
}
