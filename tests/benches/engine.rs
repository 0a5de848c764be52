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
//!       the program's own CPU natively, and the run's CPU against it.
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
//! program and writing the run cost nothing in the rate.

use kvm_bindings::{kvm_msr_entry, kvm_segment, kvm_userspace_memory_region, Msrs};
use kvm_ioctls::{Kvm, SyncReg, VcpuExit, VcpuFd};
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
    let (mut exit_us, mut step_us, mut steps_per_call) = (f64::MAX, f64::MAX, 0.0);
    let (mut exit_cpu, mut step_cpu) = (Cpu::MAX, Cpu::MAX);
    for _ in 0..5 {
        let before = Cpu::thread();
        exit_us = exit_us.min(bare_syscalls(&bare, 20_000));
        exit_cpu = exit_cpu.min(Cpu::thread().minus(before).per(20_000));
        let d = differential(&home, &[], "getpid", 2_000, 20_000);
        step_us = step_us.min(d.us);
        step_cpu = step_cpu.min(d.cpu);
        steps_per_call = d.per;
    }
    let (mut fault_us, mut page_us, mut steps_per_page) = (f64::MAX, f64::MAX, 0.0);
    for round in 0..FAULT_ROUNDS {
        fault_us = fault_us.min(bare_faults(&bare, round, 8_000));
        let d = differential(&home, &[], "pages", 1_000, 9_000);
        page_us = page_us.min(d.us);
        steps_per_page = d.per;
    }

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
    let (mut exit_us2, mut access_us) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        exit_us2 = exit_us2.min(bare_syscalls(&bare, 20_000));
        let d = differential(&home, &["--points", "memory"], "counter", 200, 2_000);
        access_us = access_us.min(d.us / d.per);
    }
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
        let (t, out) = timed(&home, None, &[]);
        // Natively the race is real: bank loses money now and then (exit 2).
        assert!(out.code == 0 || out.code == 2, "native bank: {out}");
        native_lost += usize::from(out.code == 2);
        t
    });
    let mut engine_wall = f64::MAX;
    let rewind = best(10, || {
        let (t, out) = timed(&home, Some("rewind"), &["run", "--example", "bank"]);
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
    println!();
    println!("load average after: {}", rewind_tests::load_average());
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
    let run = runtime_steps(home, &["run", "--", node, "-e", &script]);
    println!(
        "(f) node with a worker: {} steps in {:.2} s (the run's wall), natively {:.2} s",
        run.steps, run.wall, native.wall
    );
    run.print("node", step_us, step_cpu);
    run.print_floor(step_cpu, native.cpu);
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
    let run = runtime_steps(home, &["run", "--root", r, "--", java, "-Xint", "-version"]);
    println!(
        "(g) java -Xint -version: {} steps in {:.2} s (the run's wall), natively {:.2} s",
        run.steps, run.wall, native.wall
    );
    run.print("JVM", step_us, step_cpu);
    run.print_floor(step_cpu, native.cpu);
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

fn runtime_steps(home: &Home, args: &[&str]) -> RuntimeRun {
    let mut best = RuntimeRun {
        steps: 0,
        wall: f64::MAX,
        cpu: Cpu::MAX,
    };
    // Not counted: the first run hashes a new root's files and fills the
    // store, which the runs after it find done.
    timed(home, Some("rewind"), args);
    for _ in 0..3 {
        let before = Cpu::children();
        let (_, out) = timed(home, Some("rewind"), args);
        let cpu = Cpu::children().minus(before);
        let run = parse_status(&out).unwrap_or_else(|| panic!("rewind {args:?}: {out}"));
        assert_eq!(run.status, "exited:0", "{out}");
        best.wall = best.wall.min(wall_of(&run.line).unwrap_or(f64::NAN));
        best.cpu = best.cpu.min(cpu);
        best.steps = run.steps.expect("the status line gives steps");
    }
    best
}

impl RuntimeRun {
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
fn timed(home: &Home, rewind: Option<&str>, args: &[&str]) -> (f64, Output) {
    let mut cmd = match rewind {
        Some(_) => Command::new(rewind_tests::rewind_bin()),
        None => Command::new(guest_arg("bank")),
    };
    cmd.args(args)
        .env("REWIND_HOME", home.path())
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

/// What `differential` measures, per unit of the guest's N.
struct Differential {
    /// Wall microseconds.
    us: f64,
    /// Steps.
    per: f64,
    /// The `rewind` process's CPU time, per step.
    cpu: Cpu,
}

/// Runs `rewind run RUN_ARGS -- guest N` at two sizes; returns wall
/// microseconds and steps per unit of N, and CPU time per step, from the
/// differences.
fn differential(
    home: &Home,
    run_args: &[&str],
    guest: &str,
    small: u64,
    large: u64,
) -> Differential {
    let prog = guest_arg(guest);
    let measure = |n: u64| -> (f64, u64, Cpu) {
        let n = n.to_string();
        let mut args = vec!["run"];
        args.extend_from_slice(run_args);
        args.extend(["--", prog.as_str(), n.as_str()]);
        let before = Cpu::children();
        let (elapsed, out) = timed(home, Some("rewind"), &args);
        let cpu = Cpu::children().minus(before);
        let run = parse_status(&out).unwrap_or_else(|| panic!("rewind run {guest} {n}: {out}"));
        assert_eq!(run.status, "exited:0", "{out}");
        (
            elapsed,
            run.steps.expect("the status line gives steps"),
            cpu,
        )
    };
    let (t_small, s_small, c_small) = measure(small);
    let (t_large, s_large, c_large) = measure(large);
    let units = (large - small) as f64;
    Differential {
        us: (t_large - t_small) * 1e6 / units,
        per: (s_large - s_small) as f64 / units,
        cpu: c_large.minus(c_small).per(s_large - s_small),
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

// ---------------------------------------------------------------------------
// (a): a bare machine, as in ../shared/probes/kvm-probe.c: identity-mapped
// page tables, a GDT, IDT and TSS, the syscall MSRs, a one-`out` entry for
// syscall and for every exception vector, and user code in ring 3.
//
// Guest physical layout:
//   0x1000   syscall entry: out 0x20, al (user-readable: PVM needs it)
//   0x2000   IDT stubs, 4 bytes each: out 0x80+vector, al
//   0x8000   top of the ring-0 stack (TSS.RSP0)
//   0x10000  PML4, 0x11000 PDPT, 0x12000 PD, 0x13000 page table for 0-2 MiB
//   0x20000  GDT, 0x21000 IDT, 0x30000 TSS
//   0x400000 page tables for virtual 4 MiB.. (demand paged, 4 KiB pages),
//            contiguous: one 8-byte entry per virtual page from 4 MiB
//   0x200000 user code (a 2 MiB user page), user stack below 0x300000
//   0x1000000.. frames handed out on demand

const MEM: usize = 192 << 20;
/// Demand-paging rounds; each touches its own 32 MiB of virtual addresses,
/// since the guest TLB keeps what an earlier round mapped.
const FAULT_ROUNDS: u64 = 4;
const FAULT_PTS: u64 = 0x400000;
const FAULT_VIRT: u64 = 0x400000;
const FAULT_ROUND_BYTES: u64 = 32 << 20;
const SYSCALL_PORT: u16 = 0x20;

struct Bare {
    _kvm: Kvm,
    _vm: kvm_ioctls::VmFd,
    vcpu: std::cell::RefCell<VcpuFd>,
    mem: *mut u8,
}

/// A flat ring-3 segment: user code (64-bit) or user data.
fn user_seg(selector: u16, code: bool) -> kvm_segment {
    kvm_segment {
        base: 0,
        limit: 0xffff_ffff,
        selector,
        type_: if code { 11 } else { 3 },
        present: 1,
        dpl: 3,
        db: u8::from(!code),
        s: 1,
        l: u8::from(code),
        g: 1,
        ..Default::default()
    }
}

impl Bare {
    fn new() -> Bare {
        let kvm = Kvm::new().expect("open /dev/kvm");
        let vm = kvm.create_vm().expect("KVM_CREATE_VM");
        let mem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MEM,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(mem, libc::MAP_FAILED);
        let mem = mem as *mut u8;
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: MEM as u64,
            userspace_addr: mem as u64,
        };
        unsafe { vm.set_user_memory_region(region) }.expect("memory region");
        let vcpu = vm.create_vcpu(0).expect("KVM_CREATE_VCPU");
        let b = Bare {
            _kvm: kvm,
            _vm: vm,
            vcpu: std::cell::RefCell::new(vcpu),
            mem,
        };
        // Page tables.
        b.w64(0x10000, 0x11000 | 7);
        b.w64(0x11000, 0x12000 | 7);
        b.w64(0x12000, 0x13000 | 7);
        for i in 0..512u64 {
            b.w64(0x13000 + i * 8, (i * 0x1000) | 3); // supervisor only...
        }
        b.w64(0x13000 + 8, 0x1000 | 5); // ...but the syscall entry: user, read-only
        b.w64(0x12000 + 8, 0x200000 | 0x87); // 2-4 MiB: one user 2 MiB page
        for i in 0..FAULT_ROUNDS * 16 {
            b.w64(0x12000 + (2 + i) * 8, (FAULT_PTS + i * 0x1000) | 7);
        }
        // GDT: null, kernel code 0x08, kernel data 0x10, user data 0x1b, user code 0x23, TSS 0x28.
        for (i, d) in [
            0u64,
            0x00af9b000000ffff,
            0x00cf93000000ffff,
            0x00cff3000000ffff,
            0x00affb000000ffff,
            0x67 | (0x30000 << 16) | (0x89 << 40),
            0,
        ]
        .into_iter()
        .enumerate()
        {
            b.w64(0x20000 + i as u64 * 8, d);
        }
        b.w64(0x30000 + 4, 0x8000); // TSS.RSP0
        for v in 0..32u64 {
            let off = 0x2000 + v * 4;
            b.w8(off, 0xe6);
            b.w8(off + 1, 0x80 + v as u8);
            b.w64(
                0x21000 + v * 16,
                (off & 0xffff) | (0x8 << 16) | (0x8E << 40) | ((off >> 16) << 48),
            );
            b.w64(0x21000 + v * 16 + 8, 0);
        }
        b.w8(0x1000, 0xe6);
        b.w8(0x1001, SYSCALL_PORT as u8);
        let msrs = Msrs::from_entries(&[
            kvm_msr_entry {
                index: 0xC000_0081,
                data: (0x10 << 48) | (0x8 << 32),
                ..Default::default()
            },
            kvm_msr_entry {
                index: 0xC000_0082,
                data: 0x1000,
                ..Default::default()
            },
            kvm_msr_entry {
                index: 0xC000_0084,
                data: 0x200,
                ..Default::default()
            },
        ])
        .unwrap();
        let mut vcpu = b.vcpu.borrow_mut();
        assert_eq!(vcpu.set_msrs(&msrs).expect("KVM_SET_MSRS"), 3);
        let cpuid = b
            ._kvm
            .get_supported_cpuid(kvm_bindings::KVM_MAX_CPUID_ENTRIES)
            .expect("KVM_GET_SUPPORTED_CPUID");
        vcpu.set_cpuid2(&cpuid).expect("KVM_SET_CPUID2");
        vcpu.set_sync_valid_reg(SyncReg::Register);
        vcpu.set_sync_valid_reg(SyncReg::SystemRegister);
        drop(vcpu);
        b
    }

    fn w64(&self, at: u64, v: u64) {
        assert!((at as usize) + 8 <= MEM);
        unsafe { (self.mem.add(at as usize) as *mut u64).write_unaligned(v) }
    }

    fn r64(&self, at: u64) -> u64 {
        assert!((at as usize) + 8 <= MEM);
        unsafe { (self.mem.add(at as usize) as *const u64).read_unaligned() }
    }

    fn w8(&self, at: u64, v: u8) {
        assert!((at as usize) < MEM);
        unsafe { self.mem.add(at as usize).write(v) }
    }

    /// Loads user code at 0x200000 and points the vCPU at it, in ring 3.
    fn user(&self, code: &[u8], rbx: u64) {
        for (i, byte) in code.iter().enumerate() {
            self.w8(0x200000 + i as u64, *byte);
        }
        let vcpu = self.vcpu.borrow();
        let mut s = vcpu.get_sregs().expect("KVM_GET_SREGS");
        s.cr3 = 0x10000;
        s.cr0 = 0x8005_0033;
        s.efer = 0x501;
        s.cr4 = (1 << 5) | (1 << 9) | (1 << 10);
        s.gdt.base = 0x20000;
        s.gdt.limit = 7 * 8 - 1;
        s.idt.base = 0x21000;
        s.idt.limit = 256 * 16 - 1;
        s.cs = user_seg(0x23, true);
        let uds = user_seg(0x1b, false);
        (s.ds, s.es, s.fs, s.gs, s.ss) = (uds, uds, uds, uds, uds);
        s.tr = kvm_segment {
            base: 0x30000,
            limit: 0x67,
            selector: 0x28,
            present: 1,
            type_: 11,
            ..Default::default()
        };
        vcpu.set_sregs(&s).expect("KVM_SET_SREGS");
        let r = kvm_bindings::kvm_regs {
            rip: 0x200000,
            rflags: 2,
            rsp: 0x300000,
            rbx,
            ..Default::default()
        };
        vcpu.set_regs(&r).expect("KVM_SET_REGS");
    }

    /// Runs to the next exit: Some(256) for a syscall, Some(vector) for an
    /// exception, None for anything else.
    fn next_exit(&self) -> Option<u16> {
        let mut vcpu = self.vcpu.borrow_mut();
        match vcpu.run() {
            Ok(VcpuExit::IoOut(SYSCALL_PORT, _)) => Some(256),
            Ok(VcpuExit::IoOut(port, _)) if (0x80..0xa0).contains(&port) => Some(port - 0x80),
            _ => None,
        }
    }

    /// Back to ring 3 through sync regs, from a syscall (rcx/r11) or from an
    /// exception frame with an error code on the ring-0 stack.
    fn resume_user(&self, from_syscall: bool) {
        let mut vcpu = self.vcpu.borrow_mut();
        let rsp = vcpu.sync_regs().regs.rsp;
        let frame = if from_syscall {
            None
        } else {
            Some([self.r64(rsp + 8), self.r64(rsp + 24), self.r64(rsp + 32)])
        };
        let sync = vcpu.sync_regs_mut();
        match frame {
            None => {
                sync.regs.rip = sync.regs.rcx;
                sync.regs.rflags = sync.regs.r11;
            }
            Some([rip, rflags, rsp]) => {
                sync.regs.rip = rip;
                sync.regs.rflags = rflags;
                sync.regs.rsp = rsp;
            }
        }
        vcpu.set_sync_dirty_reg(SyncReg::Register);
        // As the engine: segments written back only when the exit left
        // ring 3 (a PVM `syscall` does not), a KVM_SET_SREGS saved.
        let (cs, ss) = (user_seg(0x23, true), user_seg(0x1b, false));
        let sregs = &mut vcpu.sync_regs_mut().sregs;
        if sregs.cs != cs || sregs.ss != ss {
            sregs.cs = cs;
            sregs.ss = ss;
            vcpu.set_sync_dirty_reg(SyncReg::SystemRegister);
        }
    }
}

/// Microseconds per syscall round trip over `n` calls.
fn bare_syscalls(b: &Bare, n: u64) -> f64 {
    // mov eax, 39; syscall; dec rbx; jnz -12; ud2
    let code = [
        0xb8, 39, 0, 0, 0, 0x0f, 0x05, 0x48, 0xff, 0xcb, 0x75, 0xf4, 0x0f, 0x0b,
    ];
    b.user(&code, n);
    let t = Instant::now();
    let mut calls = 0;
    let last = loop {
        match b.next_exit() {
            Some(256) => {
                calls += 1;
                b.vcpu.borrow_mut().sync_regs_mut().regs.rax = 1234;
                b.resume_user(true);
            }
            other => break other,
        }
    };
    let elapsed = t.elapsed().as_secs_f64();
    assert_eq!(last, Some(6), "the syscall loop should end in #UD");
    assert_eq!(calls, n);
    elapsed * 1e6 / n as f64
}

/// Microseconds per demand page fault over `n` pages of round `round`'s
/// 32 MiB of virtual addresses.
fn bare_faults(b: &Bare, round: u64, n: u64) -> f64 {
    assert!(n <= FAULT_ROUND_BYTES / 4096 && round < FAULT_ROUNDS);
    let start = FAULT_VIRT + round * FAULT_ROUND_BYTES;
    // mov rax, start; mov [rax], rax; add rax, 0x1000; dec rbx; jnz; ud2
    let mut code = vec![0x48, 0xc7, 0xc0];
    code.extend_from_slice(&(start as u32).to_le_bytes());
    code.extend_from_slice(&[
        0x48, 0x89, 0x00, 0x48, 0x05, 0, 0x10, 0, 0, 0x48, 0xff, 0xcb, 0x75, 0xf2, 0x0f, 0x0b,
    ]);
    b.user(&code, n);
    // Frames after the page tables' area, each round its own.
    let mut frame = 0x1000000 + round * FAULT_ROUND_BYTES;
    let t = Instant::now();
    let mut faults = 0;
    let last = loop {
        match b.next_exit() {
            Some(14) => {
                let cr2 = b.vcpu.borrow().sync_regs().sregs.cr2;
                b.w64(FAULT_PTS + (cr2 - FAULT_VIRT) / 4096 * 8, frame | 7);
                frame += 4096;
                faults += 1;
                b.resume_user(false);
            }
            other => break other,
        }
    };
    let elapsed = t.elapsed().as_secs_f64();
    assert_eq!(last, Some(6), "the touch loop should end in #UD");
    assert_eq!(faults, n);
    elapsed * 1e6 / n as f64
}
