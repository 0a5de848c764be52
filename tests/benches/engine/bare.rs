//! The bench's bare machine (line (a) of `engine.rs`): KVM driven directly,
//! with no engine, as the baseline every engine figure is a ratio of.

use kvm_bindings::{kvm_msr_entry, kvm_segment, kvm_userspace_memory_region, Msrs};
use kvm_ioctls::{Kvm, SyncReg, VcpuExit, VcpuFd};
use std::time::Instant;

// ---------------------------------------------------------------------------
// (a): a bare machine, as in ../shared/probes/kvm-probe.c: identity-mapped
// page tables, a GDT, IDT and TSS, the syscall MSRs, a one-`out` entry for
// syscall and for every exception vector, and user code in ring 3.
//
// Guest physical layout:
//   0x1000   syscall entry: out 0x20, al (user-readable: PVM needs it)
//   0x2000   IDT stubs, 4 bytes each: out 0x80+vector, al
//   0x8000   top of the ring-0 stack (TSS.RSP0)
//   0x10000  PML4, 0x11000 PDPT, 0x12000 PD, 0x13000 page table for 0-2 MiB
//   0x20000  GDT, 0x21000 IDT, 0x30000 TSS
//   0x400000 page tables for virtual 4 MiB.. (demand paged, 4 KiB pages),
//            contiguous: one 8-byte entry per virtual page from 4 MiB
//   0x200000 user code (a 2 MiB user page), user stack below 0x300000
//   0x1000000.. frames handed out on demand

const MEM: usize = 192 << 20;
/// Demand-paging rounds; each touches its own 32 MiB of virtual addresses,
/// since the guest TLB keeps what an earlier round mapped.
pub const FAULT_ROUNDS: u64 = 4;
const FAULT_PTS: u64 = 0x400000;
const FAULT_VIRT: u64 = 0x400000;
const FAULT_ROUND_BYTES: u64 = 32 << 20;
const SYSCALL_PORT: u16 = 0x20;

pub struct Bare {
    _kvm: Kvm,
    _vm: kvm_ioctls::VmFd,
    vcpu: std::cell::RefCell<VcpuFd>,
    mem: *mut u8,
}

/// A flat ring-3 segment: user code (64-bit) or user data.
fn user_seg(selector: u16, code: bool) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector,
        type_: if code { 11 } else { 3 },
        present: 1,
        dpl: 3,
        db: u8::from(!code),
        s: 1,
        l: u8::from(code),
        g: 1,
        ..Default::default()
    }
}

impl Bare {
    pub fn new() -> Bare {
        Bare::with_dirty_log(false)
    }

