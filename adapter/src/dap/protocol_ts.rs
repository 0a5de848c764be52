//! vscode-extension/src/protocol.ts kept in step with `replies.rs`: a small
//! reader of its `export interface`s (fields, `?`, `| null`, arrays, inline
//! object types) and a check of each interface against what the reply of
//! the same name serializes to, for samples that cover its shapes (every
//! `Option` both ways). A member is named on both sides or neither, may be
//! missing on the wire (absent or `null`, which the wire drops) exactly
//! when the TypeScript says `?` or `| null`, and numbers, strings and
//! booleans are what the TypeScript says.

use super::replies::*;
use super::wire::strip_nulls;
use serde_json::Value;
use std::collections::BTreeMap;

/// A TypeScript type, as far as the check needs it.
#[derive(Debug, Clone)]
enum Ts {
    Object(Vec<Field>),
    Array(Box<Ts>),
    /// `number`, `string`, `boolean` or an interface's name.
    Named(String),
    /// What the check does not look into (tuples, literal unions).
    Other,
}

#[derive(Debug, Clone)]
struct Field {
    name: String,
    /// `?` or `| null`.
    missing: bool,
    ty: Ts,
}

/// The file's tokens: words, quoted literals and one-character punctuation,
/// without comments.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("//") {
            rest = rest.find('\n').map_or("", |i| &rest[i..]);
        } else if rest.starts_with("/*") {
            rest = rest.find("*/").map_or("", |i| &rest[i + 2..]);
        } else if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let end = rest
                .find(|x: char| !(x.is_alphanumeric() || x == '_' || x == '$'))
                .unwrap_or(rest.len());
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        } else if c == '\'' || c == '"' {
            let end = rest[1..].find(c).map_or(rest.len(), |i| i + 2);
            out.push(rest[..end].to_string());
            rest = &rest[end..];
        } else {
            out.push(c.to_string());
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

struct Reader {
    toks: Vec<String>,
    at: usize,
}

impl Reader {
    fn peek(&self) -> &str {
        self.toks.get(self.at).map_or("", String::as_str)
    }

    fn eat(&mut self, t: &str) -> bool {
        let hit = self.peek() == t;
        self.at += usize::from(hit);
        hit
    }

    fn next(&mut self) -> String {
        let t = self.peek().to_string();
        self.at += 1;
        t
    }

    /// `{ name?: type; ... }` from its `{`.
    fn object(&mut self) -> Result<Vec<Field>, String> {
        let mut fields = Vec::new();
        while !self.eat("}") {
            if self.at >= self.toks.len() {
                return Err("an object type does not end".into());
            }
            let name = self.next();
            let optional = self.eat("?");
            if !self.eat(":") {
                return Err(format!("`{name}` has no `:`"));
            }
            let (ty, nullable) = self.union()?;
            fields.push(Field {
                name,
                missing: optional || nullable,
                ty,
            });
            while self.eat(";") || self.eat(",") {}
        }
        Ok(fields)
    }

    /// `A | B | null`: the type and whether `null` is one of them.
    fn union(&mut self) -> Result<(Ts, bool), String> {
        let mut alts = vec![self.postfix()?];
        while self.eat("|") {
            alts.push(self.postfix()?);
        }
        let before = alts.len();
        alts.retain(|t| !matches!(t, Ts::Named(n) if n == "null"));
        let nullable = alts.len() < before;
        let ty = match alts.len() {
            1 => alts.pop().unwrap_or(Ts::Other),
            _ => Ts::Other,
        };
        Ok((ty, nullable))
    }

    fn postfix(&mut self) -> Result<Ts, String> {
        let mut t = self.primary()?;
        while self.peek() == "[" && self.toks.get(self.at + 1).is_some_and(|n| n == "]") {
            self.at += 2;
            t = Ts::Array(Box::new(t));
        }
        Ok(t)
    }

    fn primary(&mut self) -> Result<Ts, String> {
        let t = self.next();
        match t.as_str() {
            "{" => self.object().map(Ts::Object),
            "(" => {
                let (ty, _) = self.union()?;
                self.eat(")")
                    .then_some(ty)
                    .ok_or("a `(` does not close".into())
            }
            "[" => {
                let mut depth = 1;
                while depth > 0 && self.at < self.toks.len() {
                    match self.next().as_str() {
                        "[" => depth += 1,
                        "]" => depth -= 1,
                        _ => {}
                    }
                }
                Ok(Ts::Other)
            }
            "" => Err("the file ends inside a type".into()),
            w if w.starts_with(['\'', '"']) || w.chars().all(|c| c.is_ascii_digit()) => {
                Ok(Ts::Other)
            }
            w => Ok(Ts::Named(w.to_string())),
        }
    }
}

/// The file's `export interface NAME { ... }`s by name.
fn interfaces(text: &str) -> Result<BTreeMap<String, Vec<Field>>, String> {
    let mut r = Reader {
        toks: tokens(text),
        at: 0,
    };
    let mut out = BTreeMap::new();
    while r.at < r.toks.len() {
        if r.next() == "interface" {
            let name = r.next();
            if !r.eat("{") {
                return Err(format!("interface {name}: no `{{`"));
            }
            out.insert(name, r.object()?);
        }
    }
    Ok(out)
}

/// Where `values` (one member's across the samples) disagree with `ty`.
fn check(
    ty: &Ts,
    values: &[&Value],
    path: &str,
    ifaces: &BTreeMap<String, Vec<Field>>,
    errs: &mut Vec<String>,
) {
    match ty {
        Ts::Named(n) if ifaces.contains_key(n) => {
            check_object(&ifaces[n], values, path, ifaces, errs)
        }
        Ts::Object(fields) => check_object(fields, values, path, ifaces, errs),
        Ts::Array(elem) => {
            let items: Vec<&Value> = values
                .iter()
                .filter_map(|v| v.as_array())
                .flatten()
                .collect();
            if values.iter().any(|v| !v.is_array()) {
                errs.push(format!("{path}: an array in protocol.ts, not in Rust"));
            }
            check(elem, &items, &format!("{path}[]"), ifaces, errs);
        }
        Ts::Named(n) => {
            let fits = |v: &Value| match n.as_str() {
                "number" => v.is_number(),
                "string" => v.is_string(),
                "boolean" => v.is_boolean(),
                _ => true,
            };
            if let Some(v) = values.iter().find(|v| !fits(v)) {
                errs.push(format!("{path}: a {n} in protocol.ts, {v} in Rust"));
            }
        }
        Ts::Other => {}
    }
}

fn check_object(
    fields: &[Field],
    values: &[&Value],
    path: &str,
    ifaces: &BTreeMap<String, Vec<Field>>,
    errs: &mut Vec<String>,
) {
    let objects: Vec<_> = values.iter().filter_map(|v| v.as_object()).collect();
    if objects.len() < values.len() {
        errs.push(format!("{path}: an object in protocol.ts, not in Rust"));
    }
    for o in &objects {
        for k in o.keys().filter(|k| !fields.iter().any(|f| f.name == **k)) {
            errs.push(format!("{path}.{k}: in Rust, not in protocol.ts"));
        }
    }
    for f in fields {
        let here: Vec<&Value> = objects.iter().filter_map(|o| o.get(&f.name)).collect();
        let p = format!("{path}.{}", f.name);
        // A nested optional member may be absent from every value (the
        // compared run's lanes have no `compare`).
        let top = !path.contains(['.', '[']);
        if here.is_empty() && !objects.is_empty() && (top || !f.missing) {
            errs.push(format!("{p}: in protocol.ts, never in Rust's samples"));
        }
        if here.is_empty() {
            continue;
        }
        let missing = here.len() < objects.len();
        if missing != f.missing {
            errs.push(if missing {
                format!("{p}: Rust may leave it out; protocol.ts does not say `?` or `| null`")
            } else {
                format!("{p}: protocol.ts says `?` or `| null`; Rust always sends it")
            });
        }
        check(&f.ty, &here, &p, ifaces, errs);
    }
}

fn event(step: u64) -> RunEvent {
    RunEvent {
        step,
        pid: 1,
        tid: 1000,
        kind: "syscall",
        text: "write(1, \"hi\\n\", 3) = 3".into(),
    }
}

fn forked(with: ForkedWith, first_difference: Option<u64>) -> Forked {
    Forked {
        parent: "a1".into(),
        step: 3,
        run: "b2".into(),
        status: "exited 0".into(),
        steps: 40,
        with,
        first_difference,
    }
}

fn check_result(violations: Vec<Violation>) -> CheckResult {
    CheckResult {
        index: 1,
        label: "schedule 1".into(),
        run: "c3".into(),
        status: "exited 1".into(),
        steps: 50,
        same_end: false,
        violations,
    }
}

fn cat(got: Option<&[u8]>) -> CatReply {
    CatReply {
        path: "/etc/hostname".into(),
        step: 2,
        exists: got.is_some(),
        size: got.map(<[u8]>::len),
        utf8: got.map(|b| std::str::from_utf8(b).is_ok()),
        text: got.map(|b| String::from_utf8_lossy(b).into_owned()),
    }
}

fn comparisons() -> Vec<Comparison> {
    let differ = |left_step, right_step| Comparison {
        left: "a1".into(),
        right: "b2".into(),
        identical: false,
        index: Some(4),
        left_step,
        right_step,
        shared: Some(vec![event(1)]),
        left_events: Some(vec![event(2)]),
        right_events: Some(vec![event(3)]),
        ..Default::default()
    };
    vec![
        Comparison {
            left: "a1".into(),
            right: "a1".into(),
            identical: true,
            events: Some(7),
            ..Default::default()
        },
        differ(Some(5), Some(6)),
        differ(None, None),
    ]
}

fn lanes(compare: Option<Box<Lanes>>) -> Lanes {
    Lanes {
        run: "a1".into(),
        from: 0,
        to: 99,
        coarse: false,
        threads: vec![LaneThread {
            pid: 1,
            tid: 1000,
            name: "main".into(),
            stretches: vec![(0, 9)],
        }],
        compare,
    }
}

fn run_info(fork_of: Option<&str>) -> crate::app::runs::RunInfo {
    crate::app::runs::RunInfo {
        id: "b2".into(),
        name: "bank".into(),
        status: "exited:0".into(),
        exit_code: 0,
        steps: 40,
        virtual_ns: 1_000_000,
        wall_secs: 0.25,
        created: 1_700_000_000,
        events: 12,
        program: "/bin/bank".into(),
        argv: vec!["bank".into()],
        fork_of: fork_of.map(|p| vmm::run::ForkOf {
            parent: p.into(),
            step: 3,
        }),
        schedule: 1,
    }
}

fn position(inside: bool) -> Position {
    Position {
        run: "a1".into(),
        step: 4,
        steps: 40,
        state_step: 4,
        virtual_ns: 1000,
        thread: inside.then(|| PositionThread {
            pid: 1,
            tid: 1000,
            name: "main".into(),
        }),
        events: vec![event(4)],
        in_step: inside.then(|| InStep {
            step: 4,
            pc: "0x401000".into(),
            hit: 2,
        }),
    }
}

/// A timeline, of a fork (`of`) or not, with a deciding step or not,
/// compared with a run that differs at `compare` (0: is identical) or not.
fn timeline(
    of: Option<crate::app::runs::RunInfo>,
    at: Option<u64>,
    compare: Option<u64>,
) -> Timeline {
    Timeline {
        run: "b2".into(),
        name: "bank".into(),
        status: "exited:1".into(),
        steps: 40,
        virtual_ns: 1000,
        fork_of: of.and_then(|r| r.fork_of),
        events: vec![event(1)],
        bookmarks: vec![vmm::store::bookmarks::Bookmark {
            step: 5,
            note: "here".into(),
            created: 1_700_000_000,
        }],
        perturbations: vec![Perturbation {
            step: 3,
            what: "a reschedule".into(),
        }],
        deciding: at,
        compare: compare.map(|s| TimelineCompare {
            run: "a1".into(),
            identical: s == 0,
            step: (s > 0).then_some(s),
            other_step: (s > 0).then_some(s + 1),
        }),
    }
}

/// Every typed reply under its name in protocol.ts, with samples of each
/// of its shapes.
fn samples() -> Vec<(&'static str, Vec<Value>)> {
    let violation = Violation {
        property: "no-negative-balance".into(),
        why: "balance is -30".into(),
    };
    let bookmark = vmm::store::bookmarks::Bookmark {
        step: 5,
        note: "here".into(),
        created: 1_700_000_000,
    };
    let bookmarks = |added, removed| BookmarksReply {
        added,
        removed,
        bookmarks: vec![bookmark.clone()],
    };
    let with = |n: u64| vmm::record::fork::ForkWith::Schedule(n).into();
    let seed = vmm::record::fork::ForkWith::Seed(9).into();
    vec![
        ("RunEvent", vec![body(&event(1))]),
        (
            "Forked",
            vec![body(&forked(with(2), Some(7))), body(&forked(seed, None))],
        ),
        (
            "CheckResult",
            vec![body(&check_result(vec![violation.clone()]))],
        ),
        (
            "CheckResultEvent",
            vec![body(&CheckResultEvent {
                request: 12,
                result: check_result(vec![]),
            })],
        ),
        (
            "CheckReply",
            vec![body(&CheckReply {
                run: "a1".into(),
                from: 3,
                results: vec![check_result(vec![violation])],
                violations: 1,
                cancelled: false,
            })],
        ),
        (
            "CatReply",
            vec![body(&cat(Some(b"box\n"))), body(&cat(None))],
        ),
        ("Comparison", comparisons().iter().map(body).collect()),
        (
            "BookmarksReply",
            vec![
                body(&bookmarks(Some(bookmark.clone()), None)),
                body(&bookmarks(None, Some(1))),
                body(&bookmarks(None, None)),
            ],
        ),
        (
            "EventsReply",
            vec![body(&EventsReply {
                events: vec![event(1)],
                truncated: true,
            })],
        ),
        (
            "Lanes",
            vec![
                body(&lanes(Some(Box::new(lanes(None))))),
                body(&lanes(None)),
            ],
        ),
        ("GotoReply", vec![body(&GotoReply { step: 4 })]),
        (
            "Position",
            vec![body(&position(true)), body(&position(false))],
        ),
        (
            "Timeline",
            vec![
                body(&timeline(Some(run_info(Some("a1"))), Some(5), Some(5))),
                body(&timeline(None, None, Some(0))),
                body(&timeline(None, None, None)),
            ],
        ),
        (
            "RunsReply",
            vec![body(&RunsReply {
                runs: vec![run_info(None), run_info(Some("a1"))],
            })],
        ),
    ]
}

/// What of `ts` (protocol.ts's text) disagrees with the replies.
fn disagreements(ts: &str) -> Vec<String> {
    let ifaces = match interfaces(ts) {
        Ok(i) => i,
        Err(e) => return vec![format!("protocol.ts: {e}")],
    };
    let mut errs = Vec::new();
    for (name, mut values) in samples() {
        values.iter_mut().for_each(strip_nulls);
        let values: Vec<&Value> = values.iter().collect();
        match ifaces.get(name) {
            Some(fields) => check_object(fields, &values, name, &ifaces, &mut errs),
            None => errs.push(format!("protocol.ts has no interface {name}")),
        }
    }
    errs
}

fn protocol_ts() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../vscode-extension/src/protocol.ts"
    );
    std::fs::read_to_string(path).expect("vscode-extension/src/protocol.ts")
}

