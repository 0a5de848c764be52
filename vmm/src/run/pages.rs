//! Pages by content: the hash that names a 4 KiB page, and where the
//! kernel gets saved pages back from. The store implements [`PageSource`]
//! (`store::pages::PageStore`); the kernel knows only this trait, so it
//! never depends on the store.

pub const PAGE_BYTES: usize = 4096;

/// A page's BLAKE3, as 32 bytes.
pub type PageHash = [u8; 32];

pub fn hash_page(bytes: &[u8]) -> PageHash {
    *blake3::hash(bytes).as_bytes()
}

pub fn hex(h: &PageHash) -> String {
    blake3::Hash::from_bytes(*h).to_hex().to_string()
}

/// Why a page could not be had.
#[derive(Debug, thiserror::Error)]
#[error("page {hash}: {why}")]
pub struct PageError {
    pub hash: String,
    pub why: String,
}

/// Where saved pages come back from (keyframe pages, file contents).
pub trait PageSource {
    /// The page with this hash, checked against it.
    fn page(&self, h: &PageHash) -> Result<Vec<u8>, PageError>;
}
