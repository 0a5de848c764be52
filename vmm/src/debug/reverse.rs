//! Positions and going backwards: restore a keyframe, replay, stop at the
//! previous instruction or the previous breakpoint or watchpoint hit.

use super::exec::{Ev, How};
use super::{DebugCore, DebugError, Op, Position, Stop};

impl DebugCore {
    /// A fresh machine at the start of span `step`, counting hits of
    /// `tracked` (or of every instruction) from there.
    fn replay_from(
        &mut self,
        step: u64,
        tracked: &[u64],
        count_all: bool,
    ) -> Result<(), DebugError> {
        self.travel(step)?;
        self.live.tracked = tracked.iter().copied().collect();
        self.live.count_all = count_all;
        self.span_started();
        Ok(())
    }

    fn ensure_recording(&self) -> Result<(), DebugError> {
        if self.modified {
            return Err(DebugError::Diverged);
        }
        if self.live.ended.is_some() {
            return Err(DebugError::Exited);
        }
        Ok(())
    }

    /// Where the machine is: (step, pc, hit). Found by replaying the span
    /// from its start along the same route when the hit was not counted.
    pub fn position(&mut self) -> Result<Position, DebugError> {
        let here = self.here();
        if let Some(hit) = here.hit {
            return Ok(Position {
                step: here.step,
                pc: here.pc,
                hit,
            });
        }
        self.ensure_recording()?;
        let route = self.live.route.clone();
        let pending = self.live.pending.is_some();
        let mut tracked = vec![here.pc];
        tracked.extend(route.iter().filter_map(|op| match op {
            Op::Arrive(p) => Some(p.pc),
            _ => None,
        }));
        self.replay_from(here.step, &tracked, false)?;
        for op in &route {
            match op {
                Op::Step => {
                    self.step_instruction()?;
                }
                Op::Continue(bps, watches) => {
                    // With the breakpoints of then (gdb changes them at every stop).
                    let now = (
                        std::mem::replace(&mut self.breakpoints, bps.clone()),
                        std::mem::replace(&mut self.watches, watches.clone()),
                    );
                    self.sync_traps();
                    let r = self.cont();
                    (self.breakpoints, self.watches) = now;
                    r?;
                }
                Op::Arrive(p) => {
                    self.run_to_arrival(*p)?;
                }
            }
        }
        // What was counted stays counted until the span ends.
        self.live.tracked.clear();
        let counted: Vec<u64> = self.live.counts.keys().copied().collect();
        self.live.ghosts.extend(counted);
        self.sync_traps();
        let now = self.here();
        match now.hit {
            Some(hit) if now.pc == here.pc && self.live.pending.is_some() == pending => {
                Ok(Position {
                    step: now.step,
                    pc: now.pc,
                    hit,
                })
            }
            _ => Err(DebugError::NoSuchPosition(Position {
                step: here.step,
                pc: here.pc,
                hit: 0,
            })),
        }
    }

    /// Goes to a position of the recording (forwards or backwards).
    pub fn go_to(&mut self, p: Position) -> Result<(), DebugError> {
        if self.modified {
            return Err(DebugError::Diverged);
        }
        self.replay_from(p.step, &[p.pc], false)?;
        if !self.run_to_arrival(p)? {
            return Err(DebugError::NoSuchPosition(p));
        }
        Ok(())
    }

    /// Goes to the start of span `step`: right after that step was served.
    /// At the step of the fault that ended the run, there is no after: the
    /// machine stands where the fault was raised, its signal pending (as
    /// `DebugCore::open` opens there).
    pub fn go_to_step(&mut self, step: u64) -> Result<(), DebugError> {
        if self.modified {
            return Err(DebugError::Diverged);
        }
        match self.replay_from(step, &[], false) {
            Err(DebugError::Ended(at)) if at == step && step > 0 => {
                self.replay_from(step - 1, &[], false)?;
                match self.cont()? {
                    Stop::Signal { .. } => Ok(()),
                    // Killed by a signal sent, not raised by an instruction.
                    _ => Err(DebugError::Ended(step)),
                }
            }
            r => r,
        }
    }

    /// Whether the machine stands where a fault was raised, its signal not
    /// yet delivered (a `Stop::Signal`).
    pub fn signal_pending(&self) -> bool {
        self.live.pending.is_some()
    }

