//! The signal system calls: rt_sigaction, rt_sigprocmask, rt_sigreturn,
//! kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, sigaltstack,
//! rt_sigpending, pause, rt_sigsuspend, rt_sigtimedwait. Delivery, queues
//! and the kinds of signals are in `signal.rs`, frames in `frame.rs`.

use super::*;
use crate::kernel::syscalls::nr;

/// RtSigaction implements Linux syscall rt_sigaction(2).
pub fn sys_rt_sigaction(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (sig, act, old, size) = (a[0] as i32, a[1], a[2], a[3]);
    if !valid_signal(sig) || size != 8 {
        return Err(EINVAL);
    }
    let new = if act != 0 {
        if sig == SIGKILL || sig == SIGSTOP {
            return Err(EINVAL);
        }
        let mut n = k.read_struct::<SigAction>(act)?;
        n.mask &= !UNBLOCKABLE;
        Some(n)
    } else {
        None
    };
    let cur = k.cur_proc().signals.actions[(sig - 1) as usize];
    if old != 0 {
        k.write_struct(old, &cur)?;
    }
    if let Some(n) = new {
        k.cur_proc().signals.actions[(sig - 1) as usize] = n;
        if n.ignores(sig) {
            let pid = k.cur_pid();
            k.discard_pending(pid, &[sig]);
        }
    }
    Ok(0)
}

const SIG_BLOCK: u64 = 0;
const SIG_UNBLOCK: u64 = 1;
const SIG_SETMASK: u64 = 2;

/// RtSigprocmask implements Linux syscall rt_sigprocmask(2).
pub fn sys_rt_sigprocmask(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (how, set, old, size) = (a[0], a[1], a[2], a[3]);
    if size != 8 {
        return Err(EINVAL);
    }
    let cur = k.cur_thread().signals.mask;
    let new = if set != 0 {
        let s = k.read_u64(set)?;
        Some(match how {
            SIG_BLOCK => cur | s,
            SIG_UNBLOCK => cur & !s,
            SIG_SETMASK => s,
            _ => return Err(EINVAL),
        })
    } else {
        None
    };
    if old != 0 {
        k.write_u64(old, cur)?;
    }
    if let Some(n) = new {
        k.cur_thread().signals.mask = n & !UNBLOCKABLE;
    }
    Ok(0)
}

/// rt_sigreturn: back from a handler, to the state its frame holds.
/// RtSigreturn implements Linux syscall rt_sigreturn(2).
pub fn sys_rt_sigreturn(k: &mut Kernel, _: [u64; 6]) -> SysResult<Sys> {
    match k.restore_frame() {
        Ok(()) => {}
        Err(frame::FrameError::Fault) => k.force_signal(SigInfo::fault(SIGSEGV, SI_KERNEL, 0)),
        Err(frame::FrameError::Engine(e)) => {
            k.engine_failure(e);
        }
    }
    Ok(Sys::NoReturn)
}

/// The processes `kill(pid, ...)` names.
/// The processes kill(2) names: a pid (a zombie counts, and takes
/// nothing), the caller's group (0), a group (-pgid), or every process but
/// the caller (-1).
fn kill_targets(k: &Kernel, pid: i32) -> Vec<Pid> {
    let me = k.cur_pid();
    let group = |g: Pid| -> Vec<Pid> {
        let live = k.procs.values().filter(|p| p.pgid == g).map(|p| p.pid);
        let dead = k
            .zombies
            .iter()
            .filter(|(_, z)| z.pgid == g)
            .map(|(p, _)| *p);
        live.chain(dead).collect()
    };
    match pid {
        0 => group(k.procs[&me].pgid),
        -1 => k.procs.keys().copied().filter(|p| *p != me).collect(),
        p if p < -1 => group(p.unsigned_abs()),
        // A thread id names its process too, as on Linux.
        p => k
            .threads
            .get(&(p as Tid))
            .map(|t| t.pid)
            .or_else(|| k.zombies.contains_key(&(p as Pid)).then_some(p as Pid))
            .into_iter()
            .collect(),
    }
}

