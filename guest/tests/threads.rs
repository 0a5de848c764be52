//! threads (Rust std): four workers sum slices of 1..N, share a counter in
//! an `Arc<Mutex<_>>`, send their sums over a channel and keep a
//! thread-local. Prints one line per worker and the total, then exits 4.

use std::cell::Cell;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

const WORKERS: u64 = 4;
const N: u64 = 100_000;

thread_local! {
    static MINE: Cell<u64> = const { Cell::new(u64::MAX) };
}

fn main() {
    let finished = Arc::new(Mutex::new(0u64));
    let (tx, rx) = mpsc::channel();
    let handles: Vec<_> = (0..WORKERS)
        .map(|id| {
            let finished = Arc::clone(&finished);
            let tx = tx.clone();
            thread::Builder::new()
                .name(format!("worker-{id}"))
                .spawn(move || {
                    MINE.with(|m| m.set(id));
                    let slice: Vec<u64> = (id * (N / WORKERS) + 1..=(id + 1) * (N / WORKERS)).collect();
                    let sum: u64 = slice.iter().sum();
                    *finished.lock().unwrap() += 1;
                    let tls = if MINE.with(|m| m.get()) == id { "ok" } else { "WRONG" };
                    tx.send((id, sum, tls)).unwrap();
                    sum
                })
                .unwrap()
        })
        .collect();
    drop(tx);
    let mut lines: Vec<_> = rx.iter().collect();
    lines.sort();
    for (id, sum, tls) in lines {
        println!("worker {id}: sum {sum}, tls {tls}");
    }
    let joined: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    println!("total {joined}, finished {}", finished.lock().unwrap());
    std::process::exit(4);
}
