//! Mutation tests of the decoders a file reaches (issue 12 item 5), over
//! inputs derived from the files of a real run: its trace (`events`, with
//! its index), its `keyframes`, its `manifest.json`, and its exports (`.rwd`,
//! read, and imported into a scratch store). Each mutation is a truncation,
//! a bit flip, a run of random bytes, a length field pointed past the end,
//! or a spliced copy; the format-aware ones also fix the checksums after
//! changing a length, an index entry, or the compressed data inside, so the
//! decoder gets past its checksums to what they cover. Every input must give
//! Ok or an error: never a panic, and never one allocation above
//! [`MAX_ALLOCATION`] (a counting allocator watches). Last, a keyframe's
//! kernel state, mutated, is restored by `rewind ps`: one line or a look,
//! never a crash.
//!
//! The seed is fixed. `REWIND_FUZZ_ROUNDS` sets the rounds per file
//! (default 1,500, two mutations each; a tenth of the plain export's are
//! also imported, and the replayable export, a megabyte, gets a twentieth
//! of the rounds); a developer's longer run:
//! `REWIND_FUZZ_ROUNDS=100000 cargo test --release -p rewind-tests --test mutations`.

use rewind_tests::{guest_arg, Home};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use vmm::record::trace::TraceReader;
use vmm::run::keyframe;
use vmm::run::manifest::Manifest;
use vmm::store::archive::{self, ArchiveError, ArchiveWriter, Entries, Entry, Kind, Visitor};

/// No decoder may ask for more than this in one allocation, whatever the
/// file says (the largest legitimate one is a trace block, 16 MiB at most).
const MAX_ALLOCATION: usize = 64 << 20;

