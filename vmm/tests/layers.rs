//! Layers run one way: machine, then kernel, then record and store, then
//! check, then the front ends. The kernel names neither `check` nor
//! `store` (keyframe pages come in through `record::pages::PageSource`).

use std::path::{Path, PathBuf};

/// Where the kernel still reaches up, until that code moves below it
/// (issue 12 item 8: the scheduler's perturbation belongs below the kernel).
const KNOWN: &[(&str, &str)] = &[
    ("sched.rs", "crate::check::schedule"),
    ("mod.rs", "crate::check::schedule"),
    ("snapshot.rs", "crate::check::schedule"),
];

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

#[test]
fn the_kernel_imports_neither_check_nor_store() {
    let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernel");
    let mut files = Vec::new();
    rust_files(&kernel, &mut files);
    assert!(
        files.len() > 10,
        "no kernel sources under {}",
        kernel.display()
    );
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let name = f.file_name().unwrap().to_str().unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for layer in ["check", "store"] {
                let known = KNOWN
                    .iter()
                    .any(|(file, what)| *file == name && code.contains(what));
                if names_layer(code, layer) && !known {
                    found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the kernel reaches up into check or store:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_use_of_the_store() {
    assert!(names_layer("use crate::store::pages::PageStore;", "store"));
    assert!(names_layer("    let s: crate::check::X = y;", "check"));
    assert!(!names_layer("use crate::record::pages::PageHash;", "store"));
}
