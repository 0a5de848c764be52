//! Replaying a recorded run: its inputs run again, and the new run compared
//! with the recording, event by event, then its ending, step count and
//! output. `rewind replay` prints the verdict; the comparison lives here, in
//! one place, for every front end.

use crate::run::Outcome;
use crate::run::{Event, ExitStatus, Recorder};
use crate::store::{OutputChunk, Run, StoreError};

/// Keeps a run's events and output in memory: the replayed side.
#[derive(Default)]
pub struct MemRecorder {
    pub events: Vec<Event>,
    pub output: Vec<OutputChunk>,
}

impl Recorder for MemRecorder {
    fn event(&mut self, event: &Event) {
        self.events.push(event.clone());
    }

    fn output(&mut self, fd: i32, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match self.output.last_mut() {
            Some(c) if c.fd == fd => c.bytes.extend_from_slice(bytes),
            _ => self.output.push(OutputChunk {
                fd,
                bytes: bytes.to_vec(),
            }),
        }
    }
}

/// What a replay found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The same `events` over `steps`. `timed_out`: the recording ended
    /// `timed-out` (its host's clock stopped it), and the replay, bounded by
    /// its step count, reached every one of its events.
    Identical {
        events: u64,
        steps: u64,
        timed_out: bool,
    },
    /// Where they first differ, in lines for a person.
    Different(Vec<String>),
}

/// Compares `run` as recorded with its replay (`outcome`, and what `replayed`
/// kept of it).
pub fn compare(
    run: &Run,
    outcome: &Outcome,
    replayed: &MemRecorder,
) -> Result<Verdict, StoreError> {
    let recorded_status = run.meta.exit;
    let timed_out = recorded_status == ExitStatus::TimedOut;
    let mut trace = run.trace()?;
    let mut mine = replayed.events.iter();
    let mut n = 0u64;
    let mut recorded_iter = trace.events();
    loop {
        let recorded = recorded_iter.next().transpose()?;
        let b = mine.next();
        match (recorded, b) {
            (None, None) => break,
            (Some(a), Some(b)) if a == *b => n += 1,
            // A replay that reached fewer events (or more) is not identical.
            (a, b) => {
                let step = a
                    .as_ref()
                    .map(|e| e.step)
                    .or(b.map(|e| e.step))
                    .unwrap_or(0);
                let none = || "(no more events)".to_string();
                return Ok(Verdict::Different(vec![
                    format!("different: event {n} at step {step}:"),
                    format!("  recorded: {}", a.map_or_else(none, |e| e.to_string())),
                    format!("  replayed: {}", b.map_or_else(none, |e| e.to_string())),
                ]));
            }
        }
    }
    if outcome.status != recorded_status {
        return Ok(Verdict::Different(vec![format!(
            "different: the run ended {}, recorded {}",
            outcome.status, recorded_status
        )]));
    }
    if outcome.steps != run.meta.steps {
        return Ok(Verdict::Different(vec![format!(
            "different: the run ended after {} steps, recorded {}",
            outcome.steps, run.meta.steps
        )]));
    }
    if let Some(d) = first_output_difference(&run.output_chunks()?, &replayed.output) {
        return Ok(Verdict::Different(vec![format!("different: {d}")]));
    }
    Ok(Verdict::Identical {
        events: n,
        steps: outcome.steps,
        timed_out,
    })
}

/// Where two output streams first differ, described.
fn first_output_difference(a: &[OutputChunk], b: &[OutputChunk]) -> Option<String> {
    let flat = |c: &[OutputChunk]| -> Vec<(i32, u8)> {
        c.iter()
            .flat_map(|c| c.bytes.iter().map(move |&b| (c.fd, b)))
            .collect()
    };
    let (fa, fb) = (flat(a), flat(b));
    let at = fa
        .iter()
        .zip(fb.iter())
        .position(|(x, y)| x != y)
        .or_else(|| (fa.len() != fb.len()).then(|| fa.len().min(fb.len())))?;
    let show = |f: &[(i32, u8)]| -> String {
        match f.get(at) {
            None => "end of output".into(),
            Some(&(fd, _)) => {
                let bytes: Vec<u8> = f[at..].iter().take(40).map(|&(_, b)| b).collect();
                format!("fd {fd}: {:?}", String::from_utf8_lossy(&bytes))
            }
        }
    };
    Some(format!(
        "output differs at byte {at}:\n  recorded: {}\n  replayed: {}",
        show(&fa),
        show(&fb)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(fd: i32, s: &str) -> OutputChunk {
        OutputChunk {
            fd,
            bytes: s.as_bytes().to_vec(),
        }
    }

    #[test]
    fn output_differences() {
        let a = vec![chunk(1, "hello\n"), chunk(2, "err\n")];
        assert!(first_output_difference(&a, &a).is_none());
        let mut m = MemRecorder::default();
        m.output(1, b"hel");
        m.output(1, b"lo\n");
        m.output(2, b"err\n");
        assert!(first_output_difference(&a, &m.output).is_none());
        let b = vec![chunk(1, "hello\n"), chunk(1, "err\n")];
        let d = first_output_difference(&a, &b).unwrap();
        assert!(d.contains("byte 6"), "{d}");
        let c = vec![chunk(1, "hello\n")];
        assert!(first_output_difference(&a, &c)
            .unwrap()
            .contains("end of output"));
    }
}