/// The system allocator, noting each thread's largest allocation.
struct Watched;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is passed to the system allocator unchanged.
unsafe impl GlobalAlloc for Watched {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Watched = Watched;

/// Runs `decode` on `input`; fails if it allocates too much at once.
#[track_caller]
fn bounded<T>(what: &str, input: &[u8], decode: impl FnOnce(&[u8]) -> T) -> T {
    LARGEST.with(|l| l.set(0));
    let out = decode(input);
    let largest = LARGEST.with(|l| l.get());
    assert!(
        largest <= MAX_ALLOCATION,
        "{what}: one allocation of {largest} bytes for an input of {} bytes",
        input.len()
    );
    out
}

/// The engine's SplitMix64: the same mutations on every run.
struct Rng(vmm::schedule::Rng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn rounds() -> usize {
    std::env::var("REWIND_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500)
}

/// A value a length or offset field should never hold.
fn past_the_end(rng: &mut Rng, len: usize) -> u64 {
    let v = [
        u64::MAX,
        u32::MAX as u64,
        len as u64 + 1,
        len as u64 * 2,
        1 << 40,
        (1 << 31) + 7,
    ];
    v[rng.below(v.len())]
}

/// One to four blind mutations of `b`.
fn mutate_bytes(rng: &mut Rng, b: &mut Vec<u8>) {
    let good = b.clone();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len());
        match rng.below(6) {
            0 => b.truncate(at),
            1 if !b.is_empty() => b[at] ^= 1 << rng.below(8),
            2 => {
                let end = (at + 1 + rng.below(16)).min(b.len());
                for x in &mut b[at..end] {
                    *x = rng.next() as u8;
                }
            }
            3 if at + 8 <= b.len() => {
                let v = past_the_end(rng, good.len());
                b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            }
            4 if at + 4 <= b.len() => {
                let v = past_the_end(rng, good.len()) as u32;
                b[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => {
                let from = rng.below(good.len());
                let piece: Vec<u8> = good[from..].iter().take(64).copied().collect();
                b.splice(at..at, piece);
            }
        }
    }
}

/// The files of one real run, and its exports.
struct Real {
    events: Vec<u8>,
    keyframes: Vec<u8>,
    manifest: Vec<u8>,
    plain_rwd: Vec<u8>,
    replayable_rwd: Vec<u8>,
}

/// Records the run once for every test (and replays it).
fn real() -> &'static Real {
    static REAL: std::sync::OnceLock<Real> = std::sync::OnceLock::new();
    REAL.get_or_init(|| {
        let home = Home::new();
        // 20,000 steps or more: a keyframe, whatever the machine's speed.
        let run = home.run(&["-q", "--", &guest_arg("long"), "20000"]);
        home.replay_identical(&run.id);
        let dir = home.path().join("runs").join(&run.id);
        let out = tempfile::tempdir().unwrap();
        let plain = out.path().join("plain.rwd");
        let full = out.path().join("full.rwd");
        home.ok(&["export", &run.id, "-o", plain.to_str().unwrap()]);
        home.ok(&[
            "export",
            "--replayable",
            &run.id,
            "-o",
            full.to_str().unwrap(),
        ]);
        let read = |p: &Path| std::fs::read(p).unwrap();
        let real = Real {
            events: read(&dir.join("events")),
            keyframes: read(&dir.join("keyframes")),
            manifest: read(&dir.join("manifest.json")),
            plain_rwd: read(&plain),
            replayable_rwd: read(&full),
        };
        assert!(
            !keyframe::decode(&real.keyframes, Path::new("keyframes"))
                .unwrap()
                .is_empty(),
            "the run kept no keyframe"
        );
        real
    })
}

// ---------------------------------------------------------------- trace

fn check64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(blake3::hash(bytes).as_bytes()[..8].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// How far a damaged trace was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reached {
    /// Refused when opened: header, trailer or index.
    Refused,
    /// Opened; an event or block was refused.
    Opened,
    /// Read to the end.
    Whole,
}

/// Reads a trace whole, and from a step in the middle.
fn read_trace(bytes: &[u8]) -> Reached {
    let path = Path::new("events");
    let Ok(mut r) = TraceReader::new(std::io::Cursor::new(bytes), path) else {
        return Reached::Refused;
    };
    let mid = r.last_step().unwrap_or(0) / 2;
    let whole = r.events().all(|e| e.is_ok());
    let middle = r.events_in(mid, mid + 100).all(|e| e.is_ok());
    if whole && middle {
        Reached::Whole
    } else {
        Reached::Opened
    }
}

/// A trace's blocks (header and compressed bytes) and their index steps.
struct Trace {
    blocks: Vec<([u8; 20], Vec<u8>, u64, u64)>,
    events: u64,
}

fn parse_trace(b: &[u8]) -> Trace {
    let t = b.len() - 40;
    let (index_offset, blocks, events) = (u64_at(b, t), u64_at(b, t + 8), u64_at(b, t + 16));
    let mut out = Vec::new();
    for i in 0..blocks as usize {
        let e = index_offset as usize + i * 28;
        let (off, first, last) = (u64_at(b, e) as usize, u64_at(b, e + 8), u64_at(b, e + 16));
        let head: [u8; 20] = b[off..off + 20].try_into().unwrap();
        let clen = u32::from_le_bytes(head[..4].try_into().unwrap()) as usize;
        out.push((head, b[off + 20..off + 20 + clen].to_vec(), first, last));
    }
    Trace {
        blocks: out,
        events,
    }
}

/// The trace written back, with every offset and checksum made right.
fn write_trace(t: &Trace, counts: &[u32]) -> Vec<u8> {
    write_trace_with(t, counts, None)
}

/// The same, but block `i`'s index entry says it is at `offset`.
fn write_trace_with(t: &Trace, counts: &[u32], wrong: Option<(usize, u64)>) -> Vec<u8> {
    let mut b = b"RWTRACE\0".to_vec();
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    let mut index = Vec::new();
    for (i, ((head, data, first, last), count)) in t.blocks.iter().zip(counts).enumerate() {
        let offset = match wrong {
            Some((w, offset)) if w == i => offset,
            _ => b.len() as u64,
        };
        index.extend_from_slice(&offset.to_le_bytes());
        index.extend_from_slice(&first.to_le_bytes());
        index.extend_from_slice(&last.to_le_bytes());
        index.extend_from_slice(&count.to_le_bytes());
        b.extend_from_slice(head);
        b.extend_from_slice(data);
    }
    let index_offset = b.len() as u64;
    b.extend_from_slice(&index);
    b.extend_from_slice(&index_offset.to_le_bytes());
    b.extend_from_slice(&(t.blocks.len() as u64).to_le_bytes());
    b.extend_from_slice(&t.events.to_le_bytes());
    b.extend_from_slice(&check64(&index).to_le_bytes());
    b.extend_from_slice(b"RWTIDX\0\0");
    b
}

/// A mutation past the checksums: a block's header fields, its compressed
/// bytes or the events inside them, or an index entry.
fn crafted_trace(rng: &mut Rng, good: &Trace) -> Vec<u8> {
    let mut t = Trace {
        blocks: good.blocks.clone(),
        events: good.events,
    };
    let mut counts: Vec<u32> = t
        .blocks
        .iter()
        .map(|(h, ..)| u32::from_le_bytes(h[8..12].try_into().unwrap()))
        .collect();
    let i = rng.below(t.blocks.len());
    let mut wrong = None;
    match rng.below(6) {
        0 => {
            // A header length or count (not covered by the block check).
            let field = rng.below(3) * 4;
            let v = past_the_end(rng, t.blocks[i].1.len()) as u32;
            t.blocks[i].0[field..field + 4].copy_from_slice(&v.to_le_bytes());
        }
        1 => {
            // The compressed bytes, the check made right: zstd gets garbage.
            mutate_bytes(rng, &mut t.blocks[i].1);
            let (head, data, ..) = &mut t.blocks[i];
            head[..4].copy_from_slice(&(data.len() as u32).to_le_bytes());
            head[12..20].copy_from_slice(&check64(data).to_le_bytes());
        }
        2 => {
            // The events themselves: postcard gets garbage, lengths and all.
            let (head, data, ..) = &mut t.blocks[i];
            let rlen = u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize;
            let mut raw = zstd::bulk::decompress(data, rlen).unwrap();
            mutate_bytes(rng, &mut raw);
            *data = zstd::bulk::compress(&raw, 3).unwrap();
            head[..4].copy_from_slice(&(data.len() as u32).to_le_bytes());
            head[4..8].copy_from_slice(&(raw.len() as u32).to_le_bytes());
            head[12..20].copy_from_slice(&check64(data).to_le_bytes());
        }
        3 => {
            // An index entry's steps or count.
            match rng.below(3) {
                0 => t.blocks[i].2 = rng.next(),
                1 => t.blocks[i].3 = past_the_end(rng, 0),
                _ => counts[i] = rng.next() as u32,
            }
        }
        4 => {
            // An index entry's offset, anywhere (the index check made right).
            let offset = match rng.below(3) {
                0 => past_the_end(rng, 0),
                1 => rng.next(),
                _ => rng.below(64) as u64,
            };
            wrong = Some((i, offset));
        }
        _ => t.events = past_the_end(rng, good.events as usize),
    }
    write_trace_with(&t, &counts, wrong)
}

#[test]
fn the_trace_and_its_index() {
    let real = real();
    let whole = parse_trace(&real.events);
    let counts: Vec<u32> = whole
        .blocks
        .iter()
        .map(|(h, ..)| u32::from_le_bytes(h[8..12].try_into().unwrap()))
        .collect();
    let again = write_trace(&whole, &counts);
    assert_eq!(again, real.events, "the test's own writer");
    // Its first three blocks: every part of the format, at a tenth of the cost.
    let parsed = Trace {
        blocks: whole.blocks[..3].to_vec(),
        events: counts[..3].iter().map(|&c| u64::from(c)).sum(),
    };
    let good = &write_trace(&parsed, &counts[..3]);
    let reader = TraceReader::new(std::io::Cursor::new(good), Path::new("events"));
    assert_eq!(reader.unwrap().len(), parsed.events);
    let mut rng = Rng(vmm::schedule::Rng::new(0x0074_7261_6365));
    let mut reached = std::collections::BTreeMap::new();
    let mut n = 0;
    for _ in 0..rounds() {
        let mut b = good.clone();
        mutate_bytes(&mut rng, &mut b);
        bounded("trace", &b, read_trace);
        let b = crafted_trace(&mut rng, &parsed);
        *reached
            .entry(bounded("crafted trace", &b, read_trace))
            .or_insert(0) += 1;
        n += 2;
    }
    eprintln!(
        "trace: {n} mutations of a {}-byte trace; the crafted ones: {reached:?}",
        good.len()
    );
    // Past the checksums: some crafted traces open, and some of those fail
    // inside a block (the events' decoder was reached).
    assert!(
        reached.get(&Reached::Opened).is_some_and(|&k| k > 0),
        "{reached:?}"
    );
    assert!(
        reached.get(&Reached::Refused).is_some_and(|&k| k > 0),
        "{reached:?}"
    );
}

// ---------------------------------------------------------------- keyframes

/// A keyframes file's records: their compressed bodies.
fn keyframe_records(b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 8;
    while at < b.len() {
        let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        out.push(b[at + 36..at + 36 + len].to_vec());
        at += 36 + len;
    }
    out
}

fn keyframes_file(header: &[u8], bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut b = header[..8].to_vec();
    for body in bodies {
        b.extend_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(blake3::hash(body).as_bytes());
        b.extend_from_slice(body);
    }
    b
}

#[test]
fn keyframes() {
    let real = real();
    let all = keyframe_records(&real.keyframes);
    let again = keyframes_file(&real.keyframes, &all);
    assert_eq!(again, real.keyframes, "the test's own writer");
    // Its first two keyframes.
    let bodies = all[..all.len().min(2)].to_vec();
    let good = &keyframes_file(&real.keyframes, &bodies);
    let raws: Vec<Vec<u8>> = bodies
        .iter()
        .map(|b| zstd::stream::decode_all(&b[..]).unwrap())
        .collect();
    let decode = |b: &[u8]| keyframe::decode(b, Path::new("keyframes")).map_err(|e| e.to_string());
    // Crafted records pass the checksum: they fail, if they do, in what it covers.
    let mut past_checksum = 0;
    let mut rng = Rng(vmm::schedule::Rng::new(0x6b66));
    let mut n = 0;
    for _ in 0..rounds() {
        let mut b = good.clone();
        mutate_bytes(&mut rng, &mut b);
        let _ = bounded("keyframes", &b, decode);
        // Past the checksum: the keyframe's own bytes (postcard: counts,
        // lengths, registers, the kernel's state), recompressed.
        let i = rng.below(raws.len());
        let mut raw = raws[i].clone();
        mutate_bytes(&mut rng, &mut raw);
        let mut crafted = bodies.clone();
        crafted[i] = zstd::bulk::compress(&raw, 3).unwrap();
        let b = keyframes_file(good, &crafted);
        if let Err(e) = bounded("crafted keyframes", &b, decode) {
            assert!(!e.contains("checksum"), "{e}");
            past_checksum += 1;
        }
        n += 2;
    }
    eprintln!(
        "keyframes: {n} mutations of a {}-byte file of {} keyframes; \
         {past_checksum} crafted ones refused past the checksum",
        good.len(),
        bodies.len()
    );
    assert!(past_checksum > 0);
}

// ---------------------------------------------------------------- manifest

/// A JSON value's leaves, replaced now and then by hostile ones.
fn mutate_json(rng: &mut Rng, v: &mut serde_json::Value) {
    use serde_json::Value;
    let hostile = |rng: &mut Rng| -> Value {
        match rng.below(8) {
            0 => Value::from(u64::MAX),
            1 => Value::from(-1),
            2 => Value::from(0),
            3 => Value::from("x".repeat(1 + rng.below(70_000))),
            4 => Value::Null,
            5 => Value::from(vec![Value::from(u64::MAX); 1 + rng.below(1000)]),
            6 => Value::from(1u64 << 40),
            _ => Value::from(1.5e300),
        }
    };
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            if keys.is_empty() {
                return;
            }
            let k = &keys[rng.below(keys.len())];
            if rng.below(3) == 0 {
                m.insert(k.clone(), hostile(rng));
            } else {
                mutate_json(rng, m.get_mut(k).unwrap());
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = rng.below(a.len());
            mutate_json(rng, &mut a[i]);
        }
        leaf => *leaf = hostile(rng),
    }
}

#[test]
fn the_manifest() {
    let real = real();
    let good = &real.manifest;
    let check = |b: &[u8]| {
        if let Ok(m) = serde_json::from_slice::<Manifest>(b) {
            if m.validate().is_ok() {
                let _ = m.id();
            }
        }
    };
    let value: serde_json::Value = serde_json::from_slice(good).unwrap();
    let mut rng = Rng(vmm::schedule::Rng::new(0x6d61_6e69));
    let mut n = 0;
    for _ in 0..rounds() {
        let mut b = good.clone();
        mutate_bytes(&mut rng, &mut b);
        bounded("manifest", &b, check);
        let mut v = value.clone();
        for _ in 0..1 + rng.below(3) {
            mutate_json(&mut rng, &mut v);
        }
        let b = serde_json::to_vec(&v).unwrap();
        bounded("crafted manifest", &b, check);
        n += 2;
    }
    eprintln!("manifest: {n} mutations");
}

// ---------------------------------------------------------------- .rwd

/// Counts what it is told, keeping nothing.
struct Count(u64);

impl Visitor for Count {
    fn begin(&mut self, _: &Entry) -> Result<(), ArchiveError> {
        Ok(())
    }
    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError> {
        self.0 += chunk.len() as u64;
        Ok(())
    }
    fn end(&mut self, _: &Entry) -> Result<(), ArchiveError> {
        Ok(())
    }
}

fn write_rwd(entries: &[(Entry, Vec<u8>)]) -> Vec<u8> {
    let mut w = ArchiveWriter::new(Vec::new()).unwrap();
    for (e, data) in entries {
        w.add(e.kind, e.mode, &e.path, data).unwrap();
    }
    w.finish().unwrap().0
}

/// A `.rwd` whose checksums are all right, with one entry changed: its
/// JSON, its bytes, its path, mode or kind, or an entry added twice.
fn crafted_rwd(rng: &mut Rng, good: &[(Entry, Vec<u8>)]) -> Vec<u8> {
    let mut entries = good.to_vec();
    let i = rng.below(entries.len());
    let (e, data) = &mut entries[i];
    match rng.below(6) {
        0 if e.path.ends_with(".json") => {
            if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(data) {
                mutate_json(rng, &mut v);
                *data = serde_json::to_vec(&v).unwrap();
            }
        }
        1 => mutate_bytes(rng, data),
        2 => {
            let paths = [
                "../escape",
                "/etc/passwd",
                "run/../../x",
                "image/root/a/../../../b",
                "image/root/lnk/inside",
                "page/00",
                "run/.hidden",
                "run/a/b",
                "image/root",
                "",
                "rwd.json",
            ];
            e.path = paths[rng.below(paths.len())].to_string();
        }
        3 => e.mode = rng.next() as u32,
        4 => {
            e.kind = [Kind::File, Kind::Dir, Kind::Symlink][rng.below(3)];
            if e.kind == Kind::Symlink {
                *data = b"/etc/passwd".to_vec();
            }
        }
        _ => {
            let dup = entries[rng.below(good.len())].clone();
            let at = rng.below(entries.len());
            entries.insert(at, dup);
        }
    }
    write_rwd(&entries)
}

fn rwd_case(name: &str, good: &[u8], rounds: usize, imports: usize) {
    let mut all = Entries::default();
    archive::read(good, &mut all).unwrap();
    assert_eq!(write_rwd(&all.0), good, "the test's own writer");
    let read = |b: &[u8]| archive::read(b, &mut Count(0));
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("in.rwd");
    let import = |b: &[u8]| {
        let store = vmm::store::Store::at(scratch.path().join("home"));
        std::fs::write(&file, b).unwrap();
        let imported = store.import(&file);
        let _ = std::fs::remove_dir_all(scratch.path().join("home"));
        imported
    };
    let mut rng = Rng(vmm::schedule::Rng::new(0x0072_7764 + good.len() as u64));
    let mut n = 0;
    let mut refused = 0;
    for round in 0..rounds {
        let mut b = good.to_vec();
        mutate_bytes(&mut rng, &mut b);
        let _ = bounded(name, &b, read);
        // Every checksum of a crafted file is right: the format reads, and
        // an import meets what the checksums cannot vouch for.
        let b = crafted_rwd(&mut rng, &all.0);
        assert!(
            bounded(name, &b, read).is_ok(),
            "{name}: a crafted file is unreadable"
        );
        n += 2;
        if round < imports {
            if bounded(name, &b, import).is_err() {
                refused += 1;
            }
            n += 1;
        }
    }
    eprintln!(
        "{name}: {n} mutations of a {}-byte file, {imports} of them imported, \
         {refused} of those refused",
        good.len()
    );
    assert!(
        imports == 0 || refused > 0,
        "{name}: no crafted import was refused"
    );
}

#[test]
fn exports_read_and_imported() {
    let real = real();
    rwd_case("plain .rwd", &real.plain_rwd, rounds(), rounds() / 10);
    // A megabyte (the program): fewer rounds.
    let few = rounds() / 20;
    rwd_case("replayable .rwd", &real.replayable_rwd, few, few / 5);
}

#[test]
#[should_panic(expected = "one allocation of")]
fn the_allocation_watch_sees_a_large_one() {
    bounded("a large vector", b"", |_| {
        vec![1u8; MAX_ALLOCATION + 1].len()
    });
}

/// A keyframe whose kernel state (threads, signals, address spaces, the
/// scheduler: what `Kernel::restore` checks) is mutated, with every
/// checksum right, then restored by `rewind ps` seeking past it: a one-line
/// error, or a look at the machine; never a panic or a crash.
#[test]
fn restoring_a_crafted_kernel_state() {
    let home = Home::new();
    let run = home.run(&["-q", "--", &guest_arg("long"), "20000"]);
    let file = home.path().join("runs").join(&run.id).join("keyframes");
    let good = std::fs::read(&file).unwrap();
    let kfs = keyframe::decode(&good, &file).unwrap();
    let last = kfs.last().expect("a keyframe").clone();
    let at = (last.step + 1).to_string();
    let mut rng = Rng(vmm::schedule::Rng::new(0x6b65_726e));
    let (mut refused, mut looked) = (0, 0);
    let pages = vmm::store::pages::PageStore::at(home.path().join("pages"));
    let mut skipped = 0;
    for _ in 0..(rounds() / 30).max(10) {
        let mut crafted = last.clone();
        mutate_bytes(&mut rng, &mut crafted.kernel);
        // One that does not decode is not restorable: the seek starts from
        // an earlier keyframe or step 0, as for a keyframe of another build.
        if !vmm::kernel::save_restore::restorable(&crafted, &pages) {
            skipped += 1;
            continue;
        }
        let mut w = keyframe::KeyframeWriter::create(&file).unwrap();
        for k in &kfs[..kfs.len() - 1] {
            w.push(k).unwrap();
        }
        w.push(&crafted).unwrap();
        drop(w);
        let out = home.rewind(&["ps", &run.id, "--at", &at]);
        assert!(
            !out.stderr.contains("panicked") && out.code != 101 && out.code < 128,
            "a crafted kernel state crashed the monitor:\n{out}"
        );
        if out.code == 0 {
            looked += 1;
        } else {
            let lines = out.stderr_lines();
            assert!(
                lines.len() == 1 && lines[0].starts_with("rewind: error: "),
                "not one line:\n{out}"
            );
            refused += 1;
        }
    }
    std::fs::write(&file, &good).unwrap();
    eprintln!(
        "crafted kernel states: {skipped} did not decode (not restorable), \
         {refused} refused by the restore's checks, {looked} restored and looked at"
    );
    assert!(refused + looked > 0, "no crafted kernel state decoded");
}
