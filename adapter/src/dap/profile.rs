//! With `REWIND_DAP_PROFILE` set, a line on standard error per request:
//! its wall and CPU time, and where the debug core's travels spent theirs
//! (restores from memory or disk, steps run forward, snapshots taken).

use super::session::Session;
use std::time::{Duration, Instant};
use vmm::debug::SnapshotStats;

pub struct Profile {
    wall: Instant,
    cpu: Duration,
    core: SnapshotStats,
}

/// This process's CPU time, user and system.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn core_stats(s: &Session) -> SnapshotStats {
    s.open
        .as_ref()
        .and_then(|o| o.live.as_ref())
        .map(|l| l.core.snapshot_stats())
        .unwrap_or_default()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Profile {
    /// Starts timing a request, when profiling is asked for.
    pub fn start(s: &Session) -> Option<Profile> {
        std::env::var_os("REWIND_DAP_PROFILE")?;
        Some(Profile {
            wall: Instant::now(),
            cpu: cpu_time(),
            core: core_stats(s),
        })
    }

    pub fn report(self, s: &Session, name: &str) {
        let (a, b) = (self.core, core_stats(s));
        let (used, budget) = vmm::debug::snapshot_process_usage();
        // A core opened again by this request counts from nothing.
        let a = if b.taken < a.taken || b.steps_run < a.steps_run {
            Default::default()
        } else {
            a
        };
        eprintln!(
            "rewind dap profile: {name}: {:.1} ms wall, {:.1} ms CPU; travels: {} from memory, \
             {} from disk, {} boots, {} onward; restores {:.1} ms ({} pages), forward {} steps \
             {:.1} ms; snapshots {} taken {:.1} ms, {} evicted, {} kept in {:.1} MiB; \
             process snapshots {:.1} of {:.1} MiB",
            ms(self.wall.elapsed()),
            ms(cpu_time().saturating_sub(self.cpu)),
            b.from_memory - a.from_memory,
            b.from_disk - a.from_disk,
            b.boots - a.boots,
            b.onward - a.onward,
            ms(b.restore_time.saturating_sub(a.restore_time)),
            b.pages_written - a.pages_written,
            b.steps_run - a.steps_run,
            ms(b.run_time.saturating_sub(a.run_time)),
            b.taken - a.taken,
            ms(b.take_time.saturating_sub(a.take_time)),
            b.evicted - a.evicted,
            b.kept,
            mib(b.bytes),
            mib(used),
            mib(budget),
        );
    }
}
