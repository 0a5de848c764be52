use super::row::Support;
use super::*;

/// `lookup` searches the table by halves: a row out of place hides calls,
/// and a number twice would give one of its rows no say.
#[test]
fn the_table_is_sorted_by_number_each_once() {
    for w in TABLE.windows(2) {
        assert!(w[0].nr < w[1].nr, "{} before {}", w[0].name, w[1].name);
    }
    for row in TABLE {
        assert_eq!(lookup(row.nr).map(|r| r.name), Some(row.name));
    }
    let numbers: Vec<u32> = TABLE.iter().map(|r| r.nr).collect();
    for nr in (0..1024).chain([0x5256, 0x5258, u32::MAX]) {
        if !numbers.contains(&nr) {
            assert!(lookup(nr).is_none(), "{nr} has no row but was found");
        }
    }
    assert!(
        (0..=334).all(|nr| TABLE[nr as usize].nr == nr),
        "0-334 at their own index"
    );
}

/// A served call has a handler, a missing one none (so it gets ENOSYS); a
/// partial or missing call says why, an implemented one needs not.
#[test]
fn every_served_row_has_a_handler_and_every_note_says_something() {
    for row in TABLE {
        let served = served(row.nr).is_some();
        match row.support {
            Support::Implemented => assert!(served, "{}", row.name),
            Support::Partial(note) | Support::Missing(note) => {
                assert_eq!(
                    served,
                    row.support != Support::Missing(note),
                    "{}",
                    row.name
                );
                assert!(note.len() > 10, "{}: {note:?}", row.name);
            }
        }
        if row.noreturn || !row.args.is_empty() {
            assert!(served, "{} is missing but shows arguments", row.name);
        }
    }
}

/// Every row's number and name are Linux's (the host's `unistd_64.h`, from
/// linux-libc-dev, which the C toolchain brings), and every call Linux
/// numbers up to the table's last has a row.
#[test]
fn the_numbers_are_linuxs() {
    let path = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";
    let header = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let linux: Vec<(u32, &str)> = header
        .lines()
        .filter_map(|l| l.strip_prefix("#define __NR_"))
        .filter_map(|l| {
            let (name, nr) = l.split_once(' ')?;
            Some((nr.trim().parse().ok()?, name))
        })
        .collect();
    assert!(linux.len() > 300, "{path} names too few calls");
    let last = linux_calls().map(|r| r.nr).max().unwrap();
    let ours: Vec<(u32, &str)> = linux_calls().map(|r| (r.nr, r.name)).collect();
    let theirs: Vec<(u32, &str)> = linux.into_iter().filter(|(nr, _)| *nr <= last).collect();
    assert_eq!(ours, theirs);
    assert_eq!(nr::futex, 202);
    assert_eq!(name(nr::rewind_sdk), "rewind_sdk");
    assert_eq!(name(999), "unknown");
}
