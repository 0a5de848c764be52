//! The adapter's layers run one way: the helpers every part uses (`util`,
//! `examples`, `progress`, `signals`), then the application layer (`app`,
//! the use cases), then the front ends (`cmd`, `dap`, `lsp`, `gdb`), each
//! of which uses only those below it and never another front end. `main.rs`
//! is the root that hands each command to its front end.
//!
//! The check reads every source file's paths (`crate::x`, `use crate::{x,
//! y}`, `super::…` resolved against the file's module), as `vmm`'s does.

#[path = "../../vmm/tests/common/mod.rs"]
mod common;
#[path = "../../vmm/tests/common/imports.rs"]
mod imports;

use common::rust_files;
use imports::{module_of, named_tops, without_comments};
use std::path::{Path, PathBuf};

/// The layers of the adapter's top-level modules, lowest first.
const LAYERS: &[&[&str]] = &[
    &["util", "examples", "progress", "signals"],
    &["app"],
    &["cmd", "dap", "lsp", "gdb"],
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

/// What `code`, the text of a file of module `module`, names that it may
/// not: a module of a higher layer, or another module of its own layer (a
/// front end naming another front end).
fn violations(module: &[String], code: &str) -> Vec<String> {
    let Some(own_top) = module.first() else {
        return Vec::new();
    };
    let Some(own) = layer_of(own_top) else {
        return Vec::new();
    };
    named_tops(&without_comments(code), module)
        .into_iter()
        .filter(|top| top != own_top)
        .filter(|top| layer_of(top).is_some_and(|theirs| theirs >= own))
        .map(|top| format!("{} names {top}", module.join("::")))
        .collect()
}

#[test]
fn every_layer_uses_only_those_below_it() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    assert!(files.len() > 50, "no sources under {}", src().display());
    let mut found = Vec::new();
    for f in &files {
        let code = std::fs::read_to_string(f).unwrap();
        found.extend(violations(&module_of(&src(), f), &code));
    }
    found.sort();
    found.dedup();
    assert!(
        found.is_empty(),
        "a layer reaches up or sideways:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_module_has_a_layer() {
    let main = without_comments(&std::fs::read_to_string(src().join("main.rs")).unwrap());
    let mods: Vec<&str> = main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    assert!(mods.contains(&"app"), "no modules found in main.rs");
    for m in mods {
        assert!(layer_of(m).is_some(), "module {m} has no layer in LAYERS");
    }
}

#[test]
fn a_planted_upward_or_sideways_import_fails() {
    let at = |path: &str| path.split("::").map(String::from).collect::<Vec<_>>();
    // Sideways: one front end naming another.
    let dap = at("dap::launch");
    assert_eq!(
        violations(&dap, "use crate::cmd::run::RunArgs;"),
        ["dap::launch names cmd"]
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
        ["app::check names cmd"]
    );
    assert_eq!(violations(&at("util"), "crate::app::store()").len(), 1);
    assert_eq!(violations(&at("app"), "use super::cmd::ls;").len(), 1);
    // Allowed: downward, within one's own module, and comments.
    assert!(violations(&dap, "use crate::app::record::prepare; use super::wire;").is_empty());
    assert!(violations(&at("cmd::run"), "use crate::util::usage; use super::ls;").is_empty());
    assert!(violations(&dap, "// not crate::cmd::run").is_empty());
}
