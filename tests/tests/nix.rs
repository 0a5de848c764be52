//! `rewind nix`: a derivation's build as a run, with Debian's nix-bin
//! offline (single-user, as root, no sandbox, no substituter but the
//! `file://` caches the tests make). The derivations' builder is a static
//! busybox added to the store with `builtins.path`.

use rewind_tests::{host_program, Home, Output};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The host's Nix, set up for one test: its settings (NIX_CONFIG, with a
/// `file://` cache of the test's own as the one substituter) and a
/// directory with `busybox/bin/{busybox,sh}` and the test's Nix files.
struct Nix {
    dir: tempfile::TempDir,
    config: String,
}

impl Nix {
    /// None (the test skipped, said on stderr) when nix-bin is not installed.
    fn new() -> Option<Nix> {
        host_program("/usr/bin/nix-build", "nix-bin")?;
        let busybox = host_program("/bin/busybox", "busybox-static")?;
        let dir = tempfile::Builder::new()
            .prefix("rewind-nix-test-")
            .tempdir()
            .unwrap();
        let bin = dir.path().join("busybox/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(busybox, bin.join("busybox")).unwrap();
        std::os::unix::fs::symlink("busybox", bin.join("sh")).unwrap();
        let cache = dir.path().join("cache");
        let config = format!(
            "experimental-features = nix-command flakes\nsandbox = false\n\
             build-users-group =\nsubstituters = file://{}\n",
            cache.display()
        );
        Some(Nix { dir, config })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn cache_url(&self) -> String {
        format!("file://{}", self.path().join("cache").display())
    }

    /// Writes `derivations.nix`: a recursive attribute set of `builtins.derivation`s
    /// with `bb` (the busybox directory) and `sh` (its shell) in scope.
    fn write(&self, attrs: &str) -> PathBuf {
        let file = self.path().join("derivations.nix");
        let text = format!(
            "let\n  bb = builtins.path {{ path = ./busybox; name = \"busybox\"; }};\n  \
             sh = \"${{bb}}/bin/sh\";\n  \
             drv = name: script: derivation {{ inherit name; system = \"x86_64-linux\"; \
             builder = sh; args = [ \"-c\" script ]; PATH = \"${{bb}}/bin\"; }};\n\
             in rec {{\n{attrs}\n}}\n"
        );
        std::fs::write(&file, text).unwrap();
        file
    }

    /// A Nix tool with these settings; panics unless it succeeds. Its stdout.
    fn tool(&self, tool: &str, args: &[&str]) -> String {
        let out = Command::new(tool)
            .args(args)
            .env("NIX_CONFIG", &self.config)
            .output()
            .unwrap_or_else(|e| panic!("{tool}: {e}"));
        assert!(
            out.status.success(),
            "{tool} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `nix-build FILE -A ATTR` on the host: the outputs' paths.
    fn build(&self, file: &Path, attr: &str) -> Vec<String> {
        let f = file.to_str().unwrap();
        let out = self.tool("nix-build", &[f, "-A", attr, "--no-out-link"]);
        out.lines().map(str::to_string).collect()
    }

    /// Writes `examples.nix`: nix/examples.nix over the host's toolchain
    /// (`toolchain`), with `extra` (Nix attributes with `toolchain` and
    /// `drv`, a derivation of a script over the toolchain, in scope)
    /// beside the examples.
    fn write_examples(&self, toolchain: &str, extra: &str) -> PathBuf {
        let file = self.path().join("examples.nix");
        let text = format!(
            "let\n  toolchain = builtins.storePath \"{toolchain}\";\n  \
             drv = name: script: derivation {{ inherit name; system = \"x86_64-linux\"; \
             builder = \"${{toolchain}}/bin/sh\"; args = [ \"-e\" \"-c\" script ]; \
             PATH = \"${{toolchain}}/bin\"; }};\n\
             in import {} {{ inherit toolchain; }} // {{\n{extra}\n}}\n",
            repo().join("nix/examples.nix").display()
        );
        std::fs::write(&file, text).unwrap();
        file
    }

    /// `rewind ARGS` with these settings.
    fn rewind(&self, home: &Home, args: &[&str]) -> Output {
        home.rewind_env(args, &[("NIX_CONFIG", &self.config)])
    }
}

/// The host's C toolchain as a store path (nix/host-toolchain.sh, then
/// nix/toolchain.nix), made once for the test binary; None (skipped,
/// said on stderr) without gcc or patchelf.
fn toolchain(nix: &Nix) -> Option<String> {
    static MADE: OnceLock<Option<String>> = OnceLock::new();
    MADE.get_or_init(|| {
        host_program("/usr/bin/gcc", "build-essential")?;
        host_program("/usr/bin/patchelf", "patchelf")?;
        let dir = tempfile::Builder::new()
            .prefix("rewind-nix-toolchain-")
            .tempdir()
            .unwrap();
        let host = dir.path().join("host");
        let made = Command::new(repo().join("nix/host-toolchain.sh"))
            .arg(&host)
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "nix/host-toolchain.sh: {}",
            String::from_utf8_lossy(&made.stderr)
        );
        let expr = format!(
            "import {} {{ host = builtins.path {{ path = {}; name = \"host-toolchain-files\"; }}; }}",
            repo().join("nix/toolchain.nix").display(),
            host.display()
        );
        let out = nix.tool("nix-build", &["-E", &expr, "--no-out-link"]);
        Some(out.trim().to_string())
    })
    .clone()
}

/// The run id on `rewind: run <id> ...`, the last line of stderr.
fn run_id(out: &Output) -> String {
    let last = out.stderr_lines().last().copied().unwrap_or("");
    let id = last
        .strip_prefix("rewind: run ")
        .unwrap_or_else(|| panic!("{out}"));
    id.split(' ').next().unwrap().to_string()
}

const TWO_OUTPUTS: &str = r#"  hello = (derivation {
    name = "hello"; system = "x86_64-linux"; builder = sh; outputs = [ "out" "doc" ];
    PATH = "${bb}/bin";
    args = [ "-c" ''
      mkdir -p $out/bin $out/share/empty $doc
      echo hello > $out/share/greeting
      printf '#!/bin/sh\necho hi\n' > $out/bin/hi
      chmod +x $out/bin/hi
      ln -s ../share/greeting $out/bin/link
      echo "the doc of $name" > $doc/README
      echo built $name
    '' ];
  });"#;

#[test]
fn a_build_matches_the_store_and_a_file_cache() {
    let Some(nix) = Nix::new() else { return };
    let file = nix.write(TWO_OUTPUTS);
    let outs = nix.build(&file, "hello.all");
    assert_eq!(outs.len(), 2, "{outs:?}");
    let cache = nix.cache_url();
    let mut args = vec!["copy", "--to", &cache as &str];
    args.extend(outs.iter().map(String::as_str));
    nix.tool("nix", &args);

    let home = Home::new();
    let f = file.to_str().unwrap();
    let out = nix.rewind(&home, &["nix", "-q", f, "-A", "hello"]);
    assert_eq!(out.code, 0, "{out}");
    assert!(out.stderr.contains(" exited:0 after "), "{out}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for path in &outs {
        for verdict in [
            "matches your store".to_string(),
            format!("matches cache {}", nix.cache_url()),
        ] {
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with(&format!("{path} sha256:")) && l.ends_with(&verdict)),
                "no `{path} ... {verdict}` in:\n{out}"
            );
        }
    }
    // The run is named after the derivation, and its JSON says the same.
    let ls = home.ok(&["ls"]);
    assert!(ls.stdout.contains("hello"), "{ls}");
    let json = nix.rewind(&home, &["nix", "--json", f, "-A", "hello"]);
    assert_eq!(json.code, 0, "{json}");
    let v: serde_json::Value =
        serde_json::from_str(&json.stdout).unwrap_or_else(|e| panic!("{e}: {json}"));
    assert_eq!(v["run"], run_id(&out));
    assert_eq!(v["status"], "exited:0");
    let outputs = v["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), 2);
    for o in outputs {
        assert_eq!(o["store"]["verdict"], "matches", "{v:#}");
        assert_eq!(o["caches"][0]["verdict"], "matches", "{v:#}");
        assert_eq!(o["caches"][0]["url"], nix.cache_url().as_str());
        assert!(o["narHash"].as_str().unwrap().starts_with("sha256:"));
    }
}

