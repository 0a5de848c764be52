//! `rewind doctor`: can this host record, and which host facts hold here.

use anyhow::Result;
use clap::Args;
use kvm_ioctls::Kvm;
use serde::Serialize;
use std::path::Path;

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// One JSON object a line: {"ok", "required", "fact", "detail"}.
    #[arg(long)]
    pub json: bool,
    /// Print every x86-64 system call and how far it is supported
    /// (implemented, partial with what is missing, not implemented with why),
    /// from the engine's own dispatch table.
    #[arg(long)]
    pub syscalls: bool,
}

/// A row of the system call table as `rewind doctor --syscalls --json`
/// prints it.
#[derive(Serialize)]
struct SyscallJson<'a> {
    nr: u32,
    name: &'a str,
    support: &'a str,
    note: &'a str,
}

/// `rewind doctor --syscalls`: one line (or JSON object) per call number.
fn print_syscalls(json: bool) -> i32 {
    use vmm::kernel::syscalls::{linux_calls, row::Support};
    for row in linux_calls() {
        let (nr, name) = (row.nr, row.name);
        let (state, note) = match row.support {
            Support::Implemented => ("implemented", ""),
            Support::Partial(what) => ("partial", what),
            Support::Missing(why) => ("not implemented", why),
        };
        if json {
            println!(
                "{}",
                crate::util::json_value(&SyscallJson {
                    nr,
                    name,
                    support: state,
                    note
                })
            );
        } else if note.is_empty() {
            println!("{nr:>3}  {name:<24} {state}");
        } else {
            println!("{nr:>3}  {name:<24} {state}: {note}");
        }
    }
    0
}

/// A fact of the host, and as `rewind doctor --json` prints it.
#[derive(Serialize)]
struct Fact {
    ok: bool,
    /// Recording needs it.
    required: bool,
    fact: String,
    detail: String,
}

fn fact(ok: bool, required: bool, fact: impl Into<String>, detail: impl Into<String>) -> Fact {
    Fact {
        ok,
        required,
        fact: fact.into(),
        detail: detail.into(),
    }
}

