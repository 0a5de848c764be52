//! Node.js as its users run it (issue 24): the host's `node`, dynamically
//! linked, runs tests/node/worker.js (a worker thread, messages both ways,
//! a timer, a file written and read back) to the same output as natively,
//! and the run replays identically.

use rewind_tests::*;
use std::path::Path;
use vmm::run::manifest::DEFAULT_ENV;

#[test]
fn node_with_a_worker_thread_runs_as_natively() {
    let Some(node) = host_program("/usr/bin/node", "nodejs") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("node/worker.js");
    let script = std::fs::read_to_string(script).expect("tests/node/worker.js");
    let (want, native) =
        table::timed(|| native_with_env(DEFAULT_ENV, None, &node, &["-e", &script], b""));
    assert_eq!(want.code, 0, "{want}");
    let home = Home::new();
    let (run, wall) = table::timed(|| home.run(&["--", &node, "-e", &script]));
    table::figures("node -e worker.js", &run, wall, native);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    assert_eq!(run.out.stdout, want.stdout, "{}", run.out);
    assert!(
        run.out.stdout.contains("worker: sum 4999950000"),
        "{}",
        run.out
    );
    let events = home.events(&run.id);
    // The main thread, V8's platform workers, libuv's pool and the Worker.
    assert!(
        events.matches("thread start").count() >= 3,
        "fewer threads than node makes:\n{events}"
    );
    home.replay_identical(&run.id);
}
