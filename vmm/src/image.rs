//! The root image: how guest paths resolve to host files, and its hash.
//!
//! Without `--root` the image is the program file at its own path and, for
//! a dynamically linked program, its interpreter and the libraries it needs
//! (`deps`, found by [`linked_files`] as the host's loader would find them),
//! at their paths, with the symbolic links met on the way; a static
//! program's image is the program alone, so its hash is what it always was.
//! With `--root DIR` a guest path `/p` is `DIR/p`, with symbolic links
//! resolved inside DIR (an absolute target or a `..` past the top stays in
//! it). Files are read from the host only when the guest opens them; the
//! hash covers every file's path, mode and contents (a root's files by
//! their own hashes, kept between runs by [`FileHashes`]) so that a changed
//! image gives a different run id. What the guest never sees is left out of it:
//! `/dev`, `/proc` and `/sys` (the monitor's own), and anything that is not a
//! directory, regular file or symbolic link, or whose name is not UTF-8.

use crate::EngineError;
use bytes::FileBytes;
use std::path::{Path, PathBuf};

pub mod bytes;
mod cache;
mod host_map;
mod linked;
mod view;
mod walk;
pub use cache::{Digest, FileHashes, Progress, RACY_MARGIN};
pub use linked::{dyn_info, linked_files, DynInfo, LinkError};
pub use view::{stored_path, Recorded, Seen, Sight, View, VIEW_VERSION};

/// Top-level directories of a root the monitor replaces with its own.
pub const HIDDEN_TOP: &[&str] = &["dev", "proc", "sys"];

/// The file that marks a directory as a Rewind store (its home). A root
/// image leaves such a directory out, below its top: the guest does not
/// see it and the image's identity does not cover it, so a run over a tree
/// that holds the store it is recorded into (`--root /`) neither reads the
/// store's own churn on every walk nor gets a new id because the last run
/// was written there.
pub const STORE_MARKER: &str = "REWIND-STORE.TAG";

/// Symbolic links followed in one lookup before ELOOP (Linux's MAXSYMLINKS),
/// here and in the guest's file system.
pub const MAX_SYMLINKS: u32 = 40;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Image {
    /// The program file alone, seen by the guest at `guest_path`.
    Program {
        guest_path: String,
        host_path: PathBuf,
        /// What a dynamically linked program needs beside it (empty for a
        /// static one), in guest path order. Always written: keyframes
        /// save the image in postcard, which has no field names, so a
        /// skipped field shifts everything after it.
        #[serde(default)]
        deps: Vec<Dep>,
    },
    /// A directory tree that is the guest's `/`, and where the answers
    /// about it come from (not saved: a restore gets its inputs' view).
    Root {
        dir: PathBuf,
        #[serde(skip)]
        view: View,
    },
    /// A Nix build's: the store paths of a derivation's input closure at
    /// their `/nix/store` paths, and an empty build directory. Its identity
    /// is the paths' names, which are already hashes of what they hold, so
    /// nothing is read to hash it.
    Store(StoreImage),
}

/// The image of a Nix build (see `Image::Store`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoreImage {
    /// The derivation the run builds (`/nix/store/...drv`).
    pub drv: String,
    /// The closure's store paths (`/nix/store/<hash>-<name>`), sorted.
    pub paths: Vec<String>,
    /// The build's directory (`NIX_BUILD_TOP`), empty at the start.
    pub build_dir: String,
    /// The host directory the guest's `/` is, for the store paths: `/` on
    /// the host that built it, an imported run's image directory elsewhere.
    /// Not part of the identity.
    pub host_root: PathBuf,
}

impl StoreImage {
    /// The store path `guest` is inside (or is), if it is one of the image's.
    pub fn path_of(&self, guest: &str) -> Option<&str> {
        let rest = guest.strip_prefix(STORE_DIR)?.strip_prefix('/')?;
        let name = rest.split('/').next()?;
        let at = self
            .paths
            .binary_search_by(|p| p[STORE_DIR.len() + 1..].cmp(name))
            .ok()?;
        Some(&self.paths[at])
    }

