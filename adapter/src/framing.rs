//! `Content-Length` framing, as DAP and LSP both speak it: a header block
//! ending in a blank line, with a `Content-Length` (other headers are
//! ignored), then that many bytes of body. One limit for both servers,
//! `MAX_BODY`, and one policy: input that is not a frame comes out as
//! `Frame::Bad` and is consumed, and each server says what that means to it
//! (the language server logs it and goes on; the debug adapter, whose
//! protocol has nowhere to answer it, ends the session).

use tokio::io::{AsyncRead, AsyncReadExt};

/// A body larger than this is refused: the one limit of both servers.
pub const MAX_BODY: usize = 64 << 20;
/// A header block longer than this is garbage.
const MAX_HEADER: usize = 8192;

/// What a chunk of input was.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A frame's body.
    Body(Vec<u8>),
    /// Input that is not a frame (a header without a length, a length that
    /// is not one or is over the limit), and why. It is consumed: what
    /// follows it is read as the next header.
    Bad(String),
}

/// Splits input into frames; keeps what is not complete yet.
#[derive(Default)]
pub struct Splitter {
    buf: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Splitter {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, if the input holds one.
    pub fn next_frame(&mut self) -> Option<Frame> {
        // Blank lines between frames are tolerated.
        let blank = self
            .buf
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        self.buf.drain(..blank);
        let end = match find(&self.buf, b"\r\n\r\n") {
            Some(e) => e,
            None if self.buf.len() > MAX_HEADER => {
                let n = self.buf.len();
                self.buf.clear();
                return Some(Frame::Bad(format!("{n} bytes without a header's end")));
            }
            None => return None,
        };
        let header = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        let length = header.split("\r\n").find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().map_err(|_| v.trim().to_string()))
        });
        let length = match length {
            Some(Ok(n)) => n,
            Some(Err(v)) => {
                self.buf.drain(..end + 4);
                return Some(Frame::Bad(format!("Content-Length {v:?} is not a length")));
            }
            None => {
                self.buf.drain(..end + 4);
                return Some(Frame::Bad(format!(
                    "a header without Content-Length: {:?}",
                    header.chars().take(80).collect::<String>()
                )));
            }
        };
        if length > MAX_BODY {
            // Not waited for: what follows is read as the next header.
            self.buf.drain(..end + 4);
            return Some(Frame::Bad(format!(
                "a body of {length} bytes (at most {MAX_BODY}) refused"
            )));
        }
        if self.buf.len() < end + 4 + length {
            return None;
        }
        let body: Vec<u8> = self.buf[end + 4..end + 4 + length].to_vec();
        self.buf.drain(..end + 4 + length);
        Some(Frame::Body(body))
    }
}

/// Frames read from a stream.
pub struct Reader<R> {
    input: R,
    frames: Splitter,
    chunk: Vec<u8>,
    ended: bool,
}

impl<R: AsyncRead + Unpin> Reader<R> {
    pub fn new(input: R) -> Reader<R> {
        Reader {
            input,
            frames: Splitter::default(),
            chunk: vec![0; 64 * 1024],
            ended: false,
        }
    }

    /// The next frame; None once the input ended (a read error says why
    /// as a last `Bad` first).
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.frames.next_frame() {
                return Some(f);
            }
            if self.ended {
                return None;
            }
            match self.input.read(&mut self.chunk).await {
                Ok(0) => self.ended = true,
                Ok(n) => self.frames.push(&self.chunk[..n]),
                Err(e) => {
                    self.ended = true;
                    return Some(Frame::Bad(format!("cannot read: {e}")));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8]) -> Vec<Frame> {
        let mut s = Splitter::default();
        let mut out = Vec::new();
        // Byte by byte: frames split anywhere still come out whole.
        for b in input {
            s.push(&[*b]);
            while let Some(f) = s.next_frame() {
                out.push(f);
            }
        }
        out
    }

    #[test]
    fn frames_split_anywhere_come_out_whole() {
        let input =
            b"Content-Length: 2\r\n\r\n{}\r\nContent-Length: 3\r\nContent-Type: x\r\n\r\n[1]";
        assert_eq!(
            frames(input),
            [Frame::Body(b"{}".to_vec()), Frame::Body(b"[1]".to_vec())]
        );
    }

    #[test]
    fn what_is_not_a_frame_is_bad_and_consumed() {
        let mut input = Vec::new();
        input.extend_from_slice(b"\xff\xfe garbage\r\n\r\n");
        input.extend_from_slice(b"Content-Length: x1\r\n\r\n");
        input.extend_from_slice(b"Content-Length: 99999999999\r\n\r\n");
        input.extend_from_slice(b"Content-Length: 1\r\n\r\n7");
        let f = frames(&input);
        assert_eq!(f.len(), 4, "{f:?}");
        assert!(f[..3].iter().all(|f| matches!(f, Frame::Bad(_))), "{f:?}");
        assert_eq!(f[3], Frame::Body(b"7".to_vec()));
        assert_eq!(frames(&vec![b'x'; MAX_HEADER + 1]).len(), 1);
    }

    #[tokio::test]
    async fn a_reader_ends_with_its_input() {
        let input: &[u8] = b"Content-Length: 2\r\n\r\n{}Content-Length: 9\r\n\r\n{}";
        let mut r = Reader::new(input);
        assert_eq!(r.next().await, Some(Frame::Body(b"{}".to_vec())));
        // A body cut short by the end of input is no frame.
        assert_eq!(r.next().await, None);
    }
}
