//! The host's Nix, asked through its own commands (`nix-instantiate`,
//! `nix-store`, `nix`): which derivation an installable names, its inputs
//! realised, their closure, what the store and its substituters hold.
//! Derivations themselves are read from their `.drv` files (`drv`).

use crate::drv::{Derivation, DrvError};
use crate::nar::NarHash;
use crate::narinfo::{hash_part, NarInfo};
use std::collections::BTreeMap;
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("no Nix on this host ({0} not found): install it (Debian: apt-get install nix-bin)")]
    NoNix(&'static str),
    #[error("{installable}: {why}")]
    Unknown { installable: String, why: String },
    #[error("{0}")]
    Drv(#[from] DrvError),
    #[error("{command}: {why}")]
    Tool { command: String, why: String },
}

/// What `rewind nix` is given: a `.drv` path, a Nix file and an attribute,
/// or a flake reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installable {
    Drv(String),
    File { file: String, attr: Option<String> },
    Flake(String),
}

impl Installable {
    pub fn parse(s: &str, attr: Option<&str>) -> Installable {
        let attr = attr.map(str::to_string);
        if s.ends_with(".drv") && attr.is_none() {
            Installable::Drv(s.to_string())
        } else if attr.is_some() || s.ends_with(".nix") || !s.contains('#') {
            Installable::File {
                file: s.to_string(),
                attr,
            }
        } else {
            Installable::Flake(s.to_string())
        }
    }
}

impl std::fmt::Display for Installable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Installable::Drv(p) | Installable::Flake(p) => f.write_str(p),
            Installable::File { file, attr: None } => f.write_str(file),
            Installable::File {
                file,
                attr: Some(a),
            } => write!(f, "{file} -A {a}"),
        }
    }
}

/// The host's Nix tools.
#[derive(Debug, Clone)]
pub struct Host {
    _found: (),
}

/// The first `error:` line of a Nix tool's stderr, without its colours.
fn error_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let mut plain = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // ESC [ ... final byte
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    let lines: Vec<&str> = plain
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .find(|l| l.starts_with("error:"))
        .or(lines.last())
        .copied()
        .unwrap_or("failed with no message");
    let line = line.strip_prefix("error:").unwrap_or(line).trim();
    // What Nix adds on a line of its own after `error:`, if anything.
    match lines.iter().position(|l| *l == "error:") {
        Some(i) if line.is_empty() => lines.get(i + 1).copied().unwrap_or("failed").to_string(),
        _ => line.to_string(),
    }
}

