//! MAP_SHARED memory shared between processes as on Linux (issue 13):
//! anonymous shared memory across fork (a counter under a process-shared
//! mutex, a process-shared semaphore, /dev/zero, munmap, MADV_DONTNEED,
//! mremap), MAP_PRIVATE staying private, and a file mapped shared by two
//! processes, coherent with read() and write() and written back to the
//! overlay (`guest/tests/shared-maps.c`, the same lines as natively). A
//! seek and a fork inside a child, after its stores to shared pages,
//! restore the sharing from a keyframe. File mappings at their edges
//! (`guest/tests/file-maps.c`): MAP_SHARED_VALIDATE's refusals, SIGBUS
//! past the file's end for private and shared mappings, a truncate under
//! them, and the file's times after stores through a shared mapping.
//! A private writable mapping of a large image file, one the monitor maps
//! from the host rather than reads (`guest/tests/private-big-map.c`).

use rewind_tests::{assert_lines, has_event, native_passing, Home};

#[test]
fn shared_mappings_behave_as_on_linux() {
    let home = Home::new();
    let (_, log) = home.run_passing("shared-maps");
    assert_lines(
        &log,
        &[
            "ok: parent and child counted under a process-shared mutex: 4000",
            "ok: a MAP_PRIVATE page stays the parent's after the child's store: 1",
            "ok: the child's sem_post wakes the parent's sem_wait",
            "ok: MADV_DONTNEED keeps shared data: 7",
            "ok: a store through the child's mapping is seen at the new place: after",
            "ok: MAP_SHARED of /dev/zero is shared with a child",
            "ok: the parent sees the child's store in its own mapping",
            "ok: read() sees a store: from the child",
            "ok: a write() is seen through the mapping",
            "ok: the file holds every store after munmap and close",
            "ok: a MAP_PRIVATE store does not reach the file",
        ],
    );
    assert_eq!(
        log,
        native_passing("shared-maps"),
        "the same lines natively"
    );
}

/// A run long enough for keyframes inside the child, after its stores:
/// `rewind cat` there reads the store made only through the mapping, and
/// a fork there (restored from a keyframe holding the shared pages) runs
/// to the same end, the parent seeing the child's later stores.
#[test]
fn a_seek_and_a_fork_after_shared_stores_keep_the_sharing() {
    let home = Home::new();
    let run = home.run_guest("shared-maps", &["keyframes", "30000"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(
        &home.log(&run.id),
        &[
            "ok: the child's stores to shared memory: 2",
            "ok: the child's stores to the file: after the calls",
        ],
    );
    let steps = run.steps.expect("a step count");
    let inside = (steps - 100).to_string();
    let cat = home.ok(&["cat", &run.id, &inside, "/tmp/held"]).stdout;
    assert!(cat.starts_with("stored through the mapping\n"), "{cat:?}");
    assert!(!cat.contains("after the calls"), "{cat:?}");
    let fork = home.fork_ends_the_same(&run, &inside);
    assert!(
        fork.stderr.contains("forking from the keyframe at step "),
        "{fork}"
    );
    home.replay_identical(&run.id);
}

/// MAP_SHARED_VALIDATE refuses what it does not know (EOPNOTSUPP, and
/// EINVAL for anonymous memory) where MAP_SHARED ignores it; a page
/// wholly past a file's end is SIGBUS (BUS_ADRERR, at the address) for a
/// private mapping as for a shared one, until the file grows into it; the
/// rest of the last page reads zeros; a truncate takes private copies
/// too. A store through a shared mapping moves the file's mtime and ctime
/// as stat shows them when it is the first to its page since the last
/// MS_SYNC, fsync or mmap. The same lines as natively.
#[test]
fn file_mappings_at_their_edges_as_on_linux() {
    let home = Home::new();
    let (run, log) = home.run_passing("file-maps");
    assert_lines(
        &log,
        &[
            "ok: MAP_SHARED_VALIDATE with a flag it does not know: EOPNOTSUPP",
            "ok: MAP_SHARED_VALIDATE of anonymous memory: EINVAL",
            "ok: MAP_SHARED ignores the flags it does not know",
            "ok: private: a page wholly past the end is SIGBUS (BUS_ADRERR)",
            "ok: private: the rest of the last page reads zeros",
            "ok: private: once the file grew, the page reads the file",
            "ok: private: past a truncate, SIGBUS",
            "ok: shared: a page wholly past the end is SIGBUS (BUS_ADRERR)",
            "ok: times: a store moves mtime and ctime",
            "ok: times: another store to that page leaves them",
            "ok: times: after MS_SYNC a store moves them again",
        ],
    );
    assert_eq!(log, native_passing("file-maps"), "the same lines natively");
    let events = home.events(&run.id);
    assert!(has_event(&events, &["SIGBUS code=2"]), "{events}");
    assert!(
        has_event(&events, &["mmap(", "= -1 EOPNOTSUPP"]),
        "{events}"
    );
}

/// A private, writable mapping of an image file of several MB (one the
/// monitor maps from the host, `FileBytes::Mapped`) reads as the file,
/// zeros past its end; the guest's stores stay the mapping's (a forked
/// child's its own), the file and the host's copy are unchanged: the same
/// lines as natively, replayed identically, and a fork of the run near its
/// end ends the same.
#[test]
fn a_large_file_mapped_private_and_written_stays_unchanged_as_natively() {
    let home = Home::new();
    let root = rewind_tests::roots::new_root("rewind-private-map-");
    let prog = rewind_tests::guest("private-big-map");
    std::fs::copy(&prog, root.path().join("private-big-map")).unwrap();
    let path = root.path().join("big.bin");
    let big: Vec<u8> = (0..3_000_123u32).map(|i| (i * 7 % 253) as u8).collect();
    std::fs::write(&path, &big).unwrap();
    let r = root.path().to_str().unwrap();
    let run = home.run(&["--root", r, "--", "/private-big-map", "/big.bin"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let log = home.log(&run.id);
    assert_lines(
        &log,
        &[
            "ok: the rest of the last page reads zeros",
            "ok: a forked child sees the parent's stores",
            "ok: the child's stores stay the child's",
            "ok: a second mapping reads the file unchanged",
            "all passed",
        ],
    );
    let mut native = std::process::Command::new(rewind_tests::guest("private-big-map"));
    native.arg(&path);
    let want = rewind_tests::run_command(native, std::time::Duration::from_secs(60));
    assert_eq!(log, want.stdout, "the same lines natively");
    assert_eq!(std::fs::read(&path).unwrap(), big, "the host's file");
    home.replay_identical(&run.id);
    let steps = run.steps.expect("a step count");
    home.fork_ends_the_same(&run, &(steps - 2).to_string());
}
