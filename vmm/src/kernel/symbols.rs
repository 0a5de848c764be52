//! Function names for instruction pointers, and variable names for data
//! addresses, from the program's ELF symbol table, for reports of where a
//! thread was stuck and of the access that decides a race.

use object::{Object, ObjectSymbol, SymbolKind};

#[derive(Debug, Default, Clone)]
pub struct SymbolTable {
    /// (start, size, name), sorted by start.
    funcs: Vec<(u64, u64, String)>,
    /// Data objects (variables), the same way.
    objects: Vec<(u64, u64, String)>,
}

/// The entry of `table` (sorted by start) covering `addr`.
fn covering(table: &[(u64, u64, String)], addr: u64) -> Option<(&str, u64)> {
    let i = table.partition_point(|f| f.0 <= addr);
    let (start, size, name) = &table[i.checked_sub(1)?];
    (addr < start + (*size).max(1)).then(|| (name.as_str(), addr - start))
}

impl SymbolTable {
    pub fn from_elf(bytes: &[u8], load_bias: u64) -> SymbolTable {
        let Ok(file) = object::File::parse(bytes) else {
            return SymbolTable::default();
        };
        let table = |kind: SymbolKind| {
            let mut t: Vec<_> = file
                .symbols()
                .filter(|s| s.kind() == kind && s.address() != 0)
                .filter_map(|s| {
                    Some((
                        s.address() + load_bias,
                        s.size(),
                        s.name().ok()?.to_string(),
                    ))
                })
                .collect();
            t.sort();
            t
        };
        SymbolTable {
            funcs: table(SymbolKind::Text),
            objects: table(SymbolKind::Data),
        }
    }

    /// The function covering `ip`, and the offset into it.
    pub fn function_at(&self, ip: u64) -> Option<(&str, u64)> {
        covering(&self.funcs, ip)
    }

    /// The variable (data object) covering `addr`, and the offset into it.
    pub fn object_at(&self, addr: u64) -> Option<(&str, u64)> {
        covering(&self.objects, addr)
    }

    /// `name+0xoff`, or the bare address when no symbol covers it.
    pub fn describe(&self, ip: u64) -> String {
        match self.function_at(ip) {
            Some((name, off)) => format!("{ip:#x} in {name}+{off:#x}"),
            None => format!("{ip:#x}"),
        }
    }
}
