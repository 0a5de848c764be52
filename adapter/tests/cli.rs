//! The `rewind` command's paths that need no machine: listing, events, log
//! and RUN resolution on a store written through the store's API, and the
//! checks `rewind run` makes before it starts the machine.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use vmm::image::Image;
use vmm::run::Outcome;
use vmm::run::{Event, EventKind, ExitStatus, Manifest, Recorder};
use vmm::store::{RunDetails, Store};

struct Home(PathBuf);

impl Home {
    fn new(tag: &str) -> Home {
        let p = std::env::temp_dir().join(format!("rewind-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Home(p)
    }

    fn store(&self) -> Store {
        Store::at(self.0.join("home"))
    }

    fn rewind(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_rewind"))
            .args(args)
            .env_clear()
            .env("REWIND_HOME", self.0.join("home"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Records a fake run of `steps` getpid events through the store.
fn fake_run(home: &Home, name: &str, seed: u64, steps: u64, status: ExitStatus) -> String {
    let prog = home.0.join("prog");
    std::fs::write(&prog, b"\x7fELF fake").unwrap();
    let image = Image::Program {
        guest_path: "/prog".into(),
        host_path: prog,
        deps: Vec::new(),
    };
    let manifest = Manifest {
        engine: "test".into(),
        env: vec![],
        epoch: 0,
        seed,
        mem: 1 << 30,
        ..Manifest::new("/prog".into(), vec!["/prog".into()], image.hash().unwrap())
    };
    let store = home.store();
    let mut rec = store.begin(&manifest, b"").unwrap();
    for step in 0..steps {
        rec.event(&Event {
            step,
            pid: 1,
            tid: 1,
            kind: EventKind::Syscall {
                nr: 39,
                name: "getpid".into(),
                text: "getpid() = 1".into(),
                ret: 1,
            },
        });
    }
    rec.event(&Event {
        step: steps,
        pid: 1,
        tid: 1,
        kind: EventKind::ThreadExit { code: 0 },
    });
    rec.output(1, b"to stdout\n");
    rec.output(2, b"to stderr\n");
    let outcome = Outcome {
        status,
        steps: steps + 1,
        virtual_ns: (steps + 1) * 5000,
        wall: Duration::from_millis(1),
        stuck: vec![],
        perturbed: vec![],
        where_at: vec![],
        symbols_at: None,
        places_at: vec![],
        thread_names: Default::default(),
        writers: Default::default(),
        kept: Default::default(),
        race_pages: Vec::new(),
    };
    let details = RunDetails {
        name: name.into(),
        image,
        timeout: None,
    };
    let run = rec.finish(&outcome, &details).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    run.id
}

#[test]
fn ls_events_log() {
    let home = Home::new("ls");
    let out = home.rewind(&["ls"]);
    assert!(out.status.success());
    assert!(out.stdout.is_empty());

    let a = fake_run(&home, "first", 1, 10, ExitStatus::Exited(0));
    let b = fake_run(&home, "second", 2, 1000, ExitStatus::Killed(11));

    let out = home.rewind(&["ls"]);
    let ls = text(&out.stdout);
    let lines: Vec<&str> = ls.lines().collect();
    assert_eq!(lines.len(), 2, "{ls}");
    assert!(lines[0].starts_with(&b), "{ls}");
    assert!(
        lines[0].contains("1001 steps") && lines[0].ends_with("second"),
        "{ls}"
    );
    assert!(
        lines[1].starts_with(&a) && lines[1].contains("exited:0"),
        "{ls}"
    );

    let out = home.rewind(&["ls", "-n", "1", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["id"], b.as_str());
    assert_eq!(v["steps"], 1001);

    let out = home.rewind(&["events", "@2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ev = text(&out.stdout);
    assert_eq!(ev.lines().count(), 11);
    assert!(ev.lines().next().unwrap().contains("getpid() = 1"));
    assert!(ev.lines().last().unwrap().contains("thread exit = 0"));

    let out = home.rewind(&["events", "second", "--from", "990", "--to", "995", "--json"]);
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[0]["step"], 990);

    let out = home.rewind(&["log", &b[..8]]);
    assert_eq!(text(&out.stdout), "to stdout\nto stderr\n");
    let out = home.rewind(&["log", "@", "--fd", "2"]);
    assert_eq!(text(&out.stdout), "to stderr\n");

    let out = home.rewind(&["events", "nosuchrun"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.starts_with("rewind: error: ") && err.lines().count() == 1,
        "{err}"
    );
    let out = home.rewind(&["log", "@3"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn corrupt_events_are_an_error() {
    let home = Home::new("corrupt");
    let id = fake_run(&home, "x", 1, 500, ExitStatus::Exited(0));
    let events = home.0.join("home/runs").join(&id).join("events");
    let mut bytes = std::fs::read(&events).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&events, &bytes).unwrap();
    let out = home.rewind(&["events", &id]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("corrupt"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(&events, &bytes[..mid]).unwrap();
    let out = home.rewind(&["events", &id]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("truncated"),
        "{}",
        text(&out.stderr)
    );
}

fn runs_dir_is_empty(home: &Home) -> bool {
    match std::fs::read_dir(home.0.join("home/runs")) {
        Ok(d) => d.count() == 0,
        Err(_) => true,
    }
}

fn assert_one_line_error(out: &Output, code: i32, needle: &str) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("rewind: error: "), "{err}");
    assert!(err.contains(needle), "{err}");
}

#[test]
fn bad_input_to_run() {
    let home = Home::new("bad");
    let missing = home.0.join("missing");
    let out = home.rewind(&["run", "--", missing.to_str().unwrap()]);
    assert_one_line_error(&out, 2, "No such file");

    let not_elf = home.0.join("script.sh");
    std::fs::write(&not_elf, b"#!/bin/sh\necho hi\n").unwrap();
    let out = home.rewind(&["run", "--", not_elf.to_str().unwrap()]);
    assert_one_line_error(&out, 2, "not an ELF");

    let out = home.rewind(&["run", "--root", missing.to_str().unwrap(), "--", "/bin/x"]);
    assert_one_line_error(&out, 2, "--root");

    let out = home.rewind(&["run", "--env", "NOEQUALS", "--", "/bin/true"]);
    assert_one_line_error(&out, 2, "K=V");

    let out = home.rewind(&["run", "--mem", "12Q", "--", "/bin/true"]);
    assert_one_line_error(&out, 2, "--mem");

    let out = home.rewind(&["run"]);
    assert_one_line_error(&out, 2, "PROG");

    let out = home.rewind(&["run", "--example", "no-such-example"]);
    assert_one_line_error(&out, 2, "no such example");
    assert!(runs_dir_is_empty(&home));

    // An unwritable REWIND_HOME (a path under a regular file: even root
    // cannot create it).
    let file = home.0.join("a-file");
    std::fs::write(&file, b"").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rewind"))
        .args(["run", "--", not_elf.to_str().unwrap()])
        .env_clear()
        .env("REWIND_HOME", file.join("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_one_line_error(&out, 2, "REWIND_HOME");
}

#[test]
fn help_and_version() {
    let home = Home::new("help");
    let out = home.rewind(&["--help"]);
    assert!(out.status.success());
    for cmd in ["run", "ls", "events", "log", "replay", "doctor"] {
        assert!(text(&out.stdout).contains(cmd), "{cmd}");
    }
    let out = home.rewind(&["run", "--help"]);
    assert!(text(&out.stdout).contains("PATH=/usr/local/bin:/usr/bin:/bin"));
    assert!(home.rewind(&["--version"]).status.success());
}
