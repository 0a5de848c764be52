//! The interleaving a deciding switch makes: which of another thread's
//! accesses to shared memory came, because of it, between two accesses of
//! the thread switched away from, or before or after one of them.
//!
//! Read from the failing run's events alone (memory points record every
//! access to a shared page), so it costs no run: a thread switched away at
//! step S runs again at its next switch R; every access another thread made
//! between them is checked against the switched thread's accesses before S
//! and from S on (an access event at S is the one the thread was stopped
//! before), for the same bytes with at least one writer.

use crate::record::switches::Switch;
use crate::run::{Access, Event, EventKind};

/// One recorded access to shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touch {
    pub step: u64,
    pub pid: u32,
    pub tid: u32,
    pub access: Access,
    pub addr: u64,
    pub size: u32,
    pub pc: u64,
}

impl Touch {
    fn of(e: &Event) -> Option<Touch> {
        match e.kind {
            EventKind::Access {
                pc,
                addr,
                size,
                access,
                ..
            } => Some(Touch {
                step: e.step,
                pid: e.pid,
                tid: e.tid,
                access,
                addr,
                size,
                pc,
            }),
            _ => None,
        }
    }

    /// Both touch a byte in common and one of them writes it. Addresses
    /// are virtual: only one process's accesses are compared (two processes
    /// after a fork have the same addresses for different bytes).
    fn conflicts(&self, other: &Touch) -> bool {
        let overlap = self.pid == other.pid
            && self.addr < other.addr.saturating_add(other.size.max(1) as u64)
            && other.addr < self.addr.saturating_add(self.size.max(1) as u64);
        overlap && !(self.access == Access::Read && other.access == Access::Read)
    }
}

/// Another thread's access (`between`) that the switch put between the
/// switched thread's accesses `before` and `after` of the same bytes; at
/// least one of the two is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interleaving {
    pub before: Option<Touch>,
    pub between: Touch,
    pub after: Option<Touch>,
}

/// The interleaving the thread that made `step` suffered by being switched
/// away there, in the run whose `events` and `switches` these are: the first
/// access of another thread, before the switched one ran again, that came
/// between two of its accesses to the same bytes; else the first that came
/// before one of its later accesses (an order it did not expect); else the
/// first after one of its earlier ones. One whose accesses are all in the
/// program's own code (`is_own`) comes before any that is not, and then one
/// on the bytes of the access the thread was stopped before: a lost update
/// of the program's counter is the race to tell, not the C library's lock
/// word the same switch also interleaved. None when no such access was
/// recorded (no memory points, or the run ended differently for another
/// reason).
pub fn exposed(
    events: &[Event],
    switches: &[Switch],
    step: u64,
    is_own: &dyn Fn(&Touch) -> bool,
) -> Option<Interleaving> {
    let tid = switches.iter().rev().find(|s| s.step <= step)?.tid;
    let resumed = switches
        .iter()
        .find(|s| s.step > step && s.tid == tid)
        .map_or(u64::MAX, |s| s.step);
    let touches: Vec<Touch> = events.iter().filter_map(Touch::of).collect();
    let own = |t: &&Touch| t.tid == tid;
    let before: Vec<&Touch> = touches
        .iter()
        .filter(|t| t.step < step)
        .filter(own)
        .collect();
    let after: Vec<&Touch> = touches
        .iter()
        .filter(|t| t.step >= step)
        .filter(own)
        .collect();
    // The first of the best kind: (all in own code, on the bytes of the
    // access the thread was stopped before, both sides / later / earlier).
    let mut best: Option<((bool, bool, u8), Interleaving)> = None;
    for o in touches
        .iter()
        .filter(|t| t.tid != tid && t.step > step && t.step < resumed)
    {
        let b = before.iter().rev().find(|b| b.conflicts(o)).map(|b| **b);
        let a = after.iter().find(|a| a.conflicts(o)).map(|a| **a);
        let kind = match (b, a) {
            (Some(_), Some(_)) => 2,
            (None, Some(_)) => 1,
            (Some(_), None) => 0,
            (None, None) => continue,
        };
        let all_own = [b, Some(*o), a].iter().flatten().all(is_own);
        let stopped = a.is_some_and(|a| a.step == step);
        let rank = (all_own, stopped, kind);
        if best.as_ref().is_none_or(|(r, _)| rank > *r) {
            best = Some((
                rank,
                Interleaving {
                    before: b,
                    between: *o,
                    after: a,
                },
            ));
            if rank == (true, true, 2) {
                break;
            }
        }
    }
    best.map(|(_, i)| i)
}

