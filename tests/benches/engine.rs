//! The engine benchmark (issue 2, "Performance"): everything measured in one
//! process, on this host, and printed as ratios against baselines measured
//! here too.
//!
//!   (a) the bare KVM exit round trip: a ring-3 loop of `syscall`, whose entry
//!       is one `out` in ring 0, answered by a minimal handler that writes the
//!       registers back through sync regs; also a bare demand page fault;
//!   (b) a guest `getpid` loop under the full engine (`rewind run`), in steps
//!       per second, against (a);
//!   (c) demand page faults per second under the engine, against (a)'s;
//!   (d) wall time of `bank` natively and under `rewind run`;
//!   (e) a memory point's shared access, against (a);
//!   (f) a step of Node.js with a worker thread against a `getpid` step (b),
//!       and node's run beside native;
//!   (g) a step of the JVM (`java -Xint -version` through /usr/bin/java, over
//!       the --root tree `tests/tests/executables.rs` runs it in) likewise;
//!       for both, the run's floor: its steps at a `getpid` step's CPU plus
//!       the program's own CPU natively, and the run's CPU against it, and
//!       the same run with KVM's dirty log finding written pages instead
//!       of the tables' Dirty bits (`REWIND_KVM_DIRTY_LOG`);
//!   (h) the first touch of a page the guest's tables map (no exit: KVM's
//!       shadow fault), with a dirty log on the memory slot and without,
//!       as the engine's slot is (it reads its tables' Dirty bits).
//!
//! Wall time moves with whatever else the host runs, so (b), (f) and (g)
//! also give CPU time: the `rewind` process's user and system time
//! (getrusage of the children), against the bench's own thread's CPU time
//! for a bare exit. Linux counts the time the vCPU spends in the guest as
//! user time: "user" is the guest and the monitor's own code together.
//!
//! Run it with the release binary built first:
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench engine
//!
//! (b) and (c) run the guest at two sizes and divide the difference in steps
//! by the difference in wall time, so that starting the process, loading the
//! program and writing the run cost nothing in the rate. Each size's best
//! over the rounds is taken on its own, then the two subtracted.

#[path = "engine/bare.rs"]
mod bare;

