//! Runs on disk.
//!
//! `$REWIND_HOME` (else `$XDG_DATA_HOME/rewind`, else `~/.local/share/rewind`)
//! holds:
//!
//! ```text
//! runs/<id>/manifest.json   every input (the id is its hash)
//! runs/<id>/meta.json       name, time, image location, how it ended (Meta)
//! runs/<id>/events          the trace (record::trace)
//! runs/<id>/output          stdout and stderr interleaved as written
//! runs/<id>/output.fds      which descriptor each stretch of output came from
//! runs/<id>/stdin.bin       standard input, when there was any
//! runs/<id>/keyframes       saved machine states (record::keyframe)
//! runs/<id>/bookmarks       notes at steps (store::bookmarks)
//! runs/<id>/image-view      what a --root run saw of its root (store::view)
//! checks/<ns>-<id>.json     what each `rewind check` concluded (store::checks)
//! pages/<xx>/<blake3>       guest pages of keyframes, zstd (store::pages)
//! pages/packs/<blake3>.pack  many pages in one file (store::pack)
//! images/<image hash>/      images of imported runs (store::archive::import)
//! examples/<blake3>-<name>  built-in example programs, written on first use
//! files/<xx>/<blake3>       root files runs read, kept for their image views
//! cache/file-hashes         root images' file hashes by lstat (image::FileHashes)
//! lock                      the advisory lock (store::lock)
//! ```
//!
//! A run is written to `runs/.tmp-<id>-<pid>` and renamed to `runs/<id>`
//! only when complete, so a run that was interrupted is never listed. Dot
//! entries in `runs/` are not runs; stale ones (older than an hour, or whose
//! process is gone) are removed when the next run begins.

pub mod archive;
pub mod bookmarks;
pub mod checks;
pub mod lock;
pub mod maintain;
pub mod meta;
pub mod output;
mod pack;
pub mod pages;
mod pending;
pub mod view;
mod writer;

pub use meta::{ImageLocation, Meta};
pub use output::OutputChunk;
pub use pending::abandon_unfinished;
pub use writer::{Created, RunDetails, StoreRecorder};

use crate::record::trace::{TraceError, TraceReader};
use crate::run::Manifest;
use crate::run::RunInputs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot find a home for runs: set REWIND_HOME (or HOME)")]
    NoHome,
    #[error("cannot write runs under {path}: {source} (set REWIND_HOME to a writable directory)")]
    Unwritable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: {what}")]
    Corrupt { path: PathBuf, what: String },
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("no runs yet in {0}")]
    NoRuns(PathBuf),
    #[error("no run matches `{0}` (see `rewind ls`)")]
    NotFound(String),
    #[error("`{spec}` is ambiguous: it matches {}", .candidates.join(", "))]
    Ambiguous {
        spec: String,
        candidates: Vec<String>,
    },
    #[error("`@{n}`: there are only {have} runs")]
    TooFewRuns { n: usize, have: usize },
    #[error(
        "the image of run {id} changed since it was recorded (image hash {recorded}, now {now})"
    )]
    ImageChanged {
        id: String,
        recorded: String,
        now: String,
    },
    #[error(transparent)]
    Engine(#[from] crate::EngineError),
    #[error(
        "no space left on the disk that holds {home}: {what} \
         (`rewind gc` frees what no run uses)"
    )]
    Full { home: PathBuf, what: String },
}

impl StoreError {
    /// Whether the disk (or the user's quota) was full, anywhere in the
    /// error's chain of causes.
    pub fn is_disk_full(&self) -> bool {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = cause {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if matches!(io.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)) {
                    return true;
                }
            }
            cause = e.source();
        }
        false
    }

    /// This error, or [`StoreError::Full`] saying `what` when the disk was
    /// full (`what`: "run X was not kept").
    pub(crate) fn or_full(self, home: &Path, what: impl FnOnce() -> String) -> StoreError {
        if self.is_disk_full() {
            StoreError::Full {
                home: home.to_path_buf(),
                what: what(),
            }
        } else {
            self
        }
    }
}

/// Something the caller should tell the user: the store went on without
/// what it names (the library prints nothing; the front ends do).
#[derive(Debug, thiserror::Error)]
pub enum StoreWarning {
    #[error("keyframes not used ({0}); running from step 0")]
    KeyframesNotUsed(StoreError),
    #[error("run {run} keeps no keyframes: {error}")]
    NoKeyframesKept { run: String, error: StoreError },
}