impl Interleaving {
    /// The steps of its accesses.
    pub fn steps(&self) -> Vec<u64> {
        [self.before, Some(self.between), self.after]
            .iter()
            .flatten()
            .map(|t| t.step)
            .collect()
    }
}

/// An access as a person reads it: the variable it touched and the place
/// of its instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Told {
    pub touch: Touch,
    /// `balance`, `pool+0x8`, else the address.
    pub variable: String,
    /// `teller (bank.c:27)`, else `teller+0x4c`, else the address.
    pub place: String,
}

/// An interleaving told: its accesses, and the sentence `thread
/// 1000/1002's write of balance at step 255, in teller (bank.c:27), came
/// between thread 1000/1001's read of it at step 215, in teller
/// (bank.c:22), and its write at step 271, in teller (bank.c:27)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Race {
    pub before: Option<Told>,
    pub between: Told,
    pub after: Option<Told>,
    pub sentence: String,
}

impl Race {
    /// `i`, made by switching away at `step`, told with `variable` naming
    /// bytes and `place` the code that made each access.
    pub fn tell(
        i: &Interleaving,
        step: u64,
        variable: &dyn Fn(u64) -> String,
        place: &dyn Fn(&Touch) -> String,
    ) -> Race {
        let told = |t: &Touch| Told {
            touch: *t,
            variable: variable(t.addr),
            place: place(t),
        };
        let (before, between, after) = (
            i.before.as_ref().map(told),
            told(&i.between),
            i.after.as_ref().map(told),
        );
        let at = |t: &Told| format!("at step {}, in {}", t.touch.step, t.place);
        let thread = |t: &Told| format!("thread {}/{}", t.touch.pid, t.touch.tid);
        // The access of the switched step itself is made when the thread
        // runs again: its event is at the step, the access after.
        // `whose`: the thread, or None when the sentence named it already.
        let later = |a: &Told, whose: Option<String>| match (a.touch.step == step, whose) {
            (true, Some(t)) => format!(
                "the {} of it {t} was stopped before at step {}, in {}",
                a.touch.access, a.touch.step, a.place
            ),
            (true, None) => format!(
                "the {} it was stopped before at step {}, in {}",
                a.touch.access, a.touch.step, a.place
            ),
            (false, Some(t)) => format!("{t}'s {} of it {}", a.touch.access, at(a)),
            (false, None) => format!("its {} {}", a.touch.access, at(a)),
        };
        let other = format!(
            "{}'s {} of {} {}",
            thread(&between),
            between.touch.access,
            between.variable,
            at(&between)
        );
        let sentence = match (&before, &after) {
            (Some(b), Some(a)) => format!(
                "{other}, came between {}'s {} of it {}, and {}",
                thread(b),
                b.touch.access,
                at(b),
                later(a, None)
            ),
            (None, Some(a)) => format!("{other}, came before {}", later(a, Some(thread(a)))),
            (Some(b), None) => format!(
                "{other}, came after {}'s {} of it {}, before that thread ran again",
                thread(b),
                b.touch.access,
                at(b)
            ),
            (None, None) => other,
        };
        Race {
            before,
            between,
            after,
            sentence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(step: u64, tid: u32, access: Access, addr: u64) -> Event {
        Event {
            step,
            pid: 1000,
            tid,
            kind: EventKind::Access {
                pc: 0x401000 + step,
                addr,
                size: 8,
                access,
                at: String::new(),
            },
        }
    }

    fn switch(step: u64, tid: u32) -> Switch {
        Switch {
            step,
            pid: 1000,
            tid,
        }
    }

    const BALANCE: u64 = 0x4b90f0;

    #[test]
    fn a_lost_update_is_the_others_write_between_a_read_and_a_write() {
        // 1001 reads, is switched away at 228 before an unrelated read,
        // 1002 reads and writes, 1001 writes what it read.
        let events = vec![
            access(215, 1001, Access::Read, BALANCE),
            access(228, 1001, Access::Read, 0x4bae78),
            access(232, 1002, Access::Read, BALANCE),
            access(255, 1002, Access::Write, BALANCE),
            access(271, 1001, Access::Write, BALANCE),
        ];
        let switches = vec![
            switch(1, 1000),
            switch(200, 1001),
            switch(229, 1002),
            switch(260, 1001),
        ];
        // The read at 232 comes before 1001's write only; the write at 255
        // between its read and its write: that one is told.
        let i = exposed(&events, &switches, 228, &|_| true).expect("an interleaving");
        assert_eq!(
            (
                i.before.map(|t| t.step),
                i.between.step,
                i.after.map(|t| t.step)
            ),
            (Some(215), 255, Some(271))
        );
        let said = Race::tell(&i, 228, &|_| "balance".into(), &|t| format!("{:#x}", t.pc)).sentence;
        assert_eq!(
            said,
            "thread 1000/1002's write of balance at step 255, in 0x4010ff, came between \
             thread 1000/1001's read of it at step 215, in 0x4010d7, and its write at step 271, in 0x40110f"
        );
    }

    #[test]
    fn both_sides_are_preferred_to_one() {
        let events = vec![
            access(10, 1001, Access::Read, BALANCE),
            access(21, 1002, Access::Write, 0x500000),
            access(22, 1002, Access::Write, BALANCE),
            access(30, 1001, Access::Read, 0x500000),
            access(31, 1001, Access::Write, BALANCE),
        ];
        let switches = vec![switch(1, 1001), switch(20, 1002), switch(30, 1001)];
        let i = exposed(&events, &switches, 19, &|_| true).expect("an interleaving");
        assert_eq!(i.between.step, 22);
        assert_eq!(i.before.map(|t| t.step), Some(10));
    }

    #[test]
    fn the_programs_own_accesses_are_told_before_the_c_librarys() {
        // 1002 first writes a lock word of the C library's between 1001's
        // two atomics on it, then the counter between 1001's read and write.
        const LOCK: u64 = 0x4bae78;
        let events = vec![
            access(10, 1001, Access::Atomic, LOCK),
            access(11, 1001, Access::Read, BALANCE),
            access(21, 1002, Access::Atomic, LOCK),
            access(22, 1002, Access::Write, BALANCE),
            access(30, 1001, Access::Atomic, LOCK),
            access(31, 1001, Access::Write, BALANCE),
        ];
        let switches = vec![switch(1, 1001), switch(20, 1002), switch(30, 1001)];
        let any = exposed(&events, &switches, 19, &|_| true).expect("an interleaving");
        assert_eq!(any.between.step, 21);
        let own = exposed(&events, &switches, 19, &|t| t.addr == BALANCE).expect("one");
        assert_eq!(
            (
                own.before.map(|t| t.step),
                own.between.step,
                own.after.map(|t| t.step)
            ),
            (Some(11), 22, Some(31))
        );
    }

    #[test]
    fn reads_alone_and_other_bytes_do_not_conflict_nor_do_accesses_after_the_return() {
        let events = vec![
            access(10, 1001, Access::Read, BALANCE),
            access(21, 1002, Access::Read, BALANCE),
            access(22, 1002, Access::Write, BALANCE + 8),
            access(30, 1001, Access::Read, BALANCE),
            access(31, 1002, Access::Write, BALANCE),
        ];
        let switches = vec![
            switch(1, 1001),
            switch(20, 1002),
            switch(30, 1001),
            switch(31, 1002),
        ];
        assert_eq!(exposed(&events, &switches, 19, &|_| true), None);
    }

    #[test]
    fn another_process_at_the_same_address_is_other_bytes() {
        let mut child = access(21, 2000, Access::Write, BALANCE);
        child.pid = 2000;
        let events = vec![
            access(10, 1001, Access::Read, BALANCE),
            child,
            access(30, 1001, Access::Write, BALANCE),
        ];
        let switches = vec![
            switch(1, 1001),
            Switch {
                step: 20,
                pid: 2000,
                tid: 2000,
            },
            switch(30, 1001),
        ];
        assert_eq!(exposed(&events, &switches, 19, &|_| true), None);
    }

    #[test]
    fn an_order_violation_is_the_others_write_before_the_threads_read() {
        let events = vec![
            access(21, 1002, Access::Write, BALANCE),
            access(30, 1001, Access::Read, BALANCE),
        ];
        let switches = vec![switch(1, 1001), switch(20, 1002)];
        let i = exposed(&events, &switches, 19, &|_| true).expect("an interleaving");
        assert_eq!(
            (i.before, i.between.step, i.after.map(|t| t.step)),
            (None, 21, Some(30))
        );
        let said = Race::tell(&i, 19, &|a| format!("{a:#x}"), &|_| "f".into()).sentence;
        assert!(
            said.contains("came before thread 1000/1001's read of it at step 30"),
            "{said}"
        );
        // Switched away before that very read: it is made when it runs again.
        let said = Race::tell(&i, 30, &|a| format!("{a:#x}"), &|_| "f".into()).sentence;
        assert!(
            said.ends_with(
                "came before the read of it thread 1000/1001 was stopped before at step 30, in f"
            ),
            "{said}"
        );
    }
}
