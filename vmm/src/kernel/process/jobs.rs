//! Job control and process groups: stops and continues, and getpgid,
//! setpgid, getsid and setsid.

use super::*;
use crate::kernel::signal::{SigInfo, SIGCHLD};
use crate::kernel::task::{JobReport, Pid, ThreadState, Tid};
use crate::kernel::Kernel;

impl Kernel<'_> {
    /// A stop signal's default action: no thread of the process runs until
    /// a SIGCONT; its parent can see it with WUNTRACED, and gets SIGCHLD
    /// (CLD_STOPPED) unless it set SA_NOCLDSTOP.
    pub(in crate::kernel) fn stop_process(&mut self, pid: Pid, sig: i32) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if p.stopped.is_some() {
            return;
        }
        p.stopped = Some(sig);
        p.report = Some(JobReport::Stopped(sig));
        let (ppid, tids) = (p.ppid, p.threads.clone());
        self.sched.runq.retain(|t| !tids.contains(t));
        self.job_changed(pid, ppid, CLD_STOPPED, sig);
    }

    /// SIGCONT, when it is sent: a stopped process runs again (its
    /// runnable threads queue), and its parent can see it with WCONTINUED.
    pub(in crate::kernel) fn continue_process(&mut self, pid: Pid) {
        let Some(p) = self.procs.get_mut(&pid) else {
            return;
        };
        if p.stopped.take().is_none() {
            return;
        }
        p.report = Some(JobReport::Continued);
        let (ppid, tids) = (p.ppid, p.threads.clone());
        for t in tids {
            let runnable = self
                .threads
                .get(&t)
                .is_some_and(|x| x.state == ThreadState::Runnable);
            if runnable && t != self.sched.current && !self.sched.runq.contains(&t) {
                self.sched.runq.push_back(t);
            }
        }
        self.job_changed(pid, ppid, CLD_CONTINUED, crate::kernel::signal::SIGCONT);
    }

    /// Whether a thread may take the CPU: runnable, in a process not stopped.
    pub fn can_run(&self, tid: Tid) -> bool {
        self.threads.get(&tid).is_some_and(|t| {
            t.state == ThreadState::Runnable
                && self.procs.get(&t.pid).is_none_or(|p| p.stopped.is_none())
        })
    }

    /// Tells the parent of a stop or continue: its waits look again, and
    /// SIGCHLD comes unless it set SA_NOCLDSTOP.
    fn job_changed(&mut self, pid: Pid, ppid: Pid, code: i32, status: i32) {
        self.child_changed(ppid);
        let Some(parent) = self.procs.get(&ppid) else {
            return;
        };
        if parent.signals.actions[(SIGCHLD - 1) as usize].flags & SA_NOCLDSTOP != 0 {
            return;
        }
        let info = SigInfo {
            value: status as u32 as u64,
            ..SigInfo::sent(SIGCHLD, code, pid)
        };
        self.send_signal(crate::kernel::signal::Target::Process(ppid), info);
    }
}

/// A pid argument: 0 is the caller; another is a live process or ESRCH.
fn target_pid(k: &mut Kernel, pid: u64) -> SysResult<Pid> {
    match pid as i32 {
        0 => Ok(k.cur_pid()),
        p if p > 0
            && (k.procs.contains_key(&(p as Pid)) || k.zombies.contains_key(&(p as Pid))) =>
        {
            Ok(p as Pid)
        }
        p if p < 0 => Err(EINVAL),
        _ => Err(ESRCH),
    }
}

/// The process group and session of a live process or a zombie.
fn group_of(k: &Kernel, pid: Pid) -> (Pid, Pid) {
    match (k.procs.get(&pid), k.zombies.get(&pid)) {
        (Some(p), _) => (p.pgid, p.sid),
        (None, Some(z)) => (z.pgid, z.sid),
        _ => (0, 0),
    }
}

/// Getpgid implements Linux syscall getpgid(2).
pub fn sys_getpgid(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let pid = target_pid(k, a[0]).map_err(|_| ESRCH)?;
    Ok(group_of(k, pid).0 as u64)
}

/// Getpgrp implements Linux syscall getpgrp(2).
pub fn sys_getpgrp(k: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    Ok(k.cur_proc().pgid as u64)
}

/// Getsid implements Linux syscall getsid(2).
pub fn sys_getsid(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let pid = target_pid(k, a[0]).map_err(|_| ESRCH)?;
    Ok(group_of(k, pid).1 as u64)
}

/// Setpgid implements Linux syscall setpgid(2).
pub fn sys_setpgid(k: &mut Kernel, a: [u64; 6]) -> SysResult<u64> {
    let me = k.cur_pid();
    if (a[1] as i32) < 0 {
        return Err(EINVAL);
    }
    let pid = match a[0] as i32 {
        0 => me,
        p if p > 0 => p as Pid,
        _ => return Err(EINVAL),
    };
    let pgid = match a[1] as i32 {
        0 => pid,
        g => g as Pid,
    };
    let my_sid = k.procs[&me].sid;
    let p = k.procs.get(&pid).ok_or(ESRCH)?;
    if pid != me && p.ppid != me {
        return Err(ESRCH);
    }
    if pid != me && p.execed {
        return Err(EACCES);
    }
    if p.sid != my_sid {
        return Err(EPERM);
    }
    if p.sid == pid {
        // A session leader stays in its own group.
        return Err(EPERM);
    }
    if pgid != pid && !k.procs.values().any(|q| q.pgid == pgid && q.sid == my_sid) {
        return Err(EPERM);
    }
    k.procs.get_mut(&pid).unwrap().pgid = pgid;
    Ok(0)
}

/// Setsid implements Linux syscall setsid(2).
pub fn sys_setsid(k: &mut Kernel, _: [u64; 6]) -> SysResult<u64> {
    let me = k.cur_pid();
    if k.procs.values().any(|q| q.pgid == me) || k.zombies.values().any(|z| z.pgid == me) {
        return Err(EPERM);
    }
    let p = k.cur_proc();
    p.pgid = me;
    p.sid = me;
    Ok(me as u64)
}
