//! `rewind replay`: run a recorded run's inputs again and compare.

use crate::util::parse_secs;
use anyhow::{Context, Result};
use clap::Args;
use std::time::Duration;
use vmm::record::{Event, ExitStatus, Recorder};
use vmm::session::{self, Limits};
use vmm::store::OutputChunk;

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The run: id, unique id prefix, @, @N or name.
    #[arg(value_name = "RUN")]
    pub run: String,
    /// Bound the replay in host seconds [default: the recording's --timeout, if any].
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub timeout: Option<Duration>,
}

/// Keeps events and output in memory.
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

/// Where two output streams first differ: (byte offset, description).
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

pub fn main(args: ReplayArgs) -> Result<i32> {
    let run = super::resolve(&args.run)?;
    let inputs = run
        .inputs()
        .with_context(|| format!("cannot replay run {}", run.id))?;
    let recorded_status = run.meta.exit;
    let timeout = args
        .timeout
        .or(run.meta.timeout_secs.map(Duration::from_secs_f64));
    let mut rec = MemRecorder::default();
    let outcome = session::run(
        &inputs,
        &Limits {
            timeout,
            ..Default::default()
        },
        &mut crate::progress::Progress::new(&mut rec, "replaying", run.meta.steps),
    )
    .with_context(|| format!("cannot replay run {}", run.id))?;

    // A run that timed out stopped at a point chosen by the host's clock:
    // only the events both sides reached are compared.
    let timed_out =
        recorded_status == ExitStatus::TimedOut || outcome.status == ExitStatus::TimedOut;
    let mut trace = run
        .trace()
        .with_context(|| format!("run {}: cannot read its events", run.id))?;
    let mut replayed = rec.events.iter();
    let mut n = 0u64;
    let mut recorded_iter = trace.events();
    loop {
        let recorded = recorded_iter
            .next()
            .transpose()
            .with_context(|| format!("run {}", run.id))?;
        let mine = replayed.next();
        match (recorded, mine) {
            (None, None) => break,
            (Some(a), Some(b)) if a == *b => n += 1,
            (Some(_), None) | (None, Some(_)) if timed_out => break,
            (a, b) => {
                let step = a
                    .as_ref()
                    .map(|e| e.step)
                    .or(b.map(|e| e.step))
                    .unwrap_or(0);
                println!("different: event {n} at step {step}:");
                println!(
                    "  recorded: {}",
                    a.map_or("(no more events)".to_string(), |e| e.to_string())
                );
                println!(
                    "  replayed: {}",
                    b.map_or("(no more events)".to_string(), |e| e.to_string())
                );
                return Ok(1);
            }
        }
    }
    if outcome.status != recorded_status {
        println!(
            "different: the run ended {}, recorded {}",
            outcome.status, recorded_status
        );
        return Ok(1);
    }
    if !timed_out {
        if outcome.steps != run.meta.steps {
            println!(
                "different: the run ended after {} steps, recorded {}",
                outcome.steps, run.meta.steps
            );
            return Ok(1);
        }
        let recorded_output = run
            .output_chunks()
            .with_context(|| format!("run {}: cannot read its output", run.id))?;
        if let Some(d) = first_output_difference(&recorded_output, &rec.output) {
            println!("different: {d}");
            return Ok(1);
        }
        println!("identical: {n} events over {} steps", outcome.steps);
    } else {
        println!(
            "identical: {n} events over {} steps (timed out: compared the events both reached)",
            outcome.steps.min(run.meta.steps)
        );
    }
    Ok(0)
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
