//! The KVM capabilities the engine uses, in one list: `Machine::new`
//! refuses a host without a required one, and `rewind doctor` prints the
//! same list.

use crate::EngineError;
use kvm_ioctls::{Cap, Kvm};

/// A KVM capability and what the engine does with it.
pub struct KvmCap {
    pub cap: Cap,
    /// Its name in the KVM API documentation.
    pub name: &'static str,
    /// A machine is not built without it.
    pub required: bool,
    /// What it is for.
    pub why: &'static str,
}

/// The KVM API version the engine speaks.
pub const API_VERSION: i32 = 12;

pub const CAPS: &[KvmCap] = &[
    KvmCap {
        cap: Cap::UserMemory,
        name: "KVM_CAP_USER_MEMORY",
        required: true,
        why: "guest memory is the monitor's own mapping",
    },
    KvmCap {
        cap: Cap::SyncRegs,
        name: "KVM_CAP_SYNC_REGS",
        required: true,
        why: "registers without ioctls on every exit",
    },
    KvmCap {
        cap: Cap::Xsave,
        name: "KVM_CAP_XSAVE",
        required: true,
        why: "thread switches keep vector registers",
    },
    KvmCap {
        cap: Cap::Xcrs,
        name: "KVM_CAP_XCRS",
        required: true,
        why: "XCR0 for AVX in the guest",
    },
    KvmCap {
        cap: Cap::ExtCpuid,
        name: "KVM_CAP_EXT_CPUID",
        required: true,
        why: "the guest's CPUID is set before it runs",
    },
    KvmCap {
        cap: Cap::ImmediateExit,
        name: "KVM_CAP_IMMEDIATE_EXIT",
        required: false,
        why: "prompt timeouts",
    },
];

/// Each capability of [`CAPS`] and whether this host's KVM has it.
pub fn report(kvm: &Kvm) -> Vec<(&'static KvmCap, bool)> {
    CAPS.iter()
        .map(|c| (c, kvm.check_extension(c.cap)))
        .collect()
}

/// Fails on the first required capability (or API version) the host lacks.
pub fn check(kvm: &Kvm) -> Result<(), EngineError> {
    let version = kvm.get_api_version();
    if version != API_VERSION {
        return Err(EngineError::KvmApi(version));
    }
    match report(kvm).into_iter().find(|(c, has)| c.required && !has) {
        Some((c, _)) => Err(EngineError::MissingCap {
            name: c.name,
            why: c.why,
        }),
        None => Ok(()),
    }
}
