//! Writing one run: a temporary directory inside `runs/`, filled while the
//! machine runs, renamed to `runs/<id>` only when everything is written.

use super::meta::{ImageLocation, Meta};
use super::output::OutputWriter;
use super::{io, pending, Run, Store, StoreError, StoreWarning};
use crate::image::Image;
use crate::record::trace::TraceWriter;
use crate::run::keyframe::{Keyframe, KeyframeWriter, KEYFRAMES_FILE};
use crate::run::pages::PageHash;
use crate::run::Outcome;
use crate::run::{Event, Manifest, Recorder};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the store needs to know about a run besides its manifest and outcome.
#[derive(Debug, Clone)]
pub struct RunDetails {
    pub name: String,
    pub image: Image,
    pub timeout: Option<Duration>,
}

/// A [`Recorder`] that writes a run into the store: events to the trace,
/// output to the output file (and, when echo is on, live to the host's
/// stdout and stderr). Dropped without [`StoreRecorder::finish`], it removes
/// everything it wrote.
pub struct StoreRecorder {
    runs: PathBuf,
    id: String,
    manifest: Manifest,
    tmp: PathBuf,
    trace: Option<TraceWriter>,
    output: Option<OutputWriter>,
    echo: bool,
    /// The first error met while recording; `finish` returns it.
    error: Option<StoreError>,
    started: SystemTime,
    finished: bool,
    /// The last byte of output, to either stream.
    last_byte: Option<u8>,
    /// The last byte of output to stderr.
    last_stderr: Option<u8>,
    switches: Vec<crate::record::switches::Switch>,
    keyframes: Option<KeyframeWriter>,
    pages: super::pages::PageStore,
    warnings: Vec<StoreWarning>,
}

impl Store {
    /// Starts writing a run: checks that the store is writable and creates
    /// the run's temporary directory with its manifest and standard input.
    pub fn begin(&self, manifest: &Manifest, stdin: &[u8]) -> Result<StoreRecorder, StoreError> {
        self.begin_writing(manifest, stdin).map_err(|e| {
            e.or_full(self.home(), || {
                format!("run {} was not kept", manifest.id())
            })
        })
    }

    fn begin_writing(
        &self,
        manifest: &Manifest,
        stdin: &[u8],
    ) -> Result<StoreRecorder, StoreError> {
        let runs = self.prepare()?;
        self.clean_stale();
        let id = manifest.id();
        let tmp = runs.join(format!(".tmp-{id}-{}", std::process::id()));
        if tmp.exists() {
            // Left by an earlier attempt of this very process.
            let _ = std::fs::remove_dir_all(&tmp);
        }
        pending::register(&tmp);
        let mut rec = StoreRecorder {
            runs,
            id,
            manifest: manifest.clone(),
            tmp: tmp.clone(),
            trace: None,
            output: None,
            echo: false,
            error: None,
            started: SystemTime::now(),
            finished: false,
            last_byte: None,
            last_stderr: None,
            switches: Vec::new(),
            keyframes: None,
            pages: self.pages(),
            warnings: Vec::new(),
        };
        std::fs::create_dir(&tmp).map_err(|e| StoreError::Unwritable {
            path: tmp.clone(),
            source: e,
        })?;
        let json = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
        write_file(&tmp.join("manifest.json"), &json)?;
        if !stdin.is_empty() {
            write_file(&tmp.join("stdin.bin"), stdin)?;
        }
        rec.trace = Some(TraceWriter::create(&tmp.join("events"))?);
        rec.output = Some(OutputWriter::create(&tmp)?);
        rec.keyframes =
            Some(KeyframeWriter::create(&tmp.join(KEYFRAMES_FILE)).map_err(keyframe_error)?);
        Ok(rec)
    }
}

