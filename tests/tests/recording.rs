//! The promise of the README's "Tests": every run a test records is replayed
//! and must be identical. `Home` keeps it: these tests show that it notes
//! runs however they were made, and that a replay that differs fails.

use rewind_tests::{guest_arg, run_command, Home, DEADLINE};
use std::process::Command;

#[test]
fn runs_made_by_any_command_or_process_are_replayed() {
    let home = Home::new();
    let run = home.run_guest("hello", &[]);
    // A run the test starts with its own process, bypassing `Home::rewind`.
    let mut c = Command::new(rewind_tests::rewind_bin());
    c.args(["run", "--seed", "7", "--", &guest_arg("hello")])
        .env("REWIND_HOME", home.path());
    assert_eq!(run_command(c, DEADLINE).code, 0);
    let pending = home.unreplayed_runs();
    assert_eq!(pending.len(), 2, "{pending:?}");
    assert!(pending.contains(&run.id), "{pending:?}");
    home.replay_identical(&run.id[..8]);
    assert_eq!(home.unreplayed_runs().len(), 1);
    home.replay_recorded();
    assert!(home.unreplayed_runs().is_empty());
}

#[test]
fn a_run_that_no_longer_replays_fails_the_test() {
    let home = Home::new();
    let run = home.run_guest("hello", &[]);
    // Its recorded output no longer matches what the program writes.
    let output = home.path().join("runs").join(&run.id).join("output");
    let mut bytes = std::fs::read(&output).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 1;
    std::fs::write(&output, bytes).unwrap();
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| home.replay_recorded()));
    assert!(failed.is_err(), "a differing replay passed");
    // Dropping the home would fail the same way.
    home.forget(&run.id);
}
