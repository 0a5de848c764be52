//! The x86-64 signal frame, laid out as Linux's x64_setup_rt_frame and
//! get_sigframe do, and read back by rt_sigreturn.
//!
//! From the interrupted rsp, less the 128-byte red zone (or from the top of
//! the alternate stack, under SA_ONSTACK), down:
//!
//! ```text
//! fpstate   64-aligned: the XSAVE image (standard format) of xstate_size
//!           bytes, its fxsave bytes 464..512 holding fpx_sw_bytes
//!           {magic1 = FP_XSTATE_MAGIC1, extended_size = xstate_size + 4,
//!           xfeatures = XCR0, xstate_size}, then FP_XSTATE_MAGIC2 (4 bytes)
//! frame     (16-aligned) - 8, so rsp + 8 is 16-aligned at the handler's entry:
//!   0    pretcode       sa_restorer, the handler's return address
//!   8    ucontext       uc_flags, uc_link, uc_stack {ss_sp, ss_flags, ss_size},
//!   48                  uc_mcontext (struct sigcontext, 256 bytes),
//!   304                 uc_sigmask (8 bytes)
//!   312  siginfo        128 bytes
//!   440  (end)
//! ```
//!
//! sigcontext: r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip, eflags
//! (18 words, glibc's gregs[0..18]), cs, gs, fs, ss (u16 each), err,
//! trapno, oldmask, cr2, fpstate, 8 reserved words.

use super::calls::StackT;
use super::*;
use crate::machine::{gdt, ExtendedState};
use crate::EngineError;
use kvm_bindings::kvm_xsave;
use std::sync::OnceLock;

/// Why a frame could not be built or read back.
pub(crate) enum FrameError {
    /// The guest's memory or the frame's contents are bad: the thread gets SIGSEGV.
    Fault,
    /// The monitor itself failed (KVM).
    Engine(EngineError),
}

const REDZONE: u64 = 128;
const FRAME_SIZE: u64 = 440;
const FRAME_UC: u64 = 8;
const FRAME_INFO: u64 = 312;
const UC_SIZE: usize = 304;
const UC_STACK: usize = 16;
const UC_MCONTEXT: usize = 40;
const UC_SIGMASK: usize = 296;
/// Within the sigcontext.
const SC_SEGMENTS: usize = 144;
const SC_ERR: usize = 152;
const SC_TRAPNO: usize = 160;
const SC_OLDMASK: usize = 168;
const SC_CR2: usize = 176;
const SC_FPSTATE: usize = 184;
/// Words of general registers at the start of the sigcontext.
const SC_GREGS: usize = 18;

const UC_FP_XSTATE: u64 = 1;
const UC_SIGCONTEXT_SS: u64 = 2;
const UC_STRICT_RESTORE_SS: u64 = 4;

const FP_XSTATE_MAGIC1: u32 = 0x4650_5853;
const FP_XSTATE_MAGIC2: u32 = 0x4650_5845;
const FP_XSTATE_MAGIC2_SIZE: usize = 4;
/// The fxsave (legacy) area, and the XSAVE header after it.
const FXSAVE_SIZE: usize = 512;
const XSAVE_HEADER: usize = 512;
const XSAVE_MIN: usize = 576;
/// fpx_sw_bytes: the software-reserved bytes 464..512 of the fxsave area.
const SW_BYTES: usize = 464;
const FCW: usize = 0;
const MXCSR: usize = 24;
const MXCSR_MASK: usize = 28;
const FCW_DEFAULT: u16 = 0x37f;
const MXCSR_DEFAULT: u32 = 0x1f80;
/// MXCSR bits a program may set (bits 16..31 are reserved).
const MXCSR_VALID: u32 = 0xffff;
/// x87 and SSE, always in a frame's XSTATE_BV.
const XFEATURE_FPSSE: u64 = 3;
/// The size of KVM's XSAVE buffer: components past it are not carried.
const KVM_XSAVE_SIZE: usize = 4096;

const RFLAGS_TF: u64 = 1 << 8;
const RFLAGS_DF: u64 = 1 << 10;
const RFLAGS_RF: u64 = 1 << 16;
/// The flags rt_sigreturn takes from the frame (Linux's FIX_EFLAGS).
const FIX_EFLAGS: u64 =
    0x1 | 0x4 | 0x10 | 0x40 | 0x80 | RFLAGS_TF | RFLAGS_DF | 0x800 | 0x4_0000 | RFLAGS_RF;

/// The x86 exception vector of a page fault: its sigcontext carries cr2.
const VEC_PAGE_FAULT: u8 = 14;

