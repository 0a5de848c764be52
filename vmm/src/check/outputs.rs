//! Properties over the trees a run leaves at its kept paths (`Limits::keep`,
//! a Nix build's outputs): the same as schedule 0's, or the digests the
//! front end expects (your store's NAR hashes). A tree is told by a digest
//! the front end chooses (`Digest`; a NAR hash for Nix), and where it
//! differs by the first file that does.

use super::property::Verdict;
use crate::run::FileTree;
use std::collections::BTreeMap;

/// A tree's name for people: `sha256:...` (a NAR hash) or `blake3:...`.
pub type Digest = fn(&FileTree) -> String;

/// The digest when the front end gives none: BLAKE3 over the tree's
/// entries in order (kind, name, executable bit, bytes or target).
pub fn blake3_digest(tree: &FileTree) -> String {
    fn feed(h: &mut blake3::Hasher, t: &FileTree) {
        match t {
            FileTree::File { executable, bytes } => {
                h.update(if *executable { b"x" } else { b"f" });
                h.update(&(bytes.len() as u64).to_le_bytes());
                h.update(bytes);
            }
            FileTree::Symlink(target) => {
                h.update(b"l");
                h.update(&(target.len() as u64).to_le_bytes());
                h.update(target.as_bytes());
            }
            FileTree::Dir(entries) => {
                h.update(b"d");
                h.update(&(entries.len() as u64).to_le_bytes());
                for (name, t) in entries {
                    h.update(&(name.len() as u64).to_le_bytes());
                    h.update(name.as_bytes());
                    feed(h, t);
                }
            }
        }
    }
    let mut h = blake3::Hasher::new();
    feed(&mut h, tree);
    format!("blake3:{}", h.finalize().to_hex())
}

/// The first path under `at` where `a` and `b` differ, and how.
pub fn first_difference(at: &str, a: &FileTree, b: &FileTree) -> Option<String> {
    match (a, b) {
        (FileTree::Dir(x), FileTree::Dir(y)) => {
            let names: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            names.into_iter().find_map(|n| {
                let here = format!("{at}/{n}");
                match (x.get(n), y.get(n)) {
                    (Some(p), Some(q)) => first_difference(&here, p, q),
                    (Some(_), None) => Some(format!("{here} is not in schedule 0's")),
                    _ => Some(format!("{here} is missing (schedule 0 made it)")),
                }
            })
        }
        _ if a == b => None,
        (FileTree::File { bytes: p, .. }, FileTree::File { bytes: q, .. }) if p == q => {
            Some(format!("{at} differs in its execute bit"))
        }
        (FileTree::File { bytes: p, .. }, FileTree::File { bytes: q, .. }) => {
            let at_byte = p.iter().zip(q).take_while(|(x, y)| x == y).count();
            Some(format!(
                "{at} differs from byte {at_byte} ({} bytes, schedule 0's {})",
                p.len(),
                q.len()
            ))
        }
        _ => Some(format!("{at} is another kind of file")),
    }
}

/// `same-outputs`: every kept tree is schedule 0's (`base`).
pub fn same_outputs(
    kept: &BTreeMap<String, FileTree>,
    base: Option<&BTreeMap<String, FileTree>>,
    digest: Digest,
) -> Verdict {
    let Some(base) = base else {
        return Verdict::Holds;
    };
    for (path, theirs) in base {
        match kept.get(path) {
            None => {
                return Verdict::Violated(format!(
                    "{path} was not made, where schedule 0 made it {}",
                    digest(theirs)
                ))
            }
            Some(ours) if ours != theirs => {
                let how = first_difference(path, ours, theirs).unwrap_or_default();
                return Verdict::Violated(format!(
                    "{path} is {} where schedule 0's is {}: {how}",
                    digest(ours),
                    digest(theirs)
                ));
            }
            Some(_) => {}
        }
    }
    match kept.keys().find(|p| !base.contains_key(*p)) {
        Some(p) => Verdict::Violated(format!("{p} was made, where schedule 0 made none")),
        None => Verdict::Holds,
    }
}

/// `store-outputs`: every output the store has is made with its digest.
pub fn store_outputs(
    kept: &BTreeMap<String, FileTree>,
    expected: &BTreeMap<String, String>,
    digest: Digest,
) -> Verdict {
    for (path, theirs) in expected {
        match kept.get(path).map(digest) {
            None => return Verdict::Violated(format!("{path} was not made")),
            Some(ours) if &ours != theirs => {
                return Verdict::Violated(format!(
                    "{path} is {ours} where your store's is {theirs}"
                ))
            }
            Some(_) => {}
        }
    }
    Verdict::Holds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(s: &str) -> FileTree {
        FileTree::File {
            executable: false,
            bytes: s.as_bytes().to_vec(),
        }
    }

    fn dir(entries: &[(&str, FileTree)]) -> FileTree {
        FileTree::Dir(
            entries
                .iter()
                .map(|(n, t)| (n.to_string(), t.clone()))
                .collect(),
        )
    }

    #[test]
    fn outputs_are_told_apart_by_digest_and_first_difference() {
        let out = |log: &str| -> BTreeMap<String, FileTree> {
            [("/nix/store/x-w".to_string(), dir(&[("log", file(log))]))].into()
        };
        let (ab, ba) = (out("ab\n"), out("ba\n"));
        assert_eq!(same_outputs(&ab, Some(&ab), blake3_digest), Verdict::Holds);
        assert_eq!(same_outputs(&ab, None, blake3_digest), Verdict::Holds);
        let Verdict::Violated(why) = same_outputs(&ba, Some(&ab), blake3_digest) else {
            panic!("ba is not ab");
        };
        assert!(why.starts_with("/nix/store/x-w is blake3:"), "{why}");
        assert!(
            why.ends_with("/nix/store/x-w/log differs from byte 0 (3 bytes, schedule 0's 3)"),
            "{why}"
        );
        assert!(matches!(
            same_outputs(&BTreeMap::new(), Some(&ab), blake3_digest),
            Verdict::Violated(w) if w.contains("was not made")
        ));
        let want: BTreeMap<String, String> = [(
            "/nix/store/x-w".to_string(),
            blake3_digest(&ab["/nix/store/x-w"]),
        )]
        .into();
        assert_eq!(store_outputs(&ab, &want, blake3_digest), Verdict::Holds);
        assert!(matches!(
            store_outputs(&ba, &want, blake3_digest),
            Verdict::Violated(w) if w.contains("where your store's is blake3:")
        ));
        assert_ne!(blake3_digest(&file("a")), blake3_digest(&dir(&[])));
    }
}