/// Kill implements Linux syscall kill(2).
pub fn sys_kill(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (pid, sig) = (a[0] as i32, a[1] as i32);
    if sig != 0 && !valid_signal(sig) {
        return Err(EINVAL);
    }
    let targets = kill_targets(k, pid);
    if targets.is_empty() {
        return Err(ESRCH);
    }
    if sig != 0 {
        let me = k.cur_pid();
        for p in targets {
            k.send_signal(Target::Process(p), SigInfo::sent(sig, SI_USER, me));
        }
    }
    Ok(0)
}

fn thread_kill(
    k: &mut Kernel,
    tgid: Option<i32>,
    tid: i32,
    sig: i32,
    info: Option<SigInfo>,
) -> SysResult<u64> {
    if tid <= 0 || tgid.is_some_and(|g| g <= 0) || (sig != 0 && !valid_signal(sig)) {
        return Err(EINVAL);
    }
    let t = k.threads.get(&(tid as Tid)).ok_or(ESRCH)?;
    if tgid.is_some_and(|g| g as Pid != t.pid) {
        return Err(ESRCH);
    }
    if sig != 0 {
        let me = k.cur_pid();
        let info = info.unwrap_or_else(|| SigInfo::sent(sig, SI_TKILL, me));
        k.send_signal(Target::Thread(tid as Tid), info);
    }
    Ok(0)
}

/// Tkill implements Linux syscall tkill(2).
pub fn sys_tkill(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    thread_kill(k, None, a[0] as i32, a[1] as i32, None)
}

/// Tgkill implements Linux syscall tgkill(2).
pub fn sys_tgkill(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    thread_kill(k, Some(a[0] as i32), a[1] as i32, a[2] as i32, None)
}

/// The siginfo a process hands to rt_sigqueueinfo: a process may only
/// pretend to be the kernel or kill() to itself.
fn user_siginfo(k: &mut Kernel, tgid: i32, sig: i32, uinfo: u64) -> SysResult<SigInfo> {
    let b = k.read_user(uinfo, 128)?;
    let word = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let code = word(8) as i32;
    if (code >= 0 || code == SI_TKILL) && tgid as Pid != k.cur_pid() {
        return Err(EPERM);
    }
    Ok(SigInfo {
        signo: sig,
        code,
        addr: u64::from_le_bytes(b[16..24].try_into().unwrap()),
        pid: word(16),
        uid: word(20),
        value: u64::from_le_bytes(b[24..32].try_into().unwrap()),
        trap: None,
    })
}

/// RtSigqueueinfo implements Linux syscall rt_sigqueueinfo(2).
pub fn sys_rt_sigqueueinfo(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (pid, sig) = (a[0] as i32, a[1] as i32);
    if !valid_signal(sig) {
        return Err(EINVAL);
    }
    let info = user_siginfo(k, pid, sig, a[2])?;
    if pid <= 0 {
        return Err(ESRCH);
    }
    let p = k.threads.get(&(pid as Tid)).map(|t| t.pid).ok_or(ESRCH)?;
    k.send_signal(Target::Process(p), info);
    Ok(0)
}

/// RtTgsigqueueinfo implements Linux syscall rt_tgsigqueueinfo(2).
pub fn sys_rt_tgsigqueueinfo(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (tgid, tid, sig) = (a[0] as i32, a[1] as i32, a[2] as i32);
    if !valid_signal(sig) {
        return Err(EINVAL);
    }
    let info = user_siginfo(k, tgid, sig, a[3])?;
    thread_kill(k, Some(tgid), tid, sig, Some(info))
}

/// `stack_t`: ss_sp, ss_flags (and 4 bytes of padding), ss_size.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct StackT {
    pub(super) sp: u64,
    pub(super) flags: i32,
    pub(super) pad: u32,
    pub(super) size: u64,
}

