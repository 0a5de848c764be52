//! What a dynamically linked program needs in its image: its interpreter
//! (PT_INTERP) and the shared libraries it and they need (DT_NEEDED), found
//! as the host's loader would find them: DT_RPATH (when there is no
//! DT_RUNPATH), DT_RUNPATH, the default directories (Debian's multiarch
//! ones first, with their `glibc-hwcaps` subdirectories), then
//! `/etc/ld.so.cache`, with `$ORIGIN` expanded. Every symbolic link met on
//! the way is kept as a link, so `/lib64/ld-linux-x86-64.so.2` reaches the
//! real file through `/lib -> usr/lib` in the guest as on the host.
//!
//! The cache goes into the image only when a library was found through it
//! alone (the guest's loader then needs it to find it too); glibc finds
//! everything else in the default directories without it, and leaving it
//! out keeps the run id from moving whenever any package is installed.
//!
//! A library that is missing or not a readable ELF file is left for the
//! guest's own loader to report, as it would natively; only the program's
//! interpreter, which the monitor loads itself, must be sound.

use super::{resolve_links, Dep, DepKind};
use object::elf::{FileHeader64, DT_NEEDED, DT_NULL, DT_RPATH, DT_RUNPATH, DT_STRSZ, DT_STRTAB};
use object::elf::{PT_DYNAMIC, PT_INTERP, PT_LOAD};
use object::read::elf::{Dyn, FileHeader, ProgramHeader};
use object::Endianness;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

/// The loader's default directories, in its order (Debian's glibc).
const DEFAULT_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib",
    "/usr/lib",
];
/// The `glibc-hwcaps` subdirectories the loader tries before a directory.
const HWCAPS: &[&str] = &["x86-64-v4", "x86-64-v3", "x86-64-v2"];
const LD_SO_CACHE: &str = "/etc/ld.so.cache";
const LD_SO_PRELOAD: &str = "/etc/ld.so.preload";
/// Most libraries one program may pull in (a bound on hostile images).
const MAX_LIBS: usize = 1024;

/// Why a program's image could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("{program}: its interpreter {interp} is not on this host")]
    NoInterpreter { program: String, interp: String },
    #[error("{0}: the interpreter path in PT_INTERP is not a path")]
    BadInterpPath(String),
}

/// The dynamic-linking facts of one ELF file.
#[derive(Default, Debug)]
pub struct DynInfo {
    pub interp: Option<String>,
    pub needed: Vec<String>,
    pub rpath: Vec<String>,
    pub runpath: Vec<String>,
}

/// Reads PT_INTERP, DT_NEEDED, DT_RPATH and DT_RUNPATH; None when `bytes`
/// is not a 64-bit ELF file whose headers make sense.
pub fn dyn_info(bytes: &[u8]) -> Option<DynInfo> {
    let hdr = FileHeader64::<Endianness>::parse(bytes).ok()?;
    let e = hdr.endian().ok()?;
    let phdrs = hdr.program_headers(e, bytes).ok()?;
    let mut info = DynInfo::default();
    let mut dynamic = None;
    for ph in phdrs {
        match ph.p_type(e) {
            PT_INTERP => {
                let raw = ph.data(e, bytes).ok()?;
                let s = raw.split(|b| *b == 0).next().unwrap_or(&[]);
                info.interp = Some(String::from_utf8_lossy(s).into_owned());
            }
            PT_DYNAMIC => dynamic = ph.dynamic(e, bytes).ok().flatten(),
            _ => {}
        }
    }
    let Some(dynamic) = dynamic else {
        return Some(info);
    };
    // The string table is named by address: find it through PT_LOAD.
    let (mut strtab, mut strsz) = (None, None);
    for d in dynamic {
        match d.tag32(e) {
            Some(DT_STRTAB) => strtab = Some(d.d_val(e)),
            Some(DT_STRSZ) => strsz = Some(d.d_val(e)),
            Some(DT_NULL) => break,
            _ => {}
        }
    }
    let (Some(addr), Some(size)) = (strtab, strsz) else {
        return Some(info);
    };
    let off = phdrs.iter().find_map(|ph| {
        let (va, fsz) = (ph.p_vaddr(e), ph.p_filesz(e));
        (ph.p_type(e) == PT_LOAD && addr >= va && addr < va.checked_add(fsz)?)
            .then(|| ph.p_offset(e).checked_add(addr - va))
            .flatten()
    })?;
    let strings = bytes.get(off as usize..off.checked_add(size)? as usize)?;
    let string = |i: u64| -> Option<String> {
        let s = strings.get(i as usize..)?;
        let s = s.split(|b| *b == 0).next()?;
        String::from_utf8(s.to_vec()).ok()
    };
    let split = |s: String| -> Vec<String> {
        s.split(':')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    };
    for d in dynamic {
        match d.tag32(e) {
            Some(DT_NEEDED) => info.needed.extend(string(d.d_val(e))),
            Some(DT_RPATH) => info
                .rpath
                .extend(string(d.d_val(e)).map(split).unwrap_or_default()),
            Some(DT_RUNPATH) => info
                .runpath
                .extend(string(d.d_val(e)).map(split).unwrap_or_default()),
            Some(DT_NULL) => break,
            _ => {}
        }
    }
    Some(info)
}

