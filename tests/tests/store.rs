//! The run store: `show` (commands that make a run again), `export` and
//! `import`, `remove` and `gc`, `prune`, bookmarks, `ls` filters, and
//! several commands on one store at once.

use rewind_tests::{failing_run_in, guest_arg, rewind_bin, run_command, Home, Output, DEADLINE};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every file and directory under `dir` with its size (directories 0), but
/// the lock file, which exists once any command has run.
fn tree(dir: &Path) -> BTreeMap<String, u64> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, u64>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                out.insert(format!("{rel}/"), 0);
                walk(root, &p, out);
            } else {
                out.insert(rel, m.len());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out.remove("lock");
    out
}

fn bytes(t: &BTreeMap<String, u64>) -> u64 {
    t.values().sum()
}

/// A shell line run with `home` as REWIND_HOME and this `rewind` first on PATH.
fn sh(home: &Home, line: &str) -> Output {
    let bin_dir = rewind_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(line)
        .env("REWIND_HOME", home.path())
        .env("PATH", path);
    run_command(cmd, DEADLINE)
}

/// The id on the last `rewind: run <id> ...` line of `stderr`.
fn last_run_id(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("rewind: run "))
        .and_then(|r| r.split_whitespace().next())
        .map(str::to_string)
}

/// One field of each run `rewind ls --json ARGS` lists, in its order.
fn ls_field(home: &Home, args: &[&str], field: &str) -> Vec<String> {
    let mut full = vec!["ls", "--json"];
    full.extend_from_slice(args);
    home.ok(&full)
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()[field]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// `rewind fork`, asserting it ends with a status line; returns the fork's id.
fn fork(home: &Home, args: &[&str]) -> String {
    let mut full = vec!["fork"];
    full.extend_from_slice(args);
    full.push("--quiet");
    let out = home.rewind(&full);
    last_run_id(&out.stderr)
        .unwrap_or_else(|| panic!("`rewind {}` made no run:\n{out}", full.join(" ")))
}

#[test]
fn show_gives_commands_that_recreate_the_same_ids_in_a_fresh_home() {
    let home = Home::new();
    // The default epoch (today) must come out explicit.
    let bank = home.run(&["-q", "--example", "bank"]);
    home.replay_identical(&bank.id);
    let threads = guest_arg("threads");
    let stdin_file = home.path().join("input.txt");
    std::fs::write(&stdin_file, "some input\nfor the guest\n").unwrap();
    let mut cmd = Command::new(rewind_bin());
    cmd.args([
        "run",
        "-q",
        "--name",
        "named run",
        "--seed",
        "7",
        "--cores",
        "2",
        "--mem",
        "512M",
        "--env",
        "HOME=/home/it's me",
        "--env",
        "GREETING=hello world",
        "--cwd",
        "/tmp",
        "--schedule",
        "3",
        "--schedule-from",
        "5",
        "--",
        &threads,
        "arg with space",
    ])
    .env("REWIND_HOME", home.path())
    .stdin(std::fs::File::open(&stdin_file).unwrap());
    // run_command sets standard input to null: run this one by hand.
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let flagged = last_run_id(&stderr).unwrap_or_else(|| panic!("no run:\n{stderr}"));
    home.replay_identical(&flagged);
    let by_schedule = fork(&home, &[&bank.id, "20", "--schedule", "2"]);
    home.replay_identical(&by_schedule);
    let fork_of_fork = fork(&home, &[&by_schedule, "30", "--seed", "9"]);
    home.replay_identical(&fork_of_fork);

    for id in [&bank.id, &flagged, &by_schedule, &fork_of_fork] {
        let v = home.show_json(id);
        assert_eq!(v["reproducible"], true, "{v:#}");
        let cmds = v["commands"].as_array().unwrap();
        let first = cmds[0]["argv"].as_array().unwrap();
        assert!(
            first.iter().any(|a| a == "--epoch"),
            "the epoch must be explicit: {v:#}"
        );
        // The plain output names the same commands.
        let text = home.ok(&["show", id]).stdout;
        for c in cmds {
            let line = c["shell"].as_str().unwrap();
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        // Run them in a fresh home: the last one makes the same run.
        let fresh = Home::new();
        let mut made = None;
        for c in cmds {
            let line = c["shell"].as_str().unwrap();
            let out = sh(&fresh, line);
            made = last_run_id(&out.stderr);
            assert!(made.is_some(), "`{line}` made no run:\n{out}");
        }
        assert_eq!(made.as_deref(), Some(id.as_str()), "{v:#}");
        fresh.replay_identical(id);
    }

    // A run made by narrowing in `rewind check` (an explicit perturbation)
    // is made again by `rewind run --reschedule-at`/`--stall-at`.
    let out = home.rewind(&[
        "check",
        "--points",
        "syscalls",
        "--example",
        "bank",
        "--schedules",
        "16",
    ]);
    // bank is found within 16 schedules.
    let failing = failing_run_in(&out);
    home.replay_identical(&failing);
    let v = home.show_json(&failing);
    let perturb = &v["inputs"]["perturb"];
    assert!(!perturb.as_array().is_none_or(Vec::is_empty), "{v:#}");
    assert!(
        perturb[0]["step"].is_u64() && perturb[0]["what"].is_string(),
        "{v:#}"
    );
    assert_eq!(v["reproducible"], true, "{v:#}");
    let fresh = Home::new();
    let mut made = None;
    for c in v["commands"].as_array().unwrap() {
        let line = c["shell"].as_str().unwrap();
        assert!(
            line.contains("--reschedule-at") || line.contains("--stall-at"),
            "{line}"
        );
        made = last_run_id(&sh(&fresh, line).stderr);
    }
    assert_eq!(made.as_deref(), Some(failing.as_str()), "{v:#}");
    fresh.replay_identical(&failing);
}

/// A second run of the same program imported into a store that holds its
/// image uses the image there, which is not written again; a damaged image
/// there is replaced by the file's.
#[test]
fn an_import_uses_the_image_the_store_holds_and_replaces_a_damaged_one() {
    let home = Home::new();
    let runs: Vec<String> = ["1", "2", "3"]
        .iter()
        .map(|seed| home.run(&["-q", "--seed", seed, "--example", "bank"]).id)
        .collect();
    let files: Vec<String> = runs
        .iter()
        .map(|id| {
            let f = home.path().join(format!("{id}.rwd"));
            let f = f.to_str().unwrap().to_string();
            home.ok(&["export", id, "--replayable", "-o", &f]);
            f
        })
        .collect();
    let other = Home::new();
    other.ok(&["import", &files[0]]);
    let v = other.show_json(&runs[0]);
    let program = Path::new(v["image"]["host_path"].as_str().unwrap()).to_path_buf();
    let before = std::fs::metadata(&program).unwrap();
    other.ok(&["import", &files[1]]);
    let after = std::fs::metadata(&program).unwrap();
    assert_eq!(
        (before.ino(), before.mtime_nsec()),
        (after.ino(), after.mtime_nsec()),
        "the image was written again"
    );
    assert_eq!(
        other.show_json(&runs[1])["image"]["host_path"],
        v["image"]["host_path"]
    );
    other.replay_identical(&runs[1]);
    // Damaged in the store: the third import puts the file's image back.
    let mut bytes = std::fs::read(&program).unwrap();
    bytes[100] ^= 0xff;
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(&program, bytes).unwrap();
    other.ok(&["import", &files[2]]);
    other.replay_identical(&runs[2]);
    other.replay_identical(&runs[0]);
}

#[test]
fn export_replayable_then_import_elsewhere_replays_identically_with_bookmarks() {
    let home = Home::new();
    let run = home.run(&["-q", "--example", "bank"]);
    home.replay_identical(&run.id);
    home.ok(&["bookmark", &run.id, "12", "first transfer"]);
    home.ok(&[
        "bookmark",
        &run.id,
        "3",
        "a note with \"quotes\" and spaces",
    ]);
    let before = home.ok(&["bookmarks", &run.id, "--json"]).stdout;
    assert_eq!(before.lines().count(), 2, "{before}");
    let text = home.ok(&["bookmarks", &run.id]).stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].trim_start().starts_with("3 "),
        "step order:\n{text}"
    );
    // Bookmarks are not inputs: the id stays.
    assert_eq!(home.show_json(&run.id)["id"], run.id.as_str());

    let file = home.path().join("bank.rwd");
    let file_s = file.to_str().unwrap();
    home.ok(&["export", &run.id, "--replayable", "-o", file_s]);
    let plain = home.path().join("bank-plain.rwd");
    home.ok(&["export", &run.id, "-o", plain.to_str().unwrap()]);
    assert!(
        std::fs::metadata(&plain).unwrap().len() < std::fs::metadata(&file).unwrap().len(),
        "a plain export holds no image"
    );

    let other = Home::new();
    let out = other.ok(&["import", file_s]);
    assert!(out.stdout.contains(&run.id), "{out}");
    other.replay_identical(&run.id);
    assert_eq!(other.log(&run.id), home.log(&run.id));
    assert_eq!(other.events(&run.id), home.events(&run.id));
    assert_eq!(
        other.ok(&["bookmarks", &run.id, "--json"]).stdout,
        before,
        "bookmarks travel with the run"
    );
    // The image is kept in the importing store.
    let v = other.show_json(&run.id);
    let host = v["image"]["host_path"].as_str().unwrap();
    assert!(
        Path::new(host).starts_with(other.path().join("images")),
        "{v:#}"
    );
    // A second import changes nothing.
    let t = tree(other.path());
    let again = other.ok(&["import", file_s]);
    assert!(again.stdout.contains("already"), "{again}");
    assert_eq!(tree(other.path()), t);

    // Without --replayable: events, output and bookmarks.
    let third = Home::new();
    third.ok(&["import", plain.to_str().unwrap()]);
    assert_eq!(third.events(&run.id), home.events(&run.id));
    assert_eq!(third.log(&run.id), home.log(&run.id));
    assert_eq!(third.ok(&["bookmarks", &run.id, "--json"]).stdout, before);
    assert!(!third.path().join("images").exists());

    // A root image with links, standard input and a fork travel too.
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("bin")).unwrap();
    std::fs::copy(rewind_tests::guest("hello"), root.path().join("bin/hello")).unwrap();
    std::os::unix::fs::symlink("/bin/hello", root.path().join("hi")).unwrap();
    std::os::unix::fs::symlink("../..", root.path().join("bin/up")).unwrap();
    let mut cmd = Command::new(rewind_bin());
    cmd.args([
        "run",
        "-q",
        "--root",
        root.path().to_str().unwrap(),
        "--",
        "/hi",
        "x",
    ])
    .env("REWIND_HOME", home.path())
    .stdin(std::process::Stdio::piped());
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"input\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let rooted = last_run_id(&stderr).unwrap_or_else(|| panic!("no run:\n{stderr}"));
    home.replay_identical(&rooted);
    let rfile = home.path().join("rooted.rwd");
    home.ok(&[
        "export",
        &rooted,
        "--replayable",
        "-o",
        rfile.to_str().unwrap(),
    ]);
    drop(root);
    other.ok(&["import", rfile.to_str().unwrap()]);
    other.replay_identical(&rooted);
    assert_eq!(other.log(&rooted), home.log(&rooted));
}

