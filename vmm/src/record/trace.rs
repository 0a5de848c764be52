//! The on-disk events of a run: a compact, versioned binary format with an
//! index by step.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! header   "RWTRACE\0" (8 bytes), version: u32, flags: u32 (0)
//! block*   compressed_len: u32, raw_len: u32, count: u32, check: u64,
//!          compressed_len bytes: zstd of `count` postcard-serialized events
//! index    one entry per block: offset: u64, first_step: u64,
//!          last_step: u64, count: u32            (28 bytes each)
//! trailer  index_offset: u64, blocks: u64, events: u64, index_check: u64,
//!          "RWTIDX\0\0" (8 bytes)
//! ```
//!
//! `check` is the first 8 bytes of the BLAKE3 of the compressed bytes (of the
//! index for `index_check`), so a flipped bit is an error and never a wrong
//! event. A block holds at most [`BLOCK_EVENTS`] events (fewer when they are
//! large); `first_step` and `last_step` are the least and greatest step in it,
//! so reading from step S decodes only the blocks that can hold S and later.
//! A trace without its trailer (the writer never finished) is an error.

use crate::run::Event;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const MAGIC: &[u8; 8] = b"RWTRACE\0";
pub const TRAILER_MAGIC: &[u8; 8] = b"RWTIDX\0\0";
pub const VERSION: u32 = 1;
/// Events per block, at most.
pub const BLOCK_EVENTS: usize = 256;
/// A block is closed early when its serialized events pass this size.
const BLOCK_RAW_BYTES: usize = 1 << 20;
/// No valid block is larger than this, compressed or not: a block closes
/// at [`BLOCK_RAW_BYTES`], and no one event comes near the rest. A reader
/// allocates at most this for a block, whatever its header says.
const MAX_BLOCK_BYTES: u32 = 16 << 20;
const ZSTD_LEVEL: i32 = 3;
const HEADER_LEN: u64 = 16;
const BLOCK_HEADER_LEN: u64 = 20;
const INDEX_ENTRY_LEN: u64 = 28;
const TRAILER_LEN: u64 = 40;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}: not a Rewind trace")]
    NotATrace { path: PathBuf },
    #[error("{path}: trace format version {found}, this build reads version {VERSION}")]
    Version { path: PathBuf, found: u32 },
    #[error("{path}: trace is truncated (the run was not finished?)")]
    Truncated { path: PathBuf },
    #[error("{path}: trace is corrupt: {what}")]
    Corrupt { path: PathBuf, what: String },
    #[error("trace writer: cannot serialize an event: {0}")]
    Serialize(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TraceError + '_ {
    move |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn check64(bytes: &[u8]) -> u64 {
    let h = blake3::hash(bytes);
    u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap())
}

/// Where one block is and which steps it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockInfo {
    pub offset: u64,
    pub first_step: u64,
    pub last_step: u64,
    pub count: u32,
}

/// Writes a trace as events arrive. Call [`TraceWriter::finish`] at the end;
/// a trace that was never finished cannot be read.
pub struct TraceWriter<W: Write = BufWriter<File>> {
    out: W,
    path: PathBuf,
    pos: u64,
    raw: Vec<u8>,
    count: u32,
    first: u64,
    last: u64,
    index: Vec<BlockInfo>,
    events: u64,
    compressor: zstd::bulk::Compressor<'static>,
}

impl TraceWriter<BufWriter<File>> {
    /// Creates (or truncates) the file at `path`.
    pub fn create(path: &Path) -> Result<Self, TraceError> {
        let f = File::create(path).map_err(io_err(path))?;
        TraceWriter::new(BufWriter::with_capacity(1 << 16, f), path)
    }
}

