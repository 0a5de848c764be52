//! Which modules a Rust source file names: what the layers tests of `vmm`
//! and the adapter read (`#[path]`-included by both).

use std::path::Path;

/// The module path of a source file under `src` (`kernel/fs/mod.rs` is
/// `["kernel", "fs"]`; `lib.rs` is `[]`).
pub fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut path: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(path.last().map(String::as_str), Some("mod" | "lib")) {
        path.pop();
    }
    path
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The top-level items of `use crate::{a::b, c, d::{e, f}}`: the text after
/// `{` up to its matching `}`, split at depth-one commas.
fn group_heads(s: &str) -> Vec<&str> {
    let mut heads = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                heads.push(s[start..i].trim());
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    heads.into_iter().map(ident_at).collect()
}

/// The top-level modules that `code` (a file of module `module`, comments
/// removed) names through `crate::` or `super::` paths.
pub fn named_tops(code: &str, module: &[String]) -> Vec<String> {
    let mut tops = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => tops.extend(group_heads(group).into_iter().map(String::from)),
            None => tops.push(ident_at(rest).to_string()),
        }
    }
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut rest = &code[at..];
        let mut up = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            rest = r;
            up += 1;
        }
        if up < module.len() {
            tops.push(module[0].clone());
        } else if up == module.len() {
            match rest.strip_prefix('{') {
                Some(group) => tops.extend(group_heads(group).into_iter().map(String::from)),
                None => tops.push(ident_at(rest).to_string()),
            }
        }
    }
    tops.retain(|t| !t.is_empty());
    tops
}

pub fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}