impl Kernel<'_> {
    /// Linux's do_sigaltstack: sets the current thread's alternate stack.
    pub(super) fn set_altstack(&mut self, new: StackT, sp: u64) -> SysResult<()> {
        let t = self.cur_thread();
        if t.signals.altstack.on(sp) {
            return Err(EPERM);
        }
        let mode = new.flags & !SS_FLAG_BITS;
        if mode != SS_DISABLE && mode != SS_ONSTACK && mode != 0 {
            return Err(EINVAL);
        }
        let (ssp, size) = if mode == SS_DISABLE {
            (0, 0)
        } else if new.size < MINSIGSTKSZ {
            return Err(ENOMEM);
        } else {
            (new.sp, new.size)
        };
        t.signals.altstack = AltStack {
            sp: ssp,
            size,
            flags: new.flags,
        };
        Ok(())
    }
}

/// Sigaltstack implements Linux syscall sigaltstack(2).
pub fn sys_sigaltstack(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let (uss, uoss) = (a[0], a[1]);
    let sp = k.m.regs().rsp;
    let alt = k.cur_thread().signals.altstack;
    let old = StackT {
        sp: alt.sp,
        flags: alt.flags_at(sp) | (alt.flags & SS_FLAG_BITS),
        pad: 0,
        size: alt.size,
    };
    if uss != 0 {
        let new: StackT = k.read_struct(uss)?;
        k.set_altstack(new, sp)?;
    }
    if uoss != 0 {
        k.write_struct(uoss, &old)?;
    }
    Ok(0)
}

/// RtSigpending implements Linux syscall rt_sigpending(2).
pub fn sys_rt_sigpending(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let size = a[1] as usize;
    if size > 8 {
        return Err(EINVAL);
    }
    let tid = k.cur_tid();
    let t = &k.threads[&tid];
    let pending = t
        .signals
        .pending
        .iter()
        .chain(k.procs[&t.pid].signals.shared.iter())
        .fold(0u64, |m, s| m | sig_bit(s.signo))
        & t.signals.mask;
    k.write_user(a[0], &pending.to_le_bytes()[..size])?;
    Ok(0)
}

/// Pause implements Linux syscall pause(2).
pub fn sys_pause(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let call = PendingCall {
        nr: nr::pause,
        args: a,
    };
    Ok(k.block(Wait::Signal, None, call))
}

/// RtSigsuspend implements Linux syscall rt_sigsuspend(2).
pub fn sys_rt_sigsuspend(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    if a[1] != 8 {
        return Err(EINVAL);
    }
    let mask = k.read_u64(a[0])?;
    let tid = k.cur_tid();
    let t = k.cur_thread();
    t.signals.saved_mask = Some(t.signals.mask);
    t.signals.mask = mask & !UNBLOCKABLE;
    let call = PendingCall {
        nr: nr::rt_sigsuspend,
        args: a,
    };
    if k.has_deliverable(tid) {
        return Ok(k.interrupted_now(call, Wait::Signal, None));
    }
    Ok(k.block(Wait::Signal, None, call))
}

/// RtSigtimedwait implements Linux syscall rt_sigtimedwait(2).
pub fn sys_rt_sigtimedwait(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    let (uset, uinfo, uts, size) = (a[0], a[1], a[2], a[3]);
    if size != 8 {
        return Err(EINVAL);
    }
    let set = k.read_u64(uset)? & !UNBLOCKABLE;
    let timeout = if uts != 0 {
        let ts: Timespec = k.read_struct(uts)?;
        Some(ts.to_ns().ok_or(EINVAL)?)
    } else {
        None
    };
    let call = PendingCall {
        nr: nr::rt_sigtimedwait,
        args: a,
    };
    if let Some(info) = k.take_waited(set) {
        if uinfo != 0 {
            k.write_user(uinfo, &info.to_bytes())?;
        }
        return Ok(Sys::Ret(info.signo as u64));
    }
    let tid = k.cur_tid();
    if k.has_deliverable(tid) {
        return Ok(k.interrupted_now(call, Wait::Signal, None));
    }
    if timeout == Some(0) {
        return Err(EAGAIN);
    }
    k.cur_thread().signals.waiting = set;
    let deadline = timeout.map(|ns| k.clock.now().saturating_add(ns));
    Ok(k.block(Wait::Signal, deadline, call))
}
