//! `rewind show`: a run's inputs, and the commands that make it again.
//!
//! The commands are rebuilt from the run's manifest, and each is checked by
//! computing the manifest it would make: a run that no `rewind run` or
//! `rewind fork` command makes (one made by `rewind check`'s narrowing, or
//! with its seed changed by `rewind check --seeds`) is said to be so rather
//! than given a command that would make another run.

use crate::app::record::normalize_guest;
use crate::examples;
use anyhow::Result;
use clap::Args;
use std::io::Write;
use std::path::{Path, PathBuf};
use vmm::check::label::{labels, Judged, Label};
use vmm::record::fork::{fork_manifest, ForkWith};
use vmm::run::manifest::ENGINE_VERSION;
use vmm::run::manifest::{guest_env, DEFAULT_ENV, DEFAULT_MEM, QUANTUM_NS};
use vmm::run::{Manifest, Perturbation};
use vmm::store::{ImageLocation, Run, Store};

mod json;
use json::{NarrowingJson, NotKeptJson, ShowJson};

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// Print one JSON object: id, name, status, steps, fork_of, inputs,
    /// image, stdin_bytes, commands (each with argv, cwd, stdin and shell),
    /// reproducible, why_not, notes.
    #[arg(long)]
    pub json: bool,
}

/// One command line that makes a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Line {
    /// The arguments, `rewind` first.
    pub argv: Vec<String>,
    /// A directory to run it in, when the program is named relative to it.
    pub cwd: Option<String>,
    /// The file to give it on standard input.
    pub stdin: String,
    /// The whole line for a POSIX shell.
    pub shell: String,
}

