//! Linux's view of the executable (issue 24, item 1): `/proc/self/exe` and
//! `/proc/PID/exe` name the program file itself (links resolved, absolute),
//! AT_EXECFN the path as given to execve, comm the name it was called by,
//! for programs started through symbolic links and relative paths (as the
//! first program and through execve) and `#!` scripts (as the first
//! program and through execve);
//! each compared with the same start natively. And Debian's `/usr/bin/java`, a link through
//! /etc/alternatives whose loader finds `$ORIGIN/../lib` from
//! /proc/self/exe, runs; so does its keytool with the JIT compilers, writing
//! a keystore the host's keytool reads. Every recorded run is replayed
//! (`Home` at drop).

use rewind_tests::roots::{java_root, mirror_path};
use rewind_tests::*;
use std::os::unix::fs::symlink;
use std::path::Path;

/// A root with `exe-view` at /opt/x/bin, reached by relative links
/// /usr/bin/tool -> /etc/alt/tool -> /opt/x/bin/exe-view (as Debian's
/// alternatives), an absolute link /bin/abs, and a script /bin/script
/// whose interpreter line names the link relative to the cwd.
fn tree() -> tempfile::TempDir {
    let root = tempfile::Builder::new()
        .prefix("rewind-exe-root-")
        .tempdir()
        .unwrap();
    let r = root.path();
    for d in ["bin", "opt/x/bin", "etc/alt", "usr/bin"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::copy(guest("exe-view"), r.join("opt/x/bin/exe-view")).unwrap();
    symlink("../../opt/x/bin/exe-view", r.join("etc/alt/tool")).unwrap();
    symlink("../../etc/alt/tool", r.join("usr/bin/tool")).unwrap();
    symlink("/opt/x/bin/exe-view", r.join("bin/abs")).unwrap();
    std::fs::write(r.join("bin/script"), "#!../usr/bin/tool -a\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(r.join("bin/script"), std::fs::Permissions::from_mode(0o755)).unwrap();
    root
}

/// `prog args` from guest directory `cwd` of `root`: inside Rewind (--root)
/// and natively (its paths then start with the root's host path, cut off).
#[track_caller]
fn same_view(home: &Home, root: &Path, cwd: &str, prog: &str, args: &[&str]) {
    let host_cwd = root.join(cwd.trim_start_matches('/'));
    let native = native_with_env(&[], Some(&host_cwd), prog, args, b"");
    assert_eq!(
        native.code,
        0,
        "{} in {}: {native}",
        prog,
        host_cwd.display()
    );
    let want = native.stdout.replace(root.to_str().unwrap(), "");
    let mut full = vec!["--root", root.to_str().unwrap(), "--cwd", cwd, "--", prog];
    full.extend(args);
    let run = home.run(&full);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.stdout, want, "`{prog} {args:?}` in {cwd}");
    assert!(
        want.contains("/proc/self/exe: /opt/x/bin/exe-view"),
        "{want}"
    );
}

#[test]
fn proc_exe_and_execfn_are_as_linux_gives_them() {
    // The root outlives the home, whose runs are replayed when it is dropped.
    let root = tree();
    let home = Home::new();
    let r = root.path();
    // The first program through relative links, by a relative path.
    same_view(&home, r, "/", "./usr/bin/tool", &["1"]);
    // A `#!` script as the first program, its interpreter relative to the cwd.
    same_view(&home, r, "/bin", "./script", &["s", "y"]);
    // Without a root its interpreter is not in the image: said, exit 2.
    let script = r.join("bin/script");
    let out = home.rewind(&["run", "--", script.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{out}");
    assert!(out.stderr.contains("`#!` script runs over --root"), "{out}");
    // Through execve: a `#!` script, a link by a relative path.
    same_view(
        &home,
        r,
        "/bin",
        "../usr/bin/tool",
        &["exec", "./script", "s", "y"],
    );
    same_view(
        &home,
        r,
        "/usr",
        "bin/tool",
        &["exec", "../etc/alt/tool", "t", "z"],
    );
    // An absolute link (natively it would name the host's /opt).
    let run = home.run(&[
        "--root",
        r.to_str().unwrap(),
        "--",
        "/bin/abs",
        "exec",
        "/bin/abs",
        "a",
    ]);
    assert_eq!(
        run.out.stdout,
        "/proc/self/exe: /opt/x/bin/exe-view\n/proc/PID/exe: /opt/x/bin/exe-view\n\
         AT_EXECFN: /bin/abs\nargv[0]: a\ncomm: abs\n",
        "{}",
        run.out
    );
}

#[test]
fn java_through_its_alternatives_link_runs() {
    let Some(java) = host_program("/usr/bin/java", "default-jre-headless") else {
        return;
    };
    let root = java_root(&java);
    let (native, native_wall) =
        table::timed(|| native_with_env(&[], None, &java, &["-Xint", "-version"], b""));
    assert_eq!(native.code, 0, "{native}");
    let home = Home::new();
    let r = root.path().to_str().unwrap();
    let (run, wall) = table::timed(|| home.run(&["--root", r, "--", &java, "-Xint", "-version"]));
    table::figures("java -Xint -version", &run, wall, native_wall);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let version = native.stderr.lines().next().unwrap();
    assert!(run.out.stderr.contains(version), "{version}:\n{}", run.out);
}

/// The arguments of a keytool that makes an EC key pair and a self-signed
/// certificate into the keystore `at`, listing what its JIT compiles.
fn keytool_args(at: &str) -> Vec<&str> {
    vec![
        "-J-XX:+PrintCompilation",
        "-genkeypair",
        "-keyalg",
        "EC",
        "-storetype",
        "JKS",
        "-alias",
        "rewind",
        "-dname",
        "CN=rewind",
        "-storepass",
        "rewind-test",
        "-keystore",
        at,
        "-validity",
        "30",
    ]
}

/// How many methods a `-XX:+PrintCompilation` listing says were compiled
/// at `tier` (4: C2): its lines are `ms id flags tier class::method (size)`.
fn compiled_at(listing: &str, tier: &str) -> usize {
    listing
        .lines()
        .filter(|l| l.contains("::"))
        .filter(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let name = words.iter().position(|w| w.contains("::"));
            name.is_some_and(|i| i > 0 && words[i - 1] == tier)
        })
        .count()
}

/// The JVM with its JIT compilers, as users run it (no `-Xint`): Debian's
/// keytool makes a key pair and signs its certificate inside Rewind, C1 and
/// C2 compile methods on the way (on the JVM's compiler threads), and the
/// host's keytool reads the keystore the guest wrote.
#[test]
fn keytool_with_the_jit_writes_a_keystore_the_host_reads() {
    let Some(java) = host_program("/usr/bin/java", "default-jre-headless") else {
        return;
    };
    let root = java_root(&java);
    let keytool = std::fs::canonicalize(&java)
        .unwrap()
        .with_file_name("keytool");
    let keytool = keytool.to_str().unwrap();
    mirror_path(root.path(), keytool);
    std::fs::create_dir_all(root.path().join("tmp")).unwrap();
    let host = tempfile::tempdir().unwrap();
    let native_store = host.path().join("native.jks");
    let (native, native_wall) = table::timed(|| {
        native_with_env(
            &[],
            None,
            keytool,
            &keytool_args(native_store.to_str().unwrap()),
            b"",
        )
    });
    assert_eq!(native.code, 0, "{native}");

    let home = Home::new();
    let mut args = vec![
        "--root",
        root.path().to_str().unwrap(),
        "--cwd",
        "/tmp",
        "--",
        keytool,
    ];
    args.extend(keytool_args("/tmp/keystore.jks"));
    let (run, wall) = table::timed(|| home.run(&args));
    table::figures("keytool -genkeypair (the JIT)", &run, wall, native_wall);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    for tier in ["3", "4"] {
        assert!(
            compiled_at(&run.out.stdout, tier) > 0,
            "no method compiled at tier {tier} inside Rewind:\n{}",
            run.out
        );
    }

    let steps = run.steps.unwrap();
    let store = home.cat_bytes(&run.id, steps - 1, "/tmp/keystore.jks");
    let guest_store = host.path().join("guest.jks");
    std::fs::write(&guest_store, store).unwrap();
    let listed = native_with_env(
        &[],
        None,
        keytool,
        &[
            "-list",
            "-v",
            "-storepass",
            "rewind-test",
            "-keystore",
            guest_store.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(
        listed.code, 0,
        "the host's keytool cannot read it: {listed}"
    );
    for want in ["Alias name: rewind", "Owner: CN=rewind", "SHA256withECDSA"] {
        assert!(listed.stdout.contains(want), "{want}:\n{listed}");
    }
}
