//! Processes: fork, vfork and clone of a process, execve and execveat
//! (static ELF and `#!` scripts), wait4 and waitid, zombies, SIGCHLD,
//! orphans, process groups and sessions.
//!
//! A forked child gets an eager copy of the pages its parent has touched
//! (`Mm::fork_copy`), in its own page tables; docs/design.md says why not
//! copy-on-write. The first process plays init's role: orphans are
//! reparented to it, and the run ends when it does. execve is in
//! `exec.rs`, job control and process groups in `jobs.rs`.

use super::errno::*;
use super::sched::Sys;
use super::signal::{default_action, DefaultAction, SigAction, SigInfo, SIGCHLD, SIG_IGN};
use super::task::{JobReport, PendingCall, Pid, Process, Thread, ThreadState, Tid, Wait, Zombie};
use super::thread::{
    CloneArgs, CLONE_CHILD_CLEARTID, CLONE_CHILD_SETTID, CLONE_DETACHED, CLONE_PARENT_SETTID,
    CLONE_SETTLS, CLONE_VFORK, CLONE_VM, CSIGNAL,
};
use super::Kernel;
use crate::kernel::syscalls::nr;
use crate::run::{EventKind, ExitStatus};

pub mod exec;
pub(super) use exec::interpreter;
pub mod jobs;

/// Most processes a run may hold at once, zombies included (as
/// RLIMIT_NPROC would): a fork past it fails with EAGAIN, so a fork bomb
/// meets a clear limit long before it could exhaust guest or host memory.
pub const MAX_PROCS: usize = 512;

/// CLONE_PARENT: the child is its creator's sibling.
const CLONE_PARENT: u64 = 0x8000;
/// Flags a process-creating clone may carry.
const FORK_FLAGS: u64 = CSIGNAL
    | CLONE_VM
    | CLONE_VFORK
    | CLONE_PARENT
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_SETTID
    | CLONE_CHILD_CLEARTID
    | CLONE_DETACHED;
const CLONE_SIGHAND: u64 = super::thread::CLONE_SIGHAND;

const WNOHANG: u64 = 1;
const WUNTRACED: u64 = 2;
const WEXITED: u64 = 4;
const WCONTINUED: u64 = 8;
const WNOWAIT: u64 = 0x0100_0000;
const WNOTHREAD: u64 = 0x2000_0000;
const WALL: u64 = 0x4000_0000;
const WCLONE: u64 = 0x8000_0000;

const P_ALL: u64 = 0;
const P_PID: u64 = 1;
const P_PGID: u64 = 2;

const CLD_EXITED: i32 = 1;
const CLD_KILLED: i32 = 2;
const CLD_DUMPED: i32 = 3;
const CLD_STOPPED: i32 = 5;
const CLD_CONTINUED: i32 = 6;
/// SA_NOCLDSTOP: no SIGCHLD when a child stops or continues.
const SA_NOCLDSTOP: u64 = 1;

/// SA_NOCLDWAIT: children of this process are never zombies.
const SA_NOCLDWAIT: u64 = 2;

/// Interpreters a `#!` script may name in a row (Linux's BINPRM_MAX_RECURSION).
pub(in crate::kernel) const MAX_INTERP_DEPTH: usize = 4;
/// Bytes of a `#!` line Linux reads (BINPRM_BUF_SIZE).
const INTERP_LINE_MAX: usize = 256;
/// Most bytes of arguments and environment together (Linux's ARG_MAX with
/// an 8 MiB stack: a quarter of it): more is E2BIG.
const ARG_MAX: usize = 2 << 20;
/// Most argument and environment strings.
const ARG_COUNT_MAX: usize = 1 << 17;

const AT_FDCWD: u64 = -100i64 as u64;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_EMPTY_PATH: u64 = 0x1000;

/// Which children a wait names.
#[derive(Debug, Clone, Copy)]
enum Which {
    Any,
    Pid(Pid),
    Group(Pid),
}