impl Line {
    fn new(argv: Vec<String>, cwd: Option<String>, stdin: String) -> Line {
        let mut shell = String::new();
        if let Some(d) = &cwd {
            shell.push_str(&format!("cd {} && ", quote(d)));
        }
        shell.push_str(&argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "));
        shell.push_str(&format!(" < {}", quote(&stdin)));
        Line {
            argv,
            cwd,
            stdin,
            shell,
        }
    }
}

/// `s` quoted for a POSIX shell, bare when it is safe bare.
pub fn quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Sizes as `rewind run --mem` reads them.
fn size(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The image hash of a built-in example, as the store writes it (mode 0755).
fn example_image_hash(name: &str, bytes: &[u8]) -> String {
    vmm::image::program_hash(&format!("/examples/{name}"), 0o100755, bytes)
}

/// The commands that make `run`, its ancestors' first; or why there are none.
pub struct Recipe {
    pub lines: Vec<Line>,
    pub why_not: Option<String>,
    pub notes: Vec<String>,
}

fn stdin_of(run: &Run) -> String {
    if run.manifest.stdin.is_some() {
        run.dir.join("stdin.bin").display().to_string()
    } else {
        "/dev/null".to_string()
    }
}

/// The `rewind run` (or `rewind check`) arguments after the command name that
/// give the manifest's inputs, and the directory to run them in.
fn run_flags(
    run: &Run,
    notes: &mut Vec<String>,
) -> std::result::Result<(Vec<String>, Option<String>), String> {
    let inputs = input_flags(run)?;
    let p = match &run.meta.image {
        ImageLocation::Program {
            guest_path,
            host_path,
            ..
        } => match example_of(run, guest_path) {
            Some(name) => example_flags(run, name, notes),
            None => program_flags(run, guest_path, host_path, notes)?,
        },
        ImageLocation::Store(s) => {
            let drv_name = run
                .manifest
                .env
                .iter()
                .find_map(|e| e.strip_prefix("name="));
            let named = Some(run.meta.name.as_str()) != drv_name;
            ProgramFlags {
                before: match named {
                    true => vec!["--name".to_string(), run.meta.name.clone()],
                    false => Vec::new(),
                },
                after: vec![s.drv.clone()],
                cwd: None,
            }
        }
        ImageLocation::Root { dir } => root_flags(run, dir)?,
    };
    let mut a = p.before;
    a.extend(inputs);
    a.extend(p.after);
    Ok((a, p.cwd))
}

/// What names the program: the flags before the inputs' (`--root`,
/// `--name`), those after them (`--example`, `-- PROG ARGS`), and the
/// directory to run in.
#[derive(Default)]
struct ProgramFlags {
    before: Vec<String>,
    after: Vec<String>,
    cwd: Option<String>,
}

/// `--name NAME` unless the run has the name it would get anyway.
fn name_flag(run: &Run, default_name: &str) -> Vec<String> {
    if run.meta.name == default_name {
        return Vec::new();
    }
    vec!["--name".to_string(), run.meta.name.clone()]
}

/// The flags of the manifest's inputs (epoch, seed, cores, memory, cwd,
/// environment, schedule, perturbations, points, timeout).
fn input_flags(run: &Run) -> std::result::Result<Vec<String>, String> {
    flags_can_give(&run.manifest)?;
    let mut a = machine_flags(run)?;
    a.extend(schedule_flags(&run.manifest));
    if let Some(t) = run.meta.timeout_secs {
        a.extend(["--timeout".to_string(), t.to_string()]);
    }
    Ok(a)
}

/// Whether `rewind run`'s flags can give the manifest's quantum, memory
/// size and schedule window at all.
fn flags_can_give(m: &Manifest) -> std::result::Result<(), String> {
    if m.quantum_ns != QUANTUM_NS {
        return Err(format!(
            "its quantum ({} ns a step) is not the one `rewind run` uses ({QUANTUM_NS})",
            m.quantum_ns
        ));
    }
    if m.mem < (16 << 20) || !m.mem.is_multiple_of(4096) {
        return Err(format!(
            "its memory size {} cannot be given with --mem",
            m.mem
        ));
    }
    if m.schedule == 0 && (m.schedule_from.is_some() || m.schedule_until.is_some()) {
        return Err("it has a schedule window without a schedule".into());
    }
    Ok(())
}

/// The flags of the machine the run had: epoch, seed, cores, memory, cwd
/// and environment.
fn machine_flags(run: &Run) -> std::result::Result<Vec<String>, String> {
    let m = &run.manifest;
    let mut a: Vec<String> = Vec::new();
    let mut flag = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    flag("--epoch", m.epoch.to_string());
    if m.seed != 0 {
        flag("--seed", m.seed.to_string());
    }
    if m.cores != 1 {
        flag("--cores", m.cores.to_string());
    }
    if m.mem != DEFAULT_MEM {
        flag("--mem", size(m.mem));
    }
    // A Nix build's directory and environment are its derivation's.
    let nix = matches!(run.meta.image, ImageLocation::Store(_));
    if m.cwd != "/" && !nix {
        if normalize_guest(&m.cwd) != m.cwd {
            return Err(format!(
                "its working directory `{}` is not normalized",
                m.cwd
            ));
        }
        flag("--cwd", m.cwd.clone());
    }
    let defaults = DEFAULT_ENV;
    let env_flags: Vec<String> = m
        .env
        .iter()
        .enumerate()
        .filter(|(i, e)| defaults.get(*i) != Some(&e.as_str()))
        .map(|(_, e)| e.clone())
        .collect();
    if !nix && guest_env(&env_flags).as_ref() != Ok(&m.env) {
        return Err("its environment cannot be given with --env".into());
    }
    for e in env_flags.into_iter().filter(|_| !nix) {
        flag("--env", e);
    }
    Ok(a)
}

/// The flags of the run's schedule: its number and window, PCT,
/// perturbations, reseeding, scheduling points and race pages.
fn schedule_flags(m: &Manifest) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut flag = |k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    if m.schedule != 0 {
        flag("--schedule", m.schedule.to_string());
        if let Some(f) = m.schedule_from {
            flag("--schedule-from", f.to_string());
        }
        if let Some(u) = m.schedule_until {
            flag("--schedule-until", u.to_string());
        }
        if let Some(p) = &m.pct {
            let ranges: Vec<String> = p
                .shared
                .iter()
                .map(|(a, l)| format!("{a:#x}+{l}"))
                .collect();
            let ranges = match ranges.is_empty() {
                true => String::new(),
                false => format!(":{}", ranges.join(",")),
            };
            flag("--pct", format!("{}:{}{ranges}", p.depth, p.steps));
        }
    }
    for p in &m.perturb {
        match p.what {
            Perturbation::Reschedule => flag("--reschedule-at", p.step.to_string()),
            Perturbation::Stall { ns } => flag("--stall-at", format!("{}:{ns}", p.step)),
            Perturbation::Switch { tid } => flag("--switch-at", format!("{}:{tid}", p.step)),
        }
    }
    if let Some((step, seed)) = m.reseed {
        flag("--reseed", format!("{step}:{seed}"));
    }
    if !m.points.is_syscalls() {
        flag("--points", m.points.to_string());
    }
    if !m.race_pages.is_empty() {
        let pages: Vec<String> = m.race_pages.iter().map(|p| format!("{p:#x}")).collect();
        flag("--race-pages", pages.join(","));
    }
    a
}

/// The built-in example a run ran, when it ran one as `--example` does.
fn example_of<'a>(run: &Run, guest_path: &'a str) -> Option<&'a str> {
    guest_path
        .strip_prefix("/examples/")
        .filter(|n| examples::find(n).is_some())
        .filter(|_| run.manifest.argv.first().map(String::as_str) == Some(guest_path))
}