/// An export file written by hand, as the format says (entries stored,
/// uncompressed): (kind, mode, path, data).
fn craft(entries: &[(u8, u32, &str, &[u8])]) -> Vec<u8> {
    let mut out = b"\x89RWD\r\n\x1a\n".to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    for (kind, mode, path, data) in entries {
        let mut h = vec![*kind, 0];
        h.extend_from_slice(&mode.to_le_bytes());
        h.extend_from_slice(&(path.len() as u16).to_le_bytes());
        h.extend_from_slice(path.as_bytes());
        h.extend_from_slice(&(data.len() as u64).to_le_bytes());
        h.extend_from_slice(&(data.len() as u64).to_le_bytes());
        h.extend_from_slice(blake3::hash(data).as_bytes());
        let check = blake3::hash(&h);
        h.extend_from_slice(&check.as_bytes()[..8]);
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
    }
    let total = blake3::hash(&out);
    out.push(0xff);
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    out.extend_from_slice(total.as_bytes());
    out
}

/// `rewind import` of `bytes` must fail with one clear line and leave the
/// store exactly as it was.
#[track_caller]
fn refused(home: &Home, name: &str, bytes: &[u8], mentions: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, bytes).unwrap();
    let before = tree(home.path());
    let out = home.rewind(&["import", file.to_str().unwrap()]);
    assert_eq!(out.code, 2, "{name}: {out}");
    let lines = out.stderr_lines();
    assert_eq!(lines.len(), 1, "{name}: one line: {out}");
    assert!(
        lines[0].starts_with("rewind: error: cannot import")
            && lines[0].contains("nothing was imported")
            && lines[0].contains(mentions),
        "{name}: {out}"
    );
    assert_eq!(tree(home.path()), before, "{name}: the store changed");
}

