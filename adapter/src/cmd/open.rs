//! `rewind open`: what opens a run at a step in an editor (the launch
//! arguments of `rewind dap`, the VS Code URI, the Neovim command), or with
//! `--editor`, running it.

use crate::util::usage;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;

/// The URI the VS Code extension handles (its publisher.name and path).
pub const VSCODE_URI: &str = "vscode://rewind.rewind/open";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Editor {
    /// VS Code (`code --open-url`), through the Rewind extension.
    Code,
    /// Neovim with nvim-dap and the Rewind plugin.
    Nvim,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Without --editor, prints the `rewind dap` launch arguments (JSON), the VS Code \
                  URI and the Neovim command that open the run; with it, runs that editor."
)]
pub struct OpenArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// The step to open at [default: the fatal signal, else step 0].
    #[arg(value_name = "STEP")]
    pub step: Option<u64>,
    /// Open it beside this run (compare view, divergence mark).
    #[arg(long, value_name = "RUN")]
    pub compare: Option<String>,
    /// Run this editor instead of printing.
    #[arg(long, value_enum)]
    pub editor: Option<Editor>,
}

/// What opens `run` at `step` (beside `compare`).
pub struct Opening {
    pub launch: serde_json::Value,
    pub uri: String,
    pub nvim: Vec<String>,
}

/// The debug adapter's launch configuration that opens a run.
#[derive(Serialize)]
struct LaunchJson<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    request: &'static str,
    name: String,
    run: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compare: Option<&'a str>,
}

pub fn opening(run: &str, step: Option<u64>, compare: Option<&str>) -> Opening {
    let launch = crate::util::json_value(&LaunchJson {
        kind: "rewind",
        request: "launch",
        name: format!("rewind {run}"),
        run,
        step,
        compare,
    });
    let mut query = format!("run={run}");
    let mut cmd = format!("RewindOpen {run}");
    if let Some(s) = step {
        query.push_str(&format!("&step={s}"));
        cmd.push_str(&format!(" {s}"));
    }
    if let Some(c) = compare {
        query.push_str(&format!("&compare={c}"));
        cmd.push_str(&format!(" --compare {c}"));
    }
    Opening {
        launch,
        uri: format!("{VSCODE_URI}?{query}"),
        nvim: vec!["nvim".into(), "-c".into(), cmd],
    }
}

/// The line `fork` and `check` print for a run they made.
pub fn command_line(run: &str, step: Option<u64>, compare: Option<&str>) -> String {
    let mut s = format!("rewind open {run}");
    if let Some(step) = step {
        s.push_str(&format!(" {step}"));
    }
    if let Some(c) = compare {
        s.push_str(&format!(" --compare {c}"));
    }
    s
}

pub fn main(args: OpenArgs) -> Result<i32> {
    let run = crate::app::resolve(&args.run.spec)?;
    if let Some(s) = args.step.filter(|s| *s > run.meta.steps) {
        usage!(
            "step {s} is past the end of run {} ({} steps)",
            run.id,
            run.meta.steps
        );
    }
    let compare = match &args.compare {
        Some(c) => Some(crate::app::resolve(c)?.id),
        None => None,
    };
    let o = opening(&run.id, args.step, compare.as_deref());
    match args.editor {
        None => {
            println!("launch: {}", o.launch);
            println!("vscode: code --open-url '{}'", o.uri);
            println!(
                "nvim:   {} -c '{}'",
                o.nvim[0],
                o.nvim[2].replace('\'', "'\\''")
            );
            Ok(0)
        }
        Some(Editor::Code) => spawn("code", &["--open-url".into(), o.uri]),
        Some(Editor::Nvim) => spawn(&o.nvim[0], &o.nvim[1..]),
    }
}

fn spawn(program: &str, args: &[String]) -> Result<i32> {
    let status = std::process::Command::new(program)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {program}"))?;
    Ok(status.code().unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings() {
        let o = opening("43cafee4edbe338a", Some(36), Some("df83af5bca06e455"));
        assert_eq!(
            o.uri,
            "vscode://rewind.rewind/open?run=43cafee4edbe338a&step=36&compare=df83af5bca06e455"
        );
        assert_eq!(o.launch["step"], 36);
        assert_eq!(o.launch["compare"], "df83af5bca06e455");
        assert_eq!(
            o.nvim[2],
            "RewindOpen 43cafee4edbe338a 36 --compare df83af5bca06e455"
        );
        assert_eq!(command_line("a", None, None), "rewind open a");
    }
}
