//! A hostile guest (`guest/tests/hostile.c`) asks the monitor for unbounded
//! work: huge lengths from unmapped and PROT_NONE memory, a 64 TiB
//! reservation unmapped and reprotected, mremap to absurd sizes, thousands
//! of threads, signal handlers nested until the stack is gone, a fork bomb,
//! pipes and sockets asked for absurd lengths and counts. Each run must
//! end as Linux would have it, with no monitor error, within generous bounds
//! on the `rewind` process's peak RSS and wall time (measured from its
//! rusage by wait4), and replay identically.
//!
//! The figures are printed (`cargo test -p rewind-tests --test hostile --
//! --nocapture`); the bounds are far above them, so that a loaded machine
//! does not fail the test but a walk over reserved memory or an allocation
//! of a guest's length does.

use rewind_tests::{guest_arg, parse_status, rewind_bin, Home, Output};
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Peak RSS a hostile run may reach: the engine with an idle guest uses
/// about 12 MiB; an allocation of a guest's length would be gigabytes.
const MAX_RSS_KIB: i64 = 512 * 1024;
/// Wall time a hostile run may take (the slowest, thousands of threads,
/// takes seconds); a walk over a 64 TiB reservation takes hours.
const MAX_WALL: Duration = Duration::from_secs(120);

struct Measured {
    out: Output,
    rss_kib: i64,
    wall: Duration,
}

/// `rewind run -q -- hostile ARGS` in `home`, measured.
fn run_measured(home: &Home, args: &[&str]) -> Measured {
    let mut out_file = tempfile::tempfile().unwrap();
    let mut err_file = tempfile::tempfile().unwrap();
    let prog = guest_arg("hostile");
    let mut cmd = Command::new(rewind_bin());
    cmd.args(["run", "-q", "--", &prog])
        .args(args)
        .env("REWIND_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(out_file.try_clone().unwrap())
        .stderr(err_file.try_clone().unwrap());
    let start = Instant::now();
    // Reaped by wait4 below, which also gives its rusage.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("start rewind");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by wait4.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waits for our own child; the pointers are to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break;
        }
        if start.elapsed() > MAX_WALL {
            // SAFETY: our own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            // SAFETY: as above.
            unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
            panic!(
                "`rewind run -- hostile {}` ran longer than {MAX_WALL:?}",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let wall = start.elapsed();
    let read = |f: &mut std::fs::File| {
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        s
    };
    let st = std::process::ExitStatus::from_raw(status);
    let out = Output {
        code: st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0)),
        stdout: read(&mut out_file),
        stderr: read(&mut err_file),
    };
    Measured {
        out,
        rss_kib: usage.ru_maxrss,
        wall,
    }
}

/// Runs one hostile mode: it must end `want`, within the bounds, with its
/// output holding `lines`, and replay identically. Returns the log.
fn hostile(args: &[&str], want: &str, lines: &[&str]) -> String {
    let home = Home::new();
    let m = run_measured(&home, args);
    let what = format!("hostile {}", args.join(" "));
    println!(
        "{what}: peak RSS {} MiB, wall {:.2} s",
        m.rss_kib / 1024,
        m.wall.as_secs_f64()
    );
    assert!(
        !m.out.stderr.contains("panicked"),
        "{what}: the monitor panicked:\n{}",
        m.out
    );
    let run = parse_status(&m.out)
        .unwrap_or_else(|| panic!("{what}: no status line (a monitor error?):\n{}", m.out));
    assert_eq!(run.status, want, "{what}:\n{}", m.out);
    assert!(
        m.rss_kib <= MAX_RSS_KIB,
        "{what}: the monitor's peak RSS was {} MiB (bound {} MiB)",
        m.rss_kib / 1024,
        MAX_RSS_KIB / 1024
    );
    let log = home.log(&run.id);
    for l in lines {
        assert!(
            log.lines().any(|x| x == *l),
            "{what}: missing the line {l:?} in its output:\n{log}"
        );
    }
    assert!(!log.contains("contents lost"), "{what}:\n{log}");
    home.replay_identical(&run.id);
    log
}

#[test]
fn huge_lengths_from_bad_memory_cost_nothing() {
    let mut want = Vec::new();
    for src in ["unmapped", "PROT_NONE"] {
        for call in [
            "write(stdout, {}, 2^46)",
            "write(file, {}, 2^31-1)",
            "pwrite(file, {}, 2^31-1, 2^30)",
            "read(zero, {}, 2^46)",
            "read(urandom, {}, 2^46)",
            "getrandom({}, 2^46)",
            "writev(stdout, 1024 x {} 2^46)",
            "writev(file, 1024 x {} 2^46)",
            "readv(zero, 1024 x {} 2^46)",
        ] {
            want.push(format!("{} = -1 (EFAULT)", call.replace("{}", src)));
        }
    }
    // A buffer that runs into a hole: short, as on Linux.
    want.push("write(file, 2 pages then PROT_NONE, 2^31-1) = 8192".into());
    want.push("read(zero, 2 pages then PROT_NONE, 2^46) = 8192".into());
    want.push("getrandom(2 pages then PROT_NONE, 2^46) = 8192".into());
    want.push("lseek(file, 0, SEEK_END) = 8192".into());
    want.push("done".into());
    let want: Vec<&str> = want.iter().map(|s| s.as_str()).collect();
    hostile(&["io"], "exited:0", &want);
}