#[test]
fn an_output_the_store_has_otherwise_differs_and_a_new_one_is_not_there() {
    let Some(nix) = Nix::new() else { return };
    // The clock differs natively; inside Rewind it is the run's epoch.
    let file = nix.write(
        r#"  clock = drv "clock" "date +%s%N > $out";
  fresh = drv "fresh-${builtins.toString builtins.currentTime}" "echo fresh > $out";"#,
    );
    let theirs = nix.build(&file, "clock");
    let home = Home::new();
    let f = file.to_str().unwrap();
    let out = nix.rewind(&home, &["nix", "-q", f, "-A", "clock"]);
    assert_eq!(
        out.code, 1,
        "an output that differs is the answer yes:\n{out}"
    );
    let line = out.stdout.lines().next().unwrap_or("");
    assert!(line.starts_with(&format!("{} sha256:", theirs[0])), "{out}");
    assert!(
        line.contains(" differs from your store (yours sha256:"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains(&format!("not in cache {}", nix.cache_url())),
        "{out}"
    );

    let out = nix.rewind(&home, &["nix", "-q", f, "-A", "fresh"]);
    assert_eq!(out.code, 0, "{out}");
    assert!(
        out.stdout
            .lines()
            .next()
            .unwrap_or("")
            .ends_with(" not in your store"),
        "{out}"
    );
}

#[test]
fn show_makes_a_nix_run_again_in_a_fresh_home_and_an_export_replays_elsewhere() {
    let Some(nix) = Nix::new() else { return };
    let file = nix.write(TWO_OUTPUTS);
    let home = Home::new();
    let f = file.to_str().unwrap();
    let out = nix.rewind(&home, &["nix", "-q", f, "-A", "hello"]);
    assert_eq!(out.code, 0, "{out}");
    let id = run_id(&out);
    let show = home.ok(&["show", &id]);
    let again = show
        .stdout
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("rewind nix "))
        .unwrap_or_else(|| panic!("no `rewind nix` line:\n{show}"));
    assert!(again.contains(" --epoch "), "{show}");
    let args: Vec<&str> = again
        .trim_end_matches("< /dev/null")
        .split_whitespace()
        .skip(1)
        .collect();
    let fresh = Home::new();
    let made = nix.rewind(&fresh, &args);
    assert_eq!(made.code, 0, "{made}");
    assert_eq!(run_id(&made), id, "{show}\n{made}");

    // A replayable export carries the closure: it imports and replays
    // in a home that has never seen it.
    let rwd = nix.path().join("hello.rwd");
    home.ok(&["export", &id, "--replayable", "-o", rwd.to_str().unwrap()]);
    let other = Home::new();
    other.ok(&["import", rwd.to_str().unwrap()]);
    let replay = other.ok(&["replay", &id]);
    assert!(
        replay.stdout.contains("identical") || replay.stderr.contains("identical"),
        "{replay}"
    );
}

