//! Variables and values on real programs compiled here with `-g`
//! (guest/tests/values.c with glibc and pthreads, at -O0 and -O1;
//! guest/tests/values.rs with Rust std): each runs natively under ptrace
//! until its mark (an int3), and the crate reads the stopped thread's
//! frames, variables and values as a debugger would.

use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use symbols::values::expr::{evaluate, Env};
use symbols::{Backtrace, DebugFinder, FrameVariables, Registers, Symbolizer, Value};

fn guest(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../guest/tests")
        .join(name)
        .canonicalize()
        .unwrap()
}

fn compile(cmd: &str, args: &[&str], src: &Path, exe: &Path) {
    let out = std::process::Command::new(cmd)
        .args(args)
        .arg("-o")
        .arg(exe)
        .arg(src)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} (scripts/setup-tests installs it): {e}"));
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A program stopped at its int3: registers of the thread that ran it, and
/// its memory through /proc.
struct Stopped {
    pid: i32,
    tids: Vec<i32>,
    regs: Registers,
    mem: std::fs::File,
    bias: u64,
    exe: Vec<u8>,
}

impl Drop for Stopped {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut st = 0;
            // The other threads first: the leader is reported after them.
            for t in self.tids.iter().rev() {
                libc::waitpid(*t, &mut st, libc::__WALL);
            }
        }
    }
}

impl Stopped {
    fn memory(&self) -> impl FnMut(u64, &mut [u8]) -> bool + '_ {
        |a, b| self.mem.read_exact_at(b, a).is_ok()
    }

    fn symbolizer(&self) -> Symbolizer {
        let mut s = Symbolizer::new(DebugFinder::none());
        s.add("/guest", &self.exe, self.bias).unwrap();
        s
    }
}

