//! A Nix derivation's build as a run: the host's Nix names the derivation
//! and realises its inputs; the run's image is the input closure at its
//! `/nix/store` paths with an empty build directory, its program the
//! builder, its environment the one Nix gives a builder. When the build
//! ends, each output's tree (read from the run's file system) is hashed as
//! a NAR and compared with what the host's store and each substituter say
//! of that output.

use super::record::{manifest, Prepared, RunSpec};
use anyhow::{bail, Context, Result};
use rewind_nix::host::Installable;
use rewind_nix::{nar, Derivation, Host, NarHash};
use std::collections::BTreeMap;
use vmm::image::{Image, StoreImage};
use vmm::run::FileTree;
use vmm::run::{Limits, Outcome, RunInputs};

/// The build's directory in the guest (Nix's sandbox uses the same).
pub const BUILD_DIR: &str = "/build";

/// A derivation made ready to run.
pub struct NixBuild {
    pub drv_path: String,
    pub drv: Derivation,
    pub prepared: Prepared,
}

/// INSTALLABLE and its `-A ATTR` when a command's words name a derivation
/// (`X.drv`, `FILE.nix -A ATTR`, `FLAKE#ATTR`); None for a program.
pub fn installable_words(words: &[String]) -> Option<(String, Option<String>)> {
    match words {
        [i] if i.ends_with(".drv") || i.contains('#') => Some((i.clone(), None)),
        [i, a, attr] if i.ends_with(".nix") && (a == "-A" || a == "--attr") => {
            Some((i.clone(), Some(attr.clone())))
        }
        _ => None,
    }
}

/// Asks the host's Nix for the derivation `installable` (with `-A attr`)
/// names, realises its inputs, and makes the run's inputs with `spec`'s
/// options (its program, root, cwd and env are the derivation's).
pub fn prepare(installable: &str, attr: Option<&str>, spec: &RunSpec) -> Result<NixBuild> {
    let host = Host::find()?;
    let inst = Installable::parse(installable, attr);
    let drv_path = host.derivation_path(&inst)?;
    let drv = host.read_drv(&drv_path)?;
    drv.check_buildable(&drv_path)?;
    let inputs = host
        .realise_inputs(&drv)
        .with_context(|| format!("cannot realise the inputs of {drv_path}"))?;
    let paths = host.closure(&inputs)?;
    let image = StoreImage {
        drv: drv_path.clone(),
        paths,
        build_dir: BUILD_DIR.to_string(),
        host_root: "/".into(),
    };
    if image.path_of(&drv.builder).is_none() {
        bail!(
            "{drv_path}: its builder {} is not in its input closure",
            drv.builder
        );
    }
    let base = drv.builder.rsplit('/').next().unwrap_or(&drv.builder);
    let argv: Vec<String> = std::iter::once(base.to_string())
        .chain(drv.args.iter().cloned())
        .collect();
    let mut inputs = RunInputs::new(Image::Store(image), drv.builder.clone(), argv)
        .context("cannot read the image")?;
    let env = drv
        .build_env(BUILD_DIR, spec.cores)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    inputs.manifest = manifest(spec, inputs.manifest.clone(), env, BUILD_DIR.to_string())?;
    let name = spec.name.clone().unwrap_or_else(|| drv.name().to_string());
    Ok(NixBuild {
        drv_path,
        drv,
        prepared: Prepared {
            inputs,
            name,
            hashing: None,
        },
    })
}

impl NixBuild {
    /// The limits of its run: `timeout`, and its outputs kept at its end.
    pub fn limits(&self, timeout: Option<std::time::Duration>) -> Limits {
        Limits {
            timeout,
            keep: self.drv.outputs.iter().map(|o| o.path.clone()).collect(),
            ..Default::default()
        }
    }
}

/// What `rewind shell --with` brings of a store path or an installable:
/// its outputs (whose `bin/` go on the shell's PATH) and their closure.
pub struct WithStore {
    pub outputs: Vec<String>,
    pub closure: Vec<String>,
}

/// `word` as a store path (`/nix/store/HASH-NAME`, as it is) or an
/// installable of one word (`X.drv`, `FLAKE#ATTR`, realised by the host's
/// Nix); None for any other host path.
pub fn with_store(word: &str) -> Result<Option<WithStore>> {
    let top = word
        .strip_prefix("/nix/store/")
        .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'));
    let outputs = match installable_words(&[word.to_string()]) {
        Some((i, _)) => {
            let host = Host::find()?;
            let drv = host.derivation_path(&Installable::parse(&i, None))?;
            host.realise(&drv)
                .with_context(|| format!("--with {word}: cannot build it"))?
        }
        None if top => vec![word.trim_end_matches('/').to_string()],
        None => return Ok(None),
    };
    let closure = Host::find()?.closure(&outputs)?;
    Ok(Some(WithStore { outputs, closure }))
}

