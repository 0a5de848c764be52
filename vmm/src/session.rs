//! One recorded run: build the machine from a run's inputs, run it to its
//! end, and report how it ended. Replay is recording again and comparing.

use crate::image::Image;
use crate::record::{ExitStatus, Manifest, Recorder};
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
        Ok(RunInputs {
            manifest: Manifest::new(program, argv, hash),
            image,
            stdin: Vec::new(),
        })
    }

    /// Makes `stdin` the run's standard input, its hash the manifest's (an
    /// input: it is part of the run's id).
    pub fn set_stdin(&mut self, stdin: Vec<u8>) {
        self.manifest.stdin = crate::record::manifest::stdin_hash(&stdin);
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
    pub perturbed: Vec<crate::record::Perturbed>,
    /// Where each thread was after `Limits::where_at`, one line each.
    pub where_at: Vec<String>,
    /// Each regular file the run wrote, and by which (pid, tid).
    pub writers: std::collections::BTreeMap<String, std::collections::BTreeSet<(u32, u32)>>,
    /// Each thread's last name (prctl PR_SET_NAME), by tid.
    pub thread_names: std::collections::BTreeMap<u32, String>,
}

/// Runs the program to its end, sending events and output to `rec`.
pub fn run(
    inputs: &RunInputs,
    limits: &Limits,
    rec: &mut dyn Recorder,
) -> Result<Outcome, EngineError> {
    crate::kernel::Kernel::boot(inputs, rec)?.run(limits)
}

/// Runs on from a keyframe. `same_run`: the inputs are those of the run
/// that took it (a seek); otherwise it is a fork's, whose schedule starts
/// fresh after the keyframe. The caller has already given `rec` what the
/// run recorded up to the keyframe (`Keyframe::recorded`).
pub fn run_from(
    inputs: &RunInputs,
    kf: &crate::record::keyframe::Keyframe,
    pages: &crate::store::pages::PageStore,
    same_run: bool,
    limits: &Limits,
    rec: &mut dyn Recorder,
) -> Result<Outcome, EngineError> {
    crate::kernel::Kernel::restore(inputs, kf, pages, same_run, rec)?.run(limits)
}
