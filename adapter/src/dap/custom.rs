//! The custom requests (`rewind/...`), each answering with JSON that
//! docs/dap.md shows.

use super::launch::ForkBy;
use super::open::Stop;
use super::replies::{
    body, BookmarksReply, CatReply, CheckReply, CheckResult, CheckResultEvent, Comparison,
    EventsReply, Forked, GotoReply, RunsReply, Violation,
};
use super::session::Session;
use super::view;
use super::wire;
use anyhow::{anyhow, bail, Result};
use dap::events::{
    ContinuedEventBody, Event, ProgressEndEventBody, ProgressStartEventBody,
    ProgressUpdateEventBody,
};
use dap::types::StoppedEventReason;
use serde_json::Value;
use vmm::check::Checker;
use vmm::record::fork::{fork_manifest, ForkWith};

/// What a custom request is answered by.
type Handler = fn(&mut Session, i64, &Args) -> Result<Value>;

/// Every custom request: its name, whether it needs a run open, its handler.
const REQUESTS: &[(&str, bool, Handler)] = &[
    ("rewind/goto", true, goto),
    ("rewind/reverseStepIn", true, reverse_step_in),
    ("rewind/lanes", true, lanes),
    ("rewind/events", true, events),
    ("rewind/fork", true, fork_request),
    ("rewind/check", true, check_from_here),
    ("rewind/compare", true, compare),
    ("rewind/bookmark", true, bookmark),
    ("rewind/cat", true, cat),
    ("rewind/runs", false, runs),
];

pub fn handle(s: &mut Session, seq: i64, name: &str, args: &Value) -> Result<Value> {
    let Some((_, needs_run, handler)) = REQUESTS.iter().find(|(n, ..)| *n == name) else {
        bail!("unknown command `{name}` (the rewind/ requests are in docs/dap.md)");
    };
    if *needs_run && s.open.is_none() {
        bail!("no run is open: send `launch` or `attach` first");
    }
    handler(s, seq, &Args(args))
}

/// `rewind/goto`: to a step.
fn goto(s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    let step = a.u64_req("step")?;
    let o = s.open.as_ref().expect("checked");
    if step > o.run.meta.steps {
        bail!(
            "`step`: {step} is past the end of run {} ({} steps)",
            o.run.id,
            o.run.meta.steps
        );
    }
    continued(s);
    s.move_to(
        step,
        Stop::new(StoppedEventReason::Goto, format!("step {step}")),
    )?;
    Ok(body(&GotoReply { step }))
}

/// `rewind/reverseStepIn`: back into the call that returned.
fn reverse_step_in(s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    let tid = match a.0.get("threadId") {
        None => s
            .open
            .as_ref()
            .and_then(|o| o.focus())
            .map(|(_, t)| i64::from(t))
            .ok_or_else(|| anyhow!("`threadId`: no thread is alive here"))?,
        Some(_) => a.u64_req("threadId")? as i64,
    };
    s.step_request(tid, super::moves::Kind::In, None, false)?;
    Ok(Value::Object(Default::default()))
}

/// `rewind/lanes`: which thread ran when, in buckets.
fn lanes(s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    let o = s.open.as_ref().expect("checked");
    let end = o.run.meta.steps;
    let from = a.u64("from")?.unwrap_or(0);
    let to = a.u64("to")?.unwrap_or(end).min(end);
    if from > to {
        bail!("`from` ({from}) is after `to` ({to})");
    }
    let max = a.u64("max")?.unwrap_or(500).clamp(1, 10_000) as usize;
    let mut v = view::lanes(&o.switches, end, from, to, max, &o.run.meta.thread_names);
    v.run = o.run.id.clone();
    if let Some(c) = &o.compare {
        let sw = c.switches()?;
        let mut cv = view::lanes(
            &sw,
            c.meta.steps,
            from,
            to.min(c.meta.steps),
            max,
            &c.meta.thread_names,
        );
        cv.run = c.id.clone();
        v.compare = Some(Box::new(cv));
    }
    Ok(body(&v))
}

/// `rewind/events`: the run's events, filtered.
fn events(s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    let o = s.open.as_ref().expect("checked");
    let from = a.u64("from")?.unwrap_or(0);
    let to = a.u64("to")?.unwrap_or(u64::MAX);
    let tid = a.u64("tid")?;
    let kinds = a.strings("kinds")?;
    let text = a.str("text")?;
    let limit = a.u64("limit")?.unwrap_or(1000).min(100_000) as usize;
    let mut matched = o
        .events
        .iter()
        .filter(|e| e.step >= from && e.step <= to)
        .filter(|e| tid.is_none_or(|t| e.tid as u64 == t))
        .filter(|e| {
            kinds
                .as_ref()
                .is_none_or(|k| k.iter().any(|k| k == view::kind_name(e)))
        })
        .filter(|e| text.is_none_or(|t| view::event_text(e).contains(t)));
    let events = matched.by_ref().take(limit).map(view::run_event).collect();
    let truncated = matched.next().is_some();
    Ok(body(&EventsReply { events, truncated }))
}

