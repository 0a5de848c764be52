//! The machine: KVM, guest memory and the one vCPU.
//!
//! Guest ring 0 holds only the trampoline; every syscall and exception comes
//! back here as an [`Exit`], with the vCPU's registers already describing the
//! user's ring-3 state (the exception frame unwound), so that the kernel
//! resumes a thread by editing registers and calling [`Machine::run`] again.

pub mod caps;
pub mod dirty;
pub mod gdt;
pub mod insn;
pub mod layout;
pub mod memory;
pub mod msr;
pub mod paging;
pub mod regs;
pub mod trampoline;
pub mod tsc;
pub mod vcpu_state;
pub mod watchdog;
pub mod xstate;

use crate::EngineError;
use kvm_bindings::{kvm_regs, kvm_userspace_memory_region, KVM_MEM_LOG_DIRTY_PAGES};
use kvm_ioctls::{Kvm, SyncReg, VcpuExit, VcpuFd, VmFd};
use memory::GuestRam;
pub use paging::{PageTables, Perm};
pub use xstate::ExtendedState;

fn layout_page(va: u64) -> u64 {
    va & !(layout::PAGE_SIZE - 1)
}

/// The one memory slot: all of guest memory, with a dirty log where
/// `dirty::LogUse` says.
const MEMORY_SLOT: u32 = 0;

fn memory_region(ram: &GuestRam, log: dirty::LogUse) -> kvm_userspace_memory_region {
    kvm_userspace_memory_region {
        slot: MEMORY_SLOT,
        flags: if log.slot_logs() {
            KVM_MEM_LOG_DIRTY_PAGES
        } else {
            0
        },
        guest_phys_addr: 0,
        memory_size: ram.size(),
        userspace_addr: ram.host_base(),
    }
}

/// Why the guest stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// A `syscall`; `rax` holds the number, `rcx`/`r11` the return rip/rflags.
    Syscall,
    /// A CPU exception in ring 3.
    Exception {
        vector: u8,
        error_code: u64,
        cr2: u64,
    },
    /// The host asked the run to stop (timeout); the guest is mid-instruction stream.
    Interrupted,
}

pub struct Machine {
    _kvm: Kvm,
    vm: VmFd,
    vcpu: VcpuFd,
    pub ram: GuestRam,
    /// XCR0 when the CPU has XSAVE.
    xcr0: Option<u64>,
    /// How written pages are found, and what that keeps between looks.
    written: dirty::Written,
}

impl Machine {
    pub fn new(mem_size: u64) -> Result<Machine, EngineError> {
        let kvm = Kvm::new().map_err(EngineError::KvmOpen)?;
        caps::check(&kvm)?;
        let vm = kvm.create_vm().map_err(EngineError::kvm("KVM_CREATE_VM"))?;
        let mut ram = GuestRam::new(mem_size)?;
        let log = dirty::LogUse::from_env();
        let region = memory_region(&ram, log);
        // SAFETY: the region is ram's mapping, which outlives the VM (both owned by Machine,
        // and `vm` is dropped first as it is declared before `ram`).
        unsafe { vm.set_user_memory_region(region) }
            .map_err(EngineError::kvm("KVM_SET_USER_MEMORY_REGION"))?;
        let mut vcpu = vm
            .create_vcpu(0)
            .map_err(EngineError::kvm("KVM_CREATE_VCPU"))?;
        let xcr0 = xstate::set_cpuid(&kvm, &vcpu)?;

        for (pa, bytes) in trampoline::code() {
            ram.write(pa, &bytes)?;
        }
        for (i, e) in gdt::entries().iter().enumerate() {
            ram.write_u64(gdt::GDT_BASE + i as u64 * 8, *e)?;
        }
        let (rsp0_at, rsp0) = gdt::tss_rsp0();
        ram.write_u64(rsp0_at, rsp0)?;
        paging::init_low_table(&mut ram)?;
        paging::init_direct_map(&mut ram)?;

        vcpu.set_msrs(&msr::syscall_msrs())
            .map_err(EngineError::kvm("KVM_SET_MSRS"))?;
        let sregs = vcpu
            .get_sregs()
            .map_err(EngineError::kvm("KVM_GET_SREGS"))?;
        vcpu.set_sregs(&regs::initial_sregs(sregs, 0, xcr0.is_some()))
            .map_err(EngineError::kvm("KVM_SET_SREGS"))?;
        if let Some(x) = xcr0 {
            xstate::set_xcr0(&vcpu, x)?;
        }
        vcpu.set_sync_valid_reg(SyncReg::Register);
        vcpu.set_sync_valid_reg(SyncReg::SystemRegister);
        let mut m = Machine {
            _kvm: kvm,
            vm,
            vcpu,
            ram,
            xcr0,
            written: dirty::Written::new(log),
        };
        // The sync register area is only filled by an exit; seed it from the ioctls once.
        let r = m
            .vcpu
            .get_regs()
            .map_err(EngineError::kvm("KVM_GET_REGS"))?;
        let s = m
            .vcpu
            .get_sregs()
            .map_err(EngineError::kvm("KVM_GET_SREGS"))?;
        let sync = m.vcpu.sync_regs_mut();
        sync.regs = r;
        sync.sregs = s;
        Ok(m)
    }

