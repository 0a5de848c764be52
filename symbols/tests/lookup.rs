//! The crate on a real program: guest/examples/pool.c compiled here with
//! `cc -static -g`, resolved by symbol, line and source.

use std::path::PathBuf;
use symbols::{DebugFinder, Symbolizer};

fn pool(name: &str) -> (PathBuf, Vec<u8>) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../guest/examples/pool.c")
        .canonicalize()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join(name);
    let st = std::process::Command::new("cc")
        .args(["-static", "-O1", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("cc (scripts/setup installs build-essential)");
    assert!(st.success());
    (src, std::fs::read(&exe).unwrap())
}

fn line_of(src: &PathBuf, needle: &str) -> u32 {
    let text = std::fs::read_to_string(src).unwrap();
    text.lines().position(|l| l.contains(needle)).unwrap() as u32 + 1
}

#[test]
fn a_line_resolves_to_addresses_and_back() {
    let (src, elf) = pool("lines");
    let mut s = Symbolizer::new(DebugFinder::none());
    s.add("/pool", &elf, 0).unwrap();
    let line = line_of(&src, "cost += pool.queue[i].cost;");
    let addrs = s.line_addresses("examples/pool.c", line);
    assert!(!addrs.is_empty(), "no address for pool.c:{line}");
    for a in addrs {
        let frames = s.frames_at(a);
        let f = &frames[0];
        assert_eq!(f.function.as_deref(), Some("worker"), "{frames:?}");
        let loc = f.location.as_ref().unwrap();
        assert_eq!(loc.line, line);
        assert!(loc.file.ends_with("pool.c"));
        assert!(f.own);
        assert_eq!(f.place(), format!("worker (pool.c:{line})"));
    }
    // A function of the C library has no line information: named by symbol.
    let lock = s.symbol_address("pthread_mutex_lock").unwrap();
    let f = &s.frames_at(lock + 1)[0];
    assert!(!f.own);
    assert_eq!(f.place(), "pthread_mutex_lock+0x1");
}

#[test]
fn sources_say_where_they_came_from_and_refuse_a_wrong_file() {
    let (src, elf) = pool("sources");
    let mut s = Symbolizer::new(DebugFinder::none());
    s.add("/pool", &elf, 0).unwrap();
    let path = s.frames_at(s.symbol_address("worker").unwrap())[0]
        .location
        .clone()
        .unwrap()
        .file;
    // The run's image has it: that copy wins.
    let text = std::fs::read(&src).unwrap();
    let got = s
        .source(&path, Some(56), &mut |p| (p == path).then(|| text.clone()))
        .unwrap();
    assert!(matches!(got.origin, symbols::Origin::Image { .. }));
    // Else the host file, with a caveat (gcc records no checksum).
    let got = s.source(&path, Some(56), &mut |_| None).unwrap();
    assert!(matches!(got.origin, symbols::Origin::Host { .. }));
    assert!(got.caveat.unwrap().contains("no checksum"));
    // A file too short for the line is refused, never shown.
    let err = s.source(&path, Some(100_000), &mut |_| None).unwrap_err();
    assert!(err.to_string().contains("no line 100000"), "{err}");
    // A host file newer than the program is refused.
    s.program_mtime = Some(std::time::UNIX_EPOCH);
    let err = s.source(&path, Some(56), &mut |_| None).unwrap_err();
    assert!(
        err.to_string()
            .contains("changed after the program was built"),
        "{err}"
    );
}

/// Separate debug info from a host directory laid out as
/// `/usr/lib/debug/.build-id/xx/yyyy.debug` (here a temporary one): a
/// stripped program (`objcopy --only-keep-debug`, then `--strip-debug`; the
/// build id stays) gets its lines back, and says where they came from.
#[test]
fn split_debug_info_is_found_by_build_id_in_a_debug_directory() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../guest/examples/pool.c")
        .canonicalize()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("pool");
    let run = |cmd: &str, args: &[&std::ffi::OsStr]| {
        let st = std::process::Command::new(cmd)
            .args(args)
            .status()
            .unwrap_or_else(|e| panic!("{cmd}: {e} (scripts/setup installs build-essential)"));
        assert!(st.success(), "{cmd} {args:?}");
    };
    run(
        "cc",
        &[
            "-static".as_ref(),
            // Code (so a build id) of its own: modules are cached by it.
            "-O0".as_ref(),
            "-g".as_ref(),
            "-pthread".as_ref(),
            "-o".as_ref(),
            exe.as_os_str(),
            src.as_os_str(),
        ],
    );
    let id = symbols::module::build_id(&std::fs::read(&exe).unwrap())
        .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>())
        .expect("a build id");
    let debug_dir = dir.path().join("debug");
    let debug = debug_dir
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    run(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            exe.as_os_str(),
            debug.as_os_str(),
        ],
    );
    run("objcopy", &["--strip-debug".as_ref(), exe.as_os_str()]);
    let stripped = std::fs::read(&exe).unwrap();
    let worker_line = line_of(&src, "cost += pool.queue[i].cost;");

    // Nowhere to look: named by symbol only (parsed without the cache).
    let bare = symbols::Module::parse(&stripped, &DebugFinder::none()).unwrap();
    assert!(!bare.has_dwarf());

    let mut finder = DebugFinder::none();
    finder.debug_dirs = vec![debug_dir];
    let mut s = Symbolizer::new(finder);
    let m = s.add("/pool", &stripped, 0).unwrap();
    assert!(m.module.has_dwarf());
    assert_eq!(
        m.module.debug_origin(),
        &symbols::DebugOrigin::HostFile(debug.clone())
    );
    let addrs = s.line_addresses("pool.c", worker_line);
    assert!(!addrs.is_empty(), "no address for pool.c:{worker_line}");
    let f = &s.frames_at(addrs[0])[0];
    assert_eq!(f.function.as_deref(), Some("worker"));
    assert_eq!(f.location.as_ref().unwrap().line, worker_line);
}
