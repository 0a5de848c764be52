//! Descriptors, I/O and sockets served by the monitor (issue 13, parts 2
//! and 3): pipes between threads (empty, full, end of file, EPIPE and
//! SIGPIPE, atomic writes, dup/fcntl/close_range), poll/select/epoll over
//! pipes and sockets, eventfd, timerfd on the virtual clock, TCP on
//! 127.0.0.1 and ::1, Unix sockets at a path, socketpair, UDP, ECONNREFUSED,
//! ENETUNREACH for 8.8.8.8 (named in the events), and a deadlock where every
//! thread waits on a pipe; the `server` example (a client that connects
//! before the server listens) found and narrowed, and its fix passing. Each
//! guest program checks itself and prints
//! `all passed`; every recorded run replays identically (`Home` replays on
//! drop, and each test replays its runs itself too).

use rewind_tests::{assert_lines, guest_arg, has_event, native_with_env, Home};

#[test]
fn pipes_between_threads_block_fill_end_and_break() {
    let home = Home::new();
    let (run, log) = home.run_passing("pipes");
    assert_lines(
        &log,
        &[
            "ok: a read of an empty pipe waits for the writer (5 bytes)",
            "ok: F_GETPIPE_SZ is 65536",
            "ok: a non-blocking write fills the pipe and stops at 65536 (65536)",
            "ok: a blocking 1 MiB write into a full pipe completes as the reader drains (1048576)",
            "ok: the reader got every byte, then end of file (1114112)",
            "ok: a write with no reader is EPIPE and raises SIGPIPE (1)",
            "ok: 16 writes of PIPE_BUF bytes from two threads arrive whole",
            "ok: close_range closes 50 to 61",
            "ok: poll with nothing ready times out after 30 ms of virtual time (0.030015)",
        ],
    );
    let events = home.events(&run.id);
    // A blocked read is recorded once, when it returns.
    assert!(has_event(&events, &["read(3, \"hello\") = 5"]), "{events}");
    assert!(has_event(&events, &["= -1 EAGAIN"]), "{events}");
    assert!(has_event(&events, &["= -1 EPIPE"]), "{events}");
    assert!(has_event(&events, &["SIGPIPE code=0"]), "{events}");
    assert!(has_event(&events, &["pipe2(", "= 0"]), "{events}");
    // The same program, the same run.
    let again = home.run_guest("pipes", &[]);
    assert_eq!(again.id, run.id);
}

#[test]
fn every_thread_waiting_on_a_pipe_is_a_deadlock_naming_the_reads() {
    let home = Home::new();
    let run = home.run_guest("pipe-deadlock", &[]);
    assert_eq!(run.status, "deadlocked", "{}", run.out);
    assert_eq!(run.out.code, 125, "{}", run.out);
    let stuck: Vec<&str> = run
        .out
        .stderr_lines()
        .into_iter()
        .filter(|l| l.contains("blocked in read("))
        .collect();
    assert_eq!(stuck.len(), 2, "{}", run.out);
    home.replay_identical(&run.id);
}

#[test]
fn sockets_tcp_udp_unix_and_socketpair_inside_the_machine() {
    let home = Home::new();
    let (run, log) = home.run_passing("sockets");
    assert_lines(
        &log,
        &[
            "ok: an ephemeral port: 32768",
            "ok: connect to 127.0.0.1:32768",
            "ok: getsockname 127.0.0.1:32769, getpeername port 32768",
            "ok: the server echoes upper-cased",
            "ok: the server saw end of file and closed: end of file here",
            "ok: echo over IPv6",
            "ok: connect with no listener: ECONNREFUSED",
            "ok: SO_ERROR is ECONNREFUSED",
            "ok: 8.8.8.8: ENETUNREACH",
            "ok: UDP to 8.8.8.8: ENETUNREACH",
            "ok: bind made a socket file",
            "ok: echo over a Unix socket",
            "ok: the peer reads the bytes, then end of file",
            "ok: datagrams keep their boundaries",
            "ok: recvfrom gets it and the sender's port 32771",
        ],
    );
    let events = home.events(&run.id);
    // The events say where a connection went, and that another network is unreachable.
    assert!(
        has_event(&events, &["connect(", "8.8.8.8:53, 16) = -1 ENETUNREACH"]),
        "{events}"
    );
    assert!(
        has_event(&events, &["connect(", "127.0.0.1:32768, 16) = 0"]),
        "{events}"
    );
    assert!(
        has_event(&events, &["bind(", "unix:/tmp/echo.sock"]),
        "{events}"
    );
    assert!(has_event(&events, &["accept("]), "{events}");
    // The socket file is in the run's files.
    let end = (run.steps.unwrap() - 1).to_string();
    let cat = home.rewind(&["cat", &run.id, &end, "/tmp/echo.sock"]);
    assert_eq!(cat.code, 0, "{cat}");
}

