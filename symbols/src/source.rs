//! Source files, with where they came from. In order: the run's image (the
//! file system the program ran in) when the path is there; the host's file,
//! if it matches what the program was built from (the DWARF 5 MD5 when the
//! line table has one; else the recorded size and modification time when
//! there are any, else the file must not be newer than the program, which is
//! said as a caveat); else debuginfod. A file that does not match is never
//! shown: the error says why each place was refused.

use crate::debuginfod::Artifact;
use crate::module::FileEntry;
use crate::Symbolizer;
use md5::{Digest, Md5};
use std::time::{SystemTime, UNIX_EPOCH};

/// Where a source file's text came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Origin {
    /// The run's own file system, at the same path.
    Image { path: String },
    /// The host's file at the path the debug info names.
    Host { path: String, verified: Verified },
    /// A debuginfod server (the cached copy).
    Debuginfod { cached: String },
}

/// How a host file was matched to the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verified {
    /// Its MD5 is the one the line table records.
    Md5,
    /// Its size and modification time are the recorded ones.
    SizeAndTime,
    /// Nothing recorded to check against: not newer than the program.
    NotNewerThanProgram,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Source {
    /// The path the debug info names.
    pub path: String,
    pub text: String,
    pub origin: Origin,
    /// What the user should know before trusting it.
    pub caveat: Option<String>,
}

impl Source {
    /// `line` (1-based) and `context` lines either side: (number, text).
    pub fn around(&self, line: u32, context: u32) -> Vec<(u32, &str)> {
        let first = line.saturating_sub(context).max(1);
        self.text
            .lines()
            .enumerate()
            .map(|(i, l)| (i as u32 + 1, l))
            .filter(|(n, _)| *n >= first && *n <= line + context)
            .collect()
    }

    /// One line saying where it came from.
    pub fn provenance(&self) -> String {
        let from = match &self.origin {
            Origin::Image { path } => format!("{path} from the run's image"),
            Origin::Host { path, verified } => format!(
                "{path} on this host ({})",
                match verified {
                    Verified::Md5 => "its MD5 matches the debug info",
                    Verified::SizeAndTime => "its size and time match the debug info",
                    Verified::NotNewerThanProgram => "not verified",
                }
            ),
            Origin::Debuginfod { cached } => format!("{} from debuginfod ({cached})", self.path),
        };
        match &self.caveat {
            Some(c) => format!("{from}; {c}"),
            None => from,
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SourceError {
    #[error("source {path} not found ({})", tried.join("; "))]
    NotFound { path: String, tried: Vec<String> },
}

impl Symbolizer {
    /// The text of a source file the debug info names (`Location::file`).
    /// `image` reads a path from the run's file system; `line`, when given,
    /// must exist in the file.
    pub fn source(
        &self,
        path: &str,
        line: Option<u32>,
        image: &mut dyn FnMut(&str) -> Option<Vec<u8>>,
    ) -> Result<Source, SourceError> {
        let (entry, build_id) = self
            .mapped
            .iter()
            .find_map(|m| Some((m.module.file_entry(path)?, m.module.build_id_hex())))
            .unwrap_or_default();
        let mut tried = Vec::new();
        let fits = |bytes: &[u8], tried: &mut Vec<String>, what: &str| -> bool {
            if let Some(want) = entry.md5 {
                if Md5::digest(bytes)[..] != want[..] {
                    tried.push(format!("{what}: its MD5 differs from the debug info's"));
                    return false;
                }
            }
            if let Some(line) = line {
                let lines = bytes.split(|b| *b == b'\n').count() as u32;
                if line > lines {
                    tried.push(format!("{what}: it has no line {line}"));
                    return false;
                }
            }
            true
        };
        let make = |bytes: Vec<u8>, origin, caveat| Source {
            path: path.to_string(),
            text: String::from_utf8_lossy(&bytes).into_owned(),
            origin,
            caveat,
        };

        match image(path) {
            Some(bytes) if fits(&bytes, &mut tried, "in the image") => {
                return Ok(make(
                    bytes,
                    Origin::Image {
                        path: path.to_string(),
                    },
                    None,
                ));
            }
            Some(_) => {}
            None => tried.push("not in the run's image".to_string()),
        }

        match std::fs::read(path) {
            Ok(bytes) if fits(&bytes, &mut tried, "on this host") => {
                match self.host_verdict(path, bytes.len() as u64, &entry) {
                    Ok((verified, caveat)) => {
                        return Ok(make(
                            bytes,
                            Origin::Host {
                                path: path.to_string(),
                                verified,
                            },
                            caveat,
                        ))
                    }
                    Err(why) => tried.push(format!("on this host: {why}")),
                }
            }
            Ok(_) => {}
            Err(e) => tried.push(format!("on this host: {e}")),
        }

        match (&self.finder.debuginfod, &build_id) {
            (Some(d), Some(id)) => match d.fetch(id, Artifact::Source(path)) {
                Ok(p) => match std::fs::read(&p) {
                    Ok(bytes) if fits(&bytes, &mut tried, "from debuginfod") => {
                        let cached = p.display().to_string();
                        return Ok(make(bytes, Origin::Debuginfod { cached }, None));
                    }
                    Ok(_) => {}
                    Err(e) => tried.push(format!("{}: {e}", p.display())),
                },
                Err(e) => tried.push(format!("debuginfod: {e}")),
            },
            (None, _) => tried.push("no debuginfod server ($DEBUGINFOD_URLS)".to_string()),
            (Some(_), None) => tried.push("no build id to ask debuginfod with".to_string()),
        }
        Err(SourceError::NotFound {
            path: path.to_string(),
            tried,
        })
    }

    /// Whether a host file whose MD5 (if any) matched is the one built from.
    fn host_verdict(
        &self,
        path: &str,
        size: u64,
        entry: &FileEntry,
    ) -> Result<(Verified, Option<String>), String> {
        if entry.md5.is_some() {
            return Ok((Verified::Md5, None));
        }
        let mtime = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map_err(|e| e.to_string())?;
        if entry.size != 0 || entry.mtime != 0 {
            if entry.size != 0 && entry.size != size {
                return Err(format!(
                    "{size} bytes, where the debug info records {}",
                    entry.size
                ));
            }
            let secs = mtime.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            if entry.mtime != 0 && entry.mtime != secs {
                return Err("its modification time is not the one the debug info records".into());
            }
            return Ok((Verified::SizeAndTime, None));
        }
        if let Some(program) = self.program_mtime {
            if mtime > program {
                return Err("changed after the program was built (no checksum in the debug info to check it by)".into());
            }
        }
        let age = match self.program_mtime {
            Some(_) => "not newer than the program",
            None => "the program's time is not known",
        };
        Ok((
            Verified::NotNewerThanProgram,
            Some(format!(
                "caveat: the debug info records no checksum, so this host file ({size} bytes, {age}) may not be exactly what was built"
            )),
        ))
    }
}

/// Seconds since the epoch, for messages.
pub fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
