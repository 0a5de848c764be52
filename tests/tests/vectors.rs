//! Two threads keep distinct values in their vector registers across 1000
//! switches each: every thread switch saves and restores the full extended
//! (XSAVE) state.

use rewind_tests::{assert_lines, cpu_has, Home};

fn keep(mode: &str, regs: &str) {
    let home = Home::new();
    let run = home.run_guest("vector", &[mode]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(
        &home.log(&run.id),
        &[
            &format!("thread 1: {regs} kept over 1000 switches"),
            &format!("thread 2: {regs} kept over 1000 switches"),
        ],
    );
    let yields = home
        .events(&run.id)
        .lines()
        .filter(|l| l.contains("sched_yield"))
        .count();
    assert!(
        yields >= 2000,
        "expected 2000 sched_yield events, saw {yields}"
    );
    home.replay_identical(&run.id);
}

#[test]
fn avx2_registers_survive_switches() {
    assert!(
        cpu_has("avx2"),
        "this CPU has no AVX2: the engine's hosts all do"
    );
    keep("avx2", "ymm0-ymm14");
}

#[test]
fn avx512_registers_survive_switches() {
    if !cpu_has("avx512f") {
        // Hardware, not a package: no script can install it, so it is never required.
        rewind_tests::skipped("this CPU has no AVX-512 (no avx512f in /proc/cpuinfo)");
        return;
    }
    keep("avx512", "zmm0-zmm31");
}