#[test]
fn damaged_or_path_traversing_exports_are_refused_and_nothing_is_written() {
    let src = Home::new();
    let run = src.run(&["-q", "--example", "bank"]);
    src.replay_identical(&run.id);
    let file = src.path().join("x.rwd");
    src.ok(&[
        "export",
        &run.id,
        "--replayable",
        "-o",
        file.to_str().unwrap(),
    ]);
    let good = std::fs::read(&file).unwrap();

    let home = Home::new();
    // Something already in it, to check it is left alone.
    let mine = home.run_guest("hello", &[]);
    home.replay_identical(&mine.id);

    for n in [
        0,
        5,
        12,
        40,
        good.len() / 2,
        good.len() - 41,
        good.len() - 1,
    ] {
        refused(&home, &format!("cut-{n}.rwd"), &good[..n], "");
    }
    refused(&home, "cut.rwd", &good[..good.len() / 3], "truncated");
    for at in [
        0,
        9,
        14,
        30,
        100,
        good.len() / 2,
        good.len() - 20,
        good.len() - 1,
    ] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        refused(&home, &format!("flip-{at}.rwd"), &b, "");
    }
    let mut b = good.clone();
    b[good.len() / 2] ^= 1;
    refused(&home, "flip.rwd", &b, "damaged");
    let mut longer = good.clone();
    longer.extend_from_slice(b"more");
    refused(&home, "longer.rwd", &longer, "damaged");
    refused(&home, "empty.rwd", b"", "not a rewind export");
    refused(
        &home,
        "text.rwd",
        b"hello, this is not an export at all\n",
        "not a rewind export",
    );

    // Well-formed files with checksums right, whose paths would leave the store.
    let info = format!(
        "{{\"format\":1,\"run\":\"{}\",\"replayable\":true,\"image\":\"root\",\"rewind\":\"x\"}}",
        run.id
    );
    let info = info.as_bytes();
    let escape = home.path().parent().unwrap().join("rewind-escaped");
    let _ = std::fs::remove_file(&escape);
    let file_mode = 0o100644;
    for (name, path) in [
        ("dotdot", "run/../../../rewind-escaped".to_string()),
        (
            "dotdot-root",
            "image/root/../../../../rewind-escaped".to_string(),
        ),
        ("absolute", escape.display().to_string()),
        (
            "absolute-root",
            format!("image/root/{}", escape.display()).replace("//", "/"),
        ),
        ("dot", "image/root/./x".to_string()),
    ] {
        let bytes = craft(&[
            (1, file_mode, "rwd.json", info),
            (1, file_mode, &path, b"escaped"),
        ]);
        refused(&home, &format!("{name}.rwd"), &bytes, "refused");
        assert!(!escape.exists(), "{name}: wrote {}", escape.display());
    }
    // A link, then a file through it.
    let bytes = craft(&[
        (1, file_mode, "rwd.json", info),
        (
            3,
            0o120777,
            "image/root/up",
            escape.parent().unwrap().to_str().unwrap().as_bytes(),
        ),
        (1, file_mode, "image/root/up/rewind-escaped", b"escaped"),
    ]);
    refused(&home, "link.rwd", &bytes, "inside a link");
    assert!(!escape.exists());
    // A link where only files belong.
    let bytes = craft(&[
        (1, file_mode, "rwd.json", info),
        (3, 0o120777, "run/events", b"/etc/passwd"),
    ]);
    refused(&home, "run-link.rwd", &bytes, "refused");
    // A run whose id is not its manifest's hash.
    let manifest =
        std::fs::read(src.path().join("runs").join(&run.id).join("manifest.json")).unwrap();
    let meta = std::fs::read(src.path().join("runs").join(&run.id).join("meta.json")).unwrap();
    let plain_info = info_plain("0123456789abcdef");
    let bytes = craft(&[
        (1, file_mode, "rwd.json", plain_info.as_bytes()),
        (1, file_mode, "run/manifest.json", &manifest),
        (1, file_mode, "run/meta.json", &meta),
        (1, file_mode, "run/events", b""),
    ]);
    refused(&home, "wrong-id.rwd", &bytes, "hash");

    // Everything in order but the image, which is not the one the run used:
    // found only once it is written (to a temporary place), and then undone.
    let run_dir = src.path().join("runs").join(&run.id);
    let events = std::fs::read(run_dir.join("events")).unwrap();
    let replayable_info = format!(
        "{{\"format\":1,\"run\":\"{}\",\"replayable\":true,\"image\":\"program\",\"rewind\":\"x\"}}",
        run.id
    );
    let bytes = craft(&[
        (1, file_mode, "rwd.json", replayable_info.as_bytes()),
        (1, file_mode, "run/manifest.json", &manifest),
        (1, file_mode, "run/meta.json", &meta),
        (1, file_mode, "run/events", &events),
        (1, 0o100755, "image/program", b"\x7fELF but not the program"),
    ]);
    refused(&home, "wrong-image.rwd", &bytes, "image");

    // The store still works, and the good file still imports.
    home.replay_identical(&mine.id);
    home.ok(&["import", file.to_str().unwrap()]);
    home.replay_identical(&run.id);
}

