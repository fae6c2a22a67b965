//! The plain REST client for one tool route (`plain`, and Gradio's two-step call API) and the
//! body of a call in the route's style. MCP is the other clients' business.

use bytes::Bytes;
use hyper::{Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use super::{err, preview, CallError, Conn, Counts, ErrorKind};
use crate::mcp::sse;
use crate::mcp::transport::{ApiStyle, HttpTarget};

/// A plain REST client for one tool route.
pub struct RestClient {
    conn: Conn,
    addr: std::net::SocketAddr,
    style: ApiStyle,
    route_template: String,
}

impl RestClient {
    pub async fn open(target: &HttpTarget) -> Result<RestClient, CallError> {
        let route_template = target
            .api_route
            .clone()
            .ok_or_else(|| err(ErrorKind::ProtocolError, "the server has no plain HTTP route"))?;
        Ok(RestClient {
            conn: Conn::open(target.addr()).await?,
            addr: target.addr(),
            style: target.api_style.unwrap_or_default(),
            route_template,
        })
    }

    /// Calls `tool` with a prepared body; returns the value's raw JSON text.
    pub async fn call(&mut self, tool: &str, body: &Bytes, counts: &mut Counts) -> Result<String, CallError> {
        if self.conn.is_closed() {
            self.conn = Conn::open(self.addr).await?;
        }
        let route = self.route_template.replace("{tool}", tool);
        let resp = self
            .conn
            .send(Method::POST, &route, &[("content-type", "application/json")], body.clone(), counts)
            .await?;
        let status = resp.status();
        let bytes = self.conn.read_body(resp).await?;
        if !status.is_success() {
            return Err(err(
                if status.is_server_error() { ErrorKind::ToolError } else { ErrorKind::HttpStatus },
                format!("POST {route}: HTTP {status}: {}", preview(&bytes)),
            ));
        }
        match self.style {
            ApiStyle::Plain => String::from_utf8(bytes.to_vec())
                .map_err(|_| err(ErrorKind::ProtocolError, "the body is not UTF-8")),
            ApiStyle::Gradio => {
                #[derive(Deserialize)]
                struct Queued {
                    event_id: String,
                }
                let q: Queued = serde_json::from_slice(&bytes).map_err(|e| {
                    err(ErrorKind::ProtocolError, format!("no event_id ({e}): {}", preview(&bytes)))
                })?;
                let path = format!("{route}/{}", q.event_id);
                let resp = self
                    .conn
                    .send(Method::GET, &path, &[("accept", "text/event-stream")], Bytes::new(), counts)
                    .await?;
                let status = resp.status();
                let body = self.conn.read_body(resp).await?;
                if status != StatusCode::OK {
                    return Err(err(
                        ErrorKind::HttpStatus,
                        format!("GET {path}: HTTP {status}: {}", preview(&body)),
                    ));
                }
                let events =
                    sse::parse_all(&body).map_err(|e| err(ErrorKind::ProtocolError, e.to_string()))?;
                match events.iter().rev().find(|e| e.event == "complete" || e.event == "error") {
                    Some(e) if e.event == "complete" => {
                        let v: Value = serde_json::from_str(&e.data)
                            .map_err(|x| err(ErrorKind::ProtocolError, format!("complete event: {x}")))?;
                        let first = v.as_array().and_then(|a| a.first()).cloned().unwrap_or(Value::Null);
                        Ok(first.to_string())
                    }
                    Some(e) => Err(err(ErrorKind::ToolError, format!("error event: {}", e.data))),
                    None => {
                        Err(err(ErrorKind::ProtocolError, format!("no complete event: {}", preview(&body))))
                    }
                }
            }
        }
    }
}

/// The body of a REST call for `args` in the route's style.
pub fn rest_body(style: ApiStyle, args: &Value) -> Bytes {
    match style {
        ApiStyle::Plain => Bytes::from(args.to_string()),
        ApiStyle::Gradio => {
            let data: Vec<Value> =
                args.as_object().map(|o| o.values().cloned().collect()).unwrap_or_default();
            Bytes::from(serde_json::json!({ "data": data }).to_string())
        }
    }
}
