//! Recording a run: what a program's run is made of (`RunSpec`, from `rewind
//! run`'s options or a debug session's `launch` fields) resolved into the
//! run's inputs, and the line that sums up how it ended.

use crate::examples;
use crate::util::{secs, usage};
use anyhow::{bail, Context, Result};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;
use vmm::image::Image;
use vmm::run::manifest::guest_env;
use vmm::run::{Manifest, Pct, Perturbation, Perturbed, Points};
use vmm::run::{Outcome, RunInputs};
use vmm::store::Store;

/// The guest's working directory when none is given.
pub const DEFAULT_CWD: &str = "/";
/// CPUs the guest is told it has when not said.
pub const DEFAULT_CORES: u32 = 1;
/// Guest memory when not said: 2 GiB.
pub const DEFAULT_MEM: u64 = 2 << 30;

/// What a run is made of, as the user said it. Errors name the options of
/// `rewind run` (`--mem`, `--cwd`..), which the debug adapter maps to its
/// `launch` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSpec {
    /// A directory that is the guest's `/` (`None`: the program file alone).
    pub root: Option<PathBuf>,
    pub cwd: String,
    /// `K=V` settings over the default environment.
    pub env: Vec<String>,
    /// The guest's wall clock at step 0 (`None`: the start of today, UTC).
    pub epoch: Option<u64>,
    pub seed: u64,
    pub cores: u32,
    pub mem: u64,
    pub timeout: Option<Duration>,
    /// The run's name (`None`: the program's file name).
    pub name: Option<String>,
    pub schedule: u64,
    pub schedule_from: Option<u64>,
    pub schedule_until: Option<u64>,
    pub reschedule_at: Vec<u64>,
    /// `(step, ns)`.
    pub stall_at: Vec<(u64, u64)>,
    /// `(step, tid)`.
    pub switch_at: Vec<(u64, u32)>,
    pub pct: Option<Pct>,
    /// `(step, seed)`.
    pub reseed: Option<(u64, u64)>,
    pub points: Option<Points>,
    /// With `Points::Races`: pages that trap from the start (sorted).
    pub race_pages: Vec<u64>,
    /// A built-in example instead of a program file.
    pub example: Option<String>,
    /// The program and its arguments (after an example: its arguments).
    pub command: Vec<String>,
}

impl Default for RunSpec {
    fn default() -> RunSpec {
        RunSpec {
            root: None,
            cwd: DEFAULT_CWD.to_string(),
            env: Vec::new(),
            epoch: None,
            seed: 0,
            cores: DEFAULT_CORES,
            mem: DEFAULT_MEM,
            timeout: None,
            name: None,
            schedule: 0,
            schedule_from: None,
            schedule_until: None,
            reschedule_at: Vec::new(),
            stall_at: Vec::new(),
            switch_at: Vec::new(),
            pct: None,
            reseed: None,
            points: None,
            race_pages: Vec::new(),
            example: None,
            command: Vec::new(),
        }
    }
}

/// What a `RunSpec` resolved to.
pub struct Prepared {
    pub inputs: RunInputs,
    pub name: String,
    /// A root image's hash being found beside the run (`prepare_beside`):
    /// until it is given to the recorder, the manifest's is [`PENDING_IMAGE`].
    pub hashing: Option<vmm::store::ImageHashing>,
}

/// The image hash of a manifest whose image is still being hashed.
pub const PENDING_IMAGE: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// How long a run's end waits for its image's hash, still being found,
/// before it says why it has not returned (a first run over a large tree
/// reads every file of it), when the walk has read [`IMAGE_NOTE_BYTES`].
pub const IMAGE_NOTE_AFTER: Duration = Duration::from_secs(1);

/// What the walk must have read by [`IMAGE_NOTE_AFTER`] for the note. A
/// warm walk reads almost nothing: over the host's `/` it takes about a
/// second of `lstat`s on every run, which is not worth a line each time;
/// it is said only when it lasts five times as long.
pub const IMAGE_NOTE_BYTES: u64 = 16 << 20;

