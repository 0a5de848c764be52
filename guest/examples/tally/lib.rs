//! tally: a Rust library's `cargo test` binary whose test counts from two threads with a load and a store.
//!
//! `Counter::incr` reads the count and stores it plus one: two relaxed
//! atomic operations, each fine alone, with nothing making the pair one.
//! The test runs it from two threads, 100 times each, and expects 200; when
//! one thread's load and store straddle the other's, an increment is lost
//! and the test fails (`cargo test` exits 101). Built as `cargo test`
//! builds a library's tests by default: `rustc --test lib.rs`, unoptimised
//! (optimised, the pair becomes one `inc` instruction, which no thread
//! switch can split on one CPU). The fix is
//! tally-fixed/lib.rs.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct Counter {
    n: AtomicU64,
}

impl Counter {
    pub const fn new() -> Counter {
        Counter {
            n: AtomicU64::new(0),
        }
    }

    pub fn incr(&self) {
        let v = self.n.load(Ordering::Relaxed);
        self.n.store(v + 1, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.n.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::Counter;

    #[test]
    fn two_threads_count_to_200() {
        let counter = Counter::new();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..100 {
                        counter.incr();
                    }
                });
            }
        });
        assert_eq!(counter.get(), 200);
    }
}
