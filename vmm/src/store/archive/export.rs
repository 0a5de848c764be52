//! Export: writes a run, and with `--replayable` its standard input, image
//! and keyframe pages, as one `.rwd` file (the format is in `format.rs`).
//! The file is written beside its destination and renamed into place, so
//! an interrupted export leaves no partial file under the name asked for.

use super::super::maintain::run_pages;
use super::super::meta::ImageLocation;
use super::super::view::{self, FILES_DIR};
use super::super::{io, pending, Run, Store, StoreError};
use super::format::{ArchiveWriter, Info, Kind, FORMAT_VERSION, S_IFLNK, S_IFREG};
use crate::image::{stored_path, Image, Sight, HIDDEN_TOP};
use crate::run::pages::{hex, PageHash};
use serde::Serialize;
use std::collections::BTreeSet;
use std::io::{BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The run files an export without `--replayable` carries.
pub const PLAIN_RUN_FILES: &[&str] = &[
    "manifest.json",
    "meta.json",
    "events",
    super::super::output::OUTPUT_FILE,
    super::super::output::FDS_FILE,
    super::super::writer::SWITCHES_FILE,
    super::super::bookmarks::BOOKMARKS_FILE,
];

/// What an export wrote.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExportSummary {
    pub bytes: u64,
    pub entries: u64,
    pub replayable: bool,
    pub image_files: u64,
    pub pages: u64,
    /// Things left out, and why.
    pub warnings: Vec<String>,
}

/// A root image's entries in the order the image hash walks them.
fn walk_root(
    dir: &Path,
    rel: &str,
    out: &mut Vec<(String, Kind, u32, PathBuf)>,
) -> Result<(), StoreError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<_, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if rel.is_empty() && HIDDEN_TOP.contains(&name) {
            continue;
        }
        let path = if rel.is_empty() {
            name.to_string()
        } else {
            format!("{rel}/{name}")
        };
        let p = e.path();
        let meta = std::fs::symlink_metadata(&p).map_err(io(&p))?;
        let mode = meta.permissions().mode();
        let ft = meta.file_type();
        if ft.is_dir() {
            out.push((path.clone(), Kind::Dir, mode, p.clone()));
            walk_root(&p, &path, out)?;
        } else if ft.is_symlink() {
            out.push((path, Kind::Symlink, mode, p));
        } else if ft.is_file() {
            out.push((path, Kind::File, mode, p));
        }
    }
    Ok(())
}

/// A root image's entries, or a store image's: its closure's paths, each
/// with what it holds, under `nix/store`.
fn image_entries(image: &Image) -> Result<Vec<(String, Kind, u32, PathBuf)>, StoreError> {
    let mut entries = Vec::new();
    match image {
        Image::Program { .. } => {}
        Image::Root { dir, .. } => walk_root(dir, "", &mut entries)?,
        Image::Store(s) => {
            for p in &s.paths {
                let host = s.host_root.join(p.trim_start_matches('/'));
                let rel = p.trim_start_matches('/').to_string();
                let meta = std::fs::symlink_metadata(&host).map_err(io(&host))?;
                let mode = meta.permissions().mode();
                let ft = meta.file_type();
                if ft.is_dir() {
                    entries.push((rel.clone(), Kind::Dir, mode, host.clone()));
                    walk_root(&host, &rel, &mut entries)?;
                } else if ft.is_symlink() {
                    entries.push((rel, Kind::Symlink, mode, host));
                } else if ft.is_file() {
                    entries.push((rel, Kind::File, mode, host));
                }
            }
        }
    }
    Ok(entries)
}