#[test]
fn eventfd_timerfd_epoll_and_select() {
    let home = Home::new();
    let (_, log) = home.run_passing("events");
    assert_lines(
        &log,
        &[
            "ok: a read takes the whole count (7)",
            "ok: a blocking read waits for another thread's write",
            "ok: EFD_SEMAPHORE counts down by one",
            "ok: after 50 ms of virtual time (0.050000)",
            "ok: a 10 ms periodic timer expired 3 times in 35 ms (3)",
            "ok: three ready: the pipe, the socket and the eventfd (3)",
            "ok: again: only the level-triggered pipe (edge and one-shot are quiet)",
            "ok: new bytes on the edge-triggered socket report it again",
            "ok: epoll_wait blocks until another thread's eventfd write",
            "ok: the pipe's writer closed: EPOLLHUP",
            "ok: select: readable and writable (2)",
            "ok: select times out with the set cleared",
        ],
    );
}

#[test]
fn server_example_connects_before_the_listen_and_is_narrowed() {
    let h = Home::new();
    let (out, v) = h.check_json(&["--example", "server"]);
    assert_eq!(out.code, 1, "the race of `server` was not found:\n{out}");
    assert_eq!(v["base"]["status"], "exited:0", "{v:#}");
    let n = &v["narrowed"];
    let deciding = n["deciding"].as_array().unwrap();
    assert_eq!(deciding.len(), 1, "not narrowed to one step: {n:#}");
    let sentence = n["sentence"].as_str().unwrap();
    // The server is held up before its listen: after its socket, its
    // setsockopt or its bind, whichever the failing schedule stopped at
    // (the portfolio's system-call points stop at the setsockopt).
    assert!(
        ["socket", "setsockopt", "bind"]
            .iter()
            .any(|c| sentence.contains(&format!("after its {c} in server (server.c:"))),
        "{sentence}"
    );
    let failing = n["failing"].as_str().unwrap();
    let events = h.events(failing);
    assert!(
        has_event(
            &events,
            &["connect(", "127.0.0.1:8080, 16) = -1 ECONNREFUSED"]
        ),
        "{events}"
    );
    assert!(!h.log(failing).contains("200 OK"));
    h.replay_identical(failing);
    h.replay_identical(n["passing"].as_str().unwrap());
}

#[test]
fn server_fixed_waits_for_the_listener() {
    let h = Home::new();
    let (out, v) = h.check_json(&["--example", "server-fixed", "--all", "--schedules", "24"]);
    assert_eq!(out.code, 0, "`server-fixed` failed a check:\n{out}");
    assert_eq!(v["violations"], 0, "{v:#}");
    for t in v["tried"].as_array().unwrap() {
        assert_eq!(t["status"], "exited:0", "{t:#}");
    }
    let base = v["base"]["run"].as_str().unwrap();
    assert_lines(&h.log(base), &["client got: 200 OK"]);
}

