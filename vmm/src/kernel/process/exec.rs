//! execve and execveat: ELF executables and `#!` scripts replacing a
//! process's program.

use super::*;
use crate::kernel::elf::thread_name;
use crate::kernel::sched::Sys;
use crate::kernel::signal::{SigAction, SIG_IGN};
use crate::kernel::syscalls::nr;
use crate::kernel::task::{PendingCall, ThreadState, Tid, Wait};
use crate::kernel::Kernel;
use crate::run::{EventKind, ExitStatus};

impl Kernel<'_> {
    /// execve and execveat: the new program replaces the process's memory,
    /// threads, close-on-exec descriptors and handled signals.
    fn exec(&mut self, call: PendingCall) -> SysResult<Sys> {
        let a = call.args;
        let (dirfd, path, argv, envp, flags) = match call.nr {
            nr::execveat => (a[0], a[1], a[2], a[3], a[4]),
            _ => (AT_FDCWD, a[0], a[1], a[2], 0),
        };
        if flags & !(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH) != 0 {
            return Err(EINVAL);
        }
        let name = self.read_cstr(path, crate::kernel::uaccess::PATH_MAX)?;
        let name = String::from_utf8(name).map_err(|_| ENOENT)?;
        let mut args = self.read_strings(argv)?;
        let env = self.read_strings(envp)?;
        if args.iter().chain(&env).map(|s| s.len() + 1).sum::<usize>() > ARG_MAX {
            return Err(E2BIG);
        }
        let follow = flags & AT_SYMLINK_NOFOLLOW == 0;
        let mut file = name.clone();
        // What the new program and a script's interpreter are told the
        // file is: a path relative to a descriptor is named through it.
        let name = match (dirfd, name.starts_with('/')) {
            (AT_FDCWD, _) | (_, true) => name,
            _ if name.is_empty() => format!("/dev/fd/{}", dirfd as i32),
            _ => format!("/dev/fd/{}/{name}", dirfd as i32),
        };
        let mut at = dirfd;
        for depth in 0..=MAX_INTERP_DEPTH {
            let first = depth == 0;
            let bytes =
                self.executable(at, &file, follow || !first, if first { flags } else { 0 })?;
            let Some((interp, arg)) = interpreter(&bytes)? else {
                return self.exec_binary(call, &bytes, &name, &file, args, env);
            };
            // argv[0] gives way to the interpreter, its argument and the script's path.
            let mut new = vec![interp.clone()];
            new.extend(arg);
            new.push(if first { name.clone() } else { file.clone() });
            new.extend(args.into_iter().skip(1));
            args = new;
            file = interp;
            at = AT_FDCWD;
        }
        Err(ELOOP)
    }

    /// The bytes of an executable regular file; EACCES when it is not one.
    fn executable(
        &mut self,
        dirfd: u64,
        path: &str,
        follow: bool,
        flags: u64,
    ) -> SysResult<std::sync::Arc<crate::kernel::fs::vfs::FileBytes>> {
        let ino = if path.is_empty() {
            if flags & AT_EMPTY_PATH == 0 {
                return Err(ENOENT);
            }
            let (_, d) = self.desc(dirfd)?;
            d.ino().ok_or(EACCES)?
        } else {
            self.lookup_at(dirfd, path, follow)?
        };
        let node = self.vfs.tree.node(ino)?;
        if node.is_dir() {
            return Err(EACCES);
        }
        if node.file_type() != crate::kernel::fs::vfs::S_IFREG || node.mode & 0o111 == 0 {
            return Err(EACCES);
        }
        self.file_data(ino)
    }

    /// A NULL-terminated array of strings in user memory (argv, envp).
    fn read_strings(&mut self, at: u64) -> SysResult<Vec<String>> {
        let mut out = Vec::new();
        if at == 0 {
            return Ok(out);
        }
        let mut total = 0usize;
        loop {
            let p = self.read_u64(at.wrapping_add(out.len() as u64 * 8))?;
            if p == 0 {
                return Ok(out);
            }
            if out.len() >= ARG_COUNT_MAX {
                return Err(E2BIG);
            }
            let s = self.read_cstr(p, ARG_MAX - total)?;
            total += s.len() + 1;
            if total > ARG_MAX {
                return Err(E2BIG);
            }
            out.push(String::from_utf8_lossy(&s).into_owned());
        }
    }

    /// Replaces the current process's program with the ELF `bytes`.
    fn exec_binary(
        &mut self,
        call: PendingCall,
        bytes: &[u8],
        name: &str,
        file: &str,
        argv: Vec<String>,
        env: Vec<String>,
    ) -> SysResult<Sys> {
        let tid = self.cur_tid();
        let text = crate::kernel::render::call_text_with(self, tid, call, Some(0));
        let cwd = self.cur_proc().cwd.clone();
        let exe = self.exe_path(&crate::kernel::fs::vfs::resolve::normalize(
            &cwd,
            if file.is_empty() { name } else { file },
        ));
        // The name it was called by, as Linux's comm (a script's, not its
        // interpreter's); the file's own for an execveat of a bare descriptor.
        let bare_fd = name
            .strip_prefix("/dev/fd/")
            .is_some_and(|n| !n.contains('/'));
        let comm = if bare_fd { exe.as_str() } else { name };
        crate::kernel::elf::check(bytes).map_err(|e| e.errno())?;
        self.exec_commit(&exe, comm);
        self.cur_proc().argv.clone_from(&argv);
        self.cur_proc().env.clone_from(&env);
        let r = self
            .load_executable(&exe, bytes)
            .map_err(|e| e.errno())
            .and_then(|loaded| self.start_program(&loaded, &argv, &env, name));
        let tid = self.cur_tid();
        match r {
            Ok(_) => {
                self.emit_for(
                    tid,
                    EventKind::Syscall {
                        nr: call.nr,
                        name: crate::kernel::syscalls::name(call.nr).to_string(),
                        text: crate::kernel::render::with_result(&text, 0),
                        ret: 0,
                    },
                );
                Ok(Sys::NoReturn)
            }
            Err(_) => {
                // Past the point of no return: the old program is gone.
                let pid = self.cur_pid();
                self.exit_process(pid, ExitStatus::Killed(crate::kernel::signal::SIGSEGV));
                Ok(Sys::NoReturn)
            }
        }
    }

    /// Where the links of the absolute `path` lead: what `/proc/PID/exe`
    /// names (the program file itself); `path` when it does not resolve.
    pub(in crate::kernel) fn exe_path(&mut self, path: &str) -> String {
        match self.resolve_from(crate::kernel::fs::vfs::ROOT_INO, path, true) {
            Ok(r) if r.ino.is_some() => self.path_of(r.parent, &r.name),
            _ => path.to_string(),
        }
    }

    /// The point of no return of execve: the other threads end, the address
    /// space is a new empty one, POSIX timers are deleted, close-on-exec
    /// descriptors close, handled signals go back to their default, the
    /// vfork parent goes on.
    fn exec_commit(&mut self, exe: &str, comm: &str) {
        let pid = self.cur_pid();
        let me = self.cur_tid();
        let others: Vec<Tid> = self.procs[&pid]
            .threads
            .iter()
            .copied()
            .filter(|t| *t != me)
            .collect();
        for t in others {
            self.emit_for(t, EventKind::ThreadExit { code: 0 });
            self.remove_thread(t);
        }
        if me != pid {
            // A thread other than the leader execs: it takes the leader's id, as on Linux.
            self.points_forget(me);
            let mut t = self.threads.remove(&me).expect("current thread");
            self.names.insert(me, t.name.clone());
            t.tid = pid;
            self.threads.insert(pid, t);
            self.sched.current = pid;
            self.sched.runq.retain(|x| *x != me);
        }
        self.points_forget_process(pid);
        self.sched.posix.forget_process(pid);
        let new = crate::kernel::mm::Mm::new(&mut self.m.ram);
        let p = self.procs.get_mut(&pid).unwrap();
        p.threads = vec![pid];
        if let Some(new) = new {
            let mut old = std::mem::replace(&mut p.mm, new);
            old.release(&mut self.m.ram);
        } else {
            // Out of guest memory: the load that follows fails and kills the process.
            let end = crate::machine::layout::USER_END;
            p.mm.unmap_range(&mut self.m.ram, 0, end);
        }
        self.collect_shared();
        let p = self.procs.get_mut(&pid).unwrap();
        let closing: Vec<i32> = p
            .files
            .fds
            .iter()
            .filter(|(_, f)| f.cloexec)
            .map(|(n, _)| *n)
            .collect();
        let mut released = Vec::new();
        for n in closing {
            if let Some(fd) = p.files.fds.remove(&n) {
                released.push(fd.desc);
            }
        }
        for a in p.signals.actions.iter_mut() {
            *a = if a.handler == SIG_IGN {
                SigAction {
                    handler: SIG_IGN,
                    ..Default::default()
                }
            } else {
                SigAction::default()
            };
        }
        p.exe = exe.to_string();
        p.execed = true;
        let vfork = p.vfork_parent.take();
        for d in released {
            self.vfs.release(d);
        }
        let t = self.cur_thread();
        t.name = thread_name(comm);
        t.clear_child_tid = 0;
        t.robust_list = 0;
        t.signals.altstack = Default::default();
        t.signals.saved_mask = None;
        if let Err(e) = self.m.flush_tlb() {
            self.engine_failure(e);
        }
        if let Some(t) = vfork {
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
                self.wake(t, Ok(pid as u64));
            }
        }
    }
}

