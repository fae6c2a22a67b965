//! The driver's HTTP/1.1 clients on hyper: one connection per virtual user, MCP over streamable
//! HTTP (JSON or SSE replies, `Mcp-Session-Id`, `MCP-Protocol-Version`, re-initialize on 404) and
//! over the legacy HTTP+SSE transport (the `endpoint` event, 202 then the answer on the stream),
//! and the plain REST routes (`plain` and Gradio's two-step call API). Every failure is a typed
//! [`CallError`] whose kind is counted, never a panic. This file holds the errors, the counts and
//! the MCP sessions; the connection is `conn`'s, the REST client `rest`'s.

mod conn;
mod rest;

pub use conn::{read_body, Conn};
pub use rest::{rest_body, RestClient};

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Response, StatusCode, Uri};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::mcp::sse;
use crate::mcp::transport::{HttpTarget, Transport};
use crate::mcp::{self, RpcError};

/// What went wrong with one call; `kind` names the counter it goes to.
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    pub kind: ErrorKind,
    pub detail: String,
}

/// The error counters of a load (the record's `errors` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorKind {
    /// Connecting, or the connection failing under a request.
    Connect,
    /// An HTTP status other than the protocol's (429 aside).
    HttpStatus,
    /// 429 Too Many Requests: the server shed the request.
    RateLimited,
    /// An answer that is not the protocol (bad JSON, wrong content type, no response for our id).
    ProtocolError,
    /// The tool answered with an error (isError, or a JSON-RPC error).
    ToolError,
    /// The tool answered with another value than the expected one.
    WrongResult,
    /// No answer within the call limit.
    Timeout,
    /// A 404 on our session that re-initializing did not cure.
    SessionExpired,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::HttpStatus => "http_status",
            ErrorKind::RateLimited => "rate_limited",
            ErrorKind::ProtocolError => "protocol_error",
            ErrorKind::ToolError => "tool_error",
            ErrorKind::WrongResult => "wrong_result",
            ErrorKind::Timeout => "timeout",
            ErrorKind::SessionExpired => "session_expired",
        }
    }

    /// Whether the connection or session may be in an unknown state after this error.
    pub fn poisons_connection(self) -> bool {
        matches!(
            self,
            ErrorKind::Connect | ErrorKind::Timeout | ErrorKind::ProtocolError | ErrorKind::SessionExpired
        )
    }
}

/// The counter an unexpected HTTP status goes to.
fn status_kind(status: StatusCode) -> ErrorKind {
    if status == StatusCode::TOO_MANY_REQUESTS {
        ErrorKind::RateLimited
    } else {
        ErrorKind::HttpStatus
    }
}

fn err(kind: ErrorKind, detail: impl Into<String>) -> CallError {
    CallError { kind, detail: detail.into() }
}

/// What a client counts as it goes. The caller keeps it (a load worker, in its own state) and
/// lends it to every request, so that a request cut short by its time limit still leaves its
/// count behind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Streamable sessions the server forgot (404), re-initialized and the request retried.
    pub reinit: u64,
    /// Kept-alive connections the server closed between requests, reopened by `dispatch`.
    pub reconnects: u64,
}

/// Whether the response's content type is `mime` (parameters and case aside).
fn content_type_is(resp: &Response<Incoming>, mime: &str) -> bool {
    resp.headers()
        .get(hyper::header::CONTENT_TYPE)
        .map(|v| v.as_bytes())
        .is_some_and(|v| v.len() >= mime.len() && v[..mime.len()].eq_ignore_ascii_case(mime.as_bytes()))
}

