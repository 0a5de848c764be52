//! What the tree reads of the host (or of a run's recorded view of it,
//! `image::View`): an image directory's entries and a
//! file's bytes, read lazily, and host files put into a shell's tree.

use super::*;
use crate::image::{Seen, View};
use std::path::{Path, PathBuf};

pub(super) enum HostEntry {
    Dir { perm: u32, path: PathBuf },
    File { perm: u32, size: u64, path: PathBuf },
    Symlink(String),
}

impl HostEntry {
    /// What the guest may see of the host's `path`: a directory (but a
    /// Rewind store's), regular file or symbolic link with a UTF-8 target
    /// (as `view` answers).
    pub(super) fn at(view: &View, path: PathBuf) -> Option<HostEntry> {
        Some(match view.lstat(&path)? {
            Seen::Dir { .. } if view.holds_store(&path) => return None,
            Seen::Dir { perm } => HostEntry::Dir { perm, path },
            Seen::File { perm, size } => HostEntry::File { perm, size, path },
            Seen::Symlink(target) => HostEntry::Symlink(target),
        })
    }

    /// Its node as child `name` of directory `parent` (a directory's
    /// entries are read when first needed).
    pub(super) fn node(self, parent: Ino, name: &str, epoch_ns: u64) -> Node {
        match self {
            HostEntry::Dir { perm, path } => {
                let mut n = Node::new(
                    S_IFDIR | perm,
                    4096,
                    epoch_ns,
                    Kind::Dir(DirData {
                        parent,
                        name: name.to_string(),
                        host: Some(path),
                        entries: None,
                        fixed: false,
                    }),
                );
                n.nlink = 2;
                n
            }
            HostEntry::File { perm, size, path } => Node::new(
                S_IFREG | perm,
                size,
                epoch_ns,
                Kind::File(FileData::image(path)),
            ),
            HostEntry::Symlink(target) => symlink_node(&target, epoch_ns),
        }
    }
}

/// The entries of an image directory the guest may see: directories,
/// regular files and symbolic links with UTF-8 names (what the image's hash
/// covers); anything else is left out.
pub(super) fn read_host_dir(view: &View, dir: &Path) -> Vec<(String, HostEntry)> {
    let names = view.listing(dir, || {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut names: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    });
    names
        .into_iter()
        .filter_map(|name| Some((name.clone(), HostEntry::at(view, dir.join(&name))?)))
        .collect()
}

/// A regular file of the image, read whole, or mapped when large (its pages
/// read where something reads them); never follows a link or opens
/// anything but a regular file (a FIFO would block the monitor). With a
/// recorded view, the store's copy (EIO for a file the run never read).
pub(super) fn read_host_file(view: &View, path: &std::path::Path) -> SysResult<FileBytes> {
    if let Some(stored) = view.stored_file(path) {
        return stored.map(FileBytes::Owned).map_err(|()| EIO);
    }
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(host_errno)?;
    let meta = f.metadata().map_err(host_errno)?;
    if !meta.is_file() {
        return Err(EACCES);
    }
    if meta.len() > MAX_FILE {
        return Err(EFBIG);
    }
    let bytes = super::read_whole(&mut f, meta.len()).map_err(host_errno)?;
    view.note_read(path);
    Ok(bytes)
}

fn host_errno(e: std::io::Error) -> Errno {
    match e.kind() {
        std::io::ErrorKind::NotFound => ENOENT,
        std::io::ErrorKind::PermissionDenied => EACCES,
        _ => EIO,
    }
}

impl Tree {
    /// Puts host file `host` at `guest` (a shell's programs: `rewind
    /// shell --with`), making the directories on the way; what is there
    /// already stays.
    pub fn add_host_file(&mut self, guest: &str, host: &Path, now: u64) {
        let size = std::fs::metadata(host).map_or(0, |m| m.len());
        let node = Node::new(
            S_IFREG | 0o755,
            size,
            now,
            Kind::File(FileData::image(host.to_path_buf())),
        );
        self.insert_image_path(guest, node);
        self.outside.insert(host.to_path_buf());
    }

    /// Puts a symbolic link to `target` at `guest`, as `add_host_file`.
    pub fn add_link(&mut self, guest: &str, target: &str, now: u64) {
        self.insert_image_path(guest, symlink_node(target, now));
    }
}
