//! The gdb remote stub: a `vmm::debug::DebugCore` served over gdb's remote
//! protocol by the gdbstub crate. Every thread of the process is a gdb
//! thread; registers include `orig_rax`, `fs_base` and `gs_base`, and
//! the connection answers `qGetTLSAddr` (`tls.rs`: thread-locals, and
//! glibc's `errno`); breakpoints, watchpoints, stepping and
//! reverse execution are the session's.

use gdbstub::arch::{Arch, Registers};
use gdbstub::common::{Signal, Tid};
use gdbstub::conn::ConnectionExt;
use gdbstub::stub::run_blocking::{BlockingEventLoop, Event, WaitForStopReasonError};
use gdbstub::stub::MultiThreadStopReason;
use gdbstub::target::ext::base::multithread::{
    MultiThreadBase, MultiThreadResume, MultiThreadResumeOps, MultiThreadSchedulerLocking,
    MultiThreadSchedulerLockingOps, MultiThreadSingleStep, MultiThreadSingleStepOps,
};
use gdbstub::target::ext::base::reverse_exec::ReplayLogPosition;
use gdbstub::target::ext::base::reverse_exec::{
    ReverseCont, ReverseContOps, ReverseStep, ReverseStepOps,
};
use gdbstub::target::ext::base::BaseOps;
use gdbstub::target::ext::breakpoints::{
    Breakpoints, BreakpointsOps, HwWatchpoint, HwWatchpointOps, SwBreakpoint, SwBreakpointOps,
    WatchKind,
};
use gdbstub::target::{Target, TargetError, TargetResult};
use gdbstub_arch::x86::reg::X86_64CoreRegs;
use vmm::debug::{DebugCore, DebugError, Stop, ThreadRegs, Watch};
use vmm::run::ExitStatus;

/// Files gdb has open (`hostio.rs`): their bytes, read whole when opened.
#[derive(Default)]
pub struct OpenFiles {
    pub(super) files: std::collections::BTreeMap<u32, Vec<u8>>,
    pub(super) next: u32,
}

/// x86-64 as Linux shows it to gdb: the core and SSE registers, then
/// `orig_rax` and the segment bases.
pub enum X86_64Linux {}

/// The registers of one thread, in the order of [`TARGET_XML`].
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LinuxRegs {
    pub core: X86_64CoreRegs,
    pub orig_rax: u64,
    pub fs_base: u64,
    pub gs_base: u64,
}

/// The core and SSE registers' size in a `g` packet.
const CORE_LEN: usize = 0x218;

impl Registers for LinuxRegs {
    type ProgramCounter = u64;

    fn pc(&self) -> u64 {
        self.core.rip
    }

    fn gdb_serialize(&self, mut write_byte: impl FnMut(Option<u8>)) {
        self.core.gdb_serialize(&mut write_byte);
        for v in [self.orig_rax, self.fs_base, self.gs_base] {
            for b in v.to_le_bytes() {
                write_byte(Some(b));
            }
        }
    }

    fn gdb_deserialize(&mut self, bytes: &[u8]) -> Result<(), ()> {
        if bytes.len() < CORE_LEN + 24 {
            return Err(());
        }
        self.core.gdb_deserialize(&bytes[..CORE_LEN])?;
        let word = |i: usize| {
            let at = CORE_LEN + i * 8;
            u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
        };
        self.orig_rax = word(0);
        self.fs_base = word(1);
        self.gs_base = word(2);
        Ok(())
    }
}

/// What gdb is told the machine is: amd64 Linux with its register set.
const TARGET_XML: &str = include_str!("target.xml");

impl Arch for X86_64Linux {
    type Usize = u64;
    type Registers = LinuxRegs;
    type RegId = gdbstub_arch::x86::reg::id::X86_64CoreRegId;
    type BreakpointKind = usize;

    fn target_description_xml() -> Option<&'static str> {
        Some(TARGET_XML)
    }
}

/// What gdb asked the machine to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Continue,
    Step,
    ReverseStep,
    ReverseCont,
}

