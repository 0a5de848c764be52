//! hash-order: a Rust test whose verdict depends on the iteration order of a std HashSet.
//!
//! The guests who replied are deduplicated through a HashSet and seated in
//! the order the set yields them; the test expects ada at the head of the
//! table, because she was there on the machine where it was written. Rust
//! seeds every HashSet's hasher from the system's randomness (getrandom), so
//! the order, and the verdict, change from one seed to the next: exit 0
//! when ada is first, 1 when she is not. One seed is one run inside Rewind,
//! so the same seed always gives the same verdict; `rewind check --example
//! hash-order --seeds N` tries other seeds and finds one that ends
//! differently. The fix is hash-order-fixed.rs.

use std::collections::HashSet;
use std::process::ExitCode;

fn main() -> ExitCode {
    let replies = ["ada", "grace", "ada", "linus", "barbara", "grace", "ken"];
    let guests: HashSet<&str> = replies.iter().copied().collect();
    // The bug: a HashSet's order is not an order anyone chose.
    let seating: Vec<&str> = guests.into_iter().collect();
    println!("seating: {}", seating.join(", "));
    if seating[0] == "ada" {
        println!("ok: ada heads the table");
        ExitCode::SUCCESS
    } else {
        println!("FAILED: expected ada at the head of the table, found {}", seating[0]);
        ExitCode::FAILURE
    }
}
