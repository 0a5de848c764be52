//! Symbols and sources for Rewind's reports and debuggers.
//!
//! For every ELF file a run mapped: its symbols, line tables, inlined frames
//! and call-frame information; stack unwinding from a thread's registers and
//! memory (CFI from `.eh_frame` and `.debug_frame`, signal frames, frame
//! pointers as the fallback); the frame in the user's own code; line to
//! addresses; source files with where they came from. Separate debug info
//! comes from `/usr/lib/debug/.build-id/` or debuginfod.
//!
//! It knows nothing about KVM or the store: it takes bytes, registers and a
//! [`Memory`] to read the thread's stack through.
//!
//! ```no_run
//! # fn f(elf: &[u8], regs: symbols::Registers, mut mem: impl symbols::Memory) {
//! let mut s = symbols::Symbolizer::new(symbols::DebugFinder::default());
//! s.add("/bin/prog", elf, 0).unwrap();
//! let bt = s.unwind(regs, &mut mem);
//! println!("{}", bt.frames[bt.chosen].place()); // worker (pool.c:53)
//! # }
//! ```

pub mod debuginfo;
pub mod debuginfod;
pub mod lines;
pub mod module;
pub mod own;
pub mod source;
pub mod tls;
pub mod unwind;
pub mod values;

pub use debuginfo::DebugFinder;
pub use module::{DebugOrigin, Module};
pub use source::{Origin, Source, SourceError};
pub use unwind::{reg, Memory, Method, Registers};
pub use values::{FrameVariables, Place, Shown, Value, ValueError, Variable};

use std::borrow::Cow;
use std::sync::Arc;

/// Why a file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    #[error("not an ELF file: {0}")]
    Elf(String),
    #[error("bad DWARF: {0}")]
    Dwarf(String),
}

/// A place in a source file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    /// The full path the debug info names.
    pub file: String,
    pub line: u32,
    pub column: Option<u32>,
}

impl Location {
    /// `pool.c:53`: the file's last component and the line.
    pub fn short(&self) -> String {
        let name = self.file.rsplit('/').next().unwrap_or(&self.file);
        format!("{name}:{}", self.line)
    }
}

/// One frame of a stack, physical or inlined.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Frame {
    /// The instruction address: where the thread is (innermost), or the
    /// return address into this frame (callers).
    pub pc: u64,
    /// The function, demangled, from DWARF (or the symbol without it).
    pub function: Option<String>,
    /// The ELF symbol covering pc, `name+0xoff`.
    pub symbol: Option<String>,
    pub location: Option<Location>,
    /// This frame was inlined into the next one (the same physical frame).
    pub inlined: bool,
    /// The ELF file's path.
    pub module: Option<String>,
    /// Whether it is the user's own code (see [`own`]).
    pub own: bool,
    /// How this frame's registers were found.
    pub method: Method,
    /// The signal trampoline (`rt_sigreturn`) a handler returns to: the
    /// frame above it is the code the signal interrupted.
    pub signal_trampoline: bool,
    /// Its registers (callee-saved ones recovered; None where unknown).
    #[serde(skip)]
    pub regs: Registers,
    /// The canonical frame address (the caller's rsp before the call), when known.
    pub cfa: Option<u64>,
}

impl Frame {
    /// `worker (pool.c:53)`, else `symbol+0x2b`, else the address.
    pub fn place(&self) -> String {
        if self.signal_trampoline {
            return "<signal handler called>".to_string();
        }
        match (&self.function, &self.location, &self.symbol) {
            (Some(f), Some(l), _) => format!("{f} ({})", l.short()),
            (_, _, Some(s)) => s.clone(),
            (Some(f), None, None) => f.clone(),
            (None, _, None) => format!("{:#x}", self.pc),
        }
    }
}

/// A thread's stack, innermost first, with the frame chosen to show.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Backtrace {
    pub frames: Vec<Frame>,
    /// The innermost frame in the user's own code, else 0.
    pub chosen: usize,
    /// Why unwinding stopped before the outermost frame, if it did.
    pub stopped: Option<String>,
    /// The thread's pointer (`fs_base`), for thread-local variables and
    /// errno; the caller of [`Symbolizer::unwind`] sets it.
    #[serde(skip)]
    pub thread_pointer: Option<u64>,
}

/// One ELF file mapped into the guest.
#[derive(Debug, Clone)]
pub struct Mapped {
    pub path: String,
    /// What is added to the file's addresses where it is loaded.
    pub bias: u64,
    pub start: u64,
    pub end: u64,
    pub module: Arc<Module>,
}

