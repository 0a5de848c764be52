//! Import: checks a `.rwd` file (`format.rs`) and adds its run to a store.
//!
//! An import reads the file once: it verifies every entry (magic, version,
//! every header and data checksum, the whole-file checksum, that every path
//! is one of the names `format.rs` lists, with no `..`, no absolute path and
//! nothing inside a link, that the run's id is its manifest's hash) as it
//! extracts it into a temporary directory inside `runs/`, where an entry is
//! written only once its name is checked, and no link is made until the
//! whole file is verified. Then it checks the image against the manifest's
//! image hash and standard input against its hash, and only then moves
//! pages, the image (to `images/<image hash>/`) and the run (to
//! `runs/<id>`, its `meta.json` pointing at the imported image) into place,
//! each with one rename; a file refused at any point leaves nothing but the
//! temporary directory, which is removed. Links of a root image are created
//! last and never followed. A store with no runs yet verifies the whole file
//! first, so that a file it refuses leaves it exactly as it was (no `runs/`,
//! no lock). An image the store already holds intact (its hash is the
//! manifest's, read before the image's entries) is neither extracted nor
//! hashed from the file: the run points at the store's; pages it holds are
//! not written again; and when rwd.json names a run the store holds
//! already, the file is only verified (that the name is the manifest's hash
//! too).

use super::super::lock::StoreLock;
use super::super::maintain::{remove_tree, IMAGES_DIR};
use super::super::meta::ImageLocation;
use super::super::pages::{self, PageStore};
use super::super::view::FILES_DIR;
use super::super::{io, pending, Run, Store, StoreError};
use super::check::{Check, Checked};
use super::format::{
    parse_name, read, refused, safe_component, ArchiveError, Entry, Kind, Name, Visitor,
};
use crate::image::{stored_path, Image};
use crate::run::pages::{PageHash, PAGE_BYTES};
use std::io::{BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The second pass: writes every entry under a temporary directory.
struct Extract {
    tmp: PathBuf,
    pages: PageStore,
    /// The store's pages: those it holds are not written again.
    have: PageStore,
    /// The store's `files/`: an image view's files it holds are not
    /// written again.
    files: PathBuf,
    /// Whether the image's entries are written (not when the store has
    /// it): decided at the first of them (`Import::decide`).
    image: Option<bool>,
    file: Option<std::fs::File>,
    /// A page being read: its data, or the zstd frame it was stored as.
    page: Option<Vec<u8>>,
    packed: Option<Vec<u8>>,
    /// Pages read and not yet written: written together, into one pack
    /// (one file where a page each cost an inode), `FRAMES_AT_ONCE` at most.
    frames: Vec<(PageHash, Vec<u8>)>,
    link: Option<Vec<u8>>,
    /// Links to create and modes to set once every file is written.
    links: Vec<(PathBuf, Vec<u8>)>,
    modes: Vec<(PathBuf, u32, bool)>,
}

impl Extract {
    fn target(&self, name: &Name) -> Option<PathBuf> {
        match name {
            Name::Info | Name::Page(_) => None,
            Name::ViewFile(h) if stored_path(&self.files, h).exists() => None,
            Name::ViewFile(h) => Some(self.tmp.join(FILES_DIR).join(h)),
            Name::RunFile(f) => Some(self.tmp.join("run").join(f)),
            Name::Program | Name::Root(_) | Name::Dep(_) if self.image == Some(false) => None,
            Name::Program => Some(self.tmp.join("image").join("program")),
            Name::Root(parts) => {
                let mut p = self.tmp.join("image");
                p.extend(parts);
                Some(p)
            }
            Name::Dep(parts) => {
                let mut p = self.tmp.join("image").join("deps");
                p.extend(parts);
                Some(p)
            }
        }
    }
}

fn write_err(p: &Path, e: std::io::Error) -> ArchiveError {
    ArchiveError::Store(StoreError::Io {
        path: p.to_path_buf(),
        source: e,
    })
}

impl Visitor for Extract {
    fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        let name = parse_name(&e.path).or_else(|why| refused(format!("refused: {why}")))?;
        self.file = None;
        self.page = None;
        self.packed = None;
        self.link = None;
        if let Name::Page(h) = &name {
            // Its name is its hash (`Check` made sure), which `read` verifies.
            if !self.have.contains(h) {
                self.page = Some(Vec::with_capacity(PAGE_BYTES));
            }
            return Ok(());
        }
        let Some(path) = self.target(&name) else {
            return Ok(());
        };
        let parent = path.parent().expect("under the temporary directory");
        std::fs::create_dir_all(parent).map_err(|err| write_err(parent, err))?;
        match e.kind {
            Kind::Dir => {
                match std::fs::create_dir(&path) {
                    Ok(()) => {}
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(err) => return Err(write_err(&path, err)),
                }
                self.modes.push((path, e.mode, true));
            }
            Kind::Symlink => self.link = Some(Vec::new()),
            Kind::File => {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&path)
                    .map_err(|err| write_err(&path, err))?;
                self.file = Some(f);
                if matches!(name, Name::Program | Name::Root(_) | Name::Dep(_)) {
                    self.modes.push((path, e.mode, false));
                }
            }
        }
        Ok(())
    }

    fn packed(&mut self, frame: &[u8]) -> Result<(), ArchiveError> {
        // One whole frame, as a page file holds: written as it is, not
        // compressed again.
        let one = zstd::zstd_safe::find_frame_compressed_size(frame) == Ok(frame.len());
        if self.page.is_some() && one {
            self.packed = Some(frame.to_vec());
        }
        Ok(())
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError> {
        if let Some(f) = &mut self.file {
            f.write_all(chunk)
                .map_err(|err| write_err(&self.tmp, err))?;
        } else if let (Some(p), None) = (&mut self.page, &self.packed) {
            p.extend_from_slice(chunk);
        } else if let Some(l) = &mut self.link {
            l.extend_from_slice(chunk);
        }
        Ok(())
    }

    fn end(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        self.file = None;
        // `read` verified the data against the entry's hash, which `Check`
        // made sure is the page's name.
        if let Some(bytes) = self.page.take() {
            let packed = match self.packed.take() {
                Some(p) => p,
                None => pages::compress(&bytes).map_err(|err| write_err(&self.tmp, err))?,
            };
            self.frames.push((e.hash, packed));
            if self.frames.len() >= FRAMES_AT_ONCE {
                self.write_frames()?;
            }
        }
        if let Some(target) = self.link.take() {
            if let Some(p) = parse_name(&e.path).ok().and_then(|name| self.target(&name)) {
                self.links.push((p, target));
            }
        }
        Ok(())
    }
}

