//! Which thread held the CPU when: one record per switch, so `rewind
//! threads` reads it without replaying anything.
//!
//! File format: the magic `RWSW`, a u32 version, then records of
//! (step u64, pid u32, tid u32), little-endian: the thread that runs from
//! that step on.

use serde::{Deserialize, Serialize};
use std::path::Path;

const MAGIC: &[u8; 4] = b"RWSW";
const VERSION: u32 = 1;
const RECORD: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    pub step: u64,
    pub pid: u32,
    pub tid: u32,
}

pub fn encode(switches: &[Switch]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + switches.len() * RECORD);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    for s in switches {
        out.extend_from_slice(&s.step.to_le_bytes());
        out.extend_from_slice(&s.pid.to_le_bytes());
        out.extend_from_slice(&s.tid.to_le_bytes());
    }
    out
}

/// Why a switches file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SwitchesError {
    #[error("not a switches file")]
    NotSwitches,
    #[error("switches version {0}, this rewind reads {VERSION}")]
    Version(u32),
    #[error("switches file is truncated")]
    Truncated,
    #[error("switches file is out of order")]
    OutOfOrder,
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    In {
        path: std::path::PathBuf,
        source: Box<SwitchesError>,
    },
}

pub fn decode(bytes: &[u8]) -> Result<Vec<Switch>, SwitchesError> {
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err(SwitchesError::NotSwitches);
    }
    let version = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
    if version != VERSION {
        return Err(SwitchesError::Version(version));
    }
    let body = &bytes[8..];
    if !body.len().is_multiple_of(RECORD) {
        return Err(SwitchesError::Truncated);
    }
    let out: Vec<Switch> = body
        .chunks(RECORD)
        .map(|r| Switch {
            step: u64::from_le_bytes(r[..8].try_into().unwrap()),
            pid: u32::from_le_bytes(r[8..12].try_into().unwrap()),
            tid: u32::from_le_bytes(r[12..16].try_into().unwrap()),
        })
        .collect();
    if out.windows(2).any(|w| w[0].step > w[1].step) {
        return Err(SwitchesError::OutOfOrder);
    }
    Ok(out)
}

pub fn read(path: &Path) -> Result<Vec<Switch>, SwitchesError> {
    let bytes = std::fs::read(path).map_err(|source| SwitchesError::Io {
        path: path.into(),
        source,
    })?;
    decode(&bytes).map_err(|e| SwitchesError::In {
        path: path.into(),
        source: Box::new(e),
    })
}

/// Stretches of `[first, last]` steps each thread held, clipped to `from..=to`.
pub fn stretches(switches: &[Switch], end: u64, from: u64, to: u64) -> Vec<(u64, u64, Switch)> {
    let mut out = Vec::new();
    for (i, s) in switches.iter().enumerate() {
        let last = switches
            .get(i + 1)
            .map_or(end, |n| n.step.saturating_sub(1).max(s.step));
        let (a, b) = (s.step.max(from), last.min(to));
        if a <= b {
            out.push((a, b, *s));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_stretches() {
        let s = vec![
            Switch {
                step: 0,
                pid: 1,
                tid: 1,
            },
            Switch {
                step: 10,
                pid: 1,
                tid: 2,
            },
            Switch {
                step: 15,
                pid: 1,
                tid: 1,
            },
        ];
        assert_eq!(decode(&encode(&s)).unwrap(), s);
        let st = stretches(&s, 20, 5, 12);
        assert_eq!(st.len(), 2);
        assert_eq!((st[0].0, st[0].1, st[0].2.tid), (5, 9, 1));
        assert_eq!((st[1].0, st[1].1, st[1].2.tid), (10, 12, 2));
    }

    #[test]
    fn damage_is_reported() {
        let s = vec![Switch {
            step: 0,
            pid: 1,
            tid: 1,
        }];
        let mut b = encode(&s);
        b.pop();
        assert!(decode(&b).is_err());
        assert!(decode(b"nope").is_err());
    }
}