/// Resolves addresses of a process's mapped ELF files.
#[derive(Debug, Clone)]
pub struct Symbolizer {
    finder: DebugFinder,
    mapped: Vec<Mapped>,
    /// The program file's modification time on the host, for judging
    /// source files whose debug info records no checksum.
    pub program_mtime: Option<std::time::SystemTime>,
}

/// Frames deeper than this are not unwound (a loop in a corrupt stack).
const MAX_FRAMES: usize = 256;

impl Symbolizer {
    pub fn new(finder: DebugFinder) -> Symbolizer {
        Symbolizer {
            finder,
            mapped: Vec::new(),
            program_mtime: None,
        }
    }

    /// Adds an ELF file loaded at `bias` (0 for ET_EXEC), parsed or taken
    /// from the cache by build id.
    pub fn add(&mut self, path: &str, bytes: &[u8], bias: u64) -> Result<&Mapped, SymbolError> {
        let module = Module::load(bytes, &self.finder)?;
        Ok(self.add_module(path, module, bias))
    }

    /// Adds a module already parsed (see [`Module::cached`]), loaded at `bias`.
    pub fn add_module(&mut self, path: &str, module: Arc<Module>, bias: u64) -> &Mapped {
        let (lo, hi) = module.span();
        self.mapped.push(Mapped {
            path: path.to_string(),
            bias,
            start: lo.wrapping_add(bias),
            end: hi.wrapping_add(bias),
            module,
        });
        self.mapped.last().expect("just pushed")
    }

    pub fn modules(&self) -> &[Mapped] {
        &self.mapped
    }

    pub fn finder(&self) -> &DebugFinder {
        &self.finder
    }

    /// What went wrong finding debug info (a server down), each once.
    pub fn notes(&self) -> Vec<String> {
        self.finder.notes()
    }

    /// The file mapped at `pc`.
    pub fn module_at(&self, pc: u64) -> Option<&Mapped> {
        self.mapped.iter().find(|m| m.start <= pc && pc < m.end)
    }

    /// The logical frames at an exact instruction address, innermost
    /// (inlined) first.
    pub fn frames_at(&self, pc: u64) -> Vec<Frame> {
        self.frames_for(pc, pc, Method::Context, Registers::default())
    }

    /// `worker (pool.c:53)` for the innermost frame at `pc`, else
    /// `symbol+0x2b`, else the address.
    pub fn place(&self, pc: u64) -> String {
        self.frames_at(pc)
            .first()
            .map_or_else(|| format!("{pc:#x}"), Frame::place)
    }

    fn frames_for(&self, pc: u64, probe: u64, method: Method, regs: Registers) -> Vec<Frame> {
        let Some(m) = self.module_at(probe) else {
            return vec![Frame {
                pc,
                function: None,
                symbol: None,
                location: None,
                inlined: false,
                module: None,
                own: false,
                method,
                signal_trampoline: false,
                regs,
                cfa: None,
            }];
        };
        let addr = probe.wrapping_sub(m.bias);
        let symbol = m.module.symbol(addr);
        // The offset of the real pc, not of the probe.
        let sym_text = symbol
            .as_ref()
            .map(|(name, off)| format!("{name}+{:#x}", off + (pc - probe)));
        let raw = m.module.frames(addr);
        let base = Frame {
            pc,
            function: symbol.as_ref().map(|s| s.0.clone()),
            symbol: sym_text,
            location: None,
            inlined: false,
            module: Some(m.path.clone()),
            own: false,
            method,
            signal_trampoline: false,
            regs,
            cfa: None,
        };
        let system = own::is_system_library(&m.path);
        if raw.is_empty() {
            let mut f = base;
            f.own = !system && own::is_own(f.function.as_deref(), None);
            return vec![f];
        }
        let n = raw.len();
        raw.into_iter()
            .enumerate()
            .map(|(i, r)| {
                let mut f = base.clone();
                if r.function.is_some() {
                    f.function = r.function;
                }
                f.location = r.location;
                f.inlined = i + 1 < n;
                f.own = !system
                    && own::is_own(
                        f.function.as_deref(),
                        f.location.as_ref().map(|l| l.file.as_str()),
                    );
                f
            })
            .collect()
    }

