//! The vCPU's state and the look for written guest pages (`dirty`), as keyframes save and
//! restore them (the kernel's part is `kernel::save_restore`).

use super::{Machine, PageTables};
use crate::EngineError;
use kvm_bindings::{kvm_regs, kvm_sregs, kvm_xsave};
use kvm_ioctls::SyncReg;
use serde::{Deserialize, Serialize};

/// Registers, system registers and extended state, as raw KVM structures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuState {
    pub regs: Vec<u8>,
    pub sregs: Vec<u8>,
    /// The XSAVE image, when the CPU has XSAVE.
    pub xsave: Option<Vec<u8>>,
}

fn bytes_of<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: T is one of KVM's plain-data register structs; any byte view of it is valid.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, std::mem::size_of::<T>()) }
        .to_vec()
}

fn from_bytes<T: Copy + Default>(b: &[u8]) -> Option<T> {
    if b.len() != std::mem::size_of::<T>() {
        return None;
    }
    let mut v = T::default();
    // SAFETY: sizes match and T is plain data valid for every bit pattern.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), &mut v as *mut T as *mut u8, b.len()) };
    Some(v)
}

impl Machine {
    /// The state the vCPU resumes with: sync registers and extended state.
    pub fn vcpu_state(&self) -> Result<VcpuState, EngineError> {
        let sync = self.vcpu.sync_regs();
        let xsave = self
            .save_xstate()?
            .map(|x| x.0.region.iter().flat_map(|w| w.to_le_bytes()).collect());
        Ok(VcpuState {
            regs: bytes_of(&sync.regs),
            sregs: bytes_of(&sync.sregs),
            xsave,
        })
    }

    pub fn restore_vcpu(&mut self, s: &VcpuState) -> Result<(), EngineError> {
        let bad = || EngineError::BadKeyframe("vCPU state has the wrong size".into());
        let regs: kvm_regs = from_bytes(&s.regs).ok_or_else(bad)?;
        let sregs: kvm_sregs = from_bytes(&s.sregs).ok_or_else(bad)?;
        self.vcpu.set_sync_dirty_reg(SyncReg::Register);
        self.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
        let sync = self.vcpu.sync_regs_mut();
        sync.regs = regs;
        sync.sregs = sregs;
        if let (Some(x), true) = (&s.xsave, self.has_xsave()) {
            if x.len() != 4096 {
                return Err(bad());
            }
            let mut xs = kvm_xsave::default();
            for (i, w) in x.chunks(4).enumerate() {
                xs.region[i] = u32::from_le_bytes(w.try_into().unwrap());
            }
            self.restore_xstate(&super::ExtendedState(Box::new(xs)))?;
        }
        Ok(())
    }

    /// Pages written since the last call, guest and monitor writes both,
    /// sorted; `spaces` are every address space's tables (`dirty`).
    pub fn take_dirty_pages(&mut self, spaces: &[PageTables]) -> Result<Vec<u64>, EngineError> {
        use super::dirty::{missed, LogUse};
        if self.written.log == LogUse::Only {
            let log = self.kvm_log()?;
            return Ok(self.ram.take_dirty(&log));
        }
        let mut zap = Vec::new();
        let found = self.written.look(&mut self.ram, spaces, &mut zap);
        if self.written.log == LogUse::Check {
            let log = self.kvm_log()?;
            let log = self.written.with_held(log);
            if let Some(pa) = missed(&log, &found) {
                return Err(EngineError::MissedWrite(pa));
            }
        }
        self.drop_translations(&zap)?;
        Ok(found)
    }

    /// Forgets what was written (a machine just reset to a keyframe):
    /// Dirty bits the restored tables hold count at the next look.
    pub fn forget_written(&mut self) -> Result<(), EngineError> {
        if self.written.log.slot_logs() {
            self.kvm_log()?;
        }
        self.written.forget(&mut self.ram);
        Ok(())
    }

    /// KVM's dirty bitmap of the slot, which it clears.
    pub(super) fn kvm_log(&mut self) -> Result<Vec<u64>, EngineError> {
        self.vm
            .get_dirty_log(super::MEMORY_SLOT, self.ram.size() as usize)
            .map_err(EngineError::kvm("KVM_GET_DIRTY_LOG"))
    }
}

/// Serde for `kvm_regs` as its raw bytes.
pub mod regs_serde {
    use kvm_bindings::kvm_regs;

    pub fn serialize<S: serde::Serializer>(r: &kvm_regs, s: S) -> Result<S::Ok, S::Error> {
        serde::Serialize::serialize(&super::bytes_of(r), s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<kvm_regs, D::Error> {
        let b: Vec<u8> = serde::Deserialize::deserialize(d)?;
        super::from_bytes(&b).ok_or_else(|| serde::de::Error::custom("registers of the wrong size"))
    }
}
