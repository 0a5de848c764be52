//! Moving runs between stores: `export` (with and without `--replayable`)
//! and `import`, and what an import refuses (damaged, forged and
//! path-traversing files) without changing the store. (The run store's
//! other commands: store.rs.)

use rewind_tests::{last_run_id, rewind_bin, run_command, store_tree as tree, Home, DEADLINE};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

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
