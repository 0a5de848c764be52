//! A check split into shards (`rewind check --shard I/N --results DIR`) and
//! merged (`rewind check --merge DIR...`) gives the one-machine check's
//! report, byte for byte; a killed, missing or foreign shard is said
//! plainly and nothing is merged wrongly.

use rewind_tests::{failing_run_in, without_wall_time as masked, Home, Output};
use std::path::Path;

fn masked_json(text: &str) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("no JSON report ({e}):\n{text}"));
    if v["narrowed"].is_object() {
        v["narrowed"]["wall_secs"] = 0.into();
    }
    // The learning run's wall time is each check's own (a merge's the shards').
    if v["learned"].is_object() {
        v["learned"]["wall_s"] = 0.into();
    }
    v
}

/// Runs shards 1..=n (those `only` keeps) of `rewind check ARGS` into `dir`.
fn shards(home: &Home, args: &[&str], n: u32, dir: &Path, only: impl Fn(u32) -> bool) {
    for i in (1..=n).filter(|i| only(*i)) {
        let shard = format!("{i}/{n}");
        let mut full = vec!["check"];
        full.extend_from_slice(args);
        full.extend(["--shard", &shard, "--results", dir.to_str().unwrap()]);
        let out = home.rewind(&full);
        assert!(out.code <= 1, "shard {shard} failed:\n{out}");
        assert!(
            out.stdout.contains(&format!("shard {shard}: ")),
            "shard {shard} says what it ran:\n{out}"
        );
    }
}

fn merge(home: &Home, dirs: &[&Path], json: bool) -> Output {
    let mut args = vec!["check", "--merge"];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap()));
    if json {
        args.push("--json");
    }
    home.rewind(&args)
}

/// `rewind check ARGS`, which finds a violation, split into each count of
/// `splits` shards (in one home), each split merged in a home of its own:
/// the same report and the same JSON as the one-machine check (ARGS and
/// `one_also`), and the failing run it names replays identically there. The
/// one-machine JSON.
fn merges_into_the_one_machine_check(
    args: &[&str],
    one_also: &[&str],
    splits: &[u32],
) -> serde_json::Value {
    let one = Home::new();
    let whole = [&["check"][..], args, one_also].concat();
    let text = one.rewind(&whole);
    assert_eq!(text.code, 1, "the check finds a race, {args:?}:\n{text}");
    let json = one.rewind(&[&whole[..], &["--json"]].concat());
    let want = masked_json(&json.stdout);
    let shard_home = Home::new();
    for &n in splits {
        let dir = tempfile::tempdir().unwrap();
        shards(&shard_home, args, n, dir.path(), |_| true);
        let merged = Home::new();
        let out = merge(&merged, &[dir.path()], false);
        assert_eq!(out.code, text.code, "merge of {n} shards:\n{out}");
        assert_eq!(
            masked(&out.stdout),
            masked(&text.stdout),
            "{args:?} in {n} shards merges into the one-machine report"
        );
        let out = merge(&merged, &[dir.path()], true);
        assert_eq!(
            masked_json(&out.stdout),
            want,
            "{args:?} in {n} shards merges into the one-machine --json"
        );
        merged.replay_identical(&failing_run_in(&text));
    }
    want
}

/// `rewind check --example NAME` split into 1, 2, 3 and 7 shards, each
/// split merged in a home of its own: the same report and the same JSON
/// as the one-machine check of the default portfolio with the shards'
/// count of schedules (64 when not said), passing runs removed and their
/// remake commands included; the failing run it names replays identically
/// there.
fn splits_merge_into_the_one_machine_check(example: &str) {
    let args = ["--example", example];
    let want = merges_into_the_one_machine_check(&args, &["--schedules", "64"], &[1, 2, 3, 7]);
    let tried = want["tried"].as_array().expect("schedules tried");
    assert!(
        tried.iter().all(|t| t["entry"].is_object()),
        "the one-machine check is the portfolio's:\n{want:#}"
    );
    // Every schedule before the first violation passed: its run is removed.
    let passed = &tried[..tried.len() - 1];
    assert!(
        passed
            .iter()
            .all(|t| t["kept"] == false && t["remake"].is_string()),
        "the check removes passing runs and says how to remake them:\n{want:#}"
    );
}

#[test]
fn bank_in_shards() {
    splits_merge_into_the_one_machine_check("bank");
}

#[test]
fn pool_in_shards() {
    splits_merge_into_the_one_machine_check("pool");
}

#[test]
fn flag_in_shards() {
    splits_merge_into_the_one_machine_check("flag");
}

