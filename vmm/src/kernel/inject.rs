//! A process injected into a run (the shell of `rewind shell`, wired to
//! its terminal by `crate::terminal`): at a step, every process of the
//! run stops as SIGSTOP would stop it, and a new process, a child of one of
//! them, runs a static program (busybox) with the terminal outside the
//! machine as its standard input, output and error. Nothing of it is
//! recorded: the run stays what it was.

use super::elf;
use super::fs::{Fd, FdTable, Target};
use super::mm::Mm;
use super::signal::{ProcessSignals, SIGCHLD, SIGSTOP};
use super::task::{Pid, Process, Thread};
use super::Kernel;
use crate::run::{EventKind, ExitStatus};
use crate::EngineError;

/// What the shell is.
pub struct ShellSpec {
    /// Whose child it is (its working directory, umask and limits); by
    /// default the process of the thread on the CPU.
    pub parent: Option<Pid>,
    /// The program: a static ELF, at this path of the tree (once `files`
    /// and `links` are in).
    pub program: String,
    pub argv: Vec<String>,
    pub env: ShellEnv,
    /// Host files put in the tree first: (guest path, host path).
    pub files: Vec<(String, std::path::PathBuf)>,
    /// Links put in the tree first: (guest path, target).
    pub links: Vec<(String, String)>,
}

/// The shell's environment: its parent's (what the parent's execve gave
/// it, or the run's), with PATH between `path_before` and `path_after`.
#[derive(Debug, Clone, Default)]
pub struct ShellEnv {
    pub path_before: Vec<String>,
    pub path_after: Vec<String>,
    /// Added last (PS1).
    pub extra: Vec<String>,
}

impl ShellEnv {
    /// The environment for a shell whose parent has `parent`.
    pub fn for_parent(&self, parent: &[String]) -> Vec<String> {
        let mut path = self.path_before.clone();
        let mut env = Vec::with_capacity(parent.len() + self.extra.len() + 1);
        for kv in parent {
            match kv.strip_prefix("PATH=") {
                Some(p) if !p.is_empty() => path.push(p.to_string()),
                Some(_) => {}
                None => env.push(kv.clone()),
            }
        }
        path.extend(self.path_after.iter().cloned());
        env.push(format!("PATH={}", path.join(":")));
        env.extend(self.extra.iter().cloned());
        env
    }
}

