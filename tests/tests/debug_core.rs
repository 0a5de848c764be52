//! The debug-session core (`vmm::debug`) on the failing run of the `pool`
//! example: breakpoints hidden from memory reads, single steps and reverse
//! single steps through the same positions, reverse-continue back to the
//! previous hit, write, read and access watchpoints on the queue pointer
//! (on a run recorded with memory scheduling points too), and reverse
//! execution refused once memory was written. The runs still replay
//! identically afterwards.

use object::{Object, ObjectSymbol};
use rewind_tests::Home;
use vmm::debug::{DebugCore, DebugError, Origin, Stop, Watch, WatchKind};

/// The failing run `rewind check --example pool` finds (a worker's SIGSEGV).
pub fn failing_pool(home: &Home) -> String {
    home.failing_example("pool", "syscalls")
}

fn symbol(elf: &[u8], name: &str) -> u64 {
    let file = object::File::parse(elf).expect("the program is an ELF file");
    file.symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"))
        .address()
}

/// Adds `w`, continues, and expects to stop at it: the thread that hit it.
fn stop_at_watch(s: &mut DebugCore, w: Watch) -> vmm::kernel::task::Tid {
    s.add_watch(w);
    match s.cont().unwrap() {
        Stop::Watch { tid, watch, .. } if watch == w => tid,
        other => panic!("{w:?}: {other:?}"),
    }
}

/// A read watch on the upper half of the 8-byte pointer at `addr`: a load
/// of the whole pointer starts below it.
fn upper_half(addr: u64) -> Watch {
    Watch {
        addr: addr + 4,
        len: 4,
        kind: WatchKind::Read,
    }
}

