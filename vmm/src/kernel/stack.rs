//! The initial stack: argc, argv, envp, auxv and the strings they point to,
//! laid out as Linux's ELF loader does.

use super::elf::Loaded;
use super::errno::SysResult;
use super::Kernel;
use crate::machine::layout::STACK_TOP;

pub(super) const AT_NULL: u64 = 0;
pub(super) const AT_PHDR: u64 = 3;
pub(super) const AT_PHENT: u64 = 4;
pub(super) const AT_PHNUM: u64 = 5;
const AT_PAGESZ: u64 = 6;
pub(super) const AT_BASE: u64 = 7;
const AT_FLAGS: u64 = 8;
pub(super) const AT_ENTRY: u64 = 9;
const AT_UID: u64 = 11;
const AT_EUID: u64 = 12;
const AT_GID: u64 = 13;
const AT_EGID: u64 = 14;
const AT_PLATFORM: u64 = 15;
const AT_HWCAP: u64 = 16;
const AT_CLKTCK: u64 = 17;
const AT_SECURE: u64 = 23;
const AT_RANDOM: u64 = 25;
const AT_HWCAP2: u64 = 26;
const AT_EXECFN: u64 = 31;
const AT_MINSIGSTKSZ: u64 = 51;

pub(super) const ELF64_PHDR_SIZE: u64 = 56;
const CLOCK_TICKS_PER_SEC: u64 = 100;
const PLATFORM: &str = "x86_64";
/// Bytes of AT_RANDOM.
const RANDOM_BYTES: usize = 16;
/// Smallest signal stack the guest should use (Linux reports about this with AVX-512).
pub const MIN_SIGSTACK: u64 = 3632;

/// CPUID leaf 1 EDX: what AT_HWCAP reports on x86.
fn hwcap() -> u64 {
    std::arch::x86_64::__cpuid(1).edx as u64
}

impl Kernel<'_> {
    /// Writes the initial stack of a program loaded as `l`, run with `argv`
    /// and `env` from path `execfn`, and returns the stack pointer.
    pub fn build_initial_stack(
        &mut self,
        l: &Loaded,
        argv: &[String],
        env: &[String],
        execfn: &str,
    ) -> SysResult<u64> {
        let mut sp = STACK_TOP;
        let mut push_bytes = |k: &mut Kernel, b: &[u8]| -> SysResult<u64> {
            sp -= b.len() as u64;
            k.write_user(sp, b)?;
            Ok(sp)
        };
        let mut random = [0u8; RANDOM_BYTES];
        self.rng.fill(&mut random);
        let execfn = push_bytes(self, &[execfn.as_bytes(), &[0]].concat())?;
        let platform = push_bytes(self, &[PLATFORM.as_bytes(), &[0]].concat())?;
        let random_at = push_bytes(self, &random)?;
        // The arguments' strings in order, then the environment's, one
        // after another, as Linux's loader lays them (what /proc/<pid>/
        // cmdline and environ read).
        let block = |strings: &[String]| -> Vec<u8> {
            strings.iter().flat_map(|s| s.bytes().chain([0])).collect()
        };
        let pointers = |start: u64, strings: &[String]| -> Vec<u64> {
            let mut at = start;
            strings
                .iter()
                .map(|s| {
                    let p = at;
                    at += s.len() as u64 + 1;
                    p
                })
                .collect()
        };
        let (env_block, arg_block) = (block(env), block(argv));
        let env_at = push_bytes(self, &env_block)?;
        let args_at = push_bytes(self, &arg_block)?;
        let (arg_at, envp) = (pointers(args_at, argv), pointers(env_at, env));
        self.cur_proc().strings = super::task::StackStrings {
            args: (args_at, env_at),
            env: (env_at, env_at + env_block.len() as u64),
        };
        let auxv = [
            (AT_PHDR, l.phdr),
            (AT_PHENT, ELF64_PHDR_SIZE),
            (AT_PHNUM, l.phnum),
            (AT_PAGESZ, crate::machine::layout::PAGE_SIZE),
            (AT_BASE, l.interp_base),
            (AT_FLAGS, 0),
            (AT_ENTRY, l.entry),
            (AT_UID, 0),
            (AT_EUID, 0),
            (AT_GID, 0),
            (AT_EGID, 0),
            (AT_SECURE, 0),
            (AT_HWCAP, hwcap()),
            (AT_HWCAP2, 0),
            (AT_CLKTCK, CLOCK_TICKS_PER_SEC),
            (AT_PLATFORM, platform),
            (AT_RANDOM, random_at),
            (AT_EXECFN, execfn),
            (AT_MINSIGSTKSZ, MIN_SIGSTACK),
            (AT_NULL, 0),
        ];
        let mut words = vec![argv.len() as u64];
        words.extend(&arg_at);
        words.push(0);
        words.extend(&envp);
        words.push(0);
        for (k, v) in auxv {
            words.push(k);
            words.push(v);
        }
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let top = (sp - bytes.len() as u64) & !0xf;
        self.write_user(top, &bytes)?;
        Ok(top)
    }
}
