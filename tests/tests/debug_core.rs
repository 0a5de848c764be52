//! The debug-session core (`vmm::debug`) on the failing run of the `pool`
//! example: breakpoints hidden from memory reads, single steps and reverse
//! single steps through the same positions, reverse-continue back to the
//! previous hit, a write watchpoint on the queue pointer, and reverse
//! execution refused once memory was written. The run still replays
//! identically afterwards.

use object::{Object, ObjectSymbol};
use rewind_tests::Home;
use vmm::debug::{DebugError, Origin, Session, Stop, Watch, WatchKind};

/// The failing run `rewind check --example pool` finds (a worker's SIGSEGV).
pub fn failing_pool(home: &Home) -> String {
    let out = home.rewind(&["check", "--points", "syscalls", "--example", "pool"]);
    assert_eq!(out.code, 1, "check finds the pool's crash:\n{out}");
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("failing: run "))
        .unwrap_or_else(|| panic!("no failing run in:\n{out}"))
        .trim()
        .to_string()
}

fn symbol(elf: &[u8], name: &str) -> u64 {
    let file = object::File::parse(elf).expect("the program is an ELF file");
    file.symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"))
        .address()
}

fn open(home: &Home, id: &str, step: u64) -> Session {
    let store = vmm::store::Store::at(home.path());
    let run = store.resolve(id).expect("the run");
    let origin = Origin::of_run(&run, &store).expect("its keyframes");
    Session::open(origin, step, None).expect("the session opens")
}

#[test]
fn breakpoints_steps_reverse_and_watchpoints_on_pool() {
    let home = Home::new();
    let id = failing_pool(&home);
    let mut s = open(&home, &id, 24);
    let elf = s.program().unwrap();
    let worker = symbol(&elf, "worker");
    // pool = {lock (40 bytes), stop, queue, len}: the queue pointer is at +48.
    let queue = symbol(&elf, "pool") + 48;
    assert_eq!(
        s.threads(),
        vec![1000, 1001],
        "threads after the first clone"
    );
    assert_ne!(s.registers(1000).unwrap().fs_base, 0, "main's TLS base");

    let code = s.read_memory(worker, 8).unwrap();
    s.add_breakpoint(worker);
    assert_eq!(s.read_memory(worker, 8).unwrap(), code, "int3 hidden");

    let stop = s.cont().unwrap();
    assert_eq!(
        stop,
        Stop::Breakpoint {
            tid: 1001,
            pc: worker
        }
    );
    let first = s.position().unwrap();
    assert_eq!((first.pc, first.hit), (worker, 1));

    // Forward one instruction at a time, then back through the same positions.
    let mut trail = vec![(first, s.registers(1001).unwrap().regs)];
    for _ in 0..4 {
        assert_eq!(s.step_instruction().unwrap(), Stop::Stepped { tid: 1001 });
        trail.push((s.position().unwrap(), s.registers(1001).unwrap().regs));
    }
    assert!(trail.windows(2).all(|w| w[0].0 != w[1].0));
    for (want, regs) in trail.iter().rev().skip(1) {
        assert_eq!(
            s.reverse_step_instruction().unwrap(),
            Stop::Stepped { tid: 1001 }
        );
        assert_eq!(s.position().unwrap(), *want);
        assert_eq!(s.registers(1001).unwrap().regs, *regs);
    }

    // The second worker hits it next; reverse-continue is back at the first hit.
    let stop = s.cont().unwrap();
    assert_eq!(
        stop,
        Stop::Breakpoint {
            tid: 1002,
            pc: worker
        }
    );
    assert!(s.position().unwrap().step > first.step);
    assert_eq!(
        s.reverse_cont().unwrap(),
        Stop::Breakpoint {
            tid: 1001,
            pc: worker
        }
    );
    assert_eq!(s.position().unwrap(), first);

    // A write watchpoint on the queue pointer: main clears it.
    s.remove_breakpoint(worker);
    let w = Watch {
        addr: queue,
        len: 8,
        kind: WatchKind::Write,
    };
    s.add_watch(w);
    let stop = s.cont().unwrap();
    assert!(
        matches!(stop, Stop::Watch { tid: 1000, watch, .. } if watch == w),
        "{stop:?}"
    );
    assert_eq!(s.read_memory(queue, 8).unwrap(), vec![0; 8]);
    let cleared = s.position().unwrap();
    // Going on, the worker crashes on the freed queue.
    s.remove_watch(w);
    assert!(matches!(
        s.cont().unwrap(),
        Stop::Signal {
            tid: 1002,
            signo: 11
        }
    ));
    // Back to where the queue was cleared, by watchpoint.
    s.add_watch(w);
    assert!(matches!(
        s.reverse_cont().unwrap(),
        Stop::Watch { tid: 1000, .. }
    ));
    assert_eq!(s.position().unwrap(), cleared);

    // Once memory is written, the session is no longer the recording.
    s.write_memory(queue, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    assert!(matches!(
        s.reverse_step_instruction(),
        Err(DebugError::Diverged)
    ));
    drop(s);
    home.replay_identical(&id);
}
