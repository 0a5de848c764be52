//! `meta.json`: what is known about a run besides its inputs: its name, when
//! it was made, where its image lives on this host, and how it ended.

use crate::image::Image;
use crate::run::ExitStatus;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the run's image is on the host, so that replay can rebuild it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageLocation {
    /// The program file alone, seen by the guest at `guest_path`.
    Program {
        guest_path: String,
        host_path: PathBuf,
        /// A dynamically linked program's interpreter, libraries and links.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        deps: Vec<crate::image::Dep>,
    },
    /// A directory that is the guest's `/`.
    Root { dir: PathBuf },
    /// A Nix build's closure and build directory.
    Store(crate::image::StoreImage),
}

impl From<&Image> for ImageLocation {
    fn from(image: &Image) -> Self {
        match image {
            Image::Program {
                guest_path,
                host_path,
                deps,
            } => ImageLocation::Program {
                guest_path: guest_path.clone(),
                host_path: host_path.clone(),
                deps: deps.clone(),
            },
            Image::Root { dir, .. } => ImageLocation::Root { dir: dir.clone() },
            Image::Store(s) => ImageLocation::Store(s.clone()),
        }
    }
}

impl ImageLocation {
    pub fn to_image(&self) -> Image {
        match self {
            ImageLocation::Program {
                guest_path,
                host_path,
                deps,
            } => Image::Program {
                guest_path: guest_path.clone(),
                host_path: host_path.clone(),
                deps: deps.clone(),
            },
            ImageLocation::Root { dir } => Image::root(dir.clone()),
            ImageLocation::Store(s) => Image::Store(s.clone()),
        }
    }
}

/// The contents of `meta.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The run id (same as the directory name and `Manifest::id()`).
    pub id: String,
    /// A name given with `--name` (default: the program's file name).
    pub name: String,
    /// When the run was recorded: seconds since the Unix epoch.
    pub created: u64,
    /// The same in nanoseconds, to order runs made within one second.
    pub created_ns: u64,
    pub image: ImageLocation,
    /// How the run ended, as `ExitStatus` displays it (`exited:0`, `killed:SIGSEGV`..).
    pub status: String,
    pub exit: ExitStatus,
    /// The exit status `rewind run` gave: `ExitStatus::shell_code()`.
    pub exit_code: i32,
    pub steps: u64,
    pub virtual_ns: u64,
    pub wall_secs: f64,
    /// For deadlocked and timed-out runs: where each thread was.
    #[serde(default)]
    pub stuck: Vec<String>,
    /// The perturbations the run's schedule applied, in step order.
    #[serde(default)]
    pub perturbed: Vec<crate::run::Perturbed>,
    /// Each thread's name, by tid.
    #[serde(default)]
    pub thread_names: std::collections::BTreeMap<u32, String>,
    /// Number of events in the trace.
    pub events: u64,
    /// Number of bytes in `output`.
    pub output_bytes: u64,
    /// The `--timeout` the run was recorded with, in seconds.
    #[serde(default)]
    pub timeout_secs: Option<f64>,
    /// The run's image is its image view alone (`runs/<id>/image-view`):
    /// an imported `--root` run, or one recorded over a view. The host's
    /// tree is neither hashed nor read for it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub viewed: bool,
}
