//! The Rewind engine.
//!
//! A Linux x86-64 program runs in guest ring 3 of a KVM machine that has no
//! operating system: every system call and CPU exception leaves the guest and
//! is served by [`kernel`], a deterministic implementation of the Linux ABI.
//! [`machine`] owns KVM, guest memory and the vCPU; [`record`] the events and
//! the manifest of inputs; [`store`] runs on disk; [`session`] ties them into
//! one recorded run.

pub mod check;
pub mod debug;
pub mod error;
pub mod image;
pub mod inspect;
pub mod kernel;
pub mod machine;
pub mod record;
pub mod replay;
pub mod schedule;
pub mod session;
pub mod store;

pub use error::EngineError;
