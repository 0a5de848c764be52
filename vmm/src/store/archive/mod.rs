//! Exported runs: one `.rwd` file carries a run to another store.
//!
//! - `format.rs`: the file format (documented there), its writer and its
//!   verifying reader;
//! - `export.rs`: a run (and with `--replayable` its inputs and pages) into
//!   a file;
//! - `import.rs`: a file, verified whole before anything is written, into a
//!   store.

mod check;
mod export;
mod format;
mod import;

pub use export::{ExportSummary, PLAIN_RUN_FILES};
pub use format::{
    read, ArchiveError, ArchiveWriter, Entries, Entry, Info, Kind, Refused, Visitor,
    FORMAT_VERSION, MAGIC,
};
pub use import::ImportSummary;