use bare::{bare_faults, bare_syscalls, bare_touches, Bare, FAULT_ROUNDS};
use rewind_tests::{guest_arg, parse_status, Home, Output};
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    // `cargo bench` passes `--bench`; nothing here takes arguments.
    println!("rewind engine benchmark ({})", host());
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    println!();

    println!("load average before: {}", rewind_tests::load_average());
    println!();

    // Bare and engine measurements alternate, so that whatever else the host
    // is doing weighs on both alike; each figure is the best of its rounds.
    let bare = Bare::new();
    let home = Home::unreplayed();
    let (mut exit_us, mut exit_cpu) = (f64::MAX, Cpu::MAX);
    let mut getpid = Differential::new(&[], "getpid", 2_000, 20_000);
    for _ in 0..5 {
        let before = Cpu::thread();
        exit_us = exit_us.min(bare_syscalls(&bare, 20_000));
        exit_cpu = exit_cpu.min(Cpu::thread().minus(before).per(20_000));
        getpid.round(&home);
    }
    let (step_us, step_cpu, steps_per_call) = (getpid.us(), getpid.cpu(), getpid.per());
    let mut fault_us = f64::MAX;
    let mut pages = Differential::new(&[], "pages", 1_000, 9_000);
    for round in 0..FAULT_ROUNDS {
        fault_us = fault_us.min(bare_faults(&bare, round, 8_000));
        pages.round(&home);
    }
    let (page_us, steps_per_page) = (pages.us(), pages.per());

    println!("(a) bare KVM exit round trip (syscall -> out -> sync regs):  {exit_us:7.2} us  = {:>9.0} exits/s", 1e6 / exit_us);
    println!("    bare demand page fault served by a minimal handler:      {fault_us:7.2} us  = {:>9.0} faults/s", 1e6 / fault_us);
    println!(
        "(b) engine, guest getpid loop:                               {step_us:7.2} us  = {:>9.0} steps/s  ({steps_per_call:.2} steps per call)",
        1e6 / step_us
    );
    println!(
        "    engine step rate / bare exit rate:                       {:6.1} %   (goal: at least 95 %)",
        100.0 * exit_us / step_us
    );
    println!(
        "    CPU a bare exit (the bench's thread, user + sys):        {:7.2} us  ({:.2} user)",
        exit_cpu.total(),
        exit_cpu.user
    );
    println!(
        "    CPU a getpid step (the rewind process, user + sys):      {:7.2} us  ({:.2} user)",
        step_cpu.total(),
        step_cpu.user
    );
    println!(
        "    engine step CPU rate / bare exit CPU rate:               {:6.1} %",
        100.0 * exit_cpu.total() / step_cpu.total()
    );
    println!(
        "(c) engine, demand page faults:                              {page_us:7.2} us  = {:>9.0} faults/s  ({steps_per_page:.2} steps per page)",
        1e6 / page_us
    );
    println!(
        "    engine fault rate / bare fault rate:                     {:6.1} %",
        100.0 * fault_us / page_us
    );

    // A shared access under memory points: `counter N` adds to a shared
    // total from two threads; nearly every extra step is a memory point.
    let mut exit_us2 = f64::MAX;
    let mut counter = Differential::new(&["--points", "memory"], "counter", 200, 2_000);
    for _ in 0..3 {
        exit_us2 = exit_us2.min(bare_syscalls(&bare, 20_000));
        counter.round(&home);
    }
    let access_us = counter.us() / counter.per();
    println!(
        "(e) engine, a memory point (shared access, counter):        {access_us:7.2} us  = {:>9.0} accesses/s",
        1e6 / access_us
    );
    println!(
        "    shared access / bare exit round trip:                    {:6.2} x   (goal: at most 3 x)",
        access_us / exit_us.min(exit_us2)
    );

    match exits_per_step(&home, "counter", 2_000) {
        Some((exits, steps)) => println!(
            "    KVM exits per step of `run --points memory counter 2000`: {:6.3}   ({exits} KVM_RUN calls, {steps} steps; strace)",
            exits as f64 / steps as f64
        ),
        None => println!("    KVM exits per step: skipped (no strace on this host)"),
    }

    let mut native_lost = 0;
    let native = best(10, || {
        let (t, out) = timed(&home, None, &[], &[]);
        // Natively the race is real: bank loses money now and then (exit 2).
        assert!(out.code == 0 || out.code == 2, "native bank: {out}");
        native_lost += usize::from(out.code == 2);
        t
    });
    let mut engine_wall = f64::MAX;
    let rewind = best(10, || {
        let (t, out) = timed(&home, Some("rewind"), &["run", "--example", "bank"], &[]);
        let run = parse_status(&out).unwrap_or_else(|| panic!("rewind run --example bank: {out}"));
        engine_wall = engine_wall.min(wall_of(&run.line).unwrap_or(f64::NAN));
        t
    });
    println!(
        "(d) bank natively:                                           {:7.2} ms  (lost money in {native_lost} of 10 runs)",
        native * 1e3
    );
    println!(
        "    bank under `rewind run --example bank` (whole command):  {:7.2} ms  = {:.1}x native",
        rewind * 1e3,
        rewind / native
    );
    println!(
        "    of which the run itself (the status line's wall time):   {:7.2} ms  = {:.1}x native",
        engine_wall * 1e3,
        engine_wall / native
    );
    node_steps(&home, step_us, step_cpu);
    java_steps(&home, step_us, step_cpu);
    shadow_faults(exit_us);
    println!();
    println!("load average after: {}", rewind_tests::load_average());
}

/// (h) The first touch of a page the guest's tables map: no exit, but KVM
/// builds its own translation (a shadow fault on PVM). With a dirty log on
/// the memory slot KVM neither fills the neighbouring entries nor maps
/// more than 4 KiB at a fault: the engine's slot keeps none, and finds
/// written pages by its tables' Dirty bits (`machine::dirty`).
fn shadow_faults(exit_us: f64) {
    let (logged, plain) = (Bare::with_dirty_log(true), Bare::with_dirty_log(false));
    let (mut on, mut off) = (f64::MAX, f64::MAX);
    for round in 0..FAULT_ROUNDS {
        on = on.min(bare_touches(&logged, round, 4_000));
        off = off.min(bare_touches(&plain, round, 4_000));
    }
    println!(
        "(h) first touch of a mapped page (a shadow fault), dirty log: {on:7.2} us  = {:.0} % of a bare exit",
        100.0 * on / exit_us
    );
    println!(
        "    the same without a dirty log on the slot:                {off:7.2} us  (dirty log / none: {:.1} x)",
        on / off
    );
}

