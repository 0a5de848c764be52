//! `rewind ls`: recorded runs, newest first.

use crate::app::runs::run_json;
use anyhow::Result;
use clap::Args;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Args, Debug)]
#[command(
    after_help = "Filters combine: a run is listed when it passes every one given; -n \
                        then keeps the newest N of those."
)]
pub struct LsArgs {
    /// Show only the N newest runs.
    #[arg(short = 'n', value_name = "N")]
    pub n: Option<usize>,
    /// Only forks of RUN: its forks, their forks, and so on.
    #[arg(long, value_name = "RUN")]
    pub forks_of: Option<String>,
    /// Only runs that ended so: passed (exited:0), failed (anything else),
    /// exited:N, exited, killed, killed:SIGNAME, deadlocked, timed-out.
    #[arg(long, value_name = "STATUS")]
    pub status: Option<String>,
    /// Only runs with this name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Only runs recorded since: a time ago (90s, 30m, 2h, 7d, 2w) or a UTC
    /// date (2024-05-01, 2024-05-01T13:30, 2024-05-01T13:30:00).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// One JSON object a line: id, name, status, exit_code, steps,
    /// virtual_ns, wall_secs, created, events, program, argv.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: LsArgs) -> Result<i32> {
    let store = crate::app::store()?;
    let status = match &args.status {
        Some(s) => Some(StatusFilter::parse(s).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let since = match &args.since {
        Some(s) => Some(parse_since(s, now_secs()).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let mut runs = store.list()?;
    for (name, why) in store.damaged()? {
        eprintln!("rewind: warning: runs/{name} is damaged and left out: {why}");
    }
    if let Some(spec) = &args.forks_of {
        let parent = crate::app::resolve(spec)?;
        let forks = vmm::store::maintain::with_descendants(&runs, std::slice::from_ref(&parent.id));
        let ids: std::collections::HashSet<String> = forks
            .into_iter()
            .map(|r| r.id)
            .filter(|id| *id != parent.id)
            .collect();
        runs.retain(|r| ids.contains(&r.id));
    }
    if let Some(f) = &status {
        runs.retain(|r| f.matches(&r.meta.status));
    }
    if let Some(name) = &args.name {
        runs.retain(|r| &r.meta.name == name);
    }
    if let Some(t) = since {
        runs.retain(|r| r.meta.created >= t);
    }
    if let Some(n) = args.n {
        runs.truncate(n);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.json {
        for r in &runs {
            let v = run_json(r);
            writeln!(out, "{v}")?;
        }
    } else {
        let sw = runs.iter().map(|r| r.meta.status.len()).max().unwrap_or(0);
        let nw = runs
            .iter()
            .map(|r| r.meta.steps.to_string().len())
            .max()
            .unwrap_or(0);
        for r in &runs {
            writeln!(
                out,
                "{}  {:<sw$}  {:>nw$} steps  {}{}",
                r.id,
                r.meta.status,
                r.meta.steps,
                r.meta.name,
                lineage(&r.manifest)
            )?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// `  (fork of <parent> at <step>, schedule N)` for a fork.
fn lineage(m: &vmm::run::Manifest) -> String {
    let Some(f) = &m.fork_of else {
        return String::new();
    };
    let with = match m.reseed {
        Some((_, seed)) if m.schedule == 0 => format!("seed {seed}"),
        _ => format!("schedule {}", m.schedule),
    };
    format!("  (fork of {} at {}, {with})", f.parent, f.step)
}

/// `--status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusFilter {
    Passed,
    Failed,
    /// A status exactly (`exited:3`, `killed:SIGSEGV`, `deadlocked`, `timed-out`).
    Exactly(String),
    /// Any status of a kind (`exited`, `killed`).
    Kind(String),
}

impl StatusFilter {
    pub fn parse(s: &str) -> Result<StatusFilter, String> {
        let bad = || {
            format!(
                "--status `{s}`: expected passed, failed, exited:N, exited, killed, \
                 killed:SIGNAME, deadlocked or timed-out"
            )
        };
        Ok(match s {
            "passed" => StatusFilter::Passed,
            "failed" => StatusFilter::Failed,
            "deadlocked" | "timed-out" => StatusFilter::Exactly(s.into()),
            "exited" | "killed" => StatusFilter::Kind(s.into()),
            _ => {
                if let Some(n) = s.strip_prefix("exited:") {
                    let n: i32 = n.parse().map_err(|_| bad())?;
                    StatusFilter::Exactly(format!("exited:{n}"))
                } else if let Some(sig) = s.strip_prefix("killed:") {
                    if sig.is_empty() {
                        return Err(bad());
                    }
                    let sig = sig.to_ascii_uppercase();
                    let sig = if sig.starts_with("SIG") {
                        sig
                    } else {
                        format!("SIG{sig}")
                    };
                    StatusFilter::Exactly(format!("killed:{sig}"))
                } else {
                    return Err(bad());
                }
            }
        })
    }

    pub fn matches(&self, status: &str) -> bool {
        match self {
            StatusFilter::Passed => status == "exited:0",
            StatusFilter::Failed => status != "exited:0",
            StatusFilter::Exactly(s) => status == s,
            StatusFilter::Kind(k) => status.split(':').next() == Some(k.as_str()),
        }
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// `--since`: seconds since the epoch from `30m`-style ages or UTC dates.
pub fn parse_since(s: &str, now: u64) -> Result<u64, String> {
    let t = s.trim();
    let bad = || {
        format!("--since `{s}`: expected an age (90s, 30m, 2h, 7d, 2w) or a date (2024-05-01, 2024-05-01T13:30)")
    };
    if let Some(unit) = t.chars().last().filter(|c| c.is_ascii_alphabetic()) {
        let n: u64 = t[..t.len() - 1].parse().map_err(|_| bad())?;
        let mul = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            'w' => 7 * 86400,
            _ => return Err(bad()),
        };
        return Ok(now.saturating_sub(n.saturating_mul(mul)));
    }
    let (date, time) = match t.split_once(['T', ' ']) {
        Some((d, tm)) => (d, Some(tm)),
        None => (t, None),
    };
    let mut dp = date.split('-');
    let (Some(y), Some(m), Some(d), None) = (dp.next(), dp.next(), dp.next(), dp.next()) else {
        return Err(bad());
    };
    let y: i64 = y.parse().map_err(|_| bad())?;
    let m: u32 = m.parse().map_err(|_| bad())?;
    let d: u32 = d.parse().map_err(|_| bad())?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || y < 1970 {
        return Err(bad());
    }
    let mut secs = 0u64;
    if let Some(tm) = time {
        let parts: Vec<&str> = tm.trim_end_matches('Z').split(':').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err(bad());
        }
        let nums: Vec<u64> = parts
            .iter()
            .map(|p| p.parse::<u64>().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        if nums[0] > 23 || nums[1] > 59 || nums.get(2).is_some_and(|&s| s > 60) {
            return Err(bad());
        }
        secs = nums[0] * 3600 + nums[1] * 60 + nums.get(2).copied().unwrap_or(0);
    }
    Ok(days_from_civil(y, m, d) as u64 * 86400 + secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since() {
        assert_eq!(parse_since("30m", 10_000), Ok(10_000 - 1800));
        assert_eq!(parse_since("2h", 10_000), Ok(10_000 - 7200));
        assert_eq!(parse_since("7d", 1_000_000), Ok(1_000_000 - 7 * 86400));
        assert_eq!(parse_since("1970-01-02", 0), Ok(86400));
        assert_eq!(parse_since("2024-05-01", 0), Ok(1_714_521_600));
        assert_eq!(
            parse_since("2024-05-01T13:30", 0),
            Ok(1_714_521_600 + 13 * 3600 + 1800)
        );
        assert!(parse_since("yesterday", 0).is_err());
        assert!(parse_since("5x", 0).is_err());
        assert!(parse_since("2024-13-01", 0).is_err());
    }

    #[test]
    fn statuses() {
        let p = |s| StatusFilter::parse(s).unwrap();
        assert!(p("passed").matches("exited:0"));
        assert!(!p("passed").matches("exited:1"));
        assert!(p("failed").matches("killed:SIGSEGV"));
        assert!(p("exited:3").matches("exited:3"));
        assert!(p("killed").matches("killed:SIGABRT"));
        assert!(p("killed:segv").matches("killed:SIGSEGV"));
        assert!(p("timed-out").matches("timed-out"));
        assert!(StatusFilter::parse("bogus").is_err());
        assert!(StatusFilter::parse("exited:x").is_err());
    }
}
