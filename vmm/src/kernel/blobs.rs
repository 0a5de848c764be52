//! Large byte strings of the kernel's state (the overlay's files, standard
//! input) kept out of keyframes: while a keyframe is being saved they go
//! into the shared page store, 4 KiB pages by BLAKE3, and the keyframe keeps
//! their hashes; while one is being restored they come back from it. Outside
//! a keyframe they are saved inline.

use crate::run::pages::{hash_page, PageHash, PageSource, PAGE_BYTES};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;

/// Byte strings shorter than this stay inline: a page costs a file.
const INLINE_MAX: usize = PAGE_BYTES;

#[derive(Serialize, Deserialize)]
pub enum Stored {
    Inline(Vec<u8>),
    Pages { len: u64, pages: Vec<PageHash> },
}

/// What saving collects: the pages not sent before, the hashes sent so
/// far, and every page the state refers to.
struct Sink {
    new: Vec<(PageHash, Vec<u8>)>,
    sent: HashSet<PageHash>,
    referenced: Vec<PageHash>,
}

/// Pages a saved state produced.
pub struct Saved {
    /// Not given to the recorder before.
    pub new: Vec<(PageHash, Vec<u8>)>,
    /// Every page the state refers to (for `rewind gc`).
    pub referenced: Vec<PageHash>,
}

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
    static SOURCE: RefCell<Option<Rc<dyn PageSource>>> = const { RefCell::new(None) };
}

/// Runs `f` (which serializes kernel state) with large byte strings going
/// to pages; returns its result and the pages not in `sent` yet.
pub fn saving<R>(sent: &mut HashSet<PageHash>, f: impl FnOnce() -> R) -> (R, Saved) {
    SINK.with(|s| {
        *s.borrow_mut() = Some(Sink {
            new: Vec::new(),
            sent: std::mem::take(sent),
            referenced: Vec::new(),
        })
    });
    let r = f();
    let sink = SINK.with(|s| s.borrow_mut().take()).expect("set above");
    *sent = sink.sent;
    let mut referenced = sink.referenced;
    referenced.sort();
    referenced.dedup();
    (
        r,
        Saved {
            new: sink.new,
            referenced,
        },
    )
}

/// Runs `f` (which deserializes kernel state) with pages read from `store`.
pub fn restoring<P: PageSource + Clone + 'static, R>(store: &P, f: impl FnOnce() -> R) -> R {
    SOURCE.with(|s| *s.borrow_mut() = Some(Rc::new(store.clone())));
    let r = f();
    SOURCE.with(|s| *s.borrow_mut() = None);
    r
}

pub fn save(bytes: &[u8]) -> Stored {
    save_over(bytes, INLINE_MAX)
}

/// A copy of one page (`races::PageCopy`): in pages whenever a keyframe is
/// being saved, since a run keeps many and most are the same from one
/// keyframe to the next.
pub fn save_page(bytes: &[u8]) -> Stored {
    save_over(bytes, 0)
}

fn save_over(bytes: &[u8], inline_max: usize) -> Stored {
    SINK.with(|s| {
        let mut s = s.borrow_mut();
        let Some(sink) = s.as_mut().filter(|_| bytes.len() > inline_max) else {
            return Stored::Inline(bytes.to_vec());
        };
        let pages = bytes
            .chunks(PAGE_BYTES)
            .map(|c| {
                let mut page = c.to_vec();
                page.resize(PAGE_BYTES, 0);
                let h = hash_page(&page);
                sink.referenced.push(h);
                if sink.sent.insert(h) {
                    sink.new.push((h, page));
                }
                h
            })
            .collect();
        Stored::Pages {
            len: bytes.len() as u64,
            pages,
        }
    })
}

/// Why saved byte strings cannot be loaded back.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("file contents in pages, but no page store")]
    NoStore,
    #[error("file of {len} bytes longer than its {pages} pages")]
    TooLong { len: u64, pages: usize },
    #[error("file contents: {0}")]
    Page(String),
}

pub fn load(stored: Stored) -> Result<Vec<u8>, BlobError> {
    match stored {
        Stored::Inline(b) => Ok(b),
        Stored::Pages { len, pages } => SOURCE.with(|s| {
            let s = s.borrow();
            let store = s.as_ref().ok_or(BlobError::NoStore)?;
            if len > pages.len() as u64 * PAGE_BYTES as u64 {
                return Err(BlobError::TooLong {
                    len,
                    pages: pages.len(),
                });
            }
            let mut out = Vec::with_capacity(len as usize);
            for h in &pages {
                out.extend(store.page(h).map_err(|e| BlobError::Page(e.to_string()))?);
            }
            out.truncate(len as usize);
            Ok(out)
        }),
    }
}