    /// A bare machine whose memory slot keeps a dirty log when `dirty_log`
    /// (as the engine's does, for keyframes).
    pub fn with_dirty_log(dirty_log: bool) -> Bare {
        let kvm = Kvm::new().expect("open /dev/kvm");
        let vm = kvm.create_vm().expect("KVM_CREATE_VM");
        let mem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MEM,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(mem, libc::MAP_FAILED);
        let mem = mem as *mut u8;
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: if dirty_log {
                kvm_bindings::KVM_MEM_LOG_DIRTY_PAGES
            } else {
                0
            },
            guest_phys_addr: 0,
            memory_size: MEM as u64,
            userspace_addr: mem as u64,
        };
        unsafe { vm.set_user_memory_region(region) }.expect("memory region");
        let vcpu = vm.create_vcpu(0).expect("KVM_CREATE_VCPU");
        let b = Bare {
            _kvm: kvm,
            _vm: vm,
            vcpu: std::cell::RefCell::new(vcpu),
            mem,
        };
        // Page tables.
        b.w64(0x10000, 0x11000 | 7);
        b.w64(0x11000, 0x12000 | 7);
        b.w64(0x12000, 0x13000 | 7);
        for i in 0..512u64 {
            b.w64(0x13000 + i * 8, (i * 0x1000) | 3); // supervisor only...
        }
        b.w64(0x13000 + 8, 0x1000 | 5); // ...but the syscall entry: user, read-only
        b.w64(0x12000 + 8, 0x200000 | 0x87); // 2-4 MiB: one user 2 MiB page
        for i in 0..FAULT_ROUNDS * 16 {
            b.w64(0x12000 + (2 + i) * 8, (FAULT_PTS + i * 0x1000) | 7);
        }
        // GDT: null, kernel code 0x08, kernel data 0x10, user data 0x1b, user code 0x23, TSS 0x28.
        for (i, d) in [
            0u64,
            0x00af9b000000ffff,
            0x00cf93000000ffff,
            0x00cff3000000ffff,
            0x00affb000000ffff,
            0x67 | (0x30000 << 16) | (0x89 << 40),
            0,
        ]
        .into_iter()
        .enumerate()
        {
            b.w64(0x20000 + i as u64 * 8, d);
        }
        b.w64(0x30000 + 4, 0x8000); // TSS.RSP0
        for v in 0..32u64 {
            let off = 0x2000 + v * 4;
            b.w8(off, 0xe6);
            b.w8(off + 1, 0x80 + v as u8);
            b.w64(
                0x21000 + v * 16,
                (off & 0xffff) | (0x8 << 16) | (0x8E << 40) | ((off >> 16) << 48),
            );
            b.w64(0x21000 + v * 16 + 8, 0);
        }
        b.w8(0x1000, 0xe6);
        b.w8(0x1001, SYSCALL_PORT as u8);
        let msrs = Msrs::from_entries(&[
            kvm_msr_entry {
                index: 0xC000_0081,
                data: (0x10 << 48) | (0x8 << 32),
                ..Default::default()
            },
            kvm_msr_entry {
                index: 0xC000_0082,
                data: 0x1000,
                ..Default::default()
            },
            kvm_msr_entry {
                index: 0xC000_0084,
                data: 0x200,
                ..Default::default()
            },
        ])
        .unwrap();
        let mut vcpu = b.vcpu.borrow_mut();
        assert_eq!(vcpu.set_msrs(&msrs).expect("KVM_SET_MSRS"), 3);
        let cpuid = b
            ._kvm
            .get_supported_cpuid(kvm_bindings::KVM_MAX_CPUID_ENTRIES)
            .expect("KVM_GET_SUPPORTED_CPUID");
        vcpu.set_cpuid2(&cpuid).expect("KVM_SET_CPUID2");
        vcpu.set_sync_valid_reg(SyncReg::Register);
        vcpu.set_sync_valid_reg(SyncReg::SystemRegister);
        drop(vcpu);
        b
    }

    fn w64(&self, at: u64, v: u64) {
        assert!((at as usize) + 8 <= MEM);
        unsafe { (self.mem.add(at as usize) as *mut u64).write_unaligned(v) }
    }

    fn r64(&self, at: u64) -> u64 {
        assert!((at as usize) + 8 <= MEM);
        unsafe { (self.mem.add(at as usize) as *const u64).read_unaligned() }
    }

    fn w8(&self, at: u64, v: u8) {
        assert!((at as usize) < MEM);
        unsafe { self.mem.add(at as usize).write(v) }
    }

    /// Loads user code at 0x200000 and points the vCPU at it, in ring 3.
    fn user(&self, code: &[u8], rbx: u64) {
        for (i, byte) in code.iter().enumerate() {
            self.w8(0x200000 + i as u64, *byte);
        }
        let vcpu = self.vcpu.borrow();
        let mut s = vcpu.get_sregs().expect("KVM_GET_SREGS");
        s.cr3 = 0x10000;
        s.cr0 = 0x8005_0033;
        s.efer = 0x501;
        s.cr4 = (1 << 5) | (1 << 9) | (1 << 10);
        s.gdt.base = 0x20000;
        s.gdt.limit = 7 * 8 - 1;
        s.idt.base = 0x21000;
        s.idt.limit = 256 * 16 - 1;
        s.cs = user_seg(0x23, true);
        let uds = user_seg(0x1b, false);
        (s.ds, s.es, s.fs, s.gs, s.ss) = (uds, uds, uds, uds, uds);
        s.tr = kvm_segment {
            base: 0x30000,
            limit: 0x67,
            selector: 0x28,
            present: 1,
            type_: 11,
            ..Default::default()
        };
        vcpu.set_sregs(&s).expect("KVM_SET_SREGS");
        let r = kvm_bindings::kvm_regs {
            rip: 0x200000,
            rflags: 2,
            rsp: 0x300000,
            rbx,
            ..Default::default()
        };
        vcpu.set_regs(&r).expect("KVM_SET_REGS");
    }

    /// Runs to the next exit: Some(256) for a syscall, Some(vector) for an
    /// exception, None for anything else.
    fn next_exit(&self) -> Option<u16> {
        let mut vcpu = self.vcpu.borrow_mut();
        match vcpu.run() {
            Ok(VcpuExit::IoOut(SYSCALL_PORT, _)) => Some(256),
            Ok(VcpuExit::IoOut(port, _)) if (0x80..0xa0).contains(&port) => Some(port - 0x80),
            _ => None,
        }
    }

    /// Back to ring 3 through sync regs, from a syscall (rcx/r11) or from an
    /// exception frame with an error code on the ring-0 stack.
    fn resume_user(&self, from_syscall: bool) {
        let mut vcpu = self.vcpu.borrow_mut();
        let rsp = vcpu.sync_regs().regs.rsp;
        let frame = if from_syscall {
            None
        } else {
            Some([self.r64(rsp + 8), self.r64(rsp + 24), self.r64(rsp + 32)])
        };
        let sync = vcpu.sync_regs_mut();
        match frame {
            None => {
                sync.regs.rip = sync.regs.rcx;
                sync.regs.rflags = sync.regs.r11;
            }
            Some([rip, rflags, rsp]) => {
                sync.regs.rip = rip;
                sync.regs.rflags = rflags;
                sync.regs.rsp = rsp;
            }
        }
        vcpu.set_sync_dirty_reg(SyncReg::Register);
        // As the engine: segments written back only when the exit left
        // ring 3 (a PVM `syscall` does not), a KVM_SET_SREGS saved.
        let (cs, ss) = (user_seg(0x23, true), user_seg(0x1b, false));
        let sregs = &mut vcpu.sync_regs_mut().sregs;
        if sregs.cs != cs || sregs.ss != ss {
            sregs.cs = cs;
            sregs.ss = ss;
            vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
        }
    }
}

