//! tally-fixed: tally with one atomic add for an increment.
//!
//! The same library as tally/lib.rs, but `Counter::incr` is one
//! `fetch_add`: no increment is lost in any schedule, and the test passes.

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
        self.n.fetch_add(1, Ordering::Relaxed);
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