fn canonical(a: u64) -> bool {
    !(0x0000_8000_0000_0000..0xffff_8000_0000_0000).contains(&a)
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// (size, offset) of each XSAVE component in the standard format (CPUID leaf 0xd).
fn components() -> &'static [(u32, u32); 64] {
    static TABLE: OnceLock<[(u32, u32); 64]> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = [(0u32, 0u32); 64];
        for (i, c) in t.iter_mut().enumerate().skip(2) {
            #[allow(unused_unsafe)]
            // SAFETY: cpuid is always available on x86-64.
            let r = unsafe { std::arch::x86_64::__cpuid_count(0xd, i as u32) };
            // ECX bit 0: a supervisor component, never in XCR0's user image.
            if r.ecx & 1 == 0 {
                *c = (r.eax, r.ebx);
            }
        }
        t
    })
}

/// The user XSAVE image for `xcr0`: its features and size (Linux's
/// fpu_user_cfg.max_features and max_size), within what KVM carries.
fn user_xstate(xcr0: u64) -> (u64, usize) {
    let mut features = xcr0 & XFEATURE_FPSSE;
    let mut size = XSAVE_MIN;
    for (i, &(len, off)) in components().iter().enumerate().skip(2) {
        let end = (off + len) as usize;
        if xcr0 & (1 << i) != 0 && len != 0 && end <= KVM_XSAVE_SIZE {
            features |= 1 << i;
            size = size.max(end);
        }
    }
    (features, size)
}