impl Store {
    /// Writes `run` to `out` as one file (see the module's doc). With
    /// `replayable`, also its standard input, image and keyframes with their
    /// pages, so that it replays in another store.
    pub fn export(
        &self,
        run: &Run,
        replayable: bool,
        out: &Path,
    ) -> Result<ExportSummary, StoreError> {
        // Nothing the export reads is removed while it reads.
        let _lock = self.lock_shared()?;
        if !run.dir.join("manifest.json").exists() {
            return Err(StoreError::NotFound(run.id.clone()));
        }
        let mut summary = ExportSummary {
            replayable,
            ..Default::default()
        };
        // A root run with an image view carries the view and the files it
        // read; another, its whole image, as the host has it unchanged.
        let view = match (replayable, &run.meta.image) {
            (true, ImageLocation::Root { .. }) => view::read(&run.dir)?,
            _ => None,
        };
        let inputs = if replayable && view.is_none() {
            Some(run.exact_inputs()?)
        } else {
            None
        };
        let image = match (inputs, view) {
            (Some(i), _) => Some(Exported::Inputs(Box::new(i))),
            (None, Some(v)) => Some(Exported::View(v)),
            (None, None) => None,
        };

        let dir = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "export.rwd".into());
        let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
        pending::register_locked(&tmp, None);
        let result = (|| {
            let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
            let mut w = ArchiveWriter::new(BufWriter::new(file)).map_err(io(&tmp))?;
            self.write_entries(run, image.as_ref(), &mut w, &mut summary)
                .map_err(|e| match e {
                    Failure::Io(e) => io(&tmp)(e),
                    Failure::Store(e) => e,
                })?;
            summary.entries = w.count;
            let (buf, bytes) = w.finish().map_err(io(&tmp))?;
            let file = buf.into_inner().map_err(|e| io(&tmp)(e.into_error()))?;
            file.sync_all().map_err(io(&tmp))?;
            summary.bytes = bytes;
            std::fs::rename(&tmp, out).map_err(io(out))
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        pending::unregister(&tmp);
        result.map(|_| summary)
    }

    fn write_entries<W: Write>(
        &self,
        run: &Run,
        image: Option<&Exported>,
        w: &mut ArchiveWriter<W>,
        summary: &mut ExportSummary,
    ) -> Result<(), Failure> {
        let replayable = image.is_some();
        // Keyframes and their pages, if they can all be read.
        let mut pages: Vec<(PageHash, Vec<u8>)> = Vec::new();
        let mut keyframes_ok = true;
        if replayable {
            let store = self.pages();
            match run_pages(&run.dir) {
                Ok(hs) => {
                    for h in hs {
                        match store.get(&h) {
                            Ok(b) => pages.push((h, b)),
                            Err(e) => {
                                summary.warnings.push(format!(
                                    "the run's keyframes are left out: page {} is unreadable: {e}",
                                    &hex(&h)[..16]
                                ));
                                keyframes_ok = false;
                                pages.clear();
                                break;
                            }
                        }
                    }
                }
                Err(e) => {
                    summary
                        .warnings
                        .push(format!("the run's keyframes are left out: {e}"));
                    keyframes_ok = false;
                }
            }
        }
        let image_kind = image.map(|i| match i {
            Exported::Inputs(i) => match &i.image {
                Image::Program { .. } => "program".to_string(),
                Image::Root { .. } => "root".to_string(),
                Image::Store(_) => "store".to_string(),
            },
            Exported::View(_) => "view".to_string(),
        });
        let info = Info {
            format: FORMAT_VERSION,
            run: run.id.clone(),
            replayable,
            image: image_kind,
            rewind: env!("CARGO_PKG_VERSION").to_string(),
        };
        let json = serde_json::to_vec_pretty(&info).expect("info serializes");
        w.add(Kind::File, S_IFREG | 0o644, "rwd.json", &json)?;

        // The run's files.
        let mut names = run_file_names(run, replayable)?;
        names.sort();
        if !keyframes_ok {
            names.retain(|n| n != crate::run::keyframe::KEYFRAMES_FILE);
        }
        for name in names {
            let p = run.dir.join(&name);
            let bytes = match std::fs::read(&p) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if ["manifest.json", "meta.json", "events"].contains(&name.as_str()) {
                        return Err(Failure::Store(io(&p)(e)));
                    }
                    continue;
                }
                Err(e) => return Err(Failure::Store(io(&p)(e))),
            };
            w.add(Kind::File, S_IFREG | 0o644, &format!("run/{name}"), &bytes)?;
        }

        match image {
            Some(Exported::Inputs(inputs)) => write_image(&inputs.image, w, summary)?,
            Some(Exported::View(sight)) => self.write_view_files(sight, w, summary)?,
            None => {}
        }
        for (h, bytes) in &pages {
            w.add(
                Kind::File,
                S_IFREG | 0o644,
                &format!("page/{}", hex(h)),
                bytes,
            )?;
        }
        summary.pages = pages.len() as u64;
        Ok(())
    }
}

