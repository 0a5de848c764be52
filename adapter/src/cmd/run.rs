//! `rewind run`: record a program's run.

use crate::app::record::{
    prepare_beside, summary, wait_for_image, Prepared, RunSpec, DEFAULT_CORES, DEFAULT_CWD,
    IMAGE_NOTE_AFTER,
};
use crate::app::{store, warn_all};
use crate::examples;
use crate::util::{parse_secs, parse_size};
use anyhow::Result;
use clap::Args;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;
use vmm::run::{ExitStatus, Pct};
use vmm::run::{Limits, Outcome};
use vmm::runner;
use vmm::store::{RunDetails, Store};

#[derive(Args, Debug)]
#[command(
    override_usage = "rewind run [OPTIONS] -- PROG [ARGS]...\n       rewind run [OPTIONS] --example NAME [-- ARGS...]",
    after_help = "The guest's environment is PATH=/usr/local/bin:/usr/bin:/bin and HOME=/root, \
                  changed and extended by --env; nothing of the host's environment reaches it.\n\
                  Standard input, when it is not a terminal, is read whole before the run and \
                  is one of its inputs.\n\
                  The last line on stderr says how the run ended; the exit status is the \
                  program's (128+N for signal N, 124 timed-out, 125 deadlocked)."
)]
pub struct RunArgs {
    /// A directory that is the guest's `/`; PROG is then a path inside it
    /// (a bare name is looked up in the guest's PATH). Without it the image
    /// is the program file alone, at its own absolute path.
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The guest's working directory (absolute guest path).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_CWD)]
    pub cwd: String,
    /// Set a guest environment variable (repeatable); overrides the defaults.
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// The guest's wall clock at step 0, in seconds since the Unix epoch
    /// [default: the start of the current day, UTC].
    #[arg(long, value_name = "SECS")]
    pub epoch: Option<u64>,
    /// Seed of the guest's randomness (getrandom, AT_RANDOM, /dev/urandom).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// CPUs the guest is told it has (sched_getaffinity).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_CORES,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub cores: u32,
    /// Guest memory, like 512M or 2G (pages cost host memory only when touched).
    #[arg(long, value_name = "SIZE", default_value = "2G", value_parser = parse_size)]
    pub mem: u64,
    /// Stop the run after this many seconds of host time; it ends `timed-out`.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub timeout: Option<Duration>,
    /// A name for the run, to find it by (default: the program's file name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Do not show the program's output live (it is recorded all the same).
    #[arg(short, long)]
    pub quiet: bool,
    /// Run schedule N: 0 is the unperturbed policy; N > 0 perturbs the
    /// steps in the window from a PRNG seeded with N.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub schedule: u64,
    /// First step a schedule may perturb [default: 0].
    #[arg(long, value_name = "STEP")]
    pub schedule_from: Option<u64>,
    /// Last step a schedule may perturb [default: the end of the run].
    #[arg(long, value_name = "STEP")]
    pub schedule_until: Option<u64>,
    /// Reschedule at this step: the running thread goes behind the others
    /// (repeatable; what `rewind check`'s narrowing runs).
    #[arg(long, value_name = "STEP")]
    pub reschedule_at: Vec<u64>,
    /// Stall the running thread at this step for NS virtual nanoseconds (repeatable).
    #[arg(long, value_name = "STEP:NS", value_parser = parse_stall)]
    pub stall_at: Vec<(u64, u64)>,
    /// After this step thread TID takes the CPU (repeatable; what a PCT
    /// schedule's choices replay as).
    #[arg(long, value_name = "STEP:TID", value_parser = parse_switch)]
    pub switch_at: Vec<(u64, u32)>,
    /// Make --schedule N a PCT schedule: DEPTH-1 priority change points
    /// among STEPS steps from --schedule-from (what `rewind check
    /// --strategy pct` runs); with RANGES (`0xADDR+LEN,...`), the steps
    /// counted are only system calls and accesses to those bytes.
    #[arg(long, value_name = "DEPTH:STEPS[:RANGES]", value_parser = parse_pct)]
    pub pct: Option<Pct>,
    /// Reseed the guest's randomness at this step (what `rewind check --seeds` runs).
    #[arg(long, value_name = "STEP:SEED", value_parser = parse_pair)]
    pub reseed: Option<(u64, u64)>,
    /// Scheduling points: `syscalls` (system calls and faults), `memory`
    /// (also every access to memory more than one thread touches) or
    /// `races` (also every access to a page two threads touch with nothing
    /// ordering them) [default: syscalls].
    #[arg(long, value_name = "syscalls|memory|races")]
    pub points: Option<vmm::run::Points>,
    /// With `--points races`: pages that trap from the start
    /// (`0xADDR,...`, sorted; what a check learns and gives its schedules).
    #[arg(long, value_name = "PAGES", value_parser = parse_pages)]
    pub race_pages: Option<Pages>,
    /// Keep no keyframes (seeks and forks of this run then rerun from step 0).
    #[arg(long)]
    pub no_keyframes: bool,
    #[command(flatten)]
    pub artifacts: super::artifacts::ArtifactArgs,
    /// Run a built-in example program (`rewind run --example list` lists them).
    #[arg(long, value_name = "NAME", conflicts_with = "root")]
    pub example: Option<String>,
    /// The program and its arguments (put them after `--`).
    #[arg(
        value_name = "PROG [ARGS]",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
}