/// `map_err(io(path))`: an I/O error on `path`, the one helper of the store.
pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What [`Run::usable_keyframe`] found.
#[derive(Debug)]
pub struct UsableKeyframe {
    /// The keyframe, and whether it is the run's own (see `best_keyframe`).
    pub keyframe: Option<(crate::run::keyframe::Keyframe, bool)>,
    /// Why the run's keyframes were not used, when they could not be.
    pub warning: Option<StoreWarning>,
}

/// The directory that holds runs.
#[derive(Debug, Clone)]
pub struct Store {
    home: PathBuf,
}

/// A finished run in the store.
#[derive(Debug, Clone)]
pub struct Run {
    pub id: String,
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub meta: Meta,
}

/// The runs a store holds, and the directories that could not be read.
type Scan = (Vec<Run>, Vec<(String, StoreError)>);

/// Where root images' file hashes, and program images' hashes by their
/// files' `stat`, are kept, under the store's home.
pub const FILE_HASHES: &str = "cache/file-hashes";

/// Whether finding an image's hash may write the hashes it read into the
/// store's cache: a run does; looking at a recorded one writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeepHashes {
    Yes,
    No,
}

fn image_hash_in(
    home: &Path,
    image: &crate::image::Image,
    keep: KeepHashes,
    read: Arc<crate::image::Progress>,
) -> Result<String, crate::EngineError> {
    if matches!(image, crate::image::Image::Store(_)) {
        return image.hash();
    }
    if keep == KeepHashes::Yes {
        mark_home(home);
    }
    let cache = crate::image::FileHashes::open(home.join(FILE_HASHES)).counting_in(read);
    let hash = image.hash_with(&cache)?;
    if keep == KeepHashes::Yes {
        // A cache that cannot be written costs the next run a read, nothing more.
        let _ = cache.save();
    }
    Ok(hash)
}

/// Marks `home` as a store (`image::STORE_MARKER`), so that a root image
/// over a tree holding it leaves it out. Best effort: a store that cannot
/// be written records nothing, and says so where it tries.
fn mark_home(home: &Path) {
    let marker = home.join(crate::image::STORE_MARKER);
    if !marker.exists() && std::fs::create_dir_all(home).is_ok() {
        let _ = std::fs::write(
            marker,
            "A Rewind store: root images (rewind run --root) leave this directory out.\n",
        );
    }
}

/// An image's hash being found beside the run (`Store::image_hash_beside`).
pub struct ImageHashing {
    thread: std::thread::JoinHandle<Result<String, crate::EngineError>>,
    read: Arc<crate::image::Progress>,
}

impl ImageHashing {
    /// Waits for the hash.
    pub fn wait(self) -> Result<String, crate::EngineError> {
        self.thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    /// Whether the hash is found (`wait` returns at once).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// The files new or changed since the store's cache saw them that the
    /// walk has read so far, and their bytes.
    pub fn read_so_far(&self) -> (u64, u64) {
        self.read.so_far()
    }
}

/// Stale temporary directories older than this are removed.
const STALE_AFTER: Duration = Duration::from_secs(3600);

impl Store {
    /// The store at `$REWIND_HOME`, else `$XDG_DATA_HOME/rewind`, else
    /// `$HOME/.local/share/rewind`. Nothing is created yet.
    pub fn from_env() -> Result<Store, StoreError> {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = if let Some(h) = var("REWIND_HOME") {
            h
        } else if let Some(x) = var("XDG_DATA_HOME").filter(|p| p.is_absolute()) {
            x.join("rewind")
        } else if let Some(h) = var("HOME") {
            h.join(".local/share/rewind")
        } else {
            return Err(StoreError::NoHome);
        };
        // Absolute, so that paths kept in meta.json outlive the working directory.
        let home = std::path::absolute(&home).unwrap_or(home);
        Ok(Store::at(home))
    }

