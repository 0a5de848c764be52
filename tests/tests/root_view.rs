//! A `--root` run stays readable after the host's tree changed (issue #24
//! item 2): the run's image view (`runs/<id>/image-view`) answers what the
//! run saw, the files it read are kept in the store (`files/`), a file it
//! never read is a clear error, and `gc` drops the kept files once no run
//! names them. Every recorded run is replayed and must be identical.

use rewind_tests::roots::{change_view_root as change_root, view_root as make_root};
use rewind_tests::*;
use std::path::Path;

#[test]
fn a_root_run_reads_as_recorded_after_the_tree_changed() {
    let home = Home::new();
    let root = tempfile::tempdir().unwrap();
    make_root(root.path());
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
    assert_lines(
        &run.out.stdout,
        &["hello from the root", "/data: ./ ../ a b"],
    );
    assert!(home
        .path()
        .join("runs")
        .join(&run.id)
        .join("image-view")
        .exists());
    let steps = run.steps.expect("the run's steps");
    let last = steps.to_string();
    let middle = (steps / 2).to_string();
    change_root(root.path());

    let cat = |step: &str, file: &str| home.rewind(&["cat", &run.id, step, file]);
    let got = cat(&last, "/etc/greeting");
    assert_eq!(
        (got.code, got.stdout.as_str()),
        (0, "hello from the root\n"),
        "{got}"
    );
    let got = cat(&middle, "/etc/greeting");
    assert_eq!(
        (got.code, got.stdout.as_str()),
        (0, "hello from the root\n"),
        "{got}"
    );
    // What the run did not see is not there.
    assert_eq!(cat(&last, "/data/c").code, 1);
    for unread in ["/etc/unread", "/data/b"] {
        let got = cat(&last, unread);
        assert_eq!(got.code, 2, "{got}");
        assert!(got.stderr.contains("never read this file"), "{got}");
        assert_eq!(got.stderr.lines().count(), 1, "{got}");
    }
    let ps = home.ok(&["ps", &run.id, "--at", &middle]);
    assert!(ps.stdout.contains("process 1000"), "{ps}");
    home.replay_identical(&run.id);
    // A fork runs over the view too, and keeps a view of its own.
    let fork = home.rewind(&["fork", &run.id, &middle, "--schedule", "2", "-q"]);
    let fork_id = fork.run_id();
    assert!(fork.stderr.contains("exited:0"), "{fork}");
    let fork_dir = home.path().join("runs").join(&fork_id);
    assert!(fork_dir.join("image-view").exists(), "{fork}");
    home.replay_identical(&fork_id);
    let got = home.rewind(&["cat", &fork_id, &last, "/etc/greeting"]);
    assert_eq!(got.stdout, "hello from the root\n", "{got}");

    // A damaged view is a clear error, never a panic.
    let view = home.path().join("runs").join(&run.id).join("image-view");
    let good = std::fs::read(&view).unwrap();
    std::fs::write(&view, &good[..good.len() / 2]).unwrap();
    let got = cat(&last, "/etc/greeting");
    assert_eq!(got.code, 2, "{got}");
    assert!(got.stderr.contains("damaged image view"), "{got}");
    let other =
        String::from_utf8(good.clone())
            .unwrap()
            .replacen("\"version\":1", "\"version\":99", 1);
    std::fs::write(&view, other).unwrap();
    let got = cat(&last, "/etc/greeting");
    assert!(got.stderr.contains("image view version 99"), "{got}");
    assert!(!got.stderr.contains("panicked"), "{got}");
    std::fs::write(&view, &good).unwrap();

    // The kept files go with the last run that names them.
    let files = home.path().join("files");
    assert!(
        walk_files(&files) >= 2,
        "the program and /etc/greeting are kept"
    );
    let gc = home.ok(&["gc", "--json"]);
    assert!(gc.stdout.contains("\"files_removed\":0"), "{gc}");
    home.ok(&["remove", &fork_id]);
    let gc = home.ok(&["gc", "--json"]);
    assert!(gc.stdout.contains("\"files_removed\":0"), "{gc}");
    home.ok(&["remove", &run.id]);
    let gc = home.ok(&["gc", "--json"]);
    assert!(!gc.stdout.contains("\"files_removed\":0"), "{gc}");
    assert_eq!(walk_files(&files), 0);
}

