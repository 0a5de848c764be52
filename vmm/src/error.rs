//! Errors of the engine. Guest misbehaviour is never one of these: it is
//! recorded as an event or ends the run with a status.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "cannot open /dev/kvm: {0} (is KVM available and do you have access? try `rewind doctor`)"
    )]
    KvmOpen(#[source] kvm_ioctls::Error),
    #[error("KVM {what} failed: {source}")]
    Kvm {
        what: &'static str,
        #[source]
        source: kvm_ioctls::Error,
    },
    #[error("cannot map {0} bytes of guest memory: {1}")]
    Memory(u64, String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}: not an ELF executable")]
    NotElf(PathBuf),
    #[error("{0}: not an x86-64 ELF executable")]
    WrongArch(PathBuf),
    #[error("{0}: {1}")]
    BadElf(PathBuf, String),
    #[error("the vCPU stopped unexpectedly: {0}")]
    UnexpectedExit(String),
    #[error("keyframe: {0}")]
    BadKeyframe(String),
    #[error("KVM API version {0}; rewind needs 12 (try `rewind doctor`)")]
    KvmApi(i32),
    #[error("KVM lacks {name} ({why}); try `rewind doctor`")]
    MissingCap {
        name: &'static str,
        why: &'static str,
    },
    #[error("manifest: {0}")]
    Manifest(#[from] crate::run::manifest::ManifestError),
    #[error(transparent)]
    OutOfRange(#[from] crate::machine::memory::OutOfRange),
    #[error("guest memory exhausted while loading the program")]
    OutOfMemory,
    #[error("the page at {0:#x} was written and its page tables' Dirty bits did not say so (KVM's dirty log did)")]
    MissedWrite(u64),
}

impl EngineError {
    pub fn kvm(what: &'static str) -> impl FnOnce(kvm_ioctls::Error) -> EngineError {
        move |source| EngineError::Kvm { what, source }
    }
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> EngineError {
        let path = path.into();
        move |source| EngineError::Io { path, source }
    }
}
