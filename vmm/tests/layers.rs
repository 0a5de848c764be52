//! Layers run one way: machine, then kernel, then record and store, then
//! check, then the front ends; each uses only those before it. What the
//! kernel shares with the layers above it (the manifest, events, keyframes,
//! the recorder and page-source traits, the schedule's perturbations) sits
//! below it, in `run` and `schedule`. The front ends are the adapter crate,
//! which `vmm` cannot name at all; `debug`, `inspect` and `terminal` are their engine
//! parts, the highest layer inside `vmm`.
//!
//! The check reads every source file's paths (`crate::x`, `use crate::{x,
//! y}`, `super::…` resolved against the file's module, a crate-root name
//! as the module it comes from; comments skipped and literals emptied) and
//! fails on any that names a module of a later layer, or a crate-root name
//! no module has. The walk is `common/imports.rs`'s `Layers`, which the
//! adapter's layers test shares.

mod common;
#[path = "common/imports.rs"]
mod imports;

use imports::{named_tops, without_comments, Layers};
use std::path::Path;

fn vmm() -> Layers {
    Layers {
        src: Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        root: "lib.rs",
        // The layers of `vmm`'s top-level modules, lowest first.
        layers: &[
            &["machine"],
            &["error", "image", "run", "schedule"],
            &["kernel"],
            &["record", "store", "runner", "replay"],
            &["check"],
            &["debug", "inspect", "terminal"],
        ],
        sideways: true,
        // The crate's one error type, which every layer returns
        // (`EngineError`). It is placed in its layer like any module: it
        // names only lower layers' errors.
        used_by_all: &["error"],
    }
}

#[test]
fn every_layer_uses_only_those_below_it() {
    let found = vmm().violations_in_sources();
    assert!(
        found.is_empty(),
        "a layer reaches up:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_module_has_a_layer() {
    let missing = vmm().modules_without_a_layer();
    assert!(missing.is_empty(), "modules with no layer: {missing:?}");
}

#[test]
fn a_planted_upward_import_fails() {
    let vmm = vmm();
    let at = |path: &str| path.split("::").map(String::from).collect::<Vec<_>>();
    let fails = |module: &str, code: &str| vmm.violations(&at(module), code);
    assert_eq!(
        fails("kernel::fs::io", "use crate::store::pages::PageStore;"),
        ["kernel::fs::io (kernel) names store (record/store/runner/replay)"]
    );
    assert_eq!(fails("machine::memory", "crate::run::Event").len(), 1);
    assert_eq!(fails("machine", "use super::kernel::Kernel;").len(), 1);
    assert_eq!(
        fails("record::trace", "use crate::{run, check::x};").len(),
        1
    );
    assert_eq!(
        fails("check::narrow", "crate::debug::DebugCore::new()").len(),
        1
    );
    assert_eq!(
        fails("kernel::mm", "use super::super::runner::Limits;").len(),
        1
    );
    // A crate-root name is its module's (`EngineError` is `error`'s); one
    // that is no module's is reported rather than passed over.
    assert!(fails("machine", "fn f() -> crate::EngineError").is_empty());
    assert_eq!(
        fails("kernel", "crate::Nowhere::f()"),
        ["kernel names crate::Nowhere, which is no module of a layer"]
    );
    // `//` in a string hides nothing; a path in a string names nothing.
    assert_eq!(
        fails("kernel", r#"let u = "http://x"; crate::check::run()"#).len(),
        1
    );
    assert_eq!(
        fails("kernel", r##"let u = r#"a"b"#; crate::check::run()"##).len(),
        1
    );
    assert_eq!(
        fails("kernel", "let q = '\"'; crate::check::run()").len(),
        1
    );
    assert!(fails("kernel", r#"let s = "crate::check::run";"#).is_empty());
    // An inline module (`mod tests {`) takes one more `super::`.
    let in_tests = |path: &str| format!("mod tests {{\n    use {path};\n}}");
    assert!(fails("machine::paging", &in_tests("super::super::layout::X")).is_empty());
    assert_eq!(
        fails("kernel::mm", &in_tests("super::super::super::store::X")).len(),
        1
    );
    // Allowed: downward, sideways within a layer, comments.
    assert!(fails("kernel::fs", "use crate::run::EventKind; use super::mm;").is_empty());
    assert!(fails("store", "use crate::record::Trace;").is_empty());
    assert!(fails("kernel", "// crate::check /* crate::store */").is_empty());
    assert!(fails("kernel", "/* crate::check */ fn f<'a>(x: &'a u8) {}").is_empty());
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
    assert_eq!(tops("use super::super::super::runner::Limits;"), ["runner"]);
    assert_eq!(
        tops("pub(crate) fn f() -> crate::EngineError"),
        ["EngineError"]
    );
    assert!(tops(&without_comments("use std::fmt; // not crate::check")).is_empty());
    assert_eq!(vmm().layer_of("store"), Some(3));
    assert!(vmm().layer_of("kernel") < vmm().layer_of("record"));
}
