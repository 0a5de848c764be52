//! Standard input, framed and checked before tower-lsp sees it.
//!
//! tower-lsp 0.20 ends the session at the first frame it cannot decode (its
//! framed reader stops after an error), so a client that sends one bad
//! message would lose the server. This reader finds each `Content-Length`
//! frame itself, passes on only bodies that are JSON-RPC messages, and hands
//! every other one to `bad` (the server logs it with `window/logMessage`),
//! then goes on with the next frame.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A body larger than this is refused (and skipped).
pub const MAX_BODY: usize = 64 << 20;
/// A header block longer than this is garbage.
const MAX_HEADER: usize = 8192;

/// What a chunk of input was.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A JSON-RPC message's body.
    Message(Vec<u8>),
    /// Something that is not one, and why.
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
        Some(check(body))
    }
}

/// A body tower-lsp can take: a JSON-RPC request, notification or response.
fn check(body: Vec<u8>) -> Frame {
    use tower_lsp::jsonrpc::{Request, Response};
    if serde_json::from_slice::<Response>(&body).is_ok()
        || serde_json::from_slice::<Request>(&body).is_ok()
    {
        return Frame::Message(body);
    }
    let why = match serde_json::from_slice::<serde_json::Value>(&body) {
        Err(e) => format!("not JSON ({e})"),
        Ok(_) => "JSON, but not a JSON-RPC 2.0 message".to_string(),
    };
    let shown: String = String::from_utf8_lossy(&body).chars().take(80).collect();
    Frame::Bad(format!("{why}: {shown:?}"))
}

fn is_exit(body: &[u8]) -> bool {
    serde_json::from_slice::<tower_lsp::jsonrpc::Request>(body).is_ok_and(|r| r.method() == "exit")
}

/// Copies `input` to `output` frame by frame, giving bad ones to `bad`.
pub async fn pump(
    mut input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
    bad: impl Fn(String),
) {
    let mut s = Splitter::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match input.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        s.push(&chunk[..n]);
        while let Some(f) = s.next_frame() {
            match f {
                Frame::Message(body) => {
                    let head = format!("Content-Length: {}\r\n\r\n", body.len());
                    if output.write_all(head.as_bytes()).await.is_err()
                        || output.write_all(&body).await.is_err()
                    {
                        return;
                    }
                    // tower-lsp ends only at the end of its input: after
                    // `exit`, that is here.
                    if is_exit(&body) {
                        let _ = output.shutdown().await;
                        return;
                    }
                }
                Frame::Bad(why) => bad(why),
            }
        }
    }
    let _ = output.shutdown().await;
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
    fn good_frames_pass_and_bad_ones_are_named() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        let mut input = Vec::new();
        input.extend_from_slice(b"Content-Length: 5\r\n\r\n{oops");
        input.extend_from_slice(b"\xff\xfe garbage\r\n\r\n");
        input.extend_from_slice(b"Content-Length: 9\r\n\r\n{\"bad\":1}");
        input.extend_from_slice(b"Content-Length: x1\r\n\r\n");
        input.extend_from_slice(b"Content-Length: 99999999999\r\n\r\n");
        let f = frames(&input);
        assert_eq!(f.len(), 5, "{f:?}");
        assert!(f.iter().all(|f| matches!(f, Frame::Bad(_))), "{f:?}");
        let mut input = format!("Content-Length: {}\r\n\r\n", ok.len()).into_bytes();
        input.extend_from_slice(ok);
        assert_eq!(frames(&input), vec![Frame::Message(ok.to_vec())]);
        let input = format!(
            "Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: {}\r\n\r\n{}",
            ok.len(),
            std::str::from_utf8(ok).unwrap()
        );
        assert_eq!(frames(input.as_bytes()), vec![Frame::Message(ok.to_vec())]);
    }
}
