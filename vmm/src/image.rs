//! The root image: how guest paths resolve to host files, and its hash.
//!
//! Without `--root` the image is the program file alone, at its own path.
//! With `--root DIR` a guest path `/p` is `DIR/p`, with symbolic links
//! resolved inside DIR (an absolute target or a `..` past the top stays in
//! it). Files are read from the host only when the guest opens them; the
//! hash covers every file's path, mode and contents so that a changed image
//! gives a different run id. What the guest never sees is left out of it:
//! `/dev`, `/proc` and `/sys` (the monitor's own), and anything that is not a
//! directory, regular file or symbolic link, or whose name is not UTF-8.

use crate::EngineError;
use std::path::{Path, PathBuf};

/// Top-level directories of a root the monitor replaces with its own.
pub const HIDDEN_TOP: &[&str] = &["dev", "proc", "sys"];

use crate::kernel::fs::vfs::MAX_SYMLINKS;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// The host file behind an absolute guest path, if any: with a root,
    /// symbolic links on the way are followed inside it (the result may not
    /// exist; it is never outside the root).
    pub fn host_path(&self, guest: &str) -> Option<PathBuf> {
        match self {
            Image::Program {
                guest_path,
                host_path,
            } => (guest == guest_path).then(|| host_path.clone()),
            Image::Root { dir } => resolve_in_root(dir, guest),
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

/// The hash [`Image::hash`] gives an `Image::Program` whose file has these
/// `bytes` and this `mode` (`st_mode`, file type included), without the file.
pub fn program_hash(guest_path: &str, mode: u32, bytes: &[u8]) -> String {
    let mut h = blake3::Hasher::new();
    hash_entry_head(&mut h, guest_path, mode);
    h.update(bytes);
    h.finalize().to_hex().to_string()
}

/// What comes before a file's contents in an image hash: its path and mode.
fn hash_entry_head(h: &mut blake3::Hasher, guest: &str, mode: u32) {
    h.update(guest.as_bytes());
    h.update(&[0]);
    h.update(&mode.to_le_bytes());
}

fn hash_file(h: &mut blake3::Hasher, guest: &str, host: &Path) -> Result<(), EngineError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(host).map_err(EngineError::io(host))?;
    hash_entry_head(h, guest, meta.permissions().mode());
    let mut f = std::fs::File::open(host).map_err(EngineError::io(host))?;
    h.update_reader(&mut f).map_err(EngineError::io(host))?;
    Ok(())
}

/// `guest` under `root`, following symbolic links as the guest would see
/// them: relative to their directory, absolute ones from `root`, `..` never
/// above `root`. None for a loop.
fn resolve_in_root(root: &Path, guest: &str) -> Option<PathBuf> {
    // Components still to walk, last first; and the resolved ones.
    let mut todo: Vec<String> = guest.split('/').rev().map(str::to_string).collect();
    let mut done: Vec<String> = Vec::new();
    let mut links = 0;
    let here = |done: &[String]| {
        let mut p = root.to_path_buf();
        p.extend(done);
        p
    };
    while let Some(c) = todo.pop() {
        match c.as_str() {
            "" | "." => {}
            ".." => {
                done.pop();
            }
            name => {
                let p = here(&done).join(name);
                match std::fs::symlink_metadata(&p) {
                    Ok(m) if m.file_type().is_symlink() => {
                        links += 1;
                        if links > MAX_SYMLINKS {
                            return None;
                        }
                        let target = std::fs::read_link(&p).ok()?;
                        let target = target.to_str()?;
                        if target.starts_with('/') {
                            done.clear();
                        }
                        todo.extend(target.split('/').rev().map(str::to_string));
                    }
                    _ => done.push(name.to_string()),
                }
            }
        }
    }
    Some(here(&done))
}

fn hash_tree(h: &mut blake3::Hasher, dir: &Path, guest: &str) -> Result<(), EngineError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(EngineError::io(dir))?
        .collect::<Result<_, _>>()
        .map_err(EngineError::io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            continue; // the guest cannot name it
        };
        if guest.is_empty() && HIDDEN_TOP.contains(&name) {
            continue;
        }
        let gpath = format!("{guest}/{name}");
        let ft = e.file_type().map_err(EngineError::io(e.path()))?;
        if ft.is_dir() {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::symlink_metadata(e.path()).map_err(EngineError::io(e.path()))?;
            h.update(gpath.as_bytes());
            h.update(b"/\0");
            h.update(&meta.permissions().mode().to_le_bytes());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_hashes_the_same_from_its_bytes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rewind-image-hash-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("prog");
        std::fs::write(&file, b"\x7fELF bytes").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        let image = Image::Program {
            guest_path: "/examples/prog".into(),
            host_path: file,
        };
        let want = image.hash().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            program_hash("/examples/prog", 0o100755, b"\x7fELF bytes"),
            want
        );
        assert_ne!(
            program_hash("/examples/prog", 0o100644, b"\x7fELF bytes"),
            want
        );
    }

    #[test]
    fn links_resolve_inside_the_root() {
        let root = std::env::temp_dir().join(format!("rewind-image-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::fs::write(root.join("usr/bin/tool"), b"x").unwrap();
        std::os::unix::fs::symlink("/usr/bin", root.join("bin")).unwrap();
        std::os::unix::fs::symlink("../../../../..", root.join("usr/up")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        let img = Image::Root { dir: root.clone() };
        assert_eq!(img.host_path("/bin/tool"), Some(root.join("usr/bin/tool")));
        assert_eq!(
            img.host_path("/usr/up/bin/tool"),
            Some(root.join("usr/bin/tool"))
        );
        assert_eq!(
            img.host_path("/../../etc/passwd"),
            Some(root.join("etc/passwd"))
        );
        assert_eq!(img.host_path("/"), Some(root.clone()));
        assert_eq!(img.host_path("/loop"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
