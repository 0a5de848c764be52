//! The pages of MAP_SHARED mappings: Linux's shmem and page cache.
//!
//! A shared object is anonymous shared memory (MAP_SHARED|MAP_ANONYMOUS, or
//! `/dev/zero` mapped shared: one object per mmap, inherited across fork)
//! or a regular file (one object per inode, whoever maps it). It holds a
//! frame per page some mapping touched, with one reference of its own;
//! every page table that maps the frame holds another
//! (`GuestRam::share_frame`), so a process's munmap or exit leaves the
//! others' pages, and a frame is freed when its object goes, which is when
//! no mapping of any process names it (`Kernel::collect_shared`).
//!
//! A file's bytes stay in the tree (`vfs::FileData`); a page the object
//! holds is the truth for its part of the file while it is held. So every
//! access to a file's bytes by the monitor goes through
//! `Kernel::file_data` (the held pages copied into the bytes first, if
//! they differ: a store is seen by read()) and `Kernel::file_modify` (then
//! the bytes copied into the held pages: a write() is seen through the
//! mapping; pages wholly past a shrunk end are unmapped everywhere, and
//! touching them again is SIGBUS). Both cost the pages held for that file
//! only. An object going writes its pages back, and holds an open of its
//! inode meanwhile, so an unlinked file lives while mapped. A store found
//! by a write-back makes the file's times due, which the guest's next look
//! gives it (`Kernel::settle_times`), as Linux's write fault on a clean
//! page does at the store.
//!
//! A MAP_PRIVATE mapping of a file names the file's object too, holding
//! none of its frames: its pages are copies (`SharedPages::copy`) of the
//! file's as they are when first touched, so a page wholly past the end is
//! SIGBUS for it as for a shared mapping, a page dropped (MADV_DONTNEED)
//! is read again, and a truncate unmaps its copies past the new end.
//!
//! The objects are part of the file state, so keyframes carry them with
//! the frames (guest memory) and the allocator's counts.

use super::super::errno::*;
use super::super::mm::{Access, Fault, Share, PROT_WRITE};
use super::vfs::{FileBytes, Ino, Kind};
use super::{Target, Vfs, O_PATH};
use crate::kernel::Kernel;
use crate::machine::layout::PAGE_SIZE;
use crate::machine::memory::GuestRam;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub type ObjId = u64;

