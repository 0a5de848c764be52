//! A debuginfod client: separate debug info, executables and sources by
//! build id from the servers in `$DEBUGINFOD_URLS`, cached where
//! debuginfod clients cache (`$DEBUGINFOD_CACHE_PATH`, else
//! `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`),
//! in elfutils' layout: `<cache>/<build id>/debuginfo`, `.../executable`,
//! `.../source-<path with every / as #>`.
//!
//! A file is downloaded once: later lookups read the cache. The first
//! download of each file says so on stderr (through [`Debuginfod::on_download`]).
//! A server that cannot be reached is tried once per client, and the reason
//! is kept for the caller to report.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// What to fetch for a build id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Artifact<'a> {
    Debuginfo,
    Executable,
    /// A source file by the absolute path the debug info names.
    Source(&'a str),
}

/// Why a fetch failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    #[error("no debuginfod server is configured ($DEBUGINFOD_URLS is empty)")]
    NoServers,
    #[error("no debuginfod server has it ({0})")]
    NotFound(String),
    #[error("debuginfod server {url} cannot be reached: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("cannot write the debuginfod cache {path}: {reason}")]
    Cache { path: String, reason: String },
}

/// Largest file accepted from a server (debug info of a big program).
const MAX_BYTES: u64 = 1 << 30;

pub struct Debuginfod {
    urls: Vec<String>,
    cache: PathBuf,
    agent: ureq::Agent,
    /// Servers found unreachable, with why: not tried again by this client.
    down: Mutex<Vec<(String, String)>>,
    /// Called with a line the first time a file is downloaded.
    pub on_download: Box<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for Debuginfod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Debuginfod")
            .field("urls", &self.urls)
            .field("cache", &self.cache)
            .finish()
    }
}

impl Debuginfod {
    /// From the environment: None when `$DEBUGINFOD_URLS` is unset or empty.
    pub fn from_env(timeout: Duration) -> Option<Debuginfod> {
        let urls = std::env::var("DEBUGINFOD_URLS").ok()?;
        let urls: Vec<String> = urls.split_whitespace().map(str::to_string).collect();
        if urls.is_empty() {
            return None;
        }
        Some(Debuginfod::new(urls, default_cache(), timeout))
    }