/// An import verifies the file as it writes it (into a temporary place
/// inside the store): a file damaged in its last entry, once its run, image
/// and pages were written there, leaves the store as it was; a link
/// that comes after a file inside it is refused and never made; a damaged
/// copy of a run the store holds is refused (such a file is only verified);
/// and a damaged file imported into a home that does not exist leaves none.
#[test]
fn an_import_that_writes_as_it_verifies_leaves_nothing_of_a_refused_file() {
    let src = Home::new();
    let run = src.run(&["-q", "--points", "memory", "--example", "bank"]);
    src.replay_identical(&run.id);
    let file = src.path().join("x.rwd");
    let file_s = file.to_str().unwrap();
    src.ok(&["export", &run.id, "--replayable", "-o", file_s]);
    let good = std::fs::read(&file).unwrap();
    // The last byte of the last entry's data (a page when the run took
    // keyframes, else a file of its image), before the end record.
    let mut last_page = good.clone();
    last_page[good.len() - 42] ^= 0x10;

    let home = Home::new();
    let mine = home.run_guest("hello", &[]);
    home.replay_identical(&mine.id);
    refused(&home, "last-page.rwd", &last_page, "damaged");

    let escape = home.path().parent().unwrap().join("rewind-escaped-late");
    let _ = std::fs::remove_file(&escape);
    let info = format!(
        "{{\"format\":1,\"run\":\"{}\",\"replayable\":true,\"image\":\"root\",\"rewind\":\"x\"}}",
        run.id
    );
    let bytes = craft(&[
        (1, 0o100644, "rwd.json", info.as_bytes()),
        (1, 0o100644, "image/root/up/rewind-escaped-late", b"escaped"),
        (
            3,
            0o120777,
            "image/root/up",
            escape.parent().unwrap().to_str().unwrap().as_bytes(),
        ),
    ]);
    refused(&home, "link-after.rwd", &bytes, "inside a link");
    assert!(!escape.exists());

    home.ok(&["import", file_s]);
    refused(&home, "again-damaged.rwd", &last_page, "damaged");
    let again = home.ok(&["import", file_s]);
    assert!(again.stdout.contains("already"), "{again}");
    home.replay_identical(&run.id);

    let nowhere = tempfile::tempdir().unwrap();
    let fresh = nowhere.path().join("home");
    let damaged = nowhere.path().join("damaged.rwd");
    std::fs::write(&damaged, &last_page).unwrap();
    let mut cmd = Command::new(rewind_bin());
    cmd.args(["import", damaged.to_str().unwrap()])
        .env("REWIND_HOME", &fresh);
    let out = run_command(cmd, DEADLINE);
    assert_eq!(out.code, 2, "{out}");
    assert!(!fresh.exists(), "a refused file made the home:\n{out}");
}