/// The stub's target: a session, and what to do on the next resume.
pub struct Stub {
    pub session: DebugCore,
    /// The thread gdb sees first (and stops in at first).
    pub first: u32,
    action: Option<Action>,
    /// The threads' pointers, for the connection's `qGetTLSAddr`.
    pub tls: super::tls::TlsTable,
    /// The process's auxiliary vector as gdb needs it (`qXfer:auxv:read`).
    auxv: Vec<u8>,
    /// The run's files gdb has open (`vFile:`).
    pub files: OpenFiles,
}

impl Stub {
    pub fn new(mut session: DebugCore, first: u32) -> Stub {
        let pid = session.pid();
        let layout = session
            .kernel()
            .symbolizer_of(pid)
            .and_then(|s| s.modules().first().map(|m| *m.module.tls()))
            .unwrap_or_default();
        let auxv = session.kernel().debugger_auxv(pid).unwrap_or_default();
        let mut stub = Stub {
            session,
            first,
            action: None,
            tls: super::tls::TlsTable::new(layout),
            auxv,
            files: Default::default(),
        };
        stub.publish_tls();
        stub
    }

    /// Each thread's pointer now, for `qGetTLSAddr`.
    fn publish_tls(&mut self) {
        let s = &self.session;
        let pointers = s
            .threads()
            .into_iter()
            .filter_map(|t| Some((t, s.registers(t).ok()?.fs_base)))
            .collect();
        self.tls.publish(pointers);
    }

    /// Does what gdb asked and says why the machine stopped, with the
    /// threads' pointers published for that stop.
    fn perform(&mut self) -> Result<MultiThreadStopReason<u64>, String> {
        let r = self.perform_action();
        self.publish_tls();
        r
    }

    fn perform_action(&mut self) -> Result<MultiThreadStopReason<u64>, String> {
        let action = self.action.take().unwrap_or(Action::Continue);
        let s = &mut self.session;
        let stop = match action {
            Action::Continue => s.cont(),
            Action::Step => s.step_instruction(),
            Action::ReverseStep => s.reverse_step_instruction(),
            Action::ReverseCont => s.reverse_cont(),
        };
        let stop = match stop {
            Ok(stop) => stop,
            Err(e @ (DebugError::Diverged | DebugError::Exited)) => {
                eprintln!("rewind: {e}");
                let tid = s.current_thread();
                return Ok(MultiThreadStopReason::ReplayLog {
                    tid: Some(tid_of(tid)),
                    pos: ReplayLogPosition::Begin,
                });
            }
            Err(e) => return Err(e.to_string()),
        };
        Ok(match stop {
            Stop::Stepped { tid } => MultiThreadStopReason::SignalWithThread {
                tid: tid_of(tid),
                signal: Signal::SIGTRAP,
            },
            Stop::Breakpoint { tid, .. } => MultiThreadStopReason::SwBreak(tid_of(tid)),
            Stop::Watch { tid, watch, addr } => MultiThreadStopReason::Watch {
                tid: tid_of(tid),
                kind: match watch.kind {
                    vmm::debug::WatchKind::Write => WatchKind::Write,
                    vmm::debug::WatchKind::Read => WatchKind::Read,
                    vmm::debug::WatchKind::Access => WatchKind::ReadWrite,
                },
                addr,
            },
            Stop::Signal { tid, signo } => MultiThreadStopReason::SignalWithThread {
                tid: tid_of(tid),
                signal: Signal(signo as u8),
            },
            Stop::Beginning { tid } => MultiThreadStopReason::ReplayLog {
                tid: Some(tid_of(tid)),
                pos: ReplayLogPosition::Begin,
            },
            Stop::Exited(ExitStatus::Exited(code)) => MultiThreadStopReason::Exited(code as u8),
            Stop::Exited(ExitStatus::Killed(sig)) => {
                MultiThreadStopReason::Terminated(Signal(sig as u8))
            }
            Stop::Exited(_) => MultiThreadStopReason::Terminated(Signal::SIGKILL),
        })
    }
}

fn tid_of(t: u32) -> Tid {
    Tid::new(t as usize).unwrap_or(Tid::MIN)
}