fn example_flags(run: &Run, name: &str, notes: &mut Vec<String>) -> ProgramFlags {
    let m = &run.manifest;
    let bytes = examples::find(name).expect("an example");
    if example_image_hash(name, bytes) != m.image {
        notes.push(format!(
            "the example `{name}` of this rewind differs from the one the run used: \
             the command makes a run with another id"
        ));
    }
    let mut after = vec!["--example".to_string(), name.to_string()];
    if m.argv.len() > 1 {
        after.push("--".into());
        after.extend(m.argv[1..].iter().cloned());
    }
    ProgramFlags {
        before: name_flag(run, name),
        after,
        cwd: None,
    }
}

fn program_flags(
    run: &Run,
    guest_path: &str,
    host_path: &Path,
    notes: &mut Vec<String>,
) -> std::result::Result<ProgramFlags, String> {
    let m = &run.manifest;
    let Some(argv0) = m.argv.first() else {
        return Err("it has no argv[0]".into());
    };
    if guest_path != m.program {
        return Err("its program is not its image's file".into());
    }
    if host_path != Path::new(guest_path) {
        notes.push(format!(
            "the program was at {guest_path} when it was recorded and is kept at {} now: \
             the command needs it at {guest_path} again",
            host_path.display()
        ));
    }
    let mut cwd = None;
    // `rewind run -- PROG` names the program as argv[0]: a relative
    // name must be run from the directory it is relative to.
    if !argv0.starts_with('/') {
        let rel = argv0.trim_start_matches("./");
        match guest_path.strip_suffix(&format!("/{rel}")) {
            Some(dir) if !rel.split('/').any(|c| c == ".." || c == ".") => {
                cwd = Some(if dir.is_empty() {
                    "/".into()
                } else {
                    dir.into()
                })
            }
            _ => notes.push(format!(
                "run it where `{argv0}` names {guest_path}, as it was run"
            )),
        }
    }
    let default_name = argv0.rsplit('/').next().unwrap_or(argv0);
    let mut after = vec!["--".to_string()];
    after.extend(m.argv.iter().cloned());
    Ok(ProgramFlags {
        before: name_flag(run, default_name),
        after,
        cwd,
    })
}

