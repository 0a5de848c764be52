//! What a session shows of a run: the machine at a step (by seeking, as
//! `rewind ps` does), its events and thread lanes as the replies show them.

use super::replies::{LaneThread, Lanes, RunEvent};
use anyhow::Result;
use vmm::inspect::ThreadAt;
use vmm::record::switches::{stretches, Switch};
use vmm::run::{Event, EventKind};
use vmm::store::Run;

/// The machine at a step.
#[derive(Debug, Clone)]
pub struct View {
    /// The step the registers are from: the position, or the step before
    /// it when the process ended at the position (a crash).
    pub state_step: u64,
    pub threads: Vec<ThreadAt>,
    pub virtual_ns: u64,
    /// Each thread's stack (the symbols crate's unwinding), by tid.
    pub stacks: std::collections::BTreeMap<u32, symbols::Backtrace>,
}

/// Seeks `run` to `step` and collects its threads. When no process is left
/// after `step` (the run ended there), the machine is the step before.
pub fn seek(run: &Run, step: u64) -> Result<View> {
    if !run.dir.join("manifest.json").exists() {
        anyhow::bail!("run {} was removed from the store", run.id);
    }
    let (state_step, (threads, virtual_ns, stacks)) =
        match crate::app::inside::seek(run, step, look) {
            Ok(r) => (step, r),
            Err(e) if step > 0 && step >= run.meta.steps => {
                match crate::app::inside::seek(run, step - 1, look) {
                    Ok(r) => (step - 1, r),
                    Err(_) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
    Ok(View {
        state_step,
        threads,
        virtual_ns,
        stacks,
    })
}

type Look = (
    Vec<ThreadAt>,
    u64,
    std::collections::BTreeMap<u32, symbols::Backtrace>,
);

/// The threads, the virtual time and the stacks of a machine.
fn look(k: &mut vmm::kernel::Kernel) -> Look {
    let threads = k.threads_at();
    let stacks = threads
        .iter()
        .filter_map(|t| Some((t.tid, k.backtrace(t.tid)?)))
        .collect();
    (threads, k.clock.elapsed_ns(), stacks)
}

/// The machine of a debug session where it stands (inside step `step`).
pub fn of_kernel(k: &mut vmm::kernel::Kernel, step: u64) -> View {
    let (threads, virtual_ns, stacks) = look(k);
    View {
        state_step: step,
        threads,
        virtual_ns,
        stacks,
    }
}

/// `1000/1002 worker`.
pub fn thread_label(pid: u32, tid: u32, name: &str) -> String {
    format!("{pid}/{tid} {name}")
}

/// An event's kind as the custom messages name it.
pub fn kind_name(e: &Event) -> &'static str {
    match &e.kind {
        EventKind::Syscall { .. } => "syscall",
        EventKind::ThreadStart { .. } => "threadStart",
        EventKind::ThreadExit { .. } => "threadExit",
        EventKind::Signal { .. } => "signal",
        EventKind::ProcessExit { .. } => "exit",
        EventKind::Sdk { .. } => "sdk",
        EventKind::Access { .. } => "access",
    }
}

/// What happened, without the step and thread (`write(1, "hi\n") = 3`).
pub fn event_text(e: &Event) -> String {
    match &e.kind {
        EventKind::Syscall { text, .. } => text.clone(),
        _ => {
            let full = e.to_string();
            let prefix = format!("{:>8}  {}/{}  ", e.step, e.pid, e.tid);
            full.strip_prefix(&prefix).unwrap_or(&full).to_string()
        }
    }
}

pub fn run_event(e: &Event) -> RunEvent {
    RunEvent {
        step: e.step,
        pid: e.pid,
        tid: e.tid,
        kind: kind_name(e),
        text: event_text(e),
    }
}

/// Events worth a mark on a timeline: signals, exits, SDK calls, thread
/// starts and exits (not system calls, nor memory accesses).
pub fn of_interest(e: &Event) -> bool {
    !matches!(e.kind, EventKind::Syscall { .. } | EventKind::Access { .. })
}

/// Each thread's stretches on the CPU in `from..=to`, at most `max` a
/// thread: when a thread has more, neighbouring stretches are merged into
/// buckets of `(to - from + 1) / max` steps, and `coarse` says so.
pub fn lanes(
    switches: &[Switch],
    end: u64,
    from: u64,
    to: u64,
    max: usize,
    names: &std::collections::BTreeMap<u32, String>,
) -> Lanes {
    let max = max.max(1);
    let all = stretches(switches, end, from, to);
    let mut by: std::collections::BTreeMap<(u32, u32), Vec<(u64, u64)>> = Default::default();
    for (a, b, s) in all {
        by.entry((s.pid, s.tid)).or_default().push((a, b));
    }
    let width = to.saturating_sub(from) + 1;
    let bucket = width.div_ceil(max as u64).max(1);
    let mut coarse = false;
    let threads: Vec<LaneThread> = by
        .into_iter()
        .map(|((pid, tid), list)| {
            let list = if list.len() > max {
                coarse = true;
                merge_into_buckets(&list, from, bucket)
            } else {
                list
            };
            let name = names.get(&tid).cloned().unwrap_or_default();
            LaneThread {
                pid,
                tid,
                name: thread_label(pid, tid, &name),
                stretches: list,
            }
        })
        .collect();
    Lanes {
        run: String::new(),
        from,
        to,
        coarse,
        threads,
        compare: None,
    }
}

/// Stretches widened to whole buckets and merged where they touch.
fn merge_into_buckets(list: &[(u64, u64)], from: u64, bucket: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(a, b) in list {
        let a = from + (a - from) / bucket * bucket;
        let b = from + ((b - from) / bucket + 1) * bucket - 1;
        match out.last_mut() {
            Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// A thread's registers by name, in the order the Registers scope shows them.
pub fn named_registers(t: &vmm::inspect::ThreadAt) -> [(&'static str, u64); 20] {
    let r = &t.regs;
    [
        ("rip", r.rip),
        ("rsp", r.rsp),
        ("rbp", r.rbp),
        ("rax", r.rax),
        ("rbx", r.rbx),
        ("rcx", r.rcx),
        ("rdx", r.rdx),
        ("rsi", r.rsi),
        ("rdi", r.rdi),
        ("r8", r.r8),
        ("r9", r.r9),
        ("r10", r.r10),
        ("r11", r.r11),
        ("r12", r.r12),
        ("r13", r.r13),
        ("r14", r.r14),
        ("r15", r.r15),
        ("rflags", r.rflags),
        ("fs_base", t.fs_base),
        ("gs_base", t.gs_base),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(step: u64, tid: u32) -> Switch {
        Switch { step, pid: 1, tid }
    }

    #[test]
    fn lanes_are_bounded() {
        // Two threads alternating every step for 1000 steps.
        let s: Vec<Switch> = (0..1000).map(|i| sw(i, 1 + (i % 2) as u32)).collect();
        let names = Default::default();
        let v = lanes(&s, 999, 0, 999, 10, &names);
        assert!(v.coarse);
        for t in &v.threads {
            assert!(t.stretches.len() <= 10);
        }
        let v = lanes(&s, 999, 10, 13, 10, &names);
        assert!(!v.coarse);
        assert_eq!(v.threads[0].stretches, [(10, 10), (12, 12)]);
    }
}
