//! The JSON that `rewind ... --json` prints, one shape for every reader (the
//! DAP and LSP servers, property scripts, users' own tools): flat objects
//! whose `kind` (for events) or `what` (for perturbations) names the variant
//! in snake_case, with the variant's fields beside it. docs/events.md
//! documents every shape; it is stable: fields are added, never renamed.
//!
//! The shapes come from the record types' own serde derives (externally
//! tagged, snake_case), flattened here, so a variant added to [`EventKind`]
//! gets its flat shape without code here. The binary trace (postcard) keeps
//! the derived, externally tagged encoding: these attributes rename, they do
//! not restructure, and a test below pins its bytes.

use crate::run::{Event, Manifest, Perturbed};
use serde::Serialize;
use serde_json::{json, Map, Value};

/// Field names every event has: a variant's field that collides with one of
/// them is prefixed with the kind (`sdk_step`); no variant has one today.
const EVENT_FIELDS: [&str; 4] = ["step", "pid", "tid", "kind"];

/// `{"step":0,"pid":1000,"tid":1000,"kind":"thread_start","parent":0}`.
pub fn event(ev: &Event) -> Value {
    let mut m = Map::new();
    m.insert("step".into(), ev.step.into());
    m.insert("pid".into(), ev.pid.into());
    m.insert("tid".into(), ev.tid.into());
    flatten_into(&mut m, "kind", &ev.kind, &EVENT_FIELDS);
    Value::Object(m)
}

/// A list of events, each as [`event`].
pub fn events(evs: &[Event]) -> Value {
    Value::Array(evs.iter().map(event).collect())
}

/// `{"step":36,"what":"reschedule"}`, `{"step":40,"what":"stall","ns":40000}`.
pub fn perturbed(p: &Perturbed) -> Value {
    let mut m = Map::new();
    m.insert("step".into(), p.step.into());
    flatten_into(&mut m, "what", &p.what, &["step", "what"]);
    Value::Object(m)
}

/// A list of perturbations, each as [`perturbed`].
pub fn perturbations(ps: &[Perturbed]) -> Value {
    Value::Array(ps.iter().map(perturbed).collect())
}

/// A run's inputs: manifest.json's fields, with `perturb` as [`perturbations`]
/// and `reseed` as `{"step", "seed"}` (manifest.json itself keeps its own
/// encoding: its bytes make the run id).
pub fn manifest(m: &Manifest) -> Value {
    let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.insert("perturb".into(), perturbations(&m.perturb));
        o.insert(
            "reseed".into(),
            m.reseed.map_or(
                Value::Null,
                |(step, seed)| json!({"step": step, "seed": seed}),
            ),
        );
    }
    v
}

