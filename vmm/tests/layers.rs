//! Layers run one way: machine, then kernel, then record and store, then
//! check, then the front ends; each uses only those before it. What the
//! kernel shares with the layers above it (the manifest, events, keyframes,
//! the recorder and page-source traits, the schedule's perturbations) sits
//! below it, in `run` and `schedule`. The front ends are the adapter crate,
//! which `vmm` cannot name at all; `debug`, `inspect` and `shell` are their engine
//! parts, the highest layer inside `vmm`.
//!
//! The check reads every source file's paths (`crate::x`, `use crate::{x,
//! y}`, `super::…` resolved against the file's module) and fails on any
//! that names a module of a later layer.

mod common;
#[path = "common/imports.rs"]
mod imports;

use common::rust_files;
use imports::{module_of, named_tops, without_comments};
use std::path::{Path, PathBuf};

/// The layers of `vmm`'s top-level modules, lowest first.
const LAYERS: &[&[&str]] = &[
    &["machine"],
    &["error", "image", "run", "schedule"],
    &["kernel"],
    &["record", "store", "session", "replay"],
    &["check"],
    &["debug", "inspect", "shell"],
];

/// The crate's one error type, which every layer returns (`EngineError`). It
/// is placed in its layer like any module: it names only lower layers' errors.
const USED_BY_ALL: &[&str] = &["error"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

#[test]
fn every_layer_uses_only_those_below_it() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    assert!(files.len() > 50, "no sources under {}", src().display());
    let mut found = Vec::new();
    for f in &files {
        let module = module_of(&src(), f);
        let Some(own) = module.first().and_then(|top| layer_of(top)) else {
            continue;
        };
        let code = without_comments(&std::fs::read_to_string(f).unwrap());
        for top in named_tops(&code, &module) {
            if USED_BY_ALL.contains(&top.as_str()) {
                continue;
            }
            if let Some(theirs) = layer_of(&top).filter(|&l| l > own) {
                found.push(format!(
                    "{} ({}) names {top} ({})",
                    f.strip_prefix(src()).unwrap().display(),
                    LAYERS[own].join("/"),
                    LAYERS[theirs].join("/")
                ));
            }
        }
    }
    found.sort();
    found.dedup();
    assert!(
        found.is_empty(),
        "a layer reaches up:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_module_has_a_layer() {
    let lib = without_comments(&std::fs::read_to_string(src().join("lib.rs")).unwrap());
    let mods: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    assert!(mods.contains(&"kernel"), "no modules found in lib.rs");
    for m in mods {
        assert!(layer_of(m).is_some(), "module {m} has no layer in LAYERS");
    }
}

#[test]
fn the_check_finds_every_kind_of_path() {
    let kernel_fs = ["kernel", "fs", "io"].map(String::from);
    let tops = |code: &str| named_tops(code, &kernel_fs);
    assert_eq!(tops("use crate::store::pages::PageStore;"), ["store"]);
    assert_eq!(tops("    let s: crate::check::X = y;"), ["check"]);
    assert_eq!(
        tops("use crate::{\n    check::{a, b},\n    record,\n};"),
        ["check", "record"]
    );
    assert_eq!(tops("use super::super::errno::*;"), ["kernel"]);
    assert_eq!(
        tops("use super::super::super::session::Limits;"),
        ["session"]
    );
    assert_eq!(
        tops("pub(crate) fn f() -> crate::EngineError"),
        ["EngineError"]
    );
    assert!(tops(&without_comments("use std::fmt; // not crate::check")).is_empty());
    assert_eq!(layer_of("store"), Some(3));
    assert!(layer_of("kernel") < layer_of("record"));
}
