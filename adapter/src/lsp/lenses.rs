//! Where code lenses go: above C `main`, Rust `fn main` and `#[test]`
//! functions. A line scan, not a parser: it looks at the start of lines.

use std::path::Path;

/// An entry point found in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 0-based line of the function's signature.
    pub line: u32,
    /// `None` for `main`; for a `#[test]`, its path in the file's modules
    /// (`tests::adds_up`), as the test harness names it without the path of
    /// the file's own module (`module_of`).
    pub test: Option<String>,
}

/// The entry points of a C or Rust source text.
pub fn entries(text: &str, rust: bool) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut test_pending = false;
    // The `mod name {` blocks the line is in: (their indentation, name).
    let mut mods: Vec<(usize, String)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        let indent = raw.len() - line.len();
        let i = i as u32;
        if rust {
            if line.starts_with('}') && mods.last().is_some_and(|(at, _)| indent <= *at) {
                mods.pop();
            }
            if let Some(name) = mod_block(line) {
                mods.push((indent, name));
                continue;
            }
            if line.starts_with("#[test]") || line.starts_with("#[tokio::test") {
                test_pending = true;
                continue;
            }
            let sig = line
                .trim_start_matches("pub ")
                .trim_start_matches("async ")
                .strip_prefix("fn ");
            if let Some(rest) = sig {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if test_pending {
                    let mut path: Vec<&str> = mods.iter().map(|(_, m)| m.as_str()).collect();
                    path.push(&name);
                    out.push(Entry {
                        line: i,
                        test: Some(path.join("::")),
                    });
                } else if name == "main" && !raw.starts_with([' ', '\t']) {
                    out.push(Entry {
                        line: i,
                        test: None,
                    });
                }
                test_pending = false;
            } else if !line.starts_with("#[") && !line.is_empty() && !line.starts_with("//") {
                test_pending = false;
            }
        } else if is_c_main(raw) {
            out.push(Entry {
                line: i,
                test: None,
            });
        }
    }
    out
}

/// `mod name {` (any visibility), not `mod name;`.
fn mod_block(line: &str) -> Option<String> {
    let rest = match line.strip_prefix("pub") {
        // `pub mod`, `pub(crate) mod`, `pub(super) mod`.
        Some(r) => r.split_once(')').map_or(r, |(_, r)| r).trim_start(),
        None => line,
    };
    let rest = rest.strip_prefix("mod ")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let after = rest[name.len()..].trim_start();
    (!name.is_empty() && after.starts_with('{')).then_some(name)
}

/// The module path of a Rust source file in its crate, as Cargo lays crates
/// out: `src/net/tcp.rs` and `src/net/tcp/mod.rs` are `net::tcp`; a crate's
/// root (`src/main.rs`, `src/lib.rs`, `src/bin/*.rs`, `tests/*.rs`, or a
/// file outside `src/`, compiled by itself) is the empty path.
pub fn module_of(file: &Path) -> Vec<String> {
    let parts: Vec<String> = file
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let Some(src) = parts.iter().rposition(|c| c == "src") else {
        return Vec::new();
    };
    let mut path: Vec<String> = parts[src + 1..].to_vec();
    if path.first().is_some_and(|c| c == "bin") {
        return Vec::new();
    }
    if let Some(last) = path.pop() {
        let stem = last.strip_suffix(".rs").unwrap_or(&last).to_string();
        if !(path.is_empty() && (stem == "main" || stem == "lib")) && stem != "mod" {
            path.push(stem);
        }
    }
    path
}

/// `int main(void)`, `int main (int argc, ...)`, `main(` at the line's start.
fn is_c_main(line: &str) -> bool {
    let words = line
        .trim_start_matches("static ")
        .trim_start_matches("int ")
        .trim_start_matches("void ")
        .trim_start();
    let Some(rest) = words.strip_prefix("main") else {
        return false;
    };
    !line.starts_with([' ', '\t']) && rest.trim_start().starts_with('(')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_main_is_found_and_not_its_calls() {
        let text = "int helper(void);\nint main(void)\n{\n    main2();\n}\nint main (int argc, char **argv);\n";
        let e = entries(text, false);
        assert_eq!(e.iter().map(|e| e.line).collect::<Vec<_>>(), vec![1, 5]);
    }

    #[test]
    fn rust_main_and_tests() {
        let text = "fn main() {}\n\n#[test]\n#[ignore]\nfn adds_up() {}\nfn helper() {}\nmod t {\n    #[test]\n    fn inner() {}\n}\n";
        let e = entries(text, true);
        assert_eq!(
            e,
            vec![
                Entry {
                    line: 0,
                    test: None
                },
                Entry {
                    line: 4,
                    test: Some("adds_up".into())
                },
                Entry {
                    line: 8,
                    test: Some("t::inner".into())
                },
            ]
        );
    }

    #[test]
    fn a_test_is_named_by_its_modules() {
        let text = "mod a {\n    pub(crate) mod b {\n        #[test]\n        fn deep() {}\n    }\n    #[test]\n    fn shallow() {}\n}\nmod c;\n#[test]\nfn top() {}\n";
        let names: Vec<_> = entries(text, true)
            .into_iter()
            .filter_map(|e| e.test)
            .collect();
        assert_eq!(names, ["a::b::deep", "a::shallow", "top"]);
    }

    #[test]
    fn a_file_s_module_follows_cargo_s_layout() {
        let of = |p: &str| module_of(Path::new(p)).join("::");
        assert_eq!(of("/w/src/main.rs"), "");
        assert_eq!(of("/w/src/lib.rs"), "");
        assert_eq!(of("/w/src/net/tcp.rs"), "net::tcp");
        assert_eq!(of("/w/src/net/mod.rs"), "net");
        assert_eq!(of("/w/src/bin/tool.rs"), "");
        assert_eq!(of("/w/tests/api.rs"), "");
        assert_eq!(of("/w/lenses.rs"), "");
    }
}