/// Records the host's files and links the guest needs for paths.
#[derive(Default)]
struct Collector {
    deps: RefCell<BTreeMap<String, DepKind>>,
}

impl Collector {
    /// Adds the regular file at host path `path` with every link on the way;
    /// its resolved path, or None when it is not a regular file.
    fn add(&self, path: &str) -> Option<String> {
        let real = resolve_links(path, |p| match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                let t = std::fs::read_link(p).map_err(|_| ())?;
                let t = t.to_str().ok_or(())?.to_string();
                self.deps
                    .borrow_mut()
                    .insert(p.to_string(), DepKind::Symlink { target: t.clone() });
                Ok(Some(t))
            }
            _ => Ok(None),
        })?;
        if !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
            return None;
        }
        self.deps.borrow_mut().insert(
            real.clone(),
            DepKind::File {
                host: PathBuf::from(&real),
            },
        );
        Some(real)
    }

    /// Whether `path` names a regular file (through links) on the host.
    fn exists(path: &str) -> bool {
        std::fs::metadata(path).is_ok_and(|m| m.is_file())
    }
}

/// The files beside `program` (a host path, which is also its guest path)
/// that its image must hold: empty for a static program.
pub fn linked_files(program: &Path) -> Result<Vec<Dep>, LinkError> {
    let shown = program.display().to_string();
    let Ok(bytes) = super::bytes::read_path(program) else {
        return Ok(Vec::new()); // the run reports it
    };
    let Some(info) = dyn_info(&bytes) else {
        return Ok(Vec::new()); // not an ELF file: the run reports it
    };
    let Some(interp) = info.interp.clone() else {
        return Ok(Vec::new());
    };
    if !interp.starts_with('/') || interp.contains('\0') {
        return Err(LinkError::BadInterpPath(shown));
    }
    let c = Collector::default();
    if c.add(&interp).is_none() {
        return Err(LinkError::NoInterpreter {
            program: shown,
            interp,
        });
    }
    if Collector::exists(LD_SO_PRELOAD) {
        c.add(LD_SO_PRELOAD);
    }
    let cache = std::fs::read(LD_SO_CACHE).ok();
    let mut need_cache = false;
    let exe_rpath: Vec<String> = info.rpath.clone();
    let origin_of = |p: &str| -> String {
        Path::new(p)
            .parent()
            .and_then(Path::to_str)
            .unwrap_or("/")
            .to_string()
    };
    // (object's path, its facts), breadth first as the loader goes.
    let mut todo: VecDeque<(String, DynInfo)> = VecDeque::new();
    todo.push_back((shown.clone(), info));
    let mut seen: std::collections::BTreeSet<String> = Default::default();
    let mut found = 0;
    while let Some((path, info)) = todo.pop_front() {
        let origin = origin_of(&path);
        let expand = |dirs: &[String]| -> Vec<String> {
            dirs.iter()
                .map(|d| d.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin))
                .collect()
        };
        for name in &info.needed {
            if !seen.insert(name.clone()) || found >= MAX_LIBS {
                continue;
            }
            let at = if name.contains('/') {
                Collector::exists(name).then(|| name.clone())
            } else {
                let mut dirs = Vec::new();
                if info.runpath.is_empty() {
                    dirs.extend(expand(&info.rpath));
                    if path != shown {
                        dirs.extend(exe_rpath.iter().cloned());
                    }
                }
                dirs.extend(expand(&info.runpath));
                for d in DEFAULT_DIRS {
                    for h in HWCAPS {
                        let p = format!("{d}/glibc-hwcaps/{h}/{name}");
                        if Collector::exists(&p) {
                            c.add(&p);
                        }
                    }
                }
                dirs.extend(DEFAULT_DIRS.iter().map(|d| d.to_string()));
                let in_dirs = dirs
                    .iter()
                    .map(|d| format!("{}/{name}", d.trim_end_matches('/')))
                    .find(|p| Collector::exists(p));
                in_dirs.or_else(|| {
                    let cached = cache
                        .as_deref()
                        .and_then(|b| cache_lookup(b, name))
                        .filter(|p| Collector::exists(p));
                    need_cache |= cached.is_some();
                    cached
                })
            };
            let Some(at) = at else {
                continue; // the guest's loader says it is missing
            };
            if c.add(&at).is_none() {
                continue;
            }
            found += 1;
            if let Some(lib) = std::fs::read(&at).ok().and_then(|b| dyn_info(&b)) {
                todo.push_back((at, lib));
            }
        }
    }
    if need_cache {
        c.add(LD_SO_CACHE);
    }
    let mut deps = c.deps.into_inner();
    deps.remove(&shown);
    Ok(deps
        .into_iter()
        .map(|(guest, kind)| super::Dep { guest, kind })
        .collect())
}