/// One traced program at a time: `waitpid(-1)` would take another test's.
static TRACING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `exe` under ptrace (following its threads) until one traps.
fn run_to_mark(exe: &Path) -> (std::sync::MutexGuard<'static, ()>, Stopped) {
    let guard = TRACING.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = std::process::Command::new(exe);
    cmd.stdout(std::process::Stdio::null());
    unsafe {
        cmd.pre_exec(|| {
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Reaped by waitpid in Stopped's drop.
    #[allow(clippy::zombie_processes)]
    let pid = cmd.spawn().unwrap().id() as i32;
    let mut st = 0;
    unsafe {
        assert_eq!(libc::waitpid(pid, &mut st, 0), pid);
        let opts = libc::PTRACE_O_TRACECLONE | libc::PTRACE_O_EXITKILL;
        assert_eq!(libc::ptrace(libc::PTRACE_SETOPTIONS, pid, 0, opts), 0);
        libc::ptrace(libc::PTRACE_CONT, pid, 0, 0);
    }
    // Wait for each known thread by its id (never -1: that could take a
    // compiler's exit from a test running beside this one).
    let mut tids = vec![pid];
    let tid = 'found: loop {
        let mut any = false;
        for i in 0..tids.len() {
            let t = tids[i];
            let got = unsafe { libc::waitpid(t, &mut st, libc::__WALL | libc::WNOHANG) };
            if got != t {
                continue;
            }
            any = true;
            assert!(libc::WIFSTOPPED(st), "the program ended before its mark");
            let sig = libc::WSTOPSIG(st);
            let event = st >> 16;
            if event == libc::PTRACE_EVENT_CLONE {
                let mut new: libc::c_ulong = 0;
                unsafe { libc::ptrace(libc::PTRACE_GETEVENTMSG, t, 0, &mut new as *mut _) };
                tids.push(new as i32);
            } else if sig == libc::SIGTRAP && event == 0 {
                break 'found t;
            }
            let pass = if event != 0 || sig == libc::SIGSTOP {
                0
            } else {
                sig
            };
            unsafe { libc::ptrace(libc::PTRACE_CONT, t, 0, pass) };
        }
        if !any {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
    unsafe {
        assert_eq!(
            libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut r as *mut _),
            0
        )
    };
    let regs = Registers::x86_64(
        r.rax,
        r.rbx,
        r.rcx,
        r.rdx,
        r.rsi,
        r.rdi,
        r.rbp,
        r.rsp,
        [r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15],
        r.rip,
    );
    let exe_bytes = std::fs::read(exe).unwrap();
    // The load bias: where the file's first mapping is, less its lowest
    // segment address (0 for a static executable, not for a static-pie).
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let canon = exe.canonicalize().unwrap();
    let start = maps
        .lines()
        .find(|l| l.ends_with(canon.to_str().unwrap()))
        .and_then(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
        .unwrap();
    let lowest = symbols::Module::parse(&exe_bytes, &DebugFinder::none())
        .unwrap()
        .span()
        .0;
    let stopped = Stopped {
        pid,
        tids,
        regs,
        mem: std::fs::File::open(format!("/proc/{pid}/mem")).unwrap(),
        bias: start - (lowest & !0xfff),
        exe: exe_bytes,
    };
    (guard, stopped)
}

struct Frame {
    bt: Backtrace,
    index: usize,
    vars: FrameVariables,
}

fn frame_of(stopped: &Stopped, function: &str) -> Frame {
    let s = stopped.symbolizer();
    let mut mem = stopped.memory();
    let bt = s.unwind(stopped.regs, &mut mem);
    let index = bt
        .frames
        .iter()
        .position(|f| f.function.as_deref() == Some(function))
        .unwrap_or_else(|| panic!("no {function} in {:#?}", bt.frames));
    let vars = s.variables(&bt, index, &mut mem).unwrap();
    Frame { bt, index, vars }
}

fn show(stopped: &Stopped, v: &Value) -> String {
    v.show(&mut stopped.memory()).value
}

fn var<'a>(f: &'a Frame, name: &str) -> &'a Value {
    &f.vars
        .find(name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", names(&f.vars)))
        .value
}

fn names(v: &FrameVariables) -> Vec<String> {
    v.arguments
        .iter()
        .chain(&v.locals)
        .map(|v| v.name.clone())
        .collect()
}

fn eval(stopped: &Stopped, f: &Frame, text: &str) -> Result<String, String> {
    let regs = f.bt.frames[f.index].regs;
    let reg = move |n: &str| match n {
        "rip" => regs.pc(),
        "rsp" => regs.sp(),
        _ => None,
    };
    let env = Env {
        vars: &f.vars,
        register: &reg,
        machine: false,
    };
    let mut mem = stopped.memory();
    evaluate(text, &env, &mut mem)
        .map(|e| e.show(&mut mem).value)
        .map_err(|e| e.to_string())
}

fn c_program(opt: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join(format!("values{opt}"));
    compile(
        "cc",
        &[
            "-static",
            opt,
            "-g",
            "-pthread",
            "-DMARK()=__asm__ volatile(\"int3\")",
        ],
        &guest("values.c"),
        &exe,
    );
    (dir, exe)
}

fn check_c(opt: &str) {
    let (_dir, exe) = c_program(opt);
    let (_guard, stopped) = run_to_mark(&exe);
    let f = frame_of(&stopped, "inspect");
    let args: Vec<_> = f.vars.arguments.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(args, ["head", "count", "label"], "{opt}");
    for want in [
        "total", "ratio", "origin", "squares", "word", "shade", "b", "inner",
    ] {
        assert!(f.vars.find(want).is_some(), "{opt}: no {want}");
    }
    let s = |name: &str| show(&stopped, var(&f, name));
    assert_eq!(s("count"), "3", "{opt}");
    assert!(s("label").ends_with(" \"list\""), "{opt}: {}", s("label"));
    assert_eq!(s("total"), "6");
    assert_eq!(s("ratio"), "2.5");
    assert_eq!(s("origin"), "{x = 3, y = -4}");
    assert_eq!(s("squares"), "{0, 1, 4, 9, 16, 25, 36, 49}");
    assert_eq!(s("word"), "\"hello\"");
    assert_eq!(s("shade"), "GREEN");
    assert_eq!(
        s("b"),
        "{word = 67305985, bytes = \"\\001\\002\\003\\004\"}"
    );
    assert_eq!(s("inner"), "300");
    assert_eq!(var(&f, "head").type_name(), "node_t *");
    assert_eq!(var(&f, "origin").type_name(), "struct point");

    // A pointer to a struct expands to the struct's members.
    let mut mem = stopped.memory();
    let head = var(&f, "head");
    let shown = head.show(&mut mem);
    assert_eq!(shown.named, 9, "{shown:?}");
    let kids = head.children(&mut mem, 0, 100);
    let kid = |n: &str| {
        kids.iter()
            .find(|k| k.0 == n)
            .map(|k| k.1.show(&mut stopped.memory()).value)
            .unwrap()
    };
    assert_eq!(kid("value"), "1");
    assert!(kid("name").ends_with("\"head\""));
    assert_eq!(kid("at"), "{x = 10, y = 11}");
    assert_eq!(kid("grid"), "{{1, 2, 3}, {4, 5, 6}}");
    assert_eq!(kid("color"), "GREEN");
    assert_eq!(kid("flag"), "1");
    assert_eq!(kid("level"), "5");
    assert_eq!(kid("bits"), "{word = 287454020, bytes = \"D3\\\"\\021\"}");
    // Arrays page: elements 2..5 of squares.
    let page = var(&f, "squares").children(&mut mem, 2, 3);
    let page: Vec<_> = page
        .iter()
        .map(|(n, v)| format!("{n}={}", v.show(&mut stopped.memory()).value))
        .collect();
    assert_eq!(page, ["[2]=4", "[3]=9", "[4]=16"]);

    // Expressions.
    let e = |t: &str| eval(&stopped, &f, t);
    assert_eq!(e("head->next->next->value").unwrap(), "3");
    assert!(e("head->next->name").unwrap().ends_with("\"second\""));
    assert_eq!(e("(*head).at.y").unwrap(), "11");
    assert_eq!(e("head->grid[1][2]").unwrap(), "6");
    assert_eq!(e("squares[3] + count * 2").unwrap(), "15");
    assert_eq!(e("-count").unwrap(), "-3");
    assert_eq!(e("*&squares[5]").unwrap(), "25");
    assert_eq!(e("*(&squares[1] + 2)").unwrap(), "9");
    assert_eq!(e("counter").unwrap(), "7");
    assert_eq!(e("word[1]").unwrap(), "101 'e'");
    assert_eq!(e("count == 3 && total > 5").unwrap(), "1");
    assert!(e("$rip").unwrap().starts_with("0x"));
    assert_eq!(
        e("nosuch").unwrap_err(),
        "no variable `nosuch` in this frame"
    );
    assert!(e("head->nosuch")
        .unwrap_err()
        .contains("no member `nosuch`"));
    assert!(e("1 / 0").unwrap_err().contains("division by zero"));
    assert!(e("squares[").is_err());
    assert!(e("((((((((").is_err());

    // Writing: the bytes a new value takes, and where.
    let (at, bytes) = var(&f, "total").encode("-2").unwrap();
    assert_eq!(Some(at), var(&f, "total").address());
    assert_eq!(bytes, (-2i32).to_le_bytes());
    assert!(var(&f, "shade").encode("BLUE").is_err() || opt == "-O0");
    assert!(var(&f, "total").encode("x").is_err());
    assert!(var(&f, "total").encode("99999999999").is_err());
}

#[test]
fn an_inlined_frame_has_its_own_variables() {
    for opt in ["-O0", "-O1"] {
        let (_dir, exe) = c_program(opt);
        let (_guard, stopped) = run_to_mark(&exe);
        let f = frame_of(&stopped, "mark_with");
        assert!(f.bt.frames[f.index].inlined, "{opt}");
        assert_eq!(f.bt.inline_depth(f.index), 0);
        assert_eq!(show(&stopped, var(&f, "seen")), "301", "{opt}");
        assert!(
            f.vars.find("total").is_none(),
            "{opt}: inspect's locals are not the inlined frame's"
        );
        // The frame it is inlined into, at the same pc.
        let outer = frame_of(&stopped, "inspect");
        assert_eq!(outer.index, f.index + 1);
        assert_eq!(outer.bt.inline_depth(outer.index), 1);
        assert!(outer.vars.find("seen").is_none(), "{opt}");
        assert_eq!(show(&stopped, var(&outer, "inner")), "300", "{opt}");
    }
}

#[test]
fn c_values_at_o0() {
    check_c("-O0");
}

#[test]
fn c_values_at_o1_with_location_lists_and_entry_values() {
    check_c("-O1");
}

#[test]
fn the_caller_frame_reads_its_own_variables() {
    let (_dir, exe) = c_program("-O0");
    let (_guard, stopped) = run_to_mark(&exe);
    let f = frame_of(&stopped, "worker");
    assert!(f.vars.arguments.iter().any(|v| v.name == "arg"));
    let head = show(&stopped, var(&f, "head"));
    assert!(head.starts_with("{value = 1, name = 0x"), "{head}");
    assert!(head.contains("at = {x = 10, y = 11}"), "{head}");
    assert_eq!(eval(&stopped, &f, "head.grid[1][2]").unwrap(), "6");
    assert_eq!(eval(&stopped, &f, "head.next->next->at.x").unwrap(), "30");
}

#[test]
fn rust_values() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("values-rust");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    compile(
        &rustc,
        &[
            "--edition",
            "2021",
            "-C",
            "target-feature=+crt-static",
            "-C",
            "opt-level=0",
            "-g",
            "--cfg",
            "native_mark",
        ],
        &guest("values.rs"),
        &exe,
    );
    let (_guard, stopped) = run_to_mark(&exe);
    let f = frame_of(&stopped, "values::inspect");
    let s = |name: &str| show(&stopped, var(&f, name));
    assert_eq!(s("numbers"), "&[10, 20, 30]");
    assert_eq!(s("owner"), "&\"ada\"");
    assert_eq!(s("name"), "\"hi\"");
    assert_eq!(s("some"), "Some(42)");
    assert_eq!(s("none"), "None");
    assert_eq!(s("shape"), "Rect(3, 4)");
    assert_eq!(s("circle"), "Circle {r: 1.5}");
    assert_eq!(s("empty"), "Empty");
    assert_eq!(s("words"), "[\"one\", \"two\"]");
    assert_eq!(s("count"), "3");
    assert!(
        s("account").starts_with("box {id: 2, owner: \"ada\", balance: 100, parent: Some("),
        "{}",
        s("account")
    );

    // A Vec behind a reference expands to its elements, paged.
    let mut mem = stopped.memory();
    let numbers = var(&f, "numbers");
    assert_eq!(numbers.show(&mut mem).indexed, 3);
    let kids: Vec<_> = numbers
        .children(&mut mem, 1, 5)
        .into_iter()
        .map(|(n, v)| format!("{n}={}", v.show(&mut stopped.memory()).value))
        .collect();
    assert_eq!(kids, ["[1]=20", "[2]=30"]);
    // An enum's children are its active variant's fields.
    let shape: Vec<_> = var(&f, "shape")
        .children(&mut mem, 0, 10)
        .into_iter()
        .map(|(n, v)| format!("{n}={}", v.show(&mut stopped.memory()).value))
        .collect();
    assert_eq!(shape, ["0=3", "1=4"]);

    let e = |t: &str| eval(&stopped, &f, t);
    assert_eq!(e("numbers[1]").unwrap(), "20");
    assert_eq!(e("account.balance + 1").unwrap(), "101");
    assert_eq!(e("account.owner").unwrap(), "\"ada\"");
    assert!(e("account.parent").unwrap().starts_with("Some(box "));
    assert_eq!(e("account.parent.0.id").unwrap(), "1");
    // A niche: Option<Box<_>> is None when the pointer is null.
    assert_eq!(e("account.parent.0.parent").unwrap(), "None");
    assert_eq!(e("account.parent.0.owner").unwrap(), "\"root\"");
    assert_eq!(e("shape.1").unwrap(), "4");
    assert_eq!(e("some.0").unwrap(), "42");
    assert!(e("numbers[7]").unwrap_err().contains("out of range"));
}

/// Every value and child to `depth`, shown.
fn walk(v: &Value, mem: &mut dyn symbols::Memory, depth: usize, seen: &mut usize) {
    let shown = v.show(mem);
    assert!(shown.value.chars().count() <= 200, "{}", shown.value);
    *seen += 1;
    if depth == 0 {
        return;
    }
    for (_, c) in v.children(mem, 0, 40) {
        walk(&c, mem, depth - 1, seen);
    }
}

#[test]
fn hostile_memory_shows_as_text() {
    let (_dir, exe) = c_program("-O0");
    let (_guard, stopped) = run_to_mark(&exe);
    let f = frame_of(&stopped, "inspect");
    // Memory that reads as noise, and memory that cannot be read.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut noise = |_a: u64, b: &mut [u8]| {
        for x in b.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *x = state as u8;
        }
        true
    };
    let mut seen = 0;
    for v in f.vars.arguments.iter().chain(&f.vars.locals) {
        walk(&v.value, &mut noise, 4, &mut seen);
    }
    assert!(seen > 20);
    let mut nothing = |_a: u64, _b: &mut [u8]| false;
    let head = var(&f, "head").show(&mut nothing).value;
    assert!(head.starts_with("<unreadable 0x"), "{head}");
}

