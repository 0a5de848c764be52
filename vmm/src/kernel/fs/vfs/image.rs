//! The tree of an image as a run first sees it: the image's paths, the Nix
//! store paths it holds, and the monitor's own `/dev`, `/proc` and `/sys`.

use super::*;
use crate::image::Image;
use std::collections::BTreeMap;

impl Tree {
    /// The tree of an image, with the monitor's `/dev`, `/proc`, `/sys`.
    pub fn new(image: &Image, epoch_secs: u64, cores: u32) -> Tree {
        let epoch_ns = epoch_secs.saturating_mul(1_000_000_000);
        let mut t = Tree {
            nodes: BTreeMap::new(),
            image: image.clone(),
            epoch_ns,
            bytes_held: 0,
            created: 0,
            dyn_names: BTreeMap::new(),
            outside: Default::default(),
        };
        match image {
            Image::Root { dir, view } => {
                let mode = view
                    .root_perm(|| {
                        use std::os::unix::fs::PermissionsExt;
                        let m = std::fs::metadata(dir).ok()?;
                        Some(m.permissions().mode() & 0o7777)
                    })
                    .unwrap_or(0o755);
                t.nodes.insert(
                    ROOT_INO,
                    Node::new(
                        S_IFDIR | mode,
                        4096,
                        epoch_ns,
                        Kind::Dir(DirData {
                            parent: ROOT_INO,
                            name: String::new(),
                            host: Some(dir.clone()),
                            entries: None,
                            fixed: false,
                        }),
                    ),
                );
            }
            Image::Program {
                guest_path,
                host_path,
                deps,
            } => {
                t.nodes.insert(
                    ROOT_INO,
                    Node::new(S_IFDIR | 0o755, 4096, epoch_ns, empty_dir(ROOT_INO, "")),
                );
                let file = |host: &std::path::Path| {
                    let (mode, size) = std::fs::metadata(host).map_or((0o755, 0), |m| {
                        use std::os::unix::fs::PermissionsExt;
                        (m.permissions().mode() & 0o7777, m.len())
                    });
                    Node::new(
                        S_IFREG | mode,
                        size,
                        epoch_ns,
                        Kind::File(FileData::image(host.to_path_buf())),
                    )
                };
                t.insert_image_path(guest_path, file(host_path));
                for d in deps {
                    let node = match &d.kind {
                        crate::image::DepKind::File { host } => file(host),
                        crate::image::DepKind::Symlink { target } => symlink_node(target, epoch_ns),
                    };
                    t.insert_image_path(&d.guest, node);
                }
            }
            Image::Store(s) => t.add_store_paths(s),
        }
        t.add_monitor_dirs(cores);
        t
    }

    /// Adds `node` at absolute path `guest` of an image without a root
    /// directory, making the directories on the way (a path that meets
    /// something else than a directory, or is there already, is left out).
    pub(super) fn insert_image_path(&mut self, guest: &str, node: Node) {
        let parts: Vec<&str> = guest.split('/').filter(|c| !c.is_empty()).collect();
        let Some((last, dirs)) = parts.split_last() else {
            return;
        };
        let mut dir = ROOT_INO;
        for name in dirs {
            dir = match self.lookup(dir, name) {
                Ok(Some(d)) if self.nodes.get(&d).is_some_and(Node::is_dir) => d,
                Ok(None) => {
                    let n = Node::new(S_IFDIR | 0o755, 4096, self.epoch_ns, empty_dir(dir, name));
                    self.insert_image_child(dir, name, n)
                }
                _ => return,
            };
        }
        if let Ok(None) = self.lookup(dir, last) {
            self.insert_image_child(dir, last, node);
        }
    }

    /// A Nix build's tree: each store path of the closure at its place (a
    /// directory's entries read from the host when first needed), and the
    /// empty build directory; nothing else of the host.
    fn add_store_paths(&mut self, s: &crate::image::StoreImage) {
        self.nodes.insert(
            ROOT_INO,
            Node::new(
                S_IFDIR | 0o755,
                4096,
                self.epoch_ns,
                empty_dir(ROOT_INO, ""),
            ),
        );
        for p in &s.paths {
            let host = s.host_root.join(p.trim_start_matches('/'));
            let (dir, name) = p.rsplit_once('/').unwrap_or(("", p));
            if let Some(entry) = HostEntry::at(&crate::image::View::Host, host) {
                let parent = self.image_dir(dir);
                let node = entry.node(parent, name, self.epoch_ns);
                self.insert_image_path(p, node);
            }
        }
        let (dir, name) = s.build_dir.rsplit_once('/').unwrap_or(("", &s.build_dir));
        let parent = self.image_dir(dir);
        let mut build = Node::new(
            S_IFDIR | 0o700,
            4096,
            self.epoch_ns,
            empty_dir(parent, name),
        );
        build.nlink = 2;
        self.insert_image_path(&s.build_dir, build);
    }