/// A `#!` script's interpreter and its one optional argument; None when
/// `bytes` is not a script. ENOEXEC for an empty or too long interpreter
/// line, as Linux.
pub(in crate::kernel) fn interpreter(bytes: &[u8]) -> SysResult<Option<(String, Option<String>)>> {
    if !bytes.starts_with(b"#!") {
        return Ok(None);
    }
    let head = &bytes[2..bytes.len().min(INTERP_LINE_MAX)];
    let line = match head.iter().position(|b| *b == b'\n') {
        Some(n) => &head[..n],
        None => head,
    };
    let line = String::from_utf8_lossy(line);
    let line = line.trim_matches(|c| c == ' ' || c == '\t');
    let mut parts = line.splitn(2, [' ', '\t']);
    let interp = parts.next().unwrap_or("").to_string();
    if interp.is_empty() {
        return Err(ENOEXEC);
    }
    let no_newline = !head.contains(&b'\n') && bytes.len() >= INTERP_LINE_MAX;
    if no_newline && parts.clone().next().is_none() {
        // The interpreter's name may go on past what Linux reads.
        return Err(ENOEXEC);
    }
    let arg = parts
        .next()
        .map(|a| a.trim_matches(|c| c == ' ' || c == '\t').to_string())
        .filter(|a| !a.is_empty());
    Ok(Some((interp, arg)))
}

/// Execve implements Linux syscall execve(2).
/// Partial (execve): ELF executables and `#!` scripts; a dynamic one whose interpreter is not in the image is killed (SIGSEGV) past the point of no return.
pub fn sys_execve(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    k.exec(PendingCall {
        nr: nr::execve,
        args: a,
    })
}

/// Execveat implements Linux syscall execveat(2).
/// Partial (execveat): ELF executables and `#!` scripts; a dynamic one whose interpreter is not in the image is killed (SIGSEGV) past the point of no return.
pub fn sys_execveat(k: &mut Kernel, a: [u64; 6]) -> SysResult<Sys> {
    k.exec(PendingCall {
        nr: nr::execveat,
        args: a,
    })
}