/// (f) A big runtime's steps against a `getpid` step: Node.js with a worker
/// thread (tests/node/worker.js, as tests/tests/node.rs runs it), the run's
/// own wall time (its status line) and the whole command's CPU time a
/// step, beside node natively.
fn node_steps(home: &Home, step_us: f64, step_cpu: Cpu) {
    let node = "/usr/bin/node";
    if !std::path::Path::new(node).exists() {
        println!("(f) Node.js steps: skipped (no {node})");
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("node/worker.js");
    let script = std::fs::read_to_string(script).expect("tests/node/worker.js");
    let native = native_best(node, &["-e", &script]);
    let [run, logged] = runtime_steps(home, &["run", "--", node, "-e", &script]);
    println!(
        "(f) node with a worker: {} steps in {:.2} s (the run's wall), natively {:.2} s",
        run.steps, run.wall, native.wall
    );
    run.print("node", step_us, step_cpu);
    run.print_floor(step_cpu, native.cpu);
    run.print_against(&logged);
}

/// (g) The JVM's steps against a `getpid` step: `java -Xint -version`
/// through /usr/bin/java (a link through /etc/alternatives) over the root
/// tree the programs table's java row runs it in.
fn java_steps(home: &Home, step_us: f64, step_cpu: Cpu) {
    let java = "/usr/bin/java";
    if !std::path::Path::new(java).exists() {
        println!(
            "(g) JVM steps: skipped (no {java}; scripts/setup-tests installs default-jre-headless)"
        );
        return;
    }
    let root = rewind_tests::roots::java_root(java);
    let r = root.path().to_str().expect("UTF-8 path");
    let native = native_best(java, &["-Xint", "-version"]);
    let [run, logged] = runtime_steps(home, &["run", "--root", r, "--", java, "-Xint", "-version"]);
    println!(
        "(g) java -Xint -version: {} steps in {:.2} s (the run's wall), natively {:.2} s",
        run.steps, run.wall, native.wall
    );
    run.print("JVM", step_us, step_cpu);
    run.print_floor(step_cpu, native.cpu);
    run.print_against(&logged);
}

/// A native run of a big runtime: the best wall time and CPU time of three.
struct Native {
    wall: f64,
    cpu: Cpu,
}

/// Three native runs of `prog args`, which must succeed: the best of each figure.
fn native_best(prog: &str, args: &[&str]) -> Native {
    let mut best = Native {
        wall: f64::MAX,
        cpu: Cpu::MAX,
    };
    for _ in 0..3 {
        let before = Cpu::children();
        let t = Instant::now();
        let out = Command::new(prog)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("start the native program");
        assert!(out.status.success(), "native {prog}");
        best.wall = best.wall.min(t.elapsed().as_secs_f64());
        best.cpu = best.cpu.min(Cpu::children().minus(before));
    }
    best
}

/// The best of three runs of a big runtime under `rewind ARGS`, after one.
struct RuntimeRun {
    steps: u64,
    /// The run's own wall time (its status line), seconds.
    wall: f64,
    /// The whole command's CPU time.
    cpu: Cpu,
}

/// How guest writes are found in a run: the page tables' Dirty bits (the
/// engine's way) or KVM's dirty log (`REWIND_KVM_DIRTY_LOG`, the way
/// before 2026-12-07), the baseline beside it.
const WRITES: [(&str, &[(&str, &str)]); 2] = [
    ("Dirty bits", &[]),
    ("KVM's dirty log", &[("REWIND_KVM_DIRTY_LOG", "1")]),
];

/// The best of three runs of `rewind ARGS` each way of [`WRITES`], the
/// ways alternating so that the host's load weighs on both alike.
fn runtime_steps(home: &Home, args: &[&str]) -> [RuntimeRun; 2] {
    let mut best = WRITES.map(|_| RuntimeRun {
        steps: 0,
        wall: f64::MAX,
        cpu: Cpu::MAX,
    });
    // Not counted: the first run hashes a new root's files and fills the
    // store, which the runs after it find done.
    timed(home, Some("rewind"), args, &[]);
    for _ in 0..3 {
        for (best, (_, env)) in best.iter_mut().zip(WRITES) {
            let before = Cpu::children();
            let (_, out) = timed(home, Some("rewind"), args, env);
            let cpu = Cpu::children().minus(before);
            let run = parse_status(&out).unwrap_or_else(|| panic!("rewind {args:?}: {out}"));
            assert_eq!(run.status, "exited:0", "{out}");
            best.wall = best.wall.min(wall_of(&run.line).unwrap_or(f64::NAN));
            best.cpu = best.cpu.min(cpu);
            best.steps = run.steps.expect("the status line gives steps");
        }
    }
    best
}

impl RuntimeRun {
    /// This run (writes found by Dirty bits) against `logged`, the same
    /// run with KVM's dirty log.
    fn print_against(&self, logged: &RuntimeRun) {
        println!(
            "    the same with {} instead: {:7.1} us a step CPU, {:.2} s wall; {} / it: {:.2} x CPU",
            WRITES[1].0,
            logged.cpu.per(logged.steps).total(),
            logged.wall,
            WRITES[0].0,
            self.cpu.total() / logged.cpu.total()
        );
    }

    /// The run's CPU against its floor: each step at a `getpid` step's CPU
    /// (the exit every step is) plus the program's own CPU natively (its
    /// work between two steps). A step's ratio to a `getpid` step cannot
    /// be below the floor's, whatever the monitor does.
    fn print_floor(&self, step_cpu: Cpu, native_cpu: Cpu) {
        let exits = step_cpu.total() * self.steps as f64;
        let floor = exits + native_cpu.total();
        println!(
            "    its floor, steps x a getpid step + native CPU:         {:7.1} ms  ({:.1} + {:.1} ms; a step's floor {:.2} x a getpid step)",
            floor / 1e3,
            exits / 1e3,
            native_cpu.total() / 1e3,
            floor / exits
        );
        println!(
            "    the run's CPU / its floor:                              {:6.2} x",
            self.cpu.total() / floor
        );
    }

    fn print(&self, what: &str, step_us: f64, step_cpu: Cpu) {
        let per_step = self.wall * 1e6 / self.steps as f64;
        let cpu = self.cpu.per(self.steps);
        println!(
            "    a {what} step / a getpid step, wall:                    {:6.2} x   ({per_step:.1} us a step; goal: at most 2 x)",
            per_step / step_us
        );
        println!(
            "    a {what} step / a getpid step, CPU (user + sys):        {:6.2} x   ({:.1} us a step: {:.1} user, {:.1} sys, the whole command)",
            cpu.total() / step_cpu.total(),
            cpu.total(),
            cpu.user,
            cpu.sys
        );
    }
}

/// User and system CPU time, in microseconds (or per unit, once divided).
#[derive(Clone, Copy, Debug)]
struct Cpu {
    user: f64,
    sys: f64,
}

impl Cpu {
    const MAX: Cpu = Cpu {
        user: f64::MAX,
        sys: f64::MAX,
    };

    fn of(who: libc::c_int) -> Cpu {
        // SAFETY: getrusage fills the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut u) };
        let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
        Cpu {
            user: us(u.ru_utime),
            sys: us(u.ru_stime),
        }
    }

    /// The ended children's, each counted once it was waited for.
    fn children() -> Cpu {
        Cpu::of(libc::RUSAGE_CHILDREN)
    }

    /// The calling thread's.
    fn thread() -> Cpu {
        Cpu::of(libc::RUSAGE_THREAD)
    }

    fn minus(self, o: Cpu) -> Cpu {
        Cpu {
            user: self.user - o.user,
            sys: self.sys - o.sys,
        }
    }

    fn per(self, n: u64) -> Cpu {
        Cpu {
            user: self.user / n as f64,
            sys: self.sys / n as f64,
        }
    }

    fn total(self) -> f64 {
        self.user + self.sys
    }

    /// The smaller in total.
    fn min(self, o: Cpu) -> Cpu {
        if o.total() < self.total() {
            o
        } else {
            self
        }
    }
}

fn host() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{model}, {cores} cores")
}

