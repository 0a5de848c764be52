//! What `rewind` prints, read: a command's output, the status line of a
//! run, the runs a check names, and lines and events looked for in text.

/// What a finished command gave.
#[derive(Debug, Clone)]
pub struct Output {
    /// The exit status as a shell reports it (128+signal if the `rewind`
    /// process itself was killed by one: a monitor crash).
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The non-empty lines of stderr.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }

    /// The run on the last `rewind: run ID ...` line of stderr (a run's or
    /// a fork's status line); panics with the whole output when there is none.
    #[track_caller]
    pub fn run_id(&self) -> String {
        last_run_id(&self.stderr).unwrap_or_else(|| panic!("no `rewind: run` line in:\n{self}"))
    }

    /// The first line of stdout that contains `needle`; panics with the
    /// whole output when none does.
    #[track_caller]
    pub fn stdout_line_with(&self, needle: &str) -> &str {
        match self.stdout.lines().find(|l| l.contains(needle)) {
            Some(line) => line,
            None => panic!("no line with `{needle}` in:\n{self}"),
        }
    }
}

impl Output {
    /// Asserts that `node --test --test-reporter=tap` (`what`) passed every
    /// test; the message starts with each `not ok` and its detail, which the
    /// clipped whole output could cut (a first failure that the rest follow).
    #[track_caller]
    pub fn assert_tap_passed(&self, what: &str) {
        if self.code != 0 || !self.stdout.contains("# fail 0") {
            panic!("{what} failed:\n{}\n{self}", tap_failures(&self.stdout));
        }
    }
}

/// Each `not ok` line of a TAP report with its indented detail block.
fn tap_failures(tap: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in tap.lines() {
        let bare = line.trim_start();
        if bare.starts_with("not ok ") {
            inside = true;
        } else if inside && !line.starts_with(' ') {
            inside = false;
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let clip = |s: &str| -> String {
            if s.len() > 4000 {
                format!(
                    "{}\n[... {} bytes ...]\n{}",
                    &s[..floor(s, 2000)],
                    s.len(),
                    &s[ceil(s, s.len() - 2000)..]
                )
            } else {
                s.to_string()
            }
        };
        write!(
            f,
            "exit code {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            clip(&self.stdout),
            clip(&self.stderr)
        )
    }
}

fn floor(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// A recorded run, from `rewind run`'s output.
#[derive(Debug, Clone)]
pub struct Run {
    pub out: Output,
    /// The run id from the status line.
    pub id: String,
    /// `exited:3`, `killed:SIGSEGV`, `deadlocked`, `timed-out`.
    pub status: String,
    /// The whole status line: `rewind: run <id> <status> after <N> steps, ...`.
    pub line: String,
    /// The step count from the status line, when it says `after N steps`.
    pub steps: Option<u64>,
}

/// Parses the status line: the last line of stderr that starts with `rewind: run `.
pub fn parse_status(out: &Output) -> Option<Run> {
    let line = out
        .stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())?
        .trim();
    let rest = line.strip_prefix("rewind: run ")?;
    let mut words = rest.split_whitespace();
    let id = words.next()?.to_string();
    let status = words.next()?.trim_end_matches([',', ':']).to_string();
    let steps = line
        .split_once(" after ")
        .and_then(|(_, after)| after.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    Some(Run {
        out: out.clone(),
        id,
        status,
        line: line.to_string(),
        steps,
    })
}

/// The id on the last `rewind: run ID ...` line of `stderr`.
pub fn last_run_id(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("rewind: run "))
        .and_then(|r| r.split_whitespace().next())
        .map(str::to_string)
}

/// The run a `rewind check`'s output names on its `failing: run ID` line:
/// panics when there is none.
#[track_caller]
pub fn failing_run_in(out: &Output) -> String {
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("failing: run "))
        .unwrap_or_else(|| panic!("no failing run in:\n{out}"))
        .trim()
        .to_string()
}

/// The run of the two a `rewind check --json` report narrowed between
/// that a signal killed: the crash the check found.
#[track_caller]
pub fn killed_narrowed_run(report: &serde_json::Value) -> String {
    ["with", "without"]
        .iter()
        .map(|k| &report["narrowed"][k])
        .find(|r| {
            r["status"]
                .as_str()
                .is_some_and(|s| s.starts_with("killed"))
        })
        .and_then(|r| r["run"].as_str())
        .unwrap_or_else(|| panic!("no narrowed run was killed:\n{report:#}"))
        .to_string()
}

/// The run's own wall seconds, from its status line (`rewind: run ID
/// STATUS after N steps, Xs virtual, Ys wall`), the last of `stderr`.
pub fn run_wall(stderr: &str) -> Option<f64> {
    let last = stderr.lines().last()?;
    let wall = last.rsplit(", ").next()?;
    wall.strip_suffix("s wall")?.parse().ok()
}

/// Whether some line of `events` contains every one of `parts`.
pub fn has_event(events: &str, parts: &[&str]) -> bool {
    events.lines().any(|l| parts.iter().all(|p| l.contains(p)))
}

/// Asserts that every line in `want` occurs in `text`, in any order.
#[track_caller]
pub fn assert_lines(text: &str, want: &[&str]) {
    for w in want {
        assert!(
            text.lines().any(|l| l.trim_end() == *w),
            "missing the line {w:?} in:\n{text}"
        );
    }
}

/// A check's report with narrowing's wall time (the one thing that differs
/// between two runs of the same check) masked.
pub fn without_wall_time(report: &str) -> String {
    report
        .lines()
        .map(|l| match l.strip_prefix("narrowed in ") {
            Some(rest) => format!("narrowed in {}", rest.split(',').next().unwrap_or("")),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tap {
    #[test]
    fn a_failure_and_its_detail_come_out_of_a_report_and_passes_do_not() {
        let report = "TAP version 13\n# Subtest: one\nok 1 - one\n  ---\n  duration_ms: 1\n  ...\n# Subtest: two\nnot ok 2 - two\n  ---\n  error: 'no webview'\n  ...\n# Subtest: three\nok 3 - three\n1..3\n";
        assert_eq!(
            super::tap_failures(report),
            "not ok 2 - two\n  ---\n  error: 'no webview'\n  ...\n"
        );
    }
}
