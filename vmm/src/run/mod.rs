//! What a run takes and gives: its inputs (the manifest, the image, standard
//! input), its host-side limits, what it records (events, keyframes and the
//! pages they name) and the sinks those go to, and how it ended. This is the
//! vocabulary the kernel shares with the layers above it (record, store,
//! check, the front ends): it sits below the kernel, so the kernel names
//! none of those layers. `record` and `session` re-export it.

pub mod event;
pub mod keyframe;
pub mod manifest;
pub mod pages;

pub use event::{signal_name, Access, Event, EventKind, ExitStatus, SdkKind};
pub use manifest::{ForkOf, Manifest, Pct, Perturbation, Perturbed, Points};

use crate::image::Image;
use crate::EngineError;
use std::time::Duration;

/// Everything a run is a function of.
#[derive(Debug, Clone)]
pub struct RunInputs {
    pub manifest: Manifest,
    pub image: Image,
    /// Standard input's bytes (empty when it was a terminal).
    pub stdin: Vec<u8>,
}

impl RunInputs {
    /// The inputs of a new run of `program` (a guest path inside `image`)
    /// with `argv`: the manifest's defaults (`Manifest::new`) with the
    /// image's hash, and no standard input. Front ends change the rest.
    pub fn new(image: Image, program: String, argv: Vec<String>) -> Result<RunInputs, EngineError> {
        let hash = image.hash()?;
        Ok(RunInputs::hashed(image, hash, program, argv))
    }

    /// [`RunInputs::new`] with the image's hash already known (a store's
    /// `image_hash`, which keeps a root's file hashes between runs).
    pub fn hashed(image: Image, hash: String, program: String, argv: Vec<String>) -> RunInputs {
        RunInputs {
            manifest: Manifest::new(program, argv, hash),
            image,
            stdin: Vec::new(),
        }
    }

    /// Makes `stdin` the run's standard input, its hash the manifest's (an
    /// input: it is part of the run's id).
    pub fn set_stdin(&mut self, stdin: Vec<u8>) {
        self.manifest.stdin = manifest::stdin_hash(&stdin);
        self.stdin = stdin;
    }
}

/// Host-side limits; not inputs of the run.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Wall-clock bound; the run ends `timed-out` when it passes.
    pub timeout: Option<Duration>,
    /// Note where every thread is after this step (`Outcome::where_at`).
    pub where_at: Option<u64>,
    /// Note, after each of these steps, the frame of the program's own code
    /// the thread that made it was in, when that is a caller of where it
    /// stopped (`Outcome::places_at`): a race's accesses made in a library
    /// or the Rust core are told by the line of the program that called it.
    pub places_at: Vec<u64>,
    /// End `timed-out` on reaching this step: a replay of a run that timed
    /// out stops where the recording's host clock stopped it, whatever this
    /// host's clock says.
    pub max_steps: Option<u64>,
    /// Guest paths whose trees the run hands back as it left them
    /// (`Outcome::kept`): a build's outputs.
    pub keep: Vec<String>,
}

/// A file tree as a run left it, read from its file system at its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileTree {
    File {
        executable: bool,
        bytes: Vec<u8>,
    },
    Symlink(String),
    /// Entries by name, in byte order.
    Dir(std::collections::BTreeMap<String, FileTree>),
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub status: ExitStatus,
    pub steps: u64,
    pub virtual_ns: u64,
    pub wall: Duration,
    /// For deadlocked and timed-out runs: where each thread was, one line each.
    pub stuck: Vec<String>,
    /// The perturbations the run's schedule applied, in step order.
    pub perturbed: Vec<Perturbed>,
    /// Where each thread was after `Limits::where_at`, one line each.
    pub where_at: Vec<String>,
    /// The ELF files (program, libraries) the running process had mapped
    /// after `Limits::where_at`, to name addresses in them.
    pub symbols_at: Option<std::sync::Arc<symbols::Symbolizer>>,
    /// After each step of `Limits::places_at`: the step, the thread that
    /// made it and the place of the caller in its own code it was in
    /// (`lib::Counter::incr (lib.rs:28)`); none for a step made in the
    /// program's own code, or with no such caller.
    pub places_at: Vec<(u64, u32, String)>,
    /// Each regular file the run wrote, and by which (pid, tid).
    pub writers: std::collections::BTreeMap<String, std::collections::BTreeSet<(u32, u32)>>,
    /// Each thread's last name (prctl PR_SET_NAME), by tid.
    pub thread_names: std::collections::BTreeMap<u32, String>,
    /// The trees at `Limits::keep`'s paths when the run ended (a path that
    /// was not there then is left out).
    pub kept: std::collections::BTreeMap<String, FileTree>,
    /// With `--points races`: the pages (addresses, sorted) the run saw
    /// race, or was given (`race_pages`), for a check's schedules.
    pub race_pages: Vec<u64>,
}

/// Where a running machine sends what it records.
pub trait Recorder {
    fn event(&mut self, event: &Event);
    /// Bytes the guest wrote to its standard output (fd 1) or error (fd 2).
    fn output(&mut self, fd: i32, bytes: &[u8]);
    /// From `step` on, thread `tid` of process `pid` holds the CPU.
    fn switch(&mut self, _step: u64, _pid: u32, _tid: u32) {}
    /// Keep a keyframe; `pages` are the pages written since the previous one.
    /// Recorders that keep no keyframes say so, and the engine takes none.
    fn keyframe(&mut self, _kf: &keyframe::Keyframe, _pages: &[(pages::PageHash, &[u8])]) {}
    fn wants_keyframes(&self) -> bool {
        false
    }
    /// More standard input from outside the machine, waited for, when the
    /// guest has read all it had: a shell started in a run (`rewind shell`)
    /// reads a terminal. None (end of input) for every recorded run, whose
    /// standard input is all in its inputs.
    fn more_input(&mut self) -> Option<Vec<u8>> {
        None
    }
}

/// A recorder that keeps nothing: for runs made only to look inside them.
pub struct Discard;

impl Recorder for Discard {
    fn event(&mut self, _: &Event) {}
    fn output(&mut self, _: i32, _: &[u8]) {}
}
