//! The size rules of the code (docs/design.md, "Rules of the engine"): no
//! source file of the crates, nor of the end-to-end tests (`tests/src`,
//! `tests/tests`, `tests/benches`), is over 900 lines, and no function of the
//! adapter is 100 lines or more. A function is measured from the line of
//! its `fn` to the line of its closing brace, on the text with comments
//! and literals emptied by the layers tests' walk
//! (`vmm/tests/common/imports.rs`), so a brace in a string counts for
//! nothing.

#[path = "../../vmm/tests/common/mod.rs"]
mod common;
#[path = "../../vmm/tests/common/imports.rs"]
mod imports;

use common::rust_files;
use imports::without_comments;
use std::path::{Path, PathBuf};

/// Most lines a source file may have.
const MAX_FILE_LINES: usize = 900;
/// The directories whose source files are held to [`MAX_FILE_LINES`]: the
/// crates', and what the end-to-end tests share.
const SIZED_DIRS: &[&str] = &[
    "adapter/src",
    "vmm/src",
    "symbols/src",
    "nixstore/src",
    "tests/src",
    "tests/tests",
    "tests/benches",
];
/// A function of the adapter has fewer lines than this.
const FUNCTION_LINES: usize = 100;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn sources(dirs: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for d in dirs {
        rust_files(&root().join(d), &mut files);
    }
    files.sort();
    files
}

/// Each function with a body in `code`: (its name, the line of its `fn`,
/// counted from 1, its length in lines).
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let code = without_comments(code);
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let line_at = |i: usize| code[..i].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = code[i..].find("fn").map(|a| a + i) {
        i = at + 2;
        if (at > 0 && ident(b[at - 1])) || !b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            continue;
        }
        let name_start = i + code[i..].len() - code[i..].trim_start().len();
        let name_len = b[name_start..].iter().take_while(|&&c| ident(c)).count();
        if name_len == 0 {
            continue;
        }
        // The body's `{`, past the signature; a `;` first is a declaration.
        let mut depth = 0i32;
        let mut j = name_start + name_len;
        while j < b.len() {
            match b[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b'{' | b';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        if j >= b.len() || b[j] == b';' {
            continue;
        }
        let mut braces = 0;
        let mut end = j;
        for (k, &c) in b.iter().enumerate().skip(j) {
            match c {
                b'{' => braces += 1,
                b'}' => braces -= 1,
                _ => continue,
            }
            if braces == 0 {
                end = k;
                break;
            }
        }
        let name = code[name_start..name_start + name_len].to_string();
        out.push((name, line_at(at), line_at(end) - line_at(at) + 1));
    }
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap().display().to_string()
}

/// The source files of [`SIZED_DIRS`] under `tree` that are over
/// [`MAX_FILE_LINES`] lines: `path: N lines`, the path from `tree`.
fn long_files(tree: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for d in SIZED_DIRS {
        let dir = tree.join(d);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        }
    }
    files.sort();
    files
        .iter()
        .filter_map(|p| {
            let lines = std::fs::read_to_string(p).unwrap().lines().count();
            let name = p.strip_prefix(tree).unwrap().display();
            (lines > MAX_FILE_LINES).then(|| format!("{name}: {lines} lines"))
        })
        .collect()
}

#[test]
fn no_source_file_is_over_900_lines() {
    let over = long_files(&root());
    assert!(
        over.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by concern):\n{}",
        over.join("\n")
    );
}

#[test]
fn a_planted_long_file_fails_in_every_sized_dir() {
    let tree = tempfile::tempdir().unwrap();
    let line = "let x = 1;\n";
    for d in SIZED_DIRS {
        let dir = tree.path().join(d);
        std::fs::create_dir_all(dir.join("deeper")).unwrap();
        std::fs::write(dir.join("at_limit.rs"), line.repeat(MAX_FILE_LINES)).unwrap();
        std::fs::write(dir.join("deeper/long.rs"), line.repeat(MAX_FILE_LINES + 1)).unwrap();
        std::fs::write(dir.join("long.txt"), line.repeat(MAX_FILE_LINES + 1)).unwrap();
    }
    let mut want: Vec<String> = SIZED_DIRS
        .iter()
        .map(|d| format!("{d}/deeper/long.rs: {} lines", MAX_FILE_LINES + 1))
        .collect();
    want.sort();
    assert_eq!(long_files(tree.path()), want);
}

#[test]
fn no_function_of_the_adapter_is_100_lines_or_more() {
    let mut over = Vec::new();
    for p in sources(&["adapter/src"]) {
        for (name, line, len) in functions(&std::fs::read_to_string(&p).unwrap()) {
            if len >= FUNCTION_LINES {
                over.push(format!("{}:{line}: fn {name}: {len} lines", relative(&p)));
            }
        }
    }
    assert!(
        over.is_empty(),
        "functions of {FUNCTION_LINES} lines or more (split them):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_measure_finds_a_long_function_and_only_functions() {
    let long = format!(
        "impl X {{\n    pub(crate) fn long(&self) -> [u8; 4] {{\n{}    }}\n}}\n",
        "        let s = \"}}{{ fn not_one() {{\";\n".repeat(98)
    );
    assert_eq!(functions(&long), [("long".to_string(), 2, 100)]);
    let others = "trait T { fn decl(&self); }\n\
                  // fn commented() {\n\
                  fn short(f: fn(u8) -> u8) -> impl Fn() {\n    move || { f(1); }\n}\n";
    assert_eq!(functions(others), [("short".to_string(), 3, 3)]);
}