/// The path `/etc/ld.so.cache` (glibc's "glibc-ld.so.cache1.1" format)
/// gives for an x86-64 library `name`.
fn cache_lookup(b: &[u8], name: &str) -> Option<String> {
    const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    // The new format may follow the old one ("ld.so-1.7.0").
    let start = b.windows(MAGIC.len()).position(|w| w == MAGIC)?;
    let h = b.get(start..)?;
    let u32_at =
        |o: usize| -> Option<u32> { Some(u32::from_le_bytes(h.get(o..o + 4)?.try_into().ok()?)) };
    let nlibs = u32_at(20)? as usize;
    const HEADER: usize = 48;
    const ENTRY: usize = 24;
    // FLAG_ELF_LIBC6 | FLAG_X8664_LIB64.
    const X86_64_LIBC6: u32 = 0x0303;
    let cstr = |o: u32| -> Option<&[u8]> {
        let s = h.get(o as usize..)?;
        s.split(|c| *c == 0).next()
    };
    for i in 0..nlibs.min(1 << 20) {
        let o = HEADER + i * ENTRY;
        let (flags, key, value) = (u32_at(o)?, u32_at(o + 4)?, u32_at(o + 8)?);
        if flags & 0xffff == X86_64_LIBC6 && cstr(key)? == name.as_bytes() {
            return String::from_utf8(cstr(value)?.to_vec()).ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_no_elf() {
        assert!(dyn_info(b"").is_none());
        assert!(dyn_info(b"\x7fELF\x02\x01\x01").is_none());
        assert!(cache_lookup(b"glibc-ld.so.cache1.1\xff\xff\xff\xff", "libc.so.6").is_none());
    }
}