fn content_type(resp: &Response<Incoming>) -> String {
    resp.headers().get(hyper::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

/// A JSON-RPC response, with the result left as raw text (so a repeated identical answer can be
/// recognised without building a JSON tree).
#[derive(Deserialize)]
struct RawResponse<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<RpcError>,
    #[serde(default)]
    method: Option<String>,
}

/// The outcome of one JSON-RPC request: the raw result text, or the server's error.
pub type RpcOutcome = Result<String, RpcError>;

/// Finds the response to `id` in a JSON body or an SSE body.
fn response_in(body: &[u8], is_sse: bool, id: u64) -> Result<RpcOutcome, CallError> {
    let pick = |text: &[u8]| -> Result<Option<RpcOutcome>, CallError> {
        let r: RawResponse = serde_json::from_slice(text).map_err(|e| {
            err(ErrorKind::ProtocolError, format!("not a JSON-RPC message ({e}): {}", preview(text)))
        })?;
        if r.method.is_some() || r.id.as_ref().and_then(Value::as_u64) != Some(id) {
            return Ok(None); // a notification or request from the server, or another answer
        }
        match (r.result, r.error) {
            (Some(res), None) => Ok(Some(Ok(res.get().to_string()))),
            (None, Some(e)) => Ok(Some(Err(e))),
            _ => Err(err(ErrorKind::ProtocolError, "a response needs exactly one of result and error")),
        }
    };
    if is_sse {
        let events = sse::parse_all(body).map_err(|e| err(ErrorKind::ProtocolError, e.to_string()))?;
        for ev in events.iter().filter(|e| e.event == "message") {
            if let Some(o) = pick(ev.data.as_bytes())? {
                return Ok(o);
            }
        }
        Err(err(
            ErrorKind::ProtocolError,
            format!("the SSE reply has no response to request {id}: {}", preview(body)),
        ))
    } else {
        pick(body)?.ok_or_else(|| {
            err(ErrorKind::ProtocolError, format!("the reply is not the response to request {id}"))
        })
    }
}

pub fn preview(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned();
    if b.len() > 300 {
        format!("{s}…")
    } else {
        s
    }
}

/// Renders a JSON-RPC request body.
pub fn request_body(id: u64, method: &str, params_json: &str) -> Bytes {
    let mut s = String::with_capacity(64 + params_json.len());
    s.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    s.push_str(&id.to_string());
    s.push_str(",\"method\":\"");
    s.push_str(method);
    s.push_str("\",\"params\":");
    s.push_str(params_json);
    s.push('}');
    Bytes::from(s)
}

const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// An MCP client session over one of the HTTP transports.
pub enum McpClient {
    Streamable(Streamable),
    Legacy(Legacy),
}

/// What `initialize` told us.
#[derive(Debug, Clone, Default)]
pub struct ServerHello {
    pub protocol_version: String,
    pub server_info: Option<Value>,
}

impl McpClient {
    /// Connects and runs the handshake (initialize, then notifications/initialized).
    pub async fn open(
        target: &HttpTarget,
        limit: Duration,
        counts: &mut Counts,
    ) -> Result<(McpClient, ServerHello), CallError> {
        match target.transport {
            Transport::StreamableHttp => {
                let uri: Uri = target
                    .path
                    .parse()
                    .map_err(|e| err(ErrorKind::ProtocolError, format!("path {:?}: {e}", target.path)))?;
                let mut s = Streamable {
                    conn: Conn::open(target.port).await?,
                    port: target.port,
                    path: target.path.clone(),
                    uri,
                    headers: Vec::new(),
                    session: None,
                    protocol: None,
                    next_id: 1,
                };
                s.set_headers();
                let hello = timed(limit, s.initialize(limit, counts)).await?;
                Ok((McpClient::Streamable(s), hello))
            }
            Transport::Sse => {
                let (mut l, _) = timed(limit, Legacy::connect(target, counts)).await?;
                let hello = timed(limit, l.initialize(limit, counts)).await?;
                Ok((McpClient::Legacy(l), hello))
            }
            Transport::Stdio => Err(err(ErrorKind::ProtocolError, "stdio is not an HTTP transport")),
        }
    }

    /// One request; the raw result or the server's JSON-RPC error. Streamable sessions that the
    /// server forgot (404) are re-initialized once and the request retried: `counts.reinit`
    /// counts it.
    pub async fn request(
        &mut self,
        method: &str,
        params_json: &str,
        limit: Duration,
        counts: &mut Counts,
    ) -> Result<RpcOutcome, CallError> {
        match self {
            McpClient::Streamable(s) => match timed(limit, s.request(method, params_json, counts)).await {
                Err(e) if e.kind == ErrorKind::SessionExpired => {
                    counts.reinit += 1;
                    s.session = None;
                    timed(limit, s.initialize(limit, counts)).await?;
                    timed(limit, s.request(method, params_json, counts)).await
                }
                r => r,
            },
            McpClient::Legacy(l) => timed(limit, l.request(method, params_json, counts)).await,
        }
    }

    /// Ends a stateful session (DELETE), as a polite client does; errors are ignored.
    pub async fn close(self, counts: &mut Counts) {
        if let McpClient::Streamable(mut s) = self {
            if let Some(id) = s.session.clone() {
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    s.conn.send(Method::DELETE, &s.path, &[("mcp-session-id", &id)], Bytes::new(), counts),
                )
                .await;
            }
        }
    }
}