/// `rewind/fork`: a fork at a step, opened or not.
fn fork_request(s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    let o = s.open.as_ref().expect("checked");
    let step = a.u64("step")?.unwrap_or(o.pos);
    let with = match (a.u64("schedule")?, a.u64("seed")?) {
        (Some(_), Some(_)) => bail!("give `schedule` or `seed`, not both"),
        (Some(n), None) => Some(ForkWith::Schedule(n)),
        (None, Some(n)) => Some(ForkWith::Seed(n)),
        (None, None) => None,
    };
    if a.bool("open")?.unwrap_or(false) {
        continued(s);
        fork_and_switch(s, step, with)
    } else {
        fork(s, step, with).map(|v| body(&v))
    }
}

/// `rewind/compare`: where the run and another first differ.
fn compare(s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    if let Some(spec) = a.str("run")? {
        let store = crate::app::store()?;
        let other = crate::app::resolve_in(&store, spec).map_err(|e| anyhow!("`run`: {e:#}"))?;
        s.open.as_mut().expect("checked").compare = Some(other);
    }
    let o = s.open.as_ref().expect("checked");
    let Some(c) = &o.compare else {
        bail!("no run to compare with: give `run`, or open with `compare`");
    };
    let context = a.u64("context")?.unwrap_or(5).min(1000) as usize;
    let other = c.events()?;
    let d = vmm::record::diff::first_divergence(&o.events, &other, context);
    let evs = |l: &[vmm::run::Event]| Some(l.iter().map(view::run_event).collect());
    let (left, right) = (o.run.id.clone(), c.id.clone());
    Ok(body(&match d {
        None => Comparison {
            left,
            right,
            identical: true,
            events: Some(o.events.len()),
            ..Default::default()
        },
        Some(d) => Comparison {
            left,
            right,
            identical: false,
            events: None,
            index: Some(d.index),
            left_step: d.left_step(),
            right_step: d.right_step(),
            shared: evs(&d.shared),
            left_events: evs(&d.left),
            right_events: evs(&d.right),
        },
    }))
}

/// `rewind/bookmark`: add, list or remove the run's bookmarks.
fn bookmark(s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    let o = s.open.as_ref().expect("checked");
    let action = a.str("action")?.unwrap_or("list");
    let reply = |added, removed| -> Result<Value> {
        let bookmarks = o.run.bookmarks()?;
        Ok(body(&BookmarksReply {
            added,
            removed,
            bookmarks,
        }))
    };
    match action {
        "add" => {
            let step = a.u64("step")?.unwrap_or(o.pos);
            if step > o.run.meta.steps {
                bail!("`step`: {step} is past the end of the run");
            }
            let note = a
                .str("note")?
                .ok_or_else(|| anyhow!("`note` is required to add a bookmark"))?;
            let b = o.store.add_bookmark(&o.run, step, note)?;
            reply(Some(b), None)
        }
        "remove" => {
            let step = a.u64_req("step")?;
            let n = o.store.remove_bookmarks(&o.run, step, a.str("note")?)?;
            reply(None, Some(n))
        }
        "list" => reply(None, None),
        other => bail!("`action`: `{other}` is not add, list or remove"),
    }
}

/// `rewind/cat`: a file as the guest saw it at a step.
fn cat(s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    let o = s.open.as_ref().expect("checked");
    let path = a
        .str("path")?
        .ok_or_else(|| anyhow!("`path` is required"))?
        .to_string();
    let step = a.u64("step")?.unwrap_or(o.pos);
    let got = crate::app::inside::seek(&o.run, step, |k| k.file_contents(&path))?;
    Ok(body(&CatReply {
        path,
        step,
        exists: got.is_some(),
        size: got.as_ref().map(|b| b.len()),
        utf8: got.as_ref().map(|b| std::str::from_utf8(b).is_ok()),
        text: got
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned()),
    }))
}

/// `rewind/runs`: the store's runs, newest first.
fn runs(_s: &mut Session, _seq: i64, a: &Args) -> Result<Value> {
    let store = crate::app::store()?;
    let mut runs = store.list()?;
    if let Some(spec) = a.str("forksOf")? {
        let parent = store.resolve(spec).map_err(|e| anyhow!("`forksOf`: {e}"))?;
        let ids: std::collections::HashSet<String> =
            vmm::store::maintain::with_descendants(&runs, std::slice::from_ref(&parent.id))
                .into_iter()
                .map(|r| r.id)
                .filter(|id| *id != parent.id)
                .collect();
        runs.retain(|r| ids.contains(&r.id));
    }
    if let Some(n) = a.u64("limit")? {
        runs.truncate(n as usize);
    }
    let runs = runs.iter().map(crate::app::runs::RunInfo::of).collect();
    Ok(body(&RunsReply { runs }))
}