/// A check windowed by `--schedule-from F` (handoff with memory points, F
/// four fifths into schedule 0, where the consumers still count pages):
/// every shard records schedule 0 itself, so its seeded (random) and PCT
/// schedules start from that run's latest keyframe before F, as the check
/// on one machine does (`Checker::window_start`); such a run is the run
/// made from step 0, so split into 2 and 3 shards the check merges into
/// the one-machine report and --json byte for byte.
#[test]
fn a_windowed_check_in_shards() {
    let home = Home::new();
    let base = home.run(&["-q", "--points", "memory", "--example", "handoff"]);
    assert_eq!(base.status, "exited:0", "{}", base.out);
    let from = (base.steps.expect("schedule 0's steps") * 4 / 5).to_string();
    // The random strategy only: whether PCT's 32 schedules from F find the
    // race turned with where schedule 0's keyframes fall, which a
    // keyframe's cost moves (a window starts at the latest one before F).
    let args = [
        "--example",
        "handoff",
        "--points",
        "memory",
        "--strategy",
        "random",
        "--schedule-from",
        &from,
        "--schedules",
        "32",
    ];
    let want = merges_into_the_one_machine_check(&args, &[], &[2, 3]);
    let tried = want["tried"].as_array().expect("schedules tried");
    assert!(tried.len() > 2, "the race is not schedule 1's: {want:#}");
}

/// Records of schedules named `schedule-N.json` in `dir`, schedule 0's aside.
fn records(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.starts_with("schedule-")
                        && n.ends_with(".json")
                        && n != "schedule-000000.json"
                })
                .count()
        })
        .unwrap_or(0)
}