fn read_param(module: &str, param: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/module/{module}/parameters/{param}"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Whether a memory slot with dirty-page logging works on a fresh VM.
fn dirty_log_works(kvm: &Kvm) -> Result<(), String> {
    let vm = kvm.create_vm().map_err(|e| e.to_string())?;
    const SIZE: usize = 0x10000;
    // SAFETY: an anonymous private mapping we own and unmap below.
    let host = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if host == libc::MAP_FAILED {
        return Err("mmap failed".into());
    }
    let region = kvm_bindings::kvm_userspace_memory_region {
        slot: 0,
        flags: kvm_bindings::KVM_MEM_LOG_DIRTY_PAGES,
        guest_phys_addr: 0x100000,
        memory_size: SIZE as u64,
        userspace_addr: host as u64,
    };
    // SAFETY: the region is valid for SIZE bytes and outlives the VM (dropped before unmap).
    let r = unsafe { vm.set_user_memory_region(region) }
        .map_err(|e| e.to_string())
        .and_then(|_| vm.get_dirty_log(0, SIZE).map_err(|e| e.to_string()))
        .map(|_| ());
    drop(vm);
    // SAFETY: unmapping what we mapped.
    unsafe { libc::munmap(host, SIZE) };
    r
}

fn check() -> Vec<Fact> {
    let mut facts = Vec::new();
    kvm_facts(&mut facts);
    cpu_facts(&mut facts);
    host_facts(&mut facts);
    store_facts(&mut facts);
    facts
}

/// Whether KVM opens and answers, and has what the machine needs.
fn kvm_facts(facts: &mut Vec<Fact>) {
    let open = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm");
    facts.push(match &open {
        Ok(_) => fact(true, true, "/dev/kvm opens read-write", ""),
        Err(e) => fact(false, true, "/dev/kvm opens read-write", e.to_string()),
    });
    let kvm = match Kvm::new() {
        Ok(k) => Some(k),
        Err(e) => {
            if open.is_ok() {
                facts.push(fact(false, true, "KVM answers", e.to_string()));
            }
            None
        }
    };
    if let Some(kvm) = &kvm {
        use vmm::machine::caps;
        let v = kvm.get_api_version();
        facts.push(fact(
            v == caps::API_VERSION,
            true,
            format!("KVM API version {}", caps::API_VERSION),
            format!("found {v}"),
        ));
        // The list Machine::new checks.
        for (c, has) in caps::report(kvm) {
            facts.push(fact(has, c.required, c.name, c.why));
        }
        match kvm.create_vm().and_then(|vm| vm.create_vcpu(0).map(|_| ())) {
            Ok(()) => facts.push(fact(true, true, "a VM with one vCPU can be created", "")),
            Err(e) => facts.push(fact(
                false,
                true,
                "a VM with one vCPU can be created",
                e.to_string(),
            )),
        }
        match dirty_log_works(kvm) {
            Ok(()) => facts.push(fact(
                true,
                false,
                "dirty page log",
                "debug builds check the Dirty bits against it; REWIND_KVM_DIRTY_LOG uses it alone",
            )),
            Err(e) => facts.push(fact(false, false, "dirty page log", e)),
        }
    }
}

/// What the CPU has, and whether the host is itself a virtual machine.
fn cpu_facts(facts: &mut Vec<Fact>) {
    let xsave = std::arch::is_x86_feature_detected!("xsave");
    facts.push(fact(xsave, true, "CPU has XSAVE", ""));
    facts.push(fact(
        std::arch::is_x86_feature_detected!("avx2"),
        false,
        "CPU has AVX2",
        "guests may use it; its state is kept across switches",
    ));
    facts.push(fact(
        std::arch::is_x86_feature_detected!("avx512f"),
        false,
        "CPU has AVX-512",
        "guests may use it; its state is kept across switches",
    ));

    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let nested = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    facts.push(fact(
        !nested,
        false,
        "host runs on bare metal",
        if nested {
            "this host is itself a virtual machine"
        } else {
            ""
        },
    ));
}

/// Whether a guest's `rdtsc` faults here, tried in a machine.
fn rdtsc_fact(pvm: bool) -> Fact {
    let what = "rdtsc is trapped";
    match vmm::machine::tsc::guest_rdtsc_faults() {
        Ok(true) if pvm => fact(
            true,
            false,
            what,
            "under PVM through the host thread's PR_SET_TSC while the guest runs, with the guest's CR4.TSD: rdtsc and rdtscp read a virtual counter",
        ),
        Ok(true) => fact(true, false, what, "CR4.TSD honoured: rdtsc and rdtscp read a virtual counter"),
        Ok(false) => fact(
            false,
            false,
            what,
            "rdtsc in the guest reads the host TSC, so programs that read the TSC directly (Go's runtime) are not deterministic here",
        ),
        Err(e) => fact(false, false, what, format!("a machine to try it in: {e}")),
    }
}

/// Which KVM this is (PVM or hardware), and what follows from it.
fn host_facts(facts: &mut Vec<Fact>) {
    let pvm = Path::new("/sys/module/kvm_pvm").exists();
    if pvm {
        let native = read_param("kvm_pvm", "pvm_native").unwrap_or_else(|| "?".into());
        facts.push(fact(
            false,
            false,
            "hardware KVM",
            format!(
                "KVM is PVM (paravirtual, kvm_pvm loaded, pvm_native={native}): guest ring 0 is emulated, exits are slow"
            ),
        ));
        facts.push(fact(
            false,
            false,
            "debug registers honoured",
            "not under PVM: breakpoints use int3 and single steps RFLAGS.TF",
        ));
    } else {
        let vendor = ["kvm_intel", "kvm_amd"]
            .into_iter()
            .find(|m| Path::new(&format!("/sys/module/{m}")).exists());
        let hw = vendor.is_some();
        facts.push(fact(
            hw,
            false,
            "hardware KVM",
            vendor.map_or("no kvm_intel or kvm_amd module".to_string(), |m| {
                format!("{m} loaded")
            }),
        ));
        facts.push(fact(
            hw,
            false,
            "debug registers honoured",
            if hw {
                "expected on hardware KVM"
            } else {
                "unknown"
            },
        ));
    }
    facts.push(rdtsc_fact(pvm));
    let pmu = Path::new("/sys/bus/event_source/devices/cpu").exists()
        || Path::new("/sys/bus/event_source/devices/cpu_core").exists();
    facts.push(fact(
        pmu,
        false,
        "PMU (hardware performance counters)",
        "Rewind needs none",
    ));
}

/// Whether runs can be written to the store.
fn store_facts(facts: &mut Vec<Fact>) {
    match vmm::store::Store::from_env()
        .map_err(anyhow::Error::from)
        .and_then(|s| {
            s.prepare()?;
            Ok(s)
        }) {
        Ok(s) => facts.push(fact(
            true,
            true,
            "runs can be written",
            s.home().display().to_string(),
        )),
        Err(e) => facts.push(fact(
            false,
            true,
            "runs can be written",
            crate::util::one_line(&e),
        )),
    }
}

pub fn main(args: DoctorArgs) -> Result<i32> {
    if args.syscalls {
        return Ok(print_syscalls(args.json));
    }
    let facts = check();
    let missing: Vec<&str> = facts
        .iter()
        .filter(|f| f.required && !f.ok)
        .map(|f| f.fact.as_str())
        .collect();
    for f in &facts {
        if args.json {
            println!("{}", crate::util::json_value(f));
        } else {
            let mark = if f.ok { "ok" } else { "no" };
            if f.detail.is_empty() {
                println!("{mark:<3} {}", f.fact);
            } else {
                println!("{mark:<3} {} ({})", f.fact, f.detail);
            }
        }
    }
    if missing.is_empty() {
        if !args.json {
            println!("rewind: this host can record");
        }
        Ok(0)
    } else {
        if !args.json {
            println!("rewind: this host cannot record: {}", missing.join(", "));
        }
        Ok(1)
    }
}