    pub fn at(home: impl Into<PathBuf>) -> Store {
        Store { home: home.into() }
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// The hash of `image`; a root's files' hashes, and a program image's
    /// hash, are kept between runs in [`FILE_HASHES`], so that only new and
    /// changed files are read.
    pub fn image_hash(&self, image: &crate::image::Image) -> Result<String, crate::EngineError> {
        image_hash_in(&self.home, image, KeepHashes::Yes, Arc::default())
    }

    /// [`Store::image_hash`] on a thread of its own, for a run that starts
    /// before its image's identity is known (its id is set when it ends:
    /// [`StoreRecorder::set_image`]).
    pub fn image_hash_beside(&self, image: &crate::image::Image) -> ImageHashing {
        let (home, image) = (self.home.clone(), image.clone());
        let read = Arc::<crate::image::Progress>::default();
        let counted = Arc::clone(&read);
        ImageHashing {
            thread: std::thread::spawn(move || {
                image_hash_in(&home, &image, KeepHashes::Yes, counted)
            }),
            read,
        }
    }

    pub fn pages(&self) -> pages::PageStore {
        pages::PageStore::at(self.home.join("pages"))
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.home.join("runs")
    }

    /// Creates `runs/` if needed and checks that it is writable, with a
    /// file made and removed there once a home a process (a check prepares
    /// before every run it records, a merge before every import); returns it.
    pub fn prepare(&self) -> Result<PathBuf, StoreError> {
        static PROBED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
        let runs = self.runs_dir();
        let unwritable = |source| StoreError::Unwritable {
            path: self.home.clone(),
            source,
        };
        std::fs::create_dir_all(&runs).map_err(unwritable)?;
        let mut probed = PROBED.lock().unwrap_or_else(|e| e.into_inner());
        if probed.contains(&runs) {
            return Ok(runs);
        }
        mark_home(&self.home);
        let probe = runs.join(format!(".probe-{}", std::process::id()));
        std::fs::write(&probe, b"").map_err(unwritable)?;
        let _ = std::fs::remove_file(&probe);
        probed.push(runs.clone());
        Ok(runs)
    }

    /// Removes temporary directories left by interrupted runs: those older
    /// than an hour, and those whose process is gone.
    pub fn clean_stale(&self) {
        let Ok(entries) = std::fs::read_dir(self.runs_dir()) else {
            return;
        };
        let now = SystemTime::now();
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let Some(rest) = name
                .strip_prefix(".tmp-")
                .or_else(|| name.strip_prefix(".old-"))
                .or_else(|| name.strip_prefix(".probe-"))
            else {
                continue;
            };
            let pid: Option<i32> = rest.rsplit('-').next().and_then(|p| p.parse().ok());
            if pid == Some(std::process::id() as i32) {
                continue;
            }
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > STALE_AFTER);
            let gone = pid.is_some_and(|p| !process_alive(p));
            if old || gone {
                let p = e.path();
                if p.is_dir() {
                    let _ = std::fs::remove_dir_all(&p);
                } else {
                    let _ = std::fs::remove_file(&p);
                }
            }
        }
    }

    /// Every finished run, newest first. Directories that do not hold a
    /// readable run are skipped.
    pub fn list(&self) -> Result<Vec<Run>, StoreError> {
        Ok(self.scan()?.0)
    }

    /// Run directories that cannot be read (a damaged manifest or meta),
    /// with why: `list` leaves them out, `ls` reports them.
    pub fn damaged(&self) -> Result<Vec<(String, StoreError)>, StoreError> {
        Ok(self.scan()?.1)
    }

