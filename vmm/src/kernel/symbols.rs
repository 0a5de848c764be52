//! Function names for instruction pointers, from the program's ELF symbol
//! table, for reports of where a thread was stuck.

use object::{Object, ObjectSymbol, SymbolKind};

#[derive(Debug, Default, Clone)]
pub struct SymbolTable {
    /// (start, size, name), sorted by start.
    funcs: Vec<(u64, u64, String)>,
}

impl SymbolTable {
    pub fn from_elf(bytes: &[u8], load_bias: u64) -> SymbolTable {
        let Ok(file) = object::File::parse(bytes) else {
            return SymbolTable::default();
        };
        let mut funcs: Vec<_> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| {
                Some((
                    s.address() + load_bias,
                    s.size(),
                    s.name().ok()?.to_string(),
                ))
            })
            .collect();
        funcs.sort();
        SymbolTable { funcs }
    }

    /// `name+0xoff`, or the bare address when no symbol covers it.
    pub fn describe(&self, ip: u64) -> String {
        let i = self.funcs.partition_point(|f| f.0 <= ip);
        match i.checked_sub(1).map(|i| &self.funcs[i]) {
            Some((start, size, name)) if ip < start + (*size).max(1) => {
                format!("{ip:#x} in {name}+{:#x}", ip - start)
            }
            _ => format!("{ip:#x}"),
        }
    }
}