fn walk_files(dir: &Path) -> usize {
    let Ok(d) = std::fs::read_dir(dir) else {
        return 0;
    };
    d.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => walk_files(&e.path()),
            _ => 1,
        })
        .sum()
}

/// A first run over a tree reads every file of it for the image's
/// identity, beside the run. When that is still going a second after the
/// run ended, the command says why it has not returned, on its own line
/// after the guest's unfinished one; a second run, which reads nothing
/// new, says nothing and gets the same id.
#[test]
fn a_long_first_read_of_a_root_is_said_and_a_later_run_is_quiet() {
    let home = Home::new();
    let root = slow_root();
    let r = root.path().to_str().unwrap();
    let first = home.run(&["--root", r, "--", "/hello"]);
    assert_eq!(first.status, "exited:0", "{}", first.out);
    let err = &first.out.stderr;
    let note = err.lines().find(|l| l.starts_with(NOTE));
    assert!(note.is_some_and(|l| l.contains(r)), "{}", first.out);
    assert!(
        err.lines()
            .last()
            .is_some_and(|l| l.starts_with("rewind: run ")),
        "the status line stays the last: {}",
        first.out
    );
    let second = home.run(&["--root", r, "--", "/hello"]);
    assert_eq!(second.id, first.id, "{}", second.out);
    assert!(!second.out.stderr.contains(NOTE), "{}", second.out);
    home.replay_identical(&first.id);
}

const NOTE: &str = "rewind: finding the image's identity: reading what is new or changed in";

/// A root of a static program, `/hello`, and 16 GiB of a hole: seconds
/// of reading for a first run, no disk. Its files are older than the
/// racy margin, within which a file read is read again at the next run.
fn slow_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::copy(guest("hello"), root.path().join("hello")).unwrap();
    let big = std::fs::File::create(root.path().join("big")).unwrap();
    big.set_len(16 << 30).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    root
}

/// `rewind check` finds its image's identity before schedule 0, and says
/// so when that takes long, then checks as ever (nothing to find: exit 0).
/// Its runs are kept, so that the home replays them all.
#[test]
fn a_check_over_a_root_it_reads_long_says_so_first() {
    let home = Home::new();
    let root = slow_root();
    let r = root.path().to_str().unwrap();
    let check = ["check", "--keep", "all", "--schedules", "2", "--root", r];
    let out = home.rewind(&[&check[..], &["--", "/hello"]].concat());
    assert_eq!(out.code, 0, "{out}");
    let first = out.stderr.lines().next().unwrap_or("");
    assert!(first.starts_with(NOTE) && first.contains(r), "{out}");
}

/// A Rewind store inside the root (as `--root /` holds the store a run is
/// recorded into) is left out of the image: the guest does not see it, and
/// the same command run again after the store changed (the first run was
/// written into it) is the same run, with the same id.
#[test]
fn a_store_inside_the_root_is_left_out_and_a_run_made_again_keeps_its_id() {
    let root = tempfile::tempdir().unwrap();
    make_root(root.path());
    let home = Home::kept_at(&root.path().join("data/store"));
    let r = root.path().to_str().unwrap();
    let args = [
        "--root",
        r,
        "--",
        "/bin/fs-tool", //
        "ls",
        "/data", //
        "stat",
        "/data/store/runs",
    ];
    let first = home.run(&args);
    assert_lines(
        &first.out.stdout,
        &[
            "/data: ./ ../ a b",
            "/data/store/runs: error: No such file or directory",
        ],
    );
    assert!(
        home.path().join("REWIND-STORE.TAG").is_file(),
        "{}",
        first.out
    );
    let second = home.run(&args);
    assert_eq!(second.id, first.id, "{}", second.out);
    assert_eq!(second.out.stdout, first.out.stdout);
    home.replay_identical(&second.id);
}