/// A wait's request, from wait4's or waitid's arguments.
struct WaitReq {
    which: Which,
    options: u64,
    /// Ended children are what it waits for (wait4 always; waitid with WEXITED).
    exited: bool,
}

/// What a wait found: the child, and its end or job-control change.
struct Found {
    pid: Pid,
    what: Change,
}

enum Change {
    Ended(Zombie),
    Job(JobReport),
}

impl Change {
    /// The wait status: exit code << 8; the signal with the core flag
    /// (0x80); a stop as signal << 8 | 0x7f; a continue as 0xffff.
    fn wstatus(&self) -> i32 {
        match self {
            Change::Ended(z) => z.wstatus(),
            Change::Job(JobReport::Stopped(s)) => (s << 8) | 0x7f,
            Change::Job(JobReport::Continued) => 0xffff,
        }
    }

    /// si_code and si_status for waitid.
    fn cld(&self) -> (i32, i32) {
        match self {
            Change::Ended(z) => z.cld(),
            Change::Job(JobReport::Stopped(s)) => (CLD_STOPPED, *s),
            Change::Job(JobReport::Continued) => (CLD_CONTINUED, super::signal::SIGCONT),
        }
    }
}

impl Zombie {
    /// The wait status Linux encodes: exit code << 8, or the signal with
    /// the core flag (0x80).
    pub(super) fn wstatus(&self) -> i32 {
        match self.status {
            ExitStatus::Exited(c) => (c & 0xff) << 8,
            ExitStatus::Killed(s) => (s & 0x7f) | if self.core { 0x80 } else { 0 },
            _ => 0,
        }
    }

    /// si_code and si_status of SIGCHLD and waitid.
    fn cld(&self) -> (i32, i32) {
        match self.status {
            ExitStatus::Exited(c) => (CLD_EXITED, c & 0xff),
            ExitStatus::Killed(s) if self.core => (CLD_DUMPED, s),
            ExitStatus::Killed(s) => (CLD_KILLED, s),
            _ => (CLD_EXITED, 0),
        }
    }
}

