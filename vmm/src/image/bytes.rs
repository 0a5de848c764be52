//! A regular file's bytes in the tree: owned by the monitor, or, for a
//! large file of the image, the host file mapped read-only, so that only
//! the pages something reads are read (the JVM's 128 MB `lib/modules` of
//! which it touches a few MB, node's 98 MB binary).

pub use super::host_map::HostMap;
use std::fmt;
use std::ops::Deref;

/// Image files at least this large are mapped rather than read whole.
pub const MAP_AT_LEAST: u64 = 1 << 20;

/// A file's contents: `Deref`s to its bytes.
pub enum FileBytes {
    Owned(Vec<u8>),
    Mapped(HostMap),
}

impl FileBytes {
    pub fn as_slice(&self) -> &[u8] {
        self
    }

    /// The bytes as a vector the caller may change (a mapped file's are
    /// copied first: the overlay owns them from then on).
    pub fn vec_mut(&mut self) -> &mut Vec<u8> {
        if let FileBytes::Mapped(m) = self {
            *self = FileBytes::Owned(m.to_vec());
        }
        match self {
            FileBytes::Owned(v) => v,
            FileBytes::Mapped(_) => unreachable!("copied above"),
        }
    }
}

impl Default for FileBytes {
    fn default() -> FileBytes {
        FileBytes::Owned(Vec::new())
    }
}

impl From<Vec<u8>> for FileBytes {
    fn from(v: Vec<u8>) -> FileBytes {
        FileBytes::Owned(v)
    }
}

impl Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Owned(v) => v,
            FileBytes::Mapped(m) => m,
        }
    }
}

impl AsRef<[u8]> for FileBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

/// A copy is owned (`Arc::make_mut` of shared bytes).
impl Clone for FileBytes {
    fn clone(&self) -> FileBytes {
        FileBytes::Owned(self.to_vec())
    }
}

impl fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match self {
            FileBytes::Owned(_) => "owned",
            FileBytes::Mapped(_) => "mapped",
        };
        write!(f, "FileBytes({how}, {} bytes)", self.len())
    }
}

/// The bytes of open regular file `f`, `len` long: mapped when large,
/// else read.
pub fn read_whole(f: &mut std::fs::File, len: u64) -> std::io::Result<FileBytes> {
    use std::io::Read;
    if len >= MAP_AT_LEAST {
        if let Some(m) = usize::try_from(len).ok().and_then(|n| HostMap::new(f, n)) {
            return Ok(FileBytes::Mapped(m));
        }
    }
    let mut v = Vec::with_capacity(len.min(1 << 30) as usize);
    f.read_to_end(&mut v)?;
    Ok(FileBytes::Owned(v))
}

/// The bytes of host file `path` (`read_whole`), as `std::fs::read`.
pub fn read_path(path: &std::path::Path) -> std::io::Result<FileBytes> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    read_whole(&mut f, len)
}
