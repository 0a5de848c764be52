//! The monitor's own files: `/dev/null`, `/dev/zero`, `/dev/full`,
//! `/dev/random` and `/dev/urandom` (bytes of the run's seeded generator),
//! `/dev/tty` (ENXIO: no controlling terminal), `/proc/cpuinfo` and
//! `/proc/self/{exe,cwd,maps,cmdline,stat,status,fd/N}`.

use super::super::errno::*;
use super::super::Kernel;
use super::vfs::{Device, Ino, Kind, Node, Proc, Tree, S_IFLNK};
use std::fmt::Write;

/// Most bytes one read of a device gives (a short read past it).
pub const DEVICE_READ_MAX: usize = 16 << 20;

/// The node of `/proc/self/fd/N`.
pub fn fd_node(tree: &mut Tree, dir: Ino, n: i32) -> Ino {
    tree.dyn_node(dir, &n.to_string(), || {
        Node::new(S_IFLNK | 0o700, 64, 0, Kind::Proc(Proc::Fd(n)))
    })
}

/// What a read of `len` bytes of a device gives.
pub fn device_read(k: &mut Kernel, d: Device, len: usize) -> Vec<u8> {
    let n = len.min(DEVICE_READ_MAX);
    match d {
        Device::Null => Vec::new(),
        Device::Zero | Device::Full | Device::Tty => vec![0; n],
        Device::Random => {
            let mut v = vec![0; n];
            k.rng.fill(&mut v);
            v
        }
    }
}

/// What a write of `len` bytes to a device returns.
pub fn device_write(d: Device, len: usize) -> SysResult<u64> {
    match d {
        Device::Full => Err(ENOSPC),
        _ => Ok(len as u64),
    }
}

/// The contents of a generated file, as of now.
pub fn generate(k: &mut Kernel, p: &Proc) -> SysResult<Vec<u8>> {
    Ok(match p {
        Proc::Maps => maps(k).into_bytes(),
        Proc::Cmdline => {
            let mut v = Vec::new();
            for a in &k.inputs.manifest.argv {
                v.extend_from_slice(a.as_bytes());
                v.push(0);
            }
            v
        }
        Proc::Text(t) => t.clone().into_bytes(),
        Proc::Stat => stat(k).into_bytes(),
        Proc::Status => status(k).into_bytes(),
        _ => return Err(EINVAL),
    })
}

