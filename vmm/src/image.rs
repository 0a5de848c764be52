//! The root image: how guest paths resolve to host files, and its hash.
//!
//! Without `--root` the image is the program file alone, at its own path.
//! With `--root DIR` a guest path `/p` is `DIR/p`. Files are read from the
//! host only when the guest opens them; the hash covers every file's path,
//! mode and contents so that a changed image gives a different run id.

use crate::EngineError;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub enum Image {
    /// The program file alone, seen by the guest at `guest_path`.
    Program {
        guest_path: String,
        host_path: PathBuf,
    },
    /// A directory tree that is the guest's `/`.
    Root { dir: PathBuf },
}

impl Image {
    /// The host file behind an absolute, normalized guest path, if any.
    pub fn host_path(&self, guest: &str) -> Option<PathBuf> {
        match self {
            Image::Program {
                guest_path,
                host_path,
            } => (guest == guest_path).then(|| host_path.clone()),
            Image::Root { dir } => {
                let rel = guest.trim_start_matches('/');
                if rel.split('/').any(|c| c == "..") {
                    return None;
                }
                Some(if rel.is_empty() {
                    dir.clone()
                } else {
                    dir.join(rel)
                })
            }
        }
    }

    /// BLAKE3 over every file of the image: path, mode, contents, in path order.
    pub fn hash(&self) -> Result<String, EngineError> {
        let mut h = blake3::Hasher::new();
        match self {
            Image::Program {
                guest_path,
                host_path,
            } => hash_file(&mut h, guest_path, host_path)?,
            Image::Root { dir } => hash_tree(&mut h, dir, "")?,
        }
        Ok(h.finalize().to_hex().to_string())
    }
}

fn hash_file(h: &mut blake3::Hasher, guest: &str, host: &Path) -> Result<(), EngineError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(host).map_err(EngineError::io(host))?;
    h.update(guest.as_bytes());
    h.update(&[0]);
    h.update(&meta.permissions().mode().to_le_bytes());
    let mut f = std::fs::File::open(host).map_err(EngineError::io(host))?;
    h.update_reader(&mut f).map_err(EngineError::io(host))?;
    Ok(())
}

fn hash_tree(h: &mut blake3::Hasher, dir: &Path, guest: &str) -> Result<(), EngineError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(EngineError::io(dir))?
        .collect::<Result<_, _>>()
        .map_err(EngineError::io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let gpath = format!("{guest}/{name}");
        let ft = e.file_type().map_err(EngineError::io(e.path()))?;
        if ft.is_dir() {
            h.update(gpath.as_bytes());
            h.update(b"/\0");
            hash_tree(h, &e.path(), &gpath)?;
        } else if ft.is_symlink() {
            let target = std::fs::read_link(e.path()).map_err(EngineError::io(e.path()))?;
            h.update(gpath.as_bytes());
            h.update(b"@\0");
            h.update(target.as_os_str().as_encoded_bytes());
        } else if ft.is_file() {
            hash_file(h, &gpath, &e.path())?;
        }
    }
    Ok(())
}
