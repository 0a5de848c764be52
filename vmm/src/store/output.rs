//! The program's output: `output` holds the bytes of stdout and stderr
//! interleaved in the order they were written (so `cat output` is the
//! terminal's view); `output.fds` says which descriptor each stretch came
//! from, as 8-byte records `fd: i32, len: u32` (little-endian), consecutive
//! writes to one descriptor merged into one record.

use super::{io, StoreError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const OUTPUT_FILE: &str = "output";
pub const FDS_FILE: &str = "output.fds";

/// A stretch of output written to one descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    pub fd: i32,
    pub bytes: Vec<u8>,
}

pub(crate) struct OutputWriter {
    bytes: BufWriter<File>,
    bytes_path: PathBuf,
    fds: BufWriter<File>,
    fds_path: PathBuf,
    /// The record being extended: descriptor and length so far.
    current: Option<(i32, u32)>,
    total: u64,
}

impl OutputWriter {
    pub(crate) fn create(dir: &Path) -> Result<Self, StoreError> {
        let bytes_path = dir.join(OUTPUT_FILE);
        let fds_path = dir.join(FDS_FILE);
        Ok(OutputWriter {
            bytes: BufWriter::new(File::create(&bytes_path).map_err(io(&bytes_path))?),
            fds: BufWriter::new(File::create(&fds_path).map_err(io(&fds_path))?),
            bytes_path,
            fds_path,
            current: None,
            total: 0,
        })
    }

    pub(crate) fn write(&mut self, fd: i32, mut data: &[u8]) -> Result<(), StoreError> {
        self.bytes.write_all(data).map_err(io(&self.bytes_path))?;
        self.total += data.len() as u64;
        while !data.is_empty() {
            match &mut self.current {
                Some((cur, len)) if *cur == fd && *len < u32::MAX => {
                    let take = (data.len() as u64).min((u32::MAX - *len) as u64) as usize;
                    *len += take as u32;
                    data = &data[take..];
                }
                _ => {
                    self.close_record()?;
                    self.current = Some((fd, 0));
                }
            }
        }
        Ok(())
    }

    fn close_record(&mut self) -> Result<(), StoreError> {
        if let Some((fd, len)) = self.current.take() {
            if len > 0 {
                let mut rec = [0u8; 8];
                rec[..4].copy_from_slice(&fd.to_le_bytes());
                rec[4..].copy_from_slice(&len.to_le_bytes());
                self.fds.write_all(&rec).map_err(io(&self.fds_path))?;
            }
        }
        Ok(())
    }

    /// Flushes both files; returns the number of output bytes.
    pub(crate) fn finish(mut self) -> Result<u64, StoreError> {
        self.close_record()?;
        self.fds.flush().map_err(io(&self.fds_path))?;
        self.bytes.flush().map_err(io(&self.bytes_path))?;
        Ok(self.total)
    }
}

/// Splits a run's output into chunks by descriptor.
pub fn read_chunks(dir: &Path) -> Result<Vec<OutputChunk>, StoreError> {
    let bytes_path = dir.join(OUTPUT_FILE);
    let fds_path = dir.join(FDS_FILE);
    let bytes = std::fs::read(&bytes_path).map_err(io(&bytes_path))?;
    let fds = std::fs::read(&fds_path).map_err(io(&fds_path))?;
    let corrupt = |what: &str| StoreError::Corrupt {
        path: fds_path.clone(),
        what: what.to_string(),
    };
    if fds.len() % 8 != 0 {
        return Err(corrupt("length is not a multiple of 8"));
    }
    let mut chunks = Vec::new();
    let mut pos = 0usize;
    for rec in fds.chunks_exact(8) {
        let fd = i32::from_le_bytes(rec[..4].try_into().unwrap());
        let len = u32::from_le_bytes(rec[4..].try_into().unwrap()) as usize;
        let end = pos
            .checked_add(len)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| corrupt("records run past the end of the output"))?;
        chunks.push(OutputChunk {
            fd,
            bytes: bytes[pos..end].to_vec(),
        });
        pos = end;
    }
    if pos != bytes.len() {
        return Err(corrupt("records do not cover the whole output"));
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip() {
        let dir = std::env::temp_dir().join(format!("rewind-output-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = OutputWriter::create(&dir).unwrap();
        w.write(1, b"hello ").unwrap();
        w.write(1, b"world\n").unwrap();
        w.write(2, b"oops\n").unwrap();
        w.write(1, b"").unwrap();
        w.write(1, b"bye\n").unwrap();
        assert_eq!(w.finish().unwrap(), 21);
        assert_eq!(
            std::fs::read(dir.join(OUTPUT_FILE)).unwrap(),
            b"hello world\noops\nbye\n"
        );
        let chunks = read_chunks(&dir).unwrap();
        assert_eq!(
            chunks,
            vec![
                OutputChunk {
                    fd: 1,
                    bytes: b"hello world\n".to_vec()
                },
                OutputChunk {
                    fd: 2,
                    bytes: b"oops\n".to_vec()
                },
                OutputChunk {
                    fd: 1,
                    bytes: b"bye\n".to_vec()
                },
            ]
        );
        std::fs::write(dir.join(FDS_FILE), [1, 0, 0, 0, 99, 0, 0, 0]).unwrap();
        assert!(read_chunks(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
