//! Port I/O the guest makes itself (issue 12, item 3). On these hosts a
//! ring-3 `out` or `in` exits to the monitor even with IOPL 0, so the guest
//! can make an exit that looks like one of the trampoline's: each forgery
//! (`guest/tests/forge.c`) must be the #GP Linux gives, a SIGSEGV with
//! si_code SI_KERNEL at the forging instruction, never a monitor error nor
//! an exit the monitor takes for its own.

use rewind_tests::{assert_lines, Home};

const FORGERIES: [&str; 5] = ["syscall-port", "exception-port", "in", "other", "dx"];

#[test]
fn each_forged_port_exit_is_a_general_protection_fault() {
    let home = Home::new();
    let run = home.run_guest("forge", &[]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let mut want: Vec<String> = FORGERIES
        .iter()
        .map(|f| format!("{f}: SIGSEGV code=128 addr=(nil) trapno=13 rip at the instruction"))
        .collect();
    // A jump to the syscall entry is a system call, and R11 cannot raise IOPL.
    want.push("entry jump: pid 1000, iopl 0".into());
    want.push("done".into());
    let want: Vec<&str> = want.iter().map(String::as_str).collect();
    assert_lines(&home.log(&run.id), &want);
    home.replay_identical(&run.id);
}

#[test]
fn a_forged_port_exit_without_a_handler_kills_with_sigsegv() {
    let home = Home::new();
    for forgery in FORGERIES {
        let run = home.run_guest("forge", &[forgery]);
        assert_eq!(run.status, "killed:SIGSEGV", "{forgery}: {}", run.out);
        assert_eq!(run.out.code, 139, "{forgery}: {}", run.out);
        let log = home.log(&run.id);
        assert!(
            !log.contains("survived"),
            "{forgery}: the program went on:\n{log}"
        );
        let events = home.events(&run.id);
        assert!(
            events
                .lines()
                .any(|l| l.contains("SIGSEGV code=128 addr=0x0")),
            "{forgery}: no #GP's SIGSEGV event:\n{events}"
        );
        home.replay_identical(&run.id);
    }
}
