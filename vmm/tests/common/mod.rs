//! What the tests that read `vmm`'s own sources share.

use std::path::{Path, PathBuf};

/// Adds every `.rs` file under `dir`, at any depth, to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
