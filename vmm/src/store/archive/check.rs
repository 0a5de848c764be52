//! The first pass of an import: every entry's name, kind and size checked
//! as it is read (`Check`), then what was read checked as a whole
//! (`Check::finish`): rwd.json, the manifest and its id, meta, the image
//! rwd.json names, and an image view's files all carried.

use super::super::meta::{ImageLocation, Meta};
use super::super::view::VIEW_FILE;
use super::format::OLDEST_VERSION;
use super::format::{
    parse_name, refused, ArchiveError, Entry, Info, Kind, Name, Refused, Visitor, FORMAT_VERSION,
    S_IFDIR, S_IFLNK, S_IFMT, S_IFREG,
};
use crate::image::{Sight, VIEW_VERSION};
use crate::run::pages::PAGE_BYTES;
use crate::run::Manifest;
use std::collections::BTreeSet;

/// Small entries read into memory while verifying.
const MAX_JSON: u64 = 64 << 20;
const MAX_LINK: u64 = 4096;
/// The first format with image views (`run/image-view`, `image/files/`).
const VIEW_FORMAT: u32 = 2;

/// The first pass: checks every entry and keeps the small ones it needs.
#[derive(Default)]
pub(super) struct Check {
    /// The header's format version.
    version: u32,
    index: u64,
    seen: BTreeSet<String>,
    /// Paths inside a root image that are links, and that are files.
    links: BTreeSet<Vec<String>>,
    files: BTreeSet<Vec<String>>,
    root_paths: Vec<Vec<String>>,
    capture: Option<Vec<u8>>,
    pub(super) info: Option<Info>,
    manifest: Option<Vec<u8>>,
    meta: Option<Vec<u8>>,
    run_files: BTreeSet<String>,
    program: bool,
    root: bool,
    /// `image/deps/` entries (beside `image/program` only).
    deps: bool,
    pages: u64,
    /// `run/image-view`, and the `image/files/` entries by hash.
    view: Option<Vec<u8>>,
    view_files: BTreeSet<String>,
}

impl Visitor for Check {
    fn header(&mut self, version: u32) -> Result<(), ArchiveError> {
        self.version = version;
        Ok(())
    }

    fn begin(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        self.index += 1;
        let name = parse_name(&e.path).or_else(|why| refused(format!("refused: {why}")))?;
        if !self.seen.insert(e.path.clone()) {
            return refused(format!("refused: `{}` appears twice", e.path));
        }
        if self.index == 1 && name != Name::Info {
            return refused("not a rewind export: it does not start with rwd.json");
        }
        let ty = e.mode & S_IFMT;
        let want_ty = match e.kind {
            Kind::File => S_IFREG,
            Kind::Dir => S_IFDIR,
            Kind::Symlink => S_IFLNK,
        };
        if ty != want_ty {
            return refused(format!("refused: `{}` has a mode of another kind", e.path));
        }
        if e.kind != Kind::File && !matches!(name, Name::Root(_) | Name::Dep(_)) {
            return refused(format!(
                "refused: `{}` must be a file (links and directories only belong in a root image)",
                e.path
            ));
        }
        self.capture = None;
        match &name {
            Name::Info => {
                if e.raw_len > MAX_JSON {
                    return refused("refused: rwd.json is too large");
                }
                self.capture = Some(Vec::new());
            }
            Name::RunFile(f) => {
                // Kept to be read at the end (the view: which files it names).
                let kept = ["manifest.json", "meta.json", VIEW_FILE].contains(&f.as_str());
                if kept && e.raw_len > MAX_JSON {
                    return refused(format!("refused: `{}` is too large", e.path));
                }
                if kept {
                    self.capture = Some(Vec::new());
                }
                self.run_files.insert(f.clone());
            }
            Name::Page(h) => {
                if e.raw_len != PAGE_BYTES as u64 || &e.hash != h {
                    return refused(format!("damaged: `{}` is not the page it names", e.path));
                }
                self.pages += 1;
            }
            Name::ViewFile(h) => {
                // `read` checks the bytes against the entry's hash.
                if blake3::Hash::from(e.hash).to_hex().as_str() != h {
                    return refused(format!("damaged: `{}` is not the file it names", e.path));
                }
                self.view_files.insert(h.clone());
            }
            Name::Program => self.program = true,
            Name::Root(parts) | Name::Dep(parts) => {
                let (kind, parts) = match &name {
                    Name::Root(_) => {
                        self.root = true;
                        ("root", parts)
                    }
                    _ => {
                        self.deps = true;
                        ("deps", parts)
                    }
                };
                if e.kind == Kind::Dir && kind == "deps" {
                    return refused(format!("refused: `{}` must be a file or a link", e.path));
                }
                // Keyed by the entry's path under image/.
                let parts: Vec<String> = std::iter::once(kind.to_string())
                    .chain(parts.iter().cloned())
                    .collect();
                if e.kind == Kind::Symlink && e.raw_len > MAX_LINK {
                    return refused(format!("refused: the link `{}` is too long", e.path));
                }
                match e.kind {
                    Kind::Symlink => {
                        self.links.insert(parts.clone());
                    }
                    Kind::File => {
                        self.files.insert(parts.clone());
                    }
                    Kind::Dir => {}
                }
                self.root_paths.push(parts);
            }
        }
        Ok(())
    }

