//! A terminal wired to a run at a step (the engine's part of `rewind
//! shell`; the kernel's part, the process it starts, is
//! `kernel::inject`): the run is restored
//! there, its processes stop, and a shell runs beside them with a terminal
//! outside the machine as its standard input, output and error. Nothing is
//! recorded and nothing is written to the store: the run stays untouched.

use crate::inspect::{seek, SeekError};
use crate::kernel::inject::{ShellError, ShellSpec};
use crate::run::keyframe::Keyframe;
use crate::run::{Event, ExitStatus, Limits, Recorder, RunInputs};
use crate::store::pages::PageStore;
use std::cell::Cell;
use std::rc::Rc;

/// The terminal outside the machine.
pub trait Terminal {
    /// Waits for input; empty at its end.
    fn read(&mut self) -> Vec<u8>;
    /// What the shell wrote to its standard output (1) or error (2).
    fn write(&mut self, fd: i32, bytes: &[u8]);
    /// The shell, process `pid`, has started.
    fn started(&mut self, _pid: u32) {}
}

/// The kernel's recorder: silent while the run is seeked to the step (so
/// that the seek is the recording's own), the terminal once the shell runs.
struct Wired<'t> {
    /// The shell's pid, once it runs.
    shell: Rc<Cell<Option<u32>>>,
    announced: bool,
    term: &'t mut dyn Terminal,
}

impl Wired<'_> {
    /// Whether the shell runs; the terminal hears of it first.
    fn live(&mut self) -> bool {
        let Some(pid) = self.shell.get() else {
            return false;
        };
        if !std::mem::replace(&mut self.announced, true) {
            self.term.started(pid);
        }
        true
    }
}

impl Recorder for Wired<'_> {
    fn event(&mut self, _: &Event) {}
    fn output(&mut self, fd: i32, bytes: &[u8]) {
        if self.live() {
            self.term.write(fd, bytes);
        }
    }
    fn more_input(&mut self) -> Option<Vec<u8>> {
        self.live().then(|| self.term.read())
    }
}

/// Restores `inputs` at `step` (from `keyframe`, as `inspect::at_step`
/// takes it), starts `spec`'s shell there and runs it with `term` until it
/// ends; its status.
pub fn shell_at(
    inputs: &RunInputs,
    keyframe: Option<(&Keyframe, bool)>,
    pages: &PageStore,
    step: u64,
    spec: &ShellSpec,
    term: &mut dyn Terminal,
) -> Result<ExitStatus, ShellError> {
    let shell = Rc::new(Cell::new(None));
    let mut rec = Wired {
        shell: shell.clone(),
        announced: false,
        term,
    };
    let mut k =
        seek(inputs, keyframe, pages, step, &Limits::default(), &mut rec).map_err(|e| match e {
            SeekError::Ended(at) => ShellError::Ended(at),
            SeekError::Engine(e) => ShellError::Engine(e),
        })?;
    let pid = k.start_shell(spec)?;
    shell.set(Some(pid));
    Ok(k.run_until_ended(pid)?)
}
