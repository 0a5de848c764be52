//! The session's machine: `vmm::debug`'s core (the one `rewind gdb` serves)
//! opened on the run, with the program's symbols and line table. Every move
//! that goes inside a step (line and instruction steps, source and data
//! breakpoints, gotoTargets) runs it with `int3`s at chosen addresses and
//! decides at each stop: `scan`.

use anyhow::{anyhow, Result};
use std::collections::BTreeSet;
use std::sync::Arc;
use symbols::lines::LineTable;
use symbols::values::FrameVariables;
use symbols::Symbolizer;
use vmm::debug::{DebugCore, DebugError, Origin, Position, Stop as CoreStop, Watch};
use vmm::store::{Run, Store};

/// The core opened on a run, with what resolves its addresses.
pub struct Live {
    pub core: DebugCore,
    /// The symbols and line table of the current thread's process
    /// (`follow`): a process that execed another program has its own.
    pub sym: Option<Arc<Symbolizer>>,
    pub lines: Arc<LineTable>,
    /// The line tables made so far, by symbolizer.
    tables: Vec<(Arc<Symbolizer>, Arc<LineTable>)>,
    /// The machine stands at the session's position.
    pub synced: bool,
}

/// Where a scan stopped.
#[derive(Debug, Clone, Copy)]
pub enum Hit {
    /// Before the instruction at one of the scan's addresses; `pos` when its
    /// hit was counted from its span's start.
    Bp {
        pos: Option<Position>,
        tid: u32,
        pc: u64,
    },
    /// Just after an instruction that touched a data breakpoint's bytes.
    Watch { tid: u32, watch: Watch },
    /// Before a fault that becomes this signal.
    Signal { signo: i32 },
    /// At the start of the span a scan was bounded by.
    Span,
    /// The process ended.
    End,
}

/// How to reach a stop of a scan again: from the start of span `step`,
/// `k` stops of `cont` with the same addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    pub step: u64,
    pub k: u32,
}

/// What the scan's caller wants next.
pub enum Flow {
    Go,
    Stop,
    /// Go on, with `int3`s at these addresses too.
    Track(Vec<u64>),
}

impl Live {
    /// The core on `run` right after `step` (the step before when the run
    /// ended at `step`).
    /// `budget`: the bytes its snapshots in memory may hold.
    pub fn open(run: &Run, store: &Store, step: u64, budget: u64) -> Result<Live> {
        let origin = Origin::of_run(run, store)?;
        let mut core = match DebugCore::open(origin, step, None) {
            Ok(c) => c,
            Err(DebugError::Ended(_)) if step > 0 => {
                DebugCore::open(Origin::of_run(run, store)?, step - 1, None)?
            }
            Err(e) => return Err(e.into()),
        };
        core.set_snapshot_budget(budget);
        let mut live = Live {
            core,
            sym: None,
            lines: Arc::new(LineTable::default()),
            tables: Vec::new(),
            synced: false,
        };
        live.follow();
        Ok(live)
    }

    /// Makes `sym` and `lines` those of the current thread's process.
    pub fn follow(&mut self) {
        let k = self.core.kernel();
        let pid = k.cur_pid();
        let Some(s) = k.symbolizer_of(pid) else {
            return;
        };
        if self.sym.as_ref().is_some_and(|have| Arc::ptr_eq(have, &s)) {
            return;
        }
        let lines = match self.tables.iter().find(|(t, _)| Arc::ptr_eq(t, &s)) {
            Some((_, l)) => l.clone(),
            None => {
                let l = Arc::new(LineTable::of(&s));
                self.tables.push((s.clone(), l.clone()));
                l
            }
        };
        self.sym = Some(s);
        self.lines = lines;
    }

    /// The symbols of thread `tid`'s process.
    pub fn sym_of(&mut self, tid: u32) -> Option<Arc<Symbolizer>> {
        let k = self.core.kernel();
        let pid = k.threads.get(&tid)?.pid;
        k.symbolizer_of(pid)
    }

    pub fn tid(&self) -> u32 {
        self.core.current_thread()
    }

    /// Thread `tid`'s registers now.
    pub fn regs(&self, tid: u32) -> Option<kvm_bindings::kvm_regs> {
        self.core.registers(tid).ok().map(|r| r.regs)
    }

    /// The canonical frame address of thread `tid`'s innermost physical
    /// frame (the caller's rsp before the call): frames compare by it.
    pub fn cfa(&mut self, tid: u32) -> Option<u64> {
        let bt = self.core.kernel().backtrace(tid)?;
        bt.frames.first()?.cfa
    }

    /// `(file id, line)` of the code at `pc`.
    pub fn line_at(&self, pc: u64) -> Option<(u32, u32)> {
        self.lines.at(pc).map(|r| (r.file, r.line))
    }

    /// The function covering `pc`.
    pub fn function(&self, pc: u64) -> Option<(u64, u64)> {
        self.sym.as_ref()?.function_range(pc)
    }

    /// The statement starts of the function covering `pc`.
    pub fn function_stmts(&self, pc: u64) -> Vec<u64> {
        match self.function(pc) {
            Some((a, b)) => self.lines.stmts_in(a, b),
            None => Vec::new(),
        }
    }

