//! The driver's HTTP/1.1 clients: one connection per virtual user, MCP over streamable HTTP (JSON
//! or SSE replies, `Mcp-Session-Id`, `MCP-Protocol-Version`, re-initialize on 404) on the driver's
//! own connection (`wire`), and on hyper's (`conn`) the legacy HTTP+SSE transport (the `endpoint`
//! event, 202 then the answer on the stream) and the plain REST routes (`plain` and Gradio's
//! two-step call API, `rest`). Every failure is a typed [`CallError`] whose kind is counted, never
//! a panic. This file holds the errors, the counts, the MCP sessions and the per-worker call
//! timer; answers already checked are recognised by `known`.

mod conn;
mod known;
mod rest;
mod wire;

pub use conn::{read_body, Conn};
pub use known::KnownAnswer;
pub use rest::{rest_body, RestClient};
use wire::Wire;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Method, StatusCode};
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
pub fn response_in(body: &[u8], is_sse: bool, id: u64) -> Result<RpcOutcome, CallError> {
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

/// Appends a JSON-RPC request's body.
fn push_request(out: &mut Vec<u8>, id: u64, method: &str, params_json: &str) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(crate::http1::Decimal::new(id).as_bytes());
    out.extend_from_slice(b",\"method\":\"");
    out.extend_from_slice(method.as_bytes());
    out.extend_from_slice(b"\",\"params\":");
    out.extend_from_slice(params_json.as_bytes());
    out.push(b'}');
}

/// Renders a JSON-RPC request body.
pub fn request_body(id: u64, method: &str, params_json: &str) -> Bytes {
    let mut out = Vec::with_capacity(64 + params_json.len());
    push_request(&mut out, id, method, params_json);
    Bytes::from(out)
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
        McpClient::open_with(target, limit, counts, false).await
    }

    /// As [`McpClient::open`]; with `keep_times`, the client keeps the duration of every HTTP
    /// request it makes over streamable HTTP, for [`McpClient::take_times`].
    pub async fn open_with(
        target: &HttpTarget,
        limit: Duration,
        counts: &mut Counts,
        keep_times: bool,
    ) -> Result<(McpClient, ServerHello), CallError> {
        match target.transport {
            Transport::StreamableHttp => {
                let mut s = timed(limit, Streamable::open(target)).await?;
                s.times = keep_times.then(Vec::new);
                let hello = timed(limit, s.initialize(counts)).await?;
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
                    timed(limit, s.initialize(counts)).await?;
                    timed(limit, s.request(method, params_json, counts)).await
                }
                r => r,
            },
            McpClient::Legacy(l) => timed(limit, l.request(method, params_json, counts)).await,
        }
    }

    /// A tools/call on a load's hot path, bounded by the worker's `timer`: the answer's body as
    /// it came (checked by the caller, see [`KnownAnswer`]), or on the legacy transport the
    /// answer found in its stream. A forgotten session is re-initialized once, as in `request`.
    pub async fn call<'a>(
        &'a mut self,
        params_json: &str,
        limit: Duration,
        timer: &mut CallTimer,
        counts: &mut Counts,
    ) -> Result<Answer<'a>, CallError> {
        match self {
            McpClient::Streamable(s) => {
                let (id, sse) = match timer.bound(limit, s.call_raw(params_json, counts)).await {
                    Err(e) if e.kind == ErrorKind::SessionExpired => {
                        counts.reinit += 1;
                        s.session = None;
                        timed(limit, s.initialize(counts)).await?;
                        timer.bound(limit, s.call_raw(params_json, counts)).await?
                    }
                    r => r?,
                };
                Ok(Answer::Body { body: s.wire.body(), sse, id })
            }
            McpClient::Legacy(l) => {
                Ok(Answer::Found(timer.bound(limit, l.request("tools/call", params_json, counts)).await?))
            }
        }
    }

    /// Ends a stateful session (DELETE), as a polite client does; errors are ignored.
    pub async fn close(mut self, counts: &mut Counts) {
        self.end_session(counts).await;
    }

    /// Ends the session (DELETE with its id over streamable HTTP; errors are ignored) and keeps
    /// the connection, for [`McpClient::renew`].
    pub async fn end_session(&mut self, counts: &mut Counts) {
        if let McpClient::Streamable(s) = self {
            let _ = tokio::time::timeout(Duration::from_secs(1), s.delete(counts)).await;
            s.session = None;
        }
    }

    /// A new session: over streamable HTTP, initialize and initialized again on the same
    /// kept-alive connection (as k6's virtual users reuse theirs); the legacy transport's session
    /// is its stream, so it connects anew.
    pub async fn renew(
        &mut self,
        target: &HttpTarget,
        limit: Duration,
        counts: &mut Counts,
    ) -> Result<(), CallError> {
        match self {
            McpClient::Streamable(s) => timed(limit, s.initialize(counts)).await.map(|_| ()),
            McpClient::Legacy(_) => {
                *self = McpClient::open(target, limit, counts).await?.0;
                Ok(())
            }
        }
    }

    /// The durations of the HTTP requests made since the last call, in order (none unless the
    /// client was opened to keep them, and none over the legacy transport).
    pub fn take_times(&mut self) -> Vec<Duration> {
        match self {
            McpClient::Streamable(Streamable { times: Some(t), .. }) => std::mem::take(t),
            _ => Vec::new(),
        }
    }
}