impl<W: Write> TraceWriter<W> {
    /// A writer onto any byte sink; `path` names it in errors.
    pub fn new(mut out: W, path: &Path) -> Result<Self, TraceError> {
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&0u32.to_le_bytes());
        out.write_all(&header).map_err(io_err(path))?;
        let compressor = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(io_err(path))?;
        Ok(TraceWriter {
            out,
            path: path.to_path_buf(),
            pos: HEADER_LEN,
            raw: Vec::new(),
            count: 0,
            first: u64::MAX,
            last: 0,
            index: Vec::new(),
            events: 0,
            compressor,
        })
    }

    /// Appends one event. Events are expected in step order, but any order
    /// is stored faithfully (the index keeps each block's least and greatest step).
    pub fn push(&mut self, event: &Event) -> Result<(), TraceError> {
        self.raw = postcard::to_extend(event, std::mem::take(&mut self.raw))
            .map_err(|e| TraceError::Serialize(e.to_string()))?;
        self.count += 1;
        self.events += 1;
        self.first = self.first.min(event.step);
        self.last = self.last.max(event.step);
        if self.count as usize >= BLOCK_EVENTS || self.raw.len() >= BLOCK_RAW_BYTES {
            self.flush_block()?;
        }
        Ok(())
    }

    /// Events pushed so far.
    pub fn len(&self) -> u64 {
        self.events
    }

    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    fn flush_block(&mut self) -> Result<(), TraceError> {
        if self.count == 0 {
            return Ok(());
        }
        let path = self.path.clone();
        let compressed = self.compressor.compress(&self.raw).map_err(io_err(&path))?;
        if compressed.len() as u64 > MAX_BLOCK_BYTES as u64
            || self.raw.len() as u64 > MAX_BLOCK_BYTES as u64
        {
            return Err(TraceError::Serialize(format!(
                "one block of events is {} bytes, more than the format allows",
                self.raw.len()
            )));
        }
        let mut head = Vec::with_capacity(BLOCK_HEADER_LEN as usize);
        head.extend_from_slice(&(compressed.len() as u32).to_le_bytes());
        head.extend_from_slice(&(self.raw.len() as u32).to_le_bytes());
        head.extend_from_slice(&self.count.to_le_bytes());
        head.extend_from_slice(&check64(&compressed).to_le_bytes());
        self.out.write_all(&head).map_err(io_err(&path))?;
        self.out.write_all(&compressed).map_err(io_err(&path))?;
        self.index.push(BlockInfo {
            offset: self.pos,
            first_step: self.first,
            last_step: self.last,
            count: self.count,
        });
        self.pos += BLOCK_HEADER_LEN + compressed.len() as u64;
        self.raw.clear();
        self.count = 0;
        self.first = u64::MAX;
        self.last = 0;
        Ok(())
    }

    /// Writes the last block, the index and the trailer, and flushes.
    /// Returns the sink and the number of events written.
    pub fn finish(mut self) -> Result<(W, u64), TraceError> {
        self.flush_block()?;
        let path = self.path.clone();
        let mut index = Vec::with_capacity(self.index.len() * INDEX_ENTRY_LEN as usize);
        for b in &self.index {
            index.extend_from_slice(&b.offset.to_le_bytes());
            index.extend_from_slice(&b.first_step.to_le_bytes());
            index.extend_from_slice(&b.last_step.to_le_bytes());
            index.extend_from_slice(&b.count.to_le_bytes());
        }
        let mut trailer = Vec::with_capacity(TRAILER_LEN as usize);
        trailer.extend_from_slice(&self.pos.to_le_bytes());
        trailer.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        trailer.extend_from_slice(&self.events.to_le_bytes());
        trailer.extend_from_slice(&check64(&index).to_le_bytes());
        trailer.extend_from_slice(TRAILER_MAGIC);
        self.out.write_all(&index).map_err(io_err(&path))?;
        self.out.write_all(&trailer).map_err(io_err(&path))?;
        self.out.flush().map_err(io_err(&path))?;
        Ok((self.out, self.events))
    }
}

/// Reads a finished trace.
pub struct TraceReader<R: Read + Seek = File> {
    src: R,
    path: PathBuf,
    index: Vec<BlockInfo>,
    /// Where the blocks end.
    index_offset: u64,
    events: u64,
}

impl TraceReader<File> {
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let f = File::open(path).map_err(io_err(path))?;
        TraceReader::new(f, path)
    }
}

