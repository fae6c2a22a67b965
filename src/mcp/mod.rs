//! JSON-RPC 2.0 / MCP messages: building requests, parsing responses, normalising tool results.
//! It owns no socket and no process; framing is one message per line (stdio) here, HTTP later.

pub mod builtin;
pub mod data;
pub mod pyliteral;
pub mod shop;
pub mod sse;
pub mod suite;
pub mod transport;

use serde::Deserialize;
use serde_json::{json, Value};

/// The protocol version the lab offers. 2025-11-25 or older makes every SDK under test take the
/// same `initialize` handshake (see MCP-NOTES.md); servers that answer an older version are
/// accepted and the answered version is recorded.
pub const OFFERED_PROTOCOL_VERSION: &str = "2025-11-25";

/// Protocol versions the lab's client understands (the server's answer must be one of them).
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Renders a request line (with the trailing newline) ready to be written to a server's stdin.
pub fn request_line(id: u64, method: &str, params: &Value) -> String {
    let mut s = serde_json::to_string(&json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": params,
    }))
    .expect("a JSON value always serialises");
    s.push('\n');
    s
}

/// Renders a notification line (no id).
pub fn notification_line(method: &str) -> String {
    let mut s = serde_json::to_string(&json!({"jsonrpc": "2.0", "method": method}))
        .expect("a JSON value always serialises");
    s.push('\n');
    s
}

pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": OFFERED_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "benchlab", "version": env!("CARGO_PKG_VERSION")},
    })
}

pub fn tools_call_params(tool: &str, arguments: &Value) -> Value {
    json!({"name": tool, "arguments": arguments})
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default)]
    pub data: Option<Value>,
}

/// What one line from a server is.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A response to one of our requests.
    Response { id: u64, outcome: Result<Value, RpcError> },
    /// A request from the server (ping, sampling, ...) that expects an answer.
    Request { id: Value, method: String },
    /// A notification from the server (logging, progress, list changed, ...).
    Notification { method: String },
}

/// Why a line could not be understood as JSON-RPC.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a JSON-RPC 2.0 message: {0}")]
    NotJsonRpc(String),
}

#[derive(Deserialize)]
struct RawMessage {
    jsonrpc: Option<String>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<RpcError>,
}

/// Parses one line (without its newline) from a server.
pub fn parse_incoming(line: &[u8]) -> Result<Incoming, ParseError> {
    let raw: RawMessage = serde_json::from_slice(line).map_err(|e| ParseError::NotJson(e.to_string()))?;
    if raw.jsonrpc.as_deref() != Some("2.0") {
        return Err(ParseError::NotJsonRpc("missing \"jsonrpc\": \"2.0\"".into()));
    }
    match (raw.method, raw.id) {
        (Some(method), Some(id)) => Ok(Incoming::Request { id, method }),
        (Some(method), None) => Ok(Incoming::Notification { method }),
        (None, Some(id)) => {
            let id =
                id.as_u64().ok_or_else(|| ParseError::NotJsonRpc(format!("response id {id} is not ours")))?;
            let outcome = match (raw.result, raw.error) {
                (Some(r), None) => Ok(r),
                (None, Some(e)) => Err(e),
                _ => {
                    return Err(ParseError::NotJsonRpc(
                        "a response needs exactly one of result and error".into(),
                    ))
                }
            };
            Ok(Incoming::Response { id, outcome })
        }
        (None, None) => Err(ParseError::NotJsonRpc("neither a method nor an id".into())),
    }
}

/// The value a `tools/call` result carries, normalised across SDKs: `structuredContent.result`
/// where high-level Python SDKs wrap a scalar, else the whole `structuredContent`, else the first
/// text content parsed as JSON when it is JSON, else that text as a string.
/// `Err` carries the tool's own error text when the result is marked `isError`.
pub fn tool_value(result: &Value) -> Result<Value, String> {
    let text = result
        .get("content")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|item| item.get("type").and_then(Value::as_str) == Some("text")))
        .and_then(|item| item.get("text"))
        .and_then(Value::as_str);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(text.unwrap_or("(no text)").to_string());
    }
    if let Some(sc) = result.get("structuredContent") {
        if let Some(obj) = sc.as_object() {
            if obj.len() == 1 {
                if let Some(v) = obj.get("result") {
                    return Ok(v.clone());
                }
            }
        }
        return Ok(sc.clone());
    }
    match text {
        // JSON first; then a Python literal (Gradio answers `str(value)`); else the text itself.
        Some(t) => Ok(serde_json::from_str::<Value>(t)
            .ok()
            .or_else(|| t.trim_start().starts_with(['{', '[', '(']).then(|| pyliteral::parse(t)).flatten())
            .unwrap_or_else(|| Value::String(t.into()))),
        None => Err("the result has neither structuredContent nor text content".into()),
    }
}

/// Compares a tool's value with the expected one; numbers compare by value (42 == 42.0); an
/// expected [`suite::VOLATILE`] matches any value (the key must still be there).
pub fn values_match(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::String(v), _) if v == suite::VOLATILE => true,
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_match(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| values_match(v, w)))
        }
        _ => expected == actual,
    }
}

/// The names of the tools a `tools/list` result lists, in order.
pub fn tool_names(list_result: &Value) -> Vec<String> {
    list_result
        .get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools.iter().filter_map(|t| t.get("name").and_then(Value::as_str).map(String::from)).collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_responses_requests_and_notifications() {
        let r = parse_incoming(br#"{"jsonrpc":"2.0","id":7,"result":{"x":1}}"#).unwrap();
        assert_eq!(r, Incoming::Response { id: 7, outcome: Ok(json!({"x":1})) });
        let e =
            parse_incoming(br#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Unknown tool"}}"#)
                .unwrap();
        assert!(matches!(e, Incoming::Response { id: 3, outcome: Err(RpcError { code: -32602, .. }) }));
        assert!(matches!(
            parse_incoming(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parse_incoming(br#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#),
            Ok(Incoming::Request { .. })
        ));
        assert!(matches!(parse_incoming(b"Starting server..."), Err(ParseError::NotJson(_))));
        assert!(matches!(parse_incoming(br#"{"id":1,"result":{}}"#), Err(ParseError::NotJsonRpc(_))));
    }

    #[test]
    fn tool_values_are_normalised_across_sdks() {
        // High-level Python servers wrap scalars in structuredContent.result.
        let py = json!({"content":[{"type":"text","text":"42"}],"structuredContent":{"result":42},"isError":false});
        assert_eq!(tool_value(&py), Ok(json!(42)));
        // Low-level servers give only text.
        let low = json!({"content":[{"type":"text","text":"hello"}]});
        assert_eq!(tool_value(&low), Ok(json!("hello")));
        let num = json!({"content":[{"type":"text","text":"4"}]});
        assert_eq!(tool_value(&num), Ok(json!(4)));
        let err = json!({"content":[{"type":"text","text":"bad"}],"isError":true});
        assert_eq!(tool_value(&err), Err("bad".to_string()));
        assert!(values_match(&json!(42), &json!(42.0)));
        assert!(!values_match(&json!(42), &json!("42")));
    }

    #[test]
    fn request_lines_are_single_lines() {
        let l = request_line(1, "tools/call", &tools_call_params("echo", &json!({"message":"a\nb"})));
        assert!(l.ends_with('\n'));
        assert_eq!(l.matches('\n').count(), 1);
    }
}
