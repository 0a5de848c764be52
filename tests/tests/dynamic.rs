//! Dynamic linking (issue 13, part 6): Debian's own dynamically linked
//! programs, taken from the host, run in the machine with their own
//! `ld-linux-x86-64.so.2` and libraries and print what they print natively.
//! The image holds the program, its interpreter and its libraries (their
//! hashes are in the run id; a static program's id does not move), and a
//! bad interpreter is one line of error. Every recorded run is replayed and
//! must be identical (`Home` does it when dropped).

use rewind_tests::roots::root_with;
use rewind_tests::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use vmm::image::{Dep, DepKind, Image};
use vmm::run::manifest::DEFAULT_ENV;

/// The program run natively with the guest's environment (`DEFAULT_ENV`
/// and `extra`), `input` on standard input.
fn native(prog: &str, args: &[&str], extra: &[&str], input: &[u8]) -> Output {
    let env: Vec<&str> = DEFAULT_ENV.iter().chain(extra).copied().collect();
    native_with_env(&env, None, prog, args, input)
}

/// `rewind run [--env K=V]... [FLAGS] -- PROG ARGS` with `input`, which
/// must give what the native run gave (output and exit status); the run id.
#[track_caller]
fn same_as_native(
    home: &Home,
    flags: &[&str],
    prog: &str,
    args: &[&str],
    env: &[&str],
    input: &[u8],
) -> Run {
    let (want, native_wall) = table::timed(|| native(prog, args, env, input));
    let mut full: Vec<String> = env.iter().map(|e| format!("--env={e}")).collect();
    full.extend(flags.iter().map(|s| s.to_string()));
    full.push("--".into());
    full.push(prog.into());
    full.extend(args.iter().map(|s| s.to_string()));
    let full: Vec<&str> = full.iter().map(String::as_str).collect();
    let (run, wall) = table::timed(|| home.run_with_stdin(&full, input));
    let row = format!("{prog} {}", args.join(" "));
    table::figures(row.trim_end(), &run, wall, native_wall);
    assert_eq!(
        run.out.stdout, want.stdout,
        "{prog} {args:?}: output differs from the native run's\nnative:\n{want}\nin rewind:\n{}",
        run.out
    );
    assert_eq!(
        run.status,
        format!("exited:{}", want.code),
        "{prog}: native exit {}:\n{}",
        want.code,
        run.out
    );
    let events = home.events(&run.id);
    assert!(
        !events.contains("ENOSYS") || events.lines().all(allowed_enosys),
        "{prog}: a call it needs is missing:\n{events}"
    );
    run
}

/// ENOSYS lines that glibc copes with by design: `rseq` (registration is
/// optional) and `socket` (nscd is not there: it falls back to the files).
fn allowed_enosys(line: &str) -> bool {
    !line.contains("ENOSYS") || line.contains(" rseq(") || line.contains(" socket(")
}

#[test]
fn debian_true_echo_env_and_sort_run_as_natively() {
    let home = Home::new();
    let t = same_as_native(&home, &[], "/bin/true", &[], &[], b"");
    let events = home.events(&t.id);
    // The interpreter runs first and maps libc from the image.
    assert!(
        events.contains("openat(AT_FDCWD, \"/lib/x86_64-linux-gnu/libc.so.6\""),
        "{events}"
    );
    let again = home.run(&["--", "/bin/true"]);
    assert_eq!(again.id, t.id, "the same command, a different run id");
    same_as_native(
        &home,
        &[],
        "/bin/echo",
        &["hello", "from", "echo"],
        &[],
        b"",
    );
    same_as_native(
        &home,
        &[],
        "/usr/bin/env",
        &[],
        &["FOO=bar", "LC_ALL=C"],
        b"",
    );
    let lines = b"pear\napple\nfig\n10\n9\nbanana\napple\n";
    same_as_native(&home, &[], "/usr/bin/sort", &[], &[], lines);
    same_as_native(&home, &[], "/usr/bin/sort", &["-n", "-r", "-u"], &[], lines);
}

#[test]
fn ls_lists_the_image_root() {
    let home = Home::new();
    let run = home.run(&["--", "/bin/ls", "-la", "/"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.stderr_lines().len(), 1, "{}", run.out);
    // The image's / holds the program's and its libraries' directories
    // (with the host's links on the way) and the monitor's own.
    for name in [
        " dev\n",
        " proc\n",
        " sys\n",
        " tmp\n",
        " usr\n",
        " lib -> usr/lib\n",
    ] {
        assert!(run.out.stdout.contains(name), "no{name}in:\n{}", run.out);
    }
}

/// Sets a file's times (not following links) to `secs` since the epoch.
fn touch(p: &Path, secs: u64) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let t = libc::timespec {
        tv_sec: secs as i64,
        tv_nsec: 0,
    };
    // SAFETY: a valid path and two timespecs.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), 0x100) };
    assert_eq!(r, 0, "utimensat {}", p.display());
}