/// Pages an import holds in memory before it writes them (about 8 MB).
const FRAMES_AT_ONCE: usize = 4096;

impl Extract {
    fn write_frames(&mut self) -> Result<(), ArchiveError> {
        let frames = std::mem::take(&mut self.frames);
        Ok(self.pages.write_frames_unshared(&frames)?)
    }

    /// Writes the pages left, creates the links and sets the modes,
    /// directories deepest first.
    fn finish(&mut self) -> Result<(), ArchiveError> {
        self.write_frames()?;
        for (p, target) in &self.links {
            if target.contains(&0) {
                return refused("refused: a link target holds a NUL byte");
            }
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), p)
                .map_err(|err| write_err(p, err))?;
        }
        self.modes.sort_by_key(|(p, _, dir)| {
            (*dir, std::cmp::Reverse(p.components().count()), p.clone())
        });
        for (p, mode, _) in &self.modes {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode & 0o7777))
                .map_err(|err| write_err(p, err))?;
        }
        Ok(())
    }
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    pub run: Run,
    pub replayable: bool,
    /// The run was in the store already: nothing was changed.
    pub already: bool,
    pub pages: u64,
}

/// The one pass over a file: every entry checked (`Check`) and, until the
/// run turns out to be in the store already, written (`Extract`).
struct Import<'a> {
    check: Check,
    x: Option<Extract>,
    store: &'a Store,
    /// Whether a run the store holds already stops the writing.
    skip_existing: bool,
}

impl Import<'_> {
    /// At the image's first entry: whether to write it, from what was read
    /// before it (an image the store holds intact is not written).
    fn decide(&mut self, name: &Name) {
        let Some(x) = &mut self.x else { return };
        if x.image.is_some() || !matches!(name, Name::Program | Name::Root(_) | Name::Dep(_)) {
            return;
        }
        let reuse = self.check.so_far().is_some_and(|c| {
            let home = self.store.home().join(IMAGES_DIR).join(&c.manifest.image);
            image_locations(&c, &x.tmp.join("image"), &home)
                .is_ok_and(|(_, home)| image_usable(&home, &c.manifest.image))
        });
        x.image = Some(!reuse);
    }

    /// After rwd.json: whether the store holds the run it names already
    /// (that the name is the manifest's hash is checked at the end).
    fn existing(&mut self, e: &Entry) {
        if !self.skip_existing || e.path != "rwd.json" {
            return;
        }
        let Some(id) = self.check.info.as_ref().map(|i| i.run.clone()) else {
            return;
        };
        if !safe_component(&id) || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return;
        }
        if self
            .store
            .runs_dir()
            .join(&id)
            .join("manifest.json")
            .exists()
        {
            self.x = None;
        }
    }
}

