//! CPUID and extended (XSAVE) state: AVX and AVX-512 registers of each thread.

use crate::EngineError;
use kvm_bindings::{kvm_xcrs, kvm_xsave, CpuId, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::{Kvm, VcpuFd};

const CPUID_XSAVE_LEAF: u32 = 0xd;
const CPUID_FEATURES_LEAF: u32 = 1;
const CPUID_ECX_XSAVE: u32 = 1 << 26;
/// x87 and SSE: always present.
const XCR0_FALLBACK: u64 = 0x3;

/// Sets CPUID (which must happen before the first KVM_RUN) and returns XCR0
/// to enable: CPUID leaf 0xd's mask of supported state components.
pub fn set_cpuid(kvm: &Kvm, vcpu: &VcpuFd) -> Result<Option<u64>, EngineError> {
    let mut cpuid: CpuId = kvm
        .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
        .map_err(EngineError::kvm("KVM_GET_SUPPORTED_CPUID"))?;
    let mask = cpuid
        .as_slice()
        .iter()
        .find(|e| e.function == CPUID_XSAVE_LEAF && e.index == 0)
        .map(|e| (e.eax as u64) | ((e.edx as u64) << 32))
        .filter(|m| m & XCR0_FALLBACK == XCR0_FALLBACK);
    if mask.is_some() {
        // PVM reports leaf 0xd but not leaf 1's XSAVE bit; without it KVM
        // refuses CR4.OSXSAVE, and then XSAVE carries no AVX state.
        for e in cpuid.as_mut_slice() {
            if e.function == CPUID_FEATURES_LEAF {
                e.ecx |= CPUID_ECX_XSAVE;
            }
        }
    }
    vcpu.set_cpuid2(&cpuid)
        .map_err(EngineError::kvm("KVM_SET_CPUID2"))?;
    Ok(mask)
}

pub fn set_xcr0(vcpu: &VcpuFd, xcr0: u64) -> Result<(), EngineError> {
    let mut x = kvm_xcrs {
        nr_xcrs: 1,
        ..Default::default()
    };
    x.xcrs[0].xcr = 0;
    x.xcrs[0].value = xcr0;
    vcpu.set_xcrs(&x).map_err(EngineError::kvm("KVM_SET_XCRS"))
}

/// A thread's extended state (x87, SSE, AVX, AVX-512).
pub struct ExtendedState(pub Box<kvm_xsave>);

impl Clone for ExtendedState {
    fn clone(&self) -> Self {
        ExtendedState(Box::new(kvm_xsave {
            region: self.0.region,
            extra: Default::default(),
        }))
    }
}

impl std::fmt::Debug for ExtendedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExtendedState")
    }
}

pub fn save(vcpu: &VcpuFd) -> Result<ExtendedState, EngineError> {
    let x = vcpu
        .get_xsave()
        .map_err(EngineError::kvm("KVM_GET_XSAVE"))?;
    Ok(ExtendedState(Box::new(x)))
}

pub fn restore(vcpu: &VcpuFd, state: &ExtendedState) -> Result<(), EngineError> {
    // SAFETY: the buffer came from KVM_GET_XSAVE on this vCPU and is a full kvm_xsave.
    unsafe { vcpu.set_xsave(&state.0) }.map_err(EngineError::kvm("KVM_SET_XSAVE"))
}

impl serde::Serialize for ExtendedState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self.0.region.iter().flat_map(|w| w.to_le_bytes()).collect();
        // The same encoding as a sequence of u8 in postcard, written at once.
        s.serialize_bytes(&bytes)
    }
}

impl<'de> serde::Deserialize<'de> for ExtendedState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes: Vec<u8> = serde::Deserialize::deserialize(d)?;
        let mut x = kvm_xsave::default();
        if bytes.len() != x.region.len() * 4 {
            return Err(serde::de::Error::custom("XSAVE image of the wrong size"));
        }
        for (i, w) in bytes.chunks(4).enumerate() {
            x.region[i] = u32::from_le_bytes(w.try_into().unwrap());
        }
        Ok(ExtendedState(Box::new(x)))
    }
}