/// A keyframe file's error as the store's, keeping an I/O error's cause
/// (a full disk is told apart by it).
fn keyframe_error(e: crate::run::keyframe::KeyframeError) -> StoreError {
    use crate::run::keyframe::KeyframeError;
    match e {
        KeyframeError::Io { path, source } => StoreError::Io { path, source },
        KeyframeError::Corrupt { path, what } => StoreError::Corrupt { path, what },
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    std::fs::write(path, bytes).map_err(io(path))
}

impl StoreRecorder {
    /// Keep no keyframes for this run (`--no-keyframes`).
    pub fn set_keyframes(&mut self, on: bool) {
        if !on {
            self.keyframes = None;
            let _ = std::fs::remove_file(self.tmp.join(KEYFRAMES_FILE));
        }
    }

    /// The id the run will have.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Gives the run the image hash found beside it (`Store::image_hash_beside`):
    /// its manifest, and so its id, are those of that image from now on.
    pub fn set_image(&mut self, hash: String) -> Result<(), StoreError> {
        self.manifest.image = hash;
        self.id = self.manifest.id();
        for w in &mut self.warnings {
            if let StoreWarning::NoKeyframesKept { run, .. } = w {
                run.clone_from(&self.id);
            }
        }
        let json = serde_json::to_vec_pretty(&self.manifest).expect("a manifest serializes");
        write_file(&self.tmp.join("manifest.json"), &json)
    }

    /// The temporary directory being written.
    pub fn temp_dir(&self) -> &Path {
        &self.tmp
    }

    /// Whether the guest's output is also written live to the host's
    /// stdout (fd 1) and stderr (fd 2).
    pub fn set_echo(&mut self, echo: bool) {
        self.echo = echo;
    }

    /// Whether a line the host prints next on its stderr should start with
    /// a newline, the guest's output having left one open there: its last
    /// output to either stream when the host's stdout and stderr are one
    /// sink (`shared`), else its last output to stderr.
    pub fn stderr_line_open(&self, shared: bool) -> bool {
        let last = if shared {
            self.last_byte
        } else {
            self.last_stderr
        };
        last.is_some_and(|b| b != b'\n')
    }

    /// A problem that costs the run its keyframes but not the run itself.
    fn fail_soft(&mut self, error: StoreError) {
        self.warnings.push(StoreWarning::NoKeyframesKept {
            run: self.id.clone(),
            error,
        });
    }

    /// What the run went on without so far, for the caller to show.
    pub fn take_warnings(&mut self) -> Vec<StoreWarning> {
        std::mem::take(&mut self.warnings)
    }

    fn fail(&mut self, e: StoreError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// Finishes the run: writes the last events, the output index and
    /// `meta.json`, then moves the directory to `runs/<id>`, replacing a run
    /// with the same id.
    pub fn finish(self, outcome: &Outcome, details: &RunDetails) -> Result<Run, StoreError> {
        self.finish_created(outcome, details).map(|(run, _)| run)
    }

    /// [`finish`](Self::finish), and whether this recording put the run in
    /// the store: [`Created`] when no run had its id when it was moved in
    /// (not when it replaced one, which another command may have made and
    /// may keep).
    pub fn finish_created(
        self,
        outcome: &Outcome,
        details: &RunDetails,
    ) -> Result<(Run, Option<Created>), StoreError> {
        let home = self.runs.parent().unwrap_or(&self.runs).to_path_buf();
        let id = self.id.clone();
        self.finish_writing(outcome, details)
            .map_err(|e| e.or_full(&home, || format!("run {id} was not kept")))
    }

    fn finish_writing(
        mut self,
        outcome: &Outcome,
        details: &RunDetails,
    ) -> Result<(Run, Option<Created>), StoreError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let events = match self.trace.take() {
            Some(t) => t.finish()?.1,
            None => 0,
        };
        let output_bytes = match self.output.take() {
            Some(o) => o.finish()?,
            None => 0,
        };
        let since = self.started.duration_since(UNIX_EPOCH).unwrap_or_default();
        let meta = Meta {
            id: self.id.clone(),
            name: details.name.clone(),
            created: since.as_secs(),
            created_ns: since.as_nanos().min(u64::MAX as u128) as u64,
            image: ImageLocation::from(&details.image),
            status: outcome.status.to_string(),
            exit: outcome.status,
            exit_code: outcome.status.shell_code(),
            steps: outcome.steps,
            virtual_ns: outcome.virtual_ns,
            wall_secs: outcome.wall.as_secs_f64(),
            stuck: outcome.stuck.clone(),
            perturbed: outcome.perturbed.clone(),
            thread_names: outcome.thread_names.clone(),
            events,
            output_bytes,
            timeout_secs: details.timeout.map(|t| t.as_secs_f64()),
            // Recorded over a view (a fork of a run whose tree changed, or
            // of an imported one): its view is its image from now on.
            viewed: matches!(details.image.view(), crate::image::View::Recorded(_)),
        };
        write_file(
            &self.tmp.join(SWITCHES_FILE),
            &crate::record::switches::encode(&self.switches),
        )?;
        let parent = self
            .manifest
            .fork_of
            .as_ref()
            .map(|f| self.runs.join(&f.parent));
        let home = self.runs.parent().unwrap_or(&self.runs);
        super::view::write(home, &self.tmp, &details.image, parent.as_deref())?;
        let json = serde_json::to_vec_pretty(&meta).expect("meta serializes");
        write_file(&self.tmp.join("meta.json"), &json)?;
        let dest = self.runs.join(&self.id);
        let installed = {
            let mut pending = pending::lock();
            let installed = install(&self.tmp, &dest, &self.runs, &self.id)?;
            self.finished = true;
            pending.retain(|p| p != &self.tmp);
            installed
        };
        let created = match installed {
            Installed::Created => inode(&dest).map(|ino| Created {
                id: self.id.clone(),
                ino,
            }),
            Installed::Replaced => None,
        };
        let run = Run {
            id: self.id.clone(),
            dir: dest,
            manifest: self.manifest.clone(),
            meta,
        };
        Ok((run, created))
    }
}

/// A run a recording put in the store where none had its id, with its
/// directory's inode: a later recording of the same id replaces the
/// directory (a new inode), and the run is that recording's from then on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Created {
    pub id: String,
    ino: u64,
}

