//! Names for the places threads are at, for reports (deadlocks, timeouts,
//! `ps`, `check --where`): the `symbols` crate resolves them from the
//! program's ELF file and its DWARF, parsed the first time a report needs it.

use super::task::Tid;
use super::Kernel;
use crate::machine::layout::PAGE_SIZE;
use std::sync::{Arc, OnceLock};

/// The program's file, parsed into a `symbols::Symbolizer` on first use.
#[derive(Debug, Default, Clone)]
pub struct SymbolTable {
    elf: Option<Arc<(String, Vec<u8>, u64)>>,
    parsed: OnceLock<Option<Arc<symbols::Symbolizer>>>,
    /// The ELF symbol table alone, for text that is recorded.
    names: OnceLock<Option<Arc<symbols::Module>>>,
}

impl SymbolTable {
    /// The program at guest path `path`, loaded at `load_bias`.
    pub fn from_elf(path: &str, bytes: &[u8], load_bias: u64) -> SymbolTable {
        SymbolTable {
            elf: Some(Arc::new((path.to_string(), bytes.to_vec(), load_bias))),
            parsed: OnceLock::new(),
            names: OnceLock::new(),
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
        match names.as_ref().and_then(|m| m.symbol(ip.wrapping_sub(bias))) {
            Some((name, off)) => format!("{ip:#x} in {name}+{off:#x}"),
            None => format!("{ip:#x}"),
        }
    }

    /// The symbolizer over the program (debug info from the file itself,
    /// `/usr/lib/debug`, or debuginfod when `$DEBUGINFOD_URLS` is set).
    pub fn symbolizer(&self) -> Option<Arc<symbols::Symbolizer>> {
        self.parsed
            .get_or_init(|| {
                let (path, bytes, bias) = &**self.elf.as_ref()?;
                let finder = symbols::DebugFinder::from_env(DEBUGINFOD_TIMEOUT);
                let mut s = symbols::Symbolizer::new(finder);
                s.add(path, bytes, *bias).ok()?;
                Some(Arc::new(s))
            })
            .clone()
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

    /// Thread `tid`'s stack, innermost first, with the frame in the user's
    /// own code chosen.
    pub fn backtrace(&mut self, tid: Tid) -> Option<symbols::Backtrace> {
        let s = self.symbols.symbolizer()?;
        let regs = self.unwind_regs(tid)?;
        let tp = match &self.threads.get(&tid)?.ctx {
            Some(c) => c.fs_base,
            None => self.m.fs_base(),
        };
        let mut mem = |a: u64, b: &mut [u8]| self.peek_user(a, b);
        let mut bt = s.unwind(regs, &mut mem);
        bt.thread_pointer = Some(tp);
        Some(bt)
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
