//! The DAP wire: `Content-Length` framed JSON in both directions (read by
//! `crate::framing`, shared with the language server), requests
//! parsed into the `dap` crate's `Command` where it has one, and custom
//! (`rewind/...`) requests kept as JSON.
//!
//! The `dap` crate's own server is synchronous and fails a whole read on an
//! unknown command, and its `Response` leaves out `command` on errors, so
//! the envelope is ours and the crate gives the typed bodies.

use crate::util::json_value;
use dap::requests::Command;
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// One message from the client.
#[derive(Debug)]
pub enum Incoming {
    /// A standard request the `dap` crate parsed.
    Standard {
        seq: i64,
        name: String,
        command: Box<Command>,
    },
    /// A `rewind/...` request.
    Custom { seq: i64, name: String, args: Value },
    /// A request that cannot be served as sent: answered with this error.
    Invalid { seq: i64, name: String, why: String },
    /// Anything that is not a request (a response to nothing we asked).
    Ignored,
}

/// Parses one frame's body.
pub fn parse(body: &[u8]) -> Incoming {
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Incoming::Invalid {
                seq: 0,
                name: String::new(),
                why: format!("malformed JSON: {e}"),
            }
        }
    };
    let seq = v.get("seq").and_then(Value::as_i64).unwrap_or(0);
    match v.get("type").and_then(Value::as_str) {
        Some("request") => {}
        Some(_) => return Incoming::Ignored,
        None => {
            return Incoming::Invalid {
                seq,
                name: String::new(),
                why: "a message without `type`".into(),
            }
        }
    }
    let Some(name) = v.get("command").and_then(Value::as_str).map(str::to_string) else {
        return Incoming::Invalid {
            seq,
            name: String::new(),
            why: "a request without `command`".into(),
        };
    };
    if v.get("seq").and_then(Value::as_i64).is_none() {
        return Incoming::Invalid {
            seq,
            name,
            why: "a request without a numeric `seq`".into(),
        };
    }
    let mut args = v.get("arguments").cloned().unwrap_or(Value::Null);
    if name == "setBreakpoints" {
        source_breakpoint_names(&mut args);
    }
    if name.starts_with("rewind/") {
        return Incoming::Custom { seq, name, args };
    }
    match parse_standard(&name, &args) {
        Ok(command) => Incoming::Standard {
            seq,
            name,
            command: Box::new(command),
        },
        Err(why) => Incoming::Invalid { seq, name, why },
    }
}

/// The crate's `SourceBreakpoint` reads `hit_condition` and `log_message`
/// where DAP says `hitCondition` and `logMessage`: renamed for it.
fn source_breakpoint_names(args: &mut Value) {
    let Some(list) = args.get_mut("breakpoints").and_then(Value::as_array_mut) else {
        return;
    };
    for b in list.iter_mut().filter_map(Value::as_object_mut) {
        for (from, to) in [
            ("hitCondition", "hit_condition"),
            ("logMessage", "log_message"),
        ] {
            if let Some(v) = b.remove(from) {
                b.insert(to.into(), v);
            }
        }
    }
}

/// A standard request's command and arguments, by the `dap` crate.
fn parse_standard(name: &str, args: &Value) -> Result<Command, String> {
    // Launch and attach arguments are ours: kept whole (the crate's
    // flattened map refuses an empty object).
    if name == "launch" || name == "attach" {
        if !(args.is_object() || args.is_null()) {
            return Err(format!("bad arguments for `{name}`: not an object"));
        }
        let data = Some(args.clone());
        return Ok(if name == "launch" {
            Command::Launch(dap::requests::LaunchRequestArguments {
                additional_data: data,
                ..Default::default()
            })
        } else {
            Command::Attach(dap::requests::AttachRequestArguments {
                additional_data: data,
                ..Default::default()
            })
        });
    }
    let with = |args: Option<&Value>| {
        let mut m = Map::new();
        m.insert("command".into(), Value::String(name.to_string()));
        if let Some(a) = args {
            m.insert("arguments".into(), a.clone());
        }
        serde_json::from_value::<Command>(Value::Object(m))
    };
    let first = match args {
        Value::Null => with(None),
        a => with(Some(a)),
    };
    match first {
        Ok(c) => Ok(c),
        Err(e) => {
            // Requests without arguments (threads, configurationDone) are
            // sent with `{}` by some clients.
            let empty = args.as_object().is_some_and(|m| m.is_empty());
            if let (true, Ok(c)) = (empty, with(None)) {
                return Ok(c);
            }
            // And requests whose arguments are all optional (disconnect)
            // without any.
            if let (true, Ok(c)) = (args.is_null(), with(Some(&Value::Object(Map::new())))) {
                return Ok(c);
            }
            let msg = e.to_string();
            if msg.contains("unknown variant") {
                Err(format!("unknown command `{name}`"))
            } else {
                Err(format!("bad arguments for `{name}`: {msg}"))
            }
        }
    }
}

