//! `rewind`: run a static Linux program deterministically in a KVM machine,
//! record the run, and inspect or replay it.

mod app;
mod cmd;
mod dap;
mod examples;
mod framing;
mod gdb;
mod lsp;
mod private_socket;
mod progress;
mod signals;
mod util;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "rewind",
    version,
    about = "Record a Linux program's run deterministically, then inspect and replay it",
    long_about = "Rewind runs a static Linux x86-64 program in a KVM machine whose kernel is \
                  the monitor: every run is a pure function of its inputs, thread schedule \
                  included, and is recorded under $REWIND_HOME (default \
                  $XDG_DATA_HOME/rewind, else ~/.local/share/rewind).\n\n\
                  RUN arguments name a recorded run: a full id, a unique id prefix, `@` \
                  (the newest), `@2`, `@3`.. (older), or a name (the newest run with it)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program in the machine and record the run.
    Run(cmd::run::RunArgs),
    /// Rerun a program under perturbed schedules and narrow a failure to one step.
    Check(cmd::check::CheckArgs),
    /// Run a test binary under perturbed schedules: a failing exit in any is the failure (--artifacts DIR keeps it).
    Test(cmd::check::CheckArgs),
    /// Build a Nix derivation as a recorded run; check its outputs against the store.
    Nix(cmd::nix::NixArgs),
    /// List recorded runs, newest first.
    Ls(cmd::ls::LsArgs),
    /// Print a run's events, one a line.
    Events(cmd::events::EventsArgs),
    /// Print a run's output (stdout and stderr, as written).
    Log(cmd::log::LogArgs),
    /// Run a recorded run's inputs again and compare every event.
    Replay(cmd::replay::ReplayArgs),
    /// Fork a run at a step with another schedule or seed.
    Fork(cmd::fork::ForkArgs),
    /// A file as the guest saw it at a step (exit 1 when it did not exist).
    Cat(cmd::inspect::CatArgs),
    /// Processes and threads alive at a step, and what each was blocked in.
    Ps(cmd::inspect::PsArgs),
    /// Where a thread was at a step: its stack, its own code's frame and source.
    Where(cmd::where_::WhereArgs),
    /// Which thread held the CPU when, a line per stretch.
    Threads(cmd::threads::ThreadsArgs),
    /// Compare two runs event by event; exit 1 when they differ.
    Diff(cmd::diff::DiffArgs),
    /// Check whether this host can record, and which host facts hold here.
    Doctor(cmd::doctor::DoctorArgs),
    /// A run's inputs, and the commands that make it again.
    Show(cmd::show::ShowArgs),
    /// Remove runs, with every run forked from them.
    Remove(cmd::remove::RemoveArgs),
    /// Remove pages and images no run uses; say how much was freed.
    Gc(cmd::gc::GcArgs),
    /// Remove forks that ran exactly as an older run did.
    Prune(cmd::prune::PruneArgs),
    /// Write a run to one file (.rwd), to carry it to another machine.
    Export(cmd::export::ExportArgs),
    /// Add a run from a file `rewind export` wrote.
    Import(cmd::import::ImportArgs),
    /// Keep a note at a step of a run.
    Bookmark(cmd::bookmark::BookmarkArgs),
    /// A run's bookmarks, in step order.
    Bookmarks(cmd::bookmark::BookmarksArgs),
    /// Serve a recorded run to a Debug Adapter Protocol client (stdio or --port).
    Dap(dap::DapArgs),
    /// What opens a run at a step in an editor (or, with --editor, open it).
    Open(cmd::open::OpenArgs),
    /// Debug a run at a step with gdb: a fork that records nothing, reverse execution included.
    Gdb(gdb::GdbArgs),
    /// A busybox shell inside a run at a step, on this terminal; nothing is recorded.
    Shell(cmd::shell::ShellArgs),
    /// A language server (stdio): what the recordings found, on the source lines (docs/lsp.md).
    Lsp(lsp::LspArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("rewind: error: {}", util::clap_one_line(&e));
            return ExitCode::from(util::TROUBLE);
        }
    };
    match run(cli.command) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        // Exit 1 is an answer a command returns (a violation, a difference,
        // a missing file); every error is trouble, exit 2, as clap's are.
        Err(e) => {
            eprintln!("rewind: error: {}", util::one_line(&e));
            ExitCode::from(util::TROUBLE)
        }
    }
}

/// Runs a command in its front end, with the signal handling it needs.
fn run(command: Command) -> anyhow::Result<i32> {
    match command {
        Command::Run(a) => {
            signals::install();
            cmd::run::main(a)
        }
        Command::Nix(a) => {
            signals::install();
            cmd::nix::main(a)
        }
        Command::Check(a) => {
            signals::install();
            signals::die_on_broken_pipe();
            cmd::check::main(a)
        }
        Command::Test(a) => {
            signals::install();
            signals::die_on_broken_pipe();
            cmd::test::main(a)
        }
        Command::Ls(a) => {
            signals::die_on_broken_pipe();
            cmd::ls::main(a)
        }
        Command::Events(a) => {
            signals::die_on_broken_pipe();
            cmd::events::main(a)
        }
        Command::Log(a) => {
            signals::die_on_broken_pipe();
            cmd::log::main(a)
        }
        Command::Replay(a) => {
            signals::install();
            cmd::replay::main(a)
        }
        Command::Fork(a) => {
            signals::install();
            cmd::fork::main(a)
        }
        Command::Cat(a) => {
            signals::die_on_broken_pipe();
            cmd::inspect::cat(a)
        }
        Command::Ps(a) => cmd::inspect::ps(a),
        Command::Where(a) => {
            signals::die_on_broken_pipe();
            cmd::where_::main(a)
        }
        Command::Threads(a) => {
            signals::die_on_broken_pipe();
            cmd::threads::main(a)
        }
        Command::Diff(a) => {
            signals::die_on_broken_pipe();
            cmd::diff::main(a)
        }
        Command::Doctor(a) => cmd::doctor::main(a),
        Command::Show(a) => {
            signals::die_on_broken_pipe();
            cmd::show::main(a)
        }
        Command::Remove(a) => cmd::remove::main(a),
        Command::Gc(a) => cmd::gc::main(a),
        Command::Prune(a) => cmd::prune::main(a),
        Command::Export(a) => {
            signals::install();
            cmd::export::main(a)
        }
        Command::Import(a) => {
            signals::install();
            cmd::import::main(a)
        }
        Command::Bookmark(a) => cmd::bookmark::add(a),
        Command::Bookmarks(a) => {
            signals::die_on_broken_pipe();
            cmd::bookmark::list(a)
        }
        Command::Dap(a) => {
            signals::install();
            dap::main(a)
        }
        Command::Open(a) => cmd::open::main(a),
        Command::Gdb(a) => gdb::main(a),
        Command::Shell(a) => cmd::shell::main(a),
        Command::Lsp(a) => lsp::main(a),
    }
}