    /// Runs the machine with `int3`s at `addrs` (and the data breakpoints
    /// set), from the start of span `from` or, without it, from where it
    /// stands, until `f` says stop, the start of span `until`, or the end.
    /// The `Reach` of each stop lets a later scan come back to it.
    pub fn scan(
        &mut self,
        from: Option<u64>,
        addrs: &BTreeSet<u64>,
        until: Option<u64>,
        mut f: impl FnMut(&mut Live, &Hit, Reach) -> Flow,
    ) -> Result<Hit> {
        let mut set = addrs.clone();
        self.core.set_breakpoints(set.clone());
        let r = (|| -> Result<Hit> {
            let mut reach = Reach { step: 0, k: 0 };
            // A scan from a span's start stops first at an address it
            // starts on, before the machine runs.
            let mut here = None;
            if let Some(s) = from {
                self.core.go_to_step(s)?;
                reach = Reach { step: s, k: 0 };
                let pc = self.pc();
                if set.contains(&pc) {
                    here = Some(Hit::Bp {
                        pos: self.core.here_position(),
                        tid: self.tid(),
                        pc,
                    });
                }
            }
            loop {
                let hit = match here.take() {
                    Some(hit) => hit,
                    None => match self.cont_to_hit(until, &mut reach)? {
                        end @ (Hit::End | Hit::Span) => return Ok(end),
                        hit => hit,
                    },
                };
                match f(self, &hit, reach) {
                    Flow::Stop => return Ok(hit),
                    Flow::Go => {}
                    Flow::Track(more) => {
                        set.extend(more);
                        self.core.set_breakpoints(set.clone());
                    }
                }
            }
        })();
        self.core.set_breakpoints(BTreeSet::new());
        r
    }

    /// Runs the machine to its next stop (before the start of span `until`
    /// at the latest), with `reach` moved on to it.
    fn cont_to_hit(&mut self, until: Option<u64>, reach: &mut Reach) -> Result<Hit> {
        let stop = self.core.cont_until(until)?;
        let step = self.core.step();
        *reach = if self.core.at_span_start() {
            Reach { step, k: 0 }
        } else if reach.step == step {
            Reach {
                step,
                k: reach.k + 1,
            }
        } else {
            Reach { step, k: 1 }
        };
        Ok(match stop {
            CoreStop::Breakpoint { tid, pc } => Hit::Bp {
                pos: self.core.here_position(),
                tid,
                pc,
            },
            CoreStop::Watch { tid, watch, .. } => Hit::Watch { tid, watch },
            CoreStop::Signal { signo, .. } => Hit::Signal { signo },
            CoreStop::Exited(_) => Hit::End,
            CoreStop::Stepped { .. } | CoreStop::Beginning { .. } => Hit::Span,
        })
    }

    /// Comes back to a stop a scan with `addrs` reached.
    pub fn reach(&mut self, addrs: &BTreeSet<u64>, r: Reach) -> Result<()> {
        self.core.set_breakpoints(addrs.clone());
        let res = (|| -> Result<()> {
            self.core.go_to_step(r.step)?;
            for _ in 0..r.k {
                if let CoreStop::Exited(_) = self.core.cont()? {
                    return Err(anyhow!("the run ended before that stop"));
                }
            }
            Ok(())
        })();
        self.core.set_breakpoints(BTreeSet::new());
        res
    }

    pub fn pc(&self) -> u64 {
        self.regs(self.tid()).map_or(0, |r| r.rip)
    }
}

/// Memory through the debug core, for the symbols crate.
pub struct CoreMemory<'a>(pub &'a mut vmm::debug::DebugCore);

impl symbols::Memory for CoreMemory<'_> {
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        match self.0.read_memory(addr, buf.len()) {
            Ok(b) => {
                buf.copy_from_slice(&b);
                true
            }
            Err(_) => false,
        }
    }
}

/// A register of thread `tid` by the name a condition gives it.
pub fn register_of(t: &vmm::debug::ThreadRegs, tid: u32, name: &str) -> Option<u64> {
    let r = &t.regs;
    Some(match name {
        "rip" | "pc" => r.rip,
        "rsp" | "sp" => r.rsp,
        "rbp" | "fp" => r.rbp,
        "rax" => r.rax,
        "rbx" => r.rbx,
        "rcx" => r.rcx,
        "rdx" => r.rdx,
        "rsi" => r.rsi,
        "rdi" => r.rdi,
        "r8" => r.r8,
        "r9" => r.r9,
        "r10" => r.r10,
        "r11" => r.r11,
        "r12" => r.r12,
        "r13" => r.r13,
        "r14" => r.r14,
        "r15" => r.r15,
        "rflags" | "eflags" => r.rflags,
        "fs_base" => t.fs_base,
        "gs_base" => t.gs_base,
        "tid" => tid as u64,
        _ => return None,
    })
}

impl Live {
    /// The variables of thread `tid`'s innermost frame where a scan stopped
    /// (for a breakpoint's condition, a logpoint's `{expression}`): None
    /// without debug info there.
    pub fn stop_variables(&mut self, tid: u32) -> Option<FrameVariables> {
        let sym = self.sym_of(tid)?;
        self.core.registers(tid).ok()?;
        let bt = self.core.kernel().backtrace(tid)?;
        sym.variables(&bt, 0, &mut CoreMemory(&mut self.core)).ok()
    }
}
