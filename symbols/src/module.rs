//! One ELF file, parsed: its build id, function symbols, DWARF (its own or
//! a separate debug file's) and call-frame information. Addresses here are
//! the file's own (link-time); [`crate::Symbolizer`] adds the load bias.
//!
//! Parsed files are kept in a process-wide cache by build id (else by a hash
//! of their bytes), so a second lookup of the same program is fast.

use crate::debuginfo::DebugFinder;
use crate::{demangle, SymbolError};
use gimli::Reader as _;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// The gimli reader every parsed section uses: owned, cheap to clone.
pub type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Where a module's DWARF came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "path")]
pub enum DebugOrigin {
    /// The ELF file itself carries it.
    Embedded,
    /// A separate file on the host (`/usr/lib/debug/.build-id/...`).
    HostFile(PathBuf),
    /// Downloaded from a debuginfod server (the cached file).
    Debuginfod(PathBuf),
    /// None found: frames are named by symbol.
    None,
}

/// A function symbol: (start, size, name), link-time addresses.
#[derive(Debug, Clone)]
struct Sym {
    start: u64,
    size: u64,
    name: String,
}

/// An FDE index: (start, end, fde), sorted by start.
type FdeIndex = Vec<(u64, u64, gimli::FrameDescriptionEntry<Reader>)>;

/// One parsed ELF file.
pub struct Module {
    build_id: Option<Vec<u8>>,
    syms: Vec<Sym>,
    dwarf: Option<Arc<gimli::Dwarf<Reader>>>,
    /// addr2line parses lazily through cells that are not Sync: one lookup at a time.
    ctx: Option<Mutex<addr2line::Context<Reader>>>,
    debug_origin: DebugOrigin,
    pub(crate) eh_frame: Option<gimli::EhFrame<Reader>>,
    pub(crate) debug_frame: Option<gimli::DebugFrame<Reader>>,
    pub(crate) bases: gimli::BaseAddresses,
    eh_index: OnceLock<FdeIndex>,
    debug_index: OnceLock<FdeIndex>,
    /// The lowest and highest address of its loaded segments.
    span: (u64, u64),
    /// Its PLT stubs' sections (`.plt`, `.plt.sec`, `.iplt`...): jumps with
    /// no call frame information of their own.
    plt: Vec<(u64, u64)>,
    /// File entries of the line tables: path -> (MD5, size, mtime) as recorded.
    files: OnceLock<HashMap<String, FileEntry>>,
    /// Units by address and parsed units, for reading variables.
    pub(crate) values: crate::values::IndexCell,
    /// Its thread-local block's layout and errno.
    tls: crate::tls::Tls,
}

/// What the line table records of one source file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileEntry {
    pub md5: Option<[u8; 16]>,
    /// 0 when not recorded.
    pub size: u64,
    /// 0 when not recorded.
    pub mtime: u64,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("build_id", &self.build_id_hex())
            .field("symbols", &self.syms.len())
            .field("debug_origin", &self.debug_origin)
            .finish()
    }
}

fn cache() -> &'static Mutex<HashMap<Vec<u8>, Arc<Module>>> {
    static CACHE: OnceLock<Mutex<HashMap<Vec<u8>, Arc<Module>>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The build id of an ELF file (its `.note.gnu.build-id`), if it has one.
pub fn build_id(bytes: &[u8]) -> Option<Vec<u8>> {
    let file = object::File::parse(bytes).ok()?;
    file.build_id().ok().flatten().map(<[u8]>::to_vec)
}

impl Module {
    /// The module parsed before for this build id, if there is one: its
    /// file need not be read again.
    pub fn cached(build_id: &[u8]) -> Option<Arc<Module>> {
        cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(build_id)
            .cloned()
    }

