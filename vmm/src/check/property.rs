//! Properties a run must keep, and how a run is judged against them.

use super::outputs::{self, Digest};
use crate::run::{Event, EventKind, ExitStatus, FileTree, SdkKind};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Property {
    /// The exit status equals schedule 0's.
    EndsDifferently,
    /// No process killed by a signal.
    NoCrash,
    NoDeadlock,
    /// Exits with this code.
    Exit(i32),
    /// A host program judges the run (`$REWIND_RUN` holds its id).
    Script(PathBuf),
    /// No file matching the glob is written by two different threads or processes.
    SingleWriter(String),
    /// The guest SDK's assertions: no `always` fails, and every `sometimes`
    /// holds in at least one run of the check.
    Sdk,
    /// The trees left at the kept paths (a Nix build's outputs) are
    /// schedule 0's.
    SameOutputs,
    /// The trees left at the kept paths have these digests (path to
    /// digest: your store's NAR hashes, which the front end fills in).
    StoreOutputs(BTreeMap<String, String>),
}

/// Names and meanings, for `rewind check --help`.
pub const HELP: &str = "\
ends-differently  the exit status differs from schedule 0's (the default)
no-crash          no process is killed by a signal
no-deadlock       the run does not end deadlocked
exit=N            the program exits with status N
single-writer=GLOB  no file matching GLOB (guest path; * and ? wildcards) is
                  written by two different threads or processes
script=PATH       a host program gets the run id in $REWIND_RUN (read it with
                  `rewind log` and `rewind events --json`, docs/events.md); exit 0 for a correct
                  run, 1 with the reason on its first line
sdk               no `always` of the guest SDK fails, and every `sometimes` holds
                  in at least one run (added when schedule 0 calls the SDK)
same-outputs      a Nix build's outputs are schedule 0's (told by NAR hash)
store-outputs     a Nix build's outputs are your store's (its NAR hashes)";

impl Property {
    /// Parses one property; `base` resolves relative script paths.
    pub fn parse(s: &str, base: Option<&Path>) -> Result<Property, String> {
        let s = s.trim();
        Ok(match s {
            "ends-differently" => Property::EndsDifferently,
            "no-crash" => Property::NoCrash,
            "no-deadlock" => Property::NoDeadlock,
            "sdk" => Property::Sdk,
            "same-outputs" => Property::SameOutputs,
            "store-outputs" => Property::StoreOutputs(BTreeMap::new()),
            _ => {
                if let Some(n) = s.strip_prefix("exit=") {
                    Property::Exit(
                        n.parse()
                            .map_err(|_| format!("property `{s}`: exit=N needs a number"))?,
                    )
                } else if let Some(g) = s.strip_prefix("single-writer=") {
                    if g.is_empty() {
                        return Err(format!("property `{s}`: single-writer=GLOB needs a glob"));
                    }
                    Property::SingleWriter(g.to_string())
                } else if let Some(p) = s.strip_prefix("script=") {
                    let p = PathBuf::from(p);
                    Property::Script(match base {
                        Some(b) if p.is_relative() => b.join(p),
                        _ => p,
                    })
                } else {
                    return Err(format!(
                        "unknown property `{s}` (see `rewind check --help`)"
                    ));
                }
            }
        })
    }

    /// Reads a properties file: one per line, `#` comments.
    pub fn parse_file(path: &Path) -> Result<Vec<Property>, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read properties file {}: {e}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        text.lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .map(|l| Property::parse(l, Some(dir)))
            .collect()
    }

    pub fn name(&self) -> String {
        match self {
            Property::EndsDifferently => "ends-differently".into(),
            Property::NoCrash => "no-crash".into(),
            Property::NoDeadlock => "no-deadlock".into(),
            Property::Exit(n) => format!("exit={n}"),
            Property::Script(p) => format!("script={}", p.display()),
            Property::Sdk => "sdk".into(),
            Property::SingleWriter(g) => format!("single-writer={g}"),
            Property::SameOutputs => "same-outputs".into(),
            Property::StoreOutputs(_) => "store-outputs".into(),
        }
    }
}