fn info_plain(id: &str) -> String {
    format!(
        "{{\"format\":1,\"run\":\"{id}\",\"replayable\":false,\"image\":null,\"rewind\":\"x\"}}"
    )
}

#[test]
fn remove_takes_forks_along_and_gc_returns_the_store_to_its_size() {
    let home = Home::new();
    let first = home.run_guest("hello", &[]);
    home.replay_identical(&first.id);
    let before = tree(home.path());

    // Long enough for keyframes, whose pages go to the shared page store.
    let long = home.run_guest("getpid", &["30000"]);
    assert_eq!(long.status, "exited:0", "{}", long.out);
    home.replay_identical(&long.id);
    let forked = fork(&home, &[&long.id, "100", "--schedule", "4"]);
    home.replay_identical(&forked);
    let grandchild = fork(&home, &[&forked, "200", "--seed", "2"]);
    home.replay_identical(&grandchild);
    // Pages, whether in files of their own or in packs.
    let pages = |h: &Home| {
        vmm::store::pages::PageStore::at(h.path().join("pages"))
            .list()
            .unwrap()
            .len()
    };
    let had_pages = pages(&home);
    assert!(
        had_pages > 0,
        "the 30,000-step run and its forks kept no pages: gc has nothing to prove"
    );

    let ls = home.ok(&["ls", "--json"]).stdout;
    assert_eq!(ls.lines().count(), 4, "{ls}");
    let forks = home.ok(&["ls", "--forks-of", &long.id]).stdout;
    assert_eq!(forks.lines().count(), 2, "{forks}");

    // A wrong RUN among them removes nothing.
    let out = home.rewind(&["remove", &long.id, "no-such-run"]);
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(home.ok(&["ls"]).stdout.lines().count(), 4);

    let dry = home.ok(&["remove", "--dry-run", &long.id]).stdout;
    assert_eq!(dry.lines().count(), 3, "{dry}");
    assert_eq!(home.ok(&["ls"]).stdout.lines().count(), 4);

    let out = home.ok(&["remove", &long.id]);
    for id in [&long.id, &forked, &grandchild] {
        assert!(out.stdout.contains(id.as_str()), "{out}");
    }
    let ls = home.ok(&["ls"]).stdout;
    assert_eq!(ls.lines().count(), 1, "{ls}");
    assert!(ls.contains(&first.id));

    let gc = home.ok(&["gc", "--json"]);
    let v: Value = serde_json::from_str(&gc.stdout).unwrap();
    assert_eq!(
        v["pages_removed"].as_u64().unwrap() as usize,
        had_pages,
        "{v}"
    );
    assert!(v["freed_bytes"].as_u64().unwrap() > 0, "{v}");
    let after = tree(home.path());
    assert_eq!(after, before, "the store is as it was before the run");
    assert_eq!(bytes(&after), bytes(&before));
    home.replay_identical(&first.id);
    // Nothing left to collect.
    let again: Value = serde_json::from_str(&home.ok(&["gc", "--json"]).stdout).unwrap();
    assert_eq!(again["freed_bytes"], 0, "{again}");
    let text = home.ok(&["gc"]).stdout;
    assert!(text.starts_with("freed "), "{text}");
}

