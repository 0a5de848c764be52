//! The Rewind engine.
//!
//! A Linux x86-64 program runs in guest ring 3 of a KVM machine that has no
//! operating system: every system call and CPU exception leaves the guest and
//! is served by [`kernel`], a deterministic implementation of the Linux ABI.
//! [`machine`] owns KVM, guest memory and the vCPU; [`run`] what a run takes
//! and gives (the manifest of inputs, events, keyframes), below the kernel;
//! [`record`] the trace on disk; [`store`] runs on disk; [`session`] ties them
//! into one recorded run. Layers run one way (`tests/layers.rs`).

pub mod check;
pub mod debug;
pub mod error;
pub mod image;
pub mod inspect;
pub mod kernel;
pub mod machine;
pub mod record;
pub mod replay;
pub mod run;
pub mod runner;
pub mod schedule;
pub mod store;
pub mod terminal;

pub use error::EngineError;
