//! Signals end to end: handlers that run and return (with siginfo and the
//! ucontext checked inside the guest), a SIGSEGV handler that fixes the
//! page and resumes, the alternate stack, kill/tgkill between threads and
//! the calls they interrupt, pending and ignored signals, default actions
//! and the exit status they give, the FPU/AVX state across a handler, and
//! garbage signal frames. Each guest program checks itself and prints
//! `all passed` (or `FAIL ...` lines); every recorded run must replay.

use rewind_tests::{assert_lines, has_event, Home};

#[test]
fn handlers_run_and_return_with_siginfo_masks_and_flags() {
    let home = Home::new();
    let (run, log) = home.run_passing("signal-handler");
    assert_lines(
        &log,
        &[
            "ok: the signal is blocked inside its handler, not in uc_sigmask (1)",
            "ok: the handler's stack is aligned as the ABI says",
            "ok: blocked SIGUSR1 is pending, not delivered",
            "ok: unblocking delivers it, once (hits=4)",
            "ok: setting SIG_IGN discards a pending signal",
            "ok: SA_NODEFER nests the handler (depth 3)",
            "ok: sigsuspend: EINTR after the handler, mask restored (hits=5)",
            "ok: three queued real-time signals ran three times (3)",
        ],
    );
    let events = home.events(&run.id);
    // Every delivery is an event: kill's SI_USER (0), tgkill's SI_TKILL (-6).
    assert!(has_event(&events, &["SIGUSR1 code=0 addr=0x0"]), "{events}");
    assert!(has_event(&events, &["SIGUSR1 code=-6"]), "{events}");
    assert!(has_event(&events, &["rt_sigreturn()"]), "{events}");
    assert!(
        has_event(&events, &["rt_sigsuspend(", "= -1 EINTR"]),
        "{events}"
    );
    assert!(
        has_event(&events, &["rt_sigtimedwait(", "= 10"]),
        "{events}"
    );
    // SIG_IGN'd SIGUSR2 is never delivered.
    assert!(!has_event(&events, &["SIGUSR2 code="]), "{events}");
}

#[test]
fn a_sigsegv_handler_fixes_the_page_and_the_write_resumes() {
    let home = Home::new();
    let (run, log) = home.run_passing("signal-segv-handler");
    assert_lines(
        &log,
        &[
            "ok: the write landed after the handler fixed the page",
            "ok: si_code=2 (SEGV_ACCERR) si_addr=page+123",
            "ok: sigcontext: trapno=14 err=0x6 (write, user) cr2=page+123",
            "ok: unmapped read: si_code=1 (SEGV_MAPERR), si_addr=hole+8",
            "ok: siglongjmp out of the handler restored the mask",
            "ok: 7/0: SIGFPE with si_code=1 (FPE_INTDIV)",
            "ok: ud2: SIGILL, and the handler's edits of rip and rax took effect",
        ],
    );
    let events = home.events(&run.id);
    assert!(has_event(&events, &["SIGSEGV code=2 addr=0x"]), "{events}");
    assert!(has_event(&events, &["SIGSEGV code=1 addr=0x0"]), "{events}");
    assert!(has_event(&events, &["SIGFPE code=1"]), "{events}");
    assert!(has_event(&events, &["SIGILL code=2"]), "{events}");
}

#[test]
fn handlers_run_on_the_alternate_stack_even_for_a_stack_overflow() {
    let home = Home::new();
    let (_, log) = home.run_passing("signal-altstack");
    assert_lines(
        &log,
        &[
            "ok: SA_ONSTACK: the handler ran on the alternate stack, which says SS_ONSTACK (1)",
            "ok: stack overflow: SIGSEGV handled on the alternate stack",
            "ok: SS_AUTODISARM: on the alternate stack, which reads as disabled inside (2)",
            "ok: and armed again after the handler",
        ],
    );
}

#[test]
fn kill_and_tgkill_reach_other_threads_and_interrupt_their_calls() {
    let home = Home::new();
    let (run, log) = home.run_passing("signal-kill");
    assert_lines(
        &log,
        &[
            "ok: tgkill: the handler ran in the target thread",
            "ok: its pause() ended with EINTR",
            "ok: kill: the one thread not blocking it handled it",
            "ok: nanosleep ended with EINTR, 9s left",
            "ok: SA_RESTART: the futex wait was restarted and woken (ret 0)",
            "ok: no SA_RESTART: the futex wait ended in EINTR",
        ],
    );
    let events = home.events(&run.id);
    assert!(has_event(&events, &["pause() = -1 EINTR"]), "{events}");
    assert!(
        has_event(&events, &["clock_nanosleep(", "= -1 EINTR"]),
        "{events}"
    );
    assert!(
        has_event(
            &events,
            &["futex(", "FUTEX_WAIT_PRIVATE", "= ? ERESTARTSYS"]
        ),
        "{events}"
    );
    assert!(
        has_event(&events, &["futex(", "FUTEX_WAIT_PRIVATE", "= -1 EINTR"]),
        "{events}"
    );
    // The signal events name the thread that took them, not the sender.
    let main = events
        .lines()
        .find(|l| l.contains("kill(") && l.contains("SIGUSR2"))
        .expect("the kill event");
    let taken = events
        .lines()
        .find(|l| l.contains("SIGUSR2 code=0"))
        .expect("the SIGUSR2 delivery");
    let tid = |l: &str| l.split_whitespace().nth(1).unwrap().to_string();
    assert_ne!(tid(main), tid(taken), "{events}");
}