#[test]
fn an_imported_run_keeps_its_keyframes_pages_in_one_pack() {
    let home = Home::new();
    let long = home.run_guest("getpid", &["30000"]);
    home.replay_identical(&long.id);
    let file = home.path().join("long.rwd");
    let file_s = file.to_str().unwrap();
    home.ok(&["export", &long.id, "--replayable", "-o", file_s]);

    let other = Home::new();
    other.ok(&["import", file_s]);
    // The keyframes' pages arrive together: one pack, not a file a page.
    let packs: Vec<_> = std::fs::read_dir(other.path().join("pages/packs"))
        .expect("the import wrote a pack")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .collect();
    assert_eq!(packs.len(), 1, "{packs:?}");
    let loose = tree(&other.path().join("pages"))
        .keys()
        .filter(|k| !k.starts_with("packs"))
        .count();
    assert_eq!(loose, 0, "pages outside the pack");
    other.replay_identical(&long.id);
    // A fork from a late keyframe reads its pages from the pack.
    let f = fork(&other, &[&long.id, "29000", "--schedule", "1"]);
    other.replay_identical(&f);
    assert_eq!(other.events(&long.id), home.events(&long.id));
}

#[test]
fn gc_keeps_the_pages_of_runs_it_keeps() {
    let home = Home::new();
    let a = home.run_guest("getpid", &["30000"]);
    home.replay_identical(&a.id);
    let b = home.run_guest("getpid", &["25000"]);
    home.replay_identical(&b.id);
    home.ok(&["remove", &b.id]);
    home.ok(&["gc"]);
    home.replay_identical(&a.id);
    // A fork from the kept run's keyframes still works.
    let f = fork(&home, &[&a.id, "29000", "--schedule", "1"]);
    home.replay_identical(&f);
}

#[test]
fn prune_identical_removes_forks_that_ran_as_an_older_run() {
    let home = Home::new();
    let hello = home.run_guest("hello", &[]);
    home.replay_identical(&hello.id);
    // A fork of a single-threaded program at its last step cannot differ.
    let steps = hello.steps.unwrap();
    let same = fork(&home, &[&hello.id, &steps.to_string(), "--schedule", "5"]);
    home.replay_identical(&same);
    let bank = home.run(&["-q", "--example", "bank"]);
    home.replay_identical(&bank.id);
    let v = home.show_json(&bank.id);
    let bank_steps = v["steps"].as_u64().unwrap();
    // Forks of bank under many schedules: some differ, maybe some not.
    let mut forks = Vec::new();
    for s in 1..=6 {
        let f = fork(&home, &[&bank.id, "20", "--schedule", &s.to_string()]);
        home.replay_identical(&f);
        forks.push(f);
    }
    assert!(bank_steps > 20);
    let dry = home.ok(&["prune", "--identical", "--dry-run"]).stdout;
    assert!(dry.contains(&same), "{dry}");
    let out = home.ok(&["prune", "--identical"]);
    assert!(out.stdout.contains(&same), "{out}");
    let left = ls_field(&home, &[], "id");
    assert!(!left.contains(&same));
    assert!(left.contains(&hello.id) && left.contains(&bank.id));
    // What is left is pairwise different among forks and their elders.
    for f in &forks {
        if left.contains(f) {
            let d = home.rewind(&["diff", &bank.id, f]);
            assert_eq!(
                d.code, 1,
                "kept fork {f} does not differ from its parent:\n{d}"
            );
        }
    }
    let out = home.rewind(&["prune"]);
    assert_eq!(out.code, 2, "{out}");
}