fn err<E>(e: DebugError) -> TargetError<E> {
    match e {
        DebugError::BadAddress(_) | DebugError::NoThread(_) => TargetError::Errno(14),
        _ => TargetError::NonFatal,
    }
}

fn to_gdb(r: &ThreadRegs) -> LinuxRegs {
    let g = &r.regs;
    let mut core = X86_64CoreRegs {
        regs: [
            g.rax, g.rbx, g.rcx, g.rdx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8, g.r9, g.r10, g.r11,
            g.r12, g.r13, g.r14, g.r15,
        ],
        eflags: g.rflags as u32,
        rip: g.rip,
        ..Default::default()
    };
    // Linux's user selectors: what a program there would see.
    core.segments.cs = 0x33;
    core.segments.ss = 0x2b;
    if let Some(fx) = r.fxsave.as_deref().filter(|f| f.len() >= 512) {
        let u16_at = |i: usize| u16::from_le_bytes([fx[i], fx[i + 1]]) as u32;
        let u32_at = |i: usize| u32::from_le_bytes(fx[i..i + 4].try_into().unwrap());
        core.fpu.fctrl = u16_at(0);
        core.fpu.fstat = u16_at(2);
        // The abridged tag (a bit per register) as the full tag word: empty or valid.
        let abridged = fx[4];
        core.fpu.ftag = (0..8)
            .map(|i| {
                if abridged & (1 << i) == 0 {
                    3 << (2 * i)
                } else {
                    0
                }
            })
            .sum();
        core.fpu.fop = u16_at(6);
        core.fpu.fioff = u32_at(8);
        core.fpu.fiseg = u32_at(12);
        core.fpu.fooff = u32_at(16);
        core.fpu.foseg = u32_at(20);
        core.mxcsr = u32_at(24);
        for i in 0..8 {
            core.st[i].copy_from_slice(&fx[32 + 16 * i..32 + 16 * i + 10]);
        }
        for i in 0..16 {
            core.xmm[i] = u128::from_le_bytes(fx[160 + 16 * i..176 + 16 * i].try_into().unwrap());
        }
    }
    LinuxRegs {
        core,
        orig_rax: g.rax,
        fs_base: r.fs_base,
        gs_base: r.gs_base,
    }
}

impl Target for Stub {
    type Arch = X86_64Linux;
    type Error = String;

    fn base_ops(&mut self) -> BaseOps<'_, Self::Arch, Self::Error> {
        BaseOps::MultiThread(self)
    }

    fn support_breakpoints(&mut self) -> Option<BreakpointsOps<'_, Self>> {
        Some(self)
    }

    fn guard_rail_implicit_sw_breakpoints(&self) -> bool {
        true
    }

    fn support_host_io(&mut self) -> Option<gdbstub::target::ext::host_io::HostIoOps<'_, Self>> {
        Some(self)
    }

    fn support_auxv(&mut self) -> Option<gdbstub::target::ext::auxv::AuxvOps<'_, Self>> {
        Some(self)
    }

    fn support_libraries_svr4(
        &mut self,
    ) -> Option<gdbstub::target::ext::libraries::LibrariesSvr4Ops<'_, Self>> {
        if is_static(&self.auxv) {
            Some(self)
        } else {
            None
        }
    }
}

/// Whether the auxiliary vector is a static program's: no interpreter
/// (AT_BASE 0).
fn is_static(auxv: &[u8]) -> bool {
    const AT_BASE: u64 = 7;
    auxv.chunks_exact(16)
        .map(|w| {
            let word = |i: usize| u64::from_le_bytes(w[i..i + 8].try_into().unwrap_or_default());
            (word(0), word(8))
        })
        .any(|(key, value)| key == AT_BASE && value == 0)
}