fn root_flags(run: &Run, dir: &Path) -> std::result::Result<ProgramFlags, String> {
    let m = &run.manifest;
    let Some(argv0) = m.argv.first() else {
        return Err("it has no argv[0]".into());
    };
    let default_name = argv0.rsplit('/').next().unwrap_or(argv0);
    if argv0.starts_with('/') && normalize_guest(argv0) != m.program {
        return Err(format!(
            "its argv[0] `{argv0}` is not its program {}",
            m.program
        ));
    }
    let mut before = vec!["--root".to_string(), dir.display().to_string()];
    before.extend(name_flag(run, default_name));
    let mut after = vec!["--".to_string()];
    after.extend(m.argv.iter().cloned());
    Ok(ProgramFlags {
        before,
        after,
        cwd: None,
    })
}

/// How `run` was made, when no command makes it.
fn made_by_check(m: &Manifest) -> Option<String> {
    if !m.perturb.is_empty() {
        let list: Vec<String> = m.perturb.iter().map(|p| p.to_string()).collect();
        return Some(format!(
            "it was made by `rewind check`'s narrowing, with explicit perturbations ({})",
            list.join(", ")
        ));
    }
    if let Some((step, seed)) = m.reseed {
        return Some(format!(
            "it was made by `rewind check --seeds`, reseeded with {seed} at step {step}"
        ));
    }
    None
}

fn recipe_into(store: &Store, run: &Run, out: &mut Recipe, depth: usize) {
    let m = &run.manifest;
    if depth > 64 {
        out.why_not = Some("its forks go back too far".into());
        return;
    }
    if let Some(f) = &m.fork_of {
        let parent = match Run::load(&store.runs_dir().join(&f.parent)) {
            Ok(p) => p,
            Err(_) => {
                out.why_not = Some(format!(
                    "it is a fork of run {} at step {}, which is not in this store",
                    f.parent, f.step
                ));
                return;
            }
        };
        let with = match m.reseed {
            Some((s, seed)) if m.schedule == 0 && s == f.step + 1 => ForkWith::Seed(seed),
            _ => ForkWith::Schedule(m.schedule),
        };
        let mut made = fork_manifest(
            &parent.id,
            &parent.manifest,
            &parent.meta.perturbed,
            f.step,
            with,
        );
        // `rewind fork --points P` changed the points after the step.
        let points = m.points_after_step(f.step);
        let changed = made.points_after_step(f.step) != points;
        if changed {
            made.set_points_after(f.step, points);
        }
        if made != *m {
            out.why_not = Some(match made_by_check(m) {
                Some(why) => why,
                None => format!(
                    "it follows run {} up to step {}, but no `rewind fork` of it makes this run",
                    f.parent, f.step
                ),
            });
            // Not made by a fork: say how the run itself was made, if it can be.
            return;
        }
        recipe_into(store, &parent, out, depth + 1);
        if out.why_not.is_some() {
            return;
        }
        let mut argv = vec![
            "rewind".to_string(),
            "fork".to_string(),
            parent.id.clone(),
            f.step.to_string(),
        ];
        match with {
            ForkWith::Schedule(n) => argv.extend(["--schedule".into(), n.to_string()]),
            ForkWith::Seed(n) => argv.extend(["--seed".into(), n.to_string()]),
        }
        if changed {
            argv.extend(["--points".into(), points.to_string()]);
        }
        out.lines.push(Line::new(argv, None, "/dev/null".into()));
        return;
    }
    match run_flags(run, &mut out.notes) {
        Ok((flags, cwd)) => {
            let verb = match run.meta.image {
                ImageLocation::Store(_) => "nix",
                _ => "run",
            };
            let mut argv = vec!["rewind".to_string(), verb.to_string()];
            argv.extend(flags);
            out.lines.push(Line::new(argv, cwd, stdin_of(run)));
        }
        Err(why) => out.why_not = Some(format!("no `rewind run` command makes it: {why}")),
    }
}

/// The commands that make `run` again.
pub fn recipe(store: &Store, run: &Run) -> Recipe {
    let mut r = Recipe {
        lines: Vec::new(),
        why_not: None,
        notes: Vec::new(),
    };
    recipe_into(store, run, &mut r, 0);
    if run.manifest.engine != ENGINE_VERSION {
        r.notes.push(format!(
            "it was recorded by {}, and this rewind is {ENGINE_VERSION}: the commands make a \
             run with another id",
            run.manifest.engine
        ));
    }
    if r.why_not.is_some() {
        r.lines.clear();
    }
    r
}

