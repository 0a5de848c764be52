//! A keyframe as a record of version 3 lays it out: its page list whole,
//! or as the pages set and gone since the record before it. A run whose
//! memory is large then writes its page list once in a while instead of at
//! every keyframe (a program that fills 256 MiB, 65,536 pages at 40 bytes,
//! wrote its list 27 times over: 72 MB of keyframes for 6 MB of state).

use super::{Keyframe, Recorded};
use crate::machine::memory::FrameAllocator;
use crate::machine::vcpu_state::VcpuState;
use crate::run::pages::PageHash;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A page list: every page with contents, by guest physical address.
pub type Frames = Vec<(u64, PageHash)>;

/// At most this many records in a row give changes; then a whole list,
/// so that rebuilding one keyframe's pages decodes at most this many.
pub const WHOLE_EVERY: usize = 16;

/// How a record gives its page list (the same variants, in the same order,
/// as [`PagesRef`], which writes them).
#[derive(Deserialize)]
enum Pages {
    Whole(Frames),
    Changed { set: Frames, gone: Vec<u64> },
}

#[derive(Serialize)]
enum PagesRef<'a> {
    Whole(&'a [(u64, PageHash)]),
    Changed {
        set: &'a [(u64, PageHash)],
        gone: &'a [u64],
    },
}

/// A record as read: a [`Keyframe`]'s fields, the step first
/// (`KeyframeFile::step_of` reads it alone) and the pages next ([`Head`]).
#[derive(Deserialize)]
pub struct Record {
    step: u64,
    pages: Pages,
    recorded: Recorded,
    vcpu: VcpuState,
    allocator: FrameAllocator,
    file_pages: Vec<PageHash>,
    kernel: Vec<u8>,
}

/// A record's first fields alone: what rebuilding a later record's pages
/// needs of it, without decoding its kernel state.
#[derive(Deserialize)]
pub struct Head {
    _step: u64,
    pages: Pages,
}

/// A record as written, borrowing the keyframe.
#[derive(Serialize)]
struct RecordRef<'a> {
    step: u64,
    pages: PagesRef<'a>,
    recorded: Recorded,
    vcpu: &'a VcpuState,
    allocator: &'a FrameAllocator,
    file_pages: &'a [PageHash],
    kernel: &'a [u8],
}

impl Head {
    /// Whether its page list is whole (else it needs the one before it).
    pub fn is_whole(&self) -> bool {
        matches!(self.pages, Pages::Whole(_))
    }
}

/// The page list of the newest of `heads` (newest first, back to a whole
/// list); None when the oldest is not whole.
pub fn rebuild(heads: Vec<Head>) -> Option<Frames> {
    let mut frames: Option<Frames> = None;
    for h in heads.into_iter().rev() {
        frames = Some(resolve(h.pages, frames)?);
    }
    frames
}

/// A record's page list: its own, or `before`'s changed; None when it
/// gives changes and there is no `before`.
fn resolve(pages: Pages, before: Option<Frames>) -> Option<Frames> {
    match (pages, before) {
        (Pages::Whole(f), _) => Some(f),
        (Pages::Changed { set, gone }, Some(before)) => Some(apply(before, set, gone)),
        (Pages::Changed { .. }, None) => None,
    }
}

impl Record {
    /// Whether its page list is whole (else it needs the one before it).
    pub fn is_whole(&self) -> bool {
        matches!(self.pages, Pages::Whole(_))
    }

    /// The keyframe, its pages the record's own or `before`'s changed;
    /// None when they are changes and there is no `before`.
    pub fn into_keyframe(self, before: Option<Frames>) -> Option<Keyframe> {
        let frames = resolve(self.pages, before)?;
        Some(Keyframe {
            step: self.step,
            recorded: self.recorded,
            vcpu: self.vcpu,
            allocator: self.allocator,
            frames,
            file_pages: self.file_pages,
            kernel: self.kernel,
        })
    }
}

fn apply(before: Frames, set: Frames, gone: Vec<u64>) -> Frames {
    let mut map: BTreeMap<u64, PageHash> = before.into_iter().collect();
    for pa in gone {
        map.remove(&pa);
    }
    map.extend(set);
    map.into_iter().collect()
}

/// The pages set (added or changed) and gone from `old` to `new`, both in
/// address order; None when either is not in order.
fn changes(old: &[(u64, PageHash)], new: &[(u64, PageHash)]) -> Option<(Frames, Vec<u64>)> {
    let ordered = |f: &[(u64, PageHash)]| f.windows(2).all(|w| w[0].0 < w[1].0);
    if !ordered(old) || !ordered(new) {
        return None;
    }
    let (mut set, mut gone) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < old.len() || j < new.len() {
        match (old.get(i), new.get(j)) {
            (Some(o), Some(n)) if o.0 == n.0 => {
                if o.1 != n.1 {
                    set.push(*n);
                }
                i += 1;
                j += 1;
            }
            (Some(o), Some(n)) if o.0 < n.0 => {
                gone.push(o.0);
                i += 1;
            }
            (Some(o), None) => {
                gone.push(o.0);
                i += 1;
            }
            (_, Some(n)) => {
                set.push(*n);
                j += 1;
            }
            (None, None) => unreachable!("the loop's condition"),
        }
    }
    Some((set, gone))
}

/// What a writer remembers between records: the last page list, and how
/// many records of changes followed the last whole one.
#[derive(Default)]
pub struct Encoder {
    before: Option<Frames>,
    changed_in_a_row: usize,
}

impl Encoder {
    /// `kf` as a record's body before compression: its pages as changes
    /// when there is a list before it, fewer than half its pages changed,
    /// and fewer than [`WHOLE_EVERY`] records of changes came before.
    pub fn encode(&mut self, kf: &Keyframe) -> Result<Vec<u8>, postcard::Error> {
        let changed = self
            .before
            .as_deref()
            .filter(|_| self.changed_in_a_row + 1 < WHOLE_EVERY)
            .and_then(|old| changes(old, &kf.frames))
            .filter(|(set, gone)| (set.len() + gone.len()) * 2 < kf.frames.len());
        let pages = match &changed {
            Some((set, gone)) => PagesRef::Changed { set, gone },
            None => PagesRef::Whole(&kf.frames),
        };
        let raw = postcard::to_allocvec(&RecordRef {
            step: kf.step,
            pages,
            recorded: kf.recorded,
            vcpu: &kf.vcpu,
            allocator: &kf.allocator,
            file_pages: &kf.file_pages,
            kernel: &kf.kernel,
        })?;
        self.changed_in_a_row = if changed.is_some() {
            self.changed_in_a_row + 1
        } else {
            0
        };
        self.before = Some(kf.frames.clone());
        Ok(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(b: u8) -> PageHash {
        [b; 32]
    }

    #[test]
    fn changes_applied_to_the_old_list_give_the_new() {
        let old = vec![
            (0x1000, h(1)),
            (0x2000, h(2)),
            (0x3000, h(3)),
            (0x5000, h(5)),
        ];
        let new = vec![
            (0x1000, h(1)),
            (0x3000, h(9)),
            (0x4000, h(4)),
            (0x6000, h(6)),
        ];
        let (set, gone) = changes(&old, &new).unwrap();
        assert_eq!(set, vec![(0x3000, h(9)), (0x4000, h(4)), (0x6000, h(6))]);
        assert_eq!(gone, vec![0x2000, 0x5000]);
        assert_eq!(apply(old, set, gone), new);
        let unordered = vec![(0x2000, h(2)), (0x1000, h(1))];
        assert!(changes(&unordered, &new).is_none());
        assert!(changes(&new, &unordered).is_none());
    }
}
