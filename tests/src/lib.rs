//! Helpers for the end-to-end tests: they drive the real `rewind` binary as a
//! person does, each test in its own temporary `REWIND_HOME`.
//!
//! The binary is `target/<profile>/rewind` next to the test executable (the
//! test command builds the workspace first: `cargo build --workspace`), or
//! whatever `REWIND_BIN` names. The guest programs are built by this crate's
//! `build.rs` from `guest/tests/`; [`guest`] finds them.
//!
//! By concern: a test's home and the commands run with it (`home`), what
//! `rewind` prints, read (`output`), running commands (`process`), the
//! programs the tests run (`programs`), and the clients and trees of the
//! public modules. Every name of the first four is here at the crate root.

pub mod dap;
pub mod debuginfod;
mod home;
pub mod lsp;
mod output;
mod process;
mod programs;
pub mod roots;
pub mod table;

pub use home::{store_files, store_tree, Home};
pub use output::{
    assert_lines, failing_run_in, has_event, killed_narrowed_run, last_run_id, parse_status,
    run_wall, without_wall_time, Output, Run,
};
pub use process::{
    children_cpu, load_average, rewind_bin, run_command, run_command_with_input, tool,
    unprivileged, DEADLINE,
};
pub use programs::{
    cpu_has, guest, guest_arg, host_program, native_passing, native_with_env, optional_guest,
    skip_unless_required, skipped, word_text, MARK_PROGRAM,
};
