//! `rewind diff`: compare two runs event by event.

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use vmm::record::diff::first_divergence;

/// Shared events shown before the first difference, and each side's after it.
const CONTEXT: usize = 5;

#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The left run.
    #[arg(value_name = "A")]
    pub left: String,
    /// The right run.
    #[arg(value_name = "B")]
    pub right: String,
    /// One JSON object: {"identical", "events", "divergence": {"left_step",
    /// "right_step", "shared", "left", "right", ..}} (docs/events.md).
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: DiffArgs) -> Result<i32> {
    let (a, b) = (
        crate::app::resolve(&args.left)?,
        crate::app::resolve(&args.right)?,
    );
    let ea = a.events().with_context(|| format!("run {}", a.id))?;
    let eb = b.events().with_context(|| format!("run {}", b.id))?;
    let d = first_divergence(&ea, &eb, CONTEXT);
    if args.json {
        let v = crate::util::json_value(&DiffJson {
            left: &a.id,
            right: &b.id,
            identical: d.is_none(),
            events: [ea.len(), eb.len()],
            divergence: d.as_ref().map(|d| DivergenceJson {
                index: d.index,
                left_step: d.left_step(),
                right_step: d.right_step(),
                shared: vmm::record::json::events(&d.shared),
                left: vmm::record::json::events(&d.left),
                right: vmm::record::json::events(&d.right),
            }),
        });
        println!("{v}");
    } else {
        match &d {
            None => println!(
                "identical: {} events (runs {} and {})",
                ea.len(),
                a.id,
                b.id
            ),
            Some(d) => {
                println!(
                    "left: run {} ({}), right: run {} ({}); they differ from event {}",
                    a.id, a.meta.status, b.id, b.meta.status, d.index
                );
                for l in d.lines() {
                    println!("{l}");
                }
            }
        }
    }
    Ok(if d.is_some() { 1 } else { 0 })
}

/// `rewind diff --json`.
#[derive(Serialize)]
struct DiffJson<'a> {
    left: &'a str,
    right: &'a str,
    identical: bool,
    events: [usize; 2],
    divergence: Option<DivergenceJson>,
}

/// Where two runs' events part: the first differing index, the steps
/// there and the events around it.
#[derive(Serialize)]
struct DivergenceJson {
    index: usize,
    left_step: Option<u64>,
    right_step: Option<u64>,
    shared: Value,
    left: Value,
    right: Value,
}
