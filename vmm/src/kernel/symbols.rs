//! Names for the places threads are at, for reports (deadlocks, timeouts,
//! `ps`, `check --where`) and debuggers: the `symbols` crate resolves them
//! from the ELF files a process mapped (its program, the interpreter, the
//! libraries the loader mapped) and their DWARF, parsed the first time a
//! report needs them.

use super::fs::vfs::FileBytes;
use super::task::{Pid, Tid};
use super::Kernel;
use crate::machine::layout::PAGE_SIZE;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// An ELF file an address space holds: what the symbolizer needs to find
/// it again in the tree (keyframes carry it with the address space).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MappedElf {
    /// Its path in the guest's tree, as its mapping is named.
    pub path: String,
    /// What is added to the file's addresses where it is loaded.
    pub bias: u64,
    /// An address of one of its mappings: the file is still mapped while
    /// the mapping there has its name.
    pub at: u64,
    /// Its build id and size, so that a file changed since is not taken for it.
    pub build_id: Option<Vec<u8>>,
    pub size: u64,
}

impl MappedElf {
    pub fn new(path: &str, bytes: &[u8], bias: u64, at: u64) -> MappedElf {
        MappedElf {
            path: path.to_string(),
            bias,
            at,
            build_id: symbols::module::build_id(bytes),
            size: bytes.len() as u64,
        }
    }

    fn is(&self, bytes: &[u8]) -> bool {
        bytes.len() as u64 == self.size
            && (self.build_id.is_none() || symbols::module::build_id(bytes) == self.build_id)
    }
}

/// The ELF files' symbolizers, parsed on first use.
#[derive(Debug, Default, Clone)]
pub struct SymbolTable {
    /// The first program: its path, bytes and load bias.
    elf: Option<Arc<(String, Arc<FileBytes>, u64)>>,
    parsed: OnceLock<Option<Arc<symbols::Symbolizer>>>,
    /// The ELF symbol table alone, for text that is recorded.
    names: OnceLock<Option<Arc<symbols::Module>>>,
    /// One finder for every symbolizer, so that a server that cannot be
    /// reached is tried once.
    finder: Arc<OnceLock<symbols::DebugFinder>>,
    /// A symbolizer per set of mapped files (processes share them).
    by_files: Arc<Mutex<HashMap<Vec<MappedElf>, Arc<symbols::Symbolizer>>>>,
    /// The ELF symbol table alone of each mapped file, for recorded text.
    names_of: Arc<Mutex<HashMap<MappedElf, Option<Arc<symbols::Module>>>>>,
}

impl SymbolTable {
    /// The program at guest path `path`, loaded at `load_bias`.
    pub fn from_elf(path: &str, bytes: Arc<FileBytes>, load_bias: u64) -> SymbolTable {
        SymbolTable {
            elf: Some(Arc::new((path.to_string(), bytes, load_bias))),
            ..SymbolTable::default()
        }
    }

    /// `0x4016ac in spin_forever+0x7`, or the bare address: from the ELF
    /// symbol table alone, never from debug info found elsewhere, so that
    /// recorded text (events) depends on the run's inputs only.
    pub fn describe(&self, ip: u64) -> String {
        let names = self.names.get_or_init(|| {
            let (_, bytes, _) = &**self.elf.as_ref()?;
            symbols::Module::symbols_only(bytes).ok().map(Arc::new)
        });
        let bias = self.elf.as_ref().map_or(0, |e| e.2);
        named(ip, names.as_deref(), bias)
    }

    fn finder(&self) -> symbols::DebugFinder {
        self.finder
            .get_or_init(|| symbols::DebugFinder::from_env(DEBUGINFOD_TIMEOUT))
            .clone()
    }

    /// The symbolizer over the first program alone (debug info from the
    /// file itself, `/usr/lib/debug`, or debuginfod when `$DEBUGINFOD_URLS`
    /// is set); [`Kernel::symbolizer_of`] has a process's libraries too.
    pub fn symbolizer(&self) -> Option<Arc<symbols::Symbolizer>> {
        self.parsed
            .get_or_init(|| {
                let (path, bytes, bias) = &**self.elf.as_ref()?;
                let mut s = symbols::Symbolizer::new(self.finder());
                s.add(path, bytes, *bias).ok()?;
                Some(Arc::new(s))
            })
            .clone()
    }

    /// The first program's bytes, when `file` is that program.
    fn program_bytes(&self, file: &MappedElf) -> Option<&[u8]> {
        let (path, bytes, _) = &**self.elf.as_ref()?;
        (*path == file.path && file.is(bytes)).then_some(bytes.as_slice())
    }
}