/// A static program's libraries as gdb reads them (`qXfer:libraries-svr4`):
/// none. Without this list gdb finds the loader's breakpoint `r_brk`
/// (`_dl_debug_state`) in `_r_debug`, which static glibc fills in, takes
/// the object holding it for the dynamic loader and the whole program's
/// `.text` for the loader's symbol resolver; reverse-next then leaves every
/// line as if stepping back out of the resolver, by a breakpoint at the
/// function's start, and climbs out to `_start`. With the list gdb sets
/// that breakpoint by the symbol's name, as when it starts a static program
/// itself, and knows no resolver.
impl gdbstub::target::ext::libraries::LibrariesSvr4 for Stub {
    fn get_libraries_svr4(
        &self,
        offset: u64,
        length: usize,
        buf: &mut [u8],
    ) -> TargetResult<usize, Self> {
        let xml = b"<library-list-svr4 version=\"1.0\"/>";
        Ok(xfer(xml, offset, length, buf))
    }
}

impl gdbstub::target::ext::auxv::Auxv for Stub {
    fn get_auxv(&self, offset: u64, length: usize, buf: &mut [u8]) -> TargetResult<usize, Self> {
        Ok(xfer(&self.auxv, offset, length, buf))
    }
}

/// A `qXfer` read of `data`: at most `length` bytes from `offset` into
/// `buf`; how many.
fn xfer(data: &[u8], offset: u64, length: usize, buf: &mut [u8]) -> usize {
    let from = usize::try_from(offset).map_or(data.len(), |o| o.min(data.len()));
    let n = length.min(buf.len()).min(data.len() - from);
    buf[..n].copy_from_slice(&data[from..from + n]);
    n
}

impl MultiThreadBase for Stub {
    fn read_registers(&mut self, regs: &mut LinuxRegs, tid: Tid) -> TargetResult<(), Self> {
        let r = self.session.registers(tid.get() as u32).map_err(err)?;
        *regs = to_gdb(&r);
        Ok(())
    }

    fn write_registers(&mut self, regs: &LinuxRegs, tid: Tid) -> TargetResult<(), Self> {
        let t = tid.get() as u32;
        let mut r = self.session.registers(t).map_err(err)?;
        let c = &regs.core;
        let g = &mut r.regs;
        [
            g.rax, g.rbx, g.rcx, g.rdx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8, g.r9, g.r10, g.r11,
            g.r12, g.r13, g.r14, g.r15,
        ] = c.regs;
        g.rip = c.rip;
        g.rflags = (g.rflags & !0xffff_ffff) | c.eflags as u64;
        r.fs_base = regs.fs_base;
        r.gs_base = regs.gs_base;
        self.session.set_registers(t, &r).map_err(err)
    }

    fn read_addrs(&mut self, start: u64, data: &mut [u8], _tid: Tid) -> TargetResult<usize, Self> {
        // As much as is readable, page by page.
        let mut done = 0;
        while done < data.len() {
            let a = start + done as u64;
            let n = ((4096 - (a & 4095)) as usize).min(data.len() - done);
            match self.session.read_memory(a, n) {
                Ok(b) => data[done..done + n].copy_from_slice(&b),
                Err(_) if done > 0 => break,
                Err(e) => return Err(err(e)),
            }
            done += n;
        }
        Ok(done)
    }

    fn write_addrs(&mut self, start: u64, data: &[u8], _tid: Tid) -> TargetResult<(), Self> {
        self.session.write_memory(start, data).map_err(err)
    }

    fn list_active_threads(
        &mut self,
        thread_is_active: &mut dyn FnMut(Tid),
    ) -> Result<(), Self::Error> {
        let threads = self.session.threads();
        if threads.contains(&self.first) {
            thread_is_active(tid_of(self.first));
        }
        for t in threads.into_iter().filter(|t| *t != self.first) {
            thread_is_active(tid_of(t));
        }
        Ok(())
    }

    fn support_resume(&mut self) -> Option<MultiThreadResumeOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadResume for Stub {
    fn resume(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    fn clear_resume_actions(&mut self) -> Result<(), Self::Error> {
        self.action = None;
        Ok(())
    }

    fn set_resume_action_continue(
        &mut self,
        _tid: Tid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        // One CPU: a step of one thread wins over a continue of the others.
        if self.action.is_none() {
            self.action = Some(Action::Continue);
        }
        Ok(())
    }

    fn support_single_step(&mut self) -> Option<MultiThreadSingleStepOps<'_, Self>> {
        Some(self)
    }

    fn support_reverse_step(&mut self) -> Option<ReverseStepOps<'_, Tid, Self>> {
        Some(self)
    }