/// The names of the files of `run`'s directory an export carries.
fn run_file_names(run: &Run, replayable: bool) -> Result<Vec<String>, StoreError> {
    if !replayable {
        return Ok(PLAIN_RUN_FILES.iter().map(|s| s.to_string()).collect());
    }
    let mut v = Vec::new();
    for e in std::fs::read_dir(&run.dir).map_err(io(&run.dir))? {
        let e = e.map_err(io(&run.dir))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
        if is_file && !name.starts_with('.') && e.file_name().to_str().is_some() {
            v.push(name);
        }
    }
    Ok(v)
}

/// An image's files, directories and links (`image/program` and
/// `image/deps/`, or `image/root/`), as the host has them.
fn write_image<W: Write>(
    image: &Image,
    w: &mut ArchiveWriter<W>,
    summary: &mut ExportSummary,
) -> Result<(), Failure> {
    match image {
        Image::Program {
            host_path, deps, ..
        } => {
            let meta = std::fs::metadata(host_path).map_err(|e| io(host_path)(e))?;
            let bytes = std::fs::read(host_path).map_err(|e| io(host_path)(e))?;
            w.add(
                Kind::File,
                meta.permissions().mode(),
                "image/program",
                &bytes,
            )?;
            summary.image_files = 1;
            for d in deps {
                let name = format!("image/deps/{}", d.guest.trim_start_matches('/'));
                match &d.kind {
                    crate::image::DepKind::File { host } => {
                        let meta = std::fs::metadata(host).map_err(|e| io(host)(e))?;
                        let bytes = std::fs::read(host).map_err(|e| io(host)(e))?;
                        w.add(Kind::File, meta.permissions().mode(), &name, &bytes)?;
                    }
                    crate::image::DepKind::Symlink { target } => {
                        w.add(Kind::Symlink, S_IFLNK | 0o777, &name, target.as_bytes())?;
                    }
                }
                summary.image_files += 1;
            }
        }
        Image::Root { .. } | Image::Store(_) => {
            let entries = image_entries(image)?;
            for (rel, kind, mode, p) in entries {
                let data = match kind {
                    Kind::Dir => Vec::new(),
                    Kind::Symlink => std::fs::read_link(&p)
                        .map_err(|e| io(&p)(e))?
                        .as_os_str()
                        .as_bytes()
                        .to_vec(),
                    Kind::File => std::fs::read(&p).map_err(|e| io(&p)(e))?,
                };
                w.add(kind, mode, &format!("image/root/{rel}"), &data)?;
                summary.image_files += 1;
            }
        }
    }
    Ok(())
}

impl Store {
    /// The bytes of each file a root run's image view names, from the
    /// store's `files/`, checked against their names.
    fn write_view_files<W: Write>(
        &self,
        sight: &Sight,
        w: &mut ArchiveWriter<W>,
        summary: &mut ExportSummary,
    ) -> Result<(), Failure> {
        let files = self.home().join(FILES_DIR);
        let hashes: BTreeSet<&String> = sight.files.values().filter(|h| !h.is_empty()).collect();
        for h in hashes {
            let p = stored_path(&files, h);
            let bytes = std::fs::read(&p).map_err(|e| io(&p)(e))?;
            if blake3::hash(&bytes).to_hex().as_str() != h.as_str() {
                return Err(Failure::Store(StoreError::Corrupt {
                    path: p,
                    what: "a file the run read is not the bytes its name says".into(),
                }));
            }
            w.add(
                Kind::File,
                S_IFREG | 0o644,
                &format!("image/files/{h}"),
                &bytes,
            )?;
            summary.image_files += 1;
        }
        Ok(())
    }
}

/// What a replayable export carries of the run's image.
enum Exported {
    /// The image as the host has it (it must be unchanged).
    Inputs(Box<crate::run::RunInputs>),
    /// A root run's image view (in the run's files) and the files it read.
    View(Sight),
}

enum Failure {
    Io(std::io::Error),
    Store(StoreError),
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Io(e)
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}
