//! Serving a system call: the table's row for its number, its handler, and
//! the event that records it (ENOSYS for a call the table marks missing or
//! a number no call has).

use super::super::errno::*;
use super::super::sched::Sys;
use super::super::task::PendingCall;
use super::super::{render, Kernel};
use super::row::Handler;
use super::{name, nr, served};
use crate::run::EventKind;

/// Calls that write to their first argument's file (for the single-writer
/// property).
const WRITES_TO_FD: [u32; 5] = [
    nr::write,
    nr::pwrite64,
    nr::writev,
    nr::pwritev,
    nr::pwritev2,
];

impl Kernel<'_> {
    /// Serves the system call the current thread just made.
    pub(in crate::kernel) fn syscall(&mut self) {
        let r = self.m.regs();
        let args = [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9];
        let tid = self.cur_tid();
        let nr = u32::try_from(r.rax).unwrap_or(u32::MAX);
        let call = PendingCall { nr, args };
        self.sched.note_call(nr);
        let Some((def, handler)) = served(nr) else {
            let ret = -(ENOSYS.0 as i64);
            self.m.regs_mut().rax = ret as u64;
            let text = format!(
                "{}({:#x}, {:#x}, {:#x}, ...)",
                name(nr),
                args[0],
                args[1],
                args[2]
            );
            self.emit(EventKind::Syscall {
                nr,
                name: name(nr).to_string(),
                text: render::with_result(&text, ret),
                ret,
            });
            return;
        };
        if def.noreturn {
            let text = render::call_text(self, tid, call);
            self.emit(EventKind::Syscall {
                nr,
                name: def.name.to_string(),
                text,
                ret: 0,
            });
        }
        self.note_caller_signals();
        let result = match handler {
            Handler::Simple(f) => f(self, args).map(Sys::Ret),
            Handler::Blocking(f) => f(self, args),
        };
        let ret = match result {
            Ok(Sys::Ret(v)) => v as i64,
            Err(e) => -(e.0 as i64),
            Ok(Sys::Blocked) | Ok(Sys::NoReturn) => return,
        };
        self.call_sigmask_done(tid);
        self.set_rax(tid, ret as u64);
        if ret > 0 && WRITES_TO_FD.contains(&nr) {
            self.note_file_write(args[0]);
        }
        let mut text = render::call_text_with(self, tid, call, Some(ret));
        render::push_result(&mut text, ret);
        self.emit(EventKind::Syscall {
            nr,
            name: def.name.to_string(),
            text,
            ret,
        });
    }
}
