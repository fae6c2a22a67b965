//! The built-in floor server (`benchlab null-server`): an MCP server over stdio or streamable HTTP
//! (JSON replies, stateless or stateful, plus `POST /api/<tool>`) that answers initialize, ping,
//! tools/list and the suite's tools with the least work a correct server can do. It is measured
//! like any other cell, so its figures are the harness's own overhead. This file answers the
//! protocol and serves stdio; `http` serves HTTP; `fault`: the faults it can be told to have, for
//! the lab's own tests; `shop`: the `shop` suite's tools, which do real I/O against the cell's
//! services.

pub mod fault;
mod http;
pub mod shop;

pub use http::{serve_http, serve_http_workers};

use std::io::{BufRead, Write};

use serde::Deserialize;
use serde_json::{json, value::RawValue, Value};

use crate::mcp::suite::Suite;
use crate::mcp::SUPPORTED_PROTOCOL_VERSIONS;

#[derive(Deserialize)]
pub(crate) struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    pub(crate) method: Option<&'a str>,
    /// Left unparsed until the method says what it holds.
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// A tools/call's params, the name borrowed from the request where it has no escapes.
#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow, default)]
    name: std::borrow::Cow<'a, str>,
    #[serde(default)]
    arguments: Option<Value>,
}

/// What answers tools/call: the suite's pure evaluation, or for the shop its service clients
/// (kept for the process by the stdio loop or the HTTP server that owns this).
pub struct Tools {
    suite: Suite,
    shop: Option<shop::ShopTools>,
}

impl Tools {
    pub fn new(suite: Suite) -> Tools {
        let shop = suite.needs_services().then(|| shop::ShopTools::from_env(fault::shop_wrong()));
        Tools { suite, shop }
    }

    pub fn suite(&self) -> Suite {
        self.suite
    }

    /// One tool's value, or the error text of an `isError` result.
    pub fn call(&mut self, tool: &str, args: &Value) -> Result<Value, String> {
        match &mut self.shop {
            Some(shop) => shop.call(tool, args),
            None => self.suite.evaluate(tool, args),
        }
    }
}

/// Answers one incoming line; `None` for notifications and anything that needs no answer.
pub fn answer(tools: &mut Tools, line: &[u8]) -> Option<String> {
    let suite = tools.suite;
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
            let params = msg.params.and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
            let asked =
                params.as_ref().and_then(|p| p.get("protocolVersion")).and_then(Value::as_str).unwrap_or("");
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
            let params = msg.params.and_then(|p| serde_json::from_str::<CallParams>(p.get()).ok());
            let (name, args) = match params {
                Some(CallParams { name, arguments }) => (name, arguments.unwrap_or_else(|| json!({}))),
                None => (Default::default(), json!({})),
            };
            // Rendered by hand: the floor should cost what a lean server costs, not a JSON tree.
            let mut out = String::with_capacity(160);
            out.push_str(r#"{"jsonrpc":"2.0","id":"#);
            out.push_str(id);
            out.push_str(r#","result":{"content":[{"type":"text","text":"#);
            match tools.call(&name, &args) {
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
    let mut tools = Tools::new(suite);
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
        if let Some(reply) = answer(&mut tools, trimmed) {
            output.write_all(reply.as_bytes())?;
            output.flush()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::suite::Expected;
    use crate::mcp::{parse_incoming, tool_value, Incoming};

    fn result_of(line: &str) -> Value {
        let reply = answer(&mut Tools::new(Suite::Weekly), line.as_bytes()).unwrap();
        match parse_incoming(reply.trim_end().as_bytes()).unwrap() {
            Incoming::Response { outcome: Ok(v), .. } => v,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn answers_the_handshake_and_the_suite() {
        let init = result_of(&crate::mcp::request_line(1, "initialize", &crate::mcp::initialize_params()));
        assert_eq!(init["protocolVersion"], crate::mcp::OFFERED_PROTOCOL_VERSION);
        let weekly = &mut Tools::new(Suite::Weekly);
        assert!(answer(weekly, br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).is_none());
        for suite in Suite::ALL {
            let tools = &mut Tools::new(*suite);
            let list = answer(tools, br#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).unwrap();
            let list: Value = serde_json::from_str(&list).unwrap();
            assert_eq!(crate::mcp::tool_names(&list["result"]), suite.tools());
            if suite.needs_services() {
                continue; // `shop`'s tests run its gate against its services
            }
            for (tool, args, expected) in suite.gate() {
                let line =
                    crate::mcp::request_line(9, "tools/call", &crate::mcp::tools_call_params(&tool, &args));
                let reply: Value = serde_json::from_str(&answer(tools, line.as_bytes()).unwrap()).unwrap();
                match expected {
                    Expected::Error => assert!(tool_value(&reply["result"]).is_err()),
                    expected => assert_eq!(expected.verdict(&tool_value(&reply["result"]).unwrap()), Ok(())),
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
        let reply = answer(
            &mut Tools::new(Suite::Weekly),
            br#"{"jsonrpc":"2.0","id":"abc","method":"resources/list"}"#,
        )
        .unwrap();
        assert!(reply.contains(r#""id":"abc""#) && reply.contains("-32601"));
    }
}
