//! `docs/architecture.md`, the code map, stays in step with the tree: every
//! path it names exists, and every top-level module of each crate is in it.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The directories of the repository a path in the map starts with.
const TOPS: &[&str] = &[
    "adapter/",
    "contrib/",
    "docs/",
    "guest/",
    "nixstore/",
    "nvim-plugin/",
    "scripts/",
    "symbols/",
    "tests/",
    "vmm/",
    "vscode-extension/",
];

/// The `code` spans of the map that are repository paths.
fn named_paths(map: &str) -> Vec<&str> {
    map.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| TOPS.iter().any(|t| s.starts_with(t)) && !s.contains(' '))
        .collect()
}

/// The top-level modules of a crate root (`mod x;` or `pub mod x;`).
fn top_modules(crate_root: &Path) -> Vec<String> {
    std::fs::read_to_string(crate_root)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let m = l.strip_prefix("pub mod ").or(l.strip_prefix("mod "))?;
            m.strip_suffix(';').map(str::to_string)
        })
        .collect()
}

/// What of the map is missing or stale: paths that do not exist, and
/// top-level modules of `crates` (crate dir, root file) it does not name.
fn stale(map: &str, tree: &Path, crates: &[(&str, &str)]) -> Vec<String> {
    let named = named_paths(map);
    let mut out: Vec<String> = named
        .iter()
        .filter(|p| !tree.join(p.trim_end_matches('/')).exists())
        .map(|p| format!("`{p}` does not exist"))
        .collect();
    for (dir, root_file) in crates {
        for m in top_modules(&tree.join(dir).join("src").join(root_file)) {
            let file = format!("{dir}/src/{m}.rs");
            let folder = format!("{dir}/src/{m}/");
            if !named.iter().any(|p| *p == file || p.starts_with(&folder)) {
                out.push(format!("module {dir}::{m} is not in the map"));
            }
        }
    }
    out
}

const CRATES: &[(&str, &str)] = &[
    ("vmm", "lib.rs"),
    ("symbols", "lib.rs"),
    ("nixstore", "lib.rs"),
    ("adapter", "main.rs"),
    ("nixstore", "lib.rs"),
];

#[test]
fn the_code_map_names_every_module_and_only_what_exists() {
    let map = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    assert!(named_paths(&map).len() > 40, "the map names few paths");
    let found = stale(&map, &root(), CRATES);
    assert!(
        found.is_empty(),
        "docs/architecture.md:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_missing_module_or_a_stale_path_fails() {
    let map = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let without_kernel = map.replace("`vmm/src/kernel/", "`vmm/src/krnl/");
    let found = stale(&without_kernel, &root(), CRATES);
    assert!(
        found
            .iter()
            .any(|f| f == "module vmm::kernel is not in the map"),
        "{found:?}"
    );
    assert!(
        found.iter().any(|f| f.contains("`vmm/src/krnl/")),
        "{found:?}"
    );
    let stale_app = map.replace(
        "`adapter/src/app/record.rs`",
        "`adapter/src/app/recorder.rs`",
    );
    assert_eq!(
        stale(&stale_app, &root(), CRATES),
        ["`adapter/src/app/recorder.rs` does not exist"]
    );
}
