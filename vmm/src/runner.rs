//! One recorded run: build the machine from a run's inputs, run it to its
//! end, and report how it ended. Replay is recording again and comparing.

use crate::run::{Limits, Outcome, Recorder, RunInputs};
use crate::EngineError;

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
    kf: &crate::run::keyframe::Keyframe,
    pages: &crate::store::pages::PageStore,
    same_run: bool,
    limits: &Limits,
    rec: &mut dyn Recorder,
) -> Result<Outcome, EngineError> {
    crate::kernel::Kernel::restore(inputs, kf, pages, same_run, rec)?.run(limits)
}