const PAGE: usize = PAGE_SIZE as usize;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SharedPages {
    objects: BTreeMap<ObjId, Object>,
    /// The object of each file mapped shared.
    files: BTreeMap<Ino, ObjId>,
    next: ObjId,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Object {
    /// The file whose pages these are; None for anonymous shared memory.
    file: Option<Ino>,
    /// Page index in the object to its frame.
    pages: BTreeMap<u64, u64>,
    /// A file's pages whose stores gave it its times since the last
    /// msync(MS_SYNC), fsync or sync, or since the file was last mapped: a later
    /// store to one gives none, as Linux's page, dirty and mapped writable
    /// then, takes no write fault.
    #[serde(default)]
    timed: BTreeSet<u64>,
    /// Pages a write-back found stored to, not in `timed`: the file's times
    /// are due, and change when the guest next looks (`settle_times`).
    #[serde(default)]
    untimed: BTreeSet<u64>,
}

/// What a mapping of a descriptor (or of none) maps: shared memory, or a
/// file's pages, shared or copied.
pub enum Backing {
    Anon,
    File { ino: Ino, access: Access },
}

impl SharedPages {
    /// The file whose pages object `obj` holds.
    pub fn file_of(&self, obj: ObjId) -> Option<Ino> {
        self.objects.get(&obj).and_then(|o| o.file)
    }

    /// The frame of page `idx` of object `obj`, with one more reference for
    /// the page table that will map it: the object's own, or a new one
    /// (zeros, or the file's bytes there).
    pub fn frame(vfs: &mut Vfs, ram: &mut GuestRam, obj: ObjId, idx: u64) -> Result<u64, Fault> {
        let o = vfs.shared.objects.get(&obj).ok_or(Fault::Unmapped)?;
        let bytes = match o.file {
            Some(ino) => Some(file_page(vfs, ino, idx)?),
            None => None,
        };
        let o = vfs.shared.objects.get_mut(&obj).ok_or(Fault::Unmapped)?;
        let frame = match o.pages.get(&idx) {
            // A restored keyframe's object names its frames: one outside memory is none.
            Some(f) if ram.slice(*f, PAGE).is_err() => return Err(Fault::NoMemory),
            Some(f) => *f,
            None => {
                let f = ram.alloc_frame().ok_or(Fault::NoMemory)?;
                if let Some((data, from, n)) = bytes {
                    if ram.write(f, &data[from..from + n]).is_err() {
                        ram.free_frame(f);
                        return Err(Fault::NoMemory);
                    }
                }
                o.pages.insert(idx, f);
                f
            }
        };
        ram.share_frame(frame);
        Ok(frame)
    }

    /// A fresh frame holding page `idx` of file object `obj` as the file
    /// has it now (a held page with its stores), for a MAP_PRIVATE mapping.
    pub fn copy(vfs: &mut Vfs, ram: &mut GuestRam, obj: ObjId, idx: u64) -> Result<u64, Fault> {
        let o = vfs.shared.objects.get(&obj).ok_or(Fault::Unmapped)?;
        let (ino, held) = (o.file.ok_or(Fault::Unmapped)?, o.pages.get(&idx).copied());
        // Past the end is SIGBUS even where a page is still held.
        let (data, from, n) = file_page(vfs, ino, idx)?;
        let page = match held {
            Some(h) => ram.slice(h, PAGE).map_err(|_| Fault::NoMemory)?.to_vec(),
            None => data[from..from + n].to_vec(),
        };
        let f = ram.alloc_frame().ok_or(Fault::NoMemory)?;
        if ram.write(f, &page).is_err() {
            ram.free_frame(f);
            return Err(Fault::NoMemory);
        }
        Ok(f)
    }
}

/// A file's bytes and the span of page `idx` in them, for a fault:
/// PastEnd when the page is wholly past the file's end (SIGBUS).
fn file_page(vfs: &mut Vfs, ino: Ino, idx: u64) -> Result<(Arc<FileBytes>, usize, usize), Fault> {
    let data = vfs.tree.contents(ino).map_err(|_| Fault::PastEnd)?;
    let (from, n) = page_span(idx, data.len()).ok_or(Fault::PastEnd)?;
    Ok((data, from, n))
}

impl Vfs {
    /// The object a new mapping of `backing` names: a new one for shared
    /// memory, a file's the one every mapping of it names.
    pub fn share_object(&mut self, backing: &Backing) -> ObjId {
        if let Backing::File { ino, .. } = backing {
            if let Some(id) = self.shared.files.get(ino) {
                return *id;
            }
        }
        let id = self.shared.next;
        self.shared.next += 1;
        let file = match backing {
            Backing::File { ino, .. } => {
                // The mapping keeps its file as an open description would.
                if let Some(n) = self.tree.nodes.get_mut(ino) {
                    n.opens += 1;
                }
                self.shared.files.insert(*ino, id);
                Some(*ino)
            }
            Backing::Anon => None,
        };
        self.shared.objects.insert(
            id,
            Object {
                file,
                pages: BTreeMap::new(),
                timed: BTreeSet::new(),
                untimed: BTreeSet::new(),
            },
        );
        id
    }
}

/// What a MAP_SHARED mmap of `fd` maps: anonymous memory, `/dev/zero`, or
/// a regular file (opened for reading, and for writing if `prot` has
/// PROT_WRITE); None for what keeps a private copy (a generated file).
/// `unknown_flags`: MAP_SHARED_VALIDATE with flags it refuses (EOPNOTSUPP,
/// once the descriptor is known good, as Linux checks).
pub fn mmap_backing(
    k: &mut Kernel,
    fd: i32,
    anon: bool,
    prot: u64,
    unknown_flags: bool,
) -> SysResult<Option<Backing>> {
    if anon {
        return Ok(Some(Backing::Anon));
    }
    let (_, d) = k.desc(fd as i64 as u64)?;
    if d.flags & O_PATH != 0 {
        return Err(EBADF);
    }
    if unknown_flags {
        return Err(EOPNOTSUPP);
    }
    if !d.readable() {
        return Err(EACCES);
    }
    let Target::Node(ino) = d.target else {
        return Ok(None);
    };
    match k.vfs.tree.node(ino)?.kind {
        Kind::File(_) if prot & PROT_WRITE != 0 && !d.writable() => Err(EACCES),
        Kind::File(_) => Ok(Some(Backing::File {
            ino,
            access: Access::Shared {
                may_write: d.writable(),
            },
        })),
        Kind::Dev(super::vfs::Device::Zero) => Ok(Some(Backing::Anon)),
        _ => Ok(None),
    }
}

/// What a MAP_PRIVATE mmap of `fd` (its checks made) names: a regular
/// file's object, whose pages it copies as it touches them.
pub fn private_backing(k: &mut Kernel, fd: i32) -> Option<Backing> {
    let (_, d) = k.desc(fd as i64 as u64).ok()?;
    let Target::Node(ino) = d.target else {
        return None;
    };
    matches!(k.vfs.tree.node(ino).ok()?.kind, Kind::File(_)).then_some(Backing::File {
        ino,
        access: Access::Private,
    })
}

/// The share a new mapping of `backing` from byte `off` has.
pub fn share_of(vfs: &mut Vfs, backing: &Backing, off: u64) -> Share {
    let (pgoff, access) = match backing {
        Backing::Anon => (0, Access::Shared { may_write: true }),
        Backing::File { access, .. } => (off / PAGE_SIZE, *access),
    };
    let obj = vfs.share_object(backing);
    // A new shared mapping's first store to a page gives the file its
    // times, as its fresh page-table entries fault on Linux.
    if let (Backing::File { .. }, Access::Shared { .. }) = (backing, access) {
        if let Some(o) = vfs.shared.objects.get_mut(&obj) {
            o.timed.clear();
        }
    }
    Share { obj, pgoff, access }
}

impl Kernel<'_> {
    /// Drops the shared objects no mapping of any process names: a file's
    /// pages are written back, and every frame given back (each mapping
    /// gave its references back when it went). Called after whatever may
    /// remove a mapping; nothing to do for a run with no shared mapping.
    pub fn collect_shared(&mut self) {
        if self.vfs.shared.objects.is_empty() {
            return;
        }
        let named: BTreeSet<ObjId> = self
            .procs
            .values()
            .flat_map(|p| p.mm.vmas().filter_map(|(_, v)| v.share.map(|s| s.obj)))
            .collect();
        let gone: Vec<ObjId> = self
            .vfs
            .shared
            .objects
            .keys()
            .filter(|id| !named.contains(id))
            .copied()
            .collect();
        for id in gone {
            if let Some(ino) = self.vfs.shared.file_of(id) {
                // The tree may refuse the bytes (its space is full): they are lost, as
                // Linux's writeback error would lose them.
                let _ = self.settle_times(ino, false);
                self.vfs.shared.files.remove(&ino);
                self.vfs.drop_open(ino);
            }
            if let Some(o) = self.vfs.shared.objects.remove(&id) {
                for frame in o.pages.into_values() {
                    self.m.ram.free_frame(frame);
                }
            }
        }
    }

    /// Copies the pages of `ino` mapped shared into its bytes where they
    /// differ (stores through a mapping reach the file).
    pub fn write_back(&mut self, ino: Ino) -> SysResult<()> {
        let shared = &self.vfs.shared;
        let Some(o) = shared.files.get(&ino).and_then(|id| shared.objects.get(id)) else {
            return Ok(());
        };
        let data = self.vfs.tree.contents(ino)?;
        let mut changed = Vec::new();
        let mut stored = Vec::new();
        for (idx, frame) in &o.pages {
            let Some((from, n)) = page_span(*idx, data.len()) else {
                continue;
            };
            let Ok(mem) = self.m.ram.slice(*frame, n) else {
                continue;
            };
            if mem != &data[from..from + n] {
                changed.push((from, mem.to_vec()));
                if !o.timed.contains(idx) {
                    stored.push(*idx);
                }
            }
        }
        if changed.is_empty() {
            return Ok(());
        }
        if let Some(id) = shared.files.get(&ino).copied() {
            if let Some(o) = self.vfs.shared.objects.get_mut(&id) {
                o.untimed.extend(stored);
            }
        }
        // Copying is not an event the guest sees (it happens at whichever read
        // comes first, a debugger's too): the file's times stay.
        let (mtime, ctime) = self.vfs.tree.node(ino).map(|n| (n.mtime, n.ctime))?;
        let len = data.len() as u64;
        self.vfs.tree.modify(ino, mtime, len, |v| {
            for (from, bytes) in &changed {
                v[*from..*from + bytes.len()].copy_from_slice(bytes);
            }
            Ok(())
        })?;
        self.vfs.tree.node_mut(ino)?.ctime = ctime;
        Ok(())
    }

    /// Gives a file the times a store through a shared mapping made due:
    /// mtime and ctime become now when a store was the first to its page
    /// since the last sync (Linux sets them at that store, its write fault
    /// on a clean page). Only what the guest does calls it (stat, msync,
    /// fsync, a mapping's end), never a read: a debugger's reads leave the
    /// times. `synced`: msync(MS_SYNC), fsync or sync, after which the next store
    /// to any page counts again, as Linux's writeback cleans the pages.
    pub fn settle_times(&mut self, ino: Ino, synced: bool) -> SysResult<()> {
        let Some(&id) = self.vfs.shared.files.get(&ino) else {
            return Ok(());
        };
        self.write_back(ino)?;
        let now = self.fs_now();
        let Some(o) = self.vfs.shared.objects.get_mut(&id) else {
            return Ok(());
        };
        let due = !o.untimed.is_empty();
        let untimed = std::mem::take(&mut o.untimed);
        o.timed.extend(untimed);
        if synced {
            o.timed.clear();
        }
        if due {
            let n = self.vfs.tree.node_mut(ino)?;
            n.mtime = now;
            n.ctime = now;
        }
        Ok(())
    }

    /// sync, syncfs: every file mapped shared gets its due times, its pages
    /// clean (a write-back the full tree refuses loses its bytes, as at
    /// the object's going).
    pub fn sync_shared(&mut self) {
        let files: Vec<Ino> = self.vfs.shared.files.keys().copied().collect();
        for ino in files {
            let _ = self.settle_times(ino, true);
        }
    }

    /// A file's bytes, with what its shared mappings stored.
    pub fn file_data(&mut self, ino: Ino) -> SysResult<Arc<FileBytes>> {
        self.write_back(ino)?;
        self.vfs.tree.contents(ino)
    }

    /// Changes a file's bytes as `Tree::modify` does, its shared mappings
    /// seeing the change at once.
    pub fn file_modify<R>(
        &mut self,
        ino: Ino,
        now: u64,
        max_len: u64,
        f: impl FnOnce(&mut Vec<u8>) -> SysResult<R>,
    ) -> SysResult<R> {
        self.write_back(ino)?;
        let Some(&id) = self.vfs.shared.files.get(&ino) else {
            return self.vfs.tree.modify(ino, now, max_len, f);
        };
        let old_len = self.vfs.tree.contents(ino)?.len();
        let r = self.vfs.tree.modify(ino, now, max_len, f)?;
        // The change's times cover the stores the write-back found.
        if let Some(o) = self.vfs.shared.objects.get_mut(&id) {
            let untimed = std::mem::take(&mut o.untimed);
            o.timed.extend(untimed);
        }
        self.refresh_pages(ino, id, old_len)?;
        Ok(r)
    }

    /// Copies a file's bytes into the pages its shared mappings hold, zeros
    /// past its end; when it shrank from `old_len`, its pages wholly past
    /// the end leave every mapping, private copies too (as Linux's
    /// truncate unmaps them), so that touching one is SIGBUS.
    fn refresh_pages(&mut self, ino: Ino, id: ObjId, old_len: usize) -> SysResult<()> {
        let data = self.vfs.tree.contents(ino)?;
        let Some(o) = self.vfs.shared.objects.get(&id) else {
            return Ok(());
        };
        // The first page wholly past the end.
        let end = data.len().div_ceil(PAGE) as u64;
        for (idx, frame) in o.pages.range(..end) {
            let Some((from, n)) = page_span(*idx, data.len()) else {
                continue;
            };
            let mut page = [0u8; PAGE];
            page[..n].copy_from_slice(&data[from..from + n]);
            if self.m.ram.slice(*frame, PAGE).is_ok_and(|m| m != page) {
                let _ = self.m.ram.write(*frame, &page);
            }
        }
        let past: Vec<u64> = o.pages.range(end..).map(|(i, _)| *i).collect();
        if past.is_empty() && end >= old_len.div_ceil(PAGE) as u64 {
            return Ok(());
        }
        let mut flushed = false;
        for p in self.procs.values_mut() {
            flushed |= p.mm.unmap_share_pages(&mut self.m.ram, id, end);
        }
        if let Some(o) = self.vfs.shared.objects.get_mut(&id) {
            o.timed.retain(|i| *i < end);
            o.untimed.retain(|i| *i < end);
            for idx in past {
                if let Some(frame) = o.pages.remove(&idx) {
                    self.m.ram.free_frame(frame);
                }
            }
        }
        self.flush_if(flushed)
    }
}

/// The bytes of page `idx` inside a file of `len` bytes: (offset, count),
/// None when the page is wholly past the end.
fn page_span(idx: u64, len: usize) -> Option<(usize, usize)> {
    let from = usize::try_from(idx.checked_mul(PAGE_SIZE)?).ok()?;
    (from < len).then(|| (from, (len - from).min(PAGE)))
}
