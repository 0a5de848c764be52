//! A binary cache's `<hash>.narinfo`: `Key: value` lines that say, of one
//! store path, where its NAR is and what it hashes to. Only `StorePath`
//! and `NarHash` matter here.

use crate::nar::NarHash;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NarInfo {
    pub store_path: String,
    pub nar_hash: NarHash,
}

impl NarInfo {
    /// None when the text lacks either field or its hash is not one.
    pub fn parse(text: &str) -> Option<NarInfo> {
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':').map(str::trim))
        };
        Some(NarInfo {
            store_path: field("StorePath")?.to_string(),
            nar_hash: NarHash::parse(field("NarHash")?)?,
        })
    }
}

/// The hash part of a store path (`/nix/store/<hash>-<name>`), which
/// names its `.narinfo`; None for anything else.
pub fn hash_part(store_path: &str) -> Option<&str> {
    let base = store_path.strip_prefix("/nix/store/")?;
    let (hash, name) = base.split_once('-')?;
    (hash.len() == 32
        && !name.is_empty()
        && !name.contains('/')
        && crate::base32::decode(hash, 20).is_some())
    .then_some(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_it_needs() {
        let text = "StorePath: /nix/store/ajspn6snjn70x2g8rrf6lfqxsfba8w86-hello\nURL: nar/x.nar.xz\n\
                    Compression: xz\nNarHash: sha256:0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73\nNarSize: 120\n";
        let n = NarInfo::parse(text).unwrap();
        assert_eq!(
            n.store_path,
            "/nix/store/ajspn6snjn70x2g8rrf6lfqxsfba8w86-hello"
        );
        assert_eq!(
            n.nar_hash.to_nix(),
            "sha256:0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73"
        );
        assert!(NarInfo::parse("StorePath: /nix/store/x\n").is_none());
        assert!(NarInfo::parse("StorePath: /x\nNarHash: sha256:zz\n").is_none());
        assert_eq!(
            hash_part(&n.store_path),
            Some("ajspn6snjn70x2g8rrf6lfqxsfba8w86")
        );
        assert_eq!(hash_part("/nix/store/../etc-x"), None);
        assert_eq!(
            hash_part("/nix/store/ajspn6snjn70x2g8rrf6lfqxsfba8w86-a/b"),
            None
        );
    }
}