/// The file offset and size of an ELF section.
fn section_range(elf: &[u8], name: &str) -> (usize, usize) {
    use object::{Object, ObjectSection};
    let file = object::File::parse(elf).unwrap();
    let s = file.section_by_name(name).unwrap();
    let (off, size) = s.file_range().unwrap();
    (off as usize, size as usize)
}

#[test]
fn hostile_dwarf_shows_as_text() {
    let (_dir, exe) = c_program("-O1");
    let (_guard, stopped) = run_to_mark(&exe);
    let sections: Vec<(usize, usize)> = [".debug_info", ".debug_abbrev", ".debug_loclists"]
        .iter()
        .map(|n| section_range(&stopped.exe, n))
        .collect();
    let id = section_range(&stopped.exe, ".note.gnu.build-id");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut shown = 0;
    for round in 0..36u32 {
        let mut elf = stopped.exe.clone();
        // A build id of its own, so the cache does not answer with the good file.
        elf[id.0 + id.1 - 4..id.0 + id.1].copy_from_slice(&round.to_le_bytes());
        let (start, len) = sections[round as usize % sections.len()];
        for _ in 0..1 + round * 2 {
            let at = start + (next() as usize) % len;
            elf[at] = next() as u8;
        }
        let mut s = Symbolizer::new(DebugFinder::none());
        if s.add("/guest", &elf, stopped.bias).is_err() {
            continue;
        }
        let mut mem = stopped.memory();
        let bt = s.unwind(stopped.regs, &mut mem);
        for i in 0..bt.frames.len().min(4) {
            let Ok(vars) = s.variables(&bt, i, &mut mem) else {
                continue;
            };
            let mut seen = 0;
            for v in vars.arguments.iter().chain(&vars.locals) {
                walk(&v.value, &mut mem, 3, &mut seen);
            }
            shown += seen;
            let reg = |_: &str| None;
            let env = Env {
                vars: &vars,
                register: &reg,
                machine: false,
            };
            for text in ["head->next->value", "squares[2]", "*first", "counter", "&b"] {
                let _ = evaluate(text, &env, &mut mem).map(|e| e.show(&mut mem));
            }
        }
    }
    // Most mutants still have variables to show (and show them as text).
    assert!(shown > 100, "{shown} values shown");
}
