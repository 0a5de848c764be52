//! One module per command.

pub mod artifacts;
pub mod bookmark;
pub mod check;
pub mod diff;
pub mod doctor;
pub mod events;
pub mod export;
pub mod fork;
pub mod gc;
pub mod import;
pub mod inspect;
pub mod log;
pub mod ls;
pub mod nix;
pub mod open;
pub mod prune;
pub mod remove;
pub mod replay;
pub mod run;
pub mod shell;
pub mod show;
pub mod test;
pub mod threads;
pub mod where_;

/// A run and a stretch of its steps (`rewind events`, `rewind threads`).
#[derive(clap::Args, Debug)]
pub struct RunSteps {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// From this step.
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub from: u64,
    /// To this step [default: the end of the run].
    #[arg(long, value_name = "S")]
    pub to: Option<u64>,
}