impl Visitor for Import<'_> {
    fn header(&mut self, version: u32) -> Result<(), ArchiveError> {
        self.check.header(version)
    }

    fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        // Its name is checked before anything is written.
        self.check.begin(e)?;
        if self.x.is_some() {
            if let Ok(name) = parse_name(&e.path) {
                self.decide(&name);
            }
        }
        match &mut self.x {
            Some(x) => x.begin(e),
            None => Ok(()),
        }
    }

    fn packed(&mut self, frame: &[u8]) -> Result<(), ArchiveError> {
        match &mut self.x {
            Some(x) => x.packed(frame),
            None => Ok(()),
        }
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError> {
        self.check.data(chunk)?;
        match &mut self.x {
            Some(x) => x.data(chunk),
            None => Ok(()),
        }
    }

    fn end(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        self.check.end(e)?;
        if let Some(x) = &mut self.x {
            x.end(e)?;
        }
        self.existing(e);
        Ok(())
    }
}

impl Store {
    /// Verifies an exported file as it adds its run to the store (see the
    /// module's doc). A file that is refused leaves the store as it was.
    pub fn import(&self, file: &Path) -> Result<ImportSummary, ArchiveError> {
        let open = || {
            std::fs::File::open(file)
                .map(BufReader::new)
                .map_err(|e| ArchiveError::Store(io(file)(e)))
        };
        let had_runs = self.runs_dir().exists();
        if !had_runs {
            // Nothing written (not even runs/ or the lock) for a file refused.
            let mut check = Check::default();
            read(open()?, &mut check)?;
            check.finish()?;
        }
        self.prepare()?;
        let lock = self.lock_shared()?;
        let tmp = self
            .runs_dir()
            .join(format!(".tmp-import-{}", std::process::id()));
        let _ = remove_tree(&tmp);
        pending::register_locked(&tmp, None);
        let result = self
            .import_into(&open, &tmp, true, &lock)
            .map_err(|e| match e {
                ArchiveError::Store(e) => ArchiveError::Store(e.or_full(self.home(), || {
                    format!("the run of {} was not imported", file.display())
                })),
                refused => refused,
            });
        let _ = remove_tree(&tmp);
        pending::unregister(&tmp);
        if result.is_err() && !had_runs {
            // Leave a store that had no runs as it was (only when empty).
            let _ = std::fs::remove_dir(self.runs_dir());
        }
        result
    }

    /// The pass over the file (`Import`) into `tmp`, then the run into place.
    fn import_into(
        &self,
        open: &dyn Fn() -> Result<BufReader<std::fs::File>, ArchiveError>,
        tmp: &Path,
        skip_existing: bool,
        lock: &StoreLock,
    ) -> Result<ImportSummary, ArchiveError> {
        let _ = remove_tree(tmp);
        std::fs::create_dir(tmp).map_err(|e| write_err(tmp, e))?;
        let mut pass = Import {
            check: Check::default(),
            x: Some(Extract {
                tmp: tmp.to_path_buf(),
                pages: PageStore::at(tmp.join("pages")),
                have: self.pages(),
                files: self.home().join(FILES_DIR),
                image: None,
                file: None,
                page: None,
                frames: Vec::new(),
                packed: None,
                link: None,
                links: Vec::new(),
                modes: Vec::new(),
            }),
            store: self,
            skip_existing,
        };
        read(open()?, &mut pass)?;
        let checked = pass.check.finish()?;
        let id = checked.manifest.id();
        let Some(mut x) = pass.x else {
            // The run was in the store already: nothing was changed.
            if let Ok(run) = Run::load(&self.runs_dir().join(&id)) {
                return Ok(ImportSummary {
                    run,
                    replayable: checked.info.replayable,
                    already: true,
                    pages: 0,
                });
            }
            // Removed since: written after all.
            return self.import_into(open, tmp, false, lock);
        };
        self.install(&mut x, tmp, &checked, lock)
    }

