//! `rewind gc` and a page pack whose header is damaged: it cannot tell
//! which pages the pack holds, so it keeps the pack as it is and says so
//! in one line (and in `--json`), and collects the rest; once the header
//! is mended the kept run's keyframes read from it again. Every recorded
//! run is replayed and must be identical.

use rewind_tests::*;
use std::path::PathBuf;

fn packs(home: &Home) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(home.path().join("pages/packs"))
        .expect("the first keyframes went into a pack")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
        .collect();
    v.sort();
    v
}

#[test]
fn gc_keeps_a_pack_whose_header_is_damaged_and_says_so() {
    let home = Home::new();
    let kept = home.run_guest("getpid", &["30000"]);
    home.replay_identical(&kept.id);
    let gone = home.run_guest("getpid", &["25000"]);
    home.replay_identical(&gone.id);
    home.ok(&["remove", &gone.id]);
    let damaged = packs(&home);
    assert!(!damaged.is_empty());
    let good: Vec<Vec<u8>> = damaged.iter().map(|p| std::fs::read(p).unwrap()).collect();
    for (p, bytes) in damaged.iter().zip(&good) {
        let mut b = bytes.clone();
        b[0] ^= 0xff;
        std::fs::write(p, b).unwrap();
    }
    let gc = home.rewind(&["gc", "--json"]);
    assert_eq!(gc.code, 0, "{gc}");
    assert_eq!(gc.stderr.lines().count(), 1, "{gc}");
    assert!(gc.stderr.contains("header is damaged"), "{gc}");
    let v: serde_json::Value = serde_json::from_str(&gc.stdout).unwrap();
    assert_eq!(
        v["damaged_packs"].as_array().map(Vec::len),
        Some(damaged.len()),
        "{gc}"
    );
    // Kept, byte for byte.
    assert_eq!(packs(&home), damaged);
    for (p, bytes) in damaged.iter().zip(&good) {
        let mut b = std::fs::read(p).unwrap();
        b[0] ^= 0xff;
        assert_eq!(&b, bytes);
        std::fs::write(p, bytes).unwrap();
    }
    // Mended: the kept run's late keyframe is read from the pack again.
    let fork = home.rewind(&["fork", &kept.id, "29000", "--schedule", "1", "-q"]);
    assert!(fork.stderr.contains("exited:0"), "{fork}");
    assert!(fork.stderr.contains("forking from the keyframe"), "{fork}");
    home.replay_identical(&kept.id);
    let gc = home.ok(&["gc", "--json"]);
    assert!(gc.stdout.contains("\"damaged_packs\":[]"), "{gc}");
}