#[test]
fn ls_filters() {
    let home = Home::new();
    let ok = home.run(&["--name", "good", "-q", "--example", "bank"]);
    let segv = home.run_guest("segv", &[]);
    let three = home.run_guest("threads", &[]);
    assert_eq!(three.status, "exited:3", "{}", three.out);
    let stuck = home.run_guest("deadlock", &[]);
    assert_eq!(stuck.status, "deadlocked", "{}", stuck.out);
    for r in [&ok, &segv, &three, &stuck] {
        home.replay_identical(&r.id);
    }
    let f = fork(&home, &[&ok.id, "10", "--schedule", "1"]);
    home.replay_identical(&f);
    let ff = fork(&home, &[&f, "15", "--schedule", "2"]);
    home.replay_identical(&ff);
    let ids = |args: &[&str]| ls_field(&home, args, "id");
    let statuses = |args: &[&str]| ls_field(&home, args, "status");
    assert_eq!(ids(&[]).len(), 6);
    assert!(statuses(&["--status", "passed"])
        .iter()
        .all(|s| s == "exited:0"));
    assert!(ids(&["--status", "passed"]).contains(&ok.id));
    let failed = ids(&["--status", "failed"]);
    assert!(failed.contains(&segv.id), "{failed:?}");
    assert!(!failed.contains(&ok.id));
    assert_eq!(ids(&["--status", "killed"]), vec![segv.id.clone()]);
    assert_eq!(ids(&["--status", "killed:SIGSEGV"]), vec![segv.id.clone()]);
    let exited3 = ids(&["--status", "exited:3"]);
    assert!(
        exited3.contains(&three.id) && !exited3.contains(&ok.id),
        "{exited3:?}"
    );
    assert!(statuses(&["--status", "exited:3"])
        .iter()
        .all(|s| s == "exited:3"));
    assert_eq!(ids(&["--status", "deadlocked"]), vec![stuck.id.clone()]);
    assert!(ids(&["--status", "timed-out"]).is_empty());
    let forks = ids(&["--forks-of", &ok.id]);
    assert_eq!(forks.len(), 2, "{forks:?}");
    assert!(forks.contains(&f) && forks.contains(&ff));
    assert_eq!(ids(&["--forks-of", &f]), vec![ff.clone()]);
    let named = ids(&["--name", "good"]);
    assert!(named.contains(&ok.id) && !named.contains(&segv.id));
    assert_eq!(ids(&["--since", "1h"]).len(), 6);
    assert_eq!(ids(&["--since", "2000-01-01"]).len(), 6);
    assert!(ids(&["--since", "2999-01-01"]).is_empty());
    assert_eq!(ids(&["--since", "1h", "-n", "2"]).len(), 2);
    // The plain listing filters the same way.
    let text = home.ok(&["ls", "--status", "killed"]).stdout;
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains(&segv.id));
    for bad in [
        &["--status", "bogus"][..],
        &["--since", "yesterday"][..],
        &["--status", "exited:x"][..],
    ] {
        let mut full = vec!["ls"];
        full.extend_from_slice(bad);
        let out = home.rewind(&full);
        assert_eq!(out.code, 2, "{out}");
        assert_eq!(out.stderr_lines().len(), 1, "{out}");
    }
}

#[test]
fn bookmarks_are_checked_and_kept_with_the_run() {
    let home = Home::new();
    let run = home.run_guest("hello", &[]);
    home.replay_identical(&run.id);
    let out = home.rewind(&["bookmark", &run.id, "999999", "past the end"]);
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(home.ok(&["bookmarks", &run.id]).stdout, "");
    // Several at once: none lost.
    let handles: Vec<_> = (0..6)
        .map(|i| {
            let bin = rewind_bin();
            let dir = home.path().to_path_buf();
            let id = run.id.clone();
            std::thread::spawn(move || {
                let mut c = Command::new(bin);
                c.args(["bookmark", &id, &i.to_string(), &format!("note {i}")])
                    .env("REWIND_HOME", dir);
                run_command(c, DEADLINE)
            })
        })
        .collect();
    for h in handles {
        let out = h.join().unwrap();
        assert_eq!(out.code, 0, "{out}");
    }
    let list = home.ok(&["bookmarks", &run.id]).stdout;
    assert_eq!(list.lines().count(), 6, "{list}");
    assert!(list.lines().next().unwrap().contains("note 0"), "{list}");
    // Bookmarks do not change the run.
    home.replay_identical(&run.id);
    assert_eq!(home.ok(&["show", &run.id, "--json"]).code, 0);
}