    /// Unwinds a thread's stack from its registers, reading memory through
    /// `mem`; chooses the innermost frame in the user's own code.
    pub fn unwind(&self, regs: Registers, mem: &mut dyn Memory) -> Backtrace {
        let mut frames: Vec<Frame> = Vec::new();
        let mut regs = regs;
        let mut method = Method::Context;
        let mut stopped = None;
        // The innermost frame and a frame interrupted by a signal are at
        // their pc; a caller is at the instruction before its return address.
        let mut exact = true;
        loop {
            let Some(pc) = regs.pc() else {
                stopped = Some("the return address is not known".to_string());
                break;
            };
            if pc == 0 {
                break;
            }
            if frames.len() >= MAX_FRAMES {
                stopped = Some(format!("more than {MAX_FRAMES} frames"));
                break;
            }
            let probe = if exact { pc } else { pc - 1 };
            let first = frames.len();
            frames.extend(self.frames_for(pc, probe, method, regs));
            let next = if unwind::is_sigreturn(pc, mem) {
                for f in &mut frames[first..] {
                    f.signal_trampoline = true;
                }
                exact = true;
                method = Method::SignalFrame;
                regs.sp().and_then(|sp| unwind::from_signal_frame(sp, mem))
            } else {
                let module = self.module_at(probe);
                let cfi = module
                    .as_ref()
                    .and_then(|m| unwind::by_cfi(&m.module, probe, m.bias, &regs, mem));
                // A thread stopped in a PLT stub (at a memory point, say):
                // static binaries' stubs have no CFI.
                let in_plt = |m: &&Mapped| m.module.in_plt(probe.wrapping_sub(m.bias));
                let innermost = std::mem::replace(&mut exact, false);
                match cfi {
                    Some(r) => {
                        method = Method::Cfi;
                        Some(r)
                    }
                    None if innermost && module.as_ref().is_some_and(in_plt) => {
                        method = Method::Cfi;
                        unwind::from_plt_stub(&regs, mem)
                    }
                    None => {
                        method = Method::FramePointer;
                        unwind::by_frame_pointer(&regs, mem)
                    }
                }
            };
            let Some(next) = next else {
                if !frames.last().is_some_and(is_outermost) {
                    stopped = Some(format!("no way to unwind from {pc:#x}"));
                }
                break;
            };
            for f in &mut frames[first..] {
                f.cfa = next.sp();
            }
            // A stack grows down: a caller's frame is above its callee's,
            // except across a signal (the handler may run on another stack).
            if method != Method::SignalFrame && next.sp() <= regs.sp() {
                stopped = Some(format!("the stack does not grow at {pc:#x}"));
                break;
            }
            regs = next;
        }
        let chosen = frames.iter().position(|f| f.own).unwrap_or(0);
        Backtrace {
            frames,
            chosen,
            stopped,
            thread_pointer: None,
        }
    }

    /// Every address where `line` of `file` (a full path, or its last
    /// components) begins a statement, in every mapped file: where a
    /// breakpoint on that line goes.
    pub fn line_addresses(&self, file: &str, line: u32) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .mapped
            .iter()
            .flat_map(|m| {
                m.module
                    .line_addresses(file, line)
                    .into_iter()
                    .map(|a| a.wrapping_add(m.bias))
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The function symbol covering `pc`: (start, end), load addresses.
    pub fn function_range(&self, pc: u64) -> Option<(u64, u64)> {
        let m = self.module_at(pc)?;
        let (a, b) = m.module.symbol_range(pc.wrapping_sub(m.bias))?;
        Some((a.wrapping_add(m.bias), b.wrapping_add(m.bias)))
    }

    /// A function's address by name, in any mapped file.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.mapped.iter().find_map(|m| {
            m.module
                .symbol_address(name)
                .map(|a| a.wrapping_add(m.bias))
        })
    }
}

/// The outermost frames of a thread: nothing calls them.
fn is_outermost(f: &Frame) -> bool {
    matches!(
        f.function.as_deref(),
        Some(
            "_start"
                | "clone"
                | "clone3"
                | "__clone"
                | "__clone3"
                | "start_thread"
                | "__libc_start_main"
                | "__libc_start_call_main"
        )
    )
}

/// A symbol demangled when it is Rust or C++, as it is otherwise.
pub fn demangle(name: &str) -> Cow<'_, str> {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return Cow::Owned(format!("{d:#}"));
    }
    if name.starts_with("_Z") {
        if let Ok(s) = cpp_demangle::Symbol::new(name) {
            if let Ok(d) = s.demangle(&Default::default()) {
                return Cow::Owned(d);
            }
        }
    }
    Cow::Borrowed(name)
}
