//! Written pages found by the page tables' Dirty bits alone, with KVM as a
//! release build has it: no dirty log on the memory slot, so KVM fills
//! neighbouring entries, writable ones too (a debug build otherwise keeps
//! the log and checks the bits against it, `vmm/src/machine/dirty.rs`).
//! A program and its child scribble over 4 MiB and print checksums of it;
//! forks from late keyframes must print the same: a keyframe that missed
//! a written page restores stale bytes into the sums.

use rewind_tests::{guest_arg, parse_status, Home};

const BITS_ALONE: &[(&str, &str)] = &[("REWIND_DIRTY_BITS_ALONE", "1")];

#[test]
fn forks_from_keyframes_found_by_dirty_bits_alone_print_their_parents_sums() {
    let h = Home::new();
    let prog = guest_arg("scribble");
    let out = h.rewind_env(&["run", "--", &prog, "40000"], BITS_ALONE);
    let parent = parse_status(&out).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(parent.status, "exited:0", "{out}");
    let steps = parent.steps.unwrap();
    let sums = h.log(&parent.id);
    assert!(
        sums.contains("child ") && sums.contains("parent "),
        "{sums}"
    );
    for at in [steps / 2, steps * 3 / 4, steps - 50] {
        let at = at.to_string();
        let fork = h.rewind_env(
            &["fork", &parent.id, &at, "--schedule", "7", "-q"],
            BITS_ALONE,
        );
        assert!(
            fork.stderr_lines()
                .iter()
                .any(|l| l.starts_with("rewind: forking from the keyframe at step ")),
            "the fork at {at} did not start from a keyframe:\n{fork}"
        );
        assert_eq!(h.log(&fork.run_id()), sums, "the fork at {at}");
    }
}
