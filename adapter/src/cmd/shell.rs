//! `rewind shell RUN STEP`: a busybox shell inside the run at that step,
//! in the working directory and environment of one of its processes, with
//! this terminal as its input and output. The run's processes stop there;
//! the shell can look at their files as they were (what the run wrote
//! included). Nothing is recorded: the run and the store stay as they were.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use vmm::kernel::inject::ShellSpec;
use vmm::terminal::{shell_at, Terminal};

/// Where busybox and its applets are in the shell's tree.
const BUSYBOX_DIR: &str = "/rewind/busybox";
/// Where `--with` puts host files and directories.
const WITH_DIR: &str = "/rewind/with";
/// Most files `--with` takes from one directory.
const MAX_WITH_FILES: usize = 10_000;

#[derive(Args, Debug)]
pub struct ShellArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// The step after which the shell starts.
    #[arg(value_name = "STEP")]
    pub step: u64,
    /// The process whose child the shell is [default: the one on the CPU].
    #[arg(long, value_name = "P")]
    pub pid: Option<u32>,
    /// A host file or directory to put under /rewind/with/, on the shell's
    /// PATH; or a Nix store path, DRV or FLAKE#ATTR (built by the host's
    /// Nix): its closure at its /nix/store paths and its bin/ on PATH.
    #[arg(long = "with", value_name = "PATH|INSTALLABLE")]
    pub with: Vec<PathBuf>,
    /// The busybox to run: a statically linked one [default: busybox on PATH].
    #[arg(long, value_name = "PATH")]
    pub busybox: Option<PathBuf>,
}

/// This process's terminal (or whatever its standard streams are).
struct Tty {
    /// What is said when the shell starts.
    banner: String,
}

impl Terminal for Tty {
    fn read(&mut self) -> Vec<u8> {
        let mut buf = vec![0; 4096];
        match std::io::stdin().read(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                buf
            }
            Err(_) => Vec::new(),
        }
    }

    fn started(&mut self, pid: u32) {
        eprintln!("{} (pid {pid})", self.banner);
    }

    fn write(&mut self, fd: i32, bytes: &[u8]) {
        // A terminal that went away loses the shell's output, not the run.
        let _ = if fd == 2 {
            let mut e = std::io::stderr();
            e.write_all(bytes).and_then(|()| e.flush())
        } else {
            let mut o = std::io::stdout();
            o.write_all(bytes).and_then(|()| o.flush())
        };
    }
}

pub fn main(args: ShellArgs) -> Result<i32> {
    let run = crate::app::inside::run_at(&args.run.spec, args.step)?;
    let inside = crate::app::inside::Inside::of(&run, args.step)?;
    let busybox = match &args.busybox {
        Some(p) => p.clone(),
        None => on_path("busybox").context(
            "busybox is not on PATH: install a static one (Debian: busybox-static) or give --busybox",
        )?,
    };
    // The tree reads files as they are, without following a last link.
    let busybox = busybox
        .canonicalize()
        .with_context(|| format!("cannot read {}", busybox.display()))?;
    let mut spec = ShellSpec {
        parent: args.pid,
        program: format!("{BUSYBOX_DIR}/busybox"),
        argv: vec!["sh".into(), "-i".into()],
        env: Default::default(),
        files: vec![(format!("{BUSYBOX_DIR}/busybox"), busybox.clone())],
        links: applets(&busybox)?
            .into_iter()
            .map(|a| (format!("{BUSYBOX_DIR}/{a}"), "busybox".to_string()))
            .collect(),
    };
    let mut path = vec![WITH_DIR.to_string()];
    for w in &args.with {
        if let Some(store) = crate::app::nix::with_store(&w.to_string_lossy())? {
            add_store(&mut spec, &store)?;
            path.extend(store.outputs.iter().map(|o| format!("{o}/bin")));
            continue;
        }
        let name = w
            .file_name()
            .and_then(|n| n.to_str())
            .with_context(|| format!("--with {}: no file name", w.display()))?;
        let guest = format!("{WITH_DIR}/{name}");
        if w.is_dir() {
            path.push(guest.clone());
            add_dir(&mut spec, w, &guest)?;
        } else if w.is_file() {
            spec.files.push((guest, w.clone()));
        } else {
            bail!("--with {}: not a file or directory", w.display());
        }
    }
    // The process's own environment goes between: its PATH after ours.
    spec.env.path_before = path;
    spec.env.path_after = vec![BUSYBOX_DIR.into()];
    spec.env.extra = vec![format!("PS1=rewind {}@{}$ ", short(&run.id), args.step)];
    let mut tty = Tty {
        banner: format!(
            "rewind: a shell in run {} after step {}; the run's processes are stopped there and nothing is recorded (exit or Ctrl-D leaves)",
            run.id, args.step
        ),
    };
    let kf = inside.keyframe.as_ref().map(|(k, own)| (k, *own));
    let status = shell_at(
        &inside.inputs,
        kf,
        &inside.store.pages(),
        args.step,
        &spec,
        &mut tty,
    )
    .with_context(|| format!("rewind shell in run {} at step {}", run.id, args.step))?;
    Ok(status.shell_code())
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// `name` in a directory of PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// The applets `busybox --list` names.
fn applets(busybox: &Path) -> Result<Vec<String>> {
    let out = std::process::Command::new(busybox)
        .arg("--list")
        .output()
        .with_context(|| format!("cannot run {} --list", busybox.display()))?;
    if !out.status.success() {
        bail!("{} --list failed: is it busybox?", busybox.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|a| !a.is_empty() && !a.contains('/') && *a != "busybox")
        .map(str::to_string)
        .collect())
}

/// A store closure at its own paths.
fn add_store(spec: &mut ShellSpec, store: &crate::app::nix::WithStore) -> Result<()> {
    for p in &store.closure {
        let host = Path::new(p);
        match std::fs::symlink_metadata(host) {
            Ok(m) if m.is_dir() => add_dir(spec, host, p)?,
            Ok(m) if m.is_symlink() => {
                let target = std::fs::read_link(host)?;
                spec.links
                    .push((p.clone(), target.to_string_lossy().into_owned()));
            }
            Ok(_) => spec.files.push((p.clone(), host.to_path_buf())),
            Err(e) => bail!("--with: {p}: {e}"),
        }
    }
    Ok(())
}

/// Every file and link under host directory `dir`, at `guest`.
fn add_dir(spec: &mut ShellSpec, dir: &Path, guest: &str) -> Result<()> {
    let mut todo = vec![(dir.to_path_buf(), guest.to_string())];
    let mut count = 0usize;
    while let Some((host, at)) = todo.pop() {
        let entries =
            std::fs::read_dir(&host).with_context(|| format!("--with {}", host.display()))?;
        for e in entries {
            let e = e.with_context(|| format!("--with {}", host.display()))?;
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            count += 1;
            if count > MAX_WITH_FILES {
                bail!("--with {}: more than {MAX_WITH_FILES} files", dir.display());
            }
            let (hp, gp) = (e.path(), format!("{at}/{name}"));
            let ty = e.file_type()?;
            if ty.is_symlink() {
                let target = std::fs::read_link(&hp)?;
                spec.links.push((gp, target.to_string_lossy().into_owned()));
            } else if ty.is_dir() {
                todo.push((hp, gp));
            } else if ty.is_file() {
                spec.files.push((gp, hp));
            }
        }
    }
    Ok(())
}
