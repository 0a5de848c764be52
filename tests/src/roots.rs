//! Root trees for `rewind run --root`, made of the host's own files at
//! their host paths: a program with its interpreter and libraries
//! ([`add_program`]), the files of an installed Debian package
//! ([`add_package`]), a host tree as it is ([`mirror`]), each with the
//! symbolic links on the way. Files are copied, never hard-linked: a write
//! through a hard link would reach the host's file.

use std::path::Path;
use std::process::Command;
use vmm::image::{resolve_links, Dep, DepKind, Image};

/// A new empty root directory, removed when dropped.
pub fn new_root(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("a temporary directory")
}

/// A root directory holding the host programs `progs` with everything the
/// image of each would hold (interpreter, libraries, links on the way).
pub fn root_with(progs: &[&str]) -> tempfile::TempDir {
    let root = new_root("rewind-dyn-root-");
    for prog in progs {
        add_program(root.path(), prog);
    }
    root
}

/// Adds the host program at absolute path `prog` to `root`: the links on
/// the way to it, the file, and what its image holds (its interpreter and
/// libraries, found as the host's loader finds them). A file that is not a
/// dynamically linked ELF program is added alone.
pub fn add_program(root: &Path, prog: &str) {
    let Some(real) = mirror_path(root, prog) else {
        panic!("{prog}: no such file on the host");
    };
    let image = Image::program(real.clone().into())
        .unwrap_or_else(|e| panic!("{prog}: its libraries: {e}"));
    let Image::Program { deps, .. } = image else {
        unreachable!("Image::program makes a program image")
    };
    for Dep { guest, kind } in deps {
        let to = root.join(guest.trim_start_matches('/'));
        if std::fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        match kind {
            DepKind::File { host } => {
                std::fs::copy(&host, &to)
                    .unwrap_or_else(|e| panic!("copy {}: {e}", host.display()));
            }
            DepKind::Symlink { target } => std::os::unix::fs::symlink(target, &to).unwrap(),
        }
    }
}

/// The packages of `packages` that dpkg does not have installed.
pub fn missing_packages(packages: &[&str]) -> Vec<String> {
    packages
        .iter()
        .filter(|p| {
            let out = Command::new("dpkg-query")
                .args(["-W", "-f=${db:Status-Status}", p])
                .output();
            !matches!(out, Ok(o) if o.status.success() && o.stdout == b"installed")
        })
        .map(|p| p.to_string())
        .collect()
}

/// Adds the files of the installed Debian package `package` (`dpkg -L`)
/// to `root`, but not its documentation (`/usr/share/`): each with the
/// links on the way, and each ELF program's interpreter and libraries
/// ([`add_program`]). Directories come as the parents of their files.
pub fn add_package(root: &Path, package: &str) {
    let out = Command::new("dpkg")
        .args(["-L", package])
        .output()
        .expect("dpkg -L runs");
    assert!(out.status.success(), "dpkg -L {package}: not installed");
    for path in String::from_utf8(out.stdout).unwrap().lines() {
        if path.starts_with("/usr/share/") || !path.starts_with('/') {
            continue;
        }
        // A directory, or a link to one (`/lib64` in a merged /usr): it
        // comes with the files under it, and only with them.
        if std::fs::metadata(path).is_ok_and(|md| md.is_dir()) {
            continue;
        }
        let Some(real) = mirror_path(root, path) else {
            continue; // a dangling link
        };
        if is_elf_program(Path::new(&real)) {
            add_program(root, &real);
        }
    }
}

/// Whether `path` is an executable regular file that starts as ELF does.
fn is_elf_program(path: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let Ok(md) = std::fs::metadata(path) else {
        return false;
    };
    let mut magic = [0u8; 4];
    md.is_file()
        && md.permissions().mode() & 0o111 != 0
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && magic == *b"\x7fELF"
}

/// A root holding the JDK that the host's `java` (at `java`, a link
/// through /etc/alternatives) runs from: the links on the way, the JDK's
/// `bin/java`, `lib` and `conf`, the configuration `conf` links into, and
/// the C libraries it loads. For `java -Xint -version` (the programs table's
/// row and the engine bench).
pub fn java_root(java: &str) -> tempfile::TempDir {
    let real = std::fs::canonicalize(java).unwrap();
    // .../bin/java -> the JDK's home, its libraries and configuration.
    let jdk = real.parent().unwrap().parent().unwrap();
    let root = new_root("rewind-java-root-");
    mirror_path(root.path(), java);
    for sub in ["bin/java", "lib", "conf"] {
        mirror(root.path(), &jdk.join(sub));
    }
    for dir in ["/etc/java-17-openjdk", "/etc/java-21-openjdk"] {
        if Path::new(dir).exists() {
            mirror(root.path(), Path::new(dir));
        }
    }
    for lib in [
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/lib/x86_64-linux-gnu/libgcc_s.so.1",
    ] {
        mirror_path(root.path(), lib);
    }
    root
}

/// Copies the host tree at `from` into `root` at the same path, symbolic
/// links as they are, leaving what is there already.
pub fn mirror(root: &Path, from: &Path) {
    let to = root.join(from.strip_prefix("/").unwrap());
    let md = std::fs::symlink_metadata(from).unwrap();
    if md.is_dir() {
        for e in std::fs::read_dir(from).unwrap() {
            mirror(root, &e.unwrap().path());
        }
        return;
    }
    if std::fs::symlink_metadata(&to).is_ok() {
        return;
    }
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if md.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(from).unwrap(), &to).unwrap();
    } else {
        std::fs::copy(from, &to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
}

/// Mirrors the host file at absolute `path` into `root`, with every
/// symbolic link on the way to it (a directory at its end is mirrored
/// whole): the path it resolves to, or None when nothing is there.
pub fn mirror_path(root: &Path, path: &str) -> Option<String> {
    let real = resolve_links(path, |p| {
        let host = Path::new(p);
        if !host.is_symlink() {
            return Ok(None);
        }
        mirror(root, host);
        let target = std::fs::read_link(host).map_err(|_| ())?;
        Ok(Some(target.to_str().ok_or(())?.to_string()))
    })
    .expect("no link loop");
    if std::fs::symlink_metadata(&real).is_err() {
        return None;
    }
    mirror(root, Path::new(&real));
    Some(real)
}

/// A small root for image-view tests: fs-tool at /bin, /etc/greeting,
/// /etc/unread and /data/{a,b}.
pub fn view_root(dir: &Path) {
    for d in ["bin", "etc", "data"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    std::fs::copy(crate::guest("fs-tool"), dir.join("bin/fs-tool")).unwrap();
    std::fs::write(dir.join("etc/greeting"), "hello from the root\n").unwrap();
    std::fs::write(dir.join("etc/unread"), "looked at, never read\n").unwrap();
    std::fs::write(dir.join("data/a"), "a\n").unwrap();
    std::fs::write(dir.join("data/b"), "bb\n").unwrap();
}

/// Changes a file the run read, removes one it listed, adds one, and
/// changes one it only looked at.
pub fn change_view_root(dir: &Path) {
    std::fs::write(dir.join("etc/greeting"), "changed\n").unwrap();
    std::fs::remove_file(dir.join("data/a")).unwrap();
    std::fs::write(dir.join("data/c"), "new\n").unwrap();
    std::fs::write(dir.join("etc/unread"), "changed too\n").unwrap();
}