impl Kernel<'_> {
    /// fork, vfork, and clone or clone3 without CLONE_THREAD: a new process
    /// with a copy of the caller's memory, descriptors (descriptions
    /// shared) and signal handlers (no pending signals), and one thread
    /// returning 0 where the caller's call returns the child's pid.
    pub(super) fn fork_process(&mut self, c: CloneArgs, call: PendingCall) -> SysResult<Sys> {
        let f = c.flags;
        if f & CLONE_SIGHAND != 0 && f & CLONE_VM == 0 {
            return Err(EINVAL);
        }
        if f & !FORK_FLAGS != 0 || (f & CLONE_VM != 0 && f & CLONE_VFORK == 0) {
            return Err(EINVAL);
        }
        if self.procs.len() + self.zombies.len() >= MAX_PROCS
            || self.threads.len() >= super::thread::MAX_THREADS
        {
            return Err(EAGAIN);
        }
        let parent_tid = self.cur_tid();
        let parent_pid = self.cur_pid();
        let mm = {
            let p = &self.procs[&parent_pid];
            p.mm.fork_copy(&mut self.m.ram).ok_or(ENOMEM)?
        };
        let pid = self.alloc_id();
        let mut regs = self.m.regs();
        regs.rax = 0;
        if c.stack != 0 {
            regs.rsp = c.stack;
        }
        let fs_base = if f & CLONE_SETTLS != 0 {
            c.tls
        } else {
            self.m.fs_base()
        };
        let xstate = match self.m.save_xstate() {
            Ok(x) => x,
            Err(e) => {
                let mut mm = mm;
                mm.release(&mut self.m.ram);
                return Err(self.engine_failure(e));
            }
        };
        let ctx = super::task::Context {
            regs,
            fs_base,
            gs_base: self.m.gs_base(),
            xstate,
        };
        let parent = &self.procs[&parent_pid];
        let mut signals = parent.signals.clone();
        signals.shared.clear();
        signals.fatal = None;
        let ppid = if f & CLONE_PARENT != 0 {
            parent.ppid
        } else {
            parent_pid
        };
        let child = Process {
            pid,
            ppid,
            mm,
            files: parent.files.clone(),
            signals,
            threads: vec![pid],
            exe: parent.exe.clone(),
            cwd: parent.cwd.clone(),
            umask: parent.umask,
            pgid: parent.pgid,
            sid: parent.sid,
            exit_signal: (f & CSIGNAL) as i32,
            pdeathsig: 0,
            execed: false,
            vfork_parent: (f & CLONE_VFORK != 0).then_some(parent_tid),
            rlimits: parent.rlimits,
            stopped: None,
            report: None,
            argv: parent.argv.clone(),
            env: parent.env.clone(),
            nice: parent.nice,
            strings: parent.strings,
            adopted: false,
        };
        // Every description gains a reference (the table itself is copied above).
        self.vfs.share_table(&child.files);
        let pt = self.threads[&parent_tid].clone();
        let mut tsig = pt.signals.for_new_thread();
        tsig.altstack = pt.signals.altstack;
        let thread = Thread {
            tid: pid,
            pid,
            ctx: Some(ctx),
            state: ThreadState::Runnable,
            clear_child_tid: if f & CLONE_CHILD_CLEARTID != 0 {
                c.child_tid
            } else {
                0
            },
            robust_list: 0,
            signals: tsig,
            pending_call: None,
            name: pt.name.clone(),
        };
        self.procs.insert(pid, child);
        self.threads.insert(pid, thread);
        self.points_fork(pid, pid);
        if f & CLONE_CHILD_SETTID != 0 {
            // In the child's memory: a bad pointer is the child's problem, as on Linux.
            let _ = self.write_user_of(pid, c.child_tid, &pid.to_le_bytes());
        }
        if f & CLONE_PARENT_SETTID != 0 {
            let _ = self.write_user(c.parent_tid, &pid.to_le_bytes());
        }
        self.sched.runq.push_back(pid);
        self.emit_for(pid, EventKind::ThreadStart { parent: parent_tid });
        if f & CLONE_VFORK != 0 {
            // The parent sleeps until the child execs or ends; then the call returns.
            return Ok(self.block(Wait::Vfork, None, call));
        }
        Ok(Sys::Ret(pid as u64))
    }

    /// After `exit_process` of a process other than the first: its vfork
    /// parent goes on, its children are the first process's, and its parent
    /// gets SIGCHLD and a zombie to reap (or neither, if it ignores SIGCHLD).
    pub(super) fn process_ended(&mut self, p: Process, status: ExitStatus) {
        let pid = p.pid;
        self.vfork_done(&p);
        let (children, zombies) = self.reparent_children(pid);
        let core = match status {
            ExitStatus::Killed(s) => {
                default_action(s) == DefaultAction::Core
                    && p.rlimits[super::identity::RLIMIT_CORE as usize][0] != 0
            }
            _ => false,
        };
        let z = Zombie {
            ppid: p.ppid,
            pgid: p.pgid,
            sid: p.sid,
            status,
            core,
            exit_signal: p.exit_signal,
            name: self.names.get(&pid).cloned().unwrap_or_default(),
        };
        // A zombie first: what its end causes next may wake a wait for it.
        self.notify_parent(pid, z);
        self.adopted(&p, children, zombies);
        // Its own group may have lost its last link through it.
        if let Some(parent) = self.procs.get(&p.ppid) {
            self.hang_up_if_orphaned((p.pgid, p.sid), (parent.pgid, parent.sid));
        }
    }

    /// Tells a zombie's parent: SIGCHLD (its exit signal), and a zombie
    /// to reap unless the parent ignores SIGCHLD or set SA_NOCLDWAIT.
    fn notify_parent(&mut self, pid: Pid, z: Zombie) {
        let ppid = z.ppid;
        let Some(parent) = self.procs.get(&ppid) else {
            return;
        };
        let act: SigAction = parent.signals.actions[(SIGCHLD - 1) as usize];
        let autoreap =
            z.exit_signal == SIGCHLD && (act.handler == SIG_IGN || act.flags & SA_NOCLDWAIT != 0);
        let (code, st) = z.cld();
        let sig = z.exit_signal;
        if !autoreap {
            self.zombies.insert(pid, z);
        }
        // Waiters first: a wait the child ends returns (its pid, or ECHILD)
        // before the signal's handler runs, as on Linux.
        self.child_changed(ppid);
        if sig > 0 && sig as usize <= super::signal::NSIG {
            let info = SigInfo {
                value: st as u32 as u64,
                ..SigInfo::sent(sig, code, pid)
            };
            self.send_signal(super::signal::Target::Process(ppid), info);
        }
    }

    /// Wakes a vfork parent: the child has exec'd or ended.
    fn vfork_done(&mut self, p: &Process) {
        if let Some(t) = p.vfork_parent {
            let waiting = self.threads.get(&t).is_some_and(|t| {
                matches!(
                    t.state,
                    ThreadState::Blocked {
                        wait: Wait::Vfork,
                        ..
                    }
                )
            });
            if waiting {
                self.wake(t, Ok(p.pid as u64));
            }
        }
    }

    /// The children (live and zombies) of an ended process become the
    /// first process's: the live ones, and whether zombies moved.
    fn reparent_children(&mut self, pid: Pid) -> (Vec<Pid>, bool) {
        let init = super::FIRST_PID;
        let mut children = Vec::new();
        for c in self.procs.values_mut().filter(|c| c.ppid == pid) {
            c.ppid = init;
            c.adopted = true;
            children.push(c.pid);
        }
        let mut zombies = false;
        for z in self.zombies.values_mut().filter(|z| z.ppid == pid) {
            z.ppid = init;
            zombies = true;
        }
        (children, zombies)
    }

    /// Once `p` is a zombie, what the adoption of its children causes: the
    /// live ones that asked get their PR_SET_PDEATHSIG, a group this
    /// orphans with a stopped member is hung up, and the first process's
    /// waits look at the zombies it got.
    fn adopted(&mut self, p: &Process, children: Vec<Pid>, zombies: bool) {
        for child in children {
            let Some(c) = self.procs.get(&child) else {
                continue;
            };
            let (sig, group) = (c.pdeathsig, (c.pgid, c.sid));
            if sig != 0 {
                self.send_signal(
                    super::signal::Target::Process(child),
                    SigInfo::sent(sig, super::signal::SI_USER, p.pid),
                );
            }
            self.hang_up_if_orphaned(group, (p.pgid, p.sid));
        }
        if zombies {
            self.child_changed(super::FIRST_PID);
        }
    }

    /// Whether process group `pgid` is orphaned: none of its live members
    /// has its parent in another group of the same session (POSIX; Linux's
    /// will_become_orphaned_pgrp). The first process links its group, as
    /// a job a shell started does (so a stop signal stops its children as
    /// when the program runs from a shell); a process it adopted links
    /// none, as Linux's init's children do not.
    pub(super) fn orphaned_pgrp(&self, pgid: Pid) -> bool {
        !self.procs.values().filter(|m| m.pgid == pgid).any(|m| {
            m.pid == super::FIRST_PID
                || !m.adopted
                    && self
                        .procs
                        .get(&m.ppid)
                        .is_some_and(|q| q.pgid != pgid && q.sid == m.sid)
        })
    }

    /// A process in `group` (pgid, sid) lost its parent, in `parent`
    /// (itself or its parent ended): if that left its group orphaned with
    /// a stopped member, no shell can continue it any more, so every member
    /// gets SIGHUP, then SIGCONT, from the kernel (Linux's kill_orphaned_pgrp).
    fn hang_up_if_orphaned(&mut self, group: (Pid, Pid), parent: (Pid, Pid)) {
        let (pgid, sid) = group;
        if parent.0 == pgid || parent.1 != sid || !self.orphaned_pgrp(pgid) {
            return;
        }
        let members: Vec<Pid> = self
            .procs
            .values()
            .filter(|m| m.pgid == pgid)
            .map(|m| m.pid)
            .collect();
        if !members.iter().any(|m| self.procs[m].stopped.is_some()) {
            return;
        }
        for sig in [super::signal::SIGHUP, super::signal::SIGCONT] {
            for &m in &members {
                let info = SigInfo::sent(sig, super::signal::SI_KERNEL, 0);
                self.send_signal(super::signal::Target::Process(m), info);
            }
        }
    }

    /// A child of `ppid` changed state: each of its threads waiting in
    /// wait4 or waitid looks again, in thread order.
    pub(super) fn child_changed(&mut self, ppid: Pid) {
        let Some(p) = self.procs.get(&ppid) else {
            return;
        };
        let waiting: Vec<(Tid, PendingCall)> = p
            .threads
            .iter()
            .filter_map(|t| self.threads.get(t))
            .filter(|t| {
                matches!(
                    t.state,
                    ThreadState::Blocked {
                        wait: Wait::Child,
                        ..
                    }
                )
            })
            .filter_map(|t| t.pending_call.map(|c| (t.tid, c)))
            .collect();
        for (tid, call) in waiting {
            match self.try_wait(ppid, call) {
                Ok(None) => {}
                Ok(Some(v)) => self.wake(tid, Ok(v)),
                Err(e) => self.wake(tid, Err(e)),
            }
        }
    }

    /// One look for a wait of process `me`: Ok(None) to block, else the
    /// call's result, with the status written to the caller's memory.
    fn try_wait(&mut self, me: Pid, call: PendingCall) -> SysResult<Option<u64>> {
        let req = wait_request(call)?;
        let found = self.find_child(me, &req)?;
        let Some(found) = found else {
            if req.options & WNOHANG != 0 {
                if call.nr == nr::waitid && call.args[2] != 0 {
                    self.write_user_of(me, call.args[2], &[0u8; 32])?;
                }
                return Ok(Some(0));
            }
            return Ok(None);
        };
        let a = call.args;
        if call.nr == nr::wait4 {
            if a[1] != 0 {
                self.write_user_of(me, a[1], &found.what.wstatus().to_le_bytes())?;
            }
            if a[3] != 0 {
                self.write_user_of(me, a[3], &[0u8; RUSAGE_SIZE])?;
            }
        } else {
            if a[2] != 0 {
                let (code, st) = found.what.cld();
                let info = SigInfo {
                    value: st as u32 as u64,
                    ..SigInfo::sent(SIGCHLD, code, found.pid)
                };
                self.write_user_of(me, a[2], &info.to_bytes())?;
            }
            if a[4] != 0 {
                self.write_user_of(me, a[4], &[0u8; RUSAGE_SIZE])?;
            }
        }
        if req.options & WNOWAIT == 0 {
            match found.what {
                Change::Ended(_) => {
                    self.zombies.remove(&found.pid);
                }
                Change::Job(_) => {
                    if let Some(p) = self.procs.get_mut(&found.pid) {
                        p.report = None;
                    }
                }
            }
        }
        Ok(Some(if call.nr == nr::wait4 {
            found.pid as u64
        } else {
            0
        }))
    }

    /// The child a wait reaps: the lowest-numbered zombie it names. Err
    /// ECHILD when it names no child at all.
    fn find_child(&self, me: Pid, req: &WaitReq) -> SysResult<Option<Found>> {
        let my_pgid = self.procs.get(&me).map_or(0, |p| p.pgid);
        let named = |pid: Pid, pgid: Pid, exit_signal: i32| {
            let kind = req.options & WALL != 0
                || ((exit_signal == SIGCHLD) == (req.options & WCLONE == 0));
            kind && match req.which {
                Which::Any => true,
                Which::Pid(p) => p == pid,
                Which::Group(0) => pgid == my_pgid,
                Which::Group(g) => pgid == g,
            }
        };
        let zombie = self
            .zombies
            .iter()
            .filter(|_| req.exited)
            .find(|(pid, z)| z.ppid == me && named(**pid, z.pgid, z.exit_signal));
        if let Some((pid, z)) = zombie {
            return Ok(Some(Found {
                pid: *pid,
                what: Change::Ended(z.clone()),
            }));
        }
        let mut live = self
            .procs
            .values()
            .filter(|c| c.ppid == me && c.pid != me && named(c.pid, c.pgid, c.exit_signal))
            .peekable();
        if live.peek().is_none() {
            return Err(ECHILD);
        }
        let wanted = |r: &JobReport| match r {
            JobReport::Stopped(_) => req.options & WUNTRACED != 0,
            JobReport::Continued => req.options & WCONTINUED != 0,
        };
        Ok(live
            .find_map(|c| c.report.filter(|r| wanted(r)).map(|r| (c.pid, r)))
            .map(|(pid, r)| Found {
                pid,
                what: Change::Job(r),
            }))
    }
}

