//! The figures of the README's "Programs known to run": each row's test
//! times its `rewind run` and its native run and prints them
//! (`cargo test -p rewind-tests --test T -- --nocapture`); nothing is
//! asserted of them, and `tests/tests/programs_table.rs` checks that every
//! row names a test that exists.

use crate::{load_average, rewind_bin, Run};
use std::time::{Duration, Instant};

/// `f()` and how long it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let t = f();
    (t, started.elapsed())
}

/// Prints a row's figures: the run's steps, the `rewind run` command's
/// wall time beside the native run's, the build of `rewind` and the load.
pub fn figures(row: &str, run: &Run, rewind: Duration, native: Duration) {
    let profile = rewind_bin()
        .parent()
        .and_then(|d| d.file_name())
        .map_or_else(|| "?".into(), |n| n.to_string_lossy().into_owned());
    eprintln!(
        "programs table: {row}: {} steps, {:.2} s in Rewind beside {:.2} s natively \
         ({profile} build, load {})",
        run.steps.map_or_else(|| "?".into(), |n| n.to_string()),
        rewind.as_secs_f64(),
        native.as_secs_f64(),
        load_average()
    );
}
