//! Path resolution: a guest path walked to the node it names, following
//! symbolic links, and lexical normalization.

use super::*;
use crate::image::MAX_SYMLINKS;

/// What a path names, once resolved.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Resolved {
    /// The directory the last component is in.
    pub parent: Ino,
    /// The last component (empty for `/`, `.` or `..` endings).
    pub name: String,
    /// The node, if it exists.
    pub ino: Option<Ino>,
    /// The path ended in a slash (or `.`/`..`): it must be a directory.
    pub want_dir: bool,
}

/// What only the kernel's process table knows: where magic links
/// (`/proc/self`, `/proc/<pid>/exe`) point, and which processes, threads
/// and descriptors `/proc` and `/proc/<pid>/{task,fd}` hold.
pub trait Links {
    fn link_target(&mut self, tree: &Tree, ino: Ino) -> SysResult<String>;
    /// The child `name` of a directory made on the fly (`/proc/<pid>/fd`),
    /// or of `/proc` (a live process's directory).
    fn dyn_child(&mut self, tree: &mut Tree, dir: Ino, name: &str) -> SysResult<Option<Ino>>;
}

impl Tree {
    /// Resolves `path` from directory `start` (absolute paths from the root).
    /// Links in the middle are followed; the last one only if `follow`. A
    /// link's target resolves inside the tree: `..` at the root stays there,
    /// absolute targets start from the guest's root.
    pub fn resolve(
        &mut self,
        links: &mut dyn Links,
        start: Ino,
        path: &str,
        follow: bool,
    ) -> SysResult<Resolved> {
        if path.is_empty() {
            return Err(ENOENT);
        }
        let mut budget = MAX_SYMLINKS;
        self.walk(links, start, path, follow, &mut budget)
    }

    fn walk(
        &mut self,
        links: &mut dyn Links,
        start: Ino,
        path: &str,
        follow: bool,
        budget: &mut u32,
    ) -> SysResult<Resolved> {
        let mut dir = if path.starts_with('/') {
            ROOT_INO
        } else {
            start
        };
        let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
        let trailing = path.ends_with('/');
        if comps.is_empty() {
            // "/" (or "///"): the root itself.
            return Ok(Resolved {
                parent: ROOT_INO,
                name: String::new(),
                ino: Some(dir),
                want_dir: true,
            });
        }
        for (i, c) in comps.iter().enumerate() {
            let last = i + 1 == comps.len();
            let node = self.node(dir)?;
            if node.file_type() != S_IFDIR {
                return Err(ENOTDIR);
            }
            let dynamic = !node.is_dir();
            if *c == "." || *c == ".." {
                let next = if *c == ".." { self.parent_of(dir) } else { dir };
                if last {
                    return Ok(Resolved {
                        parent: self.parent_of(next),
                        name: String::new(),
                        ino: Some(next),
                        want_dir: true,
                    });
                }
                dir = next;
                continue;
            }
            if c.len() > 255 {
                return Err(ENAMETOOLONG);
            }
            let child = if dynamic {
                links.dyn_child(self, dir, c)?
            } else {
                match self.lookup(dir, c)? {
                    None if self.is_proc_root(dir) => links.dyn_child(self, dir, c)?,
                    found => found,
                }
            };
            let Some(child) = child else {
                if last {
                    return Ok(Resolved {
                        parent: dir,
                        name: c.to_string(),
                        ino: None,
                        want_dir: trailing,
                    });
                }
                return Err(ENOENT);
            };
            let is_link = self.node(child)?.is_link();
            if is_link && (!last || follow || trailing) {
                if *budget == 0 {
                    return Err(ELOOP);
                }
                *budget -= 1;
                let target = links.link_target(self, child)?;
                if target.is_empty() {
                    return Err(ENOENT);
                }
                let r = self.walk(links, dir, &target, true, budget)?;
                let Some(ino) = r.ino else {
                    if last {
                        // A dangling link: what it points to may be created.
                        return Ok(Resolved {
                            want_dir: r.want_dir || trailing,
                            ..r
                        });
                    }
                    return Err(ENOENT);
                };
                if last {
                    return Ok(Resolved {
                        want_dir: r.want_dir || trailing,
                        ..r
                    });
                }
                dir = ino;
                continue;
            }
            if last {
                return Ok(Resolved {
                    parent: dir,
                    name: c.to_string(),
                    ino: Some(child),
                    want_dir: trailing,
                });
            }
            dir = child;
        }
        unreachable!("the loop returns at the last component")
    }
}

/// Joins and normalizes a guest path lexically (`.`, `..`, repeated slashes).
pub fn normalize(base: &str, path: &str) -> String {
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{base}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for c in full.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}
