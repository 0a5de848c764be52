//! Exit codes a script can trust (issue 24, item 8): 0 fine, 1 the answer
//! (a violation, a difference, a file that did not exist), 2 trouble (a bad
//! argument, a missing program, an unknown run, a damaged store), in every
//! subcommand. Every recorded run is replayed (`Home` does it when dropped).

use rewind_tests::*;

/// Every subcommand, given trouble: exit 2 and one line of error.
#[test]
fn trouble_exits_2_in_every_subcommand() {
    let h = Home::new();
    let run = h.run_guest("hello", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let dir = tempfile::tempdir().unwrap();
    let rwd = dir.path().join("x.rwd");
    let rwd = rwd.to_str().unwrap();
    let missing = dir.path().join("missing");
    let missing = missing.to_str().unwrap();
    let past = (run.steps.expect("a step count") + 10).to_string();
    let calls: &[&[&str]] = &[
        &["run", "--", missing],
        &["run", "--mem", "lots", "--", missing],
        &["check", "--", missing],
        &["check", "--example", "no-such-example"],
        &["nix", missing],
        &["ls", "--status", "bogus"],
        &["events", "nosuch"],
        &["log", "nosuch"],
        &["replay", "nosuch"],
        &["fork", "nosuch", "1", "--seed", "1"],
        &["cat", "nosuch", "1", "/x"],
        &["cat", &run.id, &past, "/x"],
        &["ps", "nosuch", "--at", "1"],
        &["where", "nosuch", "1"],
        &["threads", "nosuch"],
        &["diff", "nosuch", &run.id],
        &["show", "nosuch"],
        &["remove", "nosuch"],
        &["export", "nosuch", "-o", rwd],
        &["import", missing],
        &["bookmark", "nosuch", "1", "note"],
        &["bookmarks", "nosuch"],
        &["open", "nosuch"],
        &["gdb", "nosuch", "1"],
        &["shell", "nosuch", "1"],
        &["dap", "--port", "not-a-port"],
        &["lsp", "--bogus"],
        &["doctor", "--bogus"],
        &["no-such-subcommand"],
    ];
    for args in calls {
        let out = h.rewind(args);
        assert_eq!(out.code, 2, "`rewind {}`: {out}", args.join(" "));
        assert_eq!(out.stderr_lines().len(), 1, "`{}`: {out}", args.join(" "));
        assert!(out.stderr.starts_with("rewind: error: "), "{out}");
    }
    // A damaged store: REWIND_HOME is a file, for the commands that write.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    for args in [&["gc"][..], &["prune", "--identical"], &["ls"]] {
        let out = h.rewind_env(args, &[("REWIND_HOME", file.to_str().unwrap())]);
        assert_eq!(out.code, 2, "`rewind {}`: {out}", args.join(" "));
    }
}

/// The answers: exit 1 when the answer is "found" or "differs", 0 otherwise.
#[test]
fn answers_exit_1() {
    let h = Home::new();
    let a = h.run_guest("write-twice", &[]);
    assert_eq!(a.status, "exited:0", "{}", a.out);
    let b = h.run_guest("hello", &[]);
    let end = (a.steps.expect("a step count") - 1).to_string();
    assert_eq!(h.rewind(&["cat", &a.id, &end, "/out.txt"]).code, 0);
    let cat = h.rewind(&["cat", &a.id, &end, "/never-written"]);
    assert_eq!(cat.code, 1, "{cat}");
    assert!(cat.stderr.contains("did not exist"), "{cat}");
    assert_eq!(h.rewind(&["diff", &a.id, &a.id]).code, 0);
    let diff = h.rewind(&["diff", &a.id, &b.id]);
    assert_eq!(diff.code, 1, "{diff}");
    assert_eq!(h.rewind(&["replay", &a.id]).code, 0);
    let check = h.rewind(&["check", "--example", "bank"]);
    assert_eq!(check.code, 1, "the race is the answer: {check}");
}
