//! A root run's image view on disk: `runs/<id>/image-view` (JSON, the
//! `image::Sight` of what the run saw of its root), and the bytes of the
//! files it read, `files/<xx>/<blake3>`, shared between runs and kept
//! while a run's view names them (`gc`). With them a run stays readable
//! after the host's tree changed (`Run::inputs`).

use super::{io, StoreError};
use crate::image::{stored_path, FileHashes, Image, Recorded, Sight, View, VIEW_VERSION};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// A run's image view, in its directory.
pub const VIEW_FILE: &str = "image-view";
/// The read files' bytes, under the store's home.
pub const FILES_DIR: &str = "files";

/// Writes the view of `image` (a root image that noted what the run saw,
/// or a recorded view the run was given) into run directory `tmp`, with
/// what `parent`'s view (a fork's parent run directory) saw; the files
/// read are kept in `home`'s `files/`. Other images write nothing.
pub fn write(
    home: &Path,
    tmp: &Path,
    image: &Image,
    parent: Option<&Path>,
) -> Result<(), StoreError> {
    let mut sight = match image.view() {
        View::Noting(_) => image.view().noted().unwrap_or_default(),
        View::Recorded(r) => r.sight.clone(),
        View::Host => return Ok(()),
    };
    if let Some(p) = parent.map(read).transpose()?.flatten() {
        merge(&mut sight, p);
    }
    let cache = FileHashes::open(home.join(super::FILE_HASHES));
    let files = home.join(FILES_DIR);
    let paths: Vec<_> = sight.files.keys().cloned().collect();
    for path in paths {
        if !sight.files[&path].is_empty() {
            continue;
        }
        match keep_file(&cache, &files, &path)? {
            Some(hash) => sight.files.insert(path, hash),
            // Gone since it was read: the run's view cannot give it.
            None => sight.files.remove(&path),
        };
    }
    let _ = cache.save();
    let p = tmp.join(VIEW_FILE);
    // A root path that is not UTF-8 cannot be a JSON key: an error, not a panic.
    let json = serde_json::to_vec(&sight)
        .map_err(|e| io(&p)(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
    std::fs::write(&p, json).map_err(io(&p))
}

/// Adds what `from` saw to `into` (what `into` saw wins).
fn merge(into: &mut Sight, from: Sight) {
    into.root_perm = into.root_perm.or(from.root_perm);
    for (k, v) in from.entries {
        into.entries.entry(k).or_insert(v);
    }
    for (k, v) in from.listings {
        into.listings.entry(k).or_insert(v);
    }
    for (k, v) in from.files {
        let e = into.files.entry(k).or_default();
        if e.is_empty() {
            *e = v;
        }
    }
}

/// Keeps host file `path`'s bytes in `files` (a copy, unless there is one
/// already): its BLAKE3, or None when it is gone.
fn keep_file(cache: &FileHashes, files: &Path, path: &Path) -> Result<Option<String>, StoreError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Ok(None);
    }
    let Some(hash) = cache.hash(path, &meta).map_err(io(path))? else {
        return Ok(None);
    };
    let hex = crate::run::pages::hex(&hash);
    let dest = stored_path(files, &hex);
    if dest.exists() {
        return Ok(Some(hex));
    }
    let dir = dest.parent().unwrap_or(files);
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = dir.join(format!(".tmp-{hex}-{}", std::process::id()));
    std::fs::copy(path, &tmp).map_err(io(path))?;
    std::fs::rename(&tmp, &dest).map_err(io(&dest))?;
    Ok(Some(hex))
}

/// The view in run directory `dir`, if it has one.
pub fn read(dir: &Path) -> Result<Option<Sight>, StoreError> {
    let p = dir.join(VIEW_FILE);
    let bytes = match std::fs::read(&p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        r => r.map_err(io(&p))?,
    };
    let corrupt = |what: String| StoreError::Corrupt {
        path: p.clone(),
        what,
    };
    let sight: Sight = serde_json::from_slice(&bytes)
        .map_err(|e| corrupt(format!("a damaged image view: {e}")))?;
    if sight.version != VIEW_VERSION {
        return Err(corrupt(format!(
            "image view version {}, this build reads {VIEW_VERSION}",
            sight.version
        )));
    }
    Ok(Some(sight))
}

/// The recorded view of run directory `dir` in store `home`, if it has one.
pub fn recorded(home: &Path, dir: &Path) -> Result<Option<View>, StoreError> {
    Ok(read(dir)?.map(|s| View::Recorded(Arc::new(Recorded::new(s, home.join(FILES_DIR))))))
}

/// The hashes of the files run directory `dir`'s view names.
pub fn named_files(dir: &Path) -> Result<BTreeSet<String>, StoreError> {
    Ok(read(dir)?
        .map(|s| s.files.into_values().collect())
        .unwrap_or_default())
}
