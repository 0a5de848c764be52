//! Real Slurm on loopback: the test starts Debian's munged, slurmctld and
//! slurmd in a temporary directory (one node, two CPUs; scripts/setup-tests
//! installs them), submits a check as a job array and a dependent merge job
//! with contrib/slurm/submit, and expects the merge's report to be the
//! one-machine check's, with two array tasks running at once. The daemons
//! are stopped when the test ends, passed or failed; when they cannot start
//! the test says why and is skipped.

use rewind_tests::{rewind_bin, skipped, without_wall_time, Home};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The cluster's daemons, stopped (and its jobs cancelled) when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    daemons: Vec<Child>,
}

impl Cluster {
    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", self.conf());
        cmd
    }

    /// `program ARGS`' standard output, or why it failed.
    fn output(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let out = self
            .command(program)
            .args(args)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{program} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.output("scancel", &["--partition", "test"]);
        for d in self.daemons.iter_mut().rev() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

fn hostname() -> String {
    let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    h.trim()
        .split('.')
        .next()
        .unwrap_or("localhost")
        .to_string()
}

fn slurm_conf(dir: &Path, host: &str) -> String {
    let d = dir.display();
    format!(
        "ClusterName=rewindtest\nSlurmctldHost={host}\nSlurmctldPort=16817\nSlurmdPort=16818\n\
         SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nAuthInfo=socket={d}/run/munge.sock\n\
         CredType=cred/munge\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
         SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
         SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n\
         SelectTypeParameters=CR_CPU\nReturnToService=2\nMpiDefault=none\nJobCompType=jobcomp/none\n\
         AccountingStorageType=accounting_storage/none\n\
         NodeName={host} CPUs=2 State=UNKNOWN\n\
         PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP\n"
    )
}

/// munged with a key of its own (owned by munge, mode 400) and a socket in
/// the temporary directory, then slurmctld and slurmd in the foreground.
fn start() -> Result<Cluster, String> {
    for p in ["munged", "slurmctld", "slurmd", "sbatch", "setpriv"] {
        if !Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return Err(format!(
                "{p} is not installed (scripts/setup-tests installs it)"
            ));
        }
    }
    let tmp = tempfile::Builder::new()
        .prefix("rewind-slurm-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let mut cluster = Cluster {
        dir: tmp,
        daemons: Vec::new(),
    };
    let d = cluster.dir.path().to_path_buf();
    let sh = |script: &str| -> Result<(), String> {
        let ok = Command::new("sh")
            .args(["-c", script])
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(()).ok_or_else(|| format!("`{script}` failed"))
    };
    let dd = d.display();
    sh(&format!(
        "chmod 755 {dd} && mkdir -p {dd}/key {dd}/run {dd}/state {dd}/spool {dd}/tmp && \
         head -c 1024 /dev/urandom > {dd}/key/munge.key && chown -R munge:munge {dd}/key {dd}/run && \
         chmod 700 {dd}/key && chmod 400 {dd}/key/munge.key && chmod 755 {dd}/run"
    ))?;
    std::fs::write(cluster.conf(), slurm_conf(&d, &hostname())).map_err(|e| e.to_string())?;
    let munged = Command::new("setpriv")
        .args([
            "--reuid=munge",
            "--regid=munge",
            "--init-groups",
            "munged",
            "--foreground",
        ])
        .arg(format!("--key-file={dd}/key/munge.key"))
        .arg(format!("--socket={dd}/run/munge.sock"))
        .arg(format!("--pid-file={dd}/run/munged.pid"))
        .arg(format!("--seed-file={dd}/run/munged.seed"))
        .arg(format!("--log-file={dd}/run/munged.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("munged: {e}"))?;
    cluster.daemons.push(munged);
    wait_for(|| d.join("run/munge.sock").exists(), 20).map_err(|_| {
        format!(
            "munged did not start: {}",
            cluster.log_tail("run/munged.log")
        )
    })?;
    for daemon in ["slurmctld", "slurmd"] {
        let child = cluster
            .command(daemon)
            .args(["-D", "-f"])
            .arg(cluster.conf())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{daemon}: {e}"))?;
        cluster.daemons.push(child);
    }
    let idle = || {
        cluster
            .output("sinfo", &["-h", "-o", "%T"])
            .is_ok_and(|s| s.trim() == "idle")
    };
    wait_for(idle, 60).map_err(|_| {
        format!(
            "the node is not idle after 60 s: slurmctld: {}; slurmd: {}",
            cluster.log_tail("slurmctld.log"),
            cluster.log_tail("slurmd.log")
        )
    })?;
    Ok(cluster)
}

fn wait_for(mut ready: impl FnMut() -> bool, secs: u64) -> Result<(), ()> {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(())
}

#[test]
fn a_check_through_a_slurm_job_array() {
    let cluster = match start() {
        Ok(c) => c,
        Err(why) => return skipped(&format!("Slurm on loopback: {why}")),
    };
    let one = Home::new();
    let want = one.rewind(&["check", "--example", "bank", "--strategy", "random"]);
    assert_eq!(want.code, 1, "{want}");
    let merged = Home::new();
    let results = cluster.dir.path().join("results");
    let submit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/slurm/submit");
    let bin = rewind_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = cluster
        .command("sh")
        .arg(&submit)
        .args([
            "3",
            results.to_str().unwrap(),
            "--example",
            "bank",
            "--strategy",
            "random",
        ])
        .env("PATH", path)
        .env("REWIND_HOME", merged.path())
        .env("TMPDIR", cluster.dir.path().join("tmp"))
        .current_dir(cluster.dir.path())
        .output()
        .expect("sh runs submit");
    assert!(
        out.status.success(),
        "submit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Watch the queue until it empties: how many shards ran at once.
    let mut most = 0;
    let until = Instant::now() + Duration::from_secs(900);
    loop {
        let queue = cluster
            .output("squeue", &["-h", "-o", "%j %T"])
            .unwrap_or_default();
        let running = queue
            .lines()
            .filter(|l| *l == "rewind-shard RUNNING")
            .count();
        most = most.max(running);
        if queue.trim().is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "the jobs did not end in 900 s:\n{queue}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = std::fs::read_to_string(results.join("merge.out")).unwrap_or_default();
    let shards: Vec<String> = (0..3)
        .map(|i| {
            std::fs::read_to_string(results.join(format!("shard-{i}.out"))).unwrap_or_default()
        })
        .collect();
    assert_eq!(
        without_wall_time(&report),
        without_wall_time(&want.stdout),
        "the merge job prints the one-machine report; the shards said:\n{}",
        shards.join("\n---\n")
    );
    assert!(
        most >= 2,
        "two array tasks ran at once (at most {most} did)"
    );
    merged.replay_identical(&rewind_tests::failing_run_in(&want));
}
