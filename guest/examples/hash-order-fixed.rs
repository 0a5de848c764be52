//! hash-order-fixed: hash-order.rs seating the guests in sorted order.
//!
//! The guests are deduplicated through a BTreeSet, whose order is the
//! names' order, so the seating is the same on every machine and for every
//! seed of the hasher: ada heads the table in every run.

use std::collections::BTreeSet;
use std::process::ExitCode;

fn main() -> ExitCode {
    let replies = ["ada", "grace", "ada", "linus", "barbara", "grace", "ken"];
    let guests: BTreeSet<&str> = replies.iter().copied().collect();
    // The fix: an order the program chose.
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