    /// The module for these bytes: from the cache when the same build id (or
    /// the same bytes) was parsed before, else parsed now, looking for
    /// separate debug info with `finder` when the file has none.
    pub fn load(bytes: &[u8], finder: &DebugFinder) -> Result<Arc<Module>, SymbolError> {
        let key = match build_id(bytes) {
            Some(id) => id,
            None => {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut h);
                let mut key = b"hash:".to_vec();
                key.extend(h.finish().to_le_bytes());
                key
            }
        };
        if let Some(m) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(m.clone());
        }
        let m = Arc::new(Module::parse(bytes, finder)?);
        cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, m.clone());
        Ok(m)
    }

    /// Only the ELF symbol table (no DWARF, no CFI): cheap, and a function
    /// of the file alone, for text that is recorded (events).
    pub fn symbols_only(bytes: &[u8]) -> Result<Module, SymbolError> {
        Module::parse_with(bytes, &DebugFinder::none(), false)
    }

    /// Parses without the cache.
    pub fn parse(bytes: &[u8], finder: &DebugFinder) -> Result<Module, SymbolError> {
        Module::parse_with(bytes, finder, true)
    }

    fn parse_with(bytes: &[u8], finder: &DebugFinder, debug: bool) -> Result<Module, SymbolError> {
        let file = object::File::parse(bytes).map_err(|e| SymbolError::Elf(e.to_string()))?;
        let endian = if file.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let tls = crate::tls::Tls::of(&file, bytes);
        let mut syms: Vec<Sym> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| {
                Some(Sym {
                    start: s.address(),
                    size: s.size(),
                    name: s.name().ok()?.to_string(),
                })
            })
            .collect();
        // Aliases share an address: the one with the fewest leading
        // underscores (`pthread_mutex_lock`, not `___pthread_mutex_lock`)
        // sorts last, which is the one `symbol` names.
        let underscores = |s: &Sym| s.name.len() - s.name.trim_start_matches('_').len();
        syms.sort_by(|a, b| {
            (a.start, std::cmp::Reverse(underscores(a)), &a.name).cmp(&(
                b.start,
                std::cmp::Reverse(underscores(b)),
                &b.name,
            ))
        });

        let span = file
            .segments()
            .map(|s| (s.address(), s.address() + s.size()))
            .fold((u64::MAX, 0), |acc, s| (acc.0.min(s.0), acc.1.max(s.1)));

        let plt = file
            .sections()
            .filter(|s| {
                s.name()
                    .is_ok_and(|n| n.starts_with(".plt") || n.starts_with(".iplt"))
            })
            .map(|s| (s.address(), s.address() + s.size()))
            .collect();

        let mut bases = gimli::BaseAddresses::default();
        if let Some(s) = file.section_by_name(".eh_frame") {
            bases = bases.set_eh_frame(s.address());
        }
        if let Some(s) = file.section_by_name(".text") {
            bases = bases.set_text(s.address());
        }
        if let Some(s) = file.section_by_name(".got") {
            bases = bases.set_got(s.address());
        }
        let eh_frame = section(&file, ".eh_frame", endian)
            .filter(|_| debug)
            .map(|r| {
                let mut s = gimli::EhFrame::from(r);
                s.set_address_size(8);
                s
            });

        let has_dwarf = file.section_by_name(".debug_info").is_some();
        let (debug_bytes, debug_origin) = if !debug {
            (None, DebugOrigin::None)
        } else if has_dwarf {
            (None, DebugOrigin::Embedded)
        } else {
            match finder.find(build_id.as_deref()) {
                Some((bytes, origin)) => (Some(bytes), origin),
                None => (None, DebugOrigin::None),
            }
        };
        let debug_file = match &debug_bytes {
            Some(b) => {
                Some(object::File::parse(&b[..]).map_err(|e| SymbolError::Elf(e.to_string()))?)
            }
            None => None,
        };
        let dwarf_file = debug_file.as_ref().unwrap_or(&file);
        let (dwarf, ctx, debug_origin) = if matches!(debug_origin, DebugOrigin::None) {
            (None, None, debug_origin)
        } else {
            let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
                Ok(section(dwarf_file, id.name(), endian)
                    .unwrap_or_else(|| gimli::EndianArcSlice::new(Arc::from(&[][..]), endian)))
            })
            .map_err(|e| SymbolError::Dwarf(e.to_string()))?;
            let dwarf = Arc::new(dwarf);
            let ctx = addr2line::Context::from_arc_dwarf(dwarf.clone())
                .map_err(|e| SymbolError::Dwarf(e.to_string()))?;
            (Some(dwarf), Some(Mutex::new(ctx)), debug_origin)
        };
        let debug_frame = section(&file, ".debug_frame", endian)
            .or_else(|| section(dwarf_file, ".debug_frame", endian))
            .filter(|_| debug)
            .map(|r| {
                let mut s = gimli::DebugFrame::from(r);
                s.set_address_size(8);
                s
            });
        Ok(Module {
            build_id,
            syms,
            dwarf,
            ctx,
            debug_origin,
            eh_frame,
            debug_frame,
            bases,
            eh_index: OnceLock::new(),
            debug_index: OnceLock::new(),
            span,
            plt,
            files: OnceLock::new(),
            values: OnceLock::new(),
            tls,
        })
    }

    pub fn build_id(&self) -> Option<&[u8]> {
        self.build_id.as_deref()
    }

    /// The build id in hex, as debuginfod and `/usr/lib/debug/.build-id` name it.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id.as_deref().map(hex)
    }

    /// Where its DWARF came from.
    pub fn debug_origin(&self) -> &DebugOrigin {
        &self.debug_origin
    }

    /// Whether it has DWARF (line tables, functions).
    pub fn has_dwarf(&self) -> bool {
        self.ctx.is_some()
    }

    /// Its DWARF, for readers of types and variables (the debug adapter).
    pub fn dwarf(&self) -> Option<&gimli::Dwarf<Reader>> {
        self.dwarf.as_deref()
    }

    /// Its thread-local storage: where a thread's block and errno are.
    pub fn tls(&self) -> &crate::tls::Tls {
        &self.tls
    }

    /// Lowest and highest link-time address of its loaded segments.
    /// Whether `addr` (unbiased) is in a PLT stub.
    pub fn in_plt(&self, addr: u64) -> bool {
        self.plt.iter().any(|&(lo, hi)| (lo..hi).contains(&addr))
    }

    pub fn span(&self) -> (u64, u64) {
        self.span
    }

    /// The function symbol covering `addr`, demangled, with the offset into it.
    pub fn symbol(&self, addr: u64) -> Option<(String, u64)> {
        let i = self.syms.partition_point(|s| s.start <= addr);
        let s = &self.syms[i.checked_sub(1)?];
        (addr < s.start + s.size.max(1)).then(|| (demangle(&s.name).into_owned(), addr - s.start))
    }

    /// The function symbol covering `addr`: (start, end), link-time.
    pub fn symbol_range(&self, addr: u64) -> Option<(u64, u64)> {
        let i = self.syms.partition_point(|s| s.start <= addr);
        let s = &self.syms[i.checked_sub(1)?];
        (addr < s.start + s.size.max(1)).then_some((s.start, s.start + s.size.max(1)))
    }

    /// A function's address by its name (mangled or demangled).
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.syms
            .iter()
            .find(|s| s.name == name || demangle(&s.name) == name)
            .map(|s| s.start)
    }

    /// The logical frames at `probe` (innermost, inlined, first): (function,
    /// file, line, column).
    pub(crate) fn frames(&self, probe: u64) -> Vec<RawFrame> {
        let mut out = Vec::new();
        let Some(ctx) = &self.ctx else { return out };
        let ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(mut iter) = ctx.find_frames(probe).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = iter.next() {
            let function = f
                .function
                .as_ref()
                .and_then(|n| Some(demangle(&n.raw_name().ok()?).into_owned()));
            let location = f.location.as_ref().and_then(|l| {
                Some(crate::Location {
                    file: l.file?.to_string(),
                    line: l.line?,
                    column: l.column.filter(|c| *c != 0),
                })
            });
            out.push(RawFrame { function, location });
        }
        out
    }

    /// Every address where a line of `file` (a full path, or a suffix of one
    /// at a `/`) begins a statement; link-time addresses, sorted.
    pub fn line_addresses(&self, file: &str, line: u32) -> Vec<u64> {
        let mut out = Vec::new();
        let Some(dwarf) = &self.dwarf else { return out };
        for (unit, program) in line_programs(dwarf) {
            let mut rows = program.rows();
            let mut matches: HashMap<u64, bool> = HashMap::new();
            while let Ok(Some((header, row))) = rows.next_row() {
                if row.end_sequence()
                    || !row.is_stmt()
                    || row.line().map(|l| l.get()) != Some(line as u64)
                {
                    continue;
                }
                let hit = *matches.entry(row.file_index()).or_insert_with(|| {
                    file_path(dwarf, &unit, header, row.file_index())
                        .is_some_and(|p| path_matches(&p, file))
                });
                if hit {
                    out.push(row.address());
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// What the line tables record of the source file at `path` (MD5, size,
    /// modification time), if any unit names it.
    pub fn file_entry(&self, path: &str) -> Option<FileEntry> {
        self.files
            .get_or_init(|| self.collect_files())
            .get(path)
            .copied()
    }

    /// Every source file the line tables name (full paths, sorted): which
    /// files the program was built from.
    pub fn source_files(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .files
            .get_or_init(|| self.collect_files())
            .keys()
            .cloned()
            .collect();
        out.sort();
        out
    }

    fn collect_files(&self) -> HashMap<String, FileEntry> {
        let mut out = HashMap::new();
        let Some(dwarf) = &self.dwarf else { return out };
        for (unit, program) in line_programs(dwarf) {
            let header = program.header();
            let base = if header.version() >= 5 { 0 } else { 1 };
            for (i, f) in header.file_names().iter().enumerate() {
                let Some(path) = file_path(dwarf, &unit, header, i as u64 + base) else {
                    continue;
                };
                let md5 = header
                    .file_has_md5()
                    .then_some(*f.md5())
                    .filter(|m| m.iter().any(|b| *b != 0));
                out.entry(path).or_insert(FileEntry {
                    md5,
                    size: f.size(),
                    mtime: f.timestamp(),
                });
            }
        }
        out
    }

    /// The FDE index of .eh_frame or .debug_frame, built on first use.
    pub(crate) fn fde(&self, addr: u64, eh: bool) -> Option<&gimli::FrameDescriptionEntry<Reader>> {
        let index = if eh {
            self.eh_index.get_or_init(|| match &self.eh_frame {
                Some(s) => index_fdes(s, &self.bases),
                None => Vec::new(),
            })
        } else {
            self.debug_index.get_or_init(|| match &self.debug_frame {
                Some(s) => index_fdes(s, &self.bases),
                None => Vec::new(),
            })
        };
        let i = index.partition_point(|f| f.0 <= addr);
        let (start, end, fde) = &index[i.checked_sub(1)?];
        (*start <= addr && addr < *end).then_some(fde)
    }
}

pub(crate) struct RawFrame {
    pub function: Option<String>,
    pub location: Option<crate::Location>,
}

fn index_fdes<S: gimli::UnwindSection<Reader>>(
    section: &S,
    bases: &gimli::BaseAddresses,
) -> FdeIndex {
    let mut out = Vec::new();
    let mut entries = section.entries(bases);
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry {
            if let Ok(fde) = partial.parse(S::cie_from_offset) {
                let start = fde.initial_address();
                out.push((start, start + fde.len(), fde));
            }
        }
    }
    out.sort_by_key(|f| f.0);
    out
}

/// A section's bytes (decompressed), as a gimli reader.
fn section(file: &object::File, name: &str, endian: gimli::RunTimeEndian) -> Option<Reader> {
    let s = file.section_by_name(name)?;
    let data: Cow<[u8]> = s.uncompressed_data().ok()?;
    Some(gimli::EndianArcSlice::new(Arc::from(&data[..]), endian))
}

/// The full path of file `index` of a line program.
/// Each unit of `dwarf` that parses and has a line program, with that
/// program; the walk ends at the first header that does not parse.
pub(crate) fn line_programs(
    dwarf: &gimli::Dwarf<Reader>,
) -> impl Iterator<Item = (gimli::Unit<Reader>, gimli::IncompleteLineProgram<Reader>)> + '_ {
    let mut units = dwarf.units();
    std::iter::from_fn(move || loop {
        let header = units.next().ok()??;
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        if let Some(program) = unit.line_program.clone() {
            return Some((unit, program));
        }
    })
}

pub(crate) fn file_path(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &gimli::Unit<Reader>,
    header: &gimli::LineProgramHeader<Reader>,
    index: u64,
) -> Option<String> {
    let file = header.file(index)?;
    let name = dwarf.attr_string(unit, file.path_name()).ok()?;
    let name = name.to_string_lossy().ok()?.into_owned();
    if name.starts_with('/') {
        return Some(name);
    }
    let mut path = PathBuf::new();
    if let Some(comp) = &unit.comp_dir {
        path.push(comp.to_string_lossy().ok()?.as_ref());
    }
    if let Some(dir) = file.directory(header) {
        let dir = dwarf.attr_string(unit, dir).ok()?;
        path.push(dir.to_string_lossy().ok()?.as_ref());
    }
    path.push(name);
    Some(path.to_string_lossy().into_owned())
}

/// Whether `path` is `want`, or ends with it at a `/`.
pub(crate) fn path_matches(path: &str, want: &str) -> bool {
    path == want
        || (path.ends_with(want) && {
            let cut = path.len() - want.len();
            want.starts_with('/') || path.as_bytes()[cut - 1] == b'/'
        })
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
