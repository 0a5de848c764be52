//! Loading an executable (ET_EXEC, static-pie, or a dynamically linked one
//! with its PT_INTERP interpreter) into an address space, as Linux's ELF
//! loader does: the program at its addresses (a PIE at `PIE_BASE`), the
//! interpreter at the top of the mmap area (the first place `mmap` would
//! give, so the same every run), and what the initial stack's auxv says.
//!
//! [`Kernel::load_executable`] is the one entry point: the first process
//! and `execve` both use it.

use super::fs::vfs::FileBytes;
use super::fs::FdTable;
use super::mm::{page_down, page_up, Mm, Prot};
use super::signal::ProcessSignals;
use super::symbols::MappedElf;
use super::task::{Process, Thread};
use super::Kernel;
use crate::image::Image;
use crate::machine::layout::{PIE_BASE, STACK_MAX, STACK_TOP};
use crate::machine::regs::RFLAGS_DEFAULT;
use crate::run::EventKind;
use crate::run::Manifest;
use crate::EngineError;
use object::elf::{FileHeader64, ET_DYN, ET_EXEC, PF_R, PF_W, PF_X, PT_INTERP, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;
use std::path::PathBuf;
use std::sync::Arc;

/// The program's bytes, checked to be an x86-64 executable.
pub fn read_program(image: &Image, guest_path: &str) -> Result<FileBytes, EngineError> {
    let host = image.host_path(guest_path).ok_or_else(|| EngineError::Io {
        path: PathBuf::from(guest_path),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })?;
    let bytes = image.read_file(&host).map_err(EngineError::io(&host))?;
    parse(&bytes).map_err(|e| e.engine(&host))?;
    Ok(bytes)
}

/// The first program as execve starts it: a `#!` script (and a script its
/// line names, to Linux's depth) gives way to its interpreter, found from
/// the run's working directory when relative, with the argv Linux gives it.
pub struct FirstProgram {
    /// The ELF file's absolute guest path (links not resolved).
    pub path: String,
    /// Shared with the symbol table (a big program is mapped, not copied).
    pub bytes: Arc<FileBytes>,
    pub argv: Vec<String>,
}

/// The run's first program (see [`FirstProgram`]), its ELF checked.
pub fn first_program(image: &Image, man: &Manifest) -> Result<FirstProgram, EngineError> {
    let mut path = man.program.clone();
    let mut argv = man.argv.clone();
    // As execve's: the path as given, which a script's interpreter is told.
    let mut given = match man.argv.first() {
        Some(a) if a.contains('/') => a.clone(),
        _ => man.program.clone(),
    };
    for _ in 0..=super::process::MAX_INTERP_DEPTH {
        let guest = super::fs::vfs::resolve::normalize(&man.cwd, &path);
        let host = image.host_path(&guest).ok_or_else(|| EngineError::Io {
            path: PathBuf::from(&guest),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
        let bytes = image.read_file(&host).map_err(EngineError::io(&host))?;
        let script = super::process::interpreter(&bytes)
            .map_err(|_| EngineError::BadElf(host.clone(), "a bad `#!` line".into()))?;
        let Some((interp, arg)) = script else {
            parse(&bytes).map_err(|e| e.engine(&host))?;
            return Ok(FirstProgram {
                path: guest,
                bytes: Arc::new(bytes),
                argv,
            });
        };
        let mut new = vec![interp.clone()];
        new.extend(arg);
        new.push(given);
        new.extend(argv.into_iter().skip(1));
        argv = new;
        given = interp.clone();
        path = interp;
    }
    Err(EngineError::BadElf(
        PathBuf::from(&man.program),
        "too many `#!` interpreters in a row".into(),
    ))
}

/// Why an executable (or its interpreter) cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElfProblem {
    #[error("not an ELF executable")]
    NotElf,
    #[error("not an x86-64 ELF executable")]
    WrongArch,
    #[error("{0}")]
    Bad(String),
    /// The interpreter named by PT_INTERP: missing, or not loadable.
    #[error("its interpreter {0}: {1}")]
    Interp(String, String),
    #[error("guest memory exhausted while loading it")]
    NoMemory,
}

impl ElfProblem {
    /// The engine's error for the file at `path`.
    pub fn engine(self, path: &std::path::Path) -> EngineError {
        let path = path.to_path_buf();
        match self {
            ElfProblem::NotElf => EngineError::NotElf(path),
            ElfProblem::WrongArch => EngineError::WrongArch(path),
            ElfProblem::NoMemory => EngineError::OutOfMemory,
            other => EngineError::BadElf(path, other.to_string()),
        }
    }

    /// What `execve` returns for it.
    pub fn errno(&self) -> super::errno::Errno {
        use super::errno::*;
        /// Linux's ELIBBAD: "accessing a corrupted shared library".
        const ELIBBAD_: Errno = Errno(80);
        match self {
            ElfProblem::NotElf | ElfProblem::WrongArch => ENOEXEC,
            ElfProblem::Bad(_) => ENOEXEC,
            ElfProblem::Interp(..) => ELIBBAD_,
            ElfProblem::NoMemory => ENOMEM,
        }
    }
}

/// One PT_LOAD segment.
struct Segment {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
    prot: Prot,
}

struct ElfInfo {
    pie: bool,
    entry: u64,
    phoff: u64,
    phnum: u64,
    segments: Vec<Segment>,
    /// PT_INTERP's path.
    interp: Option<String>,
}

fn parse(bytes: &[u8]) -> Result<ElfInfo, ElfProblem> {
    if bytes.len() < 4 || &bytes[..4] != b"\x7fELF" {
        return Err(ElfProblem::NotElf);
    }
    let hdr = FileHeader64::<Endianness>::parse(bytes).map_err(|_| ElfProblem::WrongArch)?;
    let e = hdr.endian().map_err(|_| ElfProblem::WrongArch)?;
    if hdr.e_machine(e) != object::elf::EM_X86_64 {
        return Err(ElfProblem::WrongArch);
    }
    let pie = match hdr.e_type(e) {
        ET_EXEC => false,
        ET_DYN => true,
        _ => return Err(ElfProblem::Bad("not an executable".into())),
    };
    let phdrs = hdr
        .program_headers(e, bytes)
        .map_err(|err| ElfProblem::Bad(err.to_string()))?;
    let mut segments = Vec::new();
    let mut interp = None;
    for ph in phdrs {
        match ph.p_type(e) {
            PT_INTERP => {
                let raw = ph
                    .data(e, bytes)
                    .map_err(|_| ElfProblem::Bad("PT_INTERP lies outside the file".into()))?;
                let path = raw.split(|b| *b == 0).next().unwrap_or(&[]);
                match std::str::from_utf8(path) {
                    Ok(p) if p.starts_with('/') && p.len() < 4096 => interp = Some(p.to_string()),
                    _ => return Err(ElfProblem::Bad("PT_INTERP is not an absolute path".into())),
                }
            }
            PT_LOAD => {
                let flags = ph.p_flags(e);
                let s = Segment {
                    vaddr: ph.p_vaddr(e),
                    memsz: ph.p_memsz(e),
                    offset: ph.p_offset(e),
                    filesz: ph.p_filesz(e),
                    prot: Prot {
                        read: flags & PF_R != 0,
                        write: flags & PF_W != 0,
                        exec: flags & PF_X != 0,
                    },
                };
                if s.filesz > s.memsz
                    || s.offset
                        .checked_add(s.filesz)
                        .is_none_or(|end| end > bytes.len() as u64)
                    || s.vaddr
                        .checked_add(s.memsz)
                        .is_none_or(|end| end > crate::machine::layout::USER_END / 2)
                {
                    return Err(ElfProblem::Bad(
                        "a segment lies outside the file or memory".into(),
                    ));
                }
                segments.push(s);
            }
            _ => {}
        }
    }
    if segments.is_empty() {
        return Err(ElfProblem::Bad("no loadable segment".into()));
    }
    Ok(ElfInfo {
        pie,
        entry: hdr.e_entry(e),
        phoff: hdr.e_phoff(e),
        phnum: hdr.e_phnum(e) as u64,
        segments,
        interp,
    })
}

/// Where the program was put, for the initial stack's auxv.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// The program's entry point (AT_ENTRY).
    pub entry: u64,
    /// Its program headers in memory (AT_PHDR) and their number (AT_PHNUM).
    pub phdr: u64,
    pub phnum: u64,
    /// What its addresses were moved by.
    pub bias: u64,
    /// Where the interpreter was loaded (AT_BASE; 0 without one).
    pub interp_base: u64,
    /// Where the thread starts: the interpreter's entry, else the program's.
    pub start: u64,
}

impl Kernel<'_> {
    /// Creates the first process and its thread, with the program loaded and the stack built.
    pub(super) fn spawn_init(&mut self, first: &FirstProgram) -> Result<(), EngineError> {
        let pid = self.alloc_id();
        let mm = Mm::new(&mut self.m.ram).ok_or(EngineError::OutOfMemory)?;
        let man = self.inputs.manifest.clone();
        self.procs.insert(
            pid,
            Process {
                pid,
                ppid: pid - 1,
                mm,
                files: FdTable::with_console(),
                signals: ProcessSignals::default(),
                threads: vec![pid],
                exe: man.program.clone(),
                cwd: man.cwd.clone(),
                umask: 0o022,
                pgid: pid,
                sid: pid,
                exit_signal: super::signal::SIGCHLD,
                pdeathsig: 0,
                execed: false,
                vfork_parent: None,
                rlimits: super::identity::default_rlimits(),
                stopped: None,
                report: None,
                argv: first.argv.clone(),
                env: man.env.clone(),
                nice: 0,
                strings: Default::default(),
                adopted: false,
            },
        );
        self.threads
            .insert(pid, Thread::first_of(pid, &man.program));
        self.sched.current = pid;
        // As Linux: /proc/self/exe is the file, links resolved (the loader
        // finds `$ORIGIN` from it), and AT_EXECFN the path as the shell
        // gave it to execve (PROG when it has a slash, else where PATH found it).
        let exe = self.exe_path(&first.path);
        self.cur_proc().exe.clone_from(&exe);
        let execfn = match man.argv.first() {
            Some(a) if a.contains('/') => a.clone(),
            _ => man.program.clone(),
        };
        let loaded = self
            .load_executable(&exe, &first.bytes)
            .map_err(|e| e.engine(std::path::Path::new(&first.path)))?;
        self.symbols =
            super::symbols::SymbolTable::from_elf(&first.path, first.bytes.clone(), loaded.bias);
        self.start_program(&loaded, &first.argv, &man.env, &execfn)
            .map_err(|_| EngineError::OutOfMemory)?;
        self.emit(EventKind::ThreadStart { parent: 0 });
        self.recorded.switches += 1;
        self.rec.switch(0, pid, pid);
        Ok(())
    }

    /// After `load_executable`: the stack mapping, the initial stack with
    /// `argv`, `env` and `execfn`, and the registers at the start (the
    /// first process, and execve).
    pub(super) fn start_program(
        &mut self,
        loaded: &Loaded,
        argv: &[String],
        env: &[String],
        execfn: &str,
    ) -> super::errno::SysResult<()> {
        let pid = self.cur_pid();
        let p = self.procs.get_mut(&pid).unwrap();
        p.mm.map_range(
            &mut self.m.ram,
            STACK_TOP - STACK_MAX,
            STACK_TOP,
            Prot::RW,
            "[stack]",
        );
        let sp = self.build_initial_stack(loaded, argv, env, execfn)?;
        let pt = self.procs[&pid].mm.pt;
        self.m.set_address_space(pt);
        let regs = self.m.regs_mut();
        *regs = Default::default();
        regs.rip = loaded.start;
        regs.rsp = sp;
        regs.rflags = RFLAGS_DEFAULT;
        self.m.set_segment_bases(0, 0);
        Ok(())
    }

    /// Loads the executable `bytes`, read from guest path `path`, into the
    /// current process's address space (which holds nothing of another
    /// program), and its interpreter, read from the file tree, if it has
    /// one; sets the heap's start. The initial stack is the caller's
    /// (`build_initial_stack` with what this returns).
    pub fn load_executable(&mut self, path: &str, bytes: &[u8]) -> Result<Loaded, ElfProblem> {
        let info = parse(bytes)?;
        let bias = if info.pie { PIE_BASE } else { 0 };
        let (phdr, end) = self.load_segments(path, bytes, &info, bias)?;
        let p = self.cur_proc();
        p.mm.elves = vec![MappedElf::new(path, bytes, bias, first_page(&info, bias))];
        // A random-looking but fixed gap would be ASLR; the heap starts right after.
        p.mm.brk_start = end;
        p.mm.brk = end;
        let mut loaded = Loaded {
            entry: info.entry + bias,
            phdr,
            phnum: info.phnum,
            bias,
            interp_base: 0,
            start: info.entry + bias,
        };
        if let Some(interp) = &info.interp {
            let problem = |m: String| ElfProblem::Interp(interp.clone(), m);
            let (real, ibytes) = self
                .read_tree_file(interp)
                .map_err(|e| problem(format!("cannot read it ({})", e.name())))?;
            let ii = parse(&ibytes).map_err(|e| problem(e.to_string()))?;
            if !ii.pie || ii.interp.is_some() {
                return Err(problem("not a shared object without an interpreter".into()));
            }
            let lo = ii
                .segments
                .iter()
                .map(|s| page_down(s.vaddr))
                .min()
                .unwrap_or(0);
            let hi = ii
                .segments
                .iter()
                .filter_map(|s| page_up(s.vaddr + s.memsz))
                .max()
                .unwrap_or(0);
            let base = self
                .cur_proc()
                .mm
                .find_free(hi - lo)
                .ok_or(ElfProblem::NoMemory)?;
            let ibias = base - lo;
            self.load_segments(&real, &ibytes, &ii, ibias)
                .map_err(|e| problem(e.to_string()))?;
            let at = first_page(&ii, ibias);
            let file = MappedElf::new(&real, &ibytes, ibias, at);
            self.cur_proc().mm.elves.push(file);
            loaded.interp_base = ibias;
            loaded.start = ii.entry + ibias;
        }
        Ok(loaded)
    }

    /// A regular file of the tree by absolute path, links followed: its
    /// resolved path and bytes.
    pub(super) fn read_tree_file(
        &mut self,
        path: &str,
    ) -> super::errno::SysResult<(String, std::sync::Arc<super::fs::vfs::FileBytes>)> {
        use super::fs::vfs::{Kind, S_IFREG};
        let r = self.resolve_from(super::fs::vfs::ROOT_INO, path, true)?;
        let ino = r.ino.ok_or(super::errno::ENOENT)?;
        if self.vfs.tree.node(ino)?.file_type() != S_IFREG {
            return Err(super::errno::EACCES);
        }
        let bytes = self.file_data(ino)?;
        // Loaded whole; the tree keeps no copy of an image file nothing has open.
        let n = self.vfs.tree.node_mut(ino)?;
        if let (0, Kind::File(f)) = (n.opens, &mut n.kind) {
            if !f.dirty && f.host.is_some() {
                f.bytes = None;
            }
        }
        Ok((self.path_of(r.parent, &r.name), bytes))
    }

    /// Maps and fills the segments at `bias`: where the program headers
    /// are in memory, and the end of the highest segment.
    fn load_segments(
        &mut self,
        path: &str,
        bytes: &[u8],
        info: &ElfInfo,
        bias: u64,
    ) -> Result<(u64, u64), ElfProblem> {
        let mut end = 0;
        for s in &info.segments {
            let start = page_down(s.vaddr + bias);
            let stop = page_up(s.vaddr + bias + s.memsz)
                .filter(|e| *e <= crate::machine::layout::USER_END)
                .ok_or_else(|| ElfProblem::Bad("a segment lies outside memory".into()))?;
            let pid = self.cur_pid();
            let p = self.procs.get_mut(&pid).expect("current process");
            p.mm.map_range(&mut self.m.ram, start, stop, s.prot, path);
            // Whole file pages, as mmap would map them: the first page starts
            // before the segment (p_offset and p_vaddr agree modulo the page).
            let lead = (s.vaddr + bias) - start;
            let from = s
                .offset
                .checked_sub(lead)
                .ok_or_else(|| ElfProblem::Bad("misaligned segment".into()))?;
            let content = &bytes[from as usize..(s.offset + s.filesz) as usize];
            self.fill_pages(start, content)
                .map_err(|_| ElfProblem::NoMemory)?;
            end = end.max(stop);
        }
        Ok((phdrs_at(info, bias), end))
    }
}