    fn scan(&self) -> Result<Scan, StoreError> {
        let runs = self.runs_dir();
        let entries = match std::fs::read_dir(&runs) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), Vec::new()))
            }
            Err(e) => {
                return Err(StoreError::Io {
                    path: runs,
                    source: e,
                })
            }
        };
        let mut out = Vec::new();
        let mut damaged = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') {
                continue;
            }
            match Run::load(&e.path()) {
                Ok(run) => out.push(run),
                Err(err) => damaged.push((name.into_owned(), err)),
            }
        }
        damaged.sort_by(|a, b| a.0.cmp(&b.0));
        out.sort_by(|a, b| {
            b.meta
                .created_ns
                .cmp(&a.meta.created_ns)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok((out, damaged))
    }

    /// Finds a run by full id, unique id prefix, `@` (newest), `@N` (the
    /// Nth newest) or name (the newest run with that name).
    pub fn resolve(&self, spec: &str) -> Result<Run, StoreError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(StoreError::NotFound(spec.to_string()));
        }
        if let Some(n) = spec.strip_prefix('@') {
            let n: usize = if n.is_empty() {
                1
            } else {
                n.parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| StoreError::NotFound(spec.to_string()))?
            };
            let runs = self.list()?;
            if runs.is_empty() {
                return Err(StoreError::NoRuns(self.runs_dir()));
            }
            let have = runs.len();
            return runs
                .into_iter()
                .nth(n - 1)
                .ok_or(StoreError::TooFewRuns { n, have });
        }
        let is_id_like = spec.bytes().all(|b| b.is_ascii_hexdigit()) && spec.len() <= 16;
        if is_id_like && spec.len() == 16 {
            let dir = self.runs_dir().join(spec);
            if dir.is_dir() {
                return Run::load(&dir);
            }
        }
        let runs = self.list()?;
        let mut ambiguous = None;
        if is_id_like {
            let lower = spec.to_ascii_lowercase();
            let matches: Vec<&Run> = runs.iter().filter(|r| r.id.starts_with(&lower)).collect();
            match matches.len() {
                0 => {}
                1 => return Ok(matches[0].clone()),
                _ => {
                    ambiguous = Some(StoreError::Ambiguous {
                        spec: spec.to_string(),
                        candidates: matches.iter().map(|r| r.id.clone()).collect(),
                    })
                }
            }
        }
        // Runs are newest first: the first with the name is the newest.
        if let Some(r) = runs.iter().find(|r| r.meta.name == spec) {
            return Ok(r.clone());
        }
        Err(ambiguous.unwrap_or_else(|| StoreError::NotFound(spec.to_string())))
    }

    /// Writes a built-in example's bytes to `examples/<blake3>-<name>`
    /// (once; the name is content-addressed) with mode 0755, and returns
    /// its path.
    pub fn example_file(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, StoreError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.home.join(maintain::EXAMPLES_DIR);
        let unwritable = |source| StoreError::Unwritable {
            path: self.home.clone(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(unwritable)?;
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let hash = blake3::hash(bytes).to_hex();
        let path = dir.join(format!("{}-{safe}", &hash[..32]));
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let fresh = std::fs::read(&path).map(|b| b == bytes).unwrap_or(false);
        if !fresh {
            let tmp = dir.join(format!(
                ".tmp-{}-{safe}-{}",
                &hash[..16],
                std::process::id()
            ));
            let written = std::fs::write(&tmp, bytes)
                .map_err(unwritable)
                .and_then(|_| {
                    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
                        .map_err(io)
                })
                .and_then(|_| std::fs::rename(&tmp, &path).map_err(io));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                return Err(e.or_full(&self.home, || format!("the example {name} was not written")));
            }
        } else {
            // The mode is part of the image hash: keep it fixed.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
        }
        Ok(path)
    }
}

fn process_alive(pid: i32) -> bool {
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks for existence.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, StoreError> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| StoreError::Json {
        path: path.to_path_buf(),
        source: e,
    })
}