#[test]
fn concurrent_runs_and_gc_leave_a_consistent_store() {
    let home = Home::new();
    let old = home.run_guest("getpid", &["22000"]);
    home.replay_identical(&old.id);
    let bin = rewind_bin();
    let dir: PathBuf = home.path().to_path_buf();
    let spawn = |args: Vec<String>| {
        let bin = bin.clone();
        let dir = dir.clone();
        std::thread::spawn(move || {
            let mut c = Command::new(bin);
            c.args(&args).env("REWIND_HOME", dir);
            run_command(c, DEADLINE)
        })
    };
    let getpid = guest_arg("getpid");
    let mut jobs = Vec::new();
    for round in 0..3 {
        jobs.push(spawn(vec![
            "run".into(),
            "-q".into(),
            "--".into(),
            getpid.clone(),
            format!("{}", 24000 + round),
        ]));
        jobs.push(spawn(vec![
            "run".into(),
            "-q".into(),
            "--seed".into(),
            format!("{round}"),
            "--".into(),
            getpid.clone(),
            "26000".into(),
        ]));
        jobs.push(spawn(vec!["gc".into()]));
        jobs.push(spawn(vec!["remove".into(), old.id.clone()]));
    }
    let outs: Vec<Output> = jobs.into_iter().map(|j| j.join().unwrap()).collect();
    let mut made = Vec::new();
    for (i, out) in outs.iter().enumerate() {
        match i % 4 {
            0 | 1 => {
                assert_eq!(out.code, 0, "{out}");
                made.push(last_run_id(&out.stderr).expect("a run"));
            }
            2 => assert_eq!(out.code, 0, "gc: {out}"),
            _ => {} // the first remove wins; the others find nothing
        }
    }
    // Every listed run loads and replays; nothing half-written is in view.
    let listed: Vec<Value> = home
        .ok(&["ls", "--json"])
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for id in &made {
        assert!(
            listed.iter().any(|v| v["id"] == id.as_str()),
            "{id} is not listed"
        );
    }
    assert!(!listed.iter().any(|v| v["id"] == old.id.as_str()));
    for v in &listed {
        let id = v["id"].as_str().unwrap();
        home.ok(&["show", id]);
        home.ok(&["events", id]);
        home.replay_identical(id);
        // Their keyframes' pages are all there and whole: an export that
        // carries them (each read back and checked against its hash) warns
        // of none missing.
        let file = home.path().join(format!("{id}.rwd"));
        let out = home.ok(&["export", id, "--replayable", "-o", file.to_str().unwrap()]);
        assert!(!out.stderr.contains("warning"), "{out}");
    }
    let dots: Vec<String> = std::fs::read_dir(home.path().join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(dots.is_empty(), "leftovers: {dots:?}");
    let gc: Value = serde_json::from_str(&home.ok(&["gc", "--json"]).stdout).unwrap();
    assert_eq!(gc["leftovers_removed"], 0, "{gc}");
}

#[test]
fn a_damaged_run_is_reported_by_ls_and_the_others_still_listed() {
    let home = Home::new();
    let a = home.run(&["-q", "--example", "bank"]);
    let b = home.run(&["-q", "--example", "bank-fixed"]);
    home.replay_identical(&a.id);
    home.replay_identical(&b.id);
    let meta = home.path().join("runs").join(&a.id).join("meta.json");
    std::fs::write(&meta, b"{ not json").unwrap();
    let out = home.ok(&["ls"]);
    assert!(out.stdout.contains(&b.id), "{out}");
    assert!(!out.stdout.contains(&a.id), "{out}");
    assert!(
        out.stderr
            .contains(&format!("rewind: warning: runs/{} is damaged", a.id)),
        "{out}"
    );
    // Asking for it by name is a one-line error, not a crash.
    let shown = home.rewind(&["events", &a.id]);
    assert_eq!(shown.code, 2, "{shown}");
    assert_eq!(shown.stderr.lines().count(), 1, "{shown}");
}