#[test]
fn what_cannot_be_built_is_one_line_and_exit_2_and_no_run() {
    let Some(nix) = Nix::new() else { return };
    let file = nix.write(
        r#"  fetched = derivation { name = "fetched"; system = "x86_64-linux"; builder = sh;
    args = [ "-c" "echo x > $out" ]; outputHashMode = "flat"; outputHashAlgo = "sha256";
    outputHash = "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="; };
  outside = derivation { name = "outside"; system = "x86_64-linux"; builder = "/bin/sh";
    args = [ "-c" "echo x > $out" ]; };"#,
    );
    let home = Home::new();
    let f = file.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["nix", f, "-A", "fetched"], "fixed-output derivation"),
        (
            vec!["nix", f, "-A", "outside"],
            "its builder /bin/sh is not in its input closure",
        ),
        (vec!["nix", f, "-A", "nope"], "attribute 'nope'"),
        (
            vec![
                "nix",
                "/nix/store/00000000000000000000000000000000-none.drv",
            ],
            "none.drv",
        ),
    ];
    for (args, says) in cases {
        let out = nix.rewind(&home, &args);
        assert_eq!(out.code, 2, "{out}");
        let lines = out.stderr_lines();
        assert_eq!(lines.len(), 1, "one line:\n{out}");
        assert!(
            lines[0].starts_with("rewind: error: ") && lines[0].contains(says),
            "{says}:\n{out}"
        );
    }
    // Without Nix on PATH.
    let mut cmd = Command::new(rewind_tests::rewind_bin());
    cmd.args(["nix", f, "-A", "outside"])
        .env("REWIND_HOME", home.path())
        .env("PATH", "/nonexistent");
    let out = rewind_tests::run_command(cmd, rewind_tests::DEADLINE);
    assert_eq!(out.code, 2, "{out}");
    assert!(out.stderr.contains("no Nix on this host"), "{out}");
    assert!(
        home.finished_run_dirs().is_empty(),
        "a refused build records no run"
    );
}

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn the_examples_and_the_flake_evaluate_without_nixpkgs() {
    let Some(nix) = Nix::new() else { return };
    // nix/examples.nix with a local toolchain (busybox stands in: this
    // evaluates and instantiates, it builds nothing).
    let toolchain = format!(
        "builtins.path {{ path = {}; name = \"busybox\"; }}",
        nix.path().join("busybox").display()
    );
    let examples = repo().join("nix/examples.nix");
    let names = nix.tool(
        "nix-instantiate",
        &[
            "--eval",
            "--json",
            "-E",
            &format!(
                "builtins.attrNames (import {} {{ toolchain = {toolchain}; }})",
                examples.display()
            ),
        ],
    );
    let names: Vec<String> = serde_json::from_str(&names).unwrap();
    for n in [
        "bank",
        "philosophers",
        "waiter",
        "config-reload",
        "pool",
        "hash-order",
    ] {
        assert!(names.contains(&n.to_string()), "{n} in {names:?}");
        assert!(
            names.contains(&format!("{n}-fixed")),
            "{n}-fixed in {names:?}"
        );
    }
    let drv = nix.tool(
        "nix-instantiate",
        &[
            examples.to_str().unwrap(),
            "-A",
            "bank",
            "--arg",
            "toolchain",
            &toolchain,
        ],
    );
    let text = std::fs::read_to_string(drv.trim()).unwrap();
    assert!(
        text.contains("-examples/bank.c") && text.contains("./bank"),
        "{text}"
    );
    // The flake parses, and its outputs are a function of itself and nixpkgs
    // (which these machines cannot fetch: nothing of it is evaluated here).
    let flake = repo().join("flake.nix");
    let args = nix.tool(
        "nix-instantiate",
        &[
            "--eval",
            "--json",
            "-E",
            &format!(
                "builtins.attrNames (builtins.functionArgs (import {}).outputs)",
                flake.display()
            ),
        ],
    );
    assert_eq!(args.trim(), r#"["nixpkgs","self"]"#);
}

/// `rewind nix FILE -A ATTR` gives the output `nix-build` gave on the
/// host, which is in the store and in the `file://` cache.
fn builds_as_in_the_store_and_the_cache(nix: &Nix, home: &Home, file: &Path, attr: &str) {
    let f = file.to_str().unwrap();
    let outs = nix.build(file, attr);
    let cache = nix.cache_url();
    nix.tool("nix", &["copy", "--to", &cache, &outs[0]]);
    // rustc's build is about a minute in a debug build on an idle machine.
    let out = home.rewind_env_within(
        &["nix", "-q", f, "-A", attr],
        &[("NIX_CONFIG", &nix.config)],
        std::time::Duration::from_secs(600),
    );
    assert_eq!(out.code, 0, "{out}");
    assert!(out.stderr.contains(" exited:0 after "), "{out}");
    for verdict in [
        "matches your store".to_string(),
        format!("matches cache {cache}"),
    ] {
        let line = format!("{} sha256:", outs[0]);
        assert!(
            out.stdout
                .lines()
                .any(|l| l.starts_with(&line) && l.ends_with(&verdict)),
            "no `{line}... {verdict}` in:\n{out}"
        );
    }
}

#[test]
fn an_example_builds_with_the_host_toolchain_as_in_the_store_and_a_cache() {
    let Some(nix) = Nix::new() else { return };
    let Some(toolchain) = toolchain(&nix) else {
        return;
    };
    let file = nix.write_examples(&toolchain, "");
    let home = Home::new();
    // Every C example's fixed twin: each build compiles its source in the
    // store's toolchain and runs its check phase.
    let twins = [
        "bank-fixed",
        "philosophers-fixed",
        "waiter-fixed",
        "config-reload-fixed",
        "pool-fixed",
    ];
    for attr in twins {
        builds_as_in_the_store_and_the_cache(&nix, &home, &file, attr);
    }
}

#[test]
fn the_rust_example_builds_with_rustc_inside_the_machine() {
    let Some(nix) = Nix::new() else { return };
    let Some(toolchain) = toolchain(&nix) else {
        return;
    };
    // nix/host-toolchain.sh takes the host's rustc when it has one (this
    // machine's rustup toolchain): its driver, LLVM, the standard
    // library's rlibs and rust-lld, run by the toolchain's own loader.
    if !Path::new(&toolchain).join("bin/rustc").exists() {
        eprintln!("skipped: the host has no rustc, so the toolchain {toolchain} has none");
        return;
    }
    let file = nix.write_examples(&toolchain, "");
    let home = Home::new();
    // rustc (threads of its own, rust-lld through cc) compiles
    // hash-order-fixed.rs in the build, which then runs it as its check.
    builds_as_in_the_store_and_the_cache(&nix, &home, &file, "hash-order-fixed");
}

/// The step at which ATTR's build (nix/examples.nix) starts its test
/// program, after compiling it: the execve of `./ATTR` in its `rewind nix`
/// run on memory points (which is the check's schedule 0).
fn check_phase_step(nix: &Nix, home: &Home, file: &str, attr: &str) -> String {
    let out = nix.rewind(home, &["nix", "-q", "--points", "memory", file, "-A", attr]);
    assert!(out.stderr.contains(" exited:0 after "), "{out}");
    let events = home.ok(&["events", &run_id(&out), "--json"]);
    let execve = format!("execve(\\\"./{attr}\\\"");
    let line = events
        .stdout
        .lines()
        .find(|l| l.contains(&execve))
        .unwrap_or_else(|| panic!("no {execve} in the build:\n{events}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    v["step"].as_u64().unwrap().to_string()
}

#[test]
fn check_of_a_derivation_finds_banks_lost_money_in_its_check_and_the_fixed_twin_passes() {
    let Some(nix) = Nix::new() else { return };
    let Some(toolchain) = toolchain(&nix) else {
        return;
    };
    // bank from nix/examples.nix: its build compiles bank.c with the
    // store's toolchain (about 35,500 steps), then runs it as its check
    // phase (about 300). The schedules perturb from the check phase on and
    // start there from a keyframe of schedule 0, so no schedule compiles
    // bank.c again.
    let file = nix.write_examples(&toolchain, "");
    let f = file.to_str().unwrap();
    let home = Home::new();
    // A check of 64 builds: more than one command's usual deadline.
    let long = std::time::Duration::from_secs(900);
    let from = check_phase_step(&nix, &home, f, "bank");
    let mut args = vec!["check", "--points", "memory", "--schedules", "64"];
    args.extend(["--schedule-from", &from, "--where", f, "-A", "bank"]);
    let out = home.rewind_env_within(&args, &[("NIX_CONFIG", &nix.config)], long);
    assert_eq!(out.code, 1, "{out}");
    let text = &out.stdout;
    assert!(
        text.lines().any(|l| l.starts_with("schedule ")
            && l.ends_with(
                " violates ends-differently: ended exited:2 where schedule 0 ended exited:0"
            )),
        "{out}"
    );
    let decides = out.stdout_line_with(" decides it: ");
    assert!(decides.contains("(bank.c:"), "{decides}");
    let at = text
        .find("where each thread was at step ")
        .unwrap_or_else(|| panic!("no where:\n{out}"));
    assert!(text[at..].contains("bank.c:"), "{out}");
    // The runs are the derivation's builds, named after it.
    let failing = rewind_tests::failing_run_in(&out);
    let show = home.ok(&["show", &failing]);
    assert!(show.stdout.contains("rewind nix "), "{show}");
    assert!(home.ok(&["ls"]).stdout.contains(" bank\n"));

    let from = check_phase_step(&nix, &home, f, "bank-fixed");
    let mut args = vec!["check", "--points", "memory", "--schedules", "64"];
    args.extend(["--schedule-from", &from, f, "-A", "bank-fixed"]);
    let out = home.rewind_env_within(&args, &[("NIX_CONFIG", &nix.config)], long);
    assert_eq!(out.code, 0, "{out}");
    assert!(
        out.stdout
            .contains("0 of 64 perturbed schedules ended differently"),
        "{out}"
    );
    // Home's drop replays every run the checks kept, from step 0.
}

/// Two background writers appending to one file: the output is the order
/// the schedule gave their writes.
const WRITERS: &str = r#"  writers = drv "writers" "mkdir $out; (echo a1 >> $out/log; echo a2 >> $out/log) & (echo b1 >> $out/log; echo b2 >> $out/log) & wait";"#;

#[test]
fn check_finds_the_schedule_whose_output_differs_by_its_nar_hash() {
    let Some(nix) = Nix::new() else { return };
    let file = nix.write(WRITERS);
    let f = file.to_str().unwrap();
    let ours = &nix.build(&file, "writers")[0];
    let home = Home::new();
    let pinned = ["check", "--points", "syscalls", "--schedules", "16"];
    // Against schedule 0's output: narrowed to the step that reorders them.
    let mut args = pinned.to_vec();
    args.extend(["--property", "same-outputs", f, "-A", "writers"]);
    let out = nix.rewind(&home, &args);
    assert_eq!(out.code, 1, "{out}");
    let line = out.stdout_line_with(" violates same-outputs: ");
    let why = format!(" violates same-outputs: {ours} is sha256:");
    assert!(line.contains(&why), "{line}");
    assert!(line.contains(" where schedule 0's is sha256:"), "{line}");
    assert!(
        line.contains(&format!(": {ours}/log differs from byte ")),
        "{line}"
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.contains(" decides it: ") && l.ends_with(" violate same-outputs")),
        "{out}"
    );

    // Against your store's: the schedule found is the one `rewind nix`
    // reports as differing from your store.
    let mut args = pinned.to_vec();
    args.extend([
        "--property",
        "store-outputs",
        "--no-narrow",
        f,
        "-A",
        "writers",
    ]);
    let out = nix.rewind(&home, &args);
    assert_eq!(out.code, 1, "{out}");
    let line = out.stdout_line_with(" violates store-outputs: ");
    assert!(line.contains(" where your store's is sha256:"), "{line}");
    let n = line
        .strip_prefix("schedule")
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line}"));
    let again = nix.rewind(
        &home,
        &[
            "nix",
            "-q",
            "--points",
            "syscalls",
            "--schedule",
            n,
            f,
            "-A",
            "writers",
        ],
    );
    assert_eq!(again.code, 1, "{again}");
    let theirs = line.rsplit(' ').next().unwrap();
    assert!(
        again
            .stdout
            .contains(&format!(" differs from your store (yours {theirs})")),
        "{line}\n{again}"
    );

    // The outputs properties are a derivation's.
    let out = nix.rewind(
        &home,
        &["check", "--property", "same-outputs", "--example", "bank"],
    );
    assert_eq!(out.code, 2, "{out}");
    assert_eq!(out.stderr_lines().len(), 1, "{out}");
}

#[test]
fn a_builds_environment_is_the_one_nix_gives_its_builder() {
    let Some(nix) = Nix::new() else { return };
    let file = nix.write(r#"  env = drv "env" "env | sort | tee $out";"#);
    let f = file.to_str().unwrap();
    let natively = std::fs::read_to_string(&nix.build(&file, "env")[0]).unwrap();
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, _)| k.to_string())
            .collect()
    };
    let home = Home::new();
    // Nothing of the caller's environment reaches the build.
    let out = home.rewind_env(
        &["nix", f, "-A", "env"],
        &[
            ("NIX_CONFIG", &nix.config),
            ("TERM", "dumb"),
            ("REWIND_TEST_LEAK", "1"),
        ],
    );
    // It differs from your store's: NIX_BUILD_TOP is /build in Rewind, as
    // in a sandbox, and a directory under /tmp in this Nix without one.
    assert_eq!(out.code, 1, "{out}");
    assert!(out.stderr.contains(" exited:0 after "), "{out}");
    let logged = home.log(&run_id(&out));
    assert_eq!(names(&logged), names(&natively), "{logged}\n{natively}");
    // TERM is Nix's own, as in nix-build.
    assert!(natively.contains("\nTERM=xterm-256color\n"), "{natively}");
    assert!(logged.contains("\nTERM=xterm-256color\n"), "{logged}");
}

