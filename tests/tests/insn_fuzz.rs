//! Hostile instruction streams (issue 25): guest/tests/insn-fuzz.c forks a
//! child per round that runs a random or crafted ring-3 sequence (in/out,
//! int N, syscall and sysenter with random registers, far transfers, iretq
//! frames, segment loads, privileged and xsave-family instructions, bad
//! addresses, self-modifying code, the trap flag) ending in ud2. Under
//! Rewind every round must end as it ends when the same binary runs
//! directly on this Linux (the same signal, or the same exit), the monitor
//! must neither fail nor hang, and the run replays identically.
//!
//! `REWIND_FUZZ_INSN_ROUNDS` runs more rounds (default 280, 20 a class) and
//! `REWIND_FUZZ_INSN_SEED` another seed (default 1).

use rewind_tests::{guest_arg, run_command, Home, DEADLINE};
use std::process::Command;

/// Rounds that named Linux's 32-bit user code segment (selectors 0x20 to
/// 0x23, the label ends ` compat`): Rewind's GDT is Linux's but for that
/// entry, which it leaves out (a far transfer there would enter
/// compatibility mode, which Rewind does not run), so such a round can end
/// differently. It must still end in a signal, replay identically and
/// never fail the monitor. Every other selector ends as on Linux.
fn names_compat_segment(label: &str) -> bool {
    label.ends_with(" compat")
}

/// Where KVM here is PVM's, what it does without an exit the monitor could
/// see: `int 0x1a` from ring 3 returns (Linux: SIGSEGV), a misaligned
/// `fxrstor` loads (Linux: #GP, SIGSEGV), and `iretq` takes a frame whose
/// CS or SS the CPU refuses (a data segment as CS: Linux's #GP, SIGSEGV);
/// the stream goes on. And on an AMD host, a far `jmp`/`call` through
/// memory with REX.W: PVM emulates far transfers (the guest's selectors
/// are not the host's), and KVM's emulator reads the pointer as Intel's
/// CPUs do (m16:64) where AMD's ignore REX.W (m16:32), so the transfer
/// lands, or faults, where it would on Intel.
fn pvm_differs(label: &str, linux: &str) -> bool {
    let pvm = std::path::Path::new("/sys/module/kvm_pvm").exists();
    let amd = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains("AuthenticAMD"));
    let quirk = label == "int 26"
        || label == "xsave"
        || (label == "iret" && linux.ends_with(": signal 11"))
        || (amd && label.starts_with("far rex.w"));
    pvm && quirk
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn hostile_instruction_streams_end_as_on_linux() {
    let rounds = env_or("REWIND_FUZZ_INSN_ROUNDS", 280).to_string();
    let seed = env_or("REWIND_FUZZ_INSN_SEED", 1).to_string();
    let mut native = Command::new(guest_arg("insn-fuzz"));
    native.args([&seed, &rounds]);
    let native = run_command(native, DEADLINE);
    assert_eq!(native.code, 0, "insn-fuzz on Linux:\n{native}");

    let home = Home::new();
    let run = home.run_guest("insn-fuzz", &[&seed, &rounds]);
    assert_eq!(run.status, "exited:0", "{}", run.out);
    let log = home.log(&run.id);
    let (mut compared, mut differing, mut otherwise) = (0, Vec::new(), Vec::new());
    let rounds_of = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("round "))
            .map(String::from)
            .collect()
    };
    let (linux_rounds, rewind_rounds) = (rounds_of(&native.stdout), rounds_of(&log));
    for (linux, rewind) in linux_rounds.iter().zip(&rewind_rounds) {
        let label = linux
            .split_once(' ')
            .and_then(|(_, rest)| rest.split_once(' '))
            .and_then(|(_, rest)| rest.split(':').next())
            .unwrap_or("");
        let ended = |l: &str| l.contains(": signal ") || l.contains(": exit ");
        assert!(ended(rewind), "a round that did not end: {rewind}");
        // A child that could not map its pages, or came back from ud2.
        assert!(
            !rewind.ends_with(": exit 100") && !rewind.ends_with(": exit 101"),
            "{rewind}"
        );
        if names_compat_segment(label) || pvm_differs(label, linux) {
            if linux != rewind {
                differing.push(format!("{linux} | rewind: {rewind}"));
            }
            continue;
        }
        compared += 1;
        if rewind != linux {
            otherwise.push(format!("{linux} | rewind: {rewind}"));
        }
    }
    assert!(
        otherwise.is_empty(),
        "rounds that ended otherwise than on Linux:\n{}",
        otherwise.join("\n")
    );
    assert_eq!(
        rewind_rounds.len().to_string(),
        rounds,
        "Rewind's run printed other rounds:\n{log}"
    );
    assert_eq!(linux_rounds.len(), rewind_rounds.len(), "{}", native.stdout);
    eprintln!(
        "insn-fuzz seed {seed}: {rounds} rounds, {compared} compared with Linux and equal; \
         {} naming the 32-bit code segment or meeting PVM's quirks differ{}",
        differing.len(),
        differing
            .iter()
            .map(|d| format!("\n  {d}"))
            .collect::<String>()
    );
    home.replay_identical(&run.id);
}
