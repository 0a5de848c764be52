//! Threads and process lifetimes: clone, clone3, exit, exit_group,
//! set_tid_address, set_robust_list, rseq, arch_prctl.

use super::errno::*;
use super::sched::Sys;
use super::task::{Context, PendingCall, Pid, Thread, ThreadState, Tid};
use super::Kernel;
use crate::kernel::syscalls::nr;
use crate::run::{EventKind, ExitStatus};

pub const CLONE_VM: u64 = 0x100;
pub const CLONE_FS: u64 = 0x200;
pub const CLONE_FILES: u64 = 0x400;
pub const CLONE_SIGHAND: u64 = 0x800;
pub const CLONE_VFORK: u64 = 0x4000;
pub const CLONE_THREAD: u64 = 0x10000;
pub const CLONE_SYSVSEM: u64 = 0x40000;
pub const CLONE_SETTLS: u64 = 0x80000;
pub const CLONE_PARENT_SETTID: u64 = 0x10_0000;
pub const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
pub const CLONE_DETACHED: u64 = 0x40_0000;
pub const CLONE_CHILD_SETTID: u64 = 0x100_0000;
/// Flags a thread-creating clone may carry.
const THREAD_FLAGS: u64 = CLONE_VM
    | CLONE_FS
    | CLONE_FILES
    | CLONE_SIGHAND
    | CLONE_THREAD
    | CLONE_SYSVSEM
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_CLEARTID
    | CLONE_DETACHED
    | CLONE_CHILD_SETTID;
/// The low byte of clone's flags is the exit signal.
pub(super) const CSIGNAL: u64 = 0xff;

const ARCH_SET_GS: u64 = 0x1001;
const ARCH_SET_FS: u64 = 0x1002;
const ARCH_GET_FS: u64 = 0x1003;
const ARCH_GET_GS: u64 = 0x1004;

pub(super) struct CloneArgs {
    pub flags: u64,
    pub stack: u64,
    pub parent_tid: u64,
    pub child_tid: u64,
    pub tls: u64,
}

/// Most threads a run may hold at once (as RLIMIT_NPROC would): a clone
/// past it fails with EAGAIN, which bounds the monitor's memory for their
/// state (each keeps its registers and a 4 KiB extended-state image).
pub const MAX_THREADS: usize = 8192;