#[test]
fn a_64_tib_reservation_costs_what_is_touched() {
    hostile(
        &["reserve"],
        "exited:0",
        &[
            "mmap(64 TiB, PROT_NONE) = 0",
            "mprotect(64 TiB, RW) = 0",
            "mprotect(64 TiB, R) = 0",
            "mprotect(64 TiB, NONE) = 0",
            "madvise(64 TiB, DONTNEED) = 0",
            "munmap(first 32 TiB) = 0",
            "mmap(another 64 TiB, PROT_NONE) = 0",
            "done",
        ],
    );
}

#[test]
fn mremap_to_absurd_sizes() {
    hostile(
        &["mremap"],
        "exited:0",
        &[
            "mremap(page, 0x400000000000) = 0",
            "mremap(page, 0x800000000000) = -1 (ENOMEM)",
            "mremap(page, 0x1000000000000000) = -1 (ENOMEM)",
            "mremap(page, 0xfffffffffffff000) = -1 (ENOMEM)",
            "mremap(32 TiB, moved to 1 TiB) = 0",
            "done",
        ],
    );
}

#[test]
fn thousands_of_threads() {
    hostile(
        &["threads", "2000"],
        "exited:0",
        &["2000 threads joined", "done"],
    );
}

#[test]
fn signal_handlers_nested_until_the_stack_is_gone() {
    let log = hostile(&["deep-signals"], "killed:SIGSEGV", &["depth 1000"]);
    assert!(!log.contains("done"), "{log}");
}

#[test]
fn a_fork_bomb_meets_the_process_cap() {
    // 511 children and the first process: MAX_PROCS. Their code pages are
    // shared with the parent, so the bomb costs their writable pages.
    hostile(
        &["fork-bomb"],
        "exited:0",
        &["fork: EAGAIN after 511 children", "reaped 511"],
    );
}

#[test]
fn descriptors_cost_what_they_hold() {
    // Descriptors stop at RLIMIT_NOFILE; a pipe or socket holds at most its
    // buffer whatever length the guest names; counts are checked before
    // anything is allocated for them; descriptors in flight fill buffers.
    hostile(
        &["descriptors"],
        "exited:0",
        &[
            "510 pipes, then EMFILE",
            "write(pipe, unmapped, 2^46) = -1 (EFAULT)",
            "write(pipe, PROT_NONE, 2^46) = -1 (EFAULT)",
            "write(pipe, 1 GiB, 2^30) = 65536",
            "read(pipe, unmapped, 2^46) = -1 (EFAULT)",
            "read(pipe, 1 GiB, 2^30) = 65536",
            "fcntl(pipe, F_SETPIPE_SZ, 2^40) = 1048576",
            "fcntl(pipe, F_SETPIPE_SZ, INT_MAX) = -1 (EPERM)",
            "SO_RCVBUF INT_MAX gives 1048576",
            "send(socket, 1 GiB, 2^30) = 1048576",
            "send(socket, unmapped, 2^46) = -1 (EAGAIN)",
            "sendto(udp, 1 GiB, 2^30) = -1 (EMSGSIZE)",
            "poll(1, 2^40 descriptors) = 0",
            "select(2^31-1 descriptors) = -1 (EFAULT)",
            "epoll_wait(INT_MAX events) = -1 (EINVAL)",
            "epoll_wait(unmapped, 1000 events) = -1 (EFAULT)",
            "epoll_wait(1 GiB, 2^26 events) = 1",
            // A message with rights costs its receiver's buffer 1 KiB
            // besides its bytes: what is in flight is bounded.
            "stream: 128 messages of 253 descriptors in flight, then EAGAIN",
            "datagram: 207 messages of 253 descriptors in flight, then EAGAIN",
            "sendmsg(control unmapped, 2^46) = -1 (ENOBUFS)",
            "sendmsg(control PROT_NONE, 65536) = -1 (EFAULT)",
            "recvmsg(control PROT_NONE, 4096) = 1",
            "msg_flags 0x8, msg_controllen 0",
            "recvmsg(control unmapped, 2^46) = 1",
            "lowest free descriptor: 11",
            "done",
        ],
    );
}
