//! Which runs are the workspace's, and which diagnostics each file gets.
//!
//! A program is its file on the host (the image's program path). It belongs
//! to the workspace when its line tables name files inside a workspace
//! folder. Per program, the newest verdict counts: its newest kept check
//! (`$REWIND_HOME/checks/`), or its newest plain run (schedule 0, not a
//! fork) when that is newer. Runs do not change once written, so findings
//! are kept by verdict and computed once.

use super::findings::{self, CheckFacts, Finding, Places, RunFacts};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::SystemTime;
use vmm::store::{Run, Store};

/// A program the workspace's sources were built into.
#[derive(Debug, Clone)]
pub struct Program {
    pub path: PathBuf,
    /// Its workspace source files (full paths as the debug info names them).
    pub sources: Vec<String>,
    /// The arguments of its newest run (without the program).
    pub args: Vec<String>,
    /// Its newest run (any: a check's too), when the store has one.
    pub newest_run: Option<String>,
    /// A Rust test harness (`rustc --test`, `cargo test`'s binaries): the
    /// `#[test]` lenses run it, not `main`'s.
    pub test_harness: bool,
}

/// What a program file's debug info and symbols say.
#[derive(Clone, Default)]
struct Parsed {
    /// All its source files.
    files: Vec<String>,
    test_harness: bool,
}

/// The program file's identity on disk, to parse it again when it changes.
type Stamp = (SystemTime, u64);

pub struct Index {
    pub store: Store,
    roots: Vec<PathBuf>,
    /// Parsed programs, with their stamp.
    programs: HashMap<PathBuf, (Stamp, Parsed)>,
    /// Findings by verdict (`check:<file>`, `run:<id>`).
    memo: HashMap<String, Vec<Finding>>,
    /// What the last refresh found, by program.
    pub known: BTreeMap<PathBuf, Program>,
    /// Errors already logged, not repeated.
    logged: std::collections::HashSet<String>,
    /// Whether a source file is in the workspace, by its path as debug info names it.
    in_ws: std::sync::Mutex<HashMap<String, bool>>,
}

/// Directories never searched for programs.
const SKIP_DIRS: &[&str] = &[".git", "node_modules", ".hg", ".svn"];
/// How many directory entries a search for programs looks at, at most.
const SCAN_LIMIT: usize = 20_000;

