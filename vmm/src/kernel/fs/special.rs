//! The monitor's own files: `/dev/null`, `/dev/zero`, `/dev/full`,
//! `/dev/random` and `/dev/urandom` (bytes of the run's seeded generator),
//! and `/proc/self/{exe,cwd,maps,cmdline,fd/N}`.

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
        Device::Zero | Device::Full => vec![0; n],
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
        let name = match v.name.as_str() {
            "[anon]" | "[file]" => "",
            n if n == exe => n,
            n if n.starts_with('[') => n,
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
