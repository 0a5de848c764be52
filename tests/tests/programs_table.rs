//! The README's "Programs known to run" stays honest: every row names the
//! test that runs the program (a file of `tests/tests/` and a `#[test]` in
//! it) and gives its steps and times, and that test prints the row's
//! figures (`table::figures`, seen with `--nocapture`).

use std::path::Path;

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md")
}

/// The table's rows (header and rule left out), each split into its cells.
fn rows(readme: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let section = readme
        .split_once("\n## Programs known to run\n")
        .expect("README.md has \"## Programs known to run\"")
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut lines = section.lines().filter(|l| l.starts_with('|'));
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let header = cells(lines.next().expect("a table"));
    let body = lines.skip(1).map(cells).collect();
    (header, body)
}

/// The `code` spans of a cell.
fn spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// What is wrong with a row's test cell: `tests/tests/F.rs` `NAME`, where
/// F.rs has a `#[test] fn NAME` that prints the row's figures.
fn test_problem(cell: &str) -> Option<String> {
    let s = spans(cell);
    let [file, name] = s[..] else {
        return Some(format!("`{cell}` is not `tests/tests/FILE.rs` `TEST`"));
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    let Ok(source) = std::fs::read_to_string(&path) else {
        return Some(format!("{file} does not exist"));
    };
    let Some(at) = source.find(&format!("\nfn {name}(")) else {
        return Some(format!("{file} has no fn {name}"));
    };
    let before = source[..at].trim_end();
    if !before.ends_with("#[test]") {
        return Some(format!("{file}'s {name} is not a #[test]"));
    }
    let body = source[at..].split("\n}\n").next().unwrap_or("");
    let prints = body.contains("table::figures") || {
        // Through a helper of the same file that prints them.
        source.contains("table::figures")
            && source
                .split("\nfn ")
                .filter(|f| f.contains("table::figures"))
                .filter_map(|f| f.split('(').next())
                .any(|helper| body.contains(&format!("{helper}(")))
    };
    (!prints).then(|| format!("{file}'s {name} does not print the row's figures"))
}

#[test]
fn every_row_names_a_test_that_runs_it_and_gives_its_figures() {
    let text = readme();
    let (header, body) = rows(&text);
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("the table has no column `{name}`: {header:?}"))
    };
    let (test, steps, time) = (col("test"), col("steps"), col("time in Rewind / natively"));
    assert!(body.len() >= 8, "the table has {} rows", body.len());
    let mut problems = Vec::new();
    for row in &body {
        assert_eq!(
            row.len(),
            header.len(),
            "a row of {} cells: {row:?}",
            row.len()
        );
        if let Some(p) = test_problem(&row[test]) {
            problems.push(format!("{}: {p}", row[0]));
        }
        for c in [steps, time] {
            if row[c].is_empty() {
                problems.push(format!("{}: no {}", row[0], header[c]));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "README.md's table:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_row_naming_no_test_is_found() {
    assert!(test_problem("`tests/tests/nothing.rs` `x`").is_some());
    assert!(test_problem("`tests/tests/node.rs` `no_such_test`").is_some());
    assert!(test_problem("`tests/tests/node.rs`").is_some());
    assert!(
        test_problem("`tests/tests/node.rs` `node_with_a_worker_thread_runs_as_natively`")
            .is_none()
    );
}