    fn data(&mut self, chunk: &[u8]) -> Result<(), ArchiveError> {
        if let Some(c) = &mut self.capture {
            c.extend_from_slice(chunk);
        }
        Ok(())
    }

    fn end(&mut self, e: &Entry) -> Result<(), ArchiveError> {
        let Some(bytes) = self.capture.take() else {
            return Ok(());
        };
        match parse_name(&e.path) {
            Ok(Name::Info) => {
                let info: Info = serde_json::from_slice(&bytes)
                    .or_else(|err| refused(format!("damaged: rwd.json: {err}")))?;
                self.info = Some(info);
            }
            Ok(Name::RunFile(f)) if f == "manifest.json" => self.manifest = Some(bytes),
            Ok(Name::RunFile(f)) if f == "meta.json" => self.meta = Some(bytes),
            Ok(Name::RunFile(f)) if f == VIEW_FILE => self.view = Some(bytes),
            _ => {}
        }
        Ok(())
    }
}

/// What the first pass found, checked as a whole.
pub(super) struct Checked {
    pub(super) info: Info,
    pub(super) manifest: Manifest,
    pub(super) meta: Meta,
    pub(super) pages: u64,
}

impl Checked {
    /// A root run's image view and the files it read, not its image.
    pub(super) fn viewed(&self) -> bool {
        self.info.replayable && self.info.image.as_deref() == Some("view")
    }
}