impl<R: Read + Seek> TraceReader<R> {
    /// Reads and checks the header, trailer and index; `path` names the
    /// source in errors.
    pub fn new(mut src: R, path: &Path) -> Result<Self, TraceError> {
        let p = || path.to_path_buf();
        let corrupt = |what: &str| TraceError::Corrupt {
            path: path.to_path_buf(),
            what: what.to_string(),
        };
        let len = src.seek(SeekFrom::End(0)).map_err(io_err(path))?;
        if len < HEADER_LEN {
            return Err(if len == 0 {
                TraceError::Truncated { path: p() }
            } else {
                TraceError::NotATrace { path: p() }
            });
        }
        let mut header = [0u8; HEADER_LEN as usize];
        src.seek(SeekFrom::Start(0)).map_err(io_err(path))?;
        src.read_exact(&mut header).map_err(io_err(path))?;
        if &header[..8] != MAGIC {
            return Err(TraceError::NotATrace { path: p() });
        }
        let version = u32::from_le_bytes(header[8..12].try_into().unwrap());
        if version != VERSION {
            return Err(TraceError::Version {
                path: p(),
                found: version,
            });
        }
        if len < HEADER_LEN + TRAILER_LEN {
            return Err(TraceError::Truncated { path: p() });
        }
        let mut trailer = [0u8; TRAILER_LEN as usize];
        src.seek(SeekFrom::Start(len - TRAILER_LEN))
            .map_err(io_err(path))?;
        src.read_exact(&mut trailer).map_err(io_err(path))?;
        if &trailer[32..40] != TRAILER_MAGIC {
            return Err(TraceError::Truncated { path: p() });
        }
        let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let index_offset = u64_at(&trailer, 0);
        let blocks = u64_at(&trailer, 8);
        let events = u64_at(&trailer, 16);
        let index_check = u64_at(&trailer, 24);
        let index_len = blocks
            .checked_mul(INDEX_ENTRY_LEN)
            .ok_or_else(|| corrupt("bad block count"))?;
        if index_offset < HEADER_LEN
            || index_offset.checked_add(index_len) != Some(len - TRAILER_LEN)
        {
            return Err(corrupt("index does not fit the file"));
        }
        let mut raw = vec![0u8; index_len as usize];
        src.seek(SeekFrom::Start(index_offset))
            .map_err(io_err(path))?;
        src.read_exact(&mut raw).map_err(io_err(path))?;
        if check64(&raw) != index_check {
            return Err(corrupt("index checksum mismatch"));
        }
        let mut index = Vec::with_capacity(blocks as usize);
        let mut total = 0u64;
        for e in raw.chunks_exact(INDEX_ENTRY_LEN as usize) {
            let b = BlockInfo {
                offset: u64_at(e, 0),
                first_step: u64_at(e, 8),
                last_step: u64_at(e, 16),
                count: u32::from_le_bytes(e[24..28].try_into().unwrap()),
            };
            if b.offset
                .checked_add(BLOCK_HEADER_LEN)
                .is_none_or(|end| end > index_offset)
                || b.count == 0
            {
                return Err(corrupt("index entry points outside the blocks"));
            }
            if b.first_step > b.last_step {
                return Err(corrupt("index entry has an empty step range"));
            }
            total += b.count as u64;
            index.push(b);
        }
        // Offsets must increase strictly.
        if index.windows(2).any(|w| w[0].offset >= w[1].offset) {
            return Err(corrupt("index offsets out of order"));
        }
        if let Some(first) = index.first() {
            if first.offset != HEADER_LEN {
                return Err(corrupt("first block is not after the header"));
            }
        } else if index_offset != HEADER_LEN {
            return Err(corrupt("bytes between header and an empty index"));
        }
        if total != events {
            return Err(corrupt("event count does not match the index"));
        }
        Ok(TraceReader {
            src,
            path: path.to_path_buf(),
            index,
            index_offset,
            events,
        })
    }

    /// Number of events in the trace.
    pub fn len(&self) -> u64 {
        self.events
    }

    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    pub fn blocks(&self) -> &[BlockInfo] {
        &self.index
    }

    /// The greatest step of any event, if there is one.
    pub fn last_step(&self) -> Option<u64> {
        self.index.iter().map(|b| b.last_step).max()
    }

