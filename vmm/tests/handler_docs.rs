//! Every system call handler says what it implements, as gVisor's do
//! (`// Foo implements Linux syscall foo(2).`), and every partial one says
//! what is missing in the very words of the support table
//! (`kernel/syscalls/mod.rs`, which `rewind doctor --syscalls` prints).

mod common;

use common::rust_files;
use std::path::Path;
use vmm::kernel::syscalls::{linux_calls, row::Support};

#[test]
fn every_handler_says_what_it_implements_and_what_is_missing() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernel"),
        &mut files,
    );
    let mut undocumented = Vec::new();
    let mut partial_notes = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            let Some(rest) = code
                .strip_prefix("pub fn sys_")
                .or_else(|| code.strip_prefix("fn sys_"))
            else {
                continue;
            };
            // The doc comment right above the function.
            let doc: Vec<&str> = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("///"))
                .copied()
                .collect();
            if !doc.iter().any(|l| l.contains(" implements Linux syscall")) {
                let name = rest.split('(').next().unwrap();
                undocumented.push(format!("{}: sys_{name}", f.display()));
            }
            for l in doc {
                if let Some(note) = l.trim_start().strip_prefix("/// Partial (") {
                    partial_notes.push(note.to_string());
                }
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "handlers without `Foo implements Linux syscall foo(2).`:\n{}",
        undocumented.join("\n")
    );
    // Each partial call's note, as the table has it, is on its handler.
    for row in linux_calls() {
        if let Support::Partial(what) = row.support {
            let want = format!("{}): {what}.", row.name);
            assert!(
                partial_notes.contains(&want),
                "no handler says `/// Partial ({want}`"
            );
        }
    }
    assert_eq!(
        partial_notes.len(),
        linux_calls()
            .filter(|r| matches!(r.support, Support::Partial(_)))
            .count(),
        "a handler notes a partial call the table does not: {partial_notes:?}"
    );
}