/// Bounds a future by the call limit.
pub async fn timed<T>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    match tokio::time::timeout(limit, f).await {
        Ok(r) => r,
        Err(_) => Err(err(ErrorKind::Timeout, format!("no answer within {} ms", limit.as_millis()))),
    }
}

fn hello_from(outcome: RpcOutcome) -> Result<ServerHello, CallError> {
    let raw = outcome.map_err(|e| {
        err(ErrorKind::ProtocolError, format!("initialize was refused: {} ({})", e.message, e.code))
    })?;
    let v: Value = serde_json::from_str(&raw).map_err(|e| err(ErrorKind::ProtocolError, e.to_string()))?;
    let version = v.get("protocolVersion").and_then(Value::as_str).unwrap_or("").to_string();
    if !mcp::SUPPORTED_PROTOCOL_VERSIONS.contains(&version.as_str()) {
        return Err(err(
            ErrorKind::ProtocolError,
            format!("the server answered protocol version {version:?}, which the lab does not speak"),
        ));
    }
    Ok(ServerHello { protocol_version: version, server_info: v.get("serverInfo").cloned() })
}

fn initialize_json() -> String {
    mcp::initialize_params().to_string()
}

/// Streamable HTTP: one POST per message on a kept-alive connection.
pub struct Streamable {
    conn: Conn,
    port: u16,
    path: String,
    uri: Uri,
    /// content-type, accept, then the session id and protocol version once known.
    headers: Vec<(HeaderName, HeaderValue)>,
    session: Option<String>,
    protocol: Option<String>,
    next_id: u64,
}

impl Streamable {
    async fn ensure_conn(&mut self) -> Result<(), CallError> {
        if self.conn.is_closed() {
            self.conn = Conn::open(self.port).await?;
        }
        Ok(())
    }

    /// Renders the request headers once per session change, not once per request.
    fn set_headers(&mut self) {
        use hyper::header::{ACCEPT, CONTENT_TYPE};
        let mut h = vec![
            (CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (ACCEPT, HeaderValue::from_static(ACCEPT_BOTH)),
        ];
        let value = |v: &str| HeaderValue::from_str(v).ok();
        if let Some(s) = self.session.as_deref().and_then(value) {
            h.push((HeaderName::from_static("mcp-session-id"), s));
        }
        if let Some(p) = self.protocol.as_deref().and_then(value) {
            h.push((HeaderName::from_static("mcp-protocol-version"), p));
        }
        self.headers = h;
    }

    async fn post(&mut self, body: Bytes, counts: &mut Counts) -> Result<Response<Incoming>, CallError> {
        self.ensure_conn().await?;
        self.conn.send_prepared(&self.uri, &self.headers, body, counts).await
    }

    async fn initialize(&mut self, _limit: Duration, counts: &mut Counts) -> Result<ServerHello, CallError> {
        self.protocol = None;
        self.session = None;
        self.set_headers();
        let id = self.next_id;
        self.next_id += 1;
        let resp = self.post(request_body(id, "initialize", &initialize_json()), counts).await?;
        if let Some(s) = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            self.session = Some(s.to_string());
        }
        let hello = hello_from(self.answer(resp, id).await?)?;
        self.protocol = Some(hello.protocol_version.clone());
        self.set_headers();
        let resp = self
            .post(
                Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"),
                counts,
            )
            .await?;
        let status = resp.status();
        let _ = self.conn.read_body(resp).await?;
        if !status.is_success() {
            return Err(err(ErrorKind::HttpStatus, format!("notifications/initialized: HTTP {status}")));
        }
        Ok(hello)
    }

