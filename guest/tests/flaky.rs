//! A libtest binary with a flaky test, for `rewind test` (tests/tests/artifacts.rs):
//! two threads add to a counter with a load and a store, so an update is
//! lost when a switch falls between them. `steady` always passes.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

static COUNT: AtomicU32 = AtomicU32::new(0);

fn add(times: u32) {
    for _ in 0..times {
        let v = COUNT.load(Relaxed);
        std::hint::black_box(v);
        COUNT.store(v + 1, Relaxed);
    }
}

#[test]
fn counts() {
    let t = std::thread::spawn(|| add(20));
    add(20);
    t.join().unwrap();
    assert_eq!(COUNT.load(Relaxed), 40, "an update was lost");
}

#[test]
fn steady() {
    assert_eq!(2 + 2, 4);
}