/// The base check command for a run made by `rewind check`.
fn check_line(run: &Run) -> Option<Line> {
    let mut base = run.clone();
    base.manifest.perturb.clear();
    base.manifest.reseed = None;
    base.manifest.schedule = 0;
    base.manifest.schedule_from = None;
    base.manifest.schedule_until = None;
    base.manifest.pct = None;
    if base.manifest.fork_of.is_some() {
        return None;
    }
    let (flags, cwd) = run_flags(&base, &mut Vec::new()).ok()?;
    let mut argv = vec!["rewind".to_string(), "check".to_string()];
    argv.extend(flags);
    Some(Line::new(argv, cwd, stdin_of(run)))
}

/// A run narrowing made (explicit perturbations), and the run without its
/// last perturbation, when this store has it: the pair `rewind check`
/// printed, each with what a person calls it (by exit status alone: the
/// properties it was checked with are not kept with the run).
pub struct Pair {
    pub this: Label,
    pub other: Label,
    pub other_run: Run,
    /// What this run adds to the other: `a reschedule at step 36`.
    pub added: String,
}

pub fn narrowing_pair(store: &Store, run: &Run) -> Option<Pair> {
    let m = &run.manifest;
    if m.fork_of.is_some() || m.schedule != 0 {
        return None;
    }
    let mut without = m.clone();
    let (added, rest) = match (m.reseed, m.perturb.split_last()) {
        // `rewind check --seeds`: schedule 0 reseeded.
        (Some((step, seed)), _) => {
            without.reseed = None;
            (
                format!("its randomness reseeded with {seed} at step {step}"),
                &m.perturb[..],
            )
        }
        (None, Some((added, rest))) => {
            without.perturb = rest.to_vec();
            (added.to_string(), rest)
        }
        (None, None) => return None,
    };
    let other_run = Run::load(&store.runs_dir().join(without.id())).ok()?;
    let judged = |r: &Run| Judged {
        status: r.meta.exit,
        other_violation: None,
    };
    let (other, this) = labels(judged(&other_run), judged(run), rest.is_empty());
    Some(Pair {
        this,
        other,
        other_run,
        added,
    })
}

fn image_line(loc: &ImageLocation) -> String {
    match loc {
        ImageLocation::Program {
            guest_path,
            host_path,
            deps,
        } => {
            let files = deps
                .iter()
                .filter(|d| matches!(d.kind, vmm::image::DepKind::File { .. }))
                .count();
            if !deps.is_empty() {
                format!("the program file {guest_path} with its interpreter and libraries ({files} files)")
            } else if Path::new(guest_path) == host_path {
                format!("the program file {guest_path}")
            } else {
                format!(
                    "the program file {}, seen by the guest at {guest_path}",
                    host_path.display()
                )
            }
        }
        ImageLocation::Root { dir } => format!("the root directory {}", dir.display()),
        ImageLocation::Store(s) => format!(
            "the input closure of {} ({} store paths) and {}",
            s.drv,
            s.paths.len(),
            s.build_dir
        ),
    }
}

fn stdin_bytes(run: &Run) -> u64 {
    std::fs::metadata(run.dir.join("stdin.bin"))
        .map(|m| m.len())
        .unwrap_or(0)
}

