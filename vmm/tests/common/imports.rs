//! Which modules a Rust source file names, and the check of a crate's
//! layers: the one walk the layers tests of `vmm` and the adapter share
//! (`#[path]`-included by both, with `common`).

#![allow(dead_code)]

use crate::common::rust_files;
use std::path::{Path, PathBuf};

/// A crate's top-level modules in layers, lowest first, each using only
/// those below it.
pub struct Layers {
    /// The crate's `src`.
    pub src: PathBuf,
    /// Its root file under `src`: `lib.rs` or `main.rs`.
    pub root: &'static str,
    pub layers: &'static [&'static [&'static str]],
    /// Whether modules of one layer may name each other (the engine's
    /// `record` and `store` do; the adapter's front ends may not).
    pub sideways: bool,
    /// Modules any layer may name (`vmm`'s one error type).
    pub used_by_all: &'static [&'static str],
}

impl Layers {
    pub fn layer_of(&self, top: &str) -> Option<usize> {
        self.layers.iter().position(|l| l.contains(&top))
    }

    fn root_code(&self) -> String {
        let path = self.src.join(self.root);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        without_comments(&text)
    }

    /// The modules the crate root declares (`mod x;`, `pub mod x;`).
    pub fn root_modules(&self) -> Vec<String> {
        self.root_code()
            .lines()
            .map(str::trim)
            .filter_map(|l| {
                l.strip_prefix("pub mod ")
                    .or_else(|| l.strip_prefix("mod "))
            })
            .map(|m| m.trim_end_matches(';').to_string())
            .collect()
    }

    /// Names the crate root brings in from its modules (`pub use
    /// error::EngineError;`): each with the module it comes from.
    fn root_names(&self) -> Vec<(String, String)> {
        let modules = self.root_modules();
        self.root_code()
            .lines()
            .map(str::trim)
            .filter_map(|l| {
                l.strip_prefix("pub use ")
                    .or_else(|| l.strip_prefix("use "))
            })
            .filter_map(|l| {
                let path = l.trim_end_matches(';');
                let (module, _) = path.split_once("::")?;
                let name = path.rsplit("::").next()?;
                Some((name.to_string(), module.to_string()))
            })
            .filter(|(_, module)| modules.contains(module))
            .collect()
    }

    /// What `code`, the text of a file of module `module`, names that it
    /// may not: a module of a higher layer, one of its own layer when
    /// `sideways` is false, or a crate-root name that is no module's.
    pub fn violations(&self, module: &[String], code: &str) -> Vec<String> {
        let Some(own_top) = module.first() else {
            return Vec::new();
        };
        let Some(own) = self.layer_of(own_top) else {
            return Vec::new();
        };
        let root_names = self.root_names();
        let mut found = Vec::new();
        for named in named_tops(&without_comments(code), module) {
            let top = root_names
                .iter()
                .find(|(name, _)| *name == named)
                .map_or(named.as_str(), |(_, m)| m.as_str());
            if top == own_top || self.used_by_all.contains(&top) {
                continue;
            }
            let too_high = |theirs: usize| theirs > own || (theirs == own && !self.sideways);
            match self.layer_of(top) {
                Some(theirs) if too_high(theirs) => found.push(format!(
                    "{} ({}) names {named} ({})",
                    module.join("::"),
                    self.layers[own].join("/"),
                    self.layers[theirs].join("/")
                )),
                Some(_) => {}
                None => found.push(format!(
                    "{} names crate::{named}, which is no module of a layer",
                    module.join("::")
                )),
            }
        }
        found
    }

    /// Every violation in the crate's sources, sorted.
    pub fn violations_in_sources(&self) -> Vec<String> {
        let mut files = Vec::new();
        rust_files(&self.src, &mut files);
        assert!(files.len() > 50, "no sources under {}", self.src.display());
        let mut found = Vec::new();
        for f in &files {
            let code = std::fs::read_to_string(f).unwrap();
            found.extend(self.violations(&module_of(&self.src, f), &code));
        }
        found.sort();
        found.dedup();
        found
    }

    /// The root's modules that no layer has.
    pub fn modules_without_a_layer(&self) -> Vec<String> {
        let mods = self.root_modules();
        assert!(mods.len() > 3, "no modules found in {}", self.root);
        mods.into_iter()
            .filter(|m| self.layer_of(m).is_none())
            .collect()
    }
}

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
        // Inside `mod tests { ... }` one more `super::` stays in the file.
        let depth = inline_depth(&code[..at]);
        if up < module.len() + depth {
            tops.extend(module.first().cloned());
        } else if up == module.len() + depth {
            match rest.strip_prefix('{') {
                Some(group) => tops.extend(group_heads(group).into_iter().map(String::from)),
                None => tops.push(ident_at(rest).to_string()),
            }
        }
    }
    tops.retain(|t| !t.is_empty());
    tops
}

/// How many inline modules (`mod tests {`) are open at the end of `code`.
fn inline_depth(code: &str) -> usize {
    let mut open: Vec<bool> = Vec::new();
    for (i, c) in code.char_indices() {
        match c {
            '{' => {
                let before = code[..i].trim_end();
                let name = before.trim_end_matches(|c: char| c.is_alphanumeric() || c == '_');
                let is_mod = name.len() < before.len()
                    && name
                        .trim_end()
                        .strip_suffix("mod")
                        .is_some_and(|b| !b.ends_with(|c: char| c.is_alphanumeric() || c == '_'));
                open.push(is_mod);
            }
            '}' => {
                open.pop();
            }
            _ => {}
        }
    }
    open.into_iter().filter(|&m| m).count()
}

/// `text` with its comments removed and its string and character
/// literals emptied (`"a // b"` is `""`, `"crate::x"` names nothing), so
/// neither hides a path nor makes one up. Lines stay where they were.
pub fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => while chars.next_if(|&n| n != '\n').is_some() {},
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && n == '/' {
                        break;
                    }
                    last = n;
                }
            }
            '"' => {
                let hashes = raw_hashes(&out);
                out.push('"');
                let mut closing = 0;
                while let Some(n) = chars.next() {
                    if n == '\n' {
                        out.push('\n');
                    }
                    match (hashes, n) {
                        (None, '\\') => {
                            chars.next();
                        }
                        (None, '"') => break,
                        (Some(0), '"') => break,
                        (Some(_), '"') => closing = 1,
                        (Some(h), '#') if closing > 0 => {
                            closing += 1;
                            if closing > h {
                                break;
                            }
                        }
                        _ => closing = 0,
                    }
                }
                out.push('"');
            }
            // A character literal ('"', '\'', '\x7f'); a lifetime ('a) stays.
            '\'' => {
                let rest: String = chars.clone().take(12).collect();
                let len = if let Some(escaped) = rest.strip_prefix('\\') {
                    escaped
                        .char_indices()
                        .skip(1)
                        .find(|&(_, c)| c == '\'')
                        .map(|(i, _)| i + 2)
                } else {
                    (rest.chars().nth(1) == Some('\'')).then_some(2)
                };
                out.push('\'');
                for _ in 0..len.unwrap_or(0) {
                    chars.next();
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// When `before` ends a raw string's opening (`r`, `br`, `r#`...), the
/// number of its `#`s.
fn raw_hashes(before: &str) -> Option<usize> {
    let hashes = before.len() - before.trim_end_matches('#').len();
    let head = before[..before.len() - hashes].strip_suffix('r')?;
    let head = head.strip_suffix('b').unwrap_or(head);
    let ident = head
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || c == '_');
    (!ident).then_some(hashes)
}