/// What a property sees of a run.
pub struct Judged<'a> {
    pub id: &'a str,
    pub status: ExitStatus,
    pub events: &'a [Event],
    /// Each regular file written, and by which (pid, tid).
    pub writers: &'a BTreeMap<String, BTreeSet<(u32, u32)>>,
    /// Schedule 0's status (for ends-differently).
    pub base_status: ExitStatus,
    /// The trees the run left at its kept paths.
    pub kept: &'a BTreeMap<String, FileTree>,
    /// Schedule 0's (None when this is schedule 0).
    pub base_kept: Option<&'a BTreeMap<String, FileTree>>,
    /// How a kept tree is named.
    pub digest: Digest,
}

/// A property's verdict on one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Holds,
    Violated(String),
    /// The judge itself failed (a script that crashed or said nothing).
    Broken(String),
}

impl Property {
    pub fn judge(&self, r: &Judged) -> Verdict {
        match self {
            Property::EndsDifferently if r.status != r.base_status => Verdict::Violated(format!(
                "ended {} where schedule 0 ended {}",
                r.status, r.base_status
            )),
            Property::NoCrash => match r.status {
                ExitStatus::Killed(_) => Verdict::Violated(format!("ended {}", r.status)),
                _ => Verdict::Holds,
            },
            Property::NoDeadlock if r.status == ExitStatus::Deadlocked => {
                Verdict::Violated("deadlocked".into())
            }
            Property::Exit(n) if r.status != ExitStatus::Exited(*n) => {
                Verdict::Violated(format!("ended {}, not exited:{n}", r.status))
            }
            Property::Script(path) => run_script(path, r.id),
            Property::SameOutputs => outputs::same_outputs(r.kept, r.base_kept, r.digest),
            Property::StoreOutputs(want) => outputs::store_outputs(r.kept, want, r.digest),
            Property::SingleWriter(glob) => {
                let shared = r
                    .writers
                    .iter()
                    .find(|(path, who)| who.len() > 1 && glob_match(glob, path));
                match shared {
                    Some((path, who)) => {
                        let who: Vec<String> =
                            who.iter().map(|(p, t)| format!("{p}/{t}")).collect();
                        Verdict::Violated(format!("{path} was written by {}", who.join(" and ")))
                    }
                    None => Verdict::Holds,
                }
            }
            Property::Sdk => match r.events.iter().find(|e| {
                matches!(
                    e.kind,
                    EventKind::Sdk {
                        kind: SdkKind::Always,
                        cond: false,
                        ..
                    }
                )
            }) {
                Some(Event {
                    step,
                    kind: EventKind::Sdk { message, .. },
                    ..
                }) => Verdict::Violated(format!("always({message:?}) failed at step {step}")),
                _ => Verdict::Holds,
            },
            _ => Verdict::Holds,
        }
    }
}

fn run_script(path: &Path, id: &str) -> Verdict {
    // Runs between runs, never inside a `Trap`; should one be held, the
    // script must not inherit a trapped `rdtsc` (`machine::tsc`).
    crate::machine::tsc::release();
    let out = std::process::Command::new(path)
        .env("REWIND_RUN", id)
        .stdin(std::process::Stdio::null())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            return Verdict::Broken(format!(
                "property script {} could not start: {e}",
                path.display()
            ))
        }
    };
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    match out.status.code() {
        Some(0) => Verdict::Holds,
        Some(1) if !first.is_empty() => Verdict::Violated(first),
        Some(1) => Verdict::Broken(format!(
            "property script {} said the run is wrong but gave no reason",
            path.display()
        )),
        Some(c) => Verdict::Broken(format!(
            "property script {} exited {c}{}",
            path.display(),
            if first.is_empty() {
                String::new()
            } else {
                format!(": {first}")
            }
        )),
        None => Verdict::Broken(format!(
            "property script {} was killed by a signal",
            path.display()
        )),
    }
}