/// Bytes of `struct rusage`.
const RUSAGE_SIZE: usize = 144;

/// A wait4 or waitid call's arguments, checked.
fn wait_request(call: PendingCall) -> SysResult<WaitReq> {
    let a = call.args;
    if call.nr == nr::wait4 {
        let options = a[2];
        if options & !(WNOHANG | WUNTRACED | WCONTINUED | WNOTHREAD | WALL | WCLONE) != 0 {
            return Err(EINVAL);
        }
        let pid = a[0] as i32;
        let which = match pid {
            -1 => Which::Any,
            0 => Which::Group(0),
            p if p < 0 => Which::Group(p.unsigned_abs()),
            p => Which::Pid(p as Pid),
        };
        return Ok(WaitReq {
            which,
            options,
            exited: true,
        });
    }
    let (idtype, id, options) = (a[0], a[1] as u32, a[3]);
    if options & !(WNOHANG | WNOWAIT | WEXITED | WUNTRACED | WCONTINUED | WNOTHREAD | WALL | WCLONE)
        != 0
        || options & (WEXITED | WUNTRACED | WCONTINUED) == 0
    {
        return Err(EINVAL);
    }
    let which = match idtype {
        P_ALL => Which::Any,
        P_PID if id > 0 && id <= i32::MAX as u32 => Which::Pid(id),
        P_PGID if id <= i32::MAX as u32 => Which::Group(id),
        _ => return Err(EINVAL),
    };
    Ok(WaitReq {
        which,
        options,
        exited: options & WEXITED != 0,
    })
}