/// Adds an externally tagged enum's variant to `m`: its name under `tag`, and
/// its fields (a struct variant's) or its value (`value`, any other variant's).
fn flatten_into<T: Serialize>(m: &mut Map<String, Value>, tag: &str, v: &T, taken: &[&str]) {
    // Serializing a derived record type to a Value cannot fail (no map has
    // non-string keys); should one ever, the output says so instead of panicking.
    let v = serde_json::to_value(v).unwrap_or_else(|e| Value::String(format!("unprintable: {e}")));
    match v {
        Value::Object(o) if o.len() == 1 => {
            let (name, inner) = o.into_iter().next().expect("one entry");
            m.insert(tag.into(), Value::String(name.clone()));
            match inner {
                Value::Object(fields) => {
                    for (k, v) in fields {
                        let k = if taken.contains(&k.as_str()) {
                            format!("{name}_{k}")
                        } else {
                            k
                        };
                        m.insert(k, v);
                    }
                }
                other => {
                    m.insert("value".into(), other);
                }
            }
        }
        // A unit variant is its name alone.
        other => {
            m.insert(tag.into(), other);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{EventKind, ExitStatus, Perturbation, SdkKind};

    /// One event of every kind. The match makes a new kind fail to compile
    /// here until it has a sample, so the tests below cover it.
    fn samples() -> Vec<Event> {
        let kinds = vec![
            EventKind::Syscall {
                nr: 12,
                name: "brk".into(),
                text: "brk(0x0) = 0x4c5000".into(),
                ret: 0x4c5000,
            },
            EventKind::ThreadStart { parent: 0 },
            EventKind::ThreadExit { code: 3 },
            EventKind::Signal {
                signo: 11,
                code: 1,
                addr: 0x108,
            },
            EventKind::ProcessExit {
                status: ExitStatus::Exited(2),
            },
            EventKind::ProcessExit {
                status: ExitStatus::Killed(11),
            },
            EventKind::ProcessExit {
                status: ExitStatus::Deadlocked,
            },
            EventKind::ProcessExit {
                status: ExitStatus::TimedOut,
            },
            EventKind::Sdk {
                kind: SdkKind::Always,
                cond: false,
                message: "seats".into(),
            },
            EventKind::Access {
                pc: 0x401136,
                addr: 0x4c6a10,
                size: 8,
                access: crate::run::Access::Write,
                at: "0x401136 in add+0x16".into(),
            },
        ];
        for k in &kinds {
            match k {
                EventKind::Syscall { .. }
                | EventKind::ThreadStart { .. }
                | EventKind::ThreadExit { .. }
                | EventKind::Signal { .. }
                | EventKind::ProcessExit { .. }
                | EventKind::Sdk { .. }
                | EventKind::Access { .. } => {}
            }
        }
        kinds
            .into_iter()
            .enumerate()
            .map(|(i, kind)| Event {
                step: 40 + i as u64,
                pid: 1000,
                tid: 1001,
                kind,
            })
            .collect()
    }

    #[test]
    fn events_are_flat() {
        let got: Vec<Value> = samples().iter().map(event).collect();
        let head = |step: u64| json!({"step": step, "pid": 1000, "tid": 1001});
        let with = |step: u64, rest: Value| {
            let mut v = head(step);
            v.as_object_mut()
                .unwrap()
                .extend(rest.as_object().unwrap().clone());
            v
        };
        let want = vec![
            with(
                40,
                json!({"kind": "syscall", "nr": 12, "name": "brk", "text": "brk(0x0) = 0x4c5000", "ret": 0x4c5000}),
            ),
            with(41, json!({"kind": "thread_start", "parent": 0})),
            with(42, json!({"kind": "thread_exit", "code": 3})),
            with(
                43,
                json!({"kind": "signal", "signo": 11, "code": 1, "addr": 0x108}),
            ),
            with(44, json!({"kind": "process_exit", "status": "exited:2"})),
            with(
                45,
                json!({"kind": "process_exit", "status": "killed:SIGSEGV"}),
            ),
            with(46, json!({"kind": "process_exit", "status": "deadlocked"})),
            with(47, json!({"kind": "process_exit", "status": "timed-out"})),
            with(
                48,
                json!({"kind": "sdk", "what": "always", "cond": false, "message": "seats"}),
            ),
            with(
                49,
                json!({"kind": "access", "pc": 0x401136, "addr": 0x4c6a10, "size": 8, "access": "write", "at": "0x401136 in add+0x16"}),
            ),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn every_kind_is_documented() {
        let doc = include_str!("../../../docs/events.md");
        for ev in samples() {
            let kind = event(&ev)["kind"].as_str().unwrap().to_string();
            let heading = format!("### `{kind}`");
            assert!(
                doc.lines().any(|l| l.trim() == heading),
                "docs/events.md has no `{heading}` section"
            );
            for field in event(&ev).as_object().unwrap().keys() {
                assert!(
                    doc.contains(&format!("`{field}`")),
                    "docs/events.md does not mention the field `{field}` of `{kind}`"
                );
            }
        }
    }

    #[test]
    fn the_binary_trace_encoding_is_unchanged() {
        // postcard bytes of the samples as trace version 1 wrote them before
        // the JSON shape was made flat: renaming for JSON must not move them.
        let want: [&[u8]; 9] = [
            &[
                40, 232, 7, 233, 7, 0, 12, 3, 98, 114, 107, 19, 98, 114, 107, 40, 48, 120, 48, 41,
                32, 61, 32, 48, 120, 52, 99, 53, 48, 48, 48, 128, 192, 226, 4,
            ],
            &[41, 232, 7, 233, 7, 1, 0],
            &[42, 232, 7, 233, 7, 2, 6],
            &[43, 232, 7, 233, 7, 3, 22, 2, 136, 2],
            &[44, 232, 7, 233, 7, 4, 0, 4],
            &[45, 232, 7, 233, 7, 4, 1, 22],
            &[46, 232, 7, 233, 7, 4, 2],
            &[47, 232, 7, 233, 7, 4, 3],
            &[48, 232, 7, 233, 7, 5, 0, 0, 5, 115, 101, 97, 116, 115],
        ];
        for (ev, want) in samples().iter().zip(want) {
            let bytes = postcard::to_stdvec(ev).unwrap();
            assert_eq!(bytes, want, "{ev:?}");
            assert_eq!(&postcard::from_bytes::<Event>(&bytes).unwrap(), ev);
        }
    }

    #[test]
    fn events_round_trip_through_json() {
        for ev in samples() {
            let text = serde_json::to_string(&ev).unwrap();
            assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), ev, "{text}");
        }
    }

    #[test]
    fn statuses_parse_as_they_print() {
        for s in [
            ExitStatus::Exited(0),
            ExitStatus::Exited(-1),
            ExitStatus::Killed(9),
            ExitStatus::Killed(34),
            ExitStatus::Deadlocked,
            ExitStatus::TimedOut,
        ] {
            assert_eq!(s.to_string().parse::<ExitStatus>(), Ok(s));
        }
        assert!("killed:SIGNOPE".parse::<ExitStatus>().is_err());
        assert!("exited".parse::<ExitStatus>().is_err());
    }

    #[test]
    fn perturbations_are_flat() {
        let ps = [
            Perturbed {
                step: 36,
                what: Perturbation::Reschedule,
            },
            Perturbed {
                step: 40,
                what: Perturbation::Stall { ns: 40_000 },
            },
            Perturbed {
                step: 41,
                what: Perturbation::Switch { tid: 1002 },
            },
        ];
        assert_eq!(
            perturbations(&ps),
            json!([
                {"step": 36, "what": "reschedule"},
                {"step": 40, "what": "stall", "ns": 40000},
                {"step": 41, "what": "switch", "tid": 1002}
            ])
        );
    }
}