/// The hash `hashing` finds for `image`. When it is still reading files
/// `after` this call (having read [`IMAGE_NOTE_BYTES`]), or at all five
/// times as long after, `note` gets one line once: what is being read,
/// and how much so far.
pub fn wait_for_image(
    hashing: vmm::store::ImageHashing,
    image: &Image,
    after: Duration,
    note: &mut dyn FnMut(String),
) -> Result<String> {
    let start = std::time::Instant::now();
    let due = || {
        let waited = start.elapsed();
        waited >= after * 5 || (waited >= after && hashing.read_so_far().1 >= IMAGE_NOTE_BYTES)
    };
    while !hashing.is_finished() && !due() {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !hashing.is_finished() {
        let (files, bytes) = hashing.read_so_far();
        let tree = match image {
            Image::Root { dir, .. } => dir.display().to_string(),
            _ => "the image".to_string(),
        };
        let plural = if files == 1 { "" } else { "s" };
        note(format!(
            "finding the image's identity: reading what is new or changed in {tree} since a run \
             last read it ({files} file{plural}, {:.1} MB so far); later runs read only what changes",
            bytes as f64 / 1e6
        ));
    }
    hashing.wait().context("cannot read the image")
}

impl Prepared {
    /// Makes `stdin` the run's standard input (an input: it is hashed into the id).
    pub fn set_stdin(&mut self, stdin: Vec<u8>) {
        self.inputs.set_stdin(stdin);
    }
}

/// `/a/./b//c/../d` -> `/a/b/d`.
pub fn normalize_guest(path: &str) -> String {
    vmm::kernel::fs::vfs::resolve::normalize("/", path)
}

fn env_flags(flags: &[String]) -> Result<Vec<String>> {
    match guest_env(flags) {
        Ok(env) => Ok(env),
        Err(why) => usage!("--env {why}"),
    }
}

/// Checks that `host` is a readable regular file that starts like an ELF file.
/// Whether the file at `host` starts with `#!` (a script, run by the
/// interpreter its first line names, as execve does).
fn is_script(host: &Path) -> bool {
    let mut head = [0u8; 2];
    std::fs::File::open(host).is_ok_and(|mut f| f.read_exact(&mut head).is_ok()) && &head == b"#!"
}

fn check_program(shown: &str, host: &Path) -> Result<()> {
    let meta = std::fs::metadata(host).with_context(|| format!("cannot run {shown}"))?;
    if !meta.is_file() {
        bail!("cannot run {shown}: not a regular file");
    }
    let mut magic = [0u8; 4];
    let mut f = std::fs::File::open(host).with_context(|| format!("cannot run {shown}"))?;
    let n = f
        .read(&mut magic)
        .with_context(|| format!("cannot run {shown}"))?;
    if n < 4 || &magic != b"\x7fELF" {
        bail!("cannot run {shown}: not an ELF executable");
    }
    Ok(())
}

/// The image, the program's guest path, its argv and the run's default name.
type Program = (Image, String, Vec<String>, String);

fn example_program(spec: &RunSpec, name: &str, store: &Store) -> Result<Program> {
    let Some(bytes) = examples::find(name) else {
        let names = examples::names().join(", ");
        usage!("--example `{name}`: no such example (there are: {names})");
    };
    // Its errors name the example's file, or say the disk is full.
    let host = store.example_file(name, bytes)?;
    let guest = format!("/examples/{name}");
    let mut argv = vec![guest.clone()];
    argv.extend(spec.command.iter().cloned());
    let image = Image::Program {
        guest_path: guest.clone(),
        host_path: host,
        deps: Vec::new(),
    };
    Ok((image, guest, argv, name.to_string()))
}

fn file_program(spec: &RunSpec, cwd: &str, env: &[String]) -> Result<Program> {
    let prog = &spec.command[0];
    if prog.is_empty() {
        usage!("the program's name is empty");
    }
    let argv = spec.command.clone();
    let base = prog.rsplit('/').next().unwrap_or(prog).to_string();
    let Some(root) = &spec.root else {
        if is_script(Path::new(prog)) {
            bail!(
                "cannot run {prog}: not an ELF program: a `#!` script runs over --root DIR, \
                 whose tree holds its interpreter (or run the interpreter: -- /bin/sh {prog})"
            );
        }
        check_program(prog, Path::new(prog))?;
        let host = std::fs::canonicalize(prog).with_context(|| format!("cannot run {prog}"))?;
        let Some(guest) = host.to_str().map(str::to_string) else {
            bail!("cannot run {prog}: its path is not UTF-8");
        };
        let image = Image::program(host).with_context(|| format!("cannot run {prog}"))?;
        return Ok((image, guest, argv, base));
    };
    let shown = root.display();
    let md = std::fs::metadata(root).with_context(|| format!("cannot read --root {shown}"))?;
    if !md.is_dir() {
        bail!("cannot read --root {shown}: not a directory");
    }
    std::fs::read_dir(root).with_context(|| format!("cannot read --root {shown}"))?;
    let root =
        std::fs::canonicalize(root).with_context(|| format!("cannot read --root {shown}"))?;
    let image = Image::root(root).with_view(vmm::image::View::noting());
    let guest = find_in_root(&image, prog, cwd, env)
        .with_context(|| format!("cannot run {prog} in --root {shown}"))?;
    let host = image.host_path(&guest).expect("a normalized guest path");
    if !is_script(&host) {
        check_program(&format!("{prog} ({})", host.display()), &host)?;
    }
    Ok((image, guest, argv, base))
}

/// Builds the run's inputs, with an empty standard input.
pub fn prepare(spec: &RunSpec, store: &Store) -> Result<Prepared> {
    prepare_with(spec, store, false)
}

/// [`prepare`], but a root image (whose hash costs a walk of its tree) is
/// hashed on a thread beside the run, which starts at once.
pub fn prepare_beside(spec: &RunSpec, store: &Store) -> Result<Prepared> {
    prepare_with(spec, store, true)
}

fn prepare_with(spec: &RunSpec, store: &Store, beside: bool) -> Result<Prepared> {
    if spec.example.is_none() && spec.command.is_empty() {
        usage!("no program: give -- PROG [ARGS]... or --example NAME");
    }
    if !spec.cwd.starts_with('/') {
        usage!("--cwd `{}`: must be an absolute guest path", spec.cwd);
    }
    let cwd = normalize_guest(&spec.cwd);
    let env = env_flags(&spec.env)?;
    let (image, program, argv, default_name) = match &spec.example {
        Some(name) => example_program(spec, name, store)?,
        None => file_program(spec, &cwd, &env)?,
    };
    let (hash, hashing) = match &image {
        // A root's walk: beside the run, or before it, saying so when long.
        Image::Root { .. } => {
            let hashing = store.image_hash_beside(&image);
            if beside {
                (PENDING_IMAGE.to_string(), Some(hashing))
            } else {
                let note = &mut |line: String| eprintln!("rewind: {line}");
                let hash = wait_for_image(hashing, &image, IMAGE_NOTE_AFTER, note)?;
                (hash, None)
            }
        }
        _ => (
            store.image_hash(&image).context("cannot read the image")?,
            None,
        ),
    };
    let mut inputs = RunInputs::hashed(image, hash, program, argv);
    inputs.manifest = manifest(spec, inputs.manifest.clone(), env, cwd)?;
    Ok(Prepared {
        inputs,
        name: spec.name.clone().unwrap_or(default_name),
        hashing,
    })
}

/// The manifest of a run of `spec` with this environment and working
/// directory, over `defaults` (its program, argv and image hash).
pub fn manifest(
    spec: &RunSpec,
    defaults: Manifest,
    env: Vec<String>,
    cwd: String,
) -> Result<Manifest> {
    if spec.mem < (16 << 20) || !spec.mem.is_multiple_of(4096) {
        usage!("--mem: at least 16M, in whole 4K pages");
    }
    Ok(Manifest {
        env,
        cwd,
        epoch: spec.epoch.unwrap_or(defaults.epoch),
        seed: spec.seed,
        cores: spec.cores,
        mem: spec.mem,
        schedule: spec.schedule,
        schedule_from: spec.schedule_from.filter(|_| spec.schedule != 0),
        schedule_until: spec.schedule_until.filter(|_| spec.schedule != 0),
        perturb: explicit_perturbations(spec)?,
        reseed: spec.reseed,
        points: spec.points.unwrap_or_default(),
        race_pages: match (spec.race_pages.is_empty(), spec.points) {
            (true, _) | (false, Some(Points::Races)) => spec.race_pages.clone(),
            (false, _) => usage!("--race-pages is for --points races"),
        },
        pct: match (spec.pct.clone(), spec.schedule) {
            (Some(_), 0) => {
                usage!("--pct makes --schedule N (N > 0) a PCT schedule: give --schedule")
            }
            (p, _) => p,
        },
        ..defaults
    })
}

/// The guest path of PROG inside a root image: absolute as is, relative to
/// the cwd when it has a slash, else the first match in the guest's PATH.
fn find_in_root(image: &Image, prog: &str, cwd: &str, env: &[String]) -> Result<String> {
    let exists = |g: &str| image.host_path(g).is_some_and(|h| h.is_file());
    if prog.starts_with('/') {
        return Ok(normalize_guest(prog));
    }
    if prog.contains('/') {
        return Ok(normalize_guest(&format!("{cwd}/{prog}")));
    }
    let path = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or("");
    for dir in path.split(':').filter(|d| d.starts_with('/')) {
        let g = normalize_guest(&format!("{dir}/{prog}"));
        if exists(&g) {
            return Ok(g);
        }
    }
    bail!("not found in the guest's PATH ({path})")
}

/// The summary line: `run <id> exited:0 after N steps, Xs virtual, Ys wall`.
pub fn summary(id: &str, o: &Outcome) -> String {
    format!(
        "run {id} {} after {} steps, {}s virtual, {}s wall",
        o.status,
        o.steps,
        secs(o.virtual_ns as f64 / 1e9),
        secs(o.wall.as_secs_f64())
    )
}

/// The perturbations given with --reschedule-at, --stall-at and
/// --switch-at, in step order.
fn explicit_perturbations(spec: &RunSpec) -> Result<Vec<Perturbed>> {
    let mut out: Vec<Perturbed> = spec
        .reschedule_at
        .iter()
        .map(|&step| Perturbed {
            step,
            what: Perturbation::Reschedule,
        })
        .chain(spec.stall_at.iter().map(|&(step, ns)| Perturbed {
            step,
            what: Perturbation::Stall { ns },
        }))
        .chain(spec.switch_at.iter().map(|&(step, tid)| Perturbed {
            step,
            what: Perturbation::Switch { tid },
        }))
        .collect();
    out.sort();
    if out.windows(2).any(|w| w[0].step == w[1].step) {
        usage!("one perturbation a step: --reschedule-at, --stall-at and --switch-at name the same step");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_paths() {
        assert_eq!(normalize_guest("/"), "/");
        assert_eq!(normalize_guest("/a/./b//c/../d"), "/a/b/d");
        assert_eq!(normalize_guest("/../.."), "/");
    }

    #[test]
    fn env_defaults_and_overrides() {
        let env = guest_env(&["HOME=/home/x".into(), "A=1".into(), "B=x=y".into()]).unwrap();
        assert_eq!(
            env,
            vec![
                "PATH=/usr/local/bin:/usr/bin:/bin",
                "HOME=/home/x",
                "A=1",
                "B=x=y"
            ]
        );
        assert!(guest_env(&["NOEQUALS".into()]).is_err());
        assert!(guest_env(&["=v".into()]).is_err());
    }
}
