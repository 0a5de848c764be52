use super::*;
use crate::image::Image;
use crate::run::Outcome;
use crate::run::{Event, EventKind, ExitStatus, Recorder};

struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!(
            "rewind-store-test-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Tmp(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn program(tmp: &Tmp) -> Image {
    let host = tmp.0.join("prog");
    std::fs::write(&host, b"\x7fELF not really").unwrap();
    Image::Program {
        guest_path: "/prog".into(),
        host_path: host,
        deps: Vec::new(),
    }
}

fn manifest(image: &Image, seed: u64, stdin: &[u8]) -> Manifest {
    Manifest {
        engine: "test".into(),
        env: vec!["PATH=/bin".into()],
        stdin: crate::run::manifest::stdin_hash(stdin),
        epoch: 0,
        seed,
        mem: 1 << 30,
        ..Manifest::new("/prog".into(), vec!["prog".into()], image.hash().unwrap())
    }
}

fn outcome(steps: u64) -> Outcome {
    Outcome {
        status: ExitStatus::Exited(3),
        steps,
        virtual_ns: steps * 5000,
        wall: Duration::from_millis(12),
        stuck: vec![],
        perturbed: vec![],
        where_at: vec![],
        symbols_at: None,
        places_at: vec![],
        thread_names: Default::default(),
        writers: Default::default(),
        kept: Default::default(),
        race_pages: Vec::new(),
    }
}

fn record(store: &Store, image: &Image, seed: u64, name: &str, stdin: &[u8]) -> Run {
    record_created(store, image, seed, name, stdin).0
}

fn record_created(
    store: &Store,
    image: &Image,
    seed: u64,
    name: &str,
    stdin: &[u8],
) -> (Run, Option<Created>) {
    let m = manifest(image, seed, stdin);
    let mut rec = store.begin(&m, stdin).unwrap();
    assert!(rec.temp_dir().is_dir());
    for step in 0..300u64 {
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
    rec.output(1, b"out\n");
    rec.output(2, b"err\n");
    rec.output(1, b"more\n");
    let details = RunDetails {
        name: name.into(),
        image: image.clone(),
        timeout: None,
    };
    rec.finish_created(&outcome(300), &details).unwrap()
}

#[test]
fn write_list_resolve() {
    let tmp = Tmp::new("wlr");
    let store = Store::at(tmp.0.join("home"));
    let image = program(&tmp);
    let a = record(&store, &image, 1, "alpha", b"");
    std::thread::sleep(Duration::from_millis(2));
    let b = record(&store, &image, 2, "beta", b"some input");
    std::thread::sleep(Duration::from_millis(2));
    let c = record(&store, &image, 3, "alpha", b"");
    assert_eq!(a.id, manifest(&image, 1, b"").id());

    let ids: Vec<String> = store.list().unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![c.id.clone(), b.id.clone(), a.id.clone()]);

    assert_eq!(store.resolve("@").unwrap().id, c.id);
    assert_eq!(store.resolve("@1").unwrap().id, c.id);
    assert_eq!(store.resolve("@3").unwrap().id, a.id);
    assert!(matches!(
        store.resolve("@4"),
        Err(StoreError::TooFewRuns { .. })
    ));
    assert_eq!(store.resolve(&b.id).unwrap().id, b.id);
    assert_eq!(store.resolve(&b.id[..6]).unwrap().id, b.id);
    assert_eq!(store.resolve("alpha").unwrap().id, c.id);
    assert_eq!(store.resolve("beta").unwrap().id, b.id);
    assert!(matches!(
        store.resolve("gamma"),
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(store.resolve(""), Err(StoreError::NotFound(_))));
    // The empty prefix of hex digits matches nothing useful; a one-digit
    // prefix shared by two ids is ambiguous.
    let ids = [&a.id, &b.id, &c.id];
    for d in "0123456789abcdef".chars() {
        let n = ids.iter().filter(|i| i.starts_with(d)).count();
        let r = store.resolve(&d.to_string());
        match n {
            0 => assert!(matches!(r, Err(StoreError::NotFound(_)))),
            1 => assert!(r.is_ok()),
            _ => assert!(matches!(r, Err(StoreError::Ambiguous { .. }))),
        }
    }

    let run = store.resolve(&b.id).unwrap();
    assert_eq!(run.meta.name, "beta");
    assert_eq!(run.meta.status, "exited:3");
    assert_eq!(run.meta.exit_code, 3);
    assert_eq!(run.meta.steps, 300);
    assert_eq!(run.meta.events, 300);
    assert_eq!(run.output().unwrap(), b"out\nerr\nmore\n");
    let chunks = run.output_chunks().unwrap();
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[1].fd, 2);
    assert_eq!(run.stdin().unwrap(), b"some input");
    let mut trace = run.trace().unwrap();
    assert_eq!(trace.len(), 300);
    let tail: Vec<Event> = trace.events_in(290, u64::MAX).map(|e| e.unwrap()).collect();
    assert_eq!(tail.len(), 10);
    let inputs = run.inputs().unwrap();
    assert_eq!(inputs.stdin, b"some input");
    assert_eq!(inputs.manifest, run.manifest);

    // A changed image is refused.
    std::fs::write(tmp.0.join("prog"), b"\x7fELF changed").unwrap();
    assert!(matches!(run.inputs(), Err(StoreError::ImageChanged { .. })));
}

#[test]
fn same_inputs_replace_the_run() {
    let tmp = Tmp::new("replace");
    let store = Store::at(tmp.0.join("home"));
    let image = program(&tmp);
    let a = record(&store, &image, 1, "first", b"");
    let b = record(&store, &image, 1, "second", b"");
    assert_eq!(a.id, b.id);
    let runs = store.list().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].meta.name, "second");
    // Nothing but the run is left in runs/.
    let names: Vec<String> = std::fs::read_dir(store.runs_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec![a.id]);
}