impl Check {
    pub(super) fn finish(self) -> Result<Checked, ArchiveError> {
        // Nothing may lie inside a link or a file of a root image (or of a
        // program's libraries); paths are keyed by `root/` or `deps/`.
        for p in &self.root_paths {
            for k in 2..p.len() {
                let prefix = &p[..k];
                if self.links.contains(prefix) {
                    return refused(format!(
                        "refused: `image/{}` lies inside a link",
                        p.join("/")
                    ));
                }
                if self.files.contains(prefix) {
                    return refused(format!(
                        "refused: `image/{}` lies inside a file",
                        p.join("/")
                    ));
                }
            }
        }
        let info = self
            .info
            .clone()
            .ok_or_else(|| ArchiveError::Refused(Refused("refused: no rwd.json".into())))?;
        if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&info.format) {
            return refused(format!(
                "rwd.json says format {}; this rewind reads {OLDEST_VERSION} to {FORMAT_VERSION}",
                info.format
            ));
        }
        if info.format != self.version {
            return refused(format!(
                "damaged: rwd.json says format {}, the file's header {}",
                info.format, self.version
            ));
        }
        for must in ["manifest.json", "meta.json", "events"] {
            if !self.run_files.contains(must) {
                return refused(format!("refused: it has no run/{must}"));
            }
        }
        let manifest: Manifest = serde_json::from_slice(self.manifest.as_deref().unwrap_or(b""))
            .or_else(|e| refused(format!("refused: run/manifest.json: {e}")))?;
        if let Err(e) = manifest.validate() {
            return refused(format!("refused: run/manifest.json: {e}"));
        }
        let meta: Meta = serde_json::from_slice(self.meta.as_deref().unwrap_or(b""))
            .or_else(|e| refused(format!("refused: run/meta.json: {e}")))?;
        let id = manifest.id();
        if id != info.run || meta.id != id {
            return refused(format!(
                "refused: the run's id {} is not its manifest's hash {id}",
                info.run
            ));
        }
        if info.replayable {
            let ok = match info.image.as_deref() {
                Some("program") => self.program && !self.root,
                Some("root" | "store") => !self.program && !self.deps,
                Some("view") => !self.program && !self.deps && !self.root,
                _ => false,
            };
            if !ok {
                return refused("refused: its image does not match what rwd.json says");
            }
            if manifest.stdin.is_some() && !self.run_files.contains("stdin.bin") {
                return refused("refused: it has no run/stdin.bin");
            }
        } else if self.program || self.root || self.deps || self.pages > 0 {
            return refused("refused: an export without --replayable carries an image or pages");
        }
        self.check_view(&info, &meta)?;
        Ok(Checked {
            info,
            manifest,
            meta,
            pages: self.pages,
        })
    }
}

impl Check {
    /// A `view` image: the run's image view, every file it names carried
    /// (and only those); any other file carries no `image/files/`.
    fn check_view(&self, info: &Info, meta: &Meta) -> Result<(), ArchiveError> {
        let viewed = info.image.as_deref() == Some("view");
        if info.format < VIEW_FORMAT
            && (viewed || !self.view_files.is_empty() || self.view.is_some())
        {
            return refused(format!(
                "refused: a format {} file cannot carry an image view (they came with format {VIEW_FORMAT})",
                info.format
            ));
        }
        if !(info.replayable && info.image.as_deref() == Some("view")) {
            if !self.view_files.is_empty() {
                return refused("refused: it carries image/files/ without an image view");
            }
            return Ok(());
        }
        if !matches!(meta.image, ImageLocation::Root { .. }) {
            return refused("refused: an image view of a run whose image is not a root");
        }
        let Some(bytes) = &self.view else {
            return refused("refused: its image is a view and it has no run/image-view");
        };
        let sight: Sight = serde_json::from_slice(bytes)
            .or_else(|e| refused(format!("damaged: run/image-view: {e}")))?;
        if sight.version != VIEW_VERSION {
            return refused(format!(
                "refused: run/image-view is version {}; this rewind reads {VIEW_VERSION}",
                sight.version
            ));
        }
        let named: BTreeSet<&String> = sight.files.values().filter(|h| !h.is_empty()).collect();
        for (path, hash) in &sight.files {
            if !hash.is_empty() && !self.view_files.contains(hash) {
                return refused(format!(
                    "refused: its image view names {} (file {}), which it does not carry",
                    path.display(),
                    &hash[..hash.len().min(16)]
                ));
            }
        }
        if let Some(extra) = self.view_files.iter().find(|h| !named.contains(h)) {
            return refused(format!(
                "refused: it carries image/files/{extra}, which its image view does not name"
            ));
        }
        Ok(())
    }

    /// rwd.json, the manifest and meta, as read so far (unchecked).
    pub(super) fn so_far(&self) -> Option<Checked> {
        Some(Checked {
            info: self.info.clone()?,
            manifest: serde_json::from_slice(self.manifest.as_deref()?).ok()?,
            meta: serde_json::from_slice(self.meta.as_deref()?).ok()?,
            pages: 0,
        })
    }
}
