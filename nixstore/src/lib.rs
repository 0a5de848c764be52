//! What Rewind knows of Nix, below its front ends and beside the engine
//! (which knows nothing of Nix): a derivation's `.drv` file (`drv`), the
//! NAR serialisation of a file tree and its SHA-256 (`nar`), Nix's own
//! base-32 (`base32`), a binary cache's `.narinfo` (`narinfo`), and the
//! host's Nix tools, asked for derivations, closures and what the store
//! and its substituters hold (`host`).

pub mod base32;
pub mod drv;
pub mod host;
pub mod nar;
pub mod narinfo;

pub use drv::{Derivation, DrvError};
pub use host::{Host, HostError};
pub use nar::{nar_hash, Entry, NarHash};
