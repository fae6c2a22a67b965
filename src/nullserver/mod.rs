//! The built-in floor server (`benchlab null-server`): an MCP server over stdio or streamable HTTP
//! (JSON replies, stateless or stateful, plus `POST /api/<tool>`) that answers initialize, ping,
//! tools/list and the suite's tools with the least work a correct server can do. It is measured
//! like any other cell, so its figures are the harness's own overhead. `fault`: the faults it can be
//! told to have, for the lab's own tests.

pub mod fault;

use std::io::{BufRead, Write};

use serde::Deserialize;
use serde_json::{json, value::RawValue, Value};

use crate::mcp::suite::Suite;
use crate::mcp::SUPPORTED_PROTOCOL_VERSIONS;

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<&'a str>,
    #[serde(default)]
    params: Option<Value>,
}

/// Answers one incoming line; `None` for notifications and anything that needs no answer.
pub fn answer(suite: Suite, line: &[u8]) -> Option<String> {
    let msg: Message = match serde_json::from_slice(line) {
        Ok(m) => m,
        Err(e) => {
            return Some(error_line("null", -32700, &format!("parse error: {e}")));
        }
    };
    let id = msg.id?.get();
    let method = msg.method.unwrap_or("");
    let result = match method {
        "initialize" => {
            let asked = msg
                .params
                .as_ref()
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let version = if SUPPORTED_PROTOCOL_VERSIONS.contains(&asked) {
                asked
            } else {
                SUPPORTED_PROTOCOL_VERSIONS[0]
            };
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "benchlab-null", "version": env!("CARGO_PKG_VERSION")},
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": suite.tool_schemas()}),
        "tools/call" => {
            fault::on_call();
            let params = msg.params.unwrap_or(Value::Null);
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
            // Rendered by hand: the floor should cost what a lean server costs, not a JSON tree.
            let mut out = String::with_capacity(160);
            out.push_str(r#"{"jsonrpc":"2.0","id":"#);
            out.push_str(id);
            out.push_str(r#","result":{"content":[{"type":"text","text":"#);
            match suite.evaluate(name, &args) {
                Ok(v) => {
                    let text = match &v {
                        Value::String(s) => serde_json::to_string(s),
                        other => serde_json::to_string(&other.to_string()),
                    };
                    out.push_str(&text.unwrap_or_default());
                    out.push_str(r#"}],"structuredContent":{"result":"#);
                    out.push_str(&v.to_string());
                    out.push_str(r#"},"isError":false}}"#);
                }
                Err(e) => {
                    out.push_str(&serde_json::to_string(&e).unwrap_or_default());
                    out.push_str(r#"}],"isError":true}}"#);
                }
            }
            out.push('\n');
            return Some(out);
        }
        other => return Some(error_line(id, -32601, &format!("method not found: {other}"))),
    };
    let mut out = String::with_capacity(128);
    out.push_str(r#"{"jsonrpc":"2.0","id":"#);
    out.push_str(id);
    out.push_str(r#","result":"#);
    out.push_str(&result.to_string());
    out.push_str("}\n");
    Some(out)
}

fn error_line(id: &str, code: i64, message: &str) -> String {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{}}}\n", json!({"code": code, "message": message}))
}

/// Serves stdin/stdout until end of input.
pub fn serve(suite: Suite) -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut output = stdout.lock();
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let trimmed = line.strip_suffix(b"\n").unwrap_or(&line);
        if trimmed.is_empty() {
            continue;
        }
        if let Some(reply) = answer(suite, trimmed) {
            output.write_all(reply.as_bytes())?;
            output.flush()?;
        }
    }
}

/// Serves streamable HTTP on 127.0.0.1:`port` on one thread until killed: `POST /mcp` answers
/// JSON-RPC with `application/json` (202 for notifications); `POST /api/<tool>` takes the
/// arguments object and answers the value.
pub fn serve_http(suite: Suite, port: u16, stateful: bool) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let sessions = std::rc::Rc::new(Sessions::default());
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let sessions = sessions.clone();
            let service = hyper::service::service_fn(move |req| {
                let sessions = sessions.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(http_answer(suite, stateful, &sessions, req).await)
                }
            });
            tokio::task::spawn_local(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// The stateful mode's sessions: the ids handed out and not yet deleted, and the next number.
#[derive(Default)]
struct Sessions {
    live: std::cell::RefCell<std::collections::HashSet<String>>,
    next: std::cell::Cell<u64>,
}

async fn http_answer(
    suite: Suite,
    stateful: bool,
    sessions: &Sessions,
    req: hyper::Request<hyper::body::Incoming>,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    use http_body_util::BodyExt;
    use hyper::StatusCode;
    let reply = |status: StatusCode, body: Vec<u8>, session: Option<String>| {
        let mut b = hyper::Response::builder().status(status).header("content-type", "application/json");
        if let Some(s) = session {
            b = b.header("mcp-session-id", s);
        }
        b.body(http_body_util::Full::new(bytes::Bytes::from(body))).expect("static headers are valid")
    };
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
    let Ok(body) = body.collect().await.map(|c| c.to_bytes()) else {
        return reply(StatusCode::BAD_REQUEST, b"{}".to_vec(), None);
    };
    if parts.method != hyper::Method::POST {
        if parts.method == hyper::Method::DELETE && stateful {
            if let Some(s) = session {
                sessions.live.borrow_mut().remove(s);
            }
            return reply(StatusCode::OK, Vec::new(), None);
        }
        return reply(StatusCode::METHOD_NOT_ALLOWED, b"{}".to_vec(), None);
    }
    if let Some(tool) = path.strip_prefix("/api/") {
        let args: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return reply(
                    StatusCode::BAD_REQUEST,
                    json!({"error": e.to_string()}).to_string().into_bytes(),
                    None,
                )
            }
        };
        return match suite.evaluate(tool, &args) {
            Ok(v) => reply(StatusCode::OK, v.to_string().into_bytes(), None),
            Err(e) => {
                reply(StatusCode::UNPROCESSABLE_ENTITY, json!({"error": e}).to_string().into_bytes(), None)
            }
        };
    }
    if path != "/mcp" {
        return reply(StatusCode::NOT_FOUND, b"{}".to_vec(), None);
    }
    let mut new_session = None;
    if stateful {
        let method = serde_json::from_slice::<Message>(&body).ok().and_then(|m| m.method);
        if method == Some("initialize") {
            let n = sessions.next.get();
            sessions.next.set(n + 1);
            let id = format!("null-{n}");
            sessions.live.borrow_mut().insert(id.clone());
            new_session = Some(id);
        } else if !session.is_some_and(|s| sessions.live.borrow().contains(s)) {
            return reply(StatusCode::NOT_FOUND, b"{}".to_vec(), None);
        }
    }
    match answer(suite, &body) {
        Some(mut line) => {
            line.pop(); // the stdio newline
            reply(StatusCode::OK, line.into_bytes(), new_session)
        }
        None => reply(StatusCode::ACCEPTED, Vec::new(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::suite::Expected;
    use crate::mcp::{parse_incoming, tool_value, Incoming};

    fn result_of(line: &str) -> Value {
        match parse_incoming(answer(Suite::Weekly, line.as_bytes()).unwrap().trim_end().as_bytes()).unwrap() {
            Incoming::Response { outcome: Ok(v), .. } => v,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn answers_the_handshake_and_the_suite() {
        let init = result_of(&crate::mcp::request_line(1, "initialize", &crate::mcp::initialize_params()));
        assert_eq!(init["protocolVersion"], crate::mcp::OFFERED_PROTOCOL_VERSION);
        assert!(answer(Suite::Weekly, br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_none());
        for suite in Suite::ALL {
            let list = answer(*suite, br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).unwrap();
            let list: Value = serde_json::from_str(&list).unwrap();
            assert_eq!(crate::mcp::tool_names(&list["result"]), suite.tools());
            for (tool, args, expected) in suite.gate() {
                let line =
                    crate::mcp::request_line(9, "tools/call", &crate::mcp::tools_call_params(tool, &args));
                let reply: Value = serde_json::from_str(&answer(*suite, line.as_bytes()).unwrap()).unwrap();
                match expected {
                    Expected::Value(v) => {
                        assert!(crate::mcp::values_match(&v, &tool_value(&reply["result"]).unwrap()))
                    }
                    Expected::Error => assert!(tool_value(&reply["result"]).is_err()),
                }
            }
        }
        let unknown = result_of(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope","arguments":{}}}"#,
        );
        assert!(tool_value(&unknown).is_err());
    }

    #[test]
    fn keeps_string_ids_and_refuses_unknown_methods() {
        let reply =
            answer(Suite::Weekly, br#"{"jsonrpc":"2.0","id":"abc","method":"resources/list"}"#).unwrap();
        assert!(reply.contains(r#""id":"abc""#) && reply.contains("-32601"));
    }
}