/// A shard SIGKILLed mid-run leaves whole records; the merge says it is
/// incomplete and merges nothing; run again, the merge is the check's.
#[test]
fn a_killed_shard_run_again() {
    let check = [
        "--example",
        "bank",
        "--strategy",
        "random",
        "--schedules",
        "12",
        "--all",
        "--no-narrow",
    ];
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(rewind_tests::rewind_bin());
    cmd.arg("check")
        .args(check)
        .args(["--shard", "1/2", "--results"])
        .arg(dir.path())
        .env("REWIND_HOME", home.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().expect("rewind starts");
    let started = std::time::Instant::now();
    while records(dir.path()) < 2 && started.elapsed() < std::time::Duration::from_secs(300) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let before = records(dir.path());
    assert!(
        (2..6).contains(&before),
        "killed after 2 of its 6 records: {before}"
    );
    shards(&home, &check, 2, dir.path(), |i| i == 2);
    let merged = Home::new();
    let out = merge(&merged, &[dir.path()], false);
    assert_eq!(out.code, 2, "an incomplete shard is trouble:\n{out}");
    assert!(
        out.stderr.contains("shard 1/2 is incomplete") && out.stderr.contains("nothing was merged"),
        "the merge says which shard is incomplete:\n{out}"
    );
    shards(&home, &check, 2, dir.path(), |i| i == 1);
    let mut full = vec!["check"];
    full.extend_from_slice(&check);
    let want = home.rewind(&full);
    let out = merge(&merged, &[dir.path()], false);
    assert_eq!(out.code, want.code, "{out}");
    assert_eq!(
        out.stdout, want.stdout,
        "the rerun shard merges into the check"
    );
}

/// A shard never run, and the records of another check: each a clear
/// one-line error, exit 2, nothing merged.
#[test]
fn missing_and_foreign_shards() {
    let home = Home::new();
    let bank = tempfile::tempdir().unwrap();
    let flag = tempfile::tempdir().unwrap();
    let bank_check = [
        "--example",
        "bank",
        "--strategy",
        "random",
        "--schedules",
        "6",
        "--no-narrow",
    ];
    shards(&home, &bank_check, 3, bank.path(), |i| i != 2);
    let out = merge(&home, &[bank.path()], false);
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(out.stderr_lines().len(), 1, "one line:\n{out}");
    assert!(
        out.stderr.contains("shard 2/3 is missing (no records)"),
        "the merge names the missing shard:\n{out}"
    );
    assert!(out.stdout.is_empty(), "nothing merged:\n{out}");
    // A damaged record, and one naming a file outside its directory.
    let damaged = tempfile::tempdir().unwrap();
    let base = std::fs::read_to_string(bank.path().join("schedule-000000.json")).unwrap();
    let outside = base.replace("\"schedule-000000.rwd\"", "\"../schedule-000000.rwd\"");
    std::fs::write(damaged.path().join("schedule-000000.json"), outside).unwrap();
    let out = merge(&home, &[damaged.path()], false);
    assert_eq!(out.code, 2, "{out}");
    assert!(out.stderr.contains("not a file of its directory"), "{out}");
    std::fs::write(
        damaged.path().join("schedule-000000.json"),
        "{\"version\": 1",
    )
    .unwrap();
    let out = merge(&home, &[damaged.path()], false);
    assert_eq!(out.code, 2, "{out}");
    assert!(out.stderr.contains("is not a shard record"), "{out}");
    assert_eq!(out.stderr_lines().len(), 1, "one line:\n{out}");
    let flag_check = [
        "--example",
        "flag",
        "--strategy",
        "random",
        "--schedules",
        "6",
        "--no-narrow",
    ];
    shards(&home, &flag_check, 2, flag.path(), |i| i == 1);
    let out = merge(&home, &[flag.path(), bank.path()], false);
    assert_eq!(out.code, 2, "{out}");
    assert!(
        out.stderr
            .contains("hold the records of two different checks"),
        "{out}"
    );
    let mut full = vec!["check"];
    full.extend_from_slice(&flag_check);
    full.extend(["--shard", "2/2", "--results", bank.path().to_str().unwrap()]);
    let out = home.rewind(&full);
    assert_eq!(out.code, 2, "{out}");
    assert!(
        out.stderr.contains("holds the records of another check"),
        "a shard refuses a directory of another check:\n{out}"
    );
}

/// A record that names a run other than the one its schedule makes is
/// refused (the plan says which run each schedule makes); a sharded check
/// with a time budget is refused (it would stop at another schedule on
/// every machine).
#[test]
fn a_forged_record_and_a_budget() {
    let home = Home::new();
    let dir = tempfile::tempdir().unwrap();
    let check = [
        "--example",
        "bank",
        "--strategy",
        "random",
        "--schedules",
        "3",
        "--all",
        "--no-narrow",
    ];
    shards(&home, &check, 1, dir.path(), |_| true);
    let record = dir.path().join("schedule-000001.json");
    let text = std::fs::read_to_string(&record).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let run = v["run"].as_str().unwrap();
    std::fs::write(&record, text.replace(run, "00000000deadbeef")).unwrap();
    let out = merge(&Home::new(), &[dir.path()], false);
    assert_eq!(out.code, 2, "{out}");
    assert!(
        out.stderr
            .contains("names run 00000000deadbeef, where the check's plan makes run")
            && out.stdout.is_empty(),
        "the forged record is refused, nothing merged:\n{out}"
    );
    let budget = home.rewind(&[
        "check",
        "--example",
        "bank",
        "--budget",
        "10s",
        "--shard",
        "1/2",
        "--results",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(budget.code, 2, "{budget}");
    assert!(budget.stderr.contains("--budget"), "{budget}");
}

/// Each record's run id in `dir`, and whether it violates (schedule 0's
/// record included).
fn record_runs(dir: &Path) -> Vec<(String, bool)> {
    let mut runs: Vec<(String, bool)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("schedule-") && n.ends_with(".json"))
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(&n)).unwrap();
            let r: serde_json::Value = serde_json::from_str(&text).unwrap();
            let bad = r["violations"].as_array().is_some_and(|v| !v.is_empty());
            (r["run"].as_str().unwrap().to_string(), bad)
        })
        .collect();
    runs.sort();
    runs
}