/// The paths a build's outputs are at, from its environment: `outputs`
/// names them (`out` when it is not set), each its own variable.
pub fn output_paths(env: &[String]) -> Vec<String> {
    let var = |k: &str| {
        env.iter()
            .find_map(|e| e.strip_prefix(k)?.strip_prefix('='))
            .map(str::to_string)
    };
    let names = var("outputs").unwrap_or_else(|| "out".to_string());
    names
        .split_whitespace()
        .filter_map(var)
        .filter(|p| p.starts_with("/nix/store/"))
        .collect()
}

/// A kept tree's NAR hash, `sha256:...` (a check's outputs properties).
pub fn nar_digest(tree: &FileTree) -> String {
    nar::nar_hash(&nar_entry(tree)).to_nix()
}

/// Your store's NAR hash of each of `paths` it holds (`store-outputs`).
pub fn store_digests(paths: &[String]) -> Result<BTreeMap<String, String>> {
    let host = Host::find()?;
    Ok(host
        .nar_hashes(paths, None)?
        .into_iter()
        .filter_map(|(p, h)| Some((p, h?.to_nix())))
        .collect())
}

/// What one side (the host's store, or a cache) says of an output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Matches,
    Differs(NarHash),
    Absent,
    /// It could not be asked.
    Unknown(String),
}

impl Verdict {
    fn of(ours: NarHash, theirs: Result<Option<NarHash>, String>) -> Verdict {
        match theirs {
            Ok(Some(h)) if h == ours => Verdict::Matches,
            Ok(Some(h)) => Verdict::Differs(h),
            Ok(None) => Verdict::Absent,
            Err(e) => Verdict::Unknown(e),
        }
    }

    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Matches => "matches",
            Verdict::Differs(_) => "differs",
            Verdict::Absent => "absent",
            Verdict::Unknown(_) => "unknown",
        }
    }

    /// Their hash, when it differs.
    pub fn theirs(&self) -> Option<NarHash> {
        match self {
            Verdict::Differs(h) => Some(*h),
            _ => None,
        }
    }
}

/// An output of the build, and what the store and caches say of it.
#[derive(Debug, Clone)]
pub struct OutputCheck {
    pub name: String,
    pub path: String,
    /// Its NAR hash; None when the build did not make it.
    pub nar_hash: Option<NarHash>,
    pub store: Option<Verdict>,
    /// By substituter URL.
    pub caches: Vec<(String, Verdict)>,
}

impl OutputCheck {
    /// Whether something said another hash.
    pub fn differs(&self) -> bool {
        self.nar_hash.is_none()
            || matches!(self.store, Some(Verdict::Differs(_)))
            || self
                .caches
                .iter()
                .any(|(_, v)| matches!(v, Verdict::Differs(_)))
    }
}

/// A tree the run left, as a NAR holds it.
pub fn nar_entry(tree: &FileTree) -> nar::Entry {
    match tree {
        FileTree::File { executable, bytes } => nar::Entry::File {
            executable: *executable,
            contents: bytes.clone(),
        },
        FileTree::Symlink(t) => nar::Entry::Symlink(t.as_bytes().to_vec()),
        FileTree::Dir(entries) => nar::Entry::Directory(
            entries
                .iter()
                .map(|(n, t)| (n.as_bytes().to_vec(), nar_entry(t)))
                .collect(),
        ),
    }
}

/// Each output's NAR hash from the run's end, against the host's store and
/// every substituter it is configured with.
pub fn check_outputs(build: &NixBuild, outcome: &Outcome) -> Result<Vec<OutputCheck>> {
    let host = Host::find()?;
    let hashes: BTreeMap<&str, NarHash> = outcome
        .kept
        .iter()
        .map(|(p, t)| (p.as_str(), nar::nar_hash(&nar_entry(t))))
        .collect();
    let made: Vec<String> = build
        .drv
        .outputs
        .iter()
        .filter(|o| hashes.contains_key(o.path.as_str()))
        .map(|o| o.path.clone())
        .collect();
    let store = if made.is_empty() {
        BTreeMap::new()
    } else {
        host.nar_hashes(&made, None)?
    };
    let caches = if made.is_empty() {
        Vec::new()
    } else {
        host.substituters()
    };
    Ok(build
        .drv
        .outputs
        .iter()
        .map(|o| {
            let ours = hashes.get(o.path.as_str()).copied();
            OutputCheck {
                name: o.name.clone(),
                path: o.path.clone(),
                nar_hash: ours,
                store: ours.map(|h| Verdict::of(h, Ok(store.get(&o.path).copied().flatten()))),
                caches: match ours {
                    None => Vec::new(),
                    Some(h) => caches
                        .iter()
                        .map(|c| {
                            let theirs = host.cache_hash(c, &o.path).map_err(|e| e.to_string());
                            (c.clone(), Verdict::of(h, theirs))
                        })
                        .collect(),
                },
            }
        })
        .collect())
}