#[test]
fn ls_la_gives_what_it_gives_natively_over_the_same_tree() {
    let home = Home::new();
    let root = root_with(&["/bin/ls"]);
    // The owners' names, as the host's ls reads them.
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    for f in ["etc/passwd", "etc/group"] {
        std::fs::copy(Path::new("/").join(f), root.path().join(f)).unwrap();
    }
    let data = root.path().join("data");
    std::fs::create_dir_all(data.join("sub/deeper")).unwrap();
    std::fs::write(data.join("small.txt"), "hello\n").unwrap();
    std::fs::write(data.join("big.bin"), vec![7u8; 70_000]).unwrap();
    std::fs::write(data.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(data.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        data.join("small.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::os::unix::fs::symlink("small.txt", data.join("link")).unwrap();
    // The run's clock starts at the start of today, as the files' times:
    // both sides print them alike ("Dec  1 00:00").
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let epoch = now - now % 86400;
    for e in [
        "",
        "small.txt",
        "big.bin",
        "run.sh",
        "link",
        "sub",
        "sub/deeper",
    ] {
        touch(&data.join(e), epoch);
    }
    // As root the owners are the guest's (root); otherwise leave them out.
    let root_user = unsafe { libc::geteuid() } == 0;
    let flags = if root_user { "-la" } else { "-lgoa" };
    let dir = data.to_str().unwrap();
    let (mut want, native_wall) =
        table::timed(|| native("/bin/ls", &[flags, dir], &["TZ=UTC"], b""));
    assert_eq!(want.code, 0, "{want}");
    // `..` is the root: the host's temporary directory natively, the
    // image's / (with the monitor's /dev, /proc, /sys, /tmp) in the run.
    let not_parent = |s: &str| -> String {
        s.lines()
            .filter(|l| !l.ends_with(" .."))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    want.stdout = not_parent(&want.stdout);
    let r = root.path().to_str().unwrap();
    let epoch_s = epoch.to_string();
    let (run, wall) = table::timed(|| {
        home.run(&[
            "--root",
            r,
            "--epoch",
            &epoch_s,
            "--",
            "/usr/bin/ls",
            flags,
            "/data",
        ])
    });
    table::figures(&format!("ls {flags}"), &run, wall, native_wall);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(
        not_parent(&run.out.stdout),
        want.stdout,
        "ls {flags}: natively:\n{}\nin rewind:\n{}",
        want.stdout,
        run.out
    );
    // While the root is still there.
    home.replay_identical(&run.id);
}

#[test]
fn the_image_holds_interpreter_and_libraries_and_they_are_in_the_run_id() {
    let ls = Image::program(std::fs::canonicalize("/bin/ls").unwrap()).unwrap();
    let Image::Program {
        guest_path,
        host_path,
        deps,
    } = &ls
    else {
        unreachable!()
    };
    let named = |g: &str| deps.iter().find(|d| d.guest == g).map(|d| &d.kind);
    // The interpreter by its PT_INTERP path: the links on the way lead to
    // the real file, as on the host.
    let real_ld = std::fs::canonicalize("/lib64/ld-linux-x86-64.so.2").unwrap();
    assert_eq!(
        ls.host_path("/lib64/ld-linux-x86-64.so.2").as_ref(),
        Some(&real_ld),
        "{deps:#?}"
    );
    assert!(
        matches!(named(real_ld.to_str().unwrap()), Some(DepKind::File { .. })),
        "{deps:#?}"
    );
    assert!(
        deps.iter()
            .any(|d| matches!(d.kind, DepKind::Symlink { .. })),
        "{deps:#?}"
    );
    let libc = std::fs::canonicalize("/lib/x86_64-linux-gnu/libc.so.6").unwrap();
    assert!(
        matches!(named(libc.to_str().unwrap()), Some(DepKind::File { .. })),
        "{deps:#?}"
    );
    // A library's bytes are in the hash: a changed libc is another image.
    let changed = tempfile::NamedTempFile::new().unwrap();
    let mut bytes = std::fs::read(&libc).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(changed.path(), &bytes).unwrap();
    std::fs::set_permissions(
        changed.path(),
        std::fs::metadata(&libc).unwrap().permissions(),
    )
    .unwrap();
    let other = Image::Program {
        guest_path: guest_path.clone(),
        host_path: host_path.clone(),
        deps: deps
            .iter()
            .map(|d| match &d.kind {
                DepKind::File { host } if host == &libc => Dep {
                    guest: d.guest.clone(),
                    kind: DepKind::File {
                        host: changed.path().to_path_buf(),
                    },
                },
                _ => d.clone(),
            })
            .collect(),
    };
    assert_ne!(ls.hash().unwrap(), other.hash().unwrap());
    // A static program's image is the program alone: its hash (and so
    // every stored run id) is what it was before images had libraries.
    let hello = guest("hello");
    let st = Image::program(hello.clone()).unwrap();
    let Image::Program { deps, .. } = &st else {
        unreachable!()
    };
    assert!(deps.is_empty(), "{deps:?}");
    let mode = std::fs::metadata(&hello).unwrap().permissions().mode();
    assert_eq!(
        st.hash().unwrap(),
        vmm::image::program_hash(
            hello.to_str().unwrap(),
            mode,
            &std::fs::read(&hello).unwrap()
        )
    );
}

/// `hello-dynamic` with its PT_INTERP path replaced by `interp` (no longer).
fn with_interp(dir: &Path, interp: &str) -> PathBuf {
    let mut bytes = std::fs::read(guest("hello-dynamic")).unwrap();
    let old = b"/lib64/ld-linux-x86-64.so.2\0";
    let at = bytes
        .windows(old.len())
        .position(|w| w == old)
        .expect("hello-dynamic names the usual interpreter");
    assert!(interp.len() < old.len());
    let mut new = interp.as_bytes().to_vec();
    new.resize(old.len(), 0);
    bytes[at..at + old.len()].copy_from_slice(&new);
    let p = dir.join("hello-bad-interp");
    std::fs::write(&p, bytes).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn a_bad_interpreter_is_one_line_of_error() {
    let home = Home::new();
    // Short paths: PT_INTERP's room is the usual name's.
    let dir = tempfile::Builder::new()
        .prefix("rwi")
        .tempdir_in("/tmp")
        .unwrap();
    let garbage = dir.path().join("ld.so");
    std::fs::write(&garbage, b"\x7fELF\x02\x01\x01 this is no interpreter").unwrap();
    for (interp, says) in [
        ("/nonexistent/ld.so", "not on this host"),
        (garbage.to_str().unwrap(), "interpreter"),
    ] {
        let prog = with_interp(dir.path(), interp);
        let out = home.rewind(&["run", "--", prog.to_str().unwrap()]);
        assert_ne!(out.code, 0, "{out}");
        let lines = out.stderr_lines();
        assert_eq!(lines.len(), 1, "want one line:\n{out}");
        assert!(
            lines[0].contains(interp) && lines[0].contains(says),
            "{out}"
        );
        assert!(!out.stderr.contains("panicked"), "{out}");
        assert_eq!(home.finished_run_dirs(), Vec::<String>::new());
    }
}

#[test]
fn a_dynamically_linked_test_program_runs() {
    let home = Home::new();
    let run = home.run_guest("hello-dynamic", &[]);
    let want = native(&guest_arg("hello-dynamic"), &[], &[], b"");
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.stdout, want.stdout);
}

#[test]
fn a_replayable_export_carries_the_libraries() {
    let home = Home::new();
    let run = home.run(&["--", "/bin/echo", "carried"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let rwd = home.path().join("echo.rwd");
    let rwd = rwd.to_str().unwrap();
    home.ok(&["export", "--replayable", &run.id, "-o", rwd]);
    let other = Home::new();
    other.ok(&["import", rwd]);
    // Replayed from the imported image (interpreter and libc included).
    other.replay_identical(&run.id);
    assert_eq!(other.log(&run.id), "carried\n");
    let show = other.ok(&["show", &run.id]).stdout;
    assert!(show.contains("interpreter and libraries"), "{show}");
}

#[test]
fn sqlite3_with_a_small_database_runs_as_natively() {
    if host_program("/usr/bin/sqlite3", "sqlite3").is_none() {
        return;
    }
    let home = Home::new();
    let sql = "create table fruit(name text primary key, n int); \
               insert into fruit values ('pear', 3), ('apple', 5), ('fig', 1); \
               update fruit set n = n + 10 where name = 'fig'; \
               begin; delete from fruit where name = 'pear'; commit; \
               select name, n from fruit order by n desc; \
               select count(*), sum(n) from fruit;";
    // The database is a new file: in the overlay's /tmp in the run, in a
    // fresh directory natively.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fruit.db");
    let (want, native_wall) =
        table::timed(|| native("/usr/bin/sqlite3", &[db.to_str().unwrap(), sql], &[], b""));
    assert_eq!(want.code, 0, "{want}");
    let (run, wall) = table::timed(|| home.run(&["--", "/usr/bin/sqlite3", "/tmp/fruit.db", sql]));
    table::figures("sqlite3", &run, wall, native_wall);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.stdout, want.stdout, "{}", run.out);
    assert_eq!(run.out.stdout, "fig|11\napple|5\n2|16\n");
    // Its locks and journal went through the file calls.
    let events = home.events(&run.id);
    assert!(events.contains("fcntl(3, "), "{events}");
}

/// Three threads compute under a lock; the main thread joins them.
const PY_THREADS: &str = "\
import threading
results = []
lock = threading.Lock()
def work(n):
    s = sum(i * i for i in range(n))
    with lock:
        results.append((n, s))
ts = [threading.Thread(target=work, args=(n,)) for n in (1000, 2000, 3000)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(sorted(results), threading.active_count())
";

#[test]
fn python3_with_threads_runs_as_natively() {
    let Some(python) = rewind_tests::host_program("/usr/bin/python3.11", "python3.11") else {
        return;
    };
    let python = python.as_str();
    // The standard library files this code loads natively, which the root
    // then holds beside the interpreter and its libraries.
    let list = format!(
        "{PY_THREADS}import sys\nfor m in list(sys.modules.values()):\n    \
         f = getattr(m, '__file__', None)\n    if f: print('FILE', f)\n"
    );
    let listed = native(python, &["-c", &list], &[], b"");
    assert_eq!(listed.code, 0, "{listed}");
    let root = root_with(&[python]);
    let stdlib = "/usr/lib/python3.11/";
    for f in listed
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("FILE "))
    {
        if let Some(rel) = f.strip_prefix(stdlib) {
            let to = root.path().join("usr/lib/python3.11").join(rel);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(f, to).unwrap();
        }
    }
    std::fs::create_dir_all(root.path().join("usr/lib/python3.11/lib-dynload")).unwrap();
    let home = Home::new();
    let r = root.path().to_str().unwrap();
    let (want, native_wall) = table::timed(|| native(python, &["-c", PY_THREADS], &[], b""));
    assert_eq!(want.code, 0, "{want}");
    let (run, wall) = table::timed(|| home.run(&["--root", r, "--", python, "-c", PY_THREADS]));
    table::figures("python3 -c with threads", &run, wall, native_wall);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.stdout, want.stdout, "{}", run.out);
    let events = home.events(&run.id);
    // Three threads were made and joined.
    assert_eq!(events.matches("thread start").count(), 4, "{events}");
    home.replay_identical(&run.id);
}

#[test]
fn proc_self_maps_names_the_interpreter_and_libraries() {
    let home = Home::new();
    let run = home.run(&["--", "/bin/cat", "/proc/self/maps"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let maps = &run.out.stdout;
    let real = |p: &str| {
        std::fs::canonicalize(p)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    };
    for file in [
        real("/bin/cat"),
        real("/lib64/ld-linux-x86-64.so.2"),
        real("/lib/x86_64-linux-gnu/libc.so.6"),
    ] {
        assert!(
            maps.lines().any(|l| l.ends_with(&format!(" {file}"))),
            "{file} is not in\n{maps}"
        );
    }
    assert!(maps.lines().any(|l| l.ends_with(" [stack]")), "{maps}");
}

/// An image file of several MB (one the monitor maps rather than reads,
/// `FileBytes::Mapped`) is read, appended to and read back in the run as
/// natively, and the host's file is left as it was.
#[test]
fn a_large_image_file_is_read_changed_and_read_back_as_natively() {
    let home = Home::new();
    let root = root_with(&["/bin/sh", "/usr/bin/tail", "/usr/bin/md5sum"]);
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let data = root.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("big.bin"), &big).unwrap();
    let native_dir = tempfile::tempdir().unwrap();
    std::fs::write(native_dir.path().join("big.bin"), &big).unwrap();
    let script = "md5sum < \"$1/big.bin\"; echo appended >> \"$1/big.bin\"; \
                  tail -c 9 \"$1/big.bin\"; md5sum < \"$1/big.bin\"";
    let want = native(
        "/bin/sh",
        &["-c", script, "sh", native_dir.path().to_str().unwrap()],
        &[],
        b"",
    );
    assert_eq!(want.code, 0, "{want}");
    let r = root.path().to_str().unwrap();
    let run = home.run(&["--root", r, "--", "/bin/sh", "-c", script, "sh", "/data"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(
        run.out.stdout, want.stdout,
        "natively:\n{want}\nin rewind:\n{}",
        run.out
    );
    assert_eq!(
        std::fs::read(data.join("big.bin")).unwrap(),
        big,
        "the host's file"
    );
    home.replay_identical(&run.id);
}
