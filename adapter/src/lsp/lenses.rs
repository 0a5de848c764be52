//! Where code lenses go: above C `main`, Rust `fn main` and `#[test]`
//! functions. A line scan, not a parser: it looks at the start of lines.

/// An entry point found in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 0-based line of the function's signature.
    pub line: u32,
    /// `None` for `main`; the test function's name for a `#[test]`.
    pub test: Option<String>,
}

/// The entry points of a C or Rust source text.
pub fn entries(text: &str, rust: bool) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut test_pending = false;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_start();
        let i = i as u32;
        if rust {
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
                    out.push(Entry {
                        line: i,
                        test: Some(name),
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
                    test: Some("inner".into())
                },
            ]
        );
    }
}