impl RunArgs {
    /// The run these options describe.
    pub fn spec(&self) -> RunSpec {
        RunSpec {
            root: self.root.clone(),
            cwd: self.cwd.clone(),
            env: self.env.clone(),
            epoch: self.epoch,
            seed: self.seed,
            cores: self.cores,
            mem: self.mem,
            timeout: self.timeout,
            name: self.name.clone(),
            schedule: self.schedule,
            schedule_from: self.schedule_from,
            schedule_until: self.schedule_until,
            reschedule_at: self.reschedule_at.clone(),
            stall_at: self.stall_at.clone(),
            switch_at: self.switch_at.clone(),
            pct: self.pct.clone(),
            reseed: self.reseed,
            points: self.points,
            race_pages: self.race_pages.clone().map(|p| p.0).unwrap_or_default(),
            example: self.example.clone(),
            command: self.command.clone(),
        }
    }
}

/// Standard input's bytes when it is not a terminal; empty otherwise.
pub fn read_stdin() -> Vec<u8> {
    // SAFETY: isatty only inspects the descriptor.
    if unsafe { libc::isatty(0) } == 1 {
        return Vec::new();
    }
    let mut buf = Vec::new();
    if std::io::stdin().lock().read_to_end(&mut buf).is_err() {
        // Closed or unreadable standard input counts as empty.
        buf.clear();
    }
    buf
}

/// Whether two descriptors are the same file, pipe or terminal.
fn same_sink(a: i32, b: i32) -> bool {
    // SAFETY: fstat writes into the zeroed structs we pass.
    unsafe {
        let mut sa: libc::stat = std::mem::zeroed();
        let mut sb: libc::stat = std::mem::zeroed();
        libc::fstat(a, &mut sa) == 0
            && libc::fstat(b, &mut sb) == 0
            && sa.st_dev == sb.st_dev
            && sa.st_ino == sb.st_ino
            && sa.st_rdev == sb.st_rdev
    }
}

pub fn main(args: RunArgs) -> Result<i32> {
    if args.example.as_deref() == Some("list") {
        for name in examples::names() {
            println!("{name:<16} {}", examples::summary(name).unwrap_or(""));
        }
        return Ok(0);
    }
    let store = store()?;
    // Fail early, before reading stdin or hashing, when runs cannot be written.
    store.prepare()?;
    // Check the program before waiting for standard input to end.
    let mut prepared = prepare_beside(&args.spec(), &store)?;
    prepared.set_stdin(read_stdin());
    let limits = Limits {
        timeout: args.timeout,
        ..Default::default()
    };
    let (_, outcome) = record(&store, &mut prepared, &limits, &args)?;
    Ok(outcome.status.shell_code())
}

