//! Layers run one way: machine, then kernel, then record and store, then
//! check, then the front ends. The kernel names neither `check` nor
//! `store` (keyframe pages come in through `record::pages::PageSource`), and
//! the schedule it applies (`vmm/src/schedule.rs`) names neither them nor
//! the kernel.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether a line of code names `layer` (a `use` of it, or a path into it).
fn names_layer(code: &str, layer: &str) -> bool {
    let path = format!("crate::{layer}");
    let grouped = code.trim_start().starts_with("use crate::{") && code.contains(layer);
    code.contains(&path) || code.contains(&format!("super::super::{layer}")) || grouped
}

/// Every line of `files` that names one of `layers`.
fn reaching_up(files: &[PathBuf], layers: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            if layers.iter().any(|layer| names_layer(code, layer)) {
                found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    found
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_kernel_imports_neither_check_nor_store() {
    let mut files = Vec::new();
    rust_files(&src().join("kernel"), &mut files);
    assert!(
        files.len() > 10,
        "no kernel sources under {}",
        src().display()
    );
    let found = reaching_up(&files, &["check", "store"]);
    assert!(
        found.is_empty(),
        "the kernel reaches up into check or store:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_schedule_sits_below_the_kernel() {
    let files = [src().join("schedule.rs")];
    let found = reaching_up(&files, &["kernel", "check", "store"]);
    assert!(
        found.is_empty(),
        "the schedule reaches up into the kernel, check or store:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_use_of_the_store() {
    assert!(names_layer("use crate::store::pages::PageStore;", "store"));
    assert!(names_layer("    let s: crate::check::X = y;", "check"));
    assert!(names_layer("use crate::{check, record};", "check"));
    assert!(!names_layer("use crate::record::pages::PageHash;", "store"));
}
