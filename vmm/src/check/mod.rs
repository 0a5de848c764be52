//! Checking: schedules that perturb a run, properties a run must keep, and
//! narrowing a violating schedule to the step that decides it.

pub mod schedule;
