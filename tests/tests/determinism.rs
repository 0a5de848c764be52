//! The same inputs give the same run: the same id, the same events, the
//! same output, every time; and `bank` gives the same answer every time
//! under the default schedule.

use rewind_tests::{assert_lines, Home};

#[test]
fn same_run_twice_same_id_and_events() {
    let first = Home::new();
    let second = Home::new();
    let a = first.run_guest("threads", &["x"]);
    let b = second.run_guest("threads", &["x"]);
    assert_eq!(
        a.id, b.id,
        "same inputs, different ids:\n{}\n{}",
        a.line, b.line
    );
    assert_eq!(a.status, b.status);
    assert_eq!(a.steps, b.steps, "{}\n{}", a.line, b.line);
    let events = first.ok(&["events", &a.id, "--json"]).stdout;
    assert!(events.lines().count() > 10, "too few events:\n{events}");
    assert_eq!(
        events,
        second.ok(&["events", &b.id, "--json"]).stdout,
        "the two runs' events differ"
    );
    assert_eq!(first.log(&a.id), second.log(&b.id));

    // Again in the same home: still the same id and events.
    let c = first.run_guest("threads", &["x"]);
    assert_eq!(c.id, a.id);
    assert_eq!(events, first.ok(&["events", &c.id, "--json"]).stdout);

    // A different input is a different run.
    let d = first.run_guest("threads", &["y"]);
    assert_ne!(d.id, a.id, "different argv, same id");

    first.replay_identical(&a.id);
    second.replay_identical(&b.id);
    first.replay_identical(&d.id);
}

#[test]
fn bank_gives_the_same_answer_every_time() {
    let home = Home::new();
    let first = home.run(&["--example", "bank"]);
    // Under the default schedule a teller runs from its read to its store
    // without a switch (write does not switch threads): no money is lost.
    assert_eq!(first.status, "exited:0", "{}", first.out);
    assert_eq!(first.out.code, 0);
    let log = home.log(&first.id);
    assert_lines(&log, &["final balance 1150, expected 1150"]);
    let events = home.ok(&["events", &first.id, "--json"]).stdout;
    for _ in 0..4 {
        let again = home.run(&["--example", "bank"]);
        assert_eq!(again.id, first.id);
        assert_eq!(again.status, first.status);
        assert_eq!(again.out.code, first.out.code);
        assert_eq!(again.steps, first.steps);
        assert_eq!(home.log(&again.id), log);
        assert_eq!(home.ok(&["events", &again.id, "--json"]).stdout, events);
    }
    home.replay_identical(&first.id);
}

#[test]
fn bank_fixed_keeps_the_money() {
    let home = Home::new();
    let run = home.run(&["--example", "bank-fixed"]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_lines(&home.log(&run.id), &["final balance 1150, expected 1150"]);
    home.replay_identical(&run.id);
}