impl Created {
    /// Whether the run in `dir` is still the one this recording created
    /// (not removed, not replaced by another recording since).
    pub fn is_in(&self, dir: &Path) -> bool {
        inode(dir) == Some(self.ino)
    }

    /// The command that created the run recorded it again (into `dir`):
    /// the run there now is still its own.
    pub fn renew(&mut self, dir: &Path) {
        if let Some(ino) = inode(dir) {
            self.ino = ino;
        }
    }
}

/// A run directory's inode, which a replacement of the run changes.
fn inode(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().map(|m| m.ino())
}

/// What [`install`] did.
enum Installed {
    /// No run had the id.
    Created,
    /// It replaced a run with the same id.
    Replaced,
}

/// Moves `tmp` to `dest`. When `dest` exists, swaps them atomically where
/// the file system can (renameat2 RENAME_EXCHANGE), else moves the old run
/// aside first; then removes the old run.
fn install(tmp: &Path, dest: &Path, runs: &Path, id: &str) -> Result<Installed, StoreError> {
    for _ in 0..3 {
        // rename(2) replaces only an empty directory, and a run's never is.
        match std::fs::rename(tmp, dest) {
            Ok(()) => return Ok(Installed::Created),
            Err(e)
                if e.raw_os_error() == Some(libc::ENOTEMPTY)
                    || e.raw_os_error() == Some(libc::EEXIST)
                    || e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {}
            Err(e) => return Err(io(dest)(e)),
        }
        // dest exists: exchange, then tmp holds the old run.
        if exchange(tmp, dest).is_ok() {
            let _ = std::fs::remove_dir_all(tmp);
            return Ok(Installed::Replaced);
        }
        let aside = runs.join(format!(".old-{id}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&aside);
        match std::fs::rename(dest, &aside) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(dest)(e)),
        }
        match std::fs::rename(tmp, dest) {
            Ok(()) => {
                let _ = std::fs::remove_dir_all(&aside);
                return Ok(Installed::Replaced);
            }
            Err(_) => continue,
        }
    }
    Err(StoreError::Io {
        path: dest.to_path_buf(),
        source: std::io::Error::other("another process keeps replacing this run"),
    })
}

fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let ca = std::ffi::CString::new(a.as_os_str().as_bytes())?;
    let cb = std::ffi::CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: two valid NUL-terminated paths; renameat2 touches nothing else.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Which thread held the CPU when (`record::switches`).
pub const SWITCHES_FILE: &str = "switches";

impl Recorder for StoreRecorder {
    fn wants_keyframes(&self) -> bool {
        self.keyframes.is_some()
    }

    fn keyframe(&mut self, kf: &Keyframe, pages: &[(PageHash, &[u8])]) {
        if self.keyframes.is_none() {
            return;
        }
        let stored = self.pages.put_all(pages);
        let written = stored.and_then(|_| {
            self.keyframes
                .as_mut()
                .unwrap()
                .push(kf)
                .map_err(keyframe_error)
        });
        if let Err(e) = written {
            self.keyframes = None;
            let _ = std::fs::remove_file(self.tmp.join(KEYFRAMES_FILE));
            if e.is_disk_full() {
                // The rest of the run would not fit either.
                self.fail(e);
            } else {
                // A run without keyframes is still a run: stop taking them.
                self.fail_soft(e);
            }
        }
    }
    fn switch(&mut self, step: u64, pid: u32, tid: u32) {
        self.switches
            .push(crate::record::switches::Switch { step, pid, tid });
    }

    fn event(&mut self, event: &Event) {
        if let Some(t) = self.trace.as_mut() {
            if let Err(e) = t.push(event) {
                self.trace = None;
                self.fail(e.into());
            }
        }
    }

    fn output(&mut self, fd: i32, bytes: &[u8]) {
        if let Some(&b) = bytes.last() {
            self.last_byte = Some(b);
            if fd == 2 {
                self.last_stderr = Some(b);
            }
        }
        if self.echo {
            let ok = match fd {
                2 => std::io::stderr().write_all(bytes).is_ok(),
                _ => {
                    let mut out = std::io::stdout().lock();
                    out.write_all(bytes).and_then(|_| out.flush()).is_ok()
                }
            };
            if !ok {
                // The host's terminal or pipe went away: keep recording.
                self.echo = false;
            }
        }
        if let Some(o) = self.output.as_mut() {
            if let Err(e) = o.write(fd, bytes) {
                self.output = None;
                self.fail(e);
            }
        }
    }
}

impl Drop for StoreRecorder {
    fn drop(&mut self) {
        if !self.finished {
            self.trace = None;
            self.output = None;
            let mut pending = pending::lock();
            let _ = std::fs::remove_dir_all(&self.tmp);
            pending.retain(|p| p != &self.tmp);
        }
    }
}