/// A tools/call's answer on a load's hot path.
pub enum Answer<'a> {
    /// A streamable HTTP body (an SSE stream or not) that should hold the response to `id`.
    Body { body: &'a [u8], sse: bool, id: u64 },
    /// The response the legacy transport found in its stream.
    Found(RpcOutcome),
}

/// One timer per load worker for its calls' limit, instead of one per call: its deadline is
/// only ever earlier than the current call's, and when it fires early it is moved to the
/// current call's deadline, so it is reset about once per call limit rather than per call.
pub struct CallTimer {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl CallTimer {
    /// A timer (inside a runtime) that has no deadline yet.
    pub fn new() -> CallTimer {
        let far = tokio::time::Instant::now() + Duration::from_secs(365 * 24 * 3600);
        CallTimer { sleep: Box::pin(tokio::time::sleep_until(far)) }
    }

    /// Awaits `f` for at most `limit`.
    pub async fn bound<T>(
        &mut self,
        limit: Duration,
        f: impl std::future::Future<Output = Result<T, CallError>>,
    ) -> Result<T, CallError> {
        use std::future::Future;
        use std::task::Poll;
        let due = tokio::time::Instant::now() + limit;
        if self.sleep.deadline() > due {
            self.sleep.as_mut().reset(due);
        }
        let mut f = std::pin::pin!(f);
        let sleep = &mut self.sleep;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = f.as_mut().poll(cx) {
                return Poll::Ready(r);
            }
            while sleep.as_mut().poll(cx).is_ready() {
                if tokio::time::Instant::now() >= due {
                    return Poll::Ready(Err(err(
                        ErrorKind::Timeout,
                        format!("no answer within {} ms", limit.as_millis()),
                    )));
                }
                sleep.as_mut().reset(due);
            }
            Poll::Pending
        })
        .await
    }
}