#[test]
fn a_run_recorded_again_is_no_longer_its_first_recordings_to_drop() {
    let tmp = Tmp::new("created");
    let store = Store::at(tmp.0.join("home"));
    let image = program(&tmp);
    let (run, first) = record_created(&store, &image, 1, "first", b"");
    let first = first.expect("the store had no run with its id");
    assert_eq!(first.id, run.id);
    assert!(first.is_in(&run.dir));
    // Another command records the same inputs (two checks at once): the run
    // is replaced, created by neither, and no longer the first one's.
    let (again, second) = record_created(&store, &image, 1, "second", b"");
    assert_eq!(again.id, run.id);
    assert_eq!(second, None);
    assert!(!first.is_in(&again.dir));
    // Unless the first one recorded it again itself.
    let mut mine = first.clone();
    mine.renew(&again.dir);
    assert!(mine.is_in(&again.dir));
    // Another run's creation is its own until it is removed.
    let (other, created) = record_created(&store, &image, 2, "other", b"");
    let created = created.expect("a new id");
    assert!(created.is_in(&other.dir));
    let lock = store.lock_exclusive(&mut || {}).unwrap();
    store.remove_run(&lock, &other).unwrap();
    assert!(!created.is_in(&other.dir));
}

#[test]
fn unfinished_runs_leave_nothing() {
    let tmp = Tmp::new("unfinished");
    let store = Store::at(tmp.0.join("home"));
    let image = program(&tmp);
    let m = manifest(&image, 9, b"input");
    let mut rec = store.begin(&m, b"input").unwrap();
    rec.output(1, b"partial");
    let dir = rec.temp_dir().to_path_buf();
    assert!(dir.exists());
    assert!(store.list().unwrap().is_empty());
    drop(rec);
    assert!(!dir.exists());
    assert_eq!(std::fs::read_dir(store.runs_dir()).unwrap().count(), 0);
}

#[test]
fn stale_temp_dirs_are_cleaned() {
    let tmp = Tmp::new("stale");
    let store = Store::at(tmp.0.join("home"));
    let runs = store.prepare().unwrap();
    // A pid that cannot exist (above pid_max's largest possible value).
    let dead = runs.join(".tmp-0123456789abcdef-2147483000");
    std::fs::create_dir(&dead).unwrap();
    std::fs::write(dead.join("manifest.json"), b"{}").unwrap();
    let mine = runs.join(format!(".tmp-0123456789abcdef-{}", std::process::id()));
    std::fs::create_dir(&mine).unwrap();
    store.clean_stale();
    assert!(!dead.exists());
    assert!(mine.exists());
}

#[test]
fn unwritable_home_is_a_clear_error() {
    let tmp = Tmp::new("unwritable");
    let file = tmp.0.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let store = Store::at(file.join("home"));
    let image = program(&tmp);
    let err = store.begin(&manifest(&image, 1, b""), b"").err().unwrap();
    assert!(matches!(err, StoreError::Unwritable { .. }), "{err}");
    assert!(err.to_string().contains("REWIND_HOME"));
}

#[test]
fn examples_are_content_addressed() {
    let tmp = Tmp::new("examples");
    let store = Store::at(tmp.0.join("home"));
    let p1 = store.example_file("bank", b"\x7fELF bank").unwrap();
    let p2 = store.example_file("bank", b"\x7fELF bank").unwrap();
    assert_eq!(p1, p2);
    let p3 = store.example_file("bank", b"\x7fELF bank v2").unwrap();
    assert_ne!(p1, p3);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&p1).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
}

#[test]
fn empty_runs_dir() {
    let tmp = Tmp::new("empty");
    let store = Store::at(tmp.0.join("nothing-here"));
    assert!(store.list().unwrap().is_empty());
    assert!(matches!(store.resolve("@"), Err(StoreError::NoRuns(_))));
    assert!(matches!(store.resolve("abc"), Err(StoreError::NotFound(_))));
}

#[test]
fn saved_checks_read_back_newest_first_and_damage_is_reported() {
    let tmp = Tmp::new("checks");
    let store = Store::at(&tmp.0);
    assert!(store.checks().0.is_empty());
    let a = serde_json::json!({"violations": 1});
    store.save_check("aaaaaaaaaaaaaaaa", &a).unwrap();
    std::thread::sleep(Duration::from_millis(2));
    store
        .save_check("bbbbbbbbbbbbbbbb", &serde_json::json!({"violations": 0}))
        .unwrap();
    std::fs::write(store.checks_dir().join("0-x.json"), b"{not json").unwrap();
    let (ok, bad) = store.checks();
    assert_eq!(ok.len(), 2);
    assert_eq!(ok[0].base, "bbbbbbbbbbbbbbbb");
    assert_eq!(ok[1].report, a);
    assert_eq!(bad.len(), 1, "{bad:?}");
}

#[test]
fn unusable_keyframes_are_a_warning_returned_not_printed() {
    let tmp = Tmp::new("kf-warning");
    let store = Store::at(tmp.0.join("home"));
    let image = program(&tmp);
    let run = record(&store, &image, 1, "p", b"");
    assert!(run.usable_keyframe(&store, 100).warning.is_none());
    std::fs::write(
        run.dir.join(crate::run::keyframe::KEYFRAMES_FILE),
        b"RWKF garbage",
    )
    .unwrap();
    let usable = run.usable_keyframe(&store, 100);
    assert!(usable.keyframe.is_none());
    let w = usable.warning.expect("a warning").to_string();
    assert!(w.starts_with("keyframes not used ("), "{w}");
    assert!(w.ends_with("running from step 0"), "{w}");
}