impl Host {
    /// The host's Nix, when its tools are on PATH.
    pub fn find() -> Result<Host, HostError> {
        for tool in ["nix-store", "nix-instantiate"] {
            let found = Command::new(tool)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success());
            if !found {
                return Err(HostError::NoNix(tool));
            }
        }
        Ok(Host { _found: () })
    }

    /// Runs a tool; its standard output, or its error line.
    fn run(&self, tool: &str, args: &[&str]) -> Result<String, HostError> {
        let out = Command::new(tool)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| HostError::Tool {
                command: tool.to_string(),
                why: e.to_string(),
            })?;
        if !out.status.success() {
            return Err(HostError::Tool {
                command: format!("{tool} {}", args.first().copied().unwrap_or("")),
                why: error_line(&out.stderr),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The `.drv` path an installable names (instantiating it if needed).
    pub fn derivation_path(&self, inst: &Installable) -> Result<String, HostError> {
        let unknown = |e: HostError| match e {
            HostError::Tool { why, .. } => HostError::Unknown {
                installable: inst.to_string(),
                why,
            },
            e => e,
        };
        let out = match inst {
            Installable::Drv(p) => self
                .run("nix-store", &["--query", "--deriver", "--", p])
                .map(|_| p.clone()),
            Installable::File { file, attr } => {
                let mut args = vec![file.as_str()];
                if let Some(a) = attr {
                    args.extend(["-A", a.as_str()]);
                }
                self.run("nix-instantiate", &args)
            }
            Installable::Flake(r) => self.run("nix", &["path-info", "--derivation", r]),
        }
        .map_err(unknown)?;
        let paths: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        match paths.as_slice() {
            [one] if one.ends_with(".drv") && hash_part(one.trim_end_matches(".drv")).is_some() => {
                Ok(one.to_string())
            }
            _ => Err(HostError::Unknown {
                installable: inst.to_string(),
                why: "does not name one derivation".into(),
            }),
        }
    }

    /// The derivation at a `.drv` path.
    pub fn read_drv(&self, drv: &str) -> Result<Derivation, HostError> {
        let text = std::fs::read_to_string(drv).map_err(|e| HostError::Unknown {
            installable: drv.to_string(),
            why: e.to_string(),
        })?;
        Ok(Derivation::parse(&text)?)
    }

    /// Builds (or substitutes) the derivation's inputs, not the
    /// derivation: the store paths its build reads, its sources and the
    /// outputs it uses of each input derivation.
    pub fn realise_inputs(&self, d: &Derivation) -> Result<Vec<String>, HostError> {
        let mut paths = d.input_srcs.clone();
        if !d.input_drvs.is_empty() {
            let mut args = vec!["--realise", "--quiet"];
            args.extend(d.input_drvs.iter().map(|(p, _)| p.as_str()));
            self.run("nix-store", &args)?;
        }
        for (drv, outs) in &d.input_drvs {
            let input = self.read_drv(drv)?;
            for o in input.outputs.iter().filter(|o| outs.contains(&o.name)) {
                paths.push(o.path.clone());
            }
        }
        Ok(paths)
    }

    /// Builds (or substitutes) a derivation's outputs on the host: their paths.
    pub fn realise(&self, drv: &str) -> Result<Vec<String>, HostError> {
        let out = self.run("nix-store", &["--realise", "--quiet", "--", drv])?;
        Ok(out
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect())
    }

    /// Every store path `paths` need, themselves included, sorted.
    pub fn closure(&self, paths: &[String]) -> Result<Vec<String>, HostError> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = vec!["--query", "--requisites", "--"];
        args.extend(paths.iter().map(String::as_str));
        let out = self.run("nix-store", &args)?;
        let mut all: Vec<String> = out
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        all.sort();
        all.dedup();
        Ok(all)
    }

    /// The NAR hash the local store (or, with `store`, that store) has for
    /// each path; None for a path it does not hold.
    pub fn nar_hashes(
        &self,
        paths: &[String],
        store: Option<&str>,
    ) -> Result<BTreeMap<String, Option<NarHash>>, HostError> {
        let mut args = vec!["path-info", "--json"];
        if let Some(s) = store {
            args.extend(["--store", s]);
        }
        args.push("--");
        args.extend(paths.iter().map(String::as_str));
        let out = self.run("nix", &args);
        // A path the store has never seen is an error for some versions.
        let out = match out {
            Ok(o) => o,
            Err(_) if paths.len() > 1 => {
                let mut all = BTreeMap::new();
                for p in paths {
                    all.extend(self.nar_hashes(std::slice::from_ref(p), store)?);
                }
                return Ok(all);
            }
            Err(HostError::Tool { why, .. })
                if why.contains("is not valid") || why.contains("does not exist") =>
            {
                return Ok(paths.iter().map(|p| (p.clone(), None)).collect())
            }
            Err(e) => return Err(e),
        };
        Ok(parse_path_info(&out, paths))
    }

    /// The substituters the host's Nix is configured with.
    pub fn substituters(&self) -> Vec<String> {
        let out = self
            .run("nix", &["show-config"])
            .or_else(|_| self.run("nix", &["config", "show"]))
            .unwrap_or_default();
        out.lines()
            .find_map(|l| l.strip_prefix("substituters = "))
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// The NAR hash a binary cache's `.narinfo` gives `path`: a `file://`
    /// cache is read here, any other through the host's Nix. None when
    /// the cache does not have it.
    pub fn cache_hash(&self, cache: &str, path: &str) -> Result<Option<NarHash>, HostError> {
        let Some(dir) = cache.strip_prefix("file://") else {
            let all = self.nar_hashes(&[path.to_string()], Some(cache))?;
            return Ok(all.get(path).copied().flatten());
        };
        let dir = dir.split('?').next().unwrap_or(dir);
        let bad = |why: String| HostError::Tool {
            command: format!("cache {cache}"),
            why,
        };
        let hash = hash_part(path).ok_or_else(|| bad(format!("{path} is not a store path")))?;
        let file = std::path::Path::new(dir).join(format!("{hash}.narinfo"));
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(bad(format!("{}: {e}", file.display()))),
        };
        let info = NarInfo::parse(&text)
            .ok_or_else(|| bad(format!("{} is not a narinfo", file.display())))?;
        if info.store_path != path {
            return Err(bad(format!("{} is of {}", file.display(), info.store_path)));
        }
        Ok(Some(info.nar_hash))
    }
}

/// `nix path-info --json`'s answer: a list of objects with `path` (Nix
/// 2.8 to 2.18) or an object by path (later), `narHash` where valid.
fn parse_path_info(json: &str, paths: &[String]) -> BTreeMap<String, Option<NarHash>> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let hash = |o: &serde_json::Value| {
        o.get("narHash")
            .and_then(|h| h.as_str())
            .and_then(NarHash::parse)
    };
    let mut found = BTreeMap::new();
    match &v {
        serde_json::Value::Array(items) => {
            for o in items {
                if let Some(p) = o.get("path").and_then(|p| p.as_str()) {
                    found.insert(p.to_string(), hash(o));
                }
            }
        }
        serde_json::Value::Object(map) => {
            for (p, o) in map {
                found.insert(p.clone(), hash(o));
            }
        }
        _ => {}
    }
    paths
        .iter()
        .map(|p| (p.clone(), found.get(p).copied().flatten()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installables_and_error_lines() {
        assert_eq!(
            Installable::parse("/nix/store/x-a.drv", None),
            Installable::Drv("/nix/store/x-a.drv".into())
        );
        assert!(matches!(
            Installable::parse("ex.nix", Some("bank")),
            Installable::File { .. }
        ));
        assert!(matches!(
            Installable::parse(".#bank", None),
            Installable::Flake(_)
        ));
        assert_eq!(
            error_line(b"warning: x\n\x1b[31;1merror:\x1b[0m attribute 'nope' missing\n  at ...\n"),
            "attribute 'nope' missing"
        );
        assert_eq!(error_line(b"error:\n  some trace\n"), "some trace");
    }

    #[test]
    fn path_info_in_both_forms() {
        let h = "sha256:0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73";
        let paths = vec!["/nix/store/a".to_string(), "/nix/store/b".to_string()];
        let old = format!(
            r#"[{{"path":"/nix/store/a","narHash":"{h}"}},{{"path":"/nix/store/b","valid":false}}]"#
        );
        let new = format!(r#"{{"/nix/store/a":{{"narHash":"{h}"}},"/nix/store/b":null}}"#);
        for json in [old, new] {
            let got = parse_path_info(&json, &paths);
            assert_eq!(got["/nix/store/a"].map(|x| x.to_nix()).as_deref(), Some(h));
            assert_eq!(got["/nix/store/b"], None);
        }
    }
}
