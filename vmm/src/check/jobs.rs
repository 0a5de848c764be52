//! Running a check's schedules on `--jobs` threads, in a fixed order, within
//! a budget of time.
//!
//! The order is the candidates' and the report keeps it: a run that ends
//! before an earlier one is held back until every earlier one has ended, so
//! the report (and the first violation) does not depend on the number of
//! jobs. The budget only stops new schedules from starting: the report is
//! the schedules tried, each in order, up to the first that did not end.

use super::{CheckError, CheckSpec, Progress, Tried};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Tries candidates `0..n` (`one(i)`) on `jobs` threads, and stops after
/// the first in order that `stop` says is enough (every earlier one is
/// still run), or when `deadline` passes (none starts after it). The runs
/// in order up to the first not tried, and whether the deadline cut them
/// short. `progress` stopped (checked as the deadline is) is an error.
pub fn try_each(
    n: usize,
    jobs: usize,
    deadline: Option<Instant>,
    progress: &mut dyn Progress,
    stop: &(dyn Fn(&Tried) -> bool + Sync),
    one: &(dyn Fn(usize) -> Result<Tried, CheckError> + Sync),
) -> Result<(Vec<Tried>, bool), CheckError> {
    let next = AtomicU64::new(0);
    let stop_at = AtomicU64::new(u64::MAX);
    let late = AtomicBool::new(false);
    let stopped = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<Tried, CheckError>>>> =
        Mutex::new((0..n).map(|_| None).collect());
    let shown = Mutex::new((0usize, progress));
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                if shown.lock().unwrap().1.stopped() {
                    stopped.store(true, Ordering::SeqCst);
                    break;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    late.store(true, Ordering::SeqCst);
                    break;
                }
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i as usize >= n || i > stop_at.load(Ordering::SeqCst) {
                    break;
                }
                let r = one(i as usize);
                if matches!(&r, Ok(t) if stop(t)) || r.is_err() {
                    stop_at.fetch_min(i, Ordering::SeqCst);
                }
                results.lock().unwrap()[i as usize] = Some(r);
                // Report in order: whatever is complete from the front.
                let mut sh = shown.lock().unwrap();
                let res = results.lock().unwrap();
                while sh.0 < n && sh.0 as u64 <= stop_at.load(Ordering::SeqCst) {
                    match &res[sh.0] {
                        Some(Ok(t)) => {
                            let done = sh.0 as u64 + 1;
                            sh.1.tried(t, done, n as u64);
                            sh.0 += 1;
                        }
                        Some(Err(_)) => sh.0 += 1,
                        None => break,
                    }
                }
            });
        }
    });
    if stopped.load(Ordering::SeqCst) {
        return Err(CheckError::Stopped);
    }
    let limit = stop_at.load(Ordering::SeqCst);
    let mut out = Vec::new();
    for (i, r) in results.into_inner().unwrap().into_iter().enumerate() {
        if i as u64 > limit {
            break;
        }
        match r {
            Some(r) => out.push(r?),
            None => break,
        }
    }
    let wanted = if limit == u64::MAX {
        n
    } else {
        (limit as usize + 1).min(n)
    };
    let cut = late.load(Ordering::SeqCst) && out.len() < wanted;
    Ok((out, cut))
}

/// `the budget of 60s ran out after 412 of 20000 schedules`.
pub fn out_of_budget(spec: &CheckSpec, tried: usize, planned: u64) -> String {
    let secs = spec.budget.map_or(0.0, |b| b.as_secs_f64());
    format!("the budget of {secs}s ran out after {tried} of {planned} schedules")
}