/// Microseconds per syscall round trip over `n` calls.
pub fn bare_syscalls(b: &Bare, n: u64) -> f64 {
    // mov eax, 39; syscall; dec rbx; jnz -12; ud2
    let code = [
        0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0x48, 0xff, 0xcb, 0x75, 0xf4, 0x0f, 0x0b,
    ];
    b.user(&code, n);
    let t = Instant::now();
    let mut calls = 0;
    let last = loop {
        match b.next_exit() {
            Some(256) => {
                calls += 1;
                b.vcpu.borrow_mut().sync_regs_mut().regs.rax = 1234;
                b.resume_user(true);
            }
            other => break other,
        }
    };
    let elapsed = t.elapsed().as_secs_f64();
    assert_eq!(last, Some(6), "the syscall loop should end in #UD");
    assert_eq!(calls, n);
    elapsed * 1e6 / n as f64
}

/// Microseconds per demand page fault over `n` pages of round `round`'s
/// 32 MiB of virtual addresses.
pub fn bare_faults(b: &Bare, round: u64, n: u64) -> f64 {
    assert!(n <= FAULT_ROUND_BYTES / 4096 && round < FAULT_ROUNDS);
    let start = FAULT_VIRT + round * FAULT_ROUND_BYTES;
    b.user(&touch_loop(start), n);
    // Frames after the page tables' area, each round its own.
    let mut frame = 0x1000000 + round * FAULT_ROUND_BYTES;
    let t = Instant::now();
    let mut faults = 0;
    let last = loop {
        match b.next_exit() {
            Some(14) => {
                let cr2 = b.vcpu.borrow().sync_regs().sregs.cr2;
                b.w64(FAULT_PTS + (cr2 - FAULT_VIRT) / 4096 * 8, frame | 7);
                frame += 4096;
                faults += 1;
                b.resume_user(false);
            }
            other => break other,
        }
    };
    let elapsed = t.elapsed().as_secs_f64();
    assert_eq!(last, Some(6), "the touch loop should end in #UD");
    assert_eq!(faults, n);
    elapsed * 1e6 / n as f64
}

/// Microseconds per first touch of `n` pages of round `round` that the
/// guest's page tables already map (present, accessed, dirty): no exit,
/// only KVM building its own translation of each (a shadow fault on PVM).
pub fn bare_touches(b: &Bare, round: u64, n: u64) -> f64 {
    assert!(n <= FAULT_ROUND_BYTES / 4096 && round < FAULT_ROUNDS);
    let start = FAULT_VIRT + round * FAULT_ROUND_BYTES;
    let frames = 0x1000000 + round * FAULT_ROUND_BYTES;
    for i in 0..n {
        let frame = frames + i * 4096;
        // Present, writable, user, accessed, dirty; the host page exists.
        b.w64(
            FAULT_PTS + (start - FAULT_VIRT) / 4096 * 8 + i * 8,
            frame | 0x67,
        );
        b.w8(frame, 1);
    }
    b.user(&touch_loop(start), n);
    let t = Instant::now();
    let last = b.next_exit();
    let elapsed = t.elapsed().as_secs_f64();
    assert_eq!(
        last,
        Some(6),
        "the touch loop should end in #UD, without a fault"
    );
    elapsed * 1e6 / n as f64
}

/// mov rax, start; mov [rax], rax; add rax, 0x1000; dec rbx; jnz; ud2
fn touch_loop(start: u64) -> Vec<u8> {
    let mut code = vec![0x48, 0xc7, 0xc0];
    code.extend_from_slice(&(start as u32).to_le_bytes());
    code.extend_from_slice(&[
        0x48, 0x89, 0x00, 0x48, 0x05, 0, 0x10, 0, 0, 0x48, 0xff, 0xcb, 0x75, 0xf2, 0x0f, 0x0b,
    ]);
    code
}