    pub fn has_xsave(&self) -> bool {
        self.xcr0.is_some()
    }

    /// XCR0, the enabled XSAVE components, when the CPU has XSAVE.
    pub fn xcr0(&self) -> Option<u64> {
        self.xcr0
    }

    /// The user's general registers, as of the last exit.
    pub fn regs(&self) -> kvm_regs {
        self.vcpu.sync_regs().regs
    }

    /// Edits the registers the guest resumes with.
    pub fn regs_mut(&mut self) -> &mut kvm_regs {
        self.vcpu.set_sync_dirty_reg(SyncReg::Register);
        &mut self.vcpu.sync_regs_mut().regs
    }

    pub fn fs_base(&self) -> u64 {
        self.vcpu.sync_regs().sregs.fs.base
    }

    pub fn gs_base(&self) -> u64 {
        self.vcpu.sync_regs().sregs.gs.base
    }

    pub fn set_segment_bases(&mut self, fs: u64, gs: u64) {
        self.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
        let s = &mut self.vcpu.sync_regs_mut().sregs;
        s.fs.base = fs;
        s.gs.base = gs;
    }

    pub fn set_address_space(&mut self, pt: PageTables) {
        self.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
        self.vcpu.sync_regs_mut().sregs.cr3 = pt.pml4;
    }

    pub fn save_xstate(&self) -> Result<Option<ExtendedState>, EngineError> {
        self.xcr0.map(|_| xstate::save(&self.vcpu)).transpose()
    }

    pub fn restore_xstate(&self, s: &ExtendedState) -> Result<(), EngineError> {
        xstate::restore(&self.vcpu, s)
    }

    /// Runs the guest until its next exit.
    ///
    /// A trampoline exit is taken as one only at the trampoline's own
    /// address: ring 3 can execute `out` and `in` too (on PVM they exit even
    /// with IOPL 0), so any other port I/O is the #GP that Linux would give.
    /// Inside a `trap`, whose `rdtsc` faults (`tsc`).
    pub fn run(&mut self, trap: &tsc::Trap) -> Result<Exit, EngineError> {
        // (Not again when the routine itself was interrupted: it resumes.)
        let user = self.vcpu.sync_regs().sregs.cs.selector & 3 == 3;
        if user && self.ram.word(trampoline::slot::HIDE_COUNT) != 0 {
            self.enter_hide_routine()?;
        }
        trap.arm();
        let (port, input) = match self.vcpu.run() {
            Ok(VcpuExit::IoOut(port, _)) => (port, false),
            Ok(VcpuExit::IoIn(port, data)) => {
                data.fill(0);
                (port, true)
            }
            Ok(other) => return Err(EngineError::UnexpectedExit(format!("{other:?}"))),
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => {
                return Ok(Exit::Interrupted)
            }
            Err(e) => {
                return Err(EngineError::Kvm {
                    what: "KVM_RUN",
                    source: e,
                })
            }
        };
        let exit_rip = self.vcpu.sync_regs().regs.rip;
        let exit = match trampoline::exit_at(port, exit_rip) {
            Some(trampoline::Entry::Syscall) if !input => {
                let r = &mut self.vcpu.sync_regs_mut().regs;
                r.rip = r.rcx;
                r.rflags = regs::user_rflags(r.r11);
                Exit::Syscall
            }
            Some(trampoline::Entry::Exception(vector)) if !input => self.exception_frame(vector)?,
            _ => return self.forged_io(),
        };
        self.enter_user_mode();
        Ok(exit)
    }

    /// Unwinds the frame the CPU pushed on the ring-0 stack for `vector`
    /// into the user's registers. The stack is TSS.RSP0, which a restored
    /// keyframe's pages may have moved: a frame outside memory is an error.
    fn exception_frame(&mut self, vector: u8) -> Result<Exit, EngineError> {
        let sync = self.vcpu.sync_regs();
        let mut frame = sync.regs.rsp;
        let cr2 = sync.sregs.cr2;
        let error_code = if trampoline::has_error_code(vector) {
            frame = frame.wrapping_add(8);
            self.ram.read_u64(frame.wrapping_sub(8))?
        } else {
            0
        };
        let word = |at: u64| self.ram.read_u64(frame.wrapping_add(at));
        let (rip, rflags, rsp) = (word(0)?, word(16)?, word(24)?);
        let r = &mut self.vcpu.sync_regs_mut().regs;
        r.rip = rip;
        r.rflags = rflags;
        r.rsp = rsp;
        Ok(Exit::Exception {
            vector,
            error_code,
            cr2,
        })
    }