    fn support_reverse_cont(&mut self) -> Option<ReverseContOps<'_, Tid, Self>> {
        Some(self)
    }

    fn support_scheduler_locking(&mut self) -> Option<MultiThreadSchedulerLockingOps<'_, Self>> {
        Some(self)
    }
}

impl MultiThreadSchedulerLocking for Stub {
    /// The other threads stay where the recording's schedule puts them:
    /// only the thread on the CPU runs between two exits anyway.
    fn set_resume_action_scheduler_lock(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

impl MultiThreadSingleStep for Stub {
    fn set_resume_action_step(
        &mut self,
        _tid: Tid,
        _signal: Option<Signal>,
    ) -> Result<(), Self::Error> {
        self.action = Some(Action::Step);
        Ok(())
    }
}

impl ReverseStep<Tid> for Stub {
    fn reverse_step(&mut self, _tid: Tid) -> Result<(), Self::Error> {
        self.action = Some(Action::ReverseStep);
        Ok(())
    }
}

impl ReverseCont<Tid> for Stub {
    fn reverse_cont(&mut self) -> Result<(), Self::Error> {
        self.action = Some(Action::ReverseCont);
        Ok(())
    }
}

impl Breakpoints for Stub {
    fn support_sw_breakpoint(&mut self) -> Option<SwBreakpointOps<'_, Self>> {
        Some(self)
    }

    fn support_hw_watchpoint(&mut self) -> Option<HwWatchpointOps<'_, Self>> {
        Some(self)
    }
}

impl SwBreakpoint for Stub {
    fn add_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        if self.session.read_memory(addr, 1).is_err() {
            return Ok(false);
        }
        self.session.add_breakpoint(addr);
        Ok(true)
    }

    fn remove_sw_breakpoint(&mut self, addr: u64, _kind: usize) -> TargetResult<bool, Self> {
        Ok(self.session.remove_breakpoint(addr))
    }
}

fn watch_of(addr: u64, len: u64, kind: WatchKind) -> Watch {
    Watch {
        addr,
        len,
        kind: match kind {
            WatchKind::Write => vmm::debug::WatchKind::Write,
            WatchKind::Read => vmm::debug::WatchKind::Read,
            WatchKind::ReadWrite => vmm::debug::WatchKind::Access,
        },
    }
}

impl HwWatchpoint for Stub {
    fn add_hw_watchpoint(
        &mut self,
        addr: u64,
        len: u64,
        kind: WatchKind,
    ) -> TargetResult<bool, Self> {
        if len == 0 || self.session.read_memory(addr, len as usize).is_err() {
            return Ok(false);
        }
        self.session.add_watch(watch_of(addr, len, kind));
        Ok(true)
    }

    fn remove_hw_watchpoint(
        &mut self,
        addr: u64,
        len: u64,
        kind: WatchKind,
    ) -> TargetResult<bool, Self> {
        Ok(self.session.remove_watch(watch_of(addr, len, kind)))
    }
}

/// Runs what gdb asked for when it resumes; gdb's interrupts are not
/// polled while the machine runs (a run ends, or stops, by itself).
pub enum EventLoop {}

impl BlockingEventLoop for EventLoop {
    type Target = Stub;
    type Connection = Box<dyn ConnectionExt<Error = std::io::Error>>;
    type StopReason = MultiThreadStopReason<u64>;

    fn wait_for_stop_reason(
        target: &mut Stub,
        _conn: &mut Self::Connection,
    ) -> Result<Event<MultiThreadStopReason<u64>>, WaitForStopReasonError<String, std::io::Error>>
    {
        target
            .perform()
            .map(Event::TargetStopped)
            .map_err(WaitForStopReasonError::Target)
    }

    fn on_interrupt(target: &mut Stub) -> Result<Option<MultiThreadStopReason<u64>>, String> {
        Ok(Some(MultiThreadStopReason::SignalWithThread {
            tid: tid_of(target.session.current_thread()),
            signal: Signal::SIGINT,
        }))
    }
}
