//! What `rewind gdb` gives gdb besides the program, so that gdb shows what
//! `rewind where` shows: the separate debug info the symbols crate found
//! (the host's `/usr/lib/debug` or debuginfod's cache), linked under a
//! `.build-id` directory gdb looks in, and the user's source files where
//! they were found (the run's image, the host's file when it matches the
//! build, debuginfod), copied under a directory that `set substitute-path`
//! sends gdb to. A source that was not found is not shown by gdb either,
//! rather than a host file that does not match.

use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use symbols::{DebugOrigin, Symbolizer};
use vmm::kernel::Kernel;

/// At most this many source files are looked for (each may be a request
/// to a debuginfod server).
const MAX_SOURCES: usize = 500;

/// gdb's words (`-iex CMD`...) for the files of process `pid`, laid out
/// under `dir`; and the lines to say about what could not be found.
pub fn prepare(k: &mut Kernel, pid: u32, dir: &Path) -> Result<(Vec<String>, Vec<String>)> {
    let Some(sym) = k.symbolizer_of(pid) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut cmds = Vec::new();
    let debug = dir.join("debug");
    if link_debug_files(&sym, &debug)? {
        cmds.push(format!(
            "set debug-file-directory {}:/usr/lib/debug",
            debug.display()
        ));
    }
    let mut s = (*sym).clone();
    s.program_mtime = k.program_mtime(pid);
    let src = dir.join("src");
    for d in copy_sources(k, &s, &src)? {
        cmds.push(format!(
            "set substitute-path {} {}",
            quoted(&d),
            quoted(&under(&src, &d).to_string_lossy())
        ));
    }
    let words = cmds.into_iter().flat_map(|c| ["-iex".into(), c]).collect();
    Ok((words, s.notes()))
}

/// Links each module's separate debug file as `.build-id/xx/yyyy.debug`
/// under `debug`: whether there was one.
fn link_debug_files(sym: &Symbolizer, debug: &Path) -> Result<bool> {
    let mut any = false;
    for m in sym.modules() {
        let (DebugOrigin::HostFile(p) | DebugOrigin::Debuginfod(p)) = m.module.debug_origin()
        else {
            continue;
        };
        let Some(id) = m.module.build_id_hex().filter(|id| id.len() > 2) else {
            continue;
        };
        let at = debug.join(".build-id").join(&id[..2]);
        std::fs::create_dir_all(&at).with_context(|| format!("cannot create {}", at.display()))?;
        let link = at.join(format!("{}.debug", &id[2..]));
        if !link.exists() {
            std::os::unix::fs::symlink(p, &link)
                .with_context(|| format!("cannot link {}", link.display()))?;
        }
        any = true;
    }
    Ok(any)
}

/// Copies the user's own source files the debug info of the process's
/// files names, each from where the symbols crate finds it, to the same
/// path under `src`: the directories of the files found.
fn copy_sources(k: &mut Kernel, sym: &Symbolizer, src: &Path) -> Result<BTreeSet<String>> {
    let files: BTreeSet<String> = sym
        .modules()
        .iter()
        .filter(|m| !symbols::own::is_system_library(&m.path))
        .flat_map(|m| m.module.source_files())
        .filter(|f| f.starts_with('/') && symbols::own::is_own(None, Some(f)))
        .take(MAX_SOURCES)
        .collect();
    let mut dirs = BTreeSet::new();
    for f in files {
        let Ok(found) = sym.source(&f, None, &mut |p| k.file_contents(p)) else {
            continue;
        };
        let to = under(src, &f);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&to, found.text.as_bytes())
            .with_context(|| format!("cannot write {}", to.display()))?;
        if let Some((d, _)) = f.rsplit_once('/') {
            dirs.insert(if d.is_empty() { "/".into() } else { d.into() });
        }
    }
    Ok(dirs)
}

/// `path` (absolute) under `root`.
fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// A word for gdb's argument splitting.
fn quoted(s: &str) -> String {
    if s.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '\\') {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s.to_string()
    }
}