impl Default for CallTimer {
    fn default() -> Self {
        CallTimer::new()
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

/// Streamable HTTP: one POST per message on a kept-alive connection of the driver's own
/// ([`Wire`]), each request rendered into one buffer from a head rendered once per session.
pub struct Streamable {
    wire: Wire,
    path: String,
    /// "POST <path>", for errors.
    what: String,
    /// The request head up to the `Content-Length` value: host, content type, accept, then the
    /// session id and protocol version once known.
    head: Vec<u8>,
    /// The body of the request being sent, and the whole request.
    body: Vec<u8>,
    out: Vec<u8>,
    /// A session id the server gave that can go in a header (one that cannot is not kept).
    session: Option<String>,
    protocol: Option<String>,
    next_id: u64,
    /// Kept when asked (`McpClient::open_with`): each HTTP request's duration, request written
    /// to response read, whatever its status (a request cut short by its limit leaves none).
    times: Option<Vec<Duration>>,
}

/// The text of a status code ("404 Not Found").
fn status_text(status: u16) -> String {
    StatusCode::from_u16(status).map_or_else(|_| status.to_string(), |s| s.to_string())
}

impl Streamable {
    async fn open(target: &HttpTarget) -> Result<Streamable, CallError> {
        if !target.path.starts_with('/')
            || target.path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(err(
                ErrorKind::ProtocolError,
                format!("path {:?}: not an absolute path", target.path),
            ));
        }
        let mut s = Streamable {
            wire: Wire::open(target.addr()).await?,
            path: target.path.clone(),
            what: format!("POST {}", target.path),
            head: Vec::new(),
            body: Vec::with_capacity(512),
            out: Vec::with_capacity(1024),
            session: None,
            protocol: None,
            next_id: 1,
            times: None,
        };
        s.set_headers();
        Ok(s)
    }

    /// Renders the request head once per session change, not once per request.
    fn set_headers(&mut self) {
        let mut h = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: {ACCEPT_BOTH}\r\n",
            self.path,
            self.wire.addr()
        );
        if let Some(s) = &self.session {
            h.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        if let Some(p) = &self.protocol {
            h.push_str(&format!("MCP-Protocol-Version: {p}\r\n"));
        }
        h.push_str("Content-Length: ");
        self.head = h.into_bytes();
    }

    /// Sends `body` and reads the whole response.
    async fn post(&mut self, want_session: bool, counts: &mut Counts) -> Result<wire::Head, CallError> {
        self.out.clear();
        self.out.extend_from_slice(&self.head);
        self.out.extend_from_slice(crate::http1::Decimal::new(self.body.len() as u64).as_bytes());
        self.out.extend_from_slice(b"\r\n\r\n");
        self.out.extend_from_slice(&self.body);
        let t0 = std::time::Instant::now();
        let r = self.wire.exchange(&self.out, want_session, counts, &self.what).await;
        if let Some(t) = self.times.as_mut() {
            t.push(t0.elapsed());
        }
        r
    }

    /// Sends the JSON-RPC request `id`.
    async fn post_rpc(
        &mut self,
        id: u64,
        method: &str,
        params_json: &str,
        want_session: bool,
        counts: &mut Counts,
    ) -> Result<wire::Head, CallError> {
        self.body.clear();
        push_request(&mut self.body, id, method, params_json);
        self.post(want_session, counts).await
    }

    async fn initialize(&mut self, counts: &mut Counts) -> Result<ServerHello, CallError> {
        self.protocol = None;
        self.session = None;
        self.set_headers();
        let id = self.next_id;
        self.next_id += 1;
        let head = self.post_rpc(id, "initialize", &initialize_json(), true, counts).await?;
        if let Some(s) = head.session.clone().filter(|s| HeaderValue::from_str(s).is_ok()) {
            self.session = Some(s);
        }
        let hello = hello_from(self.answer(&head, id)?)?;
        self.protocol = Some(hello.protocol_version.clone());
        self.set_headers();
        self.body.clear();
        self.body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        let head = self.post(false, counts).await?;
        if !(200..300).contains(&head.status) {
            return Err(err(
                ErrorKind::HttpStatus,
                format!("notifications/initialized: HTTP {}", status_text(head.status)),
            ));
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
        let head = self.post_rpc(id, method, params_json, false, counts).await?;
        self.answer(&head, id)
    }

    /// The hot path: a tools/call whose answer stays in the connection's body; returns its id
    /// and whether the body is an SSE stream.
    async fn call_raw(&mut self, params_json: &str, counts: &mut Counts) -> Result<(u64, bool), CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let head = self.post_rpc(id, "tools/call", params_json, false, counts).await?;
        Ok((id, self.check_head(&head)?))
    }

    /// Checks a response's status and content type; whether its body is an SSE stream.
    fn check_head(&self, head: &wire::Head) -> Result<bool, CallError> {
        if head.status == 404 && self.session.is_some() {
            return Err(err(ErrorKind::SessionExpired, "HTTP 404 on our session"));
        }
        if head.status != 200 {
            let status = StatusCode::from_u16(head.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return Err(err(
                status_kind(status),
                format!("HTTP {}: {}", status_text(head.status), preview(self.wire.body())),
            ));
        }
        match &head.kind {
            wire::BodyKind::Json => Ok(false),
            wire::BodyKind::Sse => Ok(true),
            wire::BodyKind::Other(ctype) => {
                Err(err(ErrorKind::ProtocolError, format!("unexpected content type {ctype:?}")))
            }
        }
    }

    fn answer(&self, head: &wire::Head, id: u64) -> Result<RpcOutcome, CallError> {
        let sse = self.check_head(head)?;
        response_in(self.wire.body(), sse, id)
    }

    /// Ends a stateful session (DELETE); errors are ignored.
    async fn delete(&mut self, counts: &mut Counts) {
        let Some(id) = &self.session else {
            return;
        };
        let req = format!(
            "DELETE {} HTTP/1.1\r\nHost: {}\r\nMcp-Session-Id: {id}\r\nContent-Length: 0\r\n\r\n",
            self.path,
            self.wire.addr()
        );
        let t0 = std::time::Instant::now();
        let _ = self.wire.exchange(req.as_bytes(), false, counts, "DELETE").await;
        if let Some(t) = self.times.as_mut() {
            t.push(t0.elapsed());
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
    addr: std::net::SocketAddr,
    endpoint: String,
    next_id: u64,
}

impl Legacy {
    async fn connect(target: &HttpTarget, counts: &mut Counts) -> Result<(Legacy, ()), CallError> {
        // The stream's body is read frame by frame outside `drive`: its connection runs on its own.
        let mut get = Conn::open_spawned(target.addr()).await?;
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
            post: Conn::open(target.addr()).await?,
            addr: target.addr(),
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
            self.post = Conn::open(self.addr).await?;
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