/// Why a shell cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error("there is no process {0} at this step")]
    NoProcess(Pid),
    #[error("{0}: {1}")]
    Program(String, String),
    #[error("the run ended at step {0}, before that step")]
    Ended(u64),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl Kernel<'_> {
    /// Stops every process, then starts the shell as a child of
    /// `spec.parent`, on the CPU. Returns its pid.
    pub fn start_shell(&mut self, spec: &ShellSpec) -> Result<Pid, ShellError> {
        let ppid = spec.parent.unwrap_or_else(|| self.cur_pid());
        let parent = self.procs.get(&ppid).ok_or(ShellError::NoProcess(ppid))?;
        let env = spec.env.for_parent(&parent.env);
        let (cwd, umask, rlimits, sid, pgid) = (
            parent.cwd.clone(),
            parent.umask,
            parent.rlimits,
            parent.sid,
            parent.pgid,
        );
        let path = &spec.program;
        let problem = |m: String| ShellError::Program(path.clone(), m);
        let now = self.fs_now();
        for (guest, host) in &spec.files {
            self.vfs.tree.add_host_file(guest, host, now);
        }
        for (guest, target) in &spec.links {
            self.vfs.tree.add_link(guest, target, now);
        }
        let bytes = self
            .lookup_at(super::fs::AT_FDCWD as u64, path, true)
            .and_then(|ino| self.file_data(ino))
            .map_err(|e| problem(format!("cannot read it ({})", e.name())))?;
        let bytes = &bytes[..];
        // Its libraries are not in the run's image.
        if let Some(interp) = elf::interpreter(bytes).map_err(|e| problem(e.to_string()))? {
            return Err(problem(format!(
                "dynamically linked (with {interp}): a static program is needed (Debian: busybox-static)"
            )));
        }
        let pids: Vec<Pid> = self.procs.keys().copied().collect();
        for pid in pids {
            self.stop_process(pid, SIGSTOP);
        }
        // The thread on the CPU keeps its registers, as at a switch.
        self.save_current()?;
        let mm = Mm::new(&mut self.m.ram).ok_or(EngineError::OutOfMemory)?;
        let pid = self.alloc_id();
        let start = self.vfs.stdin.len() as u64;
        let console = [
            (Target::Stdin, super::fs::O_RDONLY, "pipe:[0]"),
            (Target::Stdout, super::fs::O_WRONLY, "pipe:[1]"),
            (Target::Stderr, super::fs::O_WRONLY, "pipe:[2]"),
        ];
        let mut files = FdTable {
            fds: Default::default(),
        };
        for (fd, (target, flags, name)) in (0..).zip(console) {
            let desc = self.vfs.open_desc(target, flags, name.into());
            if fd == 0 {
                // Only what the terminal gives from now on.
                self.vfs.descs.get_mut(&desc).expect("just opened").offset = start;
            }
            files.fds.insert(
                fd,
                Fd {
                    desc,
                    cloexec: false,
                },
            );
        }
        self.procs.insert(
            pid,
            Process {
                pid,
                ppid,
                mm,
                files,
                signals: ProcessSignals::default(),
                threads: vec![pid],
                exe: path.clone(),
                cwd,
                umask,
                pgid,
                sid,
                exit_signal: SIGCHLD,
                pdeathsig: 0,
                execed: true,
                argv: spec.argv.clone(),
                env: env.clone(),
                nice: 0,
                strings: Default::default(),
                vfork_parent: None,
                rlimits,
                stopped: None,
                report: None,
                adopted: false,
            },
        );
        self.threads.insert(pid, Thread::first_of(pid, path));
        self.sched.current = pid;
        let loaded = self
            .load_executable(path, bytes)
            .map_err(|e| problem(e.to_string()))?;
        self.start_program(&loaded, &spec.argv, &env, path)
            .map_err(|_| EngineError::OutOfMemory)?;
        self.emit(EventKind::ThreadStart { parent: 0 });
        Ok(pid)
    }

    /// Runs until process `pid` has ended; its status then.
    pub fn run_until_ended(&mut self, pid: Pid) -> Result<ExitStatus, EngineError> {
        let trap = crate::machine::tsc::Trap::hold();
        loop {
            if let Some(z) = self.zombies.get(&pid) {
                return Ok(z.status);
            }
            if !self.procs.contains_key(&pid) || self.is_finished() {
                // Reaped, or the machine ended with it.
                return Ok(self.status.unwrap_or(ExitStatus::Exited(0)));
            }
            let exit = self.run_guest(&trap)?;
            if let crate::machine::Exit::Interrupted = exit {
                continue;
            }
            self.serve(exit);
            if let Some(e) = self.take_failure() {
                return Err(e);
            }
            let ended = self.zombies.contains_key(&pid) || !self.procs.contains_key(&pid);
            if !ended && !self.is_finished() && self.schedule_next().is_err() {
                return Ok(ExitStatus::Deadlocked);
            }
        }
    }
}

impl Kernel<'_> {
    /// Standard input has been read to its end: asks outside for more (a
    /// shell's terminal; a recorded run has none). Waiting for it passes
    /// on the virtual clock as it did outside: idle time in a shell is real.
    pub(crate) fn live_input(&mut self) {
        let asked = std::time::Instant::now();
        let Some(more) = self.rec.more_input() else {
            return;
        };
        std::sync::Arc::make_mut(&mut self.vfs.stdin).extend_from_slice(&more);
        let waited = u64::try_from(asked.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.clock
            .advance_to(self.clock.now().saturating_add(waited));
    }
}