fn open(home: &Home, id: &str, step: u64) -> DebugCore {
    let store = vmm::store::Store::at(home.path());
    let run = store.resolve(id).expect("the run");
    let origin = Origin::of_run(&run, &store).expect("its keyframes");
    DebugCore::open(origin, step, None).expect("the session opens")
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
    assert_eq!(stop_at_watch(&mut s, w), 1000);
    assert_eq!(s.read_memory(queue, 8).unwrap(), vec![0; 8]);
    let cleared = s.position().unwrap();
    // A read watch on the pointer's upper half: the worker's load of the
    // whole pointer starts below it, and is seen.
    s.remove_watch(w);
    assert_eq!(stop_at_watch(&mut s, upper_half(queue)), 1002);
    s.remove_watch(upper_half(queue));
    // Going on, the worker crashes on the freed queue.
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

/// The steps of the run's recorded events (accesses too) that hold `what`.
fn recorded_steps(home: &Home, id: &str, what: &str) -> Vec<u64> {
    let out = home.rewind(&["events", "--accesses", id]);
    out.stdout
        .lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Watchpoints on a run recorded with memory scheduling points: the queue
/// pointer's page is one the kernel hides from ring 3 (main and the workers
/// share it), so every access to it is a step; a watch on it sees main's
/// write and a worker's read where the recording made them (a read watch on
/// the pointer's upper half too), the fork still reaches the crash at the
/// recorded step, and reverse-continue is back at the read.
#[test]
fn watchpoints_on_a_run_with_memory_points() {
    let home = Home::new();
    let id = home.failing_example("pool", "memory");
    let shutdown = recorded_steps(&home, &id, "main: shutting down")[0];
    let mut s = open(&home, &id, shutdown);
    let queue = symbol(&s.program().unwrap(), "pool") + 48;
    let hex = format!("{queue:#x} (8 bytes)");
    // The recording's points on the queue pointer: main's write, then the
    // dying worker's read.
    let writes = recorded_steps(&home, &id, &format!("write {hex}"));
    let reads = recorded_steps(&home, &id, &format!("read {hex}"));
    let segv = recorded_steps(&home, &id, "SIGSEGV")[0];
    let (cleared, last_read) = (writes[0], *reads.last().unwrap());
    assert!(shutdown < cleared && cleared < last_read && last_read < segv);

    let write = Watch {
        addr: queue,
        len: 8,
        kind: WatchKind::Write,
    };
    assert_eq!(stop_at_watch(&mut s, write), 1000);
    assert_eq!(s.read_memory(queue, 8).unwrap(), vec![0; 8]);
    // The access completes after its point was served, before main's next one.
    assert!(s.step() >= cleared, "{} < {cleared}", s.step());
    let at_clear = s.position().unwrap();

    let access = Watch {
        kind: WatchKind::Access,
        ..write
    };
    let reader = stop_at_watch(&mut s, access);
    assert_ne!(reader, 1000, "a worker reads it");
    assert!(s.step() >= last_read, "{} < {last_read}", s.step());
    let at_read = s.position().unwrap();
    // The same load seen by a read watch on the pointer's upper half (the
    // load starts below it), from the clear again.
    s.go_to(at_clear).unwrap();
    s.remove_watch(access);
    assert_eq!(stop_at_watch(&mut s, upper_half(queue)), reader);
    assert_eq!(s.position().unwrap(), at_read);
    s.remove_watch(upper_half(queue));
    s.add_watch(access);

    // On to the crash, at the recorded step: the watches took no step.
    let stop = s.cont().unwrap();
    assert_eq!(
        stop,
        Stop::Signal {
            tid: reader,
            signo: 11
        }
    );
    assert_eq!(s.step() + 1, segv, "the fault is served as the next step");

    // reverse-continue: back at the read, then at the write.
    assert!(matches!(s.reverse_cont().unwrap(), Stop::Watch { tid, .. } if tid == reader));
    assert_eq!(s.position().unwrap(), at_read);
    s.remove_watch(access);
    assert!(matches!(
        s.reverse_cont().unwrap(),
        Stop::Watch { tid: 1000, .. }
    ));
    assert_eq!(s.position().unwrap(), at_clear);
    drop(s);
    home.replay_identical(&id);
}

/// What a session shows where it stands: the step, the thread on the CPU,
/// every thread's registers and the counter the threads share.
fn state(s: &mut DebugCore, shared: u64) -> (u64, u32, Vec<String>, Vec<u8>) {
    let regs = s
        .threads()
        .into_iter()
        .map(|t| format!("{t} {:?}", s.registers(t).unwrap().regs))
        .collect();
    (
        s.step(),
        s.current_thread(),
        regs,
        s.read_memory(shared, 8).unwrap(),
    )
}

/// Travels through the session's snapshots in memory, restored in its own
/// VM, reach the recording's states exactly: a session with them and one
/// without (a budget of 0: keyframes on disk, then forward) stop at the
/// same positions with the same registers and memory, going to steps both
/// ways, stepping back by instruction and reverse-continuing; a small
/// budget bounds what they hold and still gives the same states.
#[test]
fn snapshots_in_memory_restore_the_recordings_states() {
    let home = Home::new();
    let run = home.run_guest("long", &["6000"]);
    let mut with = open(&home, &run.id, 0);
    let mut without = open(&home, &run.id, 0);
    let mut small = open(&home, &run.id, 0);
    without.set_snapshot_budget(0);
    small.set_snapshot_budget(256 << 10);
    let elf = with.program().unwrap();
    let shared = symbol(&elf, "shared");
    let work = symbol(&elf, "work");
    for step in [3000, 2990, 2999, 1200, 2998, 3001, 40, 2500, 2997] {
        for s in [&mut with, &mut without, &mut small] {
            s.go_to_step(step).unwrap();
        }
        let want = state(&mut without, shared);
        assert_eq!(state(&mut with, shared), want, "at step {step}");
        assert_eq!(state(&mut small, shared), want, "at step {step}, small");
    }
    // Back by instruction across the start of a step, three times.
    for _ in 0..3 {
        let mut stops = Vec::new();
        for s in [&mut with, &mut without, &mut small] {
            stops.push((s.reverse_step_instruction().unwrap(), s.position().unwrap()));
        }
        assert!(stops.iter().all(|x| *x == stops[0]), "{stops:?}");
        let want = state(&mut without, shared);
        assert_eq!(state(&mut with, shared), want);
        assert_eq!(state(&mut small, shared), want);
    }
    // Back to the previous entry of `work` (a thread's start), from late on.
    let mut stops = Vec::new();
    for s in [&mut with, &mut without, &mut small] {
        s.go_to_step(5000).unwrap();
        s.add_breakpoint(work);
        stops.push((s.reverse_cont().unwrap(), s.position().unwrap()));
    }
    assert!(
        matches!(stops[0].0, Stop::Breakpoint { pc, .. } if pc == work),
        "{stops:?}"
    );
    assert!(stops.iter().all(|x| *x == stops[0]), "{stops:?}");
    let want = state(&mut without, shared);
    assert_eq!(state(&mut with, shared), want);

    let (w, wo, sm) = (
        with.snapshot_stats(),
        without.snapshot_stats(),
        small.snapshot_stats(),
    );
    assert!(w.from_memory > 0 && w.kept > 0, "{w:?}");
    assert_eq!((wo.from_memory, wo.kept, wo.bytes), (0, 0, 0), "{wo:?}");
    assert!(sm.bytes <= 256 << 10 && sm.evicted > 0, "{sm:?}");
    drop((with, without, small));
    home.replay_identical(&run.id);
}

/// Going to the step of the fault that ended a run (served's SIGSEGV, its
/// last step) stands where the fault was raised, its signal pending, as a
/// session opened there does: from the start, from the step before and
/// from the fault itself; and reverse single steps go on from there. A
/// normal exit's step is still the end.
#[test]
fn go_to_the_step_of_the_fault_stands_at_the_fault() {
    let home = Home::new();
    let run = home.run_guest("served", &[]);
    assert_eq!(run.status, "killed:SIGSEGV");
    let last = run.steps.expect("the run's steps");
    let mut s = open(&home, &run.id, last);
    assert!(s.signal_pending());
    let fault = s.position().unwrap();
    for from in [0, last - 1, last] {
        s.go_to_step(from).unwrap();
        s.go_to_step(last).unwrap();
        assert!(s.signal_pending(), "from step {from}");
        assert_eq!(s.position().unwrap(), fault, "from step {from}");
    }
    assert!(matches!(
        s.reverse_step_instruction().unwrap(),
        Stop::Stepped { .. }
    ));
    assert!(!s.signal_pending());
    assert!(s.position().unwrap() < fault);
    let exited = home.run_guest("hello", &[]);
    assert_eq!(exited.status, "exited:0");
    let end = exited.steps.expect("the run's steps");
    let mut s = open(&home, &exited.id, end - 1);
    assert!(matches!(s.go_to_step(end), Err(DebugError::Ended(e)) if e == end));
    home.replay_identical(&run.id);
    home.replay_identical(&exited.id);
}