    /// The instruction run before this one: in this span, or the last one
    /// of the span before (the one whose exit began this span).
    pub fn reverse_step_instruction(&mut self) -> Result<Stop, DebugError> {
        self.ensure_recording()?;
        let p = self.position()?;
        let mut prev: Option<Position> = None;
        self.replay_from(p.step, &[], true)?;
        if !self.here().is(&p) {
            let ev = self.drive(true, |ev| match ev {
                Ev::Arrive(a) | Ev::Watch(a, _) => {
                    if a.is(&p) || a.how == How::SpanStart {
                        return true;
                    }
                    if let Some(hit) = a.hit {
                        prev = Some(Position {
                            step: a.step,
                            pc: a.pc,
                            hit,
                        });
                    }
                    false
                }
                Ev::Signal(..) => false,
                Ev::Ended(_) => true,
            })?;
            if !matches!(ev, Ev::Arrive(a) | Ev::Watch(a, _) if a.is(&p)) {
                return Err(DebugError::NoSuchPosition(p));
            }
            // The span start itself is the first position of the span.
        }
        let target = match prev {
            Some(t) => Some(t),
            None if p.step == 0 => None,
            None => {
                // The last instruction of the span before.
                self.replay_from(p.step - 1, &[], true)?;
                let first = self.here();
                let mut last = first.hit.map(|hit| Position {
                    step: first.step,
                    pc: first.pc,
                    hit,
                });
                self.drive(true, |ev| match ev {
                    Ev::Arrive(a) | Ev::Watch(a, _) if a.how != How::SpanStart => {
                        last = a.hit.map(|hit| Position {
                            step: a.step,
                            pc: a.pc,
                            hit,
                        });
                        false
                    }
                    Ev::Signal(..) => false,
                    _ => true,
                })?;
                last
            }
        };
        match target {
            Some(t) => {
                self.go_to(t)?;
                Ok(Stop::Stepped {
                    tid: self.current_thread(),
                })
            }
            None => {
                self.replay_from(0, &[], false)?;
                Ok(Stop::Beginning {
                    tid: self.current_thread(),
                })
            }
        }
    }

    /// Back to the previous breakpoint or watchpoint hit, or to the start
    /// of the run when there is none.
    pub fn reverse_cont(&mut self) -> Result<Stop, DebugError> {
        self.ensure_recording()?;
        let p = self.position()?;
        let starts = self.origin.starts_before(p.step);
        let mut limit = p.step;
        for (i, start) in starts.into_iter().enumerate() {
            let first = i == 0;
            let tracked = if first { vec![p.pc] } else { vec![] };
            self.replay_from(start, &tracked, false)?;
            // (step, n): the n-th stop of `cont` from the start of span `step`.
            let mut hits: Vec<(u64, usize)> = Vec::new();
            let mut nth = 0usize;
            let at_start = self.here();
            if !(first && at_start.is(&p)) {
                if at_start.user_bp {
                    hits.push((at_start.step, 0));
                }
                self.drive(false, |ev| match ev {
                    Ev::Arrive(a) if a.how == How::SpanStart => {
                        if (first && a.is(&p)) || (!first && a.step >= limit) {
                            return true;
                        }
                        nth = 0;
                        if a.user_bp {
                            hits.push((a.step, 0));
                        }
                        false
                    }
                    Ev::Arrive(a) => {
                        if first && a.is(&p) {
                            return true;
                        }
                        if a.user_bp {
                            nth += 1;
                            hits.push((a.step, nth));
                        }
                        false
                    }
                    Ev::Watch(a, _) => {
                        if first && a.is(&p) {
                            return true;
                        }
                        nth += 1;
                        hits.push((a.step, nth));
                        false
                    }
                    Ev::Signal(..) => {
                        nth += 1;
                        false
                    }
                    Ev::Ended(_) => true,
                })?;
            }
            if let Some(&(step, n)) = hits.last() {
                self.replay_from(step, &[], false)?;
                let mut stop = Stop::Breakpoint {
                    tid: self.current_thread(),
                    pc: self.here().pc,
                };
                for _ in 0..n {
                    stop = self.cont()?;
                }
                return Ok(stop);
            }
            limit = start;
        }
        self.replay_from(0, &[], false)?;
        Ok(Stop::Beginning {
            tid: self.current_thread(),
        })
    }
}