#[test]
fn protocol_ts_agrees_with_the_replies() {
    let errs = disagreements(&protocol_ts());
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// A member renamed, dropped, made optional or retyped on one side fails.
#[test]
fn a_planted_mismatch_fails() {
    let ts = protocol_ts();
    for (from, to, says) in [
        (
            "firstDifference: number | null;",
            "firstDiff: number | null;",
            "Forked.firstDifference: in Rust",
        ),
        ("\tsameEnd: boolean;\n", "", "CheckResult.sameEnd: in Rust"),
        (
            "\tsameEnd: boolean;",
            "\tsameEnd?: boolean;",
            "Rust always sends it",
        ),
        (
            "\tsize?: number;",
            "\tsize: number;",
            "CatReply.size: Rust may leave it out",
        ),
        (
            "\ttruncated: boolean;",
            "\ttruncated: string;",
            "a string in protocol.ts",
        ),
        (
            "{ property: string;",
            "{ property: number;",
            "violations[].property",
        ),
    ] {
        assert!(ts.contains(from), "protocol.ts has no `{from}`");
        let errs = disagreements(&ts.replacen(from, to, 1));
        assert!(
            errs.iter().any(|e| e.contains(says)),
            "`{from}` as `{to}`: {errs:?}"
        );
    }
}

#[test]
fn the_reader_reads_types() {
    let i = interfaces(
        "/** doc */ export interface A { a?: number; // x\n b: { c: string; d: [number, number][] } | null; e: 'x' | 'y'; }",
    )
    .unwrap();
    let a = &i["A"];
    assert_eq!((a[0].name.as_str(), a[0].missing), ("a", true));
    assert!(a[1].missing && matches!(&a[1].ty, Ts::Object(f) if f.len() == 2));
    assert!(!a[2].missing && matches!(a[2].ty, Ts::Other));
}
