//! Keyframes: saved machine states at steps, so that seeking to step S or
//! forking there restores the last keyframe at or before S and runs forward
//! instead of rerunning from step 0.
//!
//! A keyframe holds the vCPU state, the frame allocator, the map of every
//! guest page with contents to its BLAKE3 (the bytes live in the shared page
//! store), the monitor's kernel state (processes, threads, mappings, files,
//! futex queues, clock, scheduler), and how much the run had recorded by
//! then (events, output bytes, thread switches).
//!
//! File `keyframes`: the magic `RWKF`, a u32 version, then records of
//! (length u32, BLAKE3 of the body, body = zstd(postcard(record))). In
//! version 3 a record's page list is whole or the changes since the record
//! before it (`record.rs`); version 2's were all whole, and are still read.
//! A damaged record is reported, never trusted.

mod record;

use super::pages::PageHash;
use crate::machine::memory::FrameAllocator;
use crate::machine::vcpu_state::VcpuState;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

const MAGIC: &[u8; 4] = b"RWKF";
pub const VERSION: u32 = 3;
/// Every record a whole `Keyframe` (runs recorded before page lists were
/// written as changes).
const VERSION_WHOLE: u32 = 2;
pub const KEYFRAMES_FILE: &str = "keyframes";
/// zstd level of a record. Much of one is the page list, 40 bytes a page
/// of which 32 are a hash that does not compress: level 3 shrank it 1.16x
/// where level 1 shrinks it 1.12x at three times the speed, and compressing
/// the record was 4 % of a JVM's recording. Any level reads back the same.
const ZSTD_LEVEL: i32 = 1;

/// When the engine takes a keyframe: every `KEYFRAME_STEPS` steps, or
/// sooner when `KEYFRAME_WALL_MS` of wall time passed and at least
/// `KEYFRAME_MIN_STEPS` steps did (slow steps, page-heavy programs).
pub const KEYFRAME_STEPS: u64 = 20_000;
pub const KEYFRAME_WALL_MS: u64 = 100;
pub const KEYFRAME_MIN_STEPS: u64 = 1_000;

