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

/// The hash of a page of zeros: most of a keyframe's pages (a fresh
/// machine's memory is zero already, so a restore need not read them).
pub fn zero_page_hash() -> PageHash {
    static ZERO: std::sync::OnceLock<PageHash> = std::sync::OnceLock::new();
    *ZERO.get_or_init(|| hash_page(&[0; PAGE_BYTES]))
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
