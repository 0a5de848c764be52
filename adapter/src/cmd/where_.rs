//! `rewind where RUN STEP [--tid T] [--json]`: where a thread was when the
//! exit that is STEP happened (before the monitor served it): its stack,
//! the frame in the user's own code with the source around its line, and
//! the frames that called it. By default the thread that made the step.

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use symbols::{Backtrace, Source};
use vmm::inspect::{at_exit, SeekError};

#[derive(Args, Debug)]
pub struct WhereArgs {
    #[command(flatten)]
    pub run: crate::util::RunArg,
    /// The step: its exit, as the thread made it.
    #[arg(value_name = "STEP")]
    pub step: u64,
    /// The thread (default: the one that made the step).
    #[arg(long, value_name = "T")]
    pub tid: Option<u32>,
    /// Every frame, which one was chosen, and the source, as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Lines of source shown either side of the chosen line.
const CONTEXT: u32 = 3;

/// What `where` found inside the machine.
struct Found {
    pid: u32,
    tid: u32,
    name: String,
    state: String,
    bt: Option<Backtrace>,
    source: Option<Result<Source, String>>,
    notes: Vec<String>,
}

pub fn main(args: WhereArgs) -> Result<i32> {
    let run = crate::app::inside::run_at(&args.run.spec, args.step)?;
    let inside = crate::app::inside::Inside::of(&run, args.step.saturating_sub(1))?;
    let inputs = &inside.inputs;
    let want = args.tid;
    let pages = inside.store.pages();
    let found = at_exit(
        inputs,
        inside.keyframe(),
        &pages,
        args.step,
        &inside.limits,
        |k| {
            let tid = want.unwrap_or_else(|| k.cur_tid());
            let t = k.threads.get(&tid)?.clone();
            let state = k
                .where_threads_are()
                .into_iter()
                .find(|l| l.starts_with(&format!("thread {}/{tid}:", t.pid)))
                .and_then(|l| l.split_once(": ").map(|(_, rest)| rest.to_string()))
                .map(|s| match s.rfind(", at 0x") {
                    Some(cut) => s[..cut].to_string(),
                    None => s,
                })
                .unwrap_or_default();
            let bt = k.backtrace(tid);
            let symbolizer = k.symbolizer_of(t.pid);
            let mut notes = symbolizer.as_ref().map(|s| s.notes()).unwrap_or_default();
            let source = bt.as_ref().and_then(|bt| {
                let loc = bt.frames.get(bt.chosen)?.location.clone()?;
                let mut s = (*symbolizer?).clone();
                s.program_mtime = k.program_mtime(t.pid);
                let found = s
                    .source(&loc.file, Some(loc.line), &mut |p| k.file_contents(p))
                    .map_err(|e| e.to_string());
                notes = s.notes();
                Some(found)
            });
            Some(Found {
                pid: t.pid,
                tid,
                name: t.name.clone(),
                state,
                bt,
                source,
                notes,
            })
        },
    );
    let found = match found {
        Ok(Some(f)) => f,
        Ok(None) => anyhow::bail!(
            "run {} has no thread {} at step {}",
            run.id,
            want.map_or_else(String::new, |t| t.to_string()),
            args.step
        ),
        Err(SeekError::Ended(at)) => return Err(crate::app::inside::ended(&run, args.step, at)),
        Err(e) => return Err(e.into()),
    };
    for n in &found.notes {
        eprintln!("rewind: {n}; frames without debug info are named by symbol");
    }
    if args.json {
        print_json(&run.id, args.step, &found)?;
    } else {
        print_text(&run.id, args.step, &found);
    }
    Ok(0)
}

fn print_text(run: &str, step: u64, f: &Found) {
    println!(
        "run {run}, step {step}: thread {}/{} ({}): {}",
        f.pid, f.tid, f.name, f.state
    );
    let Some(bt) = &f.bt else {
        println!("  (no symbols for this program)");
        return;
    };
    for inner in &bt.frames[..bt.chosen] {
        println!("  in  {}  {:#x}", inner.place(), inner.pc);
    }
    let Some(chosen) = bt.frames.get(bt.chosen) else {
        return;
    };
    println!("  at  {}  {:#x}", chosen.place(), chosen.pc);
    match (&f.source, &chosen.location) {
        (Some(Ok(src)), Some(loc)) => {
            for (n, text) in src.around(loc.line, CONTEXT) {
                let mark = if n == loc.line { ">" } else { " " };
                println!("  {mark} {n:5} | {text}");
            }
            println!("      source: {}", src.provenance());
        }
        (Some(Err(e)), _) => println!("      ({e})"),
        _ => {}
    }
    for outer in &bt.frames[bt.chosen + 1..] {
        let how = if outer.inlined { " (inlined)" } else { "" };
        println!("  called from {}{how}  {:#x}", outer.place(), outer.pc);
    }
    if let Some(why) = &bt.stopped {
        println!("  (unwinding stopped: {why})");
    }
}

/// `rewind where --json`.
#[derive(Serialize)]
struct WhereJson<'a> {
    run: &'a str,
    step: u64,
    pid: u32,
    tid: u32,
    thread_name: &'a str,
    state: &'a str,
    frames: Vec<FrameJson<'a>>,
    chosen: Option<usize>,
    stopped: Option<&'a str>,
    source: Option<SourceJson<'a>>,
    notes: &'a [String],
}

/// A frame as symbols gives it, with whether it is the one chosen and its
/// place (`function (file:line)`).
#[derive(Serialize)]
struct FrameJson<'a> {
    #[serde(flatten)]
    frame: &'a symbols::Frame,
    chosen: bool,
    place: String,
}

/// The chosen frame's source around its line, or why there is none.
#[derive(Serialize)]
#[serde(untagged)]
enum SourceJson<'a> {
    Found {
        path: &'a str,
        origin: &'a symbols::source::Origin,
        caveat: &'a Option<String>,
        line: u32,
        lines: Vec<LineJson<'a>>,
    },
    Missing {
        error: &'a str,
    },
}

#[derive(Serialize)]
struct LineJson<'a> {
    line: u32,
    text: &'a str,
}

fn print_json(run: &str, step: u64, f: &Found) -> Result<()> {
    let frames =
        f.bt.iter()
            .flat_map(|bt| {
                bt.frames
                    .iter()
                    .enumerate()
                    .map(move |(i, frame)| FrameJson {
                        frame,
                        chosen: i == bt.chosen,
                        place: frame.place(),
                    })
            })
            .collect();
    let source = f.source.as_ref().map(|s| match s {
        Ok(s) => {
            let line =
                f.bt.as_ref()
                    .and_then(|bt| bt.frames[bt.chosen].location.as_ref())
                    .map_or(0, |l| l.line);
            SourceJson::Found {
                path: &s.path,
                origin: &s.origin,
                caveat: &s.caveat,
                line,
                lines: s
                    .around(line, CONTEXT)
                    .into_iter()
                    .map(|(line, text)| LineJson { line, text })
                    .collect(),
            }
        }
        Err(error) => SourceJson::Missing { error },
    });
    let out = WhereJson {
        run,
        step,
        pid: f.pid,
        tid: f.tid,
        thread_name: &f.name,
        state: &f.state,
        frames,
        chosen: f.bt.as_ref().map(|b| b.chosen),
        stopped: f.bt.as_ref().and_then(|b| b.stopped.as_deref()),
        source,
        notes: &f.notes,
    };
    let out = crate::util::json_value(&out);
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