/// Typed access to a request's arguments; errors name the field.
struct Args<'a>(&'a Value);

impl<'a> Args<'a> {
    fn get(&self, k: &str) -> Option<&'a Value> {
        self.0.get(k).filter(|v| !v.is_null())
    }
    /// Field `k` as `read` takes it; where `read` finds no `what` there
    /// (`a whole number`), an error that names the field.
    fn typed<T>(
        &self,
        k: &str,
        what: &str,
        read: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>> {
        self.get(k)
            .map(|v| read(v).ok_or_else(|| anyhow!("`{k}` must be {what}")))
            .transpose()
    }
    fn u64(&self, k: &str) -> Result<Option<u64>> {
        self.typed(k, "a whole number", Value::as_u64)
    }
    fn u64_req(&self, k: &str) -> Result<u64> {
        self.u64(k)?.ok_or_else(|| anyhow!("`{k}` is required"))
    }
    fn str(&self, k: &str) -> Result<Option<&'a str>> {
        self.typed(k, "a string", Value::as_str)
    }
    fn bool(&self, k: &str) -> Result<Option<bool>> {
        self.typed(k, "true or false", Value::as_bool)
    }
    fn strings(&self, k: &str) -> Result<Option<Vec<String>>> {
        self.typed(k, "an array of strings", |v| {
            v.as_array()?
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect()
        })
    }
}

/// The first schedule (or seed, by `forkWith`) whose fork of the open run
/// at `step` is not in the store yet.
fn next_unused(s: &Session, step: u64) -> Result<ForkWith> {
    let o = s.open.as_ref().expect("checked");
    let inputs = o.run.inputs()?;
    for n in 1..10_000 {
        let with = s.options().fork_by.with(n);
        let m = fork_manifest(
            &o.run.id,
            &inputs.manifest,
            &o.run.meta.perturbed,
            step,
            with,
        );
        if o.store.resolve(&m.id()).is_err() {
            return Ok(with);
        }
    }
    let what = match s.options().fork_by {
        ForkBy::Schedule => "schedule",
        ForkBy::Seed => "seed",
    };
    bail!("no unused {what} below 10000 at step {step}")
}

fn fork(s: &mut Session, step: u64, with: Option<ForkWith>) -> Result<Forked> {
    let with = match with {
        Some(w) => w,
        None => next_unused(s, step)?,
    };
    let o = s.open.as_ref().expect("checked");
    let f = {
        let _recording = super::conn::recording();
        crate::app::fork::fork(&o.store, &o.run, step, with, crate::app::fork::Shown::Quiet)?
    };
    let v = Forked {
        parent: o.run.id.clone(),
        step,
        run: f.run.id.clone(),
        status: f.run.meta.status.clone(),
        steps: f.run.meta.steps,
        with: with.into(),
        first_difference: f.first_difference,
    };
    s.later(wire::custom_event("rewind/forked", body(&v)));
    Ok(v)
}

/// Queues `continued`: a custom request that moves the position resumes
/// the program as far as the client knows, and DAP has the adapter say so
/// when no request the client understands implied it. A client that keeps
/// the stopped thread (nvim-dap) then takes the next `stopped`, on
/// whichever thread, as a new stop instead of continuing that thread.
fn continued(s: &mut Session) {
    let tid = s
        .open
        .as_ref()
        .and_then(|o| o.focus())
        .map_or(0, |(_, t)| t);
    s.later(wire::event(Event::Continued(ContinuedEventBody {
        thread_id: i64::from(tid),
        all_threads_continued: Some(true),
    })));
}

/// Forks the open run at `step` (the next unused schedule or seed unless `with`)
/// and continues the session in the fork at the same step.
pub fn fork_and_switch(s: &mut Session, step: u64, with: Option<ForkWith>) -> Result<Value> {
    let v = fork(s, step, with)?;
    let store = crate::app::store()?;
    let run = store.resolve(&v.run)?;
    let step = step.min(run.meta.steps);
    let stop = Stop::new(
        StoppedEventReason::String("restart".into()),
        format!("fork {} of {} at step {step}", v.run, v.parent),
    );
    s.switch_to(run, step, stop)?;
    Ok(body(&v))
}