/// Records `prepared`'s run with `limits` and `args`' options (its output
/// echoed unless `-q`, its keyframes, a failing run kept in `--artifacts`),
/// and says how it ended on stderr (where each thread was when it was
/// stuck, then the status line, always the last): its id and outcome.
pub fn record(
    store: &Store,
    prepared: &mut Prepared,
    limits: &Limits,
    args: &RunArgs,
) -> Result<(String, Outcome)> {
    let hashing = prepared.hashing.take();
    let inputs = &prepared.inputs;
    let mut rec = store.begin(&inputs.manifest, &inputs.stdin)?;
    let quiet = args.quiet;
    rec.set_echo(!quiet);
    rec.set_keyframes(!args.no_keyframes);
    let outcome = runner::run(inputs, limits, &mut rec)?;
    // Start what follows on its own line where the guest left one open.
    let mut newline = !quiet && rec.stderr_line_open(same_sink(1, 2));
    if let Some(hashing) = hashing {
        let note = &mut |line: String| {
            if std::mem::take(&mut newline) {
                eprintln!();
            }
            eprintln!("rewind: {line}");
        };
        let hash = wait_for_image(hashing, &inputs.image, IMAGE_NOTE_AFTER, note)?;
        rec.set_image(hash)?;
    }
    let details = RunDetails {
        name: prepared.name.clone(),
        image: inputs.image.clone(),
        timeout: limits.timeout,
    };
    let warnings = rec.take_warnings();
    let run = rec.finish(&outcome, &details)?;
    if newline {
        eprintln!();
    }
    warn_all(warnings);
    if matches!(
        outcome.status,
        ExitStatus::Deadlocked | ExitStatus::TimedOut
    ) {
        for line in &outcome.stuck {
            eprintln!("rewind:   {line}");
        }
    }
    eprintln!("rewind: {}", summary(&run.id, &outcome));
    if let (Some(dir), true) = (
        &args.artifacts.artifacts,
        outcome.status != ExitStatus::Exited(0),
    ) {
        let failure = super::artifacts::Failure {
            run: &run.id,
            summary: format!("{}: {}", prepared.name, summary(&run.id, &outcome)),
            step: Some(outcome.steps),
            compare: None,
        };
        super::artifacts::write(store, dir, &failure)?;
    }
    Ok((run.id, outcome))
}

/// `STEP:N`.
fn parse_pair(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}`: expected STEP:N"))?;
    let num = |x: &str| {
        x.parse::<u64>()
            .map_err(|_| format!("`{s}`: expected STEP:N"))
    };
    Ok((num(a)?, num(b)?))
}

fn parse_stall(s: &str) -> Result<(u64, u64), String> {
    parse_pair(s)
}

fn parse_switch(s: &str) -> Result<(u64, u32), String> {
    let (step, tid) = parse_pair(s)?;
    let tid = u32::try_from(tid).map_err(|_| format!("`{s}`: no thread has id {tid}"))?;
    Ok((step, tid))
}

/// `--race-pages`: page addresses.
#[derive(Debug, Clone)]
pub struct Pages(pub Vec<u64>);

fn parse_pages(s: &str) -> Result<Pages, String> {
    let pages = s
        .split(',')
        .map(|p| u64::from_str_radix(p.strip_prefix("0x")?, 16).ok())
        .collect::<Option<Vec<u64>>>()
        .filter(|v| v.windows(2).all(|w| w[0] < w[1]) && v.iter().all(|p| p % 4096 == 0));
    pages
        .map(Pages)
        .ok_or_else(|| format!("`{s}`: expected sorted page addresses 0xADDR,..."))
}

fn parse_pct(s: &str) -> Result<Pct, String> {
    let bad = || {
        format!(
            "`{s}`: expected DEPTH:STEPS[:RANGES], DEPTH from 1 to 64, STEPS above 0, \
             RANGES sorted 0xADDR+LEN,..."
        )
    };
    let (pair, ranges) = match s.match_indices(':').nth(1) {
        Some((i, _)) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (depth, steps) = parse_pair(pair).map_err(|_| bad())?;
    let shared = match ranges {
        None => Vec::new(),
        Some(r) => r
            .split(',')
            .map(|one| {
                let (addr, len) = one.split_once('+')?;
                let addr = u64::from_str_radix(addr.strip_prefix("0x")?, 16).ok()?;
                Some((addr, len.parse::<u64>().ok().filter(|l| *l > 0)?))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad)?,
    };
    if shared
        .windows(2)
        .any(|w| w[0].0.saturating_add(w[0].1) > w[1].0)
    {
        return Err(bad());
    }
    match u32::try_from(depth) {
        Ok(depth @ 1..=64) if steps > 0 => Ok(Pct {
            depth,
            steps,
            shared,
        }),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Words {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn defaults_are_the_specs() {
        let args = Words::try_parse_from(["run", "--", "prog"]).unwrap().run;
        let want = RunSpec {
            command: vec!["prog".into()],
            ..RunSpec::default()
        };
        assert_eq!(args.spec(), want);
    }
}
