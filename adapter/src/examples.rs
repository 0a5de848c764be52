//! The built-in example programs, `rewind run --example NAME`.
//!
//! Each is a C file in `guest/examples/`, built static at build time by
//! `adapter/build.rs` and embedded here, so the `rewind` binary needs no
//! other file to run them. Each example has one bug, and its `-fixed`
//! sibling the fix.

struct Example {
    name: &'static str,
    summary: &'static str,
    elf: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/examples.rs"));

fn get(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().find(|e| e.name == name)
}

/// The static ELF bytes of a built-in example.
pub fn find(name: &str) -> Option<&'static [u8]> {
    get(name).map(|e| e.elf)
}

/// The names of the built-in examples, sorted.
pub fn names() -> &'static [&'static str] {
    NAMES
}

/// One line saying what the example shows (the first line of its comment).
#[allow(dead_code)] // for listings of the examples; not every build of the CLI shows them
pub fn summary(name: &str) -> Option<&'static str> {
    get(name).map(|e| e.summary)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_example_is_a_static_elf() {
        assert!(super::names().contains(&"bank"));
        assert!(super::names().contains(&"bank-fixed"));
        for name in super::names() {
            let elf = super::find(name).unwrap();
            assert_eq!(&elf[..4], b"\x7fELF", "{name}");
            assert!(super::summary(name).is_some_and(|s| !s.is_empty()));
        }
        assert!(super::find("no-such-example").is_none());
    }
}