    /// Every event, in the order written.
    pub fn events(&mut self) -> Events<'_, R> {
        self.events_in(0, u64::MAX)
    }

    /// The events whose step is in `from..=to`, in the order written. Blocks
    /// that cannot hold such a step are not read.
    pub fn events_in(&mut self, from: u64, to: u64) -> Events<'_, R> {
        Events {
            reader: self,
            from,
            to,
            block: 0,
            buf: Vec::new(),
            pos: 0,
            left: 0,
            failed: false,
        }
    }

    /// Reads and decompresses block `i`, checking it against the index.
    fn read_block(&mut self, i: usize) -> Result<Vec<u8>, TraceError> {
        let b = self.index[i];
        let path = self.path.clone();
        let corrupt = |what: String| TraceError::Corrupt {
            path: path.clone(),
            what,
        };
        let next = self
            .index
            .get(i + 1)
            .map(|n| n.offset)
            .unwrap_or(self.index_offset);
        self.src
            .seek(SeekFrom::Start(b.offset))
            .map_err(io_err(&path))?;
        let mut head = [0u8; BLOCK_HEADER_LEN as usize];
        self.src.read_exact(&mut head).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                TraceError::Truncated { path: path.clone() }
            } else {
                io_err(&path)(e)
            }
        })?;
        let clen = u32::from_le_bytes(head[0..4].try_into().unwrap());
        let rlen = u32::from_le_bytes(head[4..8].try_into().unwrap());
        let count = u32::from_le_bytes(head[8..12].try_into().unwrap());
        let check = u64::from_le_bytes(head[12..20].try_into().unwrap());
        if clen > MAX_BLOCK_BYTES || rlen > MAX_BLOCK_BYTES {
            return Err(corrupt(format!("block {i} claims an impossible size")));
        }
        if count != b.count {
            return Err(corrupt(format!("block {i} count differs from the index")));
        }
        let end = b.offset + BLOCK_HEADER_LEN + clen as u64;
        if end != next {
            return Err(corrupt(format!("block {i} overlaps the next one")));
        }
        let mut compressed = vec![0u8; clen as usize];
        self.src.read_exact(&mut compressed).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                TraceError::Truncated { path: path.clone() }
            } else {
                io_err(&path)(e)
            }
        })?;
        if check64(&compressed) != check {
            return Err(corrupt(format!("block {i} checksum mismatch")));
        }
        let raw = zstd::bulk::decompress(&compressed, rlen as usize)
            .map_err(|e| corrupt(format!("block {i}: {e}")))?;
        if raw.len() != rlen as usize {
            return Err(corrupt(format!("block {i} decompressed to the wrong size")));
        }
        Ok(raw)
    }
}

/// Iterator over a range of a trace's events; yields an error (once, then
/// stops) when the file is damaged.
pub struct Events<'a, R: Read + Seek> {
    reader: &'a mut TraceReader<R>,
    from: u64,
    to: u64,
    block: usize,
    buf: Vec<u8>,
    pos: usize,
    left: u32,
    failed: bool,
}