/// `rewind/check`: schedules forked from the open run at a step, one at a
/// time, each reported as it ends; stops early when cancelled.
fn check_from_here(s: &mut Session, seq: i64, a: &Args) -> Result<Value> {
    let o = s.open.as_ref().expect("checked");
    let from = a.u64("from")?.unwrap_or(o.pos);
    if from > o.run.meta.steps {
        bail!("`from`: {from} is past the end of the run");
    }
    let spec = super::launch::check_from(&o.run, from, a.0)?;
    let wall = std::time::Duration::from_secs_f64(o.run.meta.wall_secs.max(0.0));
    let events = o.run.events()?;
    let checker =
        Checker::new(&spec, &o.store).with_base(o.run.meta.exit, wall, o.run.meta.steps, &events);
    let (candidates, _) = checker.candidates(o.run.meta.steps);
    let n = candidates.len() as u64;
    let progress = format!("check-{seq}");
    let out = s.out().clone();
    out.send(wire::event(Event::ProgressStart(ProgressStartEventBody {
        progress_id: progress.clone(),
        title: format!("Checking {n} schedules from step {from}"),
        request_id: Some(seq),
        cancellable: Some(true),
        percentage: Some(0),
        ..Default::default()
    })));
    let mut results = Vec::new();
    let mut cancelled = false;
    for (c, i) in candidates.iter().zip(1u64..) {
        if s.is_cancelled(seq, &progress) {
            cancelled = true;
            break;
        }
        let tried = {
            let _recording = super::conn::recording();
            checker.try_one(c)
        };
        let t = match tried {
            Ok(t) => t,
            Err(e) => {
                out.send(wire::event(Event::ProgressEnd(ProgressEndEventBody {
                    progress_id: progress.clone(),
                    message: Some(format!("failed: {e}")),
                })));
                return Err(e.into());
            }
        };
        let r = CheckResult {
            index: i,
            label: t.label.trim().to_string(),
            run: t.id.clone(),
            status: t.status.to_string(),
            steps: t.steps,
            same_end: t.status == o.run.meta.exit,
            violations: t
                .violations
                .iter()
                .map(|(property, why)| Violation {
                    property: property.clone(),
                    why: why.clone(),
                })
                .collect(),
        };
        out.send(wire::custom_event(
            "rewind/checkResult",
            body(&CheckResultEvent {
                request: seq,
                result: r.clone(),
            }),
        ));
        out.send(wire::event(Event::ProgressUpdate(
            ProgressUpdateEventBody {
                progress_id: progress.clone(),
                message: Some(format!("{}: {} ({})", t.label.trim(), t.status, t.id)),
                percentage: Some((i * 100 / n) as i64),
            },
        )));
        results.push(r);
    }
    let violating = results.iter().filter(|r| !r.violations.is_empty()).count();
    out.send(wire::event(Event::ProgressEnd(ProgressEndEventBody {
        progress_id: progress,
        message: Some(if cancelled {
            format!("cancelled after {} schedules", results.len())
        } else {
            format!("{violating} of {} schedules violate", results.len())
        }),
    })));
    Ok(body(&CheckReply {
        run: o.run.id.clone(),
        from,
        results,
        violations: violating,
        cancelled,
    }))
}

#[cfg(test)]
mod tests {
    use super::Args;

    #[test]
    fn arguments_are_typed_and_a_wrong_type_names_its_field() {
        let v = serde_json::json!({
            "n": 3, "s": "x", "b": true, "l": ["a", "b"], "none": null, "mixed": ["a", 1],
        });
        let a = Args(&v);
        assert_eq!(a.u64("n").unwrap(), Some(3));
        assert_eq!(a.u64_req("n").unwrap(), 3);
        assert_eq!(a.str("s").unwrap(), Some("x"));
        assert_eq!(a.bool("b").unwrap(), Some(true));
        assert_eq!(a.strings("l").unwrap(), Some(vec!["a".into(), "b".into()]));
        // Null is missing.
        for k in ["none", "missing"] {
            assert_eq!(a.u64(k).unwrap(), None);
            assert_eq!(a.str(k).unwrap(), None);
            assert_eq!(a.bool(k).unwrap(), None);
            assert_eq!(a.strings(k).unwrap(), None);
        }
        let err = |r: anyhow::Error| r.to_string();
        assert_eq!(err(a.u64_req("none").unwrap_err()), "`none` is required");
        assert_eq!(err(a.u64("s").unwrap_err()), "`s` must be a whole number");
        assert_eq!(err(a.str("n").unwrap_err()), "`n` must be a string");
        assert_eq!(err(a.bool("s").unwrap_err()), "`s` must be true or false");
        for k in ["s", "mixed"] {
            assert_eq!(
                err(a.strings(k).unwrap_err()),
                format!("`{k}` must be an array of strings")
            );
        }
    }
}
