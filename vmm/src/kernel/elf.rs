//! Loading a static executable (ET_EXEC or static-pie) as the first process.

use super::fs::FdTable;
use super::mm::{page_down, page_up, Mm, Prot};
use super::signal::{ProcessSignals, ThreadSignals};
use super::task::{Process, Thread, ThreadState};
use super::Kernel;
use crate::image::Image;
use crate::machine::layout::{PIE_BASE, STACK_MAX, STACK_TOP};
use crate::machine::regs::RFLAGS_DEFAULT;
use crate::record::EventKind;
use crate::EngineError;
use object::elf::{FileHeader64, ET_DYN, ET_EXEC, PF_R, PF_W, PF_X, PT_INTERP, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;
use std::path::PathBuf;

/// The program's bytes, checked to be a static x86-64 executable.
pub fn read_program(image: &Image, guest_path: &str) -> Result<Vec<u8>, EngineError> {
    let host = image.host_path(guest_path).ok_or_else(|| EngineError::Io {
        path: PathBuf::from(guest_path),
        source: std::io::Error::from(std::io::ErrorKind::NotFound),
    })?;
    let bytes = std::fs::read(&host).map_err(EngineError::io(&host))?;
    parse(&bytes).map_err(|e| match e {
        ElfProblem::NotElf => EngineError::NotElf(host.clone()),
        ElfProblem::WrongArch => EngineError::WrongArch(host.clone()),
        ElfProblem::Dynamic => EngineError::Dynamic(host.clone()),
        ElfProblem::Bad(m) => EngineError::BadElf(host.clone(), m),
    })?;
    Ok(bytes)
}

enum ElfProblem {
    NotElf,
    WrongArch,
    Dynamic,
    Bad(String),
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
    for ph in phdrs {
        match ph.p_type(e) {
            PT_INTERP => return Err(ElfProblem::Dynamic),
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
    })
}

/// Where the program was put, for the initial stack's auxv.
pub struct Loaded {
    pub entry: u64,
    pub phdr: u64,
    pub phnum: u64,
    pub bias: u64,
}

impl Kernel<'_> {
    /// Creates the first process and its thread, with the program loaded and the stack built.
    pub(super) fn spawn_init(&mut self, bytes: &[u8]) -> Result<(), EngineError> {
        let info = parse(bytes)
            .map_err(|_| EngineError::NotElf(self.inputs.manifest.program.clone().into()))?;
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
            },
        );
        self.threads.insert(
            pid,
            Thread {
                tid: pid,
                pid,
                ctx: None,
                state: ThreadState::Runnable,
                clear_child_tid: 0,
                robust_list: 0,
                signals: ThreadSignals::default(),
                pending_call: None,
                name: thread_name(&man.program),
            },
        );
        self.sched.current = pid;
        let loaded = self.load_segments(bytes, &info)?;
        self.symbols = super::symbols::SymbolTable::from_elf(&man.program, bytes, loaded.bias);
        let p = self.procs.get_mut(&pid).unwrap();
        p.mm.map_range(
            &mut self.m.ram,
            STACK_TOP - STACK_MAX,
            STACK_TOP,
            Prot::RW,
            "[stack]",
        );
        let sp = self
            .build_initial_stack(&loaded)
            .map_err(|_| EngineError::OutOfMemory)?;
        let pt = self.procs[&pid].mm.pt;
        self.m.set_address_space(pt);
        let regs = self.m.regs_mut();
        *regs = Default::default();
        regs.rip = loaded.entry;
        regs.rsp = sp;
        regs.rflags = RFLAGS_DEFAULT;
        self.m.set_segment_bases(0, 0);
        self.emit(EventKind::ThreadStart { parent: 0 });
        self.recorded.switches += 1;
        self.rec.switch(0, pid, pid);
        Ok(())
    }

    fn load_segments(&mut self, bytes: &[u8], info: &ElfInfo) -> Result<Loaded, EngineError> {
        let bias = if info.pie { PIE_BASE } else { 0 };
        let pid = self.cur_pid();
        let mut end = 0;
        let mut phdr = 0;
        for s in &info.segments {
            let start = page_down(s.vaddr + bias);
            let stop = page_up(s.vaddr + bias + s.memsz).ok_or(EngineError::OutOfMemory)?;
            let p = self.procs.get_mut(&pid).unwrap();
            p.mm.map_range(
                &mut self.m.ram,
                start,
                stop,
                s.prot,
                &self.inputs.manifest.program,
            );
            // Whole file pages, as mmap would map them: the first page starts
            // before the segment (p_offset and p_vaddr agree modulo the page).
            let lead = (s.vaddr + bias) - start;
            let from = s.offset.checked_sub(lead).ok_or_else(|| {
                EngineError::BadElf(
                    self.inputs.manifest.program.clone().into(),
                    "misaligned segment".into(),
                )
            })?;
            let content = &bytes[from as usize..(s.offset + s.filesz) as usize];
            self.fill_pages(start, content)
                .map_err(|_| EngineError::OutOfMemory)?;
            if info.phoff >= s.offset && info.phoff < s.offset + s.filesz {
                phdr = s.vaddr + bias + (info.phoff - s.offset);
            }
            end = end.max(stop);
        }
        let p = self.procs.get_mut(&pid).unwrap();
        // A random-looking but fixed gap would be ASLR; the heap starts right after.
        p.mm.brk_start = end;
        p.mm.brk = end;
        Ok(Loaded {
            entry: info.entry + bias,
            phdr,
            phnum: info.phnum,
            bias,
        })
    }
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