pub fn main(args: ShowArgs) -> Result<i32> {
    let store = crate::app::store()?;
    let run = match crate::app::resolve(&args.run.spec) {
        Ok(run) => run,
        Err(e) => match crate::app::kept::find(&store, &args.run.spec) {
            Some(n) => return Ok(not_kept(&n, args.json)),
            None => return Err(e),
        },
    };
    let r = recipe(&store, &run);
    let mut notes = r.notes.clone();
    let image_now = run.image_hash_now().ok();
    if image_now.as_deref() != Some(run.manifest.image.as_str()) {
        notes.push(match image_now {
            Some(_) => "its image changed since it was recorded: the commands make a run with \
                        another id"
                .to_string(),
            None => "its image is no longer on this host".to_string(),
        });
    }
    let shown = Shown {
        check: r.why_not.as_ref().and_then(|_| check_line(&run)),
        pair: narrowing_pair(&store, &run),
        stdin_path: run
            .manifest
            .stdin
            .as_ref()
            .map(|_| run.dir.join("stdin.bin")),
        run: &run,
        r: &r,
        notes,
    };
    if args.json {
        println!("{}", shown.json());
        return Ok(0);
    }
    let stdout = std::io::stdout();
    let mut o = std::io::BufWriter::new(stdout.lock());
    shown.write_header(&mut o)?;
    shown.write_inputs(&mut o)?;
    shown.write_commands(&mut o)?;
    o.flush()?;
    Ok(0)
}

/// What `rewind show` says of a run.
struct Shown<'a> {
    run: &'a Run,
    r: &'a Recipe,
    notes: Vec<String>,
    /// The `rewind check` that makes it again, when no single command does.
    check: Option<Line>,
    pair: Option<Pair>,
    stdin_path: Option<PathBuf>,
}

impl Shown<'_> {
    fn json(&self) -> serde_json::Value {
        let (run, r, m) = (self.run, self.r, &self.run.manifest);
        let (check, pair, stdin_path, notes) =
            (&self.check, &self.pair, &self.stdin_path, &self.notes);
        crate::util::json_value(&ShowJson {
            id: &run.id,
            name: &run.meta.name,
            status: &run.meta.status,
            steps: run.meta.steps,
            fork_of: &m.fork_of,
            inputs: vmm::record::json::manifest(m),
            image: &run.meta.image,
            stdin_bytes: stdin_bytes(run),
            stdin_file: stdin_path,
            timeout_secs: run.meta.timeout_secs,
            commands: &r.lines,
            reproducible: r.why_not.is_none(),
            why_not: &r.why_not,
            check_command: check,
            narrowing: pair.as_ref().map(NarrowingJson::of),
            notes,
        })
    }

    fn write_header(&self, o: &mut impl Write) -> Result<()> {
        let (run, m, pair) = (self.run, &self.run.manifest, &self.pair);
        writeln!(
            o,
            "run {}  {}  {} steps  {}",
            run.id, run.meta.status, run.meta.steps, run.meta.name
        )?;
        if let Some(f) = &m.fork_of {
            writeln!(o, "fork of {} at step {}", f.parent, f.step)?;
        }
        if let Some(p) = &pair {
            writeln!(
                o,
                "{}: run {} ({}, {}) with {} added; `rewind check` narrows to this pair",
                p.this, p.other_run.id, p.other, p.other_run.meta.status, p.added,
            )?;
        }
        Ok(())
    }

    fn write_inputs(&self, mut o: &mut impl Write) -> Result<()> {
        let (run, m, stdin_path) = (self.run, &self.run.manifest, &self.stdin_path);
        writeln!(o)?;
        writeln!(o, "inputs:")?;
        let kv = |o: &mut dyn Write, k: &str, v: String| writeln!(o, "  {k:<10} {v}");
        kv(&mut o, "program", m.program.clone())?;
        kv(
            &mut o,
            "argv",
            m.argv
                .iter()
                .map(|a| quote(a))
                .collect::<Vec<_>>()
                .join(" "),
        )?;
        kv(
            &mut o,
            "env",
            m.env.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" "),
        )?;
        kv(&mut o, "cwd", m.cwd.clone())?;
        kv(&mut o, "image", image_line(&run.meta.image))?;
        kv(&mut o, "", format!("image hash {}", m.image))?;
        kv(
            &mut o,
            "stdin",
            match (&m.stdin, &stdin_path) {
                (Some(h), Some(p)) => format!(
                    "{} bytes, kept in {} (blake3 {})",
                    stdin_bytes(run),
                    p.display(),
                    &h[..16.min(h.len())]
                ),
                _ => "none".into(),
            },
        )?;
        kv(&mut o, "epoch", m.epoch.to_string())?;
        kv(&mut o, "seed", m.seed.to_string())?;
        kv(&mut o, "cores", m.cores.to_string())?;
        kv(&mut o, "mem", size(m.mem))?;
        let window = match (m.schedule_from, m.schedule_until) {
            (None, None) => String::new(),
            (f, u) => format!(
                " (steps {}..{})",
                f.map_or(String::new(), |f| f.to_string()),
                u.map_or(String::new(), |u| u.to_string())
            ),
        };
        let pct = match &m.pct {
            Some(p) if m.schedule != 0 => format!(
                ", PCT: {} priority change points among {} steps{}",
                p.depth.saturating_sub(1),
                p.steps,
                match p.shared.len() {
                    0 => String::new(),
                    n => format!(" (system calls and accesses to {n} shared byte ranges)"),
                }
            ),
            _ => String::new(),
        };
        kv(&mut o, "schedule", format!("{}{window}{pct}", m.schedule))?;
        if !m.perturb.is_empty() {
            let list: Vec<String> = m.perturb.iter().map(|p| p.to_string()).collect();
            kv(&mut o, "perturb", list.join(", "))?;
        }
        if let Some((step, seed)) = m.reseed {
            kv(&mut o, "reseed", format!("seed {seed} from step {step}"))?;
        }
        if let Some(t) = run.meta.timeout_secs {
            kv(&mut o, "timeout", format!("{t}s (host time; not an input)"))?;
        }
        kv(&mut o, "engine", m.engine.clone())?;
        Ok(())
    }

    fn write_commands(&self, o: &mut impl Write) -> Result<()> {
        let (r, check, notes) = (self.r, &self.check, &self.notes);
        writeln!(o)?;
        match &r.why_not {
            None => {
                writeln!(o, "made again (the same id, in any REWIND_HOME) by:")?;
                for l in &r.lines {
                    writeln!(o, "  {}", l.shell)?;
                }
            }
            Some(why) => {
                writeln!(o, "made again by: no single command: {why}.")?;
                if let Some(c) = &check {
                    writeln!(
                        o,
                        "`rewind check` of its program and inputs, given the options it was checked \
                         with (not kept with the run), makes it again among its runs:"
                    )?;
                    writeln!(o, "  {}", c.shell)?;
                }
            }
        }
        for n in notes {
            writeln!(o, "note: {n}")?;
        }
        Ok(())
    }
}