    /// The extracted run checked as a whole, then moved into place.
    fn install(
        &self,
        x: &mut Extract,
        tmp: &Path,
        checked: &Checked,
        _lock: &StoreLock,
    ) -> Result<ImportSummary, ArchiveError> {
        // Links only now, once the whole file is verified.
        x.finish()?;
        let image_tmp = tmp.join("image");
        let images = self.home().join(IMAGES_DIR);
        let image_home = images.join(&checked.manifest.image);
        let viewed = checked.viewed();
        let located = if checked.info.replayable && !viewed {
            Some(image_locations(checked, &image_tmp, &image_home)?)
        } else {
            None
        };
        // An image the store holds intact already (the run's schedule 0, a
        // run of the same program): the file's copy was neither written nor
        // is it hashed, and the run points at the store's.
        let reuse = match x.image {
            Some(written) => !written,
            None => located
                .as_ref()
                .is_some_and(|(_, home)| image_usable(home, &checked.manifest.image)),
        };

        let id = checked.manifest.id();
        let run_tmp = tmp.join("run");
        let staged = Run::load(&run_tmp).or_else(|e| refused(format!("refused: {e}")))?;
        if staged.manifest != checked.manifest {
            return refused("damaged: the file changed while it was read");
        }
        let mut meta = checked.meta.clone();
        if let Some((staged_image, final_location)) = located {
            // Standard input and the image must be what the manifest hashed.
            staged
                .stdin()
                .or_else(|e| refused(format!("refused: {e}")))?;
            if !reuse {
                let hash = staged_image
                    .hash()
                    .or_else(|e| refused(format!("refused: its image: {e}")))?;
                if hash != checked.manifest.image {
                    return refused(
                        "damaged: its image does not match the image hash in the run's manifest",
                    );
                }
            }
            meta.image = final_location;
        }
        if viewed {
            // Its image is the view it carries (`Check` made sure of its
            // files): the host's tree at its root is never looked at.
            staged
                .stdin()
                .or_else(|e| refused(format!("refused: {e}")))?;
            meta.viewed = true;
        }

        // Into place: pages, then the image, then the run.
        self.install_pages(tmp)?;
        self.install_view_files(tmp)?;
        if checked.info.replayable {
            if !reuse && !viewed {
                std::fs::create_dir_all(&images).map_err(|e| write_err(&images, e))?;
                install_image(&image_tmp, &image_home, &checked.manifest.image)?;
            }
            let json = serde_json::to_vec_pretty(&meta).expect("meta serializes");
            super::super::bookmarks::write_atomic(&run_tmp.join("meta.json"), &json)?;
        }
        let dest = self.runs_dir().join(&id);
        let already = match std::fs::rename(&run_tmp, &dest) {
            Ok(()) => false,
            Err(e)
                if e.raw_os_error() == Some(libc::ENOTEMPTY)
                    || e.raw_os_error() == Some(libc::EEXIST) =>
            {
                true
            }
            Err(e) => return Err(write_err(&dest, e)),
        };
        let run = Run::load(&dest)?;
        Ok(ImportSummary {
            run,
            replayable: checked.info.replayable,
            already,
            pages: checked.pages,
        })
    }

    /// Moves the extracted files of an image view into the store's
    /// `files/` (those it held were not extracted).
    fn install_view_files(&self, tmp: &Path) -> Result<(), ArchiveError> {
        let Ok(extracted) = std::fs::read_dir(tmp.join(FILES_DIR)) else {
            return Ok(());
        };
        let files = self.home().join(FILES_DIR);
        for f in extracted.flatten() {
            let dest = stored_path(&files, &f.file_name().to_string_lossy());
            let dir = dest.parent().unwrap_or(&files);
            std::fs::create_dir_all(dir).map_err(|e| write_err(dir, e))?;
            // A file the store gained since is the same bytes.
            std::fs::rename(f.path(), &dest).map_err(|e| write_err(&dest, e))?;
        }
        Ok(())
    }

    /// Moves the extracted pages into the store's (those it held were not
    /// extracted): one rename each, one directory made for each prefix.
    fn install_pages(&self, tmp: &Path) -> Result<(), ArchiveError> {
        let pages = self.pages();
        let Ok(dirs) = std::fs::read_dir(tmp.join("pages")) else {
            return Ok(());
        };
        for d in dirs.flatten() {
            let dest_dir = pages.dir().join(d.file_name());
            std::fs::create_dir_all(&dest_dir).map_err(|e| write_err(&dest_dir, e))?;
            for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
                let name = f.file_name();
                if name.to_string_lossy().starts_with('.') {
                    continue;
                }
                // A page the store gained since is the same bytes.
                let dest = dest_dir.join(&name);
                std::fs::rename(f.path(), &dest).map_err(|e| write_err(&dest, e))?;
            }
        }
        Ok(())
    }
}

