//! alarm, setitimer, getitimer and POSIX timers in virtual time, and the
//! timeouts of blocking calls (SO_SNDTIMEO, SO_RCVTIMEO, the time left
//! select, pselect6 and ppoll write back, a restarted futex wait's).

use rewind_tests::Home;

#[test]
fn alarm_interrupts_pause_and_an_interval_timer_ticks() {
    let h = Home::new();
    let run = h.run_guest("timers", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let log = h.log(&run.id);
    assert!(
        log.contains("pause=-1 errno=Interrupted system call ticks=1 left=5"),
        "{log}"
    );
    assert!(log.contains("ticks=6 interval=100000us armed=1"), "{log}");
    // alarm(3), then six ticks of 100 ms: 3.5 s of virtual time (the status
    // line's virtual figure; its wall time is not checked).
    assert!(run.line.contains(" 3.5"), "{}", run.line);
    h.replay_identical(&run.id);
}

#[test]
fn an_alarm_without_a_handler_ends_the_process() {
    let h = Home::new();
    let run = h.run_guest("timers", &["die"]);
    assert_eq!(run.status, "killed:SIGALRM", "{}", run.out);
    assert_eq!(run.out.code, 128 + 14, "{}", run.out);
    assert!(h.events(&run.id).contains("SIGALRM"));
    h.replay_identical(&run.id);
}

#[test]
fn posix_timers_expire_on_the_virtual_clock_as_on_linux() {
    let native = rewind_tests::native_passing("posix-timers");
    let h = Home::new();
    let (run, log) = h.run_passing("posix-timers");
    assert_eq!(log, native, "{log}");
    let events = h.events(&run.id);
    // A periodic timer of 10 ms left 55 ms: exactly four overruns in virtual time.
    assert!(
        rewind_tests::has_event(&events, &["timer_getoverrun(", "= 4"]),
        "{events}"
    );
    // SI_TIMER is code -2; glibc's SIGEV_THREAD helper took SIGRTMIN in rt_sigtimedwait.
    assert!(
        rewind_tests::has_event(&events, &["SIGALRM code=-2"]),
        "{events}"
    );
    assert!(
        rewind_tests::has_event(&events, &["rt_sigtimedwait(", "= 32"]),
        "{events}"
    );
}

/// `guest/tests/timeouts.c`: SO_SNDTIMEO ends sends and connects, SO_RCVTIMEO
/// accepts; select, pselect6 and ppoll write back the time left however they
/// return; a timed futex wait stopped and continued halfway ends at its
/// first deadline. Line for line as natively.
#[test]
fn call_timeouts_end_as_on_linux() {
    let native = rewind_tests::native_passing("timeouts");
    let h = Home::new();
    let (run, log) = h.run_passing("timeouts");
    assert_eq!(log, native, "{log}");
    let events = h.events(&run.id);
    let has = |parts: &[&str]| rewind_tests::has_event(&events, parts);
    // The stopped wait was restarted, then timed out at its deadline.
    assert!(has(&["futex(", "= ? ERESTART_RESTARTBLOCK"]), "{events}");
    assert!(has(&["futex(", "= -1 ETIMEDOUT"]), "{events}");
    assert!(has(&["connect(", "= -1 EINPROGRESS"]), "{events}");
    assert!(has(&["sendmsg(", "= -1 EAGAIN"]), "{events}");
}