#[test]
fn vector_and_fpu_state_survive_a_handler_that_clobbers_them() {
    let home = Home::new();
    let (_, log) = home.run_passing("signal-fpu");
    assert_lines(
        &log,
        &[
            "ok: ymm0-15 survived the handler (0 lanes differ)",
            "ok: MXCSR survived (0x3f80)",
            "ok: the x87 control word survived (0x77f)",
            "ok: the handler started with MXCSR reset (0x1f80)",
            "ok: the handler's edits of xmm3 and MXCSR in the frame took effect (0xfeedface, 0x5f80)",
        ],
    );
    if !rewind_tests::cpu_has("avx512f") {
        // Hardware, not a package: no script can install it, so never required.
        rewind_tests::skipped(
            "this CPU has no AVX-512: its zmm and opmask registers are not checked",
        );
    } else {
        assert_lines(
            &log,
            &[
                "ok: zmm0, zmm15, zmm16, zmm31 survived the handler (0 lanes differ)",
                "ok: opmask k1 and k7 survived (0x1234 0x8421)",
            ],
        );
    }
}

#[test]
fn default_actions_and_undeliverable_signals_end_the_run_with_128_plus_signal() {
    let cases = [
        ("term", "SIGTERM", 143),
        ("abort", "SIGABRT", 134),
        ("kill", "SIGKILL", 137),
        ("from-thread", "SIGTERM", 143),
        ("blocked-segv", "SIGSEGV", 139),
        ("ignored-segv", "SIGSEGV", 139),
        ("segv-in-segv", "SIGSEGV", 139),
        ("no-restorer", "SIGSEGV", 139),
        ("bad-stack", "SIGSEGV", 139),
        ("bad-sigreturn", "SIGSEGV", 139),
    ];
    let home = Home::new();
    for (mode, sig, code) in cases {
        let run = home.run_guest("signal-die", &[mode]);
        assert_eq!(run.status, format!("killed:{sig}"), "{mode}:\n{}", run.out);
        assert_eq!(run.out.code, code, "{mode}:\n{}", run.out);
        let log = home.log(&run.id);
        assert_lines(&log, &[&format!("before {mode}")]);
        assert!(
            !log.contains("after"),
            "{mode}: went on after the signal:\n{log}"
        );
        let events = home.events(&run.id);
        assert!(
            has_event(&events, &[&format!("{sig} code=")]),
            "{mode}: no {sig} event:\n{events}"
        );
        assert!(
            has_event(&events, &[&format!("process killed:{sig}")]),
            "{mode}:\n{events}"
        );
        home.replay_identical(&run.id);
    }
    // A stop signal stops the process (job control), and with nobody to
    // continue it the run is deadlocked, the report saying so.
    let run = home.run_guest("signal-die", &["stop"]);
    assert_eq!(run.status, "deadlocked", "{}", run.out);
    assert!(
        run.out
            .stderr
            .contains("thread 1000/1000: stopped by SIGSTOP"),
        "{}",
        run.out
    );
    assert!(
        !home.log(&run.id).contains("stop signals did nothing"),
        "{}",
        run.out
    );
    home.replay_identical(&run.id);
}

#[test]
fn garbage_signal_frames_give_sigsegv_never_a_monitor_error() {
    let home = Home::new();
    let run = home.run_guest("signal-badframe", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let log = home.log(&run.id);
    assert_lines(&log, &["survived"]);
    // Both outcomes occur: frames rt_sigreturn accepted, and bad ones.
    let line = log
        .lines()
        .find(|l| l.starts_with("rounds "))
        .expect("the summary");
    assert!(
        !line.contains("returned 0,") && !line.contains("bad frame 0,"),
        "{line}"
    );
    home.replay_identical(&run.id);
}

#[test]
fn signalfd_reads_pending_signals_as_linux_does() {
    let native = rewind_tests::native_passing("signalfd");
    let home = Home::new();
    let (run, log) = home.run_passing("signalfd");
    // Inside Rewind every check Linux passed passes too, line for line.
    assert_eq!(log, native, "{log}");
    let events = home.events(&run.id);
    assert!(has_event(&events, &["signalfd4(", "= 3"]), "{events}");
    assert!(has_event(&events, &["signalfd(3,"]), "{events}");
    // The blocking read woke at the sender's step, with one record.
    assert!(has_event(&events, &["read(", "= 128"]), "{events}");
    assert!(has_event(&events, &["read(", "= -1 EINTR"]), "{events}");
}

/// A handled signal against every blocking call (`guest/tests/signal-restart.c`):
/// restarted under SA_RESTART where Linux restarts the call, EINTR where it
/// never does, the bytes a write moved, a stopped and continued call, the
/// masks of ppoll, pselect6 and epoll_pwait, rt_sigtimedwait's siginfo,
/// job control and a signal to a process group; line for line as natively.
#[test]
fn a_signal_ends_or_restarts_each_blocking_call_as_on_linux() {
    let native = rewind_tests::native_passing("signal-restart");
    let home = Home::new();
    let (run, log) = home.run_passing("signal-restart");
    assert_eq!(log, native, "{log}");
    let events = home.events(&run.id);
    // A restart is recorded as such, then the call once it completes.
    assert!(
        has_event(&events, &["read(", "= ? ERESTARTSYS"]),
        "{events}"
    );
    // A write that moved bytes returns them, never EINTR.
    assert!(
        has_event(&events, &["(1048576 bytes)) = 0x10000"]),
        "{events}"
    );
    assert!(
        !has_event(&events, &["(1048576 bytes)) = -1 EINTR"]),
        "{events}"
    );
    assert!(
        has_event(&events, &["epoll_wait(", "= -1 EINTR"]),
        "{events}"
    );
}