/// Members DAP requires that may be `null`: dataBreakpointInfo's `dataId`
/// (null: no data breakpoint can be set here).
const NULLABLE: &[&str] = &["dataId"];

/// Drops `null` members of objects, recursively: the `dap` crate
/// serializes absent optional fields as `null`, which DAP does not allow
/// (but for the required members of [`NULLABLE`]).
pub fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, x| !x.is_null() || NULLABLE.contains(&k.as_str()));
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// A response's envelope (DAP's `Response`); `seq` is added as it is
/// written.
#[derive(Serialize)]
struct ResponseJson<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    request_seq: i64,
    success: bool,
    command: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<Value>,
}

/// An error response's body: the message to show.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorMessage<'a>,
}

#[derive(Serialize)]
struct ErrorMessage<'a> {
    id: i64,
    format: &'a str,
    #[serde(rename = "showUser")]
    show_user: bool,
}

/// A custom event's envelope.
#[derive(Serialize)]
struct CustomEventJson<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    event: &'a str,
    body: Value,
}

/// A successful response.
pub fn response(request_seq: i64, command: &str, body: Option<Value>) -> Value {
    json_value(&ResponseJson {
        kind: "response",
        request_seq,
        success: true,
        command,
        message: None,
        body,
    })
}

/// An error response; `message` is shown to the user.
pub fn error_response(request_seq: i64, command: &str, message: &str) -> Value {
    let error = ErrorMessage {
        id: 1,
        format: message,
        show_user: true,
    };
    json_value(&ResponseJson {
        kind: "response",
        request_seq,
        success: false,
        command,
        message: Some(message),
        body: Some(json_value(&ErrorBody { error })),
    })
}

/// A standard event, from the `dap` crate's `Event`.
pub fn event(e: dap::events::Event) -> Value {
    let mut v = json_value(&e);
    v["type"] = "event".into();
    v
}

/// A custom event.
pub fn custom_event(name: &str, body: Value) -> Value {
    json_value(&CustomEventJson {
        kind: "event",
        event: name,
        body,
    })
}

/// Writes one message with its `seq`.
pub async fn write_message<W: AsyncWrite + Unpin>(
    w: &mut W,
    seq: i64,
    mut msg: Value,
) -> std::io::Result<()> {
    msg["seq"] = seq.into();
    strip_nulls(&mut msg);
    let body = serde_json::to_vec(&msg)?;
    w.write_all(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes())
        .await?;
    w.write_all(&body).await?;
    w.flush().await
}

/// An `output` event to the debug console.
pub fn output(text: String) -> Value {
    event(dap::events::Event::Output(dap::events::OutputEventBody {
        category: Some(dap::types::OutputEventCategory::Console),
        output: text,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_standard_custom_and_bad() {
        let i = parse(br#"{"seq":1,"type":"request","command":"threads"}"#);
        assert!(matches!(i, Incoming::Standard { seq: 1, .. }));
        let i = parse(br#"{"seq":2,"type":"request","command":"threads","arguments":{}}"#);
        assert!(matches!(i, Incoming::Standard { seq: 2, .. }));
        let i = parse(br#"{"seq":2,"type":"request","command":"disconnect"}"#);
        assert!(matches!(i, Incoming::Standard { seq: 2, .. }));
        let i =
            parse(br#"{"seq":3,"type":"request","command":"rewind/lanes","arguments":{"from":1}}"#);
        assert!(matches!(i, Incoming::Custom { seq: 3, .. }));
        match parse(br#"{"seq":4,"type":"request","command":"flyToMoon"}"#) {
            Incoming::Invalid { why, .. } => assert!(why.contains("unknown command"), "{why}"),
            other => panic!("{other:?}"),
        }
        match parse(br#"{"seq":5,"type":"request","command":"next","arguments":{"threadId":"x"}}"#)
        {
            Incoming::Invalid { why, .. } => {
                assert!(why.contains("bad arguments for `next`"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        match parse(b"{not json") {
            Incoming::Invalid { why, .. } => assert!(why.starts_with("malformed JSON")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nulls_are_dropped() {
        let mut v =
            json!({"a": null, "b": {"c": null, "d": 1}, "e": [{"f": null}], "dataId": null});
        strip_nulls(&mut v);
        assert_eq!(v, json!({"b": {"d": 1}, "e": [{}], "dataId": null}));
    }
}
