//! Line tables as a debugger steps by them: every row of every mapped
//! file's DWARF line programs, by address, with the rows that begin a
//! statement (`is_stmt`). A line step stops at a statement start; a source
//! breakpoint goes on each statement start of its line.

use crate::module::{file_path, line_programs, Module};
use crate::Symbolizer;
use std::collections::HashMap;

/// One row: from `addr` on (until the next row), the code is `line` of
/// `file` (an index into [`LineTable::files`]). `line` 0 is code no line
/// is charged for; an end row closes a sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub addr: u64,
    pub file: u32,
    pub line: u32,
    pub stmt: bool,
    pub end: bool,
}

/// Every row of the mapped files, load addresses, sorted.
#[derive(Debug, Clone, Default)]
pub struct LineTable {
    files: Vec<String>,
    rows: Vec<Row>,
}

impl LineTable {
    /// The rows of every file `s` has mapped.
    pub fn of(s: &Symbolizer) -> LineTable {
        let mut t = LineTable::default();
        let mut ids: HashMap<String, u32> = HashMap::new();
        for m in s.modules() {
            t.add_module(&m.module, m.bias, &mut ids);
        }
        // At one address the last row counts; ends sort before starts there.
        t.rows.sort_by_key(|r| (r.addr, !r.end));
        t
    }

    fn add_module(&mut self, module: &Module, bias: u64, ids: &mut HashMap<String, u32>) {
        let Some(dwarf) = module.dwarf() else { return };
        for (unit, program) in line_programs(dwarf) {
            let mut names: HashMap<u64, Option<u32>> = HashMap::new();
            let mut rows = program.rows();
            while let Ok(Some((header, row))) = rows.next_row() {
                let file = *names.entry(row.file_index()).or_insert_with(|| {
                    let path = clean(&file_path(dwarf, &unit, header, row.file_index())?);
                    let n = self.files.len() as u32;
                    Some(*ids.entry(path.clone()).or_insert_with(|| {
                        self.files.push(path);
                        n
                    }))
                });
                let Some(file) = file else { continue };
                // Code at address 0 is code the linker dropped.
                if row.address() == 0 {
                    continue;
                }
                self.rows.push(Row {
                    addr: row.address().wrapping_add(bias),
                    file,
                    line: row.line().map_or(0, |l| l.get() as u32),
                    stmt: row.is_stmt(),
                    end: row.end_sequence(),
                });
            }
        }
    }

    /// The source files the line tables name, full paths.
    pub fn files(&self) -> &[String] {
        &self.files
    }

    pub fn file(&self, id: u32) -> &str {
        &self.files[id as usize]
    }

    /// The row in force at `pc` (None outside every sequence, or where no
    /// line is charged).
    pub fn at(&self, pc: u64) -> Option<Row> {
        let i = self.rows.partition_point(|r| r.addr <= pc);
        let r = self.rows[..i].last()?;
        (!r.end && r.line != 0).then_some(*r)
    }

    /// Whether a statement begins at `pc`.
    pub fn is_stmt_start(&self, pc: u64) -> bool {
        let a = self.rows.partition_point(|r| r.addr < pc);
        self.rows[a..]
            .iter()
            .take_while(|r| r.addr == pc)
            .any(|r| r.stmt && !r.end && r.line != 0)
    }

    /// The statement starts in `lo..hi`.
    pub fn stmts_in(&self, lo: u64, hi: u64) -> Vec<u64> {
        let a = self.rows.partition_point(|r| r.addr < lo);
        let mut out: Vec<u64> = self.rows[a..]
            .iter()
            .take_while(|r| r.addr < hi)
            .filter(|r| r.stmt && !r.end && r.line != 0)
            .map(|r| r.addr)
            .collect();
        out.dedup();
        out
    }

    /// The lines of `file` (a full path, or a suffix at a `/`) that have a
    /// statement start, each with its addresses.
    pub fn lines_of(&self, file: &str) -> Vec<(u32, Vec<u64>)> {
        let file = &clean(file);
        let ids: Vec<u32> = (0..self.files.len() as u32)
            .filter(|i| crate::module::path_matches(self.file(*i), file))
            .collect();
        let mut by: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
        for r in &self.rows {
            if r.stmt && !r.end && r.line != 0 && ids.contains(&r.file) {
                by.entry(r.line).or_default().push(r.addr);
            }
        }
        by.into_iter()
            .map(|(l, mut v)| {
                v.sort_unstable();
                v.dedup();
                (l, v)
            })
            .collect()
    }

    /// Whether `file` (full path or suffix) is a file of the line tables.
    pub fn has_file(&self, file: &str) -> bool {
        let file = &clean(file);
        self.files
            .iter()
            .any(|f| crate::module::path_matches(f, file))
    }

    /// The full path of `file` as the line tables name it.
    pub fn full_path(&self, file: &str) -> Option<&str> {
        let file = &clean(file);
        self.files
            .iter()
            .find(|f| crate::module::path_matches(f, file))
            .map(String::as_str)
    }
}

/// A path with `.` and `..` taken out lexically (`/a/tests/../b.c` is
/// `/a/b.c`), as a client names the file the debug info reaches by `..`.
pub fn clean(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "." => {}
            "" if !out.is_empty() => {}
            ".." => match out.last() {
                Some(&"") => {}
                Some(&l) if l != ".." => {
                    out.pop();
                }
                _ => out.push(".."),
            },
            c => out.push(c),
        }
    }
    let s = out.join("/");
    if s.is_empty() {
        "/".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn paths_are_cleaned() {
        assert_eq!(clean("/w/tests/../guest/tests/x.c"), "/w/guest/tests/x.c");
        assert_eq!(clean("/a/./b//c.c"), "/a/b/c.c");
        assert_eq!(clean("src/../x.rs"), "x.rs");
        assert_eq!(clean("x.c"), "x.c");
    }
}