impl Index {
    pub fn new(store: Store, roots: Vec<PathBuf>) -> Index {
        let roots = roots
            .into_iter()
            .map(|r| std::fs::canonicalize(&r).unwrap_or(r))
            .collect();
        Index {
            store,
            roots,
            programs: HashMap::new(),
            memo: HashMap::new(),
            known: BTreeMap::new(),
            logged: Default::default(),
            in_ws: Default::default(),
        }
    }

    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Whether a source file (as debug info names it) is in the workspace.
    /// Answers are kept: a pass over a run asks for every frame of every step.
    pub fn in_workspace(&self, file: &str) -> bool {
        let mut known = self.in_ws.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&yes) = known.get(file) {
            return yes;
        }
        let p = Path::new(file);
        let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let yes = self.roots.iter().any(|r| p.starts_with(r));
        known.insert(file.to_string(), yes);
        yes
    }

    /// The program at `path`, parsed once per version of the file; None
    /// when it is not readable.
    fn parsed(&mut self, path: &Path) -> Option<Parsed> {
        let meta = std::fs::metadata(path).ok()?;
        let stamp = (meta.modified().ok()?, meta.len());
        if let Some((s, parsed)) = self.programs.get(path) {
            if *s == stamp {
                return Some(parsed.clone());
            }
        }
        let bytes = std::fs::read(path).ok()?;
        let parsed = symbols::Module::load(&bytes, &symbols::DebugFinder::none())
            .map(|m| Parsed {
                files: m.source_files(),
                // libtest's entry point, which the harness's generated main calls.
                test_harness: m.symbol_address("test::test_main_static").is_some(),
            })
            .unwrap_or_default();
        self.programs
            .insert(path.to_path_buf(), (stamp, parsed.clone()));
        Some(parsed)
    }

    /// The program's workspace source files, and whether it is a test harness.
    fn workspace_sources(&mut self, path: &Path) -> (Vec<String>, bool) {
        let parsed = self.parsed(path).unwrap_or_default();
        let files = parsed
            .files
            .into_iter()
            .filter(|f| self.in_workspace(f))
            .collect();
        (files, parsed.test_harness)
    }

    fn log_once(&mut self, line: String, log: &mut Vec<String>) {
        if self.logged.insert(line.clone()) {
            log.push(line);
        }
    }

    /// Reads the store; returns every finding by file, and lines to log.
    pub fn refresh(
        &mut self,
        places: &mut dyn Places,
    ) -> (BTreeMap<String, Vec<Finding>>, Vec<String>) {
        let mut log = Vec::new();
        let runs = match self.store.list() {
            Ok(r) => r,
            Err(e) => {
                self.log_once(format!("cannot read the store: {e}"), &mut log);
                Vec::new()
            }
        };
        if let Ok(damaged) = self.store.damaged() {
            for (id, e) in damaged {
                self.log_once(format!("run {id} is not readable: {e}"), &mut log);
            }
        }
        let (checks, bad_checks) = self.store.checks();
        for (p, e) in bad_checks {
            self.log_once(format!("{} is not readable: {e}", p.display()), &mut log);
        }
        let by_id: HashMap<&str, &Run> = runs.iter().map(|r| (r.id.as_str(), r)).collect();

        // Per program: the newest plain run and the newest check (runs are newest first).
        let mut newest_run: BTreeMap<PathBuf, &Run> = BTreeMap::new();
        let mut all_programs: BTreeMap<PathBuf, &Run> = BTreeMap::new();
        for r in &runs {
            let Some(p) = program_path(r) else { continue };
            all_programs.entry(p.clone()).or_insert(r);
            if is_plain(r) {
                newest_run.entry(p).or_insert(r);
            }
        }
        let mut newest_check: BTreeMap<PathBuf, &vmm::store::checks::CheckRecord> = BTreeMap::new();
        for c in &checks {
            let Some(base) = by_id.get(c.base.as_str()) else {
                continue;
            };
            let Some(p) = program_path(base) else {
                continue;
            };
            newest_check.entry(p).or_insert(c);
        }

        let mut known = BTreeMap::new();
        let mut out: BTreeMap<String, Vec<Finding>> = BTreeMap::new();
        for (path, newest) in all_programs {
            let (sources, test_harness) = self.workspace_sources(&path);
            if sources.is_empty() {
                continue;
            }
            known.insert(
                path.clone(),
                Program {
                    path: path.clone(),
                    sources,
                    args: newest.manifest.argv.iter().skip(1).cloned().collect(),
                    newest_run: Some(newest.id.clone()),
                    test_harness,
                },
            );
            let run = newest_run.get(&path).copied();
            let check = newest_check.get(&path).copied();
            let use_check = match (check, run) {
                (Some(c), Some(r)) => c.created_ns >= r.meta.created_ns,
                (Some(_), None) => true,
                _ => false,
            };
            let (key, findings) = if use_check {
                let c = check.expect("use_check has a check");
                let key = format!("check:{}-{}", c.created_ns, c.base);
                if let Some(f) = self.memo.get(&key) {
                    (key, f.clone())
                } else {
                    let f = self.check_findings(c, &by_id, places, &mut log);
                    (key, f)
                }
            } else if let Some(r) = run {
                let key = format!("run:{}", r.id);
                if let Some(f) = self.memo.get(&key) {
                    (key, f.clone())
                } else {
                    let f = self.run_findings(r, places, &mut log);
                    (key, f)
                }
            } else {
                continue;
            };
            self.memo.insert(key, findings.clone());
            for f in findings {
                out.entry(f.file.clone()).or_default().push(f);
            }
        }
        self.known = known;
        (out, log)
    }

    fn facts(&mut self, r: &Run, log: &mut Vec<String>) -> Option<RunFacts> {
        match r.events() {
            Ok(events) => Some(RunFacts {
                id: r.id.clone(),
                status: r.meta.status.clone(),
                steps: r.meta.steps,
                stuck: r.meta.stuck.clone(),
                events,
            }),
            Err(e) => {
                self.log_once(format!("run {}: {e}", r.id), log);
                None
            }
        }
    }

    fn check_findings(
        &mut self,
        c: &vmm::store::checks::CheckRecord,
        by_id: &HashMap<&str, &Run>,
        places: &mut dyn Places,
        log: &mut Vec<String>,
    ) -> Vec<Finding> {
        let name = by_id
            .get(c.base.as_str())
            .map_or_else(String::new, |r| r.meta.name.clone());
        let Some(facts) = CheckFacts::from_report(&name, &c.report) else {
            self.log_once(
                format!(
                    "the check of {name} (base run {}) has no report this server reads",
                    c.base
                ),
                log,
            );
            return Vec::new();
        };
        let bad = facts
            .bad_run()
            .and_then(|id| by_id.get(id).copied())
            .and_then(|r| self.facts(r, log));
        let base = if facts.never_held.is_empty() {
            None
        } else {
            by_id
                .get(c.base.as_str())
                .copied()
                .and_then(|r| self.facts(r, log))
        };
        let ws = |f: &str| self.in_workspace(f);
        let mut lines = Vec::new();
        let found =
            findings::of_check(&facts, bad.as_ref(), base.as_ref(), places, &ws, &mut lines);
        for l in lines {
            self.log_once(l, log);
        }
        found
    }

    fn run_findings(
        &mut self,
        r: &Run,
        places: &mut dyn Places,
        log: &mut Vec<String>,
    ) -> Vec<Finding> {
        let Some(facts) = self.facts(r, log) else {
            return Vec::new();
        };
        let ws = |f: &str| self.in_workspace(f);
        let mut lines = Vec::new();
        let found = findings::of_run(
            &facts,
            &format!("run of {}", r.meta.name),
            places,
            &ws,
            &mut lines,
        );
        for l in lines {
            self.log_once(l, log);
        }
        found
    }

    /// Programs built from `file`: those the store knows, and the
    /// executable ELF files in the workspace not recorded yet (a test
    /// harness beside its recorded program, say).
    pub fn programs_of(&mut self, file: &str) -> Vec<Program> {
        let mut out: Vec<Program> = self
            .known
            .values()
            .filter(|p| p.sources.iter().any(|s| same_file(s, file)))
            .cloned()
            .collect();
        for path in self.workspace_programs() {
            if out
                .iter()
                .any(|p| same_file(&p.path.to_string_lossy(), &path.to_string_lossy()))
            {
                continue;
            }
            let (sources, test_harness) = self.workspace_sources(&path);
            if sources.iter().any(|s| same_file(s, file)) {
                out.push(Program {
                    path,
                    sources,
                    args: Vec::new(),
                    newest_run: None,
                    test_harness,
                });
            }
        }
        out
    }

    /// Executable ELF files under the workspace folders.
    fn workspace_programs(&self) -> Vec<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let mut out = Vec::new();
        let mut stack: Vec<PathBuf> = self.roots.clone();
        let mut seen = 0usize;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > SCAN_LIMIT {
                    return out;
                }
                let Ok(ft) = e.file_type() else { continue };
                let name = e.file_name();
                if ft.is_dir() {
                    if !SKIP_DIRS.iter().any(|s| name == *s) {
                        stack.push(e.path());
                    }
                    continue;
                }
                if !ft.is_file() {
                    continue;
                }
                let exec = e
                    .metadata()
                    .is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
                if exec && is_elf(&e.path()) {
                    out.push(e.path());
                }
            }
        }
        out.sort();
        out
    }
}

fn is_elf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == *b"\x7fELF"
}

/// Whether two paths name one file (canonical when they exist).
pub fn same_file(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// The program file of a run on this host.
pub fn program_path(r: &Run) -> Option<PathBuf> {
    r.meta.image.to_image().host_path(&r.manifest.program)
}

/// A run as `rewind run` makes it without schedule options: not one a
/// check or a fork made.
fn is_plain(r: &Run) -> bool {
    let m = &r.manifest;
    m.schedule == 0
        && m.perturb.is_empty()
        && m.fork_of.is_none()
        && m.reseed.is_none()
        && m.pct.is_none()
}