/// The smallest of `n` measurements.
fn best(n: usize, mut f: impl FnMut() -> f64) -> f64 {
    (0..n).map(|_| f()).fold(f64::MAX, f64::min)
}

/// Runs `rewind ARGS` (or, with `None`, the native `bank`) to its end and
/// returns its wall time in seconds. No deadline: a benchmark that hangs is
/// stopped by hand.
fn timed(home: &Home, rewind: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> (f64, Output) {
    let mut cmd = match rewind {
        Some(_) => Command::new(rewind_tests::rewind_bin()),
        None => Command::new(guest_arg("bank")),
    };
    cmd.args(args)
        .env("REWIND_HOME", home.path())
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    let t = Instant::now();
    let out = cmd.output().expect("start the command");
    let elapsed = t.elapsed().as_secs_f64();
    let out = Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    (elapsed, out)
}

/// The `<Y>s wall` figure of a status line.
fn wall_of(line: &str) -> Option<f64> {
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .iter()
        .position(|w| w.trim_end_matches(',') == "wall")
        .and_then(|i| words[i - 1].strip_suffix('s'))
        .and_then(|n| n.parse().ok())
}

/// `rewind run RUN_ARGS -- guest N` at two sizes, over rounds: each size's
/// fastest wall time and least CPU, and its steps. The per-unit figures
/// come from the two sizes' best, each taken on its own: the best of the
/// rounds' differences would reward a round whose small run was slow.
struct Differential {
    run_args: Vec<String>,
    guest: String,
    sizes: [u64; 2],
    wall: [f64; 2],
    cpu: [Cpu; 2],
    steps: [u64; 2],
}

impl Differential {
    fn new(run_args: &[&str], guest: &str, small: u64, large: u64) -> Differential {
        Differential {
            run_args: run_args.iter().map(|a| a.to_string()).collect(),
            guest: guest.to_string(),
            sizes: [small, large],
            wall: [f64::MAX; 2],
            cpu: [Cpu::MAX; 2],
            steps: [0; 2],
        }
    }

    /// One round: each size run once.
    fn round(&mut self, home: &Home) {
        let prog = guest_arg(&self.guest);
        for i in 0..2 {
            let n = self.sizes[i].to_string();
            let mut args = vec!["run"];
            args.extend(self.run_args.iter().map(String::as_str));
            args.extend(["--", prog.as_str(), n.as_str()]);
            let before = Cpu::children();
            let (elapsed, out) = timed(home, Some("rewind"), &args, &[]);
            let cpu = Cpu::children().minus(before);
            let run = parse_status(&out)
                .unwrap_or_else(|| panic!("rewind run {} {n}: {out}", self.guest));
            assert_eq!(run.status, "exited:0", "{out}");
            self.wall[i] = self.wall[i].min(elapsed);
            self.cpu[i] = self.cpu[i].min(cpu);
            self.steps[i] = run.steps.expect("the status line gives steps");
        }
    }

    fn units(&self) -> f64 {
        (self.sizes[1] - self.sizes[0]) as f64
    }

    /// Wall microseconds per unit of N.
    fn us(&self) -> f64 {
        (self.wall[1] - self.wall[0]) * 1e6 / self.units()
    }

    /// Steps per unit of N.
    fn per(&self) -> f64 {
        (self.steps[1] - self.steps[0]) as f64 / self.units()
    }

    /// The `rewind` process's CPU time per step.
    fn cpu(&self) -> Cpu {
        self.cpu[1]
            .minus(self.cpu[0])
            .per(self.steps[1] - self.steps[0])
    }
}

/// KVM_RUN calls and steps of one memory-point run of `guest n`, counted
/// by strace (None without it): how many exits a point costs, the #DB that
/// completes an access and the hide routine included (neither exits).
fn exits_per_step(home: &Home, guest: &str, n: u64) -> Option<(u64, u64)> {
    let trace = home.path().join("strace.out");
    let prog = guest_arg(guest);
    let out = Command::new("strace")
        .args(["-f", "-e", "trace=ioctl", "-o"])
        .arg(&trace)
        .arg(rewind_tests::rewind_bin())
        .args([
            "run",
            "--points",
            "memory",
            "--",
            prog.as_str(),
            &n.to_string(),
        ])
        .env("REWIND_HOME", home.path())
        .stdout(Stdio::null())
        .output()
        .ok()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let steps = stderr.lines().find_map(|l| {
        l.split(" after ")
            .nth(1)?
            .split(" steps")
            .next()?
            .parse()
            .ok()
    })?;
    let text = std::fs::read_to_string(&trace).ok()?;
    let exits = text.lines().filter(|l| l.contains("KVM_RUN")).count() as u64;
    Some((exits, steps))
}
