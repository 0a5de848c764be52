//! A replayable export of a `--root` run carries its image view and the
//! files it read (issue #24 item 2), not the whole tree: it is made after
//! the host's tree changed, and the imported run replays identically,
//! `cat`s what the run read, seeks and forks; a forged or damaged view or
//! file is refused in one line with nothing added; a run without a view
//! exports its tree as before, and a version 1 file still imports. Every
//! recorded and imported run is replayed and must be identical.

use rewind_tests::roots::{change_view_root, java_root, new_root, view_root};
use rewind_tests::*;
use std::path::Path;
use vmm::store::archive::{read, ArchiveWriter, Entries, Entry};

/// `rewind export RUN --replayable -o FILE` from `home`: the file's size.
fn export(home: &Home, run: &str, file: &Path) -> u64 {
    home.ok(&["export", run, "--replayable", "-o", file.to_str().unwrap()]);
    std::fs::metadata(file).unwrap().len()
}

/// The JVM over a root of its JDK: the export's size beside the root's.
#[test]
fn a_java_runs_export_carries_what_it_read() {
    let Some(java) = host_program("/usr/bin/java", "default-jre-headless") else {
        return;
    };
    let root = java_root(&java);
    let home = Home::new();
    let r = root.path().to_str().unwrap();
    let run = home.run(&["--root", r, "--", &java, "-Xint", "-version"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    home.replay_identical(&run.id);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("java.rwd");
    let bytes = export(&home, &run.id, &file);
    let all = entries(&file);
    let read: Vec<u64> = all
        .iter()
        .filter(|(e, _)| e.path.starts_with("image/files/"))
        .map(|(e, _)| e.raw_len)
        .collect();
    assert!(!all.iter().any(|(e, _)| e.path.starts_with("image/root/")));
    let (tree, files) = du(root.path());
    eprintln!(
        "java -Xint -version over a {:.1} MB root ({files} files): a replayable export of \
         {:.2} MB carrying the {} files it read ({:.1} MB)",
        tree as f64 / 1e6,
        bytes as f64 / 1e6,
        read.len(),
        read.iter().sum::<u64>() as f64 / 1e6
    );
    let other = Home::new();
    other.ok(&["import", file.to_str().unwrap()]);
    other.replay_identical(&run.id);
}

/// Bytes and number of the files under `dir`, links not followed.
fn du(dir: &Path) -> (u64, u64) {
    let Ok(d) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    d.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => du(&e.path()),
            Ok(t) if t.is_file() => (e.metadata().map(|m| m.len()).unwrap_or(0), 1),
            _ => (0, 0),
        })
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// The entries of export `file`, whole.
fn entries(file: &Path) -> Vec<(Entry, Vec<u8>)> {
    let mut all = Entries::default();
    read(&std::fs::read(file).unwrap()[..], &mut all).unwrap();
    all.0
}

/// An export file made of `entries` (checksums right), of format `version`.
fn write(entries: &[(Entry, Vec<u8>)], version: u32) -> Vec<u8> {
    let mut w = ArchiveWriter::new(Vec::new()).unwrap();
    for (e, data) in entries {
        let data = match (e.path.as_str(), version) {
            ("rwd.json", 1) => String::from_utf8(data.clone())
                .unwrap()
                .replace("\"format\": 2", "\"format\": 1")
                .into_bytes(),
            _ => data.clone(),
        };
        w.add(e.kind, e.mode, &e.path, &data).unwrap();
    }
    let mut bytes = w.finish().unwrap().0;
    if version != 2 {
        // The header's version, and the whole file's checksum after it.
        bytes[8..12].copy_from_slice(&version.to_le_bytes());
        let body = bytes.len() - 41;
        let total = blake3::hash(&bytes[..body]);
        bytes.truncate(body + 9);
        bytes.extend_from_slice(total.as_bytes());
    }
    bytes
}

/// Every path under `dir` with its bytes (directories empty).
fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let name = p.strip_prefix(dir).unwrap().display().to_string();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
                out.push((name, Vec::new()));
            } else {
                out.push((name, std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// `rewind shell RUN STEP` typing `cat FILE`: what it printed, and its
/// exit status (the shell's `exit 3`).
fn shell_cat(home: &Home, run: &str, step: &str, file: &str) -> Output {
    let mut cmd = std::process::Command::new(rewind_bin());
    cmd.args(["shell", run, step])
        .env("REWIND_HOME", home.path());
    let input = format!("cat {file}\nexit 3\n");
    run_command_with_input(cmd, DEADLINE, input.as_bytes())
}

/// After the host's tree changed, a `--root` run's replayable export
/// carries its view and the files it read; imported where the root does
/// not exist, the run replays identically, `cat`s what it read (a file it
/// never read is exit 2 in one line), seeks, forks and opens a shell
/// there. The shell works in the recording store too (item 2).
#[test]
fn a_viewed_runs_export_works_after_the_tree_changed() {
    let home = Home::new();
    let root = new_root("rewind-view-export-");
    view_root(root.path());
    let r = root.path().to_str().unwrap();
    let run = home.run(&[
        "--root",
        r,
        "--",
        "/bin/fs-tool", //
        "cat",
        "/etc/greeting", //
        "ls",
        "/data", //
        "stat",
        "/etc/unread",
    ]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let steps = run.steps.expect("the run's steps");
    let (last, middle) = (steps.to_string(), (steps / 2).to_string());
    change_view_root(root.path());
    home.replay_identical(&run.id);

    // `rewind shell` at a step of the run, over its view (item 2).
    let got = shell_cat(&home, &run.id, &middle, "/etc/greeting");
    assert_eq!(got.code, 3, "{got}");
    assert!(got.stdout.contains("hello from the root"), "{got}");
    assert!(!got.stdout.contains("changed"), "{got}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("view.rwd");
    export(&home, &run.id, &file);
    let all = entries(&file);
    let names: Vec<&str> = all.iter().map(|(e, _)| e.path.as_str()).collect();
    assert!(names.contains(&"run/image-view"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("image/root")),
        "{names:?}"
    );
    // fs-tool and /etc/greeting: what the run read, nothing else.
    let files: Vec<&&str> = names
        .iter()
        .filter(|n| n.starts_with("image/files/"))
        .collect();
    assert_eq!(files.len(), 2, "{names:?}");
    // On another host: the root is gone.
    drop(root);

    let other = Home::new();
    let out = other.ok(&["import", file.to_str().unwrap()]);
    assert!(
        out.stdout.contains(&run.id) || out.stderr.contains(&run.id),
        "{out}"
    );
    other.replay_identical(&run.id);
    let cat = |step: &str, f: &str| other.rewind(&["cat", &run.id, step, f]);
    for step in [&last, &middle] {
        let got = cat(step, "/etc/greeting");
        assert_eq!(
            (got.code, got.stdout.as_str()),
            (0, "hello from the root\n"),
            "{got}"
        );
    }
    assert_eq!(cat(&last, "/data/c").code, 1);
    let got = cat(&last, "/etc/unread");
    assert_eq!(got.code, 2, "{got}");
    assert_eq!(got.stderr.lines().count(), 1, "{got}");
    let ps = other.ok(&["ps", &run.id, "--at", &middle]);
    assert!(ps.stdout.contains("process 1000"), "{ps}");
    let got = shell_cat(&other, &run.id, &middle, "/etc/greeting");
    assert_eq!(got.code, 3, "{got}");
    assert!(got.stdout.contains("hello from the root"), "{got}");

    // A fork of the imported run: its own view, replayed, exported again.
    let fork = other.rewind(&["fork", &run.id, &middle, "--schedule", "2", "-q"]);
    assert!(fork.stderr.contains("exited:0"), "{fork}");
    let fork_id = fork.run_id();
    other.replay_identical(&fork_id);
    let got = other.rewind(&["cat", &fork_id, &last, "/etc/greeting"]);
    assert_eq!(got.stdout, "hello from the root\n", "{got}");
    let again = dir.path().join("fork.rwd");
    export(&other, &fork_id, &again);
    let third = Home::new();
    third.ok(&["import", again.to_str().unwrap()]);
    third.replay_identical(&fork_id);

    // gc keeps the imported files while the runs name them.
    let gc = other.ok(&["gc", "--json"]);
    assert!(gc.stdout.contains("\"files_removed\":0"), "{gc}");
    other.replay_identical(&run.id);
    forged_exports_are_refused(&all);
}

/// `rewind import` of `bytes` fails in one line, exit 2, and leaves the
/// store as it was.
#[track_caller]
fn refused(bytes: &[u8], mentions: &str) {
    let home = Home::new();
    home.ok(&["ls"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("forged.rwd");
    std::fs::write(&file, bytes).unwrap();
    let before = tree(home.path());
    let out = home.rewind(&["import", file.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(out.stderr.lines().count(), 1, "{out}");
    assert!(out.stderr.contains(mentions), "{mentions}: {out}");
    assert_eq!(tree(home.path()), before, "the store changed: {out}");
}

/// A file whose bytes are not its name's hash, a view naming a file the
/// export does not carry, a file the view does not name: refused.
fn forged_exports_are_refused(all: &[(Entry, Vec<u8>)]) {
    let is_file = |e: &Entry| e.path.starts_with("image/files/");
    let mut swapped = all.to_vec();
    let i = swapped.iter().position(|(e, _)| is_file(e)).unwrap();
    swapped[i].1 = b"other bytes\n".to_vec();
    refused(&write(&swapped, 2), "is not the file it names");

    let mut missing = all.to_vec();
    missing.remove(i);
    refused(&write(&missing, 2), "which it does not carry");

    let mut extra = all.to_vec();
    let data = b"not named\n".to_vec();
    let mut e = extra[i].0.clone();
    e.path = format!("image/files/{}", blake3::hash(&data).to_hex());
    extra.insert(i, (e, data));
    refused(&write(&extra, 2), "does not name");

    // Image views came with format 2: a version 1 file carrying one is
    // forged, as is a header whose version is not rwd.json's.
    refused(&write(all, 1), "a format 1 file cannot carry an image view");
    let mut info = all.to_vec();
    let j = info.iter().position(|(e, _)| e.path == "rwd.json").unwrap();
    let text = String::from_utf8(info[j].1.clone()).unwrap();
    info[j].1 = text.replace("\"format\": 2", "\"format\": 1").into_bytes();
    refused(&write(&info, 2), "the file's header 2");

    // An image view that is not one.
    let mut view = all.to_vec();
    let v = view
        .iter()
        .position(|(e, _)| e.path == "run/image-view")
        .unwrap();
    view[v].1 = b"{\"version\":1".to_vec();
    refused(&write(&view, 2), "run/image-view");
}

/// A version 1 file (written before image views) still imports and replays.
#[test]
fn a_version_1_export_still_imports() {
    let home = Home::new();
    let run = home.run_guest("hello", &[]);
    home.replay_identical(&run.id);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("new.rwd");
    export(&home, &run.id, &file);
    let old = dir.path().join("old.rwd");
    let bytes = write(&entries(&file), 1);
    assert_eq!(bytes[8..12], 1u32.to_le_bytes());
    std::fs::write(&old, bytes).unwrap();
    let other = Home::new();
    other.ok(&["import", old.to_str().unwrap()]);
    other.replay_identical(&run.id);
    // A version this build does not know is refused in one line.
    refused(&write(&entries(&file), 3), "format version 3");
}

/// A `--root` run without a view (recorded before views existed) exports
/// its tree as before while the tree is unchanged, and is refused in one
/// line once it changed.
#[test]
fn a_root_run_without_a_view_exports_its_tree_as_before() {
    let home = Home::new();
    let root = new_root("rewind-view-export-old-");
    view_root(root.path());
    let r = root.path().to_str().unwrap();
    let run = home.run(&["--root", r, "--", "/bin/fs-tool", "cat", "/etc/greeting"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    home.replay_identical(&run.id);
    std::fs::remove_file(home.path().join("runs").join(&run.id).join("image-view")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("old.rwd");
    export(&home, &run.id, &file);
    let all = entries(&file);
    assert!(all.iter().any(|(e, _)| e.path == "image/root/etc/unread"));
    assert!(!all.iter().any(|(e, _)| e.path.starts_with("image/files/")));
    let other = Home::new();
    other.ok(&["import", file.to_str().unwrap()]);
    other.replay_identical(&run.id);
    change_view_root(root.path());
    let f = dir.path().join("changed.rwd");
    let out = home.rewind(&["export", &run.id, "--replayable", "-o", f.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(out.stderr.lines().count(), 1, "{out}");
    assert!(!f.exists());
}