/// A shard keeps in its store what a check keeps: schedule 0 and the
/// violating runs (each also a `.rwd` in its directory); its passing
/// schedules' runs are removed, and it says so. With `--keep all` every
/// run stays.
#[test]
fn a_shard_keeps_what_a_check_keeps() {
    let check = [
        "--example",
        "bank",
        "--strategy",
        "random",
        "--schedules",
        "8",
        "--all",
        "--no-narrow",
    ];
    for keep_all in [false, true] {
        let home = Home::new();
        let dir = tempfile::tempdir().unwrap();
        let mut args = check.to_vec();
        if keep_all {
            args.extend(["--keep", "all"]);
        }
        for i in 1..=2 {
            let shard = format!("{i}/2");
            let mut full = vec!["check"];
            full.extend_from_slice(&args);
            full.extend(["--shard", &shard, "--results", dir.path().to_str().unwrap()]);
            let out = home.rewind(&full);
            assert!(out.code <= 1, "shard {shard}:\n{out}");
            assert_eq!(
                out.stdout
                    .contains("passing runs removed (--keep all keeps them)"),
                !keep_all,
                "shard {shard} says what it removed:\n{out}"
            );
        }
        let records = record_runs(dir.path());
        assert_eq!(records.len(), 9, "schedule 0 and 8 schedules");
        let passing = records.iter().filter(|(_, bad)| !bad).count();
        assert!(
            passing > 1 && passing < 9,
            "bank's schedules both pass and violate: {records:?}"
        );
        let base = serde_json::from_str::<serde_json::Value>(
            &std::fs::read_to_string(dir.path().join("schedule-000000.json")).unwrap(),
        )
        .unwrap()["run"]
            .as_str()
            .unwrap()
            .to_string();
        let mut want: Vec<String> = records
            .iter()
            .filter(|(id, bad)| keep_all || *bad || *id == base)
            .map(|(id, _)| id.clone())
            .collect();
        want.sort();
        want.dedup();
        let mut have = home.finished_run_dirs();
        have.sort();
        assert_eq!(
            have, want,
            "the runs the shards left (--keep all: {keep_all})"
        );
    }
}

/// contrib/nix/shards.nix: each shard a derivation (requiredSystemFeatures
/// kvm) whose builder runs `rewind check --shard I/N --results $out`, two
/// built at once by the host's Nix (offline, single-user, no sandbox: the
/// builder runs this `rewind`); `rewind check --merge` over their outputs
/// is the one-machine check's report and --json, and the failing run it
/// names replays identically.
#[test]
fn shards_as_nix_derivations() {
    let Some(_) = rewind_tests::host_program("/usr/bin/nix-build", "nix-bin") else {
        return;
    };
    let Some(busybox) = rewind_tests::host_program("/bin/busybox", "busybox-static") else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("rewind-nix-shards-")
        .tempdir()
        .unwrap();
    let bin = dir.path().join("busybox/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(busybox, bin.join("busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", bin.join("sh")).unwrap();
    // The rewind under test by a path of this test's own: a new derivation
    // each time (Nix would reuse the outputs of the same inputs).
    let rewind = dir.path().join("rewind");
    std::os::unix::fs::symlink(rewind_tests::rewind_bin(), &rewind).unwrap();
    let recipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/nix/shards.nix");
    let check = ["--example", "bank", "--schedules", "16", "--jobs", "1"];
    let quoted: Vec<String> = check.iter().map(|a| format!("\"{a}\"")).collect();
    let file = dir.path().join("check.nix");
    std::fs::write(
        &file,
        format!(
            "let bb = builtins.path {{ path = ./busybox; name = \"busybox\"; }}; in\n\
             import {} {{ rewind = \"{}\"; shards = 2; shell = \"${{bb}}/bin/sh\"; \
             checkArgs = [ {} ]; }}\n",
            recipe.canonicalize().unwrap().display(),
            rewind.display(),
            quoted.join(" ")
        ),
    )
    .unwrap();
    let config = "experimental-features = nix-command\nsandbox = false\n\
                  build-users-group =\nsubstituters =\nsystem-features = kvm\n";
    let mut build = std::process::Command::new("nix-build");
    build
        .arg(&file)
        .args(["-A", "shards", "--no-out-link", "--max-jobs", "2"])
        .env("NIX_CONFIG", config);
    let built = rewind_tests::run_command(build, std::time::Duration::from_secs(600));
    assert_eq!(built.code, 0, "nix-build of the shards:\n{built}");
    let outs: Vec<&Path> = built.stdout.lines().map(Path::new).collect();
    assert_eq!(outs.len(), 2, "two shard outputs:\n{built}");
    for (i, out) in outs.iter().enumerate() {
        assert!(
            out.join(format!("shard-{}-of-2.json", i + 1)).exists(),
            "{} holds shard {}'s records",
            out.display(),
            i + 1
        );
    }
    let one = Home::new();
    let whole = [&["check"][..], &check].concat();
    let text = one.rewind(&whole);
    assert_eq!(text.code, 1, "the check finds bank's race:\n{text}");
    let json = one.rewind(&[&whole[..], &["--json"]].concat());
    let merged = Home::new();
    let out = merge(&merged, &outs, false);
    assert_eq!(out.code, 1, "the merge of the Nix shards:\n{out}");
    assert_eq!(masked(&out.stdout), masked(&text.stdout));
    let out = merge(&merged, &outs, true);
    assert_eq!(masked_json(&out.stdout), masked_json(&json.stdout));
    merged.replay_identical(&failing_run_in(&text));
}