    async fn request(
        &mut self,
        method: &str,
        params_json: &str,
        counts: &mut Counts,
    ) -> Result<RpcOutcome, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let resp = self.post(request_body(id, method, params_json), counts).await?;
        self.answer(resp, id).await
    }

    async fn answer(&mut self, resp: Response<Incoming>, id: u64) -> Result<RpcOutcome, CallError> {
        let status = resp.status();
        let is_json = content_type_is(&resp, "application/json");
        let is_sse = !is_json && content_type_is(&resp, "text/event-stream");
        let ctype = if is_json || is_sse { String::new() } else { content_type(&resp) };
        let body = self.conn.read_body(resp).await?;
        if status == StatusCode::NOT_FOUND && self.session.is_some() {
            return Err(err(ErrorKind::SessionExpired, "HTTP 404 on our session"));
        }
        if status != StatusCode::OK {
            return Err(err(status_kind(status), format!("HTTP {status}: {}", preview(&body))));
        }
        if is_json || is_sse {
            response_in(&body, is_sse, id)
        } else {
            Err(err(ErrorKind::ProtocolError, format!("unexpected content type {ctype:?}")))
        }
    }
}

/// The legacy HTTP+SSE transport: a GET stream for answers, POSTs to the endpoint it names.
pub struct Legacy {
    /// The connection the GET stream is on (busy with it for the session's life).
    _get: Conn,
    stream: Incoming,
    parser: sse::Parser,
    pending: std::collections::VecDeque<sse::Event>,
    post: Conn,
    port: u16,
    endpoint: String,
    next_id: u64,
}

impl Legacy {
    async fn connect(target: &HttpTarget, counts: &mut Counts) -> Result<(Legacy, ()), CallError> {
        // The stream's body is read frame by frame outside `drive`: its connection runs on its own.
        let mut get = Conn::open_spawned(target.port).await?;
        let resp = get
            .send(Method::GET, &target.path, &[("accept", "text/event-stream")], Bytes::new(), counts)
            .await?;
        if resp.status() != StatusCode::OK {
            let status = resp.status();
            let body = read_body(resp).await.unwrap_or_default();
            return Err(err(
                ErrorKind::HttpStatus,
                format!("GET {}: HTTP {status}: {}", target.path, preview(&body)),
            ));
        }
        // The GET connection stays busy with this stream; POSTs go on a second connection.
        let mut l = Legacy {
            _get: get,
            stream: resp.into_body(),
            parser: sse::Parser::new(),
            pending: Default::default(),
            post: Conn::open(target.port).await?,
            port: target.port,
            endpoint: String::new(),
            next_id: 1,
        };
        let ev = l.next_event().await?;
        if ev.event != "endpoint" {
            return Err(err(
                ErrorKind::ProtocolError,
                format!("the SSE stream began with {:?}, not an endpoint event", ev.event),
            ));
        }
        l.endpoint = resolve_endpoint(&target.path, ev.data.trim());
        Ok((l, ()))
    }