/// Where the program headers of a file loaded at `bias` are in memory (0
/// when no segment holds them).
fn phdrs_at(info: &ElfInfo, bias: u64) -> u64 {
    info.segments
        .iter()
        .find(|s| info.phoff >= s.offset && info.phoff < s.offset + s.filesz)
        .map_or(0, |s| s.vaddr + bias + (info.phoff - s.offset))
}

impl Kernel<'_> {
    /// What a debugger needs of process `pid`'s auxiliary vector to find
    /// its program and interpreter where they are loaded (AT_PHDR,
    /// AT_PHENT, AT_PHNUM, AT_BASE, AT_ENTRY, AT_NULL), as the bytes
    /// `/proc/PID/auxv` would hold: gdb relocates a PIE and finds the
    /// dynamic loader's list of libraries by them.
    pub fn debugger_auxv(&mut self, pid: super::task::Pid) -> Option<Vec<u8>> {
        use super::stack::*;
        let (_, bytes) = self.program_of(pid)?;
        let info = parse(&bytes).ok()?;
        let elves = &self.procs.get(&pid)?.mm.elves;
        let bias = elves.first()?.bias;
        // load_executable records the interpreter right after the program.
        let base = match info.interp {
            Some(_) => elves.get(1)?.bias,
            None => 0,
        };
        let words = [
            (AT_PHDR, phdrs_at(&info, bias)),
            (AT_PHENT, ELF64_PHDR_SIZE),
            (AT_PHNUM, info.phnum),
            (AT_BASE, base),
            (AT_ENTRY, info.entry.wrapping_add(bias)),
            (AT_NULL, 0),
        ];
        Some(
            words
                .iter()
                .flat_map(|(k, v)| [k.to_le_bytes(), v.to_le_bytes()])
                .flatten()
                .collect(),
        )
    }
}