impl Kernel<'_> {
    fn clone_thread(&mut self, c: CloneArgs) -> SysResult<u64> {
        let f = c.flags & !CSIGNAL;
        let thread = CLONE_VM | CLONE_SIGHAND | CLONE_THREAD;
        if f & thread != thread {
            return Err(EINVAL);
        }
        if f & !THREAD_FLAGS != 0 {
            return Err(EINVAL);
        }
        if self.threads.len() >= MAX_THREADS {
            return Err(EAGAIN);
        }
        let tid = self.alloc_id();
        let pid = self.cur_pid();
        if f & CLONE_PARENT_SETTID != 0 {
            self.write_u32(c.parent_tid, tid)?;
        }
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
        let ctx = Context {
            regs,
            fs_base,
            gs_base: self.m.gs_base(),
            xstate: self.m.save_xstate().map_err(|e| self.engine_failure(e))?,
        };
        let signals = self.cur_thread().signals.for_new_thread();
        let name = self.cur_thread().name.clone();
        let t = Thread {
            tid,
            pid,
            ctx: Some(ctx),
            state: ThreadState::Runnable,
            clear_child_tid: if f & CLONE_CHILD_CLEARTID != 0 {
                c.child_tid
            } else {
                0
            },
            robust_list: 0,
            signals,
            pending_call: None,
            name,
        };
        self.threads.insert(tid, t);
        self.cur_proc().threads.push(tid);
        let tls = if f & CLONE_SETTLS != 0 { c.tls } else { 0 };
        let parent = self.cur_tid();
        self.points_clone(parent, tid, pid, tls);
        if f & CLONE_CHILD_SETTID != 0 {
            // Same address space: writing it now is what the child would see.
            self.write_u32(c.child_tid, tid)?;
        }
        self.sched.runq.push_back(tid);
        let parent = self.cur_tid();
        self.emit_for(tid, EventKind::ThreadStart { parent });
        Ok(tid as u64)
    }

    /// Ends one thread. The process ends with it when it was the last.
    pub fn exit_thread(&mut self, tid: Tid, code: i32) {
        let Some(t) = self.threads.get(&tid) else {
            return;
        };
        let (pid, ctid) = (t.pid, t.clear_child_tid);
        if ctid != 0 {
            self.race_exit(tid);
        }
        if ctid != 0 && tid == self.cur_tid() {
            // A bad pointer here is the thread's problem, not the monitor's.
            if self.write_u32(ctid, 0).is_ok() {
                let _ = self.futex_wake(ctid, 1, super::futex::FUTEX_BITSET_MATCH_ANY);
            }
        }
        self.emit_for(tid, EventKind::ThreadExit { code });
        self.remove_thread(tid);
        let p = self.procs.get_mut(&pid).unwrap();
        p.threads.retain(|t| *t != tid);
        if p.threads.is_empty() {
            self.exit_process(pid, ExitStatus::Exited(code & 0xff));
        }
    }

    pub(super) fn remove_thread(&mut self, tid: Tid) {
        self.points_forget(tid);
        if let Some(t) = self.threads.remove(&tid) {
            self.names.insert(tid, t.name.clone());
            if let ThreadState::Blocked { wait, deadline } = t.state {
                if let super::task::Wait::Futex { key, .. } = wait {
                    self.futexes.remove(key, tid);
                }
                if let Some(d) = deadline {
                    self.sched.timers.remove(&(d, tid));
                }
            }
        }
        self.sched.runq.retain(|t| *t != tid);
    }

    /// Ends a whole process: every thread, then its resources; its parent
    /// learns of it (`process::Kernel::process_ended`). The first process
    /// ending ends the run.
    pub fn exit_process(&mut self, pid: Pid, status: ExitStatus) {
        let Some(p) = self.procs.get(&pid) else {
            return;
        };
        let tids = p.threads.clone();
        let last = tids.last().copied().unwrap_or(pid);
        for tid in tids {
            self.remove_thread(tid);
        }
        self.rec_process_exit(pid, last, status);
        self.sched.itimers.retain(|(p, _), _| *p != pid);
        self.sched.posix.forget_process(pid);
        let mut p = self.procs.remove(&pid).unwrap();
        p.mm.release(&mut self.m.ram);
        self.collect_shared();
        self.vfs.close_table(&mut p.files);
        // Its record locks go with it, as with the close of its descriptors.
        let owner = super::fs::locks::Owner::Process(pid);
        self.vfs.locks.drop_owner(owner, None);
        self.points_forget_process(pid);
        if pid == super::FIRST_PID {
            self.finish(status);
            return;
        }
        // Its page tables' frames will be reused: drop the translations KVM cached.
        if let Err(e) = self.m.flush_tlb() {
            self.engine_failure(e);
        }
        self.process_ended(p, status);
    }

    fn rec_process_exit(&mut self, pid: Pid, tid: Tid, status: ExitStatus) {
        self.rec_event(pid, tid, EventKind::ProcessExit { status });
    }
}

impl Kernel<'_> {
    /// A thread (CLONE_THREAD) or a process (fork, vfork, posix_spawn).
    fn clone_any(&mut self, c: CloneArgs, call: PendingCall) -> SysResult<Sys> {
        if c.flags & CLONE_THREAD != 0 {
            self.clone_thread(c).map(Sys::Ret)
        } else {
            self.fork_process(c, call)
        }
    }
}

