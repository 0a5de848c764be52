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
//! (length u32, BLAKE3 of the body, body = zstd(postcard(Keyframe))).
//! A damaged record is reported, never trusted.

use super::pages::PageHash;
use crate::machine::memory::FrameAllocator;
use crate::machine::snapshot::VcpuState;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

const MAGIC: &[u8; 4] = b"RWKF";
pub const VERSION: u32 = 2;
pub const KEYFRAMES_FILE: &str = "keyframes";
const ZSTD_LEVEL: i32 = 3;

/// When the engine takes a keyframe: every `KEYFRAME_STEPS` steps, or
/// sooner when `KEYFRAME_WALL_MS` of wall time passed and at least
/// `KEYFRAME_MIN_STEPS` steps did (slow steps, page-heavy programs).
pub const KEYFRAME_STEPS: u64 = 20_000;
pub const KEYFRAME_WALL_MS: u64 = 250;
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
        })
    }

    pub fn push(&mut self, kf: &Keyframe) -> Result<(), KeyframeError> {
        let raw = postcard::to_allocvec(kf).map_err(|e| corrupt(&self.path, e.to_string()))?;
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
    match std::fs::read(path) {
        Ok(bytes) => decode(&bytes, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(KeyframeError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The most one keyframe may decompress to: its page list (40 bytes a
/// page) and kernel state for far more memory than a run touches. A record
/// that decompresses to more is refused, never allocated.
pub const MAX_KEYFRAME_BYTES: u64 = 256 << 20;

/// The keyframes of a keyframes file's bytes, in step order; `path` names
/// the file in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<Vec<Keyframe>, KeyframeError> {
    decode_bounded(bytes, path, MAX_KEYFRAME_BYTES)
}

fn decode_bounded(bytes: &[u8], path: &Path, max: u64) -> Result<Vec<Keyframe>, KeyframeError> {
    use std::io::Read;
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(corrupt(path, "not a keyframes file"));
    }
    let version = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
    if version != VERSION {
        return Err(corrupt(
            path,
            format!("keyframes version {version}; this rewind reads {VERSION}"),
        ));
    }
    let mut out: Vec<Keyframe> = Vec::new();
    let mut at = 8;
    while at < bytes.len() {
        let Some(head) = bytes.get(at..at + 36) else {
            return Err(corrupt(path, "truncated keyframe"));
        };
        let len = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
        let sum = &head[4..36];
        let body = bytes
            .get(at + 36..)
            .and_then(|rest| rest.get(..len))
            .ok_or_else(|| corrupt(path, "truncated keyframe"))?;
        if blake3::hash(body).as_bytes() != sum {
            return Err(corrupt(path, "keyframe checksum mismatch"));
        }
        // Decompressed as far as the bound, growing with what comes out.
        let mut raw = Vec::new();
        zstd::stream::read::Decoder::new(body)
            .and_then(|d| d.take(max + 1).read_to_end(&mut raw))
            .map_err(|_| corrupt(path, "bad keyframe"))?;
        if raw.len() as u64 > max {
            return Err(corrupt(
                path,
                "a keyframe decompresses to more than any run keeps",
            ));
        }
        let kf: Keyframe =
            postcard::from_bytes(&raw).map_err(|e| corrupt(path, format!("bad keyframe: {e}")))?;
        if out.last().is_some_and(|p| p.step >= kf.step) {
            return Err(corrupt(path, "keyframes out of order"));
        }
        out.push(kf);
        at += 36 + len;
    }
    Ok(out)
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
        let body = zstd::bulk::compress(raw, ZSTD_LEVEL).unwrap();
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&VERSION.to_le_bytes());
        file.extend_from_slice(&(body.len() as u32).to_le_bytes());
        file.extend_from_slice(blake3::hash(&body).as_bytes());
        file.extend_from_slice(&body);
        file
    }

    #[test]
    fn a_record_that_decompresses_past_the_bound_is_refused() {
        // A megabyte of zeros compresses to a few hundred bytes.
        let file = file_of(&vec![0u8; 1 << 20]);
        assert!(file.len() < 4096);
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
}