/// Where the lowest segment of a file loaded at `bias` starts.
fn first_page(info: &ElfInfo, bias: u64) -> u64 {
    let lo = info.segments.iter().map(|s| s.vaddr).min().unwrap_or(0);
    page_down(lo.wrapping_add(bias))
}

/// What an ELF file's addresses are moved by when its pages from offset
/// `off` are mapped at `start` (the loader's mmap of a segment): None when
/// it is not an ELF file or no segment starts in that page.
pub fn bias_of_mapping(bytes: &[u8], off: u64, start: u64) -> Option<u64> {
    let info = parse(bytes).ok()?;
    let s = info.segments.iter().find(|s| page_down(s.offset) == off)?;
    Some(start.wrapping_sub(page_down(s.vaddr)))
}

/// Whether `bytes` are an executable this loader takes (execve checks
/// before its point of no return).
pub fn check(bytes: &[u8]) -> Result<(), ElfProblem> {
    parse(bytes).map(|_| ())
}

/// The interpreter (PT_INTERP) an executable this loader takes asks for.
pub fn interpreter(bytes: &[u8]) -> Result<Option<String>, ElfProblem> {
    parse(bytes).map(|i| i.interp)
}

/// A thread's name as Linux keeps it: at most 15 bytes.
pub fn thread_name(s: &str) -> String {
    let base = s.rsplit('/').next().unwrap_or(s);
    let mut end = base.len().min(TASK_COMM_LEN - 1);
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    base[..end].to_string()
}

/// Bytes of a thread name, NUL included.
pub const TASK_COMM_LEN: usize = 16;

/// Where the program's addresses are moved to: PIE_BASE for a static-pie, else 0.
pub fn load_bias(bytes: &[u8]) -> u64 {
    match parse(bytes) {
        Ok(info) if info.pie => PIE_BASE,
        _ => 0,
    }
}
