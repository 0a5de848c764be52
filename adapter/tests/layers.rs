//! The adapter's layers run one way: the helpers every part uses (`util`,
//! `examples`, `framing`, `progress`, `signals`), then the application layer (`app`,
//! the use cases), then the front ends (`cmd`, `dap`, `lsp`, `gdb`), each
//! of which uses only those below it and never another front end. `main.rs`
//! is the root that hands each command to its front end.
//!
//! The check reads every source file's paths (`crate::x`, `use crate::{x,
//! y}`, `super::…` resolved against the file's module) with the walk
//! `vmm`'s layers test shares (`vmm/tests/common/imports.rs`).

#[path = "../../vmm/tests/common/mod.rs"]
mod common;
#[path = "../../vmm/tests/common/imports.rs"]
mod imports;

use common::rust_files;
use imports::{module_of, named_tops, without_comments, Layers};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn adapter() -> Layers {
    Layers {
        src: src(),
        root: "main.rs",
        // The layers of the adapter's top-level modules, lowest first.
        layers: &[
            &["util", "examples", "framing", "progress", "signals"],
            &["private_socket"],
            &["app"],
            &["cmd", "dap", "lsp", "gdb"],
        ],
        sideways: false,
        used_by_all: &[],
    }
}

fn violations(module: &[String], code: &str) -> Vec<String> {
    adapter().violations(module, code)
}

#[test]
fn every_layer_uses_only_those_below_it() {
    let found = adapter().violations_in_sources();
    assert!(
        found.is_empty(),
        "a layer reaches up or sideways:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_module_has_a_layer() {
    let missing = adapter().modules_without_a_layer();
    assert!(missing.is_empty(), "modules with no layer: {missing:?}");
}

#[test]
fn a_planted_upward_or_sideways_import_fails() {
    let at = |path: &str| path.split("::").map(String::from).collect::<Vec<_>>();
    // Sideways: one front end naming another.
    let dap = at("dap::launch");
    assert_eq!(
        violations(&dap, "use crate::cmd::run::RunArgs;"),
        ["dap::launch (cmd/dap/lsp/gdb) names cmd (cmd/dap/lsp/gdb)"]
    );
    assert_eq!(
        violations(&at("lsp::commands"), "crate::dap::wire::x()").len(),
        1
    );
    assert_eq!(
        violations(&at("cmd::gdb"), "let s = crate::gdb::Stub::new();").len(),
        1
    );
    // Upward: the application layer naming a front end, a helper naming app.
    assert_eq!(
        violations(&at("app::check"), "use crate::{cmd::open, util};"),
        ["app::check (app) names cmd (cmd/dap/lsp/gdb)"]
    );
    assert_eq!(violations(&at("util"), "crate::app::store()").len(), 1);
    assert_eq!(violations(&at("app"), "use super::cmd::ls;").len(), 1);
    // Allowed: downward, within one's own module, and comments.
    assert!(violations(&dap, "use crate::app::record::prepare; use super::wire;").is_empty());
    assert!(violations(&at("cmd::run"), "use crate::util::usage; use super::ls;").is_empty());
    assert!(violations(&dap, "// not crate::cmd::run").is_empty());
}

/// The modules of the directory of `top` (`dap/wire.rs` is `wire`,
/// `dap/x/y.rs` is part of `x`) and the siblings each names through
/// `super::` or `crate::top::`.
fn sibling_graph(top: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src().join(top), &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut named = Vec::new();
    for f in &files {
        let module = module_of(&src(), f);
        let Some(own) = module.get(1) else { continue };
        graph.entry(own.clone()).or_default();
        let code = without_comments(&std::fs::read_to_string(f).unwrap());
        let via_crate = format!("crate::{top}::");
        let mut names = named_tops(&code, &module[1..]);
        names.extend(named_tops(
            &code.replace(&via_crate, "crate::"),
            &module[1..],
        ));
        named.push((own.clone(), names));
    }
    for (own, names) in named {
        let siblings: BTreeSet<String> = names
            .into_iter()
            .filter(|n| *n != own && graph.contains_key(n))
            .collect();
        graph.get_mut(&own).unwrap().extend(siblings);
    }
    graph
}

/// A cycle in `graph`, as the path that closes it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
        n: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(g, m, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(graph, n, &mut Vec::new(), &mut done))
}

#[test]
fn no_front_end_has_a_cycle_among_its_modules() {
    for top in ["app", "cmd", "dap", "lsp", "gdb"] {
        let graph = sibling_graph(top);
        assert!(graph.len() > 2, "no modules under {top}");
        if let Some(c) = cycle(&graph) {
            panic!(
                "{top}'s modules import each other in a circle: {}",
                c.join(" -> ")
            );
        }
    }
}

#[test]
fn a_planted_cycle_is_found() {
    let g = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert_eq!(
        cycle(&g(&[
            ("session", "moves"),
            ("moves", "wire"),
            ("moves", "session")
        ])),
        Some(vec!["moves".into(), "session".into(), "moves".into()])
    );
    assert_eq!(cycle(&g(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    let dap = sibling_graph("dap");
    assert!(dap["launch"].contains("wire"), "{dap:?}");
}
