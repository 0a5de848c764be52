//! Standard input, framed and checked before tower-lsp sees it.
//!
//! tower-lsp 0.20 ends the session at the first frame it cannot decode (its
//! framed reader stops after an error), so a client that sends one bad
//! message would lose the server. This reader finds each `Content-Length`
//! frame itself, passes on only bodies that are JSON-RPC messages, and hands
//! every other one to `bad` (the server logs it with `window/logMessage`),
//! then goes on with the next frame.

use crate::framing::{Frame, Reader};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// A body tower-lsp can take: a JSON-RPC request, notification or response.
fn check(body: Vec<u8>) -> Result<Vec<u8>, String> {
    use tower_lsp::jsonrpc::{Request, Response};
    if serde_json::from_slice::<Response>(&body).is_ok()
        || serde_json::from_slice::<Request>(&body).is_ok()
    {
        return Ok(body);
    }
    let why = match serde_json::from_slice::<serde_json::Value>(&body) {
        Err(e) => format!("not JSON ({e})"),
        Ok(_) => "JSON, but not a JSON-RPC 2.0 message".to_string(),
    };
    let shown: String = String::from_utf8_lossy(&body).chars().take(80).collect();
    Err(format!("{why}: {shown:?}"))
}

fn is_exit(body: &[u8]) -> bool {
    serde_json::from_slice::<tower_lsp::jsonrpc::Request>(body).is_ok_and(|r| r.method() == "exit")
}

/// Copies `input` to `output` frame by frame, giving bad ones to `bad`.
pub async fn pump(
    input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
    bad: impl Fn(String),
) {
    let mut frames = Reader::new(input);
    while let Some(f) = frames.next().await {
        let body = match f {
            Frame::Body(body) => match check(body) {
                Ok(body) => body,
                Err(why) => {
                    bad(why);
                    continue;
                }
            },
            Frame::Bad(why) => {
                bad(why);
                continue;
            }
        };
        let head = format!("Content-Length: {}\r\n\r\n", body.len());
        if output.write_all(head.as_bytes()).await.is_err()
            || output.write_all(&body).await.is_err()
        {
            return;
        }
        // tower-lsp ends only at the end of its input: after `exit`, that is here.
        if is_exit(&body) {
            break;
        }
    }
    let _ = output.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_rpc_messages_pass() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#;
        assert_eq!(check(ok.to_vec()), Ok(ok.to_vec()));
        assert!(check(b"{oops".to_vec())
            .unwrap_err()
            .starts_with("not JSON"));
        assert!(check(b"{\"bad\":1}".to_vec())
            .unwrap_err()
            .starts_with("JSON, but not"));
    }

    #[tokio::test]
    async fn the_pump_passes_messages_and_names_the_rest() {
        let ok = br#"{"jsonrpc":"2.0","method":"exit"}"#;
        let mut input = b"Content-Length: 5\r\n\r\n{oops".to_vec();
        input.extend_from_slice(b"Content-Type: nothing\r\n\r\n");
        input.extend_from_slice(format!("Content-Length: {}\r\n\r\n", ok.len()).as_bytes());
        input.extend_from_slice(ok);
        input.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        let mut out = Vec::new();
        let bad = std::sync::Mutex::new(Vec::new());
        pump(&input[..], &mut out, |why| bad.lock().unwrap().push(why)).await;
        assert_eq!(bad.lock().unwrap().len(), 2);
        let mut want = format!("Content-Length: {}\r\n\r\n", ok.len()).into_bytes();
        want.extend_from_slice(ok);
        // Nothing after `exit` is passed on.
        assert_eq!(out, want);
    }
}