/// `rewind show` of a schedule a check did not keep: what it was and the
/// command that makes it again.
fn not_kept(n: &crate::app::kept::NotKept, json: bool) -> i32 {
    let t = &n.tried;
    let id = t["run"].as_str().unwrap_or_default();
    let remake = t["remake"].as_str();
    if json {
        let v = crate::util::json_value(&NotKeptJson::of(n));
        println!("{v}");
        return 0;
    }
    println!(
        "run {id} was not kept: it is {} of the check of run {}, where it passed ({}, {} steps)",
        t["label"].as_str().unwrap_or_default().trim(),
        n.check.base,
        t["status"].as_str().unwrap_or_default(),
        t["steps"],
    );
    match remake {
        Some(line) => println!("this makes it again (the same id):\n  {line}"),
        None => println!("no `rewind run` command makes it again"),
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(quote("abc/d.e-f"), "abc/d.e-f");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn sizes() {
        assert_eq!(size(2 << 30), "2G");
        assert_eq!(size(512 << 20), "512M");
        assert_eq!(size(4096 * 5000), "20000K");
        assert_eq!(size(5000), "5000");
    }

    #[test]
    fn env_flags_round_trip() {
        let env = guest_env(&["HOME=/x".into(), "A=1".into()]).unwrap();
        assert_eq!(
            env,
            vec!["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/x", "A=1"]
        );
    }
}