    /// The host path behind a guest path inside one of the store paths.
    fn host(&self, guest: &str) -> PathBuf {
        self.host_root.join(guest.trim_start_matches('/'))
    }
}

/// Where Nix keeps its store, in the guest as on the host.
pub const STORE_DIR: &str = "/nix/store";

/// One more file of a program's image: a library, the interpreter, or a
/// symbolic link on the way to one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Dep {
    /// Its absolute guest path (the host's path).
    pub guest: String,
    pub kind: DepKind,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DepKind {
    /// A regular file, read from this host path.
    File { host: PathBuf },
    /// A symbolic link with this target.
    Symlink { target: String },
}

impl Image {
    /// The image of the host program at `host` (an absolute, resolved path,
    /// which is also its guest path): with its interpreter and libraries
    /// when it is dynamically linked.
    pub fn program(host: PathBuf) -> Result<Image, LinkError> {
        let deps = linked_files(&host)?;
        Ok(Image::Program {
            guest_path: host.to_string_lossy().into_owned(),
            host_path: host,
            deps,
        })
    }

    /// A root image of `dir`, read from the host.
    pub fn root(dir: PathBuf) -> Image {
        Image::Root {
            dir,
            view: View::Host,
        }
    }

    /// Where a root image's answers come from (the host for other images).
    pub fn view(&self) -> &View {
        static HOST: View = View::Host;
        match self {
            Image::Root { view, .. } => view,
            _ => &HOST,
        }
    }

    /// This image with answers from `view` (a root image's; others as they are).
    pub fn with_view(mut self, new: View) -> Image {
        self.set_view(new);
        self
    }

    /// Makes `new` where a root image's answers come from.
    pub fn set_view(&mut self, new: View) {
        if let Image::Root { view, .. } = self {
            *view = new;
        }
    }

    /// The bytes of host file `host` of the image (a recorded view's copy).
    pub fn read_file(&self, host: &Path) -> std::io::Result<FileBytes> {
        let view = self.view();
        if let Some(stored) = view.stored_file(host) {
            return stored.map(FileBytes::Owned).map_err(|()| {
                std::io::Error::other("the recorded run never read this file of its root")
            });
        }
        // Mapped when large: a big program is read where it is used.
        let bytes = bytes::read_path(host)?;
        view.note_read(host);
        Ok(bytes)
    }

    /// The host file behind an absolute guest path, if any: with a root,
    /// symbolic links on the way are followed inside it (the result may not
    /// exist; it is never outside the root).
    pub fn host_path(&self, guest: &str) -> Option<PathBuf> {
        match self {
            Image::Program {
                guest_path,
                host_path,
                deps,
            } => {
                let link = |p: &str| {
                    deps.iter()
                        .find(|d| d.guest == p)
                        .and_then(|d| match &d.kind {
                            DepKind::Symlink { target } => Some(target.clone()),
                            DepKind::File { .. } => None,
                        })
                };
                let path = resolve_links(guest, |p| Ok(link(p)))?;
                if path == *guest_path {
                    return Some(host_path.clone());
                }
                deps.iter()
                    .find(|d| d.guest == path)
                    .and_then(|d| match &d.kind {
                        DepKind::File { host } => Some(host.clone()),
                        DepKind::Symlink { .. } => None,
                    })
            }
            Image::Root { dir, view } => resolve_in_root(dir, guest, view),
            Image::Store(s) => {
                // Links inside the closure are read from the host; nothing
                // outside it is the image's.
                let path = resolve_links(guest, |p| {
                    if s.path_of(p).is_none() {
                        return Ok(None);
                    }
                    match std::fs::symlink_metadata(s.host(p)) {
                        Ok(m) if m.file_type().is_symlink() => {
                            let t = std::fs::read_link(s.host(p)).map_err(|_| ())?;
                            Ok(Some(t.to_str().ok_or(())?.to_string()))
                        }
                        _ => Ok(None),
                    }
                })?;
                s.path_of(&path)?;
                Some(s.host(&path))
            }
        }
    }