/// Clone implements Linux syscall clone(2).
/// Partial (clone): a new process gets a copy of its parent's memory, CLONE_VM without CLONE_THREAD only with CLONE_VFORK (vfork, posix_spawn); namespaces, pidfds and CLONE_FILES/CLONE_FS between processes get EINVAL.
pub fn sys_clone(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let call = PendingCall {
        nr: nr::clone,
        args: a,
    };
    k.clone_any(
        CloneArgs {
            flags: a[0],
            stack: a[1],
            parent_tid: a[2],
            child_tid: a[3],
            tls: a[4],
        },
        call,
    )
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct CloneArgs3 {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
}

/// Where `set_tid_size` ends in clone_args (CLONE_ARGS_SIZE_VER1).
const SET_TID_SIZE_END: u64 = 80;

/// Clone3 implements Linux syscall clone3(2).
/// Partial (clone3): as clone; no pidfds, set_tid or cgroups (EINVAL).
pub fn sys_clone3(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    if (a[1] as usize) < std::mem::size_of::<CloneArgs3>() {
        return Err(EINVAL);
    }
    let c: CloneArgs3 = k.read_struct(a[0])?;
    // Version 1 of clone_args adds set_tid, which is not served: refused as
    // Linux refuses what it does not support, never silently ignored.
    if a[1] >= SET_TID_SIZE_END
        && k.read_u64(a[0].checked_add(SET_TID_SIZE_END - 8).ok_or(EFAULT)?)? != 0
    {
        return Err(EINVAL);
    }
    if c.exit_signal > CSIGNAL {
        return Err(EINVAL);
    }
    let call = PendingCall {
        nr: nr::clone3,
        args: a,
    };
    k.clone_any(
        CloneArgs {
            flags: c.flags | (c.exit_signal & CSIGNAL),
            stack: if c.stack == 0 {
                0
            } else {
                c.stack.checked_add(c.stack_size).ok_or(EINVAL)?
            },
            parent_tid: c.parent_tid,
            child_tid: c.child_tid,
            tls: c.tls,
        },
        call,
    )
}

/// Exit implements Linux syscall exit(2).
pub fn sys_exit(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let tid = k.cur_tid();
    k.exit_thread(tid, a[0] as i32);
    Ok(Sys::NoReturn)
}

/// ExitGroup implements Linux syscall exit_group(2).
pub fn sys_exit_group(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let pid = k.cur_pid();
    k.exit_process(pid, ExitStatus::Exited(a[0] as i32 & 0xff));
    Ok(Sys::NoReturn)
}

/// SetTidAddress implements Linux syscall set_tid_address(2).
pub fn sys_set_tid_address(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    k.cur_thread().clear_child_tid = a[0];
    Ok(k.cur_tid() as u64)
}

/// Size of `struct robust_list_head`.
const ROBUST_LIST_HEAD_SIZE: u64 = 24;

/// SetRobustList implements Linux syscall set_robust_list(2).
pub fn sys_set_robust_list(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    if a[1] != ROBUST_LIST_HEAD_SIZE {
        return Err(EINVAL);
    }
    k.cur_thread().robust_list = a[0];
    Ok(0)
}

/// GetRobustList implements Linux syscall get_robust_list(2).
pub fn sys_get_robust_list(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let tid = if a[0] == 0 { k.cur_tid() } else { a[0] as Tid };
    let head = k.threads.get(&tid).ok_or(ESRCH)?.robust_list;
    k.write_u64(a[1], head)?;
    k.write_u64(a[2], ROBUST_LIST_HEAD_SIZE)?;
    Ok(0)
}

/// ArchPrctl implements Linux syscall arch_prctl(2).
pub fn sys_arch_prctl(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (fs, gs) = (k.m.fs_base(), k.m.gs_base());
    match a[0] {
        ARCH_SET_FS | ARCH_SET_GS => {
            if a[1] >= crate::machine::layout::USER_END {
                return Err(EPERM);
            }
            if a[0] == ARCH_SET_FS {
                k.m.set_segment_bases(a[1], gs);
            } else {
                k.m.set_segment_bases(fs, a[1]);
            }
            Ok(0)
        }
        ARCH_GET_FS => k.write_u64(a[1], fs).map(|_| 0),
        ARCH_GET_GS => k.write_u64(a[1], gs).map(|_| 0),
        _ => Err(EINVAL),
    }
}