/// Named pipes between processes (`guest/tests/fifos.c`): the same lines as
/// natively, but for the one about a device node, which root makes
/// natively and the machine refuses (it has only its own devices).
#[test]
fn fifos_open_waiting_for_the_other_side_then_pipe_semantics() {
    let home = Home::new();
    let (run, log) = home.run_passing("fifos");
    assert_lines(
        &log,
        &[
            "ok: a non-blocking write-only open without a reader is ENXIO",
            "ok: a blocking read-only open waits for the writer's open",
            "ok: a blocking write-only open waits for the reader's open",
            "ok: a write after the reader closed is EPIPE and raises SIGPIPE",
            "ok: a signal without SA_RESTART ends a waiting open with EINTR",
            "ok: the interrupted open left no reader",
            "info: mknod S_IFCHR: Operation not permitted",
        ],
    );
    same_lines_as_native("fifos", &log, "info: mknod S_IFCHR");
    let events = home.events(&run.id);
    assert!(has_event(&events, &["= -1 ENXIO"]), "{events}");
    assert!(has_event(&events, &["O_RDONLY) = -1 EINTR"]), "{events}");
}

/// Ancillary data on Unix sockets (`guest/tests/scm.c`): descriptors
/// passed between processes (a child's pipe end to its parent, several at
/// once, over a connection and a sendto to a bound name, short control
/// buffers and MSG_CTRUNC, rights in flight to a socket that closes),
/// SCM_CREDENTIALS with SO_PASSCRED, SO_PEERCRED, and hostile records: the
/// same lines as natively, and the run replays.
#[test]
fn scm_rights_and_credentials_as_natively() {
    let home = Home::new();
    let (run, log) = home.run_passing("scm");
    assert_lines(
        &log,
        &[
            "ok: a child's pipe end arrives with its byte, after the child exited",
            "ok: it reads the child's bytes (21)",
            "ok: three arrive (3)",
            "ok: a receive takes the bytes before the rights and theirs, and stops (6)",
            "ok: room for two of three: two, MSG_CTRUNC (2, 0x8)",
            "ok: the third, a write end, was closed",
            "ok: closing the chain closes it all",
            "ok: SO_PASSCRED: the child's bytes alone, with its pid, uid 0, gid 0",
            "ok: a pid that is no process's: ESRCH",
            "ok: the accepted socket's: the client's",
            "ok: 254: EINVAL",
        ],
    );
    same_lines_as_native("scm", &log, "");
    let events = home.events(&run.id);
    assert!(
        has_event(&events, &["sendmsg(", "= -1 ENOBUFS"]),
        "{events}"
    );
    // The events show what each message carried.
    assert!(
        has_event(&events, &["sendmsg(", "SCM_RIGHTS[", "= 3"]),
        "{events}"
    );
    assert!(
        has_event(&events, &["recvmsg(", "SCM_CREDENTIALS{pid="]),
        "{events}"
    );
}

/// Guest program `name` prints what it printed in a run (`log`) natively
/// too, but for the lines that start with `but`.
#[track_caller]
fn same_lines_as_native(name: &str, log: &str, but: &str) {
    let native = native_with_env(&[], None, &guest_arg(name), &[], b"");
    let keep = |l: &&str| but.is_empty() || !l.starts_with(but);
    let want: Vec<&str> = native.stdout.lines().filter(keep).collect();
    let got: Vec<&str> = log.lines().filter(keep).collect();
    assert_eq!(got, want, "{name} natively:\n{native}");
}

/// splice, tee and sendfile (`guest/tests/splice.c`): the same lines as
/// natively; a sendfile larger than a socket holds blocks and restarts.
#[test]
fn splice_tee_and_sendfile_to_a_socket() {
    let home = Home::new();
    let (run, log) = home.run_passing("splice");
    assert_lines(
        &log,
        &[
            "ok: splice 5 bytes from a pipe to a file",
            "ok: tee copies 3 bytes",
            "ok: splice from a pipe to a socket",
            "ok: a blocking splice waits for the writer's bytes",
            "ok: sendfile of 1 MiB to a socket",
            "ok: splice 6 bytes from a socket into a pipe",
            "ok: splice from a datagram socket takes a datagram, cut to the length",
            "ok: sendfile from a socket to a pipe",
        ],
    );
    same_lines_as_native("splice", &log, "");
    let events = home.events(&run.id);
    assert!(has_event(&events, &["tee(", "= 3"]), "{events}");
    assert!(has_event(&events, &["splice(", "= -1 ESPIPE"]), "{events}");
}