    /// The directory at absolute path `guest` of an image without a root
    /// directory, made with the directories on the way when missing.
    fn image_dir(&mut self, guest: &str) -> Ino {
        let mut dir = ROOT_INO;
        for name in guest.split('/').filter(|c| !c.is_empty()) {
            dir = match self.lookup(dir, name) {
                Ok(Some(d)) => d,
                _ => {
                    let n = Node::new(S_IFDIR | 0o755, 4096, self.epoch_ns, empty_dir(dir, name));
                    self.insert_image_child(dir, name, n)
                }
            };
        }
        dir
    }

    /// Adds a child found in the image: its inode number comes from its place.
    pub(super) fn insert_image_child(&mut self, dir: Ino, name: &str, node: Node) -> Ino {
        let ino = self.free_ino(mix(dir, name.as_bytes()));
        self.link_new(dir, name, ino, node);
        ino
    }

    /// The first unused inode number from `h` on.
    fn free_ino(&self, h: u64) -> Ino {
        let mut ino = (h >> 1).max(16);
        while self.nodes.contains_key(&ino) {
            ino = (ino + 1) & (u64::MAX >> 1);
            ino = ino.max(16);
        }
        ino
    }

    /// An inode number for a node the guest creates.
    pub fn new_ino(&mut self) -> Ino {
        self.created += 1;
        self.free_ino(mix(0x6e65_7766_696c_6521, &self.created.to_le_bytes()))
    }

    /// Inserts `node` as `name` in `dir` (whose entries are loaded).
    pub(super) fn link_new(&mut self, dir: Ino, name: &str, ino: Ino, node: Node) {
        let is_dir = node.is_dir();
        self.nodes.insert(ino, node);
        if let Some(Kind::Dir(d)) = self.nodes.get_mut(&dir).map(|n| &mut n.kind) {
            d.entries
                .get_or_insert_with(BTreeMap::new)
                .insert(name.to_string(), ino);
        }
        if is_dir {
            if let Some(p) = self.nodes.get_mut(&dir) {
                p.nlink += 1;
            }
        }
    }

    fn add_monitor_dirs(&mut self, cores: u32) {
        let now = self.epoch_ns;
        let _ = self.entries(ROOT_INO);
        // The image's /dev, /proc and /sys are hidden by the monitor's own.
        for name in crate::image::HIDDEN_TOP {
            self.unlink_entry(ROOT_INO, name, now);
        }
        let dev = self.add_dir(ROOT_INO, "dev", 0o755, false);
        for (name, d) in [
            ("null", Device::Null),
            ("zero", Device::Zero),
            ("full", Device::Full),
            ("random", Device::Random),
            ("urandom", Device::Random),
            ("tty", Device::Tty),
        ] {
            self.add_node(dev, name, Node::new(S_IFCHR | 0o666, 0, now, Kind::Dev(d)));
        }
        for (name, target) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            self.add_node(dev, name, symlink_node(target, now));
        }
        self.add_dir(dev, "shm", 0o1777, false);
        let proc_ = self.add_dir(ROOT_INO, "proc", 0o555, true);
        for (name, p) in [
            ("self", Proc::SelfLink),
            ("thread-self", Proc::ThreadSelfLink),
        ] {
            self.add_node(
                proc_,
                name,
                Node::new(S_IFLNK | 0o777, 0, now, Kind::Proc(p)),
            );
        }
        self.add_node(
            proc_,
            "cpuinfo",
            Node::new(
                S_IFREG | 0o444,
                0,
                now,
                Kind::Proc(Proc::Text(crate::kernel::fs::special::cpuinfo(cores))),
            ),
        );
        let sys = self.add_dir(ROOT_INO, "sys", 0o555, true);
        let devices = self.add_dir(sys, "devices", 0o755, true);
        let system = self.add_dir(devices, "system", 0o755, true);
        let cpu = self.add_dir(system, "cpu", 0o755, true);
        let cores = cores.max(1);
        let list = if cores == 1 {
            "0\n".to_string()
        } else {
            format!("0-{}\n", cores - 1)
        };
        for name in ["online", "possible", "present"] {
            self.add_node(
                cpu,
                name,
                Node::new(
                    S_IFREG | 0o444,
                    4096,
                    now,
                    Kind::Proc(Proc::Text(list.clone())),
                ),
            );
        }
        if self.lookup(ROOT_INO, "tmp").ok().flatten().is_none() {
            self.add_dir(ROOT_INO, "tmp", 0o1777, false);
        }
    }

    fn add_dir(&mut self, parent: Ino, name: &str, perm: u32, fixed: bool) -> Ino {
        let mut d = empty_dir(parent, name);
        if let Kind::Dir(dd) = &mut d {
            dd.fixed = fixed;
        }
        let mut node = Node::new(S_IFDIR | perm, 4096, self.epoch_ns, d);
        node.nlink = 2;
        self.add_node(parent, name, node)
    }

    fn add_node(&mut self, parent: Ino, name: &str, node: Node) -> Ino {
        let ino = self.free_ino(mix(parent, name.as_bytes()));
        self.link_new(parent, name, ino, node);
        ino
    }
}