/// Where a replayable run's image is extracted to (`image_tmp`) and where
/// it lives in the store (`image_home`), as its kind says.
fn image_locations(
    checked: &Checked,
    image_tmp: &Path,
    image_home: &Path,
) -> Result<(Image, ImageLocation), ArchiveError> {
    if !safe_component(&checked.manifest.image)
        || !checked
            .manifest
            .image
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
    {
        return refused("refused: the manifest's image hash is not a hash");
    }
    let (image_tmp, image_home) = (image_tmp.to_path_buf(), image_home.to_path_buf());
    Ok(match checked.info.image.as_deref() {
        Some("program") => {
            let (guest_path, deps) = match &checked.meta.image {
                ImageLocation::Program {
                    guest_path, deps, ..
                } => (guest_path.clone(), deps.clone()),
                ImageLocation::Root { .. } | ImageLocation::Store(_) => {
                    (checked.manifest.program.clone(), vec![])
                }
            };
            // The libraries from image/deps/ (the hash below checks
            // that they are what the manifest's image holds).
            let at = |dir: &Path| -> Result<Vec<crate::image::Dep>, ArchiveError> {
                deps.iter()
                    .map(|d| {
                        let rel = d.guest.strip_prefix('/').unwrap_or("");
                        if !rel.split('/').all(safe_component) {
                            return refused(format!(
                                "refused: run/meta.json names the library `{}`",
                                d.guest
                            ));
                        }
                        Ok(crate::image::Dep {
                            guest: d.guest.clone(),
                            kind: match &d.kind {
                                crate::image::DepKind::File { .. } => crate::image::DepKind::File {
                                    host: dir.join("deps").join(rel),
                                },
                                link => link.clone(),
                            },
                        })
                    })
                    .collect()
            };
            (
                Image::Program {
                    guest_path: guest_path.clone(),
                    host_path: image_tmp.join("program"),
                    deps: at(&image_tmp)?,
                },
                ImageLocation::Program {
                    guest_path,
                    host_path: image_home.join("program"),
                    deps: at(&image_home)?,
                },
            )
        }
        Some("store") => {
            let ImageLocation::Store(s) = &checked.meta.image else {
                return refused("refused: a store image without its store paths");
            };
            if s.paths.iter().any(|p| {
                !p.strip_prefix("/nix/store/")
                    .is_some_and(|n| !n.contains('/') && safe_component(n))
            }) || !s.build_dir.starts_with('/')
            {
                return refused("refused: run/meta.json names a store path outside /nix/store");
            }
            std::fs::create_dir_all(&image_tmp).map_err(|e| write_err(&image_tmp, e))?;
            let at = |host_root: PathBuf| crate::image::StoreImage {
                host_root,
                ..s.clone()
            };
            (
                Image::Store(at(image_tmp.clone())),
                ImageLocation::Store(at(image_home.clone())),
            )
        }
        _ => {
            std::fs::create_dir_all(&image_tmp).map_err(|e| write_err(&image_tmp, e))?;
            (
                Image::root(image_tmp.clone()),
                ImageLocation::Root {
                    dir: image_home.clone(),
                },
            )
        }
    })
}

/// Whether the store's image at `location` is there and is `hash`.
fn image_usable(location: &ImageLocation, hash: &str) -> bool {
    let img = location.to_image();
    // A store image's hash is its paths' names: it says nothing of whether
    // they are there.
    let there = match &img {
        Image::Store(s) => s.host_root.is_dir(),
        _ => true,
    };
    there && img.hash().ok().as_deref() == Some(hash)
}

/// Moves the extracted image to `image_home`, replacing a damaged or
/// partial one there.
fn install_image(image_tmp: &Path, image_home: &Path, hash: &str) -> Result<(), ArchiveError> {
    if image_home.exists() {
        let aside = image_home.with_file_name(format!(".old-{hash}-{}", std::process::id()));
        let _ = remove_tree(&aside);
        std::fs::rename(image_home, &aside).map_err(|e| write_err(image_home, e))?;
        let _ = remove_tree(&aside);
    }
    std::fs::rename(image_tmp, image_home).map_err(|e| write_err(image_home, e))
}
