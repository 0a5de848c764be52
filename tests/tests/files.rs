//! Files: the overlay (write, read back, list, stat, seek, rename, unlink),
//! a `--root` image (symbolic links resolved inside it, the host never
//! written), /dev/urandom from the seed, /proc/self/exe, standard output
//! that is not a terminal, and standard input piped into `rewind run`.
//! Every recorded run is replayed and must be identical.

use rewind_tests::*;
use std::path::Path;

/// `rewind run ARGS` with `input` on its standard input.
fn run_with_stdin(home: &Home, args: &[&str], input: &[u8]) -> Run {
    home.run_with_stdin(args, input)
}

#[test]
fn a_file_is_written_read_back_listed_renamed_and_unlinked() {
    let home = Home::new();
    let run = home.run_guest("fs-files", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert!(!run.out.stdout.contains("FAIL"), "{}", run.out);
    assert_lines(
        &run.out.stdout,
        &[
            "ok: read back what was written",
            "ok: read after lseek",
            "ok: stat by path: same inode",
            "ok: rename a.txt c.txt",
            "ok: an unlinked open file still reads",
            "ok: read /tmp/big back with stdio",
            "ok: the mapping holds the file",
            "ok: a private change stays private",
            "ok: /dev/full is ENOSPC",
            "ok: O_TMPFILE",
            "ok: /proc/self/maps shows the stack",
            "listing: . .. a.txt hard link sub",
            "fs-files: 0 failures",
        ],
    );
    let events = home.events(&run.id);
    for want in [
        r#"openat(AT_FDCWD, "a.txt", O_WRONLY|O_CREAT|O_TRUNC, 0o644) = 3"#,
        r#"openat(AT_FDCWD, "/tmp/d/a.txt", O_RDONLY) = 3"#,
        r#"lseek(3, 7, SEEK_SET) = 7"#,
        r#"newfstatat(AT_FDCWD, "link", "#,
        r#"rename("a.txt", "c.txt") = 0"#,
        r#"unlink("sub/c.txt") = 0"#,
        r#"mkdir("/tmp/d", 0o755) = 0"#,
        "getdents64(3, ",
    ] {
        assert!(events.contains(want), "no event {want:?} in:\n{events}");
    }
    home.replay_identical(&run.id);
    // The same inputs give the same run.
    let again = home.run_guest("fs-files", &[]);
    assert_eq!(again.id, run.id);
}

/// A root image: files, a directory, links (relative, absolute, one that
/// climbs past the top, a loop), a FIFO (not part of the image), and the
/// guest program itself.
fn make_root(dir: &Path) {
    use std::os::unix::fs::symlink;
    for d in ["etc", "bin", "data/sub", "proc"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::copy(guest("fs-tool"), dir.join("bin/fs-tool")).unwrap();
    std::fs::write(dir.join("etc/greeting"), "hello from the root\n").unwrap();
    std::fs::write(
        dir.join("etc/passwd"),
        "root:x:0:0:the root image's:/root:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(dir.join("data/a"), "a\n").unwrap();
    std::fs::write(dir.join("data/b"), "bb\n").unwrap();
    std::fs::write(dir.join("proc/hidden"), "never seen\n").unwrap();
    symlink("greeting", dir.join("etc/link")).unwrap();
    symlink("/etc/greeting", dir.join("etc/abs")).unwrap();
    symlink("../../../../../../etc/passwd", dir.join("etc/escape")).unwrap();
    symlink("/bin", dir.join("etc/bindir")).unwrap();
    symlink("loop2", dir.join("etc/loop1")).unwrap();
    symlink("loop1", dir.join("etc/loop2")).unwrap();
    let fifo = std::ffi::CString::new(dir.join("data/fifo").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
}

#[test]
fn files_come_from_the_root_image_and_links_stay_inside_it() {
    let home = Home::new();
    let root = tempfile::tempdir().unwrap();
    make_root(root.path());
    let r = root.path().to_str().unwrap();
    let args = [
        "--root",
        r,
        "--",
        "/bin/fs-tool", //
        "cat",
        "/etc/greeting", //
        "cat",
        "/etc/link", //
        "cat",
        "/etc/abs", //
        "cat",
        "/etc/escape", //
        "cat",
        "/etc/bindir/../etc/greeting", //
        "readlink",
        "/etc/abs", //
        "ls",
        "/data", //
        "ls",
        "/", //
        "stat",
        "/data/b", //
        "stat",
        "/etc/link", //
        "cat",
        "/etc/loop1", //
        "cat",
        "/proc/hidden", //
        "write",
        "/etc/greeting", //
        "cat",
        "/etc/greeting", //
        "rm",
        "/data/a", //
        "ls",
        "/data",
    ];
    let run = home.run(&args);
    // Two commands fail: the link loop and the hidden /proc of the image.
    assert_eq!(run.status, "exited:2", "{}", run.out);
    let host_passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let out = &run.out.stdout;
    assert_lines(
        out,
        &[
            "hello from the root",
            "root:x:0:0:the root image's:/root:/bin/sh",
            "/etc/abs -> /etc/greeting",
            "/data: ./ ../ a b sub/",
            "/: ./ ../ bin/ data/ dev/ etc/ proc/ sys/ tmp/",
            "/data/b: type=reg mode=0644 size=3 nlink=1 uid=0",
            "/etc/link: type=lnk mode=0777 size=8 nlink=1 uid=0",
            "/etc/loop1: error: Too many levels of symbolic links",
            "/proc/hidden: error: No such file or directory",
            "written by fs-tool",
            "/data: ./ ../ b sub/",
        ],
    );
    assert_eq!(out.matches("hello from the root").count(), 4, "{out}");
    assert!(
        host_passwd.is_empty() || !out.contains(host_passwd.lines().next().unwrap()),
        "{out}"
    );
    // The guest's writes stay in the run: the host's files are as they were.
    assert_eq!(
        std::fs::read_to_string(root.path().join("etc/greeting")).unwrap(),
        "hello from the root\n"
    );
    assert!(root.path().join("data/a").exists());
    home.replay_identical(&run.id);

    // The image is an input: changing a file changes the run.
    let same = home.run(&args);
    assert_eq!(same.id, run.id);
    // Recorded again, so replayed again, before the image changes under it.
    home.replay_identical(&same.id);
    std::fs::write(root.path().join("data/b"), "changed\n").unwrap();
    let changed = home.run(&args);
    assert_ne!(changed.id, run.id);
    home.replay_identical(&changed.id);
}

#[test]
fn dev_urandom_follows_the_seed() {
    let home = Home::new();
    let tool = guest_arg("fs-tool");
    let read = |seed: &str| {
        let run = home.run(&[
            "--seed",
            seed,
            "--",
            &tool,
            "hex",
            "/dev/urandom",
            "hex",
            "/dev/random",
        ]);
        assert_eq!(run.status, "exited:0", "{}", run.out);
        home.replay_identical(&run.id);
        run.out.stdout
    };
    let one = read("1");
    let again = read("1");
    let two = read("2");
    assert!(one.starts_with("/dev/urandom: "), "{one}");
    assert_eq!(one, again);
    assert_ne!(one, two);
    let lines: Vec<&str> = one.lines().collect();
    assert_ne!(
        lines[0].split(':').nth(1),
        lines[1].split(':').nth(1),
        "{one}"
    );
}

#[test]
fn proc_self_exe_is_the_program() {
    let home = Home::new();
    let tool = guest_arg("fs-tool");
    let run = home.run(&[
        "--",
        &tool,
        "readlink",
        "/proc/self/exe",
        "hex",
        "/proc/self/exe",
        "cat",
        "/dev/null",
        "ls",
        "/proc/self/fd",
    ]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let canonical = std::fs::canonicalize(&tool).unwrap();
    assert_lines(
        &run.out.stdout,
        &[
            &format!("/proc/self/exe -> {}", canonical.display()),
            "/proc/self/exe: 7f 45 4c 46 02 01 01 03 00 00 00 00 00 00 00 00",
            "/proc/self/fd: ./ ../ 0@ 1@ 2@ 3@",
        ],
    );
    home.replay_identical(&run.id);
}

#[test]
fn standard_output_is_not_a_terminal() {
    let home = Home::new();
    let tool = guest_arg("fs-tool");
    let run = home.run(&["--", &tool, "tty", "-"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(
        &run.out.stdout,
        &[
            "fd 0: isatty=0 fstat=0 type=fifo",
            "fd 1: isatty=0 fstat=0 type=fifo",
            "fd 2: isatty=0 fstat=0 type=fifo",
        ],
    );
    let events = home.events(&run.id);
    assert!(
        events.contains("ioctl(1, 0x5401, ") && events.contains("= -1 ENOTTY"),
        "{events}"
    );
    // Fully buffered, and all of it arrives: the log holds the whole output.
    assert_eq!(home.log(&run.id), run.out.stdout);
    home.replay_identical(&run.id);
}

#[test]
fn standard_input_is_read_by_the_guest_and_is_an_input_of_the_run() {
    let home = Home::new();
    let tool = guest_arg("fs-tool");
    let args = ["--", tool.as_str(), "stdin", "-"];
    let one = run_with_stdin(&home, &args, b"one\ntwo\n");
    assert_eq!(one.status, "exited:0", "{}", one.out);
    assert_lines(&one.out.stdout, &["stdin: 8 bytes", "one", "two"]);
    home.replay_identical(&one.id);
    let same = run_with_stdin(&home, &args, b"one\ntwo\n");
    assert_eq!(same.id, one.id);
    let other = run_with_stdin(&home, &args, b"three\n");
    assert_ne!(other.id, one.id);
    assert_lines(&other.out.stdout, &["stdin: 6 bytes", "three"]);
    home.replay_identical(&other.id);
    let empty = home.run(&args);
    assert_lines(&empty.out.stdout, &["stdin: 0 bytes"]);
    assert_ne!(empty.id, one.id);
}

/// The last step of a run (the `exit_group` that ended it) is where a user
/// looks at what the program left: `cat` and `ps` there show the machine as
/// that step's exit found it, not "no live process".
#[test]
fn cat_and_ps_at_the_step_that_ended_the_run() {
    let Some(busybox) = host_program("/usr/bin/busybox", "busybox-static") else {
        return;
    };
    let home = Home::new();
    let script = "echo first > /tmp/out; echo last >> /tmp/out";
    let run = home.run(&["--", &busybox, "sh", "-c", script]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let last = run.steps.expect("a step count").to_string();
    let out = home.rewind(&["cat", &run.id, &last, "/tmp/out"]);
    assert_eq!(out.code, 0, "{out}");
    assert_eq!(out.stdout, "first\nlast\n");
    let out = home.rewind(&["cat", &run.id, &last, "/tmp/never"]);
    assert_eq!(out.code, 1, "a missing file is the answer no: {out}");
    let out = home.rewind(&["ps", &run.id, "--at", &last]);
    assert_eq!(out.code, 0, "{out}");
    assert!(out.stdout.contains("/usr/bin/busybox"), "{out}");
    let past = (run.steps.unwrap() + 1).to_string();
    let out = home.rewind(&["cat", &run.id, &past, "/tmp/out"]);
    assert_eq!(out.code, 2, "a step past the end is trouble: {out}");
    home.replay_identical(&run.id);
}