impl<R: Read + Seek> Iterator for Events<'_, R> {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            if self.left == 0 {
                if self.pos != self.buf.len() {
                    self.failed = true;
                    return Some(Err(TraceError::Corrupt {
                        path: self.reader.path.clone(),
                        what: format!("block {} has trailing bytes", self.block - 1),
                    }));
                }
                // Next block that can hold a step in range.
                loop {
                    let b = self.reader.index.get(self.block)?;
                    if b.last_step >= self.from && b.first_step <= self.to {
                        break;
                    }
                    self.block += 1;
                }
                match self.reader.read_block(self.block) {
                    Ok(buf) => {
                        self.left = self.reader.index[self.block].count;
                        self.buf = buf;
                        self.pos = 0;
                        self.block += 1;
                    }
                    Err(e) => {
                        self.failed = true;
                        return Some(Err(e));
                    }
                }
            }
            match postcard::take_from_bytes::<Event>(&self.buf[self.pos..]) {
                Ok((ev, rest)) => {
                    self.pos = self.buf.len() - rest.len();
                    self.left -= 1;
                    if ev.step >= self.from && ev.step <= self.to {
                        return Some(Ok(ev));
                    }
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(TraceError::Corrupt {
                        path: self.reader.path.clone(),
                        what: format!("block {}: {e}", self.block - 1),
                    }));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{EventKind, ExitStatus};
    use std::io::Cursor;

    fn ev(step: u64, i: u64) -> Event {
        let kind = match i % 4 {
            0 => EventKind::Syscall {
                nr: 1,
                name: "write".into(),
                text: format!("write(1, \"line {i}\\n\") = 7"),
                ret: 7,
            },
            1 => EventKind::ThreadStart { parent: 1 },
            2 => EventKind::Signal {
                signo: 11,
                code: 1,
                addr: 0x108,
            },
            _ => EventKind::ProcessExit {
                status: ExitStatus::Exited(i as i32),
            },
        };
        Event {
            step,
            pid: 1,
            tid: 1 + (i % 3) as u32,
            kind,
        }
    }

    fn sample(n: u64) -> Vec<Event> {
        // Steps increase, with some repeated (several events at one step).
        (0..n).map(|i| ev(i * 3 / 2, i)).collect()
    }

    fn write(events: &[Event]) -> Vec<u8> {
        let mut w = TraceWriter::new(Vec::new(), Path::new("mem")).unwrap();
        for e in events {
            w.push(e).unwrap();
        }
        let (buf, n) = w.finish().unwrap();
        assert_eq!(n, events.len() as u64);
        buf
    }

    fn read(bytes: Vec<u8>) -> Result<TraceReader<Cursor<Vec<u8>>>, TraceError> {
        TraceReader::new(Cursor::new(bytes), Path::new("mem"))
    }

    #[test]
    fn round_trip() {
        for n in [0u64, 1, 255, 256, 257, 1000] {
            let events = sample(n);
            let mut r = read(write(&events)).unwrap();
            assert_eq!(r.len(), n);
            let got: Vec<Event> = r.events().collect::<Result<_, _>>().unwrap();
            assert_eq!(got, events);
            assert_eq!(r.blocks().len() as u64, n.div_ceil(BLOCK_EVENTS as u64));
        }
    }

    #[test]
    fn round_trip_file() {
        let dir = std::env::temp_dir().join(format!("rewind-trace-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("events");
        let events = sample(600);
        let mut w = TraceWriter::create(&path).unwrap();
        for e in &events {
            w.push(e).unwrap();
        }
        w.finish().unwrap();
        let mut r = TraceReader::open(&path).unwrap();
        let got: Vec<Event> = r.events().collect::<Result<_, _>>().unwrap();
        assert_eq!(got, events);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn seek_by_step() {
        let events = sample(2000);
        let mut r = read(write(&events)).unwrap();
        for (from, to) in [
            (0, 0),
            (1, 1),
            (500, 600),
            (1499, u64::MAX),
            (2999, 5000),
            (7, 3),
        ] {
            let want: Vec<Event> = events
                .iter()
                .filter(|e| e.step >= from && e.step <= to)
                .cloned()
                .collect();
            let got: Vec<Event> = r.events_in(from, to).collect::<Result<_, _>>().unwrap();
            assert_eq!(got, want, "range {from}..={to}");
        }
        assert_eq!(r.last_step(), Some(events.last().unwrap().step));
    }

    #[test]
    fn seek_reads_only_needed_blocks() {
        // Corrupt an early block: a read from a later step never touches it.
        let events = sample(2000);
        let mut bytes = write(&events);
        let r = read(bytes.clone()).unwrap();
        let b0 = r.blocks()[0];
        let late = r.blocks()[5].first_step;
        bytes[b0.offset as usize + BLOCK_HEADER_LEN as usize + 3] ^= 0xff;
        let mut r = read(bytes).unwrap();
        let got: Vec<Event> = r
            .events_in(late, u64::MAX)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(got.first().map(|e| e.step), Some(late));
        assert!(r.events().any(|e| e.is_err()));
    }

    #[test]
    fn corruption_is_an_error() {
        let events = sample(700);
        let good = write(&events);
        // Every single-byte flip gives an error (or, in padding-free
        // formats, at worst identical events); never a panic or wrong events.
        for i in (0..good.len()).step_by(7) {
            let mut bad = good.clone();
            bad[i] ^= 0x5a;
            match read(bad) {
                Err(_) => {}
                Ok(mut r) => {
                    let got: Result<Vec<Event>, _> = r.events().collect();
                    if let Ok(got) = got {
                        assert_eq!(got, events, "flip at {i} gave wrong events");
                    }
                }
            }
        }
    }

    #[test]
    fn truncation_is_an_error() {
        let good = write(&sample(700));
        for cut in [0, 1, 8, 15, 16, 17, 40, 100, good.len() / 2, good.len() - 1] {
            let bad = good[..cut].to_vec();
            assert!(read(bad).is_err(), "cut at {cut} was accepted");
        }
        // Unfinished writer: header and blocks but no trailer.
        let mut w = TraceWriter::new(Vec::new(), Path::new("mem")).unwrap();
        for e in sample(600) {
            w.push(&e).unwrap();
        }
        let partial = w.out.clone();
        assert!(matches!(read(partial), Err(TraceError::Truncated { .. })));
    }

    #[test]
    fn garbage_and_versions() {
        assert!(matches!(
            read(b"hello world, this is not a trace at all....".to_vec()),
            Err(TraceError::NotATrace { .. })
        ));
        let mut v2 = write(&sample(3));
        v2[8] = 2;
        assert!(matches!(
            read(v2),
            Err(TraceError::Version { found: 2, .. })
        ));
    }
}
