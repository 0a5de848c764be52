//! Where two runs' events first differ.

use crate::run::Event;

/// Events compare equal across runs when step, thread and what happened agree.
fn same(a: &Event, b: &Event) -> bool {
    a == b
}

/// The first difference of two event streams, with context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the first differing event (equal to the shared prefix's length).
    pub index: usize,
    /// The last shared events before it.
    pub shared: Vec<Event>,
    /// Each side's next events from the divergence.
    pub left: Vec<Event>,
    pub right: Vec<Event>,
}

impl Divergence {
    pub fn left_step(&self) -> Option<u64> {
        self.left.first().map(|e| e.step)
    }
    pub fn right_step(&self) -> Option<u64> {
        self.right.first().map(|e| e.step)
    }

    /// `both / left / right  STEP  PID/TID  EVENT` lines.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for e in &self.shared {
            out.push(format!("both  {e}"));
        }
        for e in &self.left {
            out.push(format!("left  {e}"));
        }
        for e in &self.right {
            out.push(format!("right {e}"));
        }
        out
    }
}

/// None when the streams are identical.
pub fn first_divergence(a: &[Event], b: &[Event], context: usize) -> Option<Divergence> {
    let index = a
        .iter()
        .zip(b)
        .position(|(x, y)| !same(x, y))
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))?;
    let from = index.saturating_sub(context);
    Some(Divergence {
        index,
        shared: a[from..index].to_vec(),
        left: a[index..(index + context).min(a.len())].to_vec(),
        right: b[index..(index + context).min(b.len())].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::EventKind;

    fn ev(step: u64, code: i32) -> Event {
        Event {
            step,
            pid: 1,
            tid: 1,
            kind: EventKind::ThreadExit { code },
        }
    }

    #[test]
    fn identical_streams_have_no_divergence() {
        let a = vec![ev(1, 0), ev(2, 0)];
        assert_eq!(first_divergence(&a, &a.clone(), 3), None);
    }

    #[test]
    fn finds_first_difference_with_context() {
        let a = vec![ev(1, 0), ev(2, 0), ev(3, 1)];
        let b = vec![ev(1, 0), ev(2, 0), ev(4, 2), ev(5, 0)];
        let d = first_divergence(&a, &b, 1).unwrap();
        assert_eq!(d.index, 2);
        assert_eq!(d.shared, vec![ev(2, 0)]);
        assert_eq!(d.left_step(), Some(3));
        assert_eq!(d.right_step(), Some(4));
    }

    #[test]
    fn a_prefix_diverges_at_its_end() {
        let a = vec![ev(1, 0)];
        let b = vec![ev(1, 0), ev(2, 0)];
        let d = first_divergence(&a, &b, 2).unwrap();
        assert_eq!(d.index, 1);
        assert!(d.left.is_empty());
    }
}