    /// Port I/O the guest made itself, from ring 3: a #GP at the instruction.
    fn forged_io(&mut self) -> Result<Exit, EngineError> {
        let mut at_exit = self.vcpu.sync_regs().regs;
        // KVM completes the I/O on the next KVM_RUN (possibly moving rip past
        // it and writing rax): complete it now, without entering the guest,
        // then put the registers back as they were before the instruction.
        self.vcpu.set_kvm_immediate_exit(1);
        let r = match self.vcpu.run() {
            Err(e) if e.errno() == libc::EINTR => Ok(()),
            Err(e) => Err(EngineError::Kvm {
                what: "KVM_RUN (completing port I/O)",
                source: e,
            }),
            Ok(other) => Err(EngineError::UnexpectedExit(format!("{other:?}"))),
        };
        self.vcpu.set_kvm_immediate_exit(0);
        r?;
        let after = self.vcpu.sync_regs().regs.rip;
        at_exit.rip = self.io_instruction_start(at_exit.rip, after);
        *self.regs_mut() = at_exit;
        let cr2 = self.vcpu.sync_regs().sregs.cr2;
        self.enter_user_mode();
        Ok(Exit::Exception {
            vector: trampoline::VECTOR_GENERAL_PROTECTION,
            error_code: 0,
            cr2,
        })
    }

    /// Arms a memory point: the page whose leaf entry is at `pte` (made
    /// user-accessible by the caller) becomes inaccessible again right after
    /// the next instruction, by the in-guest #DB handler, without an exit.
    /// None: only the trap flag is set (the monitor re-protects at the #DB exit).
    pub fn arm_point(&mut self, pte: Option<u64>) {
        let at = pte.map_or(0, paging::direct_map_va);
        self.ram.set_word(trampoline::slot::ARMED_PTE, at);
        self.regs_mut().rflags |= regs::RFLAGS_TF;
    }

    /// Whether an armed point's instruction has not completed yet.
    pub fn point_armed(&self) -> bool {
        self.ram.word(trampoline::slot::ARMED_PTE) != 0
    }

    /// Undoes `arm_point` (the instruction did not complete).
    pub fn disarm_point(&mut self) {
        if self.point_armed() {
            self.ram.set_word(trampoline::slot::ARMED_PTE, 0);
        }
        self.regs_mut().rflags &= !regs::RFLAGS_TF;
    }

    /// Takes ring-3 access away from the pages whose leaf entries are at
    /// `ptes` (U already cleared by the monitor) in a way KVM sees, on the
    /// next entry, by guest ring-0 code: the hide routine. False when there
    /// are too many for its list: then the caller flushes.
    pub fn hide_on_entry(&mut self, ptes: &[u64]) -> bool {
        let at = self.ram.word(trampoline::slot::HIDE_COUNT);
        let count = at.saturating_add(ptes.len() as u64);
        if count > trampoline::slot::HIDE_MAX as u64 {
            return false;
        }
        for (i, pte) in (at..).zip(ptes) {
            let slot = trampoline::slot::HIDE_LIST + i * 8;
            if self
                .ram
                .write_u64(slot, paging::direct_map_va(*pte))
                .is_err()
            {
                return false;
            }
        }
        self.ram.set_word(trampoline::slot::HIDE_COUNT, count);
        true
    }

    /// Enters the hide routine in ring 0 with the user's state as its
    /// `iretq` frame: it returns to ring 3 exactly where the user would
    /// have resumed (TF included, for a memory point armed).
    fn enter_hide_routine(&mut self) -> Result<(), EngineError> {
        let r = self.vcpu.sync_regs().regs;
        let frame = layout::RING0_STACK_TOP - 40;
        let words = [
            r.rip,
            gdt::USER_CS as u64,
            r.rflags,
            r.rsp,
            gdt::USER_DS as u64,
        ];
        for (i, w) in words.iter().enumerate() {
            self.ram.write_u64(frame + 8 * i as u64, *w)?;
        }
        let regs = self.regs_mut();
        regs.rip = layout::HIDE_ROUTINE;
        regs.rsp = frame;
        regs.rflags = regs::RFLAGS_DEFAULT;
        self.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
        let s = &mut self.vcpu.sync_regs_mut().sregs;
        s.cs = gdt::kernel_code();
        s.ss = gdt::kernel_data();
        Ok(())
    }

    /// Whether every #DB exits to the monitor, a memory point's too (a
    /// debugger single-stepping with RFLAGS.TF); see `trampoline::debug_handler`.
    pub fn set_debug_exits(&mut self, on: bool) {
        self.ram.set_word(trampoline::slot::DEBUG_EXITS, on as u64);
    }