    pub fn new(urls: Vec<String>, cache: PathBuf, timeout: Duration) -> Debuginfod {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build();
        Debuginfod {
            urls: urls
                .into_iter()
                .map(|u| u.trim_end_matches('/').to_string())
                .collect(),
            cache,
            agent: config.into(),
            down: Mutex::new(Vec::new()),
            on_download: Box::new(|line| eprintln!("rewind: {line}")),
        }
    }

    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache
    }

    /// Servers this client could not reach, with why.
    pub fn unreachable(&self) -> Vec<(String, String)> {
        self.down.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Where the cache keeps an artifact.
    pub fn cache_path(&self, build_id: &str, what: Artifact) -> PathBuf {
        let dir = self.cache.join(build_id);
        match what {
            Artifact::Debuginfo => dir.join("debuginfo"),
            Artifact::Executable => dir.join("executable"),
            Artifact::Source(p) => dir.join(format!("source-{}", p.replace('/', "#"))),
        }
    }

    /// The artifact's file in the cache, downloaded first when missing.
    pub fn fetch(&self, build_id: &str, what: Artifact) -> Result<PathBuf, FetchError> {
        let path = self.cache_path(build_id, what);
        if path.is_file() {
            return Ok(path);
        }
        if self.urls.is_empty() {
            return Err(FetchError::NoServers);
        }
        let suffix = match what {
            Artifact::Debuginfo => "debuginfo".to_string(),
            Artifact::Executable => "executable".to_string(),
            Artifact::Source(p) => format!("source{}", escape_path(p)),
        };
        let mut not_found = Vec::new();
        let mut last_down = None;
        for url in &self.urls {
            if let Some((_, why)) = self.is_down(url) {
                last_down = Some(FetchError::Unreachable {
                    url: url.clone(),
                    reason: why,
                });
                continue;
            }
            let full = format!("{url}/buildid/{build_id}/{suffix}");
            match self.agent.get(&full).call() {
                Ok(resp) if resp.status() == 200 => {
                    let mut body = Vec::new();
                    let read = resp
                        .into_body()
                        .into_reader()
                        .take(MAX_BYTES)
                        .read_to_end(&mut body);
                    if let Err(e) = read {
                        self.mark_down(url, &e.to_string());
                        last_down = Some(FetchError::Unreachable {
                            url: url.clone(),
                            reason: e.to_string(),
                        });
                        continue;
                    }
                    self.store(&path, &body)?;
                    (self.on_download)(&format!(
                        "downloaded {} ({} bytes) from {url} into {}",
                        describe(build_id, what),
                        body.len(),
                        path.display()
                    ));
                    return Ok(path);
                }
                Ok(resp) => not_found.push(format!("{url}: HTTP {}", resp.status().as_u16())),
                Err(e) => {
                    let reason = one_line(&e.to_string());
                    self.mark_down(url, &reason);
                    last_down = Some(FetchError::Unreachable {
                        url: url.clone(),
                        reason,
                    });
                }
            }
        }
        match last_down {
            Some(e) if not_found.is_empty() => Err(e),
            _ => Err(FetchError::NotFound(not_found.join(", "))),
        }
    }

    fn is_down(&self, url: &str) -> Option<(String, String)> {
        self.down
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(u, _)| u == url)
            .cloned()
    }

    fn mark_down(&self, url: &str, why: &str) {
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        if !down.iter().any(|(u, _)| u == url) {
            down.push((url.to_string(), why.to_string()));
        }
    }

    /// Writes by rename, so a reader never sees half a file.
    fn store(&self, path: &Path, body: &[u8]) -> Result<(), FetchError> {
        let err = |e: std::io::Error| FetchError::Cache {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let dir = path.parent().expect("cache paths have a parent");
        std::fs::create_dir_all(dir).map_err(err)?;
        let tmp = dir.join(format!(".tmp.{}", std::process::id()));
        std::fs::write(&tmp, body).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }
}

/// `$DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`, else
/// `~/.cache/debuginfod_client`.
pub fn default_cache() -> PathBuf {
    let var = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = var("DEBUGINFOD_CACHE_PATH") {
        return p;
    }
    let base = var("XDG_CACHE_HOME")
        .or_else(|| var("HOME").map(|h| h.join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("debuginfod_client")
}

/// A source path for a URL: every byte outside the unreserved set and `/` escaped.
fn escape_path(p: &str) -> String {
    let mut s = String::new();
    if !p.starts_with('/') {
        s.push('/');
    }
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

fn describe(build_id: &str, what: Artifact) -> String {
    match what {
        Artifact::Debuginfo => format!("debug info for build id {build_id}"),
        Artifact::Executable => format!("the executable of build id {build_id}"),
        Artifact::Source(p) => format!("source {p} of build id {build_id}"),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_layout_is_elfutils() {
        let d = Debuginfod::new(vec![], PathBuf::from("/c"), Duration::from_secs(1));
        assert_eq!(
            d.cache_path("ab", Artifact::Debuginfo),
            Path::new("/c/ab/debuginfo")
        );
        assert_eq!(
            d.cache_path("ab", Artifact::Source("/src/a b.c")),
            Path::new("/c/ab/source-#src#a b.c")
        );
        assert_eq!(escape_path("/src/a b.c"), "/src/a%20b.c");
    }

    #[test]
    fn no_servers_is_an_error_not_a_panic() {
        let dir = std::env::temp_dir().join(format!("sym-dbgd-{}", std::process::id()));
        let d = Debuginfod::new(vec![], dir, Duration::from_secs(1));
        assert!(matches!(
            d.fetch("00", Artifact::Debuginfo),
            Err(FetchError::NoServers)
        ));
    }
}