/// Whether the run calls the SDK's assertions (then `sdk` is checked by default).
pub fn uses_sdk(events: &[Event]) -> bool {
    events.iter().any(|e| {
        matches!(
            e.kind,
            EventKind::Sdk {
                kind: SdkKind::Always | SdkKind::Sometimes,
                ..
            }
        )
    })
}

/// A run the check stopped by its own time limit (not the user's
/// `--timeout`), and how far it had come.
pub struct Stopped {
    pub status: ExitStatus,
    pub steps: u64,
    /// The check set the time limit: the user gave none.
    pub by_check: bool,
}

/// Whether a run was cut off slow rather than stuck, and so is not judged:
/// the check's time limit ended it after it had gone past schedule 0's last
/// step (a `rep movs` a byte a step on memory points takes that long), so
/// its `timed-out` says nothing of how the program ends. A run stopped
/// before schedule 0's last step, a thread spinning where no point stops
/// it, is judged like any run: that spin is what the schedule found.
pub fn cut_off(run: &Stopped, base: ExitStatus, base_steps: u64) -> bool {
    run.by_check
        && run.status == ExitStatus::TimedOut
        && base != ExitStatus::TimedOut
        && run.steps > base_steps
}

/// Each `sometimes` message of a run, and whether it held there.
pub fn sometimes(events: &[Event]) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = Vec::new();
    for e in events {
        if let EventKind::Sdk {
            kind: SdkKind::Sometimes,
            cond,
            message,
        } = &e.kind
        {
            match out.iter_mut().find(|(m, _)| m == message) {
                Some((_, held)) => *held |= cond,
                None => out.push((message.clone(), *cond)),
            }
        }
    }
    out
}

/// Shell-style match: `*` any run of characters, `?` one character.
pub fn glob_match(glob: &str, text: &str) -> bool {
    let (g, t): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    let (mut gi, mut ti) = (0, 0);
    // Where the last `*` was, and the text position it is matched up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == t[ti]) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some((gi, ti));
            gi += 1;
        } else if let Some((sg, st)) = star {
            gi = sg + 1;
            ti = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("/tmp/*.log", "/tmp/a.log"));
        assert!(glob_match("*", "/anything/at/all"));
        assert!(glob_match("/out?.txt", "/out1.txt"));
        assert!(!glob_match("/tmp/*.log", "/tmp/a.txt"));
        assert!(!glob_match("/a", "/ab"));
        assert!(glob_match("/a*b*c", "/axxbyyc"));
    }

    #[test]
    fn a_timeout_past_schedule_0s_end_is_cut_off_and_one_before_it_is_judged() {
        let stopped = |steps, by_check| Stopped {
            status: ExitStatus::TimedOut,
            steps,
            by_check,
        };
        let ok = ExitStatus::Exited(0);
        // Slow: 80,000 steps of a copy where schedule 0 ended at 6,600.
        assert!(cut_off(&stopped(80_000, true), ok, 6_600));
        // Stuck: spinning at step 90, short of schedule 0's 139.
        assert!(!cut_off(&stopped(90, true), ok, 139));
        // The user's own --timeout is a property of the run they asked for.
        assert!(!cut_off(&stopped(80_000, false), ok, 6_600));
        // Schedule 0 timed out too: nothing differs.
        assert!(!cut_off(
            &stopped(80_000, true),
            ExitStatus::TimedOut,
            6_600
        ));
        let exited = Stopped {
            status: ok,
            steps: 80_000,
            by_check: true,
        };
        assert!(!cut_off(&exited, ok, 6_600));
    }

    #[test]
    fn parse_and_name_round_trip() {
        for s in [
            "no-crash",
            "no-deadlock",
            "exit=3",
            "single-writer=/tmp/*",
            "sdk",
            "same-outputs",
            "store-outputs",
        ] {
            assert_eq!(Property::parse(s, None).unwrap().name(), s);
        }
        assert!(Property::parse("single-writer=", None).is_err());
        assert!(Property::parse("bogus", None).is_err());
    }
}