    /// Whether a debugger asked for every #DB (`set_debug_exits`).
    pub fn debug_exits(&self) -> bool {
        self.ram.word(trampoline::slot::DEBUG_EXITS) != 0
    }

    /// Where the port I/O instruction that exited begins. KVM reports the
    /// exit either at the instruction (hardware KVM; `in` on PVM), and then
    /// completing it moved rip past it, or already after it (`out` on PVM):
    /// then step back over its opcode (`in`/`out imm8` are two bytes, the
    /// others one; a prefix before it is not counted).
    fn io_instruction_start(&mut self, exit_rip: u64, after: u64) -> u64 {
        if after != exit_rip {
            return exit_rip;
        }
        let pt = PageTables {
            pml4: self.vcpu.sync_regs().sregs.cr3,
        };
        let va = after.wrapping_sub(2);
        let byte = pt
            .lookup(&mut self.ram, layout_page(va))
            .and_then(|(frame, _)| self.ram.slice(frame + (va & 0xfff), 1).ok())
            .map(|b| b[0]);
        match byte {
            Some(0xe4..=0xe7) => va,
            _ => after.wrapping_sub(1),
        }
    }

    /// Sets CS and SS back to ring 3 for the next entry, when the exit left
    /// ring 3 (an exception; on hardware KVM a `syscall` too).
    fn enter_user_mode(&mut self) {
        self.vcpu.set_sync_dirty_reg(SyncReg::Register);
        let (cs, ss) = (gdt::user_code(), gdt::user_data());
        let s = &self.vcpu.sync_regs().sregs;
        // On PVM a `syscall` exits still in ring 3: writing the same
        // segments back would cost KVM a whole KVM_SET_SREGS every step.
        if s.cs == cs && s.ss == ss {
            return;
        }
        self.vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
        let s = &mut self.vcpu.sync_regs_mut().sregs;
        s.cs = cs;
        s.ss = ss;
    }

    /// Drops every translation KVM cached from the guest's page tables,
    /// after the monitor took a permission away from a mapped page.
    ///
    /// The monitor edits page tables from the host, which KVM does not see:
    /// on PVM its shadow page tables keep the old entries even across a CR3
    /// reload, on EPT the TLB does. Deleting and re-adding the memory slot
    /// zaps them all. The slot's dirty log goes with it, so it is folded
    /// into the RAM's own dirty bitmap first.
    pub fn flush_tlb(&mut self) -> Result<(), EngineError> {
        let _ = self.ram.take_stale();
        match self.written.log {
            dirty::LogUse::None => {}
            dirty::LogUse::Only => {
                let log = self.kvm_log()?;
                self.ram.take_dirty_into(&log);
            }
            // Checked at the next look, not counted as found.
            dirty::LogUse::Check => {
                let log = self.kvm_log()?;
                self.written.hold(&log);
            }
        }
        let mut region = memory_region(&self.ram, self.written.log);
        region.memory_size = 0;
        // SAFETY: deleting the slot, then adding ram's own mapping back as in `new`.
        unsafe { self.vm.set_user_memory_region(region) }
            .map_err(EngineError::kvm("KVM_SET_USER_MEMORY_REGION (delete)"))?;
        // SAFETY: as in `new`: the mapping outlives the VM.
        unsafe {
            self.vm
                .set_user_memory_region(memory_region(&self.ram, self.written.log))
        }
        .map_err(EngineError::kvm("KVM_SET_USER_MEMORY_REGION"))?;
        Ok(())
    }

    /// Drops KVM's cached translations of the frames whose mappings the
    /// page tables lost or narrowed since the last flush
    /// (`GuestRam::note_stale`), and only theirs: each run of adjacent
    /// frames has its host pages' write access taken and given back, which
    /// fires KVM's MMU notifier (a few us, where re-adding the slot waits
    /// for an RCU grace period and then every page faults in again). Every
    /// translation goes when too many were noted, or when that fails.
    ///
    /// Enough after leaves changed; not after page-table frames were freed
    /// (an address space released), whose shadow tables KVM keeps by frame:
    /// that is `flush_tlb`.
    pub fn flush_stale(&mut self) -> Result<(), EngineError> {
        let Some(frames) = self.ram.take_stale() else {
            return self.flush_tlb();
        };
        self.drop_translations(&frames)
    }

    /// Drops KVM's cached translations of `frames` (sorted, each once):
    /// each run of adjacent frames has its host pages' write access taken
    /// and given back; every translation goes when that fails.
    pub(super) fn drop_translations(&mut self, frames: &[u64]) -> Result<(), EngineError> {
        for (pa, len) in dirty::runs(frames) {
            if self.ram.renew_host_pages(pa, len).is_err() {
                return self.flush_tlb();
            }
        }
        Ok(())
    }
}
