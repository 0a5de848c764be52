//! The variables benchmark (issue 9): what reading a frame's variables
//! costs in `rewind dap`, beside a `stackTrace` of the same frame, measured
//! in the same adapter process over its DAP stream: the first Locals at a
//! position (which opens the debug core and reads DWARF), Locals again,
//! expanding a struct, and an `evaluate`, each as a ratio to stackTrace.
//! On guest/tests/values.c at the step of its mark.
//!
//!   cargo build --release -p rewind-adapter && cargo bench -p rewind-tests --bench variables

use rewind_tests::dap::{median, ms, Client};
use rewind_tests::Home;
use serde_json::json;
use std::time::Duration;

/// Requests of each kind timed for a median.
const ROUNDS: usize = 20;

fn main() {
    println!("rewind variables benchmark");
    println!("rewind binary: {}", rewind_tests::rewind_bin().display());
    let home = Home::new();
    let run = home.run_guest("values", &[]);
    let step = home
        .events_json(&run.id)
        .into_iter()
        .find(|e| e["name"] == "write" && e["text"].as_str().is_some_and(|t| t.contains("mark")))
        .and_then(|e| e["step"].as_u64())
        .expect("the mark");

    let mut dap = Client::start(home.path());
    dap.open(json!({"run": run.id, "step": step}));
    let tid = dap.tid;
    let stack = |dap: &mut Client| dap.timed("stackTrace", json!({"threadId": tid}), false);
    let (_, frames) = stack(&mut dap);
    let frame = frames["stackFrames"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["name"] == "inspect"))
        .expect("inspect on the stack")["id"]
        .clone();
    let stack_trace = median((0..ROUNDS).map(|_| stack(&mut dap).0).collect());
    let scopes = dap.request("scopes", json!({"frameId": frame}), false);
    let locals = scopes["scopes"][0]["variablesReference"].clone();
    let (first, vars) = dap.timed("variables", json!({"variablesReference": locals}), false);
    let again = median(
        (0..ROUNDS)
            .map(|_| {
                dap.timed("variables", json!({"variablesReference": locals}), false)
                    .0
            })
            .collect(),
    );
    let args = scopes["scopes"][1]["variablesReference"].clone();
    let head = dap.request("variables", json!({"variablesReference": args}), false)["variables"][0]
        ["variablesReference"]
        .clone();
    let expand = median(
        (0..ROUNDS)
            .map(|_| {
                dap.timed("variables", json!({"variablesReference": head}), false)
                    .0
            })
            .collect(),
    );
    let evaluate = median(
        (0..ROUNDS)
            .map(|_| {
                dap.timed(
                    "evaluate",
                    json!({"expression": "head->next->next->value", "frameId": frame, "context": "watch"}),
                    false,
                )
                .0
            })
            .collect(),
    );
    let n = vars["variables"].as_array().map_or(0, |v| v.len());
    println!(
        "guest/tests/values.c at step {step}, frame `inspect` ({n} locals), medians of {ROUNDS}:"
    );
    println!(
        "  stackTrace                       {:8.3} ms  1.00x",
        ms(stack_trace)
    );
    let row = |what: &str, d: Duration| {
        println!(
            "  {what:<32} {:8.3} ms  {:.2}x",
            ms(d),
            d.as_secs_f64() / stack_trace.as_secs_f64()
        )
    };
    row("Locals, first at the position", first);
    row("Locals again", again);
    row("expand a struct (*head)", expand);
    row("evaluate head->next->next->value", evaluate);
}