impl Run {
    /// Reads the run in `dir` (its manifest and meta).
    pub fn load(dir: &Path) -> Result<Run, StoreError> {
        let manifest: Manifest = read_json(&dir.join("manifest.json"))?;
        let meta: Meta = read_json(&dir.join("meta.json"))?;
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Run {
            id,
            dir: dir.to_path_buf(),
            manifest,
            meta,
        })
    }

    pub fn events_path(&self) -> PathBuf {
        self.dir.join("events")
    }

    /// The run's events.
    pub fn trace(&self) -> Result<TraceReader, StoreError> {
        Ok(TraceReader::open(&self.events_path())?)
    }

    /// The run's keyframes, in step order (none when it kept none).
    pub fn keyframes(&self) -> Result<Vec<crate::run::keyframe::Keyframe>, StoreError> {
        let path = self.dir.join(crate::run::keyframe::KEYFRAMES_FILE);
        crate::run::keyframe::read_all(&path).map_err(|e| StoreError::Corrupt {
            path,
            what: e.to_string(),
        })
    }

    /// The last keyframe at or before `step` that this build can restore.
    pub fn keyframe_before(
        &self,
        store: &Store,
        step: u64,
    ) -> Result<Option<crate::run::keyframe::Keyframe>, StoreError> {
        let pages = store.pages();
        let path = self.dir.join(crate::run::keyframe::KEYFRAMES_FILE);
        let corrupt = |e: crate::run::keyframe::KeyframeError| StoreError::Corrupt {
            path: path.clone(),
            what: e.to_string(),
        };
        crate::run::keyframe::KeyframeFile::open(&path)
            .and_then(|f| {
                f.last_at_or_before(step, |k| crate::kernel::save_restore::restorable(k, &pages))
            })
            .map_err(corrupt)
    }

    /// The keyframes files along this run's fork chain, each read once
    /// (every record's checksum checked), with the last step it may serve
    /// and whether it is this run's own: this run's for every step, then
    /// its parent's up to the fork step, and so on. A file that cannot be
    /// read ends the chain there, as `best_keyframe` would fall back.
    pub fn keyframe_chain(
        &self,
        store: &Store,
    ) -> Vec<(crate::run::keyframe::KeyframeFile, u64, bool)> {
        let mut chain = Vec::new();
        let mut run = std::borrow::Cow::Borrowed(self);
        let mut upto = u64::MAX;
        let mut seen = vec![self.id.clone()];
        loop {
            let path = run.dir.join(crate::run::keyframe::KEYFRAMES_FILE);
            match crate::run::keyframe::KeyframeFile::open(&path) {
                Ok(f) => chain.push((f, upto, chain.is_empty())),
                Err(_) => break,
            }
            let Some(f) = &run.manifest.fork_of else {
                break;
            };
            upto = upto.min(f.step);
            match store.resolve(&f.parent) {
                // A store whose forks name each other in a ring ends here.
                Ok(parent) if !seen.contains(&parent.id) => {
                    seen.push(parent.id.clone());
                    run = std::borrow::Cow::Owned(parent);
                }
                _ => break,
            }
        }
        chain
    }

    /// `best_keyframe`, but a keyframes file that cannot be read is not
    /// used: the run is then made from step 0, which is slower and as
    /// exact, and the warning says so (for the caller to show).
    pub fn usable_keyframe(&self, store: &Store, step: u64) -> UsableKeyframe {
        match self.best_keyframe(store, step) {
            Ok(keyframe) => UsableKeyframe {
                keyframe,
                warning: None,
            },
            Err(e) => UsableKeyframe {
                keyframe: None,
                warning: Some(StoreWarning::KeyframesNotUsed(e)),
            },
        }
    }

    /// The latest keyframe to start from to reach `step` of this run: its
    /// own, or one of the run it was forked from (recursively) when that is
    /// later; a fork is its parent up to the fork step. The flag says
    /// whether it is the run's own keyframe (its schedule state then is
    /// this run's), as `Kernel::restore` wants to know.
    pub fn best_keyframe(
        &self,
        store: &Store,
        step: u64,
    ) -> Result<Option<(crate::run::keyframe::Keyframe, bool)>, StoreError> {
        let own = self.keyframe_before(store, step)?.map(|k| (k, true));
        let inherited = match &self.manifest.fork_of {
            Some(f) => match store.resolve(&f.parent) {
                Ok(parent) => parent
                    .best_keyframe(store, step.min(f.step))?
                    .map(|(k, _)| (k, false)),
                Err(_) => None,
            },
            None => None,
        };
        Ok(match (own, inherited) {
            (Some(o), Some(i)) if i.0.step > o.0.step => Some(i),
            (Some(o), _) => Some(o),
            (None, i) => i,
        })
    }

    /// Runs a fork of this run (`inputs`, made by `record::fork`): from `kf`,
    /// a keyframe of this run's chain at or before the fork step, with what
    /// this run recorded up to it given to `rec` first; or from step 0.
    pub fn run_fork(
        &self,
        store: &Store,
        kf: Option<&crate::run::keyframe::Keyframe>,
        inputs: &RunInputs,
        limits: &crate::run::Limits,
        rec: &mut dyn crate::run::Recorder,
    ) -> Result<crate::run::Outcome, StoreError> {
        Ok(match kf {
            Some(kf) => {
                self.feed_prefix(rec, kf.recorded)?;
                crate::runner::run_from(inputs, kf, &store.pages(), false, limits, rec)?
            }
            None => crate::runner::run(inputs, limits, rec)?,
        })
    }

    /// Gives `rec` what this run recorded up to `upto` (events, output,
    /// switches), so that a run restored from a keyframe records a whole run.
    pub fn feed_prefix(
        &self,
        rec: &mut dyn crate::run::Recorder,
        upto: crate::run::keyframe::Recorded,
    ) -> Result<(), StoreError> {
        let mut trace = self.trace()?;
        for e in trace.events().take(upto.events as usize) {
            rec.event(&e?);
        }
        let mut left = upto.output_bytes as usize;
        for c in self.output_chunks()? {
            if left == 0 {
                break;
            }
            let n = c.bytes.len().min(left);
            rec.output(c.fd, &c.bytes[..n]);
            left -= n;
        }
        for s in self.switches()?.into_iter().take(upto.switches as usize) {
            rec.switch(s.step, s.pid, s.tid);
        }
        Ok(())
    }

    /// Which thread held the CPU when.
    pub fn switches(&self) -> Result<Vec<crate::record::switches::Switch>, StoreError> {
        let path = self.dir.join(writer::SWITCHES_FILE);
        crate::record::switches::read(&path).map_err(|e| StoreError::Corrupt {
            path,
            what: e.to_string(),
        })
    }

    /// The view this run recorded of its root image, if it has one.
    fn recorded_view(&self) -> Result<Option<crate::image::View>, StoreError> {
        let runs = self.dir.parent().unwrap_or(&self.dir);
        view::recorded(runs.parent().unwrap_or(runs), &self.dir)
    }

    /// Every event of the run.
    pub fn events(&self) -> Result<Vec<crate::run::Event>, StoreError> {
        let mut t = self.trace()?;
        let events: Result<Vec<_>, _> = t.events().collect();
        Ok(events?)
    }

    /// The output bytes, stdout and stderr interleaved as written.
    pub fn output(&self) -> Result<Vec<u8>, StoreError> {
        let p = self.dir.join(output::OUTPUT_FILE);
        std::fs::read(&p).map_err(|e| StoreError::Io { path: p, source: e })
    }

    /// The output split by descriptor, in write order.
    pub fn output_chunks(&self) -> Result<Vec<OutputChunk>, StoreError> {
        output::read_chunks(&self.dir)
    }

    /// The bytes the run had on standard input (empty if none), checked
    /// against the manifest's hash.
    pub fn stdin(&self) -> Result<Vec<u8>, StoreError> {
        let p = self.dir.join("stdin.bin");
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(StoreError::Io { path: p, source: e }),
        };
        let hash = (!bytes.is_empty()).then(|| blake3::hash(&bytes).to_hex().to_string());
        if hash != self.manifest.stdin {
            return Err(StoreError::Corrupt {
                path: p,
                what: "standard input does not match the manifest's hash".into(),
            });
        }
        Ok(bytes)
    }

    /// The limits it was recorded with (its timeout), for running it again
    /// or a fork of it.
    pub fn limits(&self) -> crate::run::Limits {
        crate::run::Limits {
            timeout: self.meta.timeout_secs.map(Duration::from_secs_f64),
            ..Default::default()
        }
    }

    /// What its image hashes to on the host now (a root's unchanged files
    /// by the store's kept hashes), to compare with the manifest's. The
    /// store is left as it was: a debugger, `show` or the language server
    /// looking at a run write nothing.
    pub fn image_hash_now(&self) -> Result<String, crate::EngineError> {
        let image = self.meta.image.to_image();
        // The run's directory is `<home>/runs/<id>`.
        match self.dir.parent().and_then(Path::parent) {
            Some(home) => image_hash_in(home, &image, KeepHashes::No, Arc::default()),
            None => image.hash(),
        }
    }

    /// The run's inputs, to run it again. A root image that changed since
    /// is seen as the run recorded it (its image view); without one, or
    /// for another image that changed, it fails.
    pub fn inputs(&self) -> Result<RunInputs, StoreError> {
        self.inputs_viewed(true)
    }

    /// The run's inputs with its image as the host has it, which must be
    /// what it was (an export of the image's files).
    pub fn exact_inputs(&self) -> Result<RunInputs, StoreError> {
        self.inputs_viewed(false)
    }

    fn inputs_viewed(&self, viewed: bool) -> Result<RunInputs, StoreError> {
        use crate::image::{Image, View};
        let mut image = self.meta.image.to_image();
        let root = viewed && matches!(image, Image::Root { .. });
        if root && self.meta.viewed {
            // Its view is its image: the host's tree is not looked at.
            let view = self.recorded_view()?.ok_or_else(|| StoreError::Corrupt {
                path: self.dir.join(view::VIEW_FILE),
                what: "the run's image view is missing".into(),
            })?;
            image.set_view(view);
            return Ok(RunInputs {
                manifest: self.manifest.clone(),
                image,
                stdin: self.stdin()?,
            });
        }
        let now = self.image_hash_now()?;
        if now == self.manifest.image {
            // What a fork of it sees is noted, for the fork's own view.
            image.set_view(View::noting());
        } else {
            let Some(view) = root.then(|| self.recorded_view()).transpose()?.flatten() else {
                return Err(StoreError::ImageChanged {
                    id: self.id.clone(),
                    recorded: self.manifest.image.clone(),
                    now,
                });
            };
            image.set_view(view);
        }
        Ok(RunInputs {
            manifest: self.manifest.clone(),
            image,
            stdin: self.stdin()?,
        })
    }
}

#[cfg(test)]
mod tests;