/// `0x4016ac in spin_forever+0x7` by `names` loaded at `bias`, or the bare address.
fn named(ip: u64, names: Option<&symbols::Module>, bias: u64) -> String {
    match names.and_then(|m| m.symbol(ip.wrapping_sub(bias))) {
        Some((name, off)) => format!("{ip:#x} in {name}+{off:#x}"),
        None => format!("{ip:#x}"),
    }
}

/// How long a report waits for a debuginfod server.
pub const DEBUGINFOD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

impl Kernel<'_> {
    /// Thread `tid`'s registers as the unwinder takes them.
    pub fn unwind_regs(&self, tid: Tid) -> Option<symbols::Registers> {
        let t = self.threads.get(&tid)?;
        let r = match &t.ctx {
            Some(c) => c.regs,
            None => self.m.regs(),
        };
        Some(symbols::Registers::x86_64(
            r.rax,
            r.rbx,
            r.rcx,
            r.rdx,
            r.rsi,
            r.rdi,
            r.rbp,
            r.rsp,
            [r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15],
            r.rip,
        ))
    }

    /// Reads the current process's memory without faulting anything in (a
    /// report must not change the run): false where a page is not present.
    pub fn peek_user(&mut self, va: u64, buf: &mut [u8]) -> bool {
        let pid = self.cur_pid();
        self.peek_process(pid, va, buf)
    }

    /// [`Kernel::peek_user`] through process `pid`'s page tables.
    pub fn peek_process(&mut self, pid: Pid, va: u64, buf: &mut [u8]) -> bool {
        let Some(p) = self.procs.get(&pid) else {
            return false;
        };
        let mut done = 0usize;
        while done < buf.len() {
            let a = va.wrapping_add(done as u64);
            let n = ((PAGE_SIZE - (a & (PAGE_SIZE - 1))) as usize).min(buf.len() - done);
            let Some((frame, _)) = p.mm.pt.lookup(&mut self.m.ram, a & !(PAGE_SIZE - 1)) else {
                return false;
            };
            let pa = frame + (a & (PAGE_SIZE - 1));
            let Ok(bytes) = self.m.ram.slice(pa, n) else {
                return false;
            };
            buf[done..done + n].copy_from_slice(bytes);
            done += n;
        }
        true
    }

    /// The ELF files process `pid` has mapped now: those whose mapping
    /// still has their name.
    pub fn mapped_elves(&self, pid: Pid) -> Vec<MappedElf> {
        let Some(p) = self.procs.get(&pid) else {
            return Vec::new();
        };
        p.mm.elves
            .iter()
            .filter(|e| p.mm.vma_at(e.at).is_some_and(|(_, v)| v.name == e.path))
            .cloned()
            .collect()
    }

    /// [`SymbolTable::describe`] in process `pid`: by the symbol table of
    /// the ELF file it has mapped at `ip` (a program it execed, a library),
    /// never by debug info found elsewhere, as the text is recorded. The
    /// first program's when the process has no file on record.
    pub fn describe_in(&mut self, pid: Pid, ip: u64) -> String {
        let Some(p) = self.procs.get(&pid) else {
            return self.symbols.describe(ip);
        };
        if p.mm.elves.is_empty() {
            return self.symbols.describe(ip);
        }
        let Some(file) =
            p.mm.vma_at(ip)
                .and_then(|(_, v)| p.mm.elves.iter().find(|e| e.path == v.name))
        else {
            return format!("{ip:#x}");
        };
        let cache = self.symbols.names_of.clone();
        let known = cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(file)
            .cloned();
        let file = file.clone();
        let names = match known {
            Some(n) => n,
            None => {
                let bytes = match self.symbols.program_bytes(&file) {
                    Some(b) => Some(Arc::new(b.to_vec().into())),
                    None => self.read_tree_file(&file.path).ok().map(|(_, b)| b),
                };
                let n = bytes
                    .filter(|b| file.is(b))
                    .and_then(|b| symbols::Module::symbols_only(&b).ok())
                    .map(Arc::new);
                cache
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(file.clone(), n.clone());
                n
            }
        };
        named(ip, names.as_deref(), file.bias)
    }

    /// The symbolizer over every ELF file process `pid` has mapped (the
    /// first program's alone when it has none on record).
    pub fn symbolizer_of(&mut self, pid: Pid) -> Option<Arc<symbols::Symbolizer>> {
        let files = self.mapped_elves(pid);
        if files.is_empty() {
            return self.symbols.symbolizer();
        }
        let cache = self.symbols.by_files.clone();
        if let Some(s) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&files) {
            return Some(s.clone());
        }
        let mut s = symbols::Symbolizer::new(self.symbols.finder());
        for f in &files {
            if let Some(m) = f.build_id.as_deref().and_then(symbols::Module::cached) {
                s.add_module(&f.path, m, f.bias);
            } else if let Some(bytes) = self.symbols.program_bytes(f) {
                let _ = s.add(&f.path, bytes, f.bias);
            } else if let Ok((_, bytes)) = self.read_tree_file(&f.path) {
                if f.is(&bytes) {
                    let _ = s.add(&f.path, &bytes, f.bias);
                }
            }
        }
        let s = Arc::new(s);
        cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(files, s.clone());
        Some(s)
    }

    /// When the host file of the program process `pid` runs (the run's, or
    /// the one its execve loaded) was modified: what a source without a
    /// checksum is judged by.
    pub fn program_mtime(&self, pid: Pid) -> Option<std::time::SystemTime> {
        let path = match self.procs.get(&pid)?.mm.elves.first() {
            Some(f) => f.path.as_str(),
            None => self.inputs.manifest.program.as_str(),
        };
        let host = self.inputs.image.host_path(path)?;
        std::fs::metadata(host).ok()?.modified().ok()
    }

    /// The program process `pid` runs (the run's, or the one its execve
    /// loaded): its path and bytes.
    pub fn program_of(&mut self, pid: Pid) -> Option<(String, Vec<u8>)> {
        let f = self.procs.get(&pid)?.mm.elves.first()?.clone();
        if let Some(b) = self.symbols.program_bytes(&f) {
            return Some((f.path, b.to_vec()));
        }
        let (_, b) = self.read_tree_file(&f.path).ok()?;
        f.is(&b).then(|| (f.path.clone(), b.to_vec()))
    }

    /// After a file mapping of `fd` at offset `off` over `[start, end)`
    /// that may run: if the file is an ELF file, the symbolizer knows it
    /// from now on (the libraries the dynamic loader maps).
    pub(super) fn note_mapped_elf(&mut self, fd: i32, off: u64, start: u64, end: u64) {
        let Ok((_, d)) = self.desc(fd as i64 as u64) else {
            return;
        };
        let super::fs::Target::Node(ino) = d.target else {
            return;
        };
        let Ok(bytes) = self.file_data(ino) else {
            return;
        };
        let Some(bias) = super::elf::bias_of_mapping(&bytes, off, start) else {
            return;
        };
        let file = MappedElf::new(&d.path, &bytes, bias, start);
        let pid = self.cur_pid();
        let mut live = self.mapped_elves(pid);
        live.retain(|e| e.at < start || e.at >= end);
        // Bounded by the mappings, so a restored address space stays sane.
        if live.len() < super::mm::MAX_MAP_COUNT
            && !live.iter().any(|e| e.path == file.path && e.bias == bias)
        {
            live.push(file);
        }
        self.cur_proc().mm.elves = live;
    }

    /// Thread `tid`'s stack, innermost first, with the frame in the user's
    /// own code chosen.
    pub fn backtrace(&mut self, tid: Tid) -> Option<symbols::Backtrace> {
        let t = self.threads.get(&tid)?;
        let pid = t.pid;
        let tp = match &t.ctx {
            Some(c) => c.fs_base,
            None => self.m.fs_base(),
        };
        let s = self.symbolizer_of(pid)?;
        let regs = self.unwind_regs(tid)?;
        let mut mem = |a: u64, b: &mut [u8]| self.peek_process(pid, a, b);
        let mut bt = s.unwind(regs, &mut mem);
        bt.thread_pointer = Some(tp);
        Some(bt)
    }

    /// The place of the frame of the program's own code thread `tid` is in,
    /// when that is a caller of the function it stopped in (the C library's,
    /// the Rust core's): `lib::Counter::incr (lib.rs:28)`.
    pub fn own_caller(&mut self, tid: Tid) -> Option<String> {
        let bt = self.backtrace(tid)?;
        let f = bt.frames.get(bt.chosen)?;
        (bt.chosen > 0 && f.own).then(|| f.place())
    }

    /// `0x411deb in __lll_lock_wait+0x2b, from philosopher (philosophers.c:31)`:
    /// where the thread is, and the frame of the user's own code it is in
    /// when that is another one.
    pub fn describe_thread(&mut self, tid: Tid, rip: u64) -> String {
        let Some(bt) = self.backtrace(tid) else {
            return format!("{rip:#x}");
        };
        let Some(first) = bt.frames.first() else {
            return format!("{rip:#x}");
        };
        let here = format!("{:#x} in {}", first.pc, first.place());
        if bt.chosen == 0 || !bt.frames[bt.chosen].own {
            return here;
        }
        format!("{here}, from {}", bt.frames[bt.chosen].place())
    }
}

/// The place a `where_threads_are` line names (its own-code frame when it
/// has one): `teller (bank.c:21)`.
pub fn place_in(line: &str) -> Option<&str> {
    let (_, at) = line.rsplit_once(", at 0x")?;
    Some(match at.split_once(", from ") {
        Some((_, own)) => own,
        None => at.split_once(" in ").map_or(at, |(_, place)| place),
    })
}