/// How much of the run was recorded when a keyframe was taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    pub events: u64,
    pub output_bytes: u64,
    pub switches: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Keyframe {
    /// The last step handled before the state was saved.
    pub step: u64,
    pub recorded: Recorded,
    pub vcpu: VcpuState,
    pub allocator: FrameAllocator,
    /// Every page with contents: guest physical address and its hash.
    pub frames: Vec<(u64, PageHash)>,
    /// Pages of large file contents the kernel state refers to (`kernel::blobs`).
    pub file_pages: Vec<PageHash>,
    /// The kernel's state, postcard-encoded (`kernel::snapshot`).
    pub kernel: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyframeError {
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Corrupt {
        path: std::path::PathBuf,
        what: String,
    },
}

fn corrupt(path: &Path, what: impl Into<String>) -> KeyframeError {
    KeyframeError::Corrupt {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// Appends keyframes to a run's `keyframes` file.
pub struct KeyframeWriter {
    file: std::fs::File,
    path: std::path::PathBuf,
    encoder: record::Encoder,
}

impl KeyframeWriter {
    pub fn create(path: &Path) -> Result<KeyframeWriter, KeyframeError> {
        let io = |source| KeyframeError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = std::fs::File::create(path).map_err(io)?;
        file.write_all(MAGIC).map_err(io)?;
        file.write_all(&VERSION.to_le_bytes()).map_err(io)?;
        Ok(KeyframeWriter {
            file,
            path: path.to_path_buf(),
            encoder: record::Encoder::default(),
        })
    }

    pub fn push(&mut self, kf: &Keyframe) -> Result<(), KeyframeError> {
        let raw = self
            .encoder
            .encode(kf)
            .map_err(|e| corrupt(&self.path, e.to_string()))?;
        let body = zstd::bulk::compress(&raw, ZSTD_LEVEL).map_err(|source| KeyframeError::Io {
            path: self.path.clone(),
            source,
        })?;
        let mut rec = Vec::with_capacity(body.len() + 36);
        rec.extend_from_slice(&(body.len() as u32).to_le_bytes());
        rec.extend_from_slice(blake3::hash(&body).as_bytes());
        rec.extend_from_slice(&body);
        self.file
            .write_all(&rec)
            .map_err(|source| KeyframeError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// Every keyframe of a run, in step order (empty when it has none).
pub fn read_all(path: &Path) -> Result<Vec<Keyframe>, KeyframeError> {
    KeyframeFile::open(path)?.all()
}

/// The most one keyframe may decompress to: its page list (40 bytes a
/// page) and kernel state for far more memory than a run touches. A record
/// that decompresses to more is refused, never allocated.
pub const MAX_KEYFRAME_BYTES: u64 = 256 << 20;

/// The keyframes of a keyframes file's bytes, in step order; `path` names
/// the file in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<Vec<Keyframe>, KeyframeError> {
    KeyframeFile::parse(bytes.to_vec(), path)?.all()
}

/// A keyframes file whose every record's checksum was checked, each record
/// decoded only when asked: a seek into a long run decodes the one keyframe
/// it starts from (and a few step numbers to find it), not the thousands
/// before it.
pub struct KeyframeFile {
    bytes: Vec<u8>,
    path: std::path::PathBuf,
    /// Each record's compressed body, in file order.
    bodies: Vec<std::ops::Range<usize>>,
    max: u64,
    version: u32,
}

impl KeyframeFile {
    /// The file at `path`; none (no records) when it does not exist.
    pub fn open(path: &Path) -> Result<KeyframeFile, KeyframeError> {
        match std::fs::read(path) {
            Ok(bytes) => KeyframeFile::parse(bytes, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(KeyframeFile {
                bytes: Vec::new(),
                path: path.to_path_buf(),
                bodies: Vec::new(),
                max: MAX_KEYFRAME_BYTES,
                version: VERSION,
            }),
            Err(source) => Err(KeyframeError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The records of a keyframes file's bytes, each checked against its
    /// checksum; `path` names the file in errors.
    pub fn parse(bytes: Vec<u8>, path: &Path) -> Result<KeyframeFile, KeyframeError> {
        KeyframeFile::parse_bounded(bytes, path, MAX_KEYFRAME_BYTES)
    }

    fn parse_bounded(bytes: Vec<u8>, path: &Path, max: u64) -> Result<KeyframeFile, KeyframeError> {
        if bytes.len() < 8 || &bytes[..4] != MAGIC {
            return Err(corrupt(path, "not a keyframes file"));
        }
        let version = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
        if version != VERSION && version != VERSION_WHOLE {
            return Err(corrupt(
                path,
                format!("keyframes version {version}; this rewind reads {VERSION}"),
            ));
        }
        let mut bodies = Vec::new();
        let mut at = 8;
        while at < bytes.len() {
            let Some(head) = bytes.get(at..at + 36) else {
                return Err(corrupt(path, "truncated keyframe"));
            };
            let len = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
            let body = at + 36..at + 36 + len;
            let Some(b) = bytes.get(body.clone()) else {
                return Err(corrupt(path, "truncated keyframe"));
            };
            if blake3::hash(b).as_bytes() != &head[4..36] {
                return Err(corrupt(path, "keyframe checksum mismatch"));
            }
            at = body.end;
            bodies.push(body);
        }
        Ok(KeyframeFile {
            bytes,
            path: path.to_path_buf(),
            bodies,
            max,
            version,
        })
    }

    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// Record `i` decoded, its page list rebuilt from the records before
    /// it back to a whole one (of which only the pages are decoded).
    pub fn get(&self, i: usize) -> Result<Keyframe, KeyframeError> {
        if self.version == VERSION_WHOLE {
            return self.decode(i);
        }
        let r: record::Record = self.decode(i)?;
        if r.is_whole() {
            return r.into_keyframe(None).ok_or_else(|| self.no_whole_list());
        }
        let mut heads: Vec<record::Head> = Vec::new();
        for before in (0..i).rev() {
            let h: record::Head = self.decode_head(before)?;
            let whole = h.is_whole();
            heads.push(h);
            if whole {
                break;
            }
        }
        let before = record::rebuild(heads).ok_or_else(|| self.no_whole_list())?;
        r.into_keyframe(Some(before))
            .ok_or_else(|| self.no_whole_list())
    }

    fn no_whole_list(&self) -> KeyframeError {
        corrupt(
            &self.path,
            "a keyframe's pages are changes to no keyframe before it",
        )
    }

    /// Record `i`'s body decompressed (as far as the bound) and decoded.
    fn decode<T: serde::de::DeserializeOwned>(&self, i: usize) -> Result<T, KeyframeError> {
        let raw = self.decompress(i)?;
        postcard::from_bytes(&raw).map_err(|e| corrupt(&self.path, format!("bad keyframe: {e}")))
    }

    /// Record `i`'s first fields, the rest left undecoded.
    fn decode_head(&self, i: usize) -> Result<record::Head, KeyframeError> {
        let raw = self.decompress(i)?;
        postcard::take_from_bytes(&raw)
            .map(|(h, _)| h)
            .map_err(|e| corrupt(&self.path, format!("bad keyframe: {e}")))
    }

    /// Record `i`'s body decompressed, as far as the bound.
    fn decompress(&self, i: usize) -> Result<Vec<u8>, KeyframeError> {
        use std::io::Read;
        let body = &self.bytes[self.bodies[i].clone()];
        // Decompressed as far as the bound, growing with what comes out.
        let mut raw = Vec::new();
        zstd::stream::read::Decoder::new(body)
            .and_then(|d| d.take(self.max + 1).read_to_end(&mut raw))
            .map_err(|_| corrupt(&self.path, "bad keyframe"))?;
        if raw.len() as u64 > self.max {
            return Err(corrupt(
                &self.path,
                "a keyframe decompresses to more than any run keeps",
            ));
        }
        Ok(raw)
    }

    /// The step of record `i`, from the first bytes of its body alone (the
    /// step is the keyframe's first field, a postcard varint).
    fn step_of(&self, i: usize) -> Result<u64, KeyframeError> {
        use std::io::Read;
        let body = &self.bytes[self.bodies[i].clone()];
        let mut head = Vec::with_capacity(10);
        zstd::stream::read::Decoder::new(body)
            .and_then(|d| d.take(10).read_to_end(&mut head))
            .map_err(|_| corrupt(&self.path, "bad keyframe"))?;
        let (step, _) = postcard::take_from_bytes::<u64>(&head)
            .map_err(|e| corrupt(&self.path, format!("bad keyframe: {e}")))?;
        Ok(step)
    }

    /// Every record's step, in file order, each decoded from the first
    /// bytes of its body alone; steps that do not increase are an error.
    pub fn steps(&self) -> Result<Vec<u64>, KeyframeError> {
        let mut out: Vec<u64> = Vec::with_capacity(self.len());
        for i in 0..self.len() {
            let step = self.step_of(i)?;
            if out.last().is_some_and(|p| *p >= step) {
                return Err(corrupt(&self.path, "keyframes out of order"));
            }
            out.push(step);
        }
        Ok(out)
    }

    /// Every record decoded, in step order (each page list of changes
    /// applied to the one before it).
    pub fn all(&self) -> Result<Vec<Keyframe>, KeyframeError> {
        let mut out: Vec<Keyframe> = Vec::with_capacity(self.len());
        for i in 0..self.len() {
            let kf = if self.version == VERSION_WHOLE {
                self.decode(i)?
            } else {
                let r: record::Record = self.decode(i)?;
                let before = out.last().map(|k| k.frames.clone());
                r.into_keyframe(before)
                    .ok_or_else(|| self.no_whole_list())?
            };
            if out.last().is_some_and(|p| p.step >= kf.step) {
                return Err(corrupt(&self.path, "keyframes out of order"));
            }
            out.push(kf);
        }
        Ok(out)
    }

    /// The last keyframe at or before `step` that `usable` accepts: found
    /// by the records' steps (a binary search, as they increase), decoded
    /// from there back until one is usable.
    pub fn last_at_or_before(
        &self,
        step: u64,
        mut usable: impl FnMut(&Keyframe) -> bool,
    ) -> Result<Option<Keyframe>, KeyframeError> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.step_of(mid)? <= step {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        for i in (0..lo).rev() {
            let kf = self.get(i)?;
            if kf.step > step || (i + 1 < self.len() && self.step_of(i + 1)? <= kf.step) {
                return Err(corrupt(&self.path, "keyframes out of order"));
            }
            if usable(&kf) {
                return Ok(Some(kf));
            }
        }
        Ok(None)
    }
}

/// The pages a run's keyframes refer to (for `rewind gc`).
pub fn referenced_pages(run_dir: &Path) -> Result<Vec<PageHash>, KeyframeError> {
    let mut out: Vec<PageHash> = read_all(&run_dir.join(KEYFRAMES_FILE))?
        .into_iter()
        .flat_map(|k| k.frames.into_iter().map(|(_, h)| h).chain(k.file_pages))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of one record whose body is `raw`, compressed.
    fn file_of(raw: &[u8]) -> Vec<u8> {
        file_of_records(VERSION, &[raw.to_vec()])
    }

    /// A file of version `version` whose records' bodies are `raws`, compressed.
    fn file_of_records(version: u32, raws: &[Vec<u8>]) -> Vec<u8> {
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&version.to_le_bytes());
        for raw in raws {
            let body = zstd::bulk::compress(raw, ZSTD_LEVEL).unwrap();
            file.extend_from_slice(&(body.len() as u32).to_le_bytes());
            file.extend_from_slice(blake3::hash(&body).as_bytes());
            file.extend_from_slice(&body);
        }
        file
    }

    /// A keyframe at `step` of `pages` pages, of which the first `moved`
    /// have contents that change with the step; page `pages` appears at
    /// odd steps only (a page that comes and goes).
    fn keyframe_of_pages(step: u64, pages: u64, moved: u64) -> Keyframe {
        let mut kf = keyframe_at(step);
        kf.frames = (0..pages)
            .map(|p| {
                let mut h = [p as u8; 32];
                h[8..16].copy_from_slice(&p.to_le_bytes());
                if p < moved {
                    h[..8].copy_from_slice(&step.to_le_bytes());
                }
                (0x20_0000 + p * 4096, h)
            })
            .collect();
        if step % 2 == 1 {
            kf.frames.push((0x20_0000 + pages * 4096, [0xee; 32]));
        }
        kf
    }

    fn same(a: &Keyframe, b: &Keyframe) -> bool {
        a.step == b.step
            && a.frames == b.frames
            && a.kernel == b.kernel
            && a.file_pages == b.file_pages
    }

    /// A long run of a large memory writes its page list once in a while
    /// (as changes between), and every keyframe reads back as it was taken,
    /// alone or all together; a file written before (version 2, whole
    /// lists) still reads; changes to nothing are an error.
    #[test]
    fn page_lists_are_written_as_changes_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEYFRAMES_FILE);
        let kfs: Vec<Keyframe> = (1..=40).map(|s| keyframe_of_pages(s, 5_000, 20)).collect();
        let mut w = KeyframeWriter::create(&path).unwrap();
        for kf in &kfs {
            w.push(kf).unwrap();
        }
        drop(w);
        let whole: Vec<Vec<u8>> = kfs
            .iter()
            .map(|k| postcard::to_allocvec(k).unwrap())
            .collect();
        let v2 = file_of_records(VERSION_WHOLE, &whole);
        let written = std::fs::metadata(&path).unwrap().len();
        assert!(
            written * 5 < v2.len() as u64,
            "{written} bytes of changes against {} whole",
            v2.len()
        );
        let f = KeyframeFile::open(&path).unwrap();
        let all = f.all().unwrap();
        assert_eq!(all.len(), kfs.len());
        for (i, kf) in kfs.iter().enumerate() {
            assert!(same(&all[i], kf), "keyframe {i} of all()");
            assert!(same(&f.get(i).unwrap(), kf), "keyframe {i} alone");
            let found = f.last_at_or_before(kf.step, |_| true).unwrap().unwrap();
            assert!(same(&found, kf), "keyframe {i} found by its step");
        }
        let old = KeyframeFile::parse(v2, &path).unwrap().all().unwrap();
        assert!(old.iter().zip(&kfs).all(|(a, b)| same(a, b)));

        // The file without its first record: the next gives changes to nothing.
        let bytes = std::fs::read(&path).unwrap();
        let first = 8 + 36 + u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let mut cut = bytes[..8].to_vec();
        cut.extend_from_slice(&bytes[first..]);
        let f = KeyframeFile::parse(cut, &path).unwrap();
        let err = f.get(0).expect_err("changes to nothing");
        assert!(err.to_string().contains("changes to no keyframe"), "{err}");
        assert!(f.all().is_err());
    }

    #[test]
    fn a_record_that_decompresses_past_the_bound_is_refused() {
        // A megabyte of zeros compresses to a few hundred bytes.
        let file = file_of(&vec![0u8; 1 << 20]);
        assert!(file.len() < 4096);
        let decode_bounded = |file: &[u8], path: &Path, max| {
            KeyframeFile::parse_bounded(file.to_vec(), path, max)?.all()
        };
        let err = decode_bounded(&file, Path::new("k"), 64 << 10).unwrap_err();
        assert!(err.to_string().contains("more than any run keeps"), "{err}");
        // Under the bound the same record is read (zeros: an empty keyframe).
        assert_eq!(
            decode_bounded(&file, Path::new("k"), 2 << 20)
                .unwrap()
                .len(),
            1
        );
    }

    fn keyframe_at(step: u64) -> Keyframe {
        Keyframe {
            step,
            recorded: Recorded::default(),
            vcpu: VcpuState {
                regs: Vec::new(),
                sregs: Vec::new(),
                xsave: None,
            },
            allocator: FrameAllocator {
                next_frame: 0,
                free: Vec::new(),
                shares: Default::default(),
            },
            frames: vec![(step << 12, [step as u8; 32])],
            file_pages: Vec::new(),
            kernel: vec![step as u8; 100],
        }
    }

    #[test]
    fn the_keyframe_a_seek_starts_from_is_found_without_decoding_the_rest() {
        let dir = std::env::temp_dir().join(format!("rewind-kf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(KEYFRAMES_FILE);
        let mut w = KeyframeWriter::create(&path).unwrap();
        let steps: Vec<u64> = (1..=50).map(|i| i * 1000 + i % 7).collect();
        for s in &steps {
            w.push(&keyframe_at(*s)).unwrap();
        }
        drop(w);
        let f = KeyframeFile::open(&path).unwrap();
        assert_eq!(f.len(), steps.len());
        let at = |step, usable: &dyn Fn(&Keyframe) -> bool| {
            f.last_at_or_before(step, usable).unwrap().map(|k| k.step)
        };
        for (i, s) in steps.iter().enumerate() {
            assert_eq!(at(*s, &|_| true), Some(*s));
            assert_eq!(at(s + 1, &|_| true), Some(*s));
            let before = if i == 0 { None } else { Some(steps[i - 1]) };
            assert_eq!(at(s - 1, &|_| true), before);
            // One this build cannot restore: the one before it.
            assert_eq!(at(*s, &|k| k.step != *s), before);
        }
        assert_eq!(at(0, &|_| true), None);
        assert_eq!(at(u64::MAX, &|_| true), steps.last().copied());
        let all = f.all().unwrap();
        assert_eq!(all.iter().map(|k| k.step).collect::<Vec<_>>(), steps);
        assert_eq!(f.steps().unwrap(), steps);
        assert_eq!(all[3].kernel, keyframe_at(steps[3]).kernel);

        // A byte flipped in the first record's body is reported, though a
        // late seek decodes nothing there.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[8 + 36 + 5] ^= 0x5a;
        let err = KeyframeFile::parse(bytes, &path)
            .err()
            .expect("damage is found");
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