/// Fork implements Linux syscall fork(2).
pub fn sys_fork(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let call = PendingCall {
        nr: nr::fork,
        args: a,
    };
    k.fork_process(
        CloneArgs {
            flags: SIGCHLD as u64,
            stack: 0,
            parent_tid: 0,
            child_tid: 0,
            tls: 0,
        },
        call,
    )
}

/// Vfork implements Linux syscall vfork(2).
/// Partial (vfork): the child runs in a copy of its parent's memory (the parent waits until it execs or ends, as on Linux).
pub fn sys_vfork(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let call = PendingCall {
        nr: nr::vfork,
        args: a,
    };
    k.fork_process(
        CloneArgs {
            flags: CLONE_VM | CLONE_VFORK | SIGCHLD as u64,
            stack: 0,
            parent_tid: 0,
            child_tid: 0,
            tls: 0,
        },
        call,
    )
}

/// Wait4 implements Linux syscall wait4(2).
/// Partial (wait4): rusage is zeros.
pub fn sys_wait4(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let call = PendingCall {
        nr: nr::wait4,
        args: a,
    };
    let me = k.cur_pid();
    match k.try_wait(me, call)? {
        Some(v) => Ok(Sys::Ret(v)),
        None => Ok(k.block(Wait::Child, None, call)),
    }
}

/// Waitid implements Linux syscall waitid(2).
/// Partial (waitid): P_ALL, P_PID and P_PGID (no pidfds); rusage is zeros.
pub fn sys_waitid(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let call = PendingCall {
        nr: nr::waitid,
        args: a,
    };
    let me = k.cur_pid();
    match k.try_wait(me, call)? {
        Some(v) => Ok(Sys::Ret(v)),
        None => Ok(k.block(Wait::Child, None, call)),
    }
}