#[test]
fn a_shell_with_a_store_path_or_a_derivation_has_its_bin_on_path() {
    let Some(nix) = Nix::new() else { return };
    let file = nix.write(
        r#"  tool = drv "tool" "mkdir -p $out/bin; printf '#!${bb}/bin/sh\necho hello from $out\n' > $out/bin/hello-tool; chmod +x $out/bin/hello-tool";"#,
    );
    let f = file.to_str().unwrap();
    let tool = nix.build(&file, "tool").remove(0);
    let drv = nix.tool("nix-instantiate", &[f, "-A", "tool"]);
    let home = Home::new();
    let run = nix.rewind(&home, &["nix", "-q", f, "-A", "tool"]);
    assert_eq!(run.code, 0, "{run}");
    let id = run_id(&run);
    // The tool is a script whose interpreter is busybox in its closure:
    // both are at their /nix/store paths in the shell.
    for with in [tool.as_str(), drv.trim()] {
        let mut cmd = Command::new(rewind_tests::rewind_bin());
        cmd.args(["shell", &id, "1", "--with", with])
            .env("REWIND_HOME", home.path())
            .env("NIX_CONFIG", &nix.config);
        let out = rewind_tests::run_command_with_input(
            cmd,
            rewind_tests::DEADLINE,
            b"hello-tool\nexit 3\n",
        );
        assert_eq!(out.code, 3, "--with {with}:\n{out}");
        assert!(
            out.stdout.contains(&format!("hello from {tool}")),
            "--with {with}:\n{out}"
        );
    }
}