fn xsave_bytes(x: &ExtendedState) -> Vec<u8> {
    x.0.region.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn xsave_from(bytes: &[u8]) -> ExtendedState {
    let mut region = [0u32; KVM_XSAVE_SIZE / 4];
    for (w, c) in region.iter_mut().zip(bytes.chunks_exact(4)) {
        *w = u32::from_le_bytes(c.try_into().unwrap());
    }
    ExtendedState(Box::new(kvm_xsave {
        region,
        extra: Default::default(),
    }))
}

/// The state a handler starts with (Linux's fpu__clear_user_states): x87
/// and SSE at their reset values, every other component in its init state.
fn init_xstate(current: &[u8]) -> ExtendedState {
    let mut img = vec![0u8; KVM_XSAVE_SIZE];
    img[FCW..FCW + 2].copy_from_slice(&FCW_DEFAULT.to_le_bytes());
    put_u32(&mut img, MXCSR, MXCSR_DEFAULT);
    img[MXCSR_MASK..MXCSR_MASK + 4].copy_from_slice(&current[MXCSR_MASK..MXCSR_MASK + 4]);
    put_u64(&mut img, XSAVE_HEADER, XFEATURE_FPSSE);
    xsave_from(&img)
}

impl Kernel<'_> {
    /// Builds the handler's frame for the current thread and points its
    /// registers at the handler. `oldmask` is the mask rt_sigreturn restores.
    pub(super) fn setup_frame(
        &mut self,
        info: &SigInfo,
        act: &SigAction,
        oldmask: u64,
    ) -> Result<(), FrameError> {
        // x86-64 has no default return path: a handler needs SA_RESTORER.
        if act.flags & SA_RESTORER == 0 || !canonical(act.handler) {
            return Err(FrameError::Fault);
        }
        let regs = self.m.regs();
        let alt = self.cur_thread().signals.altstack;
        let nested = alt.on(regs.rsp);
        let mut sp = regs.rsp.wrapping_sub(REDZONE);
        let mut entering = false;
        if act.flags & SA_ONSTACK != 0 && alt.flags_at(sp) == 0 {
            sp = alt.sp.wrapping_add(alt.size);
            entering = true;
        }

        let saved = self.m.save_xstate().map_err(FrameError::Engine)?;
        let saved_bytes = saved.as_ref().map(xsave_bytes);
        let mut fpstate = 0u64;
        let mut fp_image = Vec::new();
        if let (Some(bytes), Some(xcr0)) = (&saved_bytes, self.m.xcr0()) {
            let (features, size) = user_xstate(xcr0);
            let mut img = bytes[..size].to_vec();
            img[SW_BYTES..FXSAVE_SIZE].fill(0);
            put_u32(&mut img, SW_BYTES, FP_XSTATE_MAGIC1);
            put_u32(
                &mut img,
                SW_BYTES + 4,
                (size + FP_XSTATE_MAGIC2_SIZE) as u32,
            );
            put_u64(&mut img, SW_BYTES + 8, features);
            put_u32(&mut img, SW_BYTES + 16, size as u32);
            let bv = get_u64(&img, XSAVE_HEADER) | XFEATURE_FPSSE;
            put_u64(&mut img, XSAVE_HEADER, bv);
            img.extend_from_slice(&FP_XSTATE_MAGIC2.to_le_bytes());
            fpstate = sp.wrapping_sub(img.len() as u64) & !63;
            sp = fpstate;
            fp_image = img;
        }
        let frame = (sp.wrapping_sub(FRAME_SIZE) & !15).wrapping_sub(8);
        // On the alternate stack and about to overflow it: don't.
        if (nested || entering) && !alt.contains(frame) {
            return Err(FrameError::Fault);
        }

        let mut f = vec![0u8; FRAME_SIZE as usize];
        put_u64(&mut f, 0, act.restorer);
        let uc = FRAME_UC as usize;
        let uc_flags = if fpstate != 0 {
            UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS
        } else {
            UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS
        };
        put_u64(&mut f, uc, uc_flags);
        put_u64(&mut f, uc + UC_STACK, alt.sp);
        put_u32(&mut f, uc + UC_STACK + 8, alt.flags as u32);
        put_u64(&mut f, uc + UC_STACK + 16, alt.size);
        let sc = uc + UC_MCONTEXT;
        let gregs = [
            regs.r8,
            regs.r9,
            regs.r10,
            regs.r11,
            regs.r12,
            regs.r13,
            regs.r14,
            regs.r15,
            regs.rdi,
            regs.rsi,
            regs.rbp,
            regs.rbx,
            regs.rdx,
            regs.rax,
            regs.rcx,
            regs.rsp,
            regs.rip,
            regs.rflags,
        ];
        for (i, v) in gregs.iter().enumerate() {
            put_u64(&mut f, sc + i * 8, *v);
        }
        let seg = sc + SC_SEGMENTS;
        f[seg..seg + 2].copy_from_slice(&gdt::USER_CS.to_le_bytes());
        f[seg + 6..seg + 8].copy_from_slice(&gdt::USER_DS.to_le_bytes());
        if let Some((vector, err)) = info.trap {
            put_u64(&mut f, sc + SC_ERR, err);
            put_u64(&mut f, sc + SC_TRAPNO, vector as u64);
            if vector == VEC_PAGE_FAULT {
                put_u64(&mut f, sc + SC_CR2, info.addr);
            }
        }
        put_u64(&mut f, sc + SC_OLDMASK, oldmask);
        put_u64(&mut f, sc + SC_FPSTATE, fpstate);
        put_u64(&mut f, uc + UC_SIGMASK, oldmask);
        if act.flags & SA_SIGINFO != 0 {
            let at = FRAME_INFO as usize;
            f[at..at + 128].copy_from_slice(&info.to_bytes());
        }

        if fpstate != 0 {
            self.write_user(fpstate, &fp_image)
                .map_err(|_| FrameError::Fault)?;
        }
        self.write_user(frame, &f).map_err(|_| FrameError::Fault)?;

        let r = self.m.regs_mut();
        r.rdi = info.signo as u64;
        r.rsi = frame + FRAME_INFO;
        r.rdx = frame + FRAME_UC;
        r.rax = 0;
        r.rip = act.handler;
        r.rsp = frame;
        r.rflags &= !(RFLAGS_DF | RFLAGS_RF | RFLAGS_TF);
        if let Some(bytes) = &saved_bytes {
            self.m
                .restore_xstate(&init_xstate(bytes))
                .map_err(FrameError::Engine)?;
        }
        if alt.flags & SS_AUTODISARM != 0 {
            self.cur_thread().signals.altstack = AltStack::default();
        }
        Ok(())
    }

    /// rt_sigreturn: restores registers, mask, extended state and
    /// alternate stack from the frame at rsp - 8. Nothing changes when the
    /// frame is bad.
    pub(super) fn restore_frame(&mut self) -> Result<(), FrameError> {
        let regs = self.m.regs();
        let frame = regs.rsp.wrapping_sub(8);
        let uc = self
            .read_user(frame.wrapping_add(FRAME_UC), UC_SIZE)
            .map_err(|_| FrameError::Fault)?;
        let sc = UC_MCONTEXT;
        let g: Vec<u64> = (0..SC_GREGS).map(|i| get_u64(&uc, sc + i * 8)).collect();
        let rip = g[16];
        if !canonical(rip) {
            return Err(FrameError::Fault);
        }
        let fpstate = get_u64(&uc, sc + SC_FPSTATE);
        let xstate = self.read_fpstate(fpstate)?;
        let mask = get_u64(&uc, UC_SIGMASK) & !UNBLOCKABLE;
        let stack = StackT {
            sp: get_u64(&uc, UC_STACK),
            flags: get_u32(&uc, UC_STACK + 8) as i32,
            pad: 0,
            size: get_u64(&uc, UC_STACK + 16),
        };
        if let Some(x) = &xstate {
            // KVM refuses what XRSTOR would fault on: a bad frame.
            self.m.restore_xstate(x).map_err(|_| FrameError::Fault)?;
        }
        let r = self.m.regs_mut();
        r.r8 = g[0];
        r.r9 = g[1];
        r.r10 = g[2];
        r.r11 = g[3];
        r.r12 = g[4];
        r.r13 = g[5];
        r.r14 = g[6];
        r.r15 = g[7];
        r.rdi = g[8];
        r.rsi = g[9];
        r.rbp = g[10];
        r.rbx = g[11];
        r.rdx = g[12];
        r.rax = g[13];
        r.rcx = g[14];
        r.rsp = g[15];
        r.rip = rip;
        r.rflags = (r.rflags & !FIX_EFLAGS) | (g[17] & FIX_EFLAGS);
        self.cur_thread().signals.mask = mask;
        // Linux squashes every error of this but EFAULT (already excluded).
        let _ = self.set_altstack(stack, g[15]);
        Ok(())
    }

    /// The extended state a frame's fpstate holds (Linux's fpu__restore_sig):
    /// the full XSAVE image when its fpx_sw_bytes and FP_XSTATE_MAGIC2 say
    /// so, else only the fxsave area with every other component reset;
    /// a null fpstate resets all. None when the machine has no XSAVE.
    fn read_fpstate(&mut self, fp: u64) -> Result<Option<ExtendedState>, FrameError> {
        let Some(xcr0) = self.m.xcr0() else {
            return Ok(None);
        };
        let (features, max) = user_xstate(xcr0);
        if fp == 0 {
            let cur = self.m.save_xstate().map_err(FrameError::Engine)?;
            return Ok(cur.map(|c| init_xstate(&xsave_bytes(&c))));
        }
        // FXRSTOR needs 16-byte alignment and XRSTOR 64: either faults.
        if !fp.is_multiple_of(16) {
            return Err(FrameError::Fault);
        }
        let legacy = self
            .read_user(fp, FXSAVE_SIZE)
            .map_err(|_| FrameError::Fault)?;
        let mut full = None;
        if get_u32(&legacy, SW_BYTES) == FP_XSTATE_MAGIC1 {
            let extended = get_u32(&legacy, SW_BYTES + 4) as usize;
            let xfeatures = get_u64(&legacy, SW_BYTES + 8);
            let size = get_u32(&legacy, SW_BYTES + 16) as usize;
            if (XSAVE_MIN..=max).contains(&size)
                && size <= extended
                && self.read_u32(fp + size as u64) == Ok(FP_XSTATE_MAGIC2)
            {
                full = Some((size, xfeatures));
            }
        }
        let mut img = vec![0u8; KVM_XSAVE_SIZE];
        let bv = match full {
            Some(_) if !fp.is_multiple_of(64) => return Err(FrameError::Fault),
            Some((size, xfeatures)) => {
                let b = self.read_user(fp, size).map_err(|_| FrameError::Fault)?;
                img[..size].copy_from_slice(&b);
                let bv = get_u64(&img, XSAVE_HEADER);
                // XRSTOR (standard form) faults on components the CPU lacks
                // and on header bytes 8..24 (XCOMP_BV and the next word) not
                // zero; it ignores the rest, which KVM wants zero.
                if bv & !xcr0 != 0
                    || img[XSAVE_HEADER + 8..XSAVE_HEADER + 24]
                        .iter()
                        .any(|b| *b != 0)
                {
                    return Err(FrameError::Fault);
                }
                img[XSAVE_HEADER + 24..XSAVE_MIN].fill(0);
                bv & xfeatures & features
            }
            None => {
                img[..FXSAVE_SIZE].copy_from_slice(&legacy);
                XFEATURE_FPSSE
            }
        };
        if get_u32(&img, MXCSR) & !MXCSR_VALID != 0 {
            return Err(FrameError::Fault);
        }
        img[SW_BYTES..FXSAVE_SIZE].fill(0);
        put_u64(&mut img, XSAVE_HEADER, bv);
        Ok(Some(xsave_from(&img)))
    }
}
