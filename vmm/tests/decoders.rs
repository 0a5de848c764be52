//! Mutation tests of the decoders a file reaches: the thread-switch file
//! and the manifest (parsed, then `Manifest::validate`). Every truncation,
//! every single bit flip, and seeded multi-byte mutations (length fields
//! pointed past the end) must give Ok or an error, never a panic.
//!
//! Bounded for the suite by `REWIND_FUZZ_ROUNDS` (default 2,000 seeded
//! mutations per input on top of the exhaustive ones); a developer runs
//! the longer search with `REWIND_FUZZ_ROUNDS=1000000 cargo test -p vmm
//! --test decoders --release`. The trace, keyframes, manifest and `.rwd`
//! files of a real run: `tests/tests/mutations.rs`.

use vmm::record::switches::{self, Switch};
use vmm::run::manifest::Manifest;

/// The engine's SplitMix64: the same mutations on every run.
struct Rng(vmm::schedule::Rng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
}

fn rounds() -> u64 {
    std::env::var("REWIND_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

/// Calls `check` on every truncation and single bit flip of `good`, then on
/// seeded mutations: runs of random bytes, 8-byte words set to lengths
/// past the end, spliced copies. Returns how many inputs it tried.
fn mutate(good: &[u8], check: impl Fn(&[u8])) -> u64 {
    let mut n = 0;
    for len in 0..good.len() {
        check(&good[..len]);
        n += 1;
    }
    for bit in 0..good.len() * 8 {
        let mut b = good.to_vec();
        b[bit / 8] ^= 1 << (bit % 8);
        check(&b);
        n += 1;
    }
    let mut rng = Rng(vmm::schedule::Rng::new(0x5265_7769_6e64));
    for _ in 0..rounds() {
        let mut b = good.to_vec();
        for _ in 0..1 + rng.next() % 4 {
            let at = (rng.next() as usize) % b.len().max(1);
            match rng.next() % 4 {
                0 => {
                    let end = (at + 1 + (rng.next() % 16) as usize).min(b.len());
                    for x in &mut b[at..end] {
                        *x = rng.next() as u8;
                    }
                }
                1 if at + 8 <= b.len() => {
                    let past = [u64::MAX, u32::MAX as u64, b.len() as u64 + 1, 1 << 40];
                    let v = past[(rng.next() % 4) as usize];
                    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
                2 => {
                    let from = (rng.next() as usize) % good.len().max(1);
                    let piece: Vec<u8> = good[from..].iter().take(32).copied().collect();
                    b.splice(at..at, piece);
                }
                _ => b.truncate(at),
            }
        }
        check(&b);
        n += 1;
    }
    n
}

#[test]
fn switches_decoder_never_panics() {
    let good = switches::encode(&[
        Switch {
            step: 1,
            pid: 1000,
            tid: 1000,
        },
        Switch {
            step: 36,
            pid: 1000,
            tid: 1001,
        },
        Switch {
            step: 40,
            pid: 1000,
            tid: 1002,
        },
    ]);
    assert!(switches::decode(&good).is_ok());
    let n = mutate(&good, |b| {
        if let Ok(s) = switches::decode(b) {
            assert!(s.windows(2).all(|w| w[0].step <= w[1].step));
        }
    });
    assert!(n > 1000, "{n}");
}

#[test]
fn manifest_parse_and_validate_never_panic() {
    let good = format!(
        r#"{{"engine":"{}","program":"/bin/p","argv":["/bin/p","x"],"env":["HOME=/root"],
        "cwd":"/","image":"{}","stdin":null,"epoch":1700000000,"seed":0,"cores":1,
        "mem":2147483648,"quantum_ns":5000,"schedule":3,"schedule_from":5,
        "perturb":[{{"step":7,"what":"reschedule"}}],"reseed":[9,4]}}"#,
        vmm::run::manifest::ENGINE_VERSION,
        "ab".repeat(32)
    );
    let m: Manifest = serde_json::from_str(&good).unwrap();
    assert_eq!(m.validate(), Ok(()));
    let n = mutate(good.as_bytes(), |b| {
        if let Ok(m) = serde_json::from_slice::<Manifest>(b) {
            if m.validate().is_ok() {
                // A valid manifest names only safe things.
                assert!(m.mem >= 16 << 20 && m.cores >= 1 && m.image.len() == 64);
                let _ = m.id();
            }
        }
    });
    assert!(n > 1000, "{n}");
}