/// `/proc/self/maps`, from the process's mappings.
fn maps(k: &mut Kernel) -> String {
    let exe = k.cur_proc().exe.clone();
    let mut out = String::new();
    for (start, v) in k.cur_proc().mm.vmas() {
        let p = v.prot;
        let mut line = format!(
            "{:08x}-{:08x} {}{}{}p 00000000 00:00 0",
            start,
            v.end,
            if p.read { 'r' } else { '-' },
            if p.write { 'w' } else { '-' },
            if p.exec { 'x' } else { '-' },
        );
        // The program, the files mapped (the interpreter, libraries), and
        // Linux's bracketed names.
        let name = match v.name.as_str() {
            "[anon]" | "[file]" => "",
            n if n == exe || n.starts_with('/') || n.starts_with('[') => n,
            _ => "",
        };
        if !name.is_empty() {
            while line.len() < 73 {
                line.push(' ');
            }
            line.push_str(name);
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// `/proc/self/stat`: the fields Linux gives, from the process's state
/// (times in clock ticks of the virtual clock; no page faults counted).
fn stat(k: &mut Kernel) -> String {
    let pid = k.cur_pid();
    let ticks = k.clock.elapsed_ns() / 10_000_000;
    let p = &k.procs[&pid];
    let name = k
        .threads
        .get(&pid)
        .map_or_else(String::new, |t| t.name.clone());
    let threads = p.threads.len();
    let vsize: u64 = p.mm.vmas().map(|(s, v)| v.end - s).sum();
    let (brk_start, brk) = (p.mm.brk_start, p.mm.brk);
    let stack = crate::machine::layout::STACK_TOP;
    // pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt
    // majflt cmajflt utime stime cutime cstime priority nice num_threads
    // itrealvalue starttime vsize rss rsslim, then addresses and signals.
    format!(
        "{pid} ({name}) R {} {pid} {pid} 0 -1 4194304 0 0 0 0 {ticks} 0 0 0 20 0 {threads} 0 0 \
         {vsize} 0 18446744073709551615 0 0 {stack} 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 \
         {brk_start} {brk} {stack} {stack} {stack} {stack} 0\n",
        p.ppid
    )
}

/// `/proc/self/status`: the lines programs read (name, ids, threads, umask).
fn status(k: &mut Kernel) -> String {
    let pid = k.cur_pid();
    let tid = k.cur_tid();
    let p = &k.procs[&pid];
    let name = k
        .threads
        .get(&tid)
        .map_or_else(String::new, |t| t.name.clone());
    let vm_kb: u64 = p.mm.vmas().map(|(s, v)| v.end - s).sum::<u64>() / 1024;
    format!(
        "Name:\t{name}\nUmask:\t{:04o}\nState:\tR (running)\nTgid:\t{pid}\nNgid:\t0\n\
         Pid:\t{pid}\nPPid:\t{}\nTracerPid:\t0\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n\
         FDSize:\t64\nGroups:\t\nVmSize:\t{vm_kb:8} kB\nThreads:\t{}\n\
         SigQ:\t0/63459\nCpus_allowed_list:\t0-{}\n",
        p.umask,
        p.ppid,
        p.threads.len(),
        k.inputs.manifest.cores.max(1) - 1
    )
}

/// `/proc/cpuinfo` for `cores` processors, from this CPU's CPUID (which
/// the guest reads itself too): vendor, family, model, name and the flags
/// of the common features.
pub fn cpuinfo(cores: u32) -> String {
    use std::arch::x86_64::__cpuid;
    let l0 = __cpuid(0);
    let vendor: Vec<u8> = [l0.ebx, l0.edx, l0.ecx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    let vendor = String::from_utf8_lossy(&vendor).into_owned();
    let l1 = __cpuid(1);
    let family = ((l1.eax >> 8) & 0xf) + ((l1.eax >> 20) & 0xff);
    let model = ((l1.eax >> 4) & 0xf) | ((l1.eax >> 12) & 0xf0);
    let stepping = l1.eax & 0xf;
    let brand = if __cpuid(0x8000_0000).eax >= 0x8000_0004 {
        let b: Vec<u8> = (0x8000_0002u32..=0x8000_0004)
            .flat_map(|leaf| {
                let r = __cpuid(leaf);
                [r.eax, r.ebx, r.ecx, r.edx]
            })
            .flat_map(|r| r.to_le_bytes())
            .collect();
        String::from_utf8_lossy(&b)
            .trim_matches(char::from(0))
            .trim()
            .to_string()
    } else {
        String::new()
    };
    let l7 = if l0.eax >= 7 { __cpuid(7).ebx } else { 0 };
    let flags: Vec<&str> = [
        (l1.edx, 0, "fpu"),
        (l1.edx, 4, "tsc"),
        (l1.edx, 15, "cmov"),
        (l1.edx, 23, "mmx"),
        (l1.edx, 24, "fxsr"),
        (l1.edx, 25, "sse"),
        (l1.edx, 26, "sse2"),
        (l1.ecx, 0, "pni"),
        (l1.ecx, 1, "pclmulqdq"),
        (l1.ecx, 9, "ssse3"),
        (l1.ecx, 12, "fma"),
        (l1.ecx, 13, "cx16"),
        (l1.ecx, 19, "sse4_1"),
        (l1.ecx, 20, "sse4_2"),
        (l1.ecx, 22, "movbe"),
        (l1.ecx, 23, "popcnt"),
        (l1.ecx, 25, "aes"),
        (l1.ecx, 26, "xsave"),
        (l1.ecx, 28, "avx"),
        (l1.ecx, 29, "f16c"),
        (l1.ecx, 30, "rdrand"),
        (l7, 3, "bmi1"),
        (l7, 5, "avx2"),
        (l7, 8, "bmi2"),
        (l7, 16, "avx512f"),
        (l7, 18, "rdseed"),
        (l7, 19, "adx"),
        (l7, 29, "sha_ni"),
    ]
    .iter()
    .filter(|(reg, bit, _)| reg >> bit & 1 == 1)
    .map(|(_, _, name)| *name)
    .collect();
    let mut out = String::new();
    for n in 0..cores.max(1) {
        let _ = write!(
            out,
            "processor\t: {n}\nvendor_id\t: {vendor}\ncpu family\t: {family}\n\
             model\t\t: {model}\nmodel name\t: {brand}\nstepping\t: {stepping}\n\
             physical id\t: 0\nsiblings\t: {cores}\ncore id\t\t: {n}\ncpu cores\t: {cores}\n\
             apicid\t\t: {n}\nfpu\t\t: yes\nflags\t\t: {}\nclflush size\t: 64\n\
             cache_alignment\t: 64\naddress sizes\t: 48 bits physical, 48 bits virtual\n\n",
            flags.join(" "),
            cores = cores.max(1)
        );
    }
    out
}
