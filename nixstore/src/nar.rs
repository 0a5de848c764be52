//! The NAR serialisation of a file tree (Nix's archive format, what a
//! store path's hash is taken over) and its SHA-256.
//!
//! A NAR is a sequence of strings, each its length as a little-endian u64
//! then its bytes padded with zeros to a multiple of 8: `nix-archive-1`,
//! then the root node. A node is `(`, `type`, then `regular` with an
//! optional `executable` `""` and `contents` BYTES; or `symlink` `target`
//! TARGET; or `directory` with one `entry` `(` `name` NAME `node` NODE `)`
//! per entry in byte order of the names; then `)`. Nothing else of a file
//! (times, owners, other permission bits) is in it.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// A file tree as a NAR holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File {
        executable: bool,
        contents: Vec<u8>,
    },
    Symlink(Vec<u8>),
    /// Entries by name (`BTreeMap`'s order is the bytes' order NAR wants).
    Directory(BTreeMap<Vec<u8>, Entry>),
}

/// A NAR's SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NarHash(pub [u8; 32]);

impl NarHash {
    /// `sha256:<base-32>`, as `nix path-info` and `.narinfo` files write it.
    pub fn to_nix(&self) -> String {
        format!("sha256:{}", crate::base32::encode(&self.0))
    }

    /// A SHA-256 as Nix writes it: `sha256:` then base-32 or hex, or SRI
    /// (`sha256-<base64>`). None for anything else.
    pub fn parse(s: &str) -> Option<NarHash> {
        use base64::Engine;
        let bytes = if let Some(b64) = s.strip_prefix("sha256-") {
            base64::engine::general_purpose::STANDARD.decode(b64).ok()?
        } else {
            let h = s.strip_prefix("sha256:")?;
            match h.len() {
                64 => (0..32)
                    .map(|i| u8::from_str_radix(h.get(2 * i..2 * i + 2)?, 16).ok())
                    .collect::<Option<Vec<u8>>>()?,
                _ => crate::base32::decode(h, 32)?,
            }
        };
        Some(NarHash(bytes.try_into().ok()?))
    }
}

impl std::fmt::Display for NarHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_nix())
    }
}

fn put(w: &mut impl Write, s: &[u8]) -> io::Result<()> {
    w.write_all(&(s.len() as u64).to_le_bytes())?;
    w.write_all(s)?;
    let pad = (8 - s.len() % 8) % 8;
    w.write_all(&[0u8; 8][..pad])
}

/// Writes `entry`'s NAR to `w`.
pub fn write(entry: &Entry, w: &mut impl Write) -> io::Result<()> {
    put(w, b"nix-archive-1")?;
    write_node(entry, w)
}

fn write_node(entry: &Entry, w: &mut impl Write) -> io::Result<()> {
    put(w, b"(")?;
    put(w, b"type")?;
    match entry {
        Entry::File {
            executable,
            contents,
        } => {
            put(w, b"regular")?;
            if *executable {
                put(w, b"executable")?;
                put(w, b"")?;
            }
            put(w, b"contents")?;
            put(w, contents)?;
        }
        Entry::Symlink(target) => {
            put(w, b"symlink")?;
            put(w, b"target")?;
            put(w, target)?;
        }
        Entry::Directory(entries) => {
            put(w, b"directory")?;
            for (name, e) in entries {
                put(w, b"entry")?;
                put(w, b"(")?;
                put(w, b"name")?;
                put(w, name)?;
                put(w, b"node")?;
                write_node(e, w)?;
                put(w, b")")?;
            }
        }
    }
    put(w, b")")
}

/// The SHA-256 of `entry`'s NAR.
pub fn nar_hash(entry: &Entry) -> NarHash {
    let mut h = Sha256::new();
    write(entry, &mut h).expect("hashing does not fail");
    NarHash(h.finalize().into())
}

/// The tree at a host path, as `nix-store --dump` reads it: a regular
/// file is executable when its owner may execute it; anything but a
/// directory, regular file or symbolic link is an error.
pub fn from_host(path: &Path) -> io::Result<Entry> {
    let meta = std::fs::symlink_metadata(path)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Ok(Entry::Symlink(
            std::fs::read_link(path)?.as_os_str().as_bytes().to_vec(),
        ));
    }
    if ft.is_file() {
        return Ok(Entry::File {
            executable: meta.permissions().mode() & 0o100 != 0,
            contents: std::fs::read(path)?,
        });
    }
    if !ft.is_dir() {
        return Err(io::Error::other(format!(
            "{}: not a file, directory or link",
            path.display()
        )));
    }
    let mut entries = BTreeMap::new();
    for e in std::fs::read_dir(path)? {
        let e = e?;
        entries.insert(e.file_name().as_bytes().to_vec(), from_host(&e.path())?);
    }
    Ok(Entry::Directory(entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_padded_to_eight_bytes() {
        let mut out = Vec::new();
        write(
            &Entry::File {
                executable: false,
                contents: b"hi\n".to_vec(),
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(out.len() % 8, 0);
        assert_eq!(&out[..8], &13u64.to_le_bytes());
        assert_eq!(&out[8..21], b"nix-archive-1");
        assert_eq!(&out[21..24], &[0, 0, 0]);
        // The contents: length 3, the bytes, five zeros, then ")".
        let tail = &out[out.len() - 32..];
        assert_eq!(&tail[..8], &3u64.to_le_bytes());
        assert_eq!(&tail[8..16], b"hi\n\0\0\0\0\0");
    }

    #[test]
    fn hashes_parse_in_every_form_nix_writes() {
        let h = NarHash([7; 32]);
        assert_eq!(NarHash::parse(&h.to_nix()), Some(h));
        let hex: String = h.0.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(NarHash::parse(&format!("sha256:{hex}")), Some(h));
        assert_eq!(
            NarHash::parse("sha256-BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="),
            Some(h)
        );
        assert_eq!(NarHash::parse("md5:abc"), None);
        assert_eq!(NarHash::parse("sha256:xyz"), None);
    }
}