    async fn next_event(&mut self) -> Result<sse::Event, CallError> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Ok(ev);
            }
            match self.stream.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        let evs = self
                            .parser
                            .feed(&data)
                            .map_err(|e| err(ErrorKind::ProtocolError, e.to_string()))?;
                        self.pending.extend(evs);
                    }
                }
                Some(Err(e)) => return Err(err(ErrorKind::Connect, format!("the SSE stream failed: {e}"))),
                None => return Err(err(ErrorKind::Connect, "the server closed the SSE stream")),
            }
        }
    }

    async fn post(&mut self, body: Bytes, counts: &mut Counts) -> Result<(), CallError> {
        if self.post.is_closed() {
            self.post = Conn::open(self.port).await?;
        }
        let endpoint = self.endpoint.clone();
        let resp = self
            .post
            .send(Method::POST, &endpoint, &[("content-type", "application/json")], body, counts)
            .await?;
        let status = resp.status();
        let body = self.post.read_body(resp).await?;
        if !status.is_success() {
            return Err(err(
                status_kind(status),
                format!("POST {endpoint}: HTTP {status}: {}", preview(&body)),
            ));
        }
        Ok(())
    }

    async fn initialize(&mut self, _limit: Duration, counts: &mut Counts) -> Result<ServerHello, CallError> {
        let hello = hello_from(self.request("initialize", &initialize_json(), counts).await?)?;
        self.post(
            Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"),
            counts,
        )
        .await?;
        Ok(hello)
    }

    async fn request(
        &mut self,
        method: &str,
        params_json: &str,
        counts: &mut Counts,
    ) -> Result<RpcOutcome, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        self.post(request_body(id, method, params_json), counts).await?;
        loop {
            let ev = self.next_event().await?;
            if ev.event != "message" {
                continue;
            }
            if let Ok(Some(o)) = response_in(ev.data.as_bytes(), false, id).map(Some) {
                return Ok(o);
            }
        }
    }
}

/// The POST target an `endpoint` event names, as a path on our server.
pub fn resolve_endpoint(sse_path: &str, data: &str) -> String {
    if let Some(rest) = data.strip_prefix("http://").or_else(|| data.strip_prefix("https://")) {
        return rest.find('/').map_or("/".to_string(), |i| rest[i..].to_string());
    }
    if data.starts_with('/') {
        return data.to_string();
    }
    let base = sse_path.rfind('/').map_or("/", |i| &sse_path[..=i]);
    format!("{base}{data}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_resolution() {
        assert_eq!(resolve_endpoint("/sse", "/messages/?session_id=1"), "/messages/?session_id=1");
        assert_eq!(
            resolve_endpoint("/gradio_api/mcp/sse", "messages/?session_id=1"),
            "/gradio_api/mcp/messages/?session_id=1"
        );
        assert_eq!(
            resolve_endpoint("/sse", "http://127.0.0.1:8000/messages?sessionId=x"),
            "/messages?sessionId=x"
        );
    }

    #[test]
    fn finds_the_response_in_json_and_sse_bodies() {
        let json = br#"{"jsonrpc":"2.0","id":4,"result":{"content":[]}}"#;
        assert_eq!(response_in(json, false, 4).unwrap(), Ok(r#"{"content":[]}"#.to_string()));
        let sse = b"id: a\ndata:\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":-32602,\"message\":\"x\"}}\n\n";
        assert!(matches!(response_in(sse, true, 9).unwrap(), Err(RpcError { code: -32602, .. })));
        assert_eq!(response_in(sse, true, 8).unwrap_err().kind, ErrorKind::ProtocolError);
        assert_eq!(response_in(b"<html>", false, 1).unwrap_err().kind, ErrorKind::ProtocolError);
    }

    #[test]
    fn request_bodies_are_json_rpc() {
        let b = request_body(3, "tools/call", r#"{"name":"echo","arguments":{"message":"hi"}}"#);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["id"], 3);
        assert_eq!(v["params"]["arguments"]["message"], "hi");
    }
}