    /// BLAKE3 over every file of the image: path, mode, contents (a root's
    /// files by their own BLAKE3), in path order.
    pub fn hash(&self) -> Result<String, EngineError> {
        self.hash_with(&FileHashes::none())
    }

    /// [`Image::hash`], a root's files' hashes taken from `cache` when
    /// they did not change (and kept in it when they did); a program
    /// image's hash likewise, by what `stat` says of each of its files.
    pub fn hash_with(&self, cache: &FileHashes) -> Result<String, EngineError> {
        let mut h = blake3::Hasher::new();
        match self {
            Image::Program {
                guest_path,
                host_path,
                deps,
            } => return program_hash_with(cache, guest_path, host_path, deps),
            Image::Root { dir, .. } => walk::hash_tree(&mut h, cache, dir)?,
            Image::Store(s) => {
                h.update(b"nix store\0");
                for p in std::iter::once(&s.drv).chain(&s.paths) {
                    h.update(p.as_bytes());
                    h.update(&[0]);
                }
                h.update(s.build_dir.as_bytes());
            }
        }
        Ok(h.finalize().to_hex().to_string())
    }
}

/// A program image's hash: every file's path, mode and bytes in one
/// stream, as it always was (a run id must not change with the version
/// that records it), so reading every byte. When `cache` kept the hash for
/// the files as `stat` shows them now (device, inode, size, times, mode),
/// none is read: node's 98 MB program cost 45-57 ms of CPU a run.
fn program_hash_with(
    cache: &FileHashes,
    guest_path: &str,
    host_path: &Path,
    deps: &[Dep],
) -> Result<String, EngineError> {
    let read_at = std::time::SystemTime::now();
    let files = || {
        std::iter::once((guest_path, Ok(host_path))).chain(deps.iter().map(|d| match &d.kind {
            DepKind::File { host } => (d.guest.as_str(), Ok(host.as_path())),
            DepKind::Symlink { target } => (d.guest.as_str(), Err(target.as_str())),
        }))
    };
    let before = files_digest(cache, files(), read_at);
    if let Some(kept) = before.and_then(|(d, _)| cache.known_digest(&d)) {
        return Ok(blake3::Hash::from_bytes(kept).to_hex().to_string());
    }
    let mut h = blake3::Hasher::new();
    // Nothing more for a static program: its hash stays the same.
    for (guest, file) in files() {
        match file {
            Ok(host) => hash_file(&mut h, guest, host)?,
            Err(target) => hash_link(&mut h, guest, target),
        }
    }
    let hash = h.finalize();
    // Kept when every file had settled and none moved while it was read.
    if let Some((digest, true)) = before {
        if files_digest(cache, files(), read_at).map(|(d, _)| d) == Some(digest) {
            cache.keep_digest(&digest, *hash.as_bytes());
        }
    }
    Ok(hash.to_hex().to_string())
}

/// What names the files as they stand: each path, and `stat`'s device,
/// inode, size, times and mode of its file (a link's target for a link);
/// with whether every file settled before `read_at`. None when one cannot
/// be looked at (hashing them says why, or leaves a removed one out).
fn files_digest<'a>(
    cache: &FileHashes,
    files: impl Iterator<Item = (&'a str, Result<&'a Path, &'a str>)>,
    read_at: std::time::SystemTime,
) -> Option<(Digest, bool)> {
    use std::os::unix::fs::MetadataExt;
    let mut h = blake3::Hasher::new();
    h.update(b"program image files\0");
    let mut settled = true;
    for (guest, file) in files {
        h.update(guest.as_bytes());
        match file {
            Ok(host) => {
                let m = std::fs::metadata(host).ok()?;
                settled &= cache.settled(&m, read_at);
                h.update(b"\0");
                for w in [m.dev(), m.ino(), m.size(), u64::from(m.mode())] {
                    h.update(&w.to_le_bytes());
                }
                for w in [m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec()] {
                    h.update(&w.to_le_bytes());
                }
            }
            Err(target) => {
                h.update(b"@\0");
                h.update(target.as_bytes());
                h.update(b"\0");
            }
        }
    }
    let mut digest = [0; 40];
    h.finalize_xof().fill(&mut digest);
    Some((digest, settled))
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
    let mut f = match std::fs::File::open(host) {
        // Removed since its directory was listed: a live tree (--root /) moves.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        r => r.map_err(EngineError::io(host))?,
    };
    let meta = f.metadata().map_err(EngineError::io(host))?;
    hash_entry_head(h, guest, meta.permissions().mode());
    // Mapped when large: hashed from the page cache, no copy.
    let bytes = bytes::read_whole(&mut f, meta.len()).map_err(EngineError::io(host))?;
    h.update(&bytes);
    Ok(())
}

