//! Program variables in `rewind dap`, driven by the DebugClient of
//! `@vscode/debugadapter-testsupport` (tests/dap-client/variables.test.mjs)
//! on runs of guest/tests/values.c and values.rs recorded here, opened at
//! the step of their mark, and on the failing run of the pool example at
//! its crash. Home replays every run when it is dropped.

use rewind_tests::dap::{debug_client, guest_source};
use rewind_tests::{killed_narrowed_run, Home};

/// `run:step` of a run of guest `name`, the step being its `mark` write.
fn recorded(home: &Home, name: &str) -> String {
    let run = home.run_guest(name, &[]);
    assert_eq!(run.status, "exited:0", "{}", run.line);
    let step = home
        .events_json(&run.id)
        .into_iter()
        .find(|e| e["name"] == "write" && e["text"].as_str().is_some_and(|t| t.contains("mark")))
        .and_then(|e| e["step"].as_u64())
        .unwrap_or_else(|| panic!("no mark in run {}", run.id));
    format!("{}:{step}", run.id)
}

#[test]
fn debug_client_reads_variables() {
    let home = Home::new();
    let c = recorded(&home, "values");
    let rust = recorded(&home, "values-rust");
    let check = home.rewind(&["check", "--example", "pool", "--json"]);
    assert_eq!(check.code, 1, "{check}");
    let report: serde_json::Value = serde_json::from_str(check.stdout.trim()).expect("JSON");
    // The run of the two that crashed (check labels them by outcome).
    let pool = killed_narrowed_run(&report);
    debug_client(
        "variables.test.mjs",
        &[
            ("REWIND_HOME", home.path().as_os_str()),
            ("VALUES_C", c.as_ref()),
            ("VALUES_RUST", rust.as_ref()),
            ("POOL_FAILING", pool.as_ref()),
        ],
    );
}

/// Variables by name where the debug core stops, on guest/tests/account.c
/// (tests/dap-client/account.test.mjs): conditions over variables both
/// ways, the Globals scope, data breakpoints on a variable, thread-locals,
/// logpoints printing as continue and reverseContinue pass them, and errno
/// with glibc and (when musl-gcc built `account-musl`) musl.
#[test]
fn debug_client_names_variables_in_breakpoints() {
    let account = rewind_tests::guest("account");
    let source = guest_source("account.c");
    let mut env = vec![
        ("ACCOUNT", account.as_os_str()),
        ("ACCOUNT_SOURCE", source.as_os_str()),
    ];
    let musl = rewind_tests::optional_guest("account-musl");
    if let Some(m) = &musl {
        env.push(("ACCOUNT_MUSL", m.as_ref()));
    }
    debug_client("account.test.mjs", &env);
}