/// `r`, or None when what it looked at was removed meanwhile.
fn unless_gone<T>(r: std::io::Result<T>, at: &Path) -> Result<Option<T>, EngineError> {
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        r => r.map(Some).map_err(EngineError::io(at)),
    }
}

/// A symbolic link's entry in an image hash.
fn hash_link(h: &mut blake3::Hasher, guest: &str, target: &str) {
    h.update(guest.as_bytes());
    h.update(b"@\0");
    h.update(target.as_bytes());
}

/// `guest` under `root`, following symbolic links as the guest would see
/// them: relative to their directory, absolute ones from `root`, `..` never
/// above `root`. None for a loop.
fn resolve_in_root(root: &Path, guest: &str, view: &View) -> Option<PathBuf> {
    let path = resolve_links(guest, |p| {
        match view.lstat(&root.join(p.trim_start_matches('/'))) {
            Some(Seen::Symlink(t)) => Ok(Some(t)),
            _ => Ok(None),
        }
    })?;
    Some(root.join(path.trim_start_matches('/')))
}

/// The absolute path `guest` names once every symbolic link on the way is
/// followed, `link(p)` giving the target of the link at absolute path `p`
/// (None: not a link; Err: unreadable). `..` never goes above `/`. None for
/// a loop or an unreadable link.
pub fn resolve_links(
    guest: &str,
    link: impl Fn(&str) -> Result<Option<String>, ()>,
) -> Option<String> {
    // Components still to walk, last first; and the resolved ones.
    let mut todo: Vec<String> = guest.split('/').rev().map(str::to_string).collect();
    let mut done: Vec<String> = Vec::new();
    let mut links = 0;
    while let Some(c) = todo.pop() {
        match c.as_str() {
            "" | "." => {}
            ".." => {
                done.pop();
            }
            name => {
                let p = format!(
                    "/{}",
                    [done.as_slice(), &[name.to_string()]].concat().join("/")
                );
                match link(&p).ok()? {
                    Some(target) => {
                        links += 1;
                        if links > MAX_SYMLINKS {
                            return None;
                        }
                        if target.starts_with('/') {
                            done.clear();
                        }
                        todo.extend(target.split('/').rev().map(str::to_string));
                    }
                    None => done.push(name.to_string()),
                }
            }
        }
    }
    Some(format!("/{}", done.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_survives_a_keyframe_encoding_with_and_without_libraries() {
        let lib = Dep {
            guest: "/lib/libc.so.6".into(),
            kind: DepKind::Symlink {
                target: "libc-2.so".into(),
            },
        };
        for deps in [Vec::new(), vec![lib]] {
            let image = Image::Program {
                guest_path: "/examples/prog".into(),
                host_path: "/tmp/prog".into(),
                deps,
            };
            // A field after the image, as in a saved kernel state.
            let bytes = postcard::to_allocvec(&(&image, "after")).unwrap();
            let back: (Image, String) = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(back, (image, "after".to_string()));
        }
    }

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
            deps: Vec::new(),
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
        let img = Image::root(root.clone());
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
