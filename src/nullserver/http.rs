//! The null server over streamable HTTP: `POST /mcp` answers JSON-RPC with `application/json`
//! (202 for notifications), statelessly or with sessions (`Mcp-Session-Id`); `POST /api/<tool>`
//! takes the arguments object and answers the value. One thread, or one per worker
//! (`$BENCHLAB_SERVER_WORKERS`: threads with a listener each on the same port, SO_REUSEPORT). With an HTTP fault installed
//! (`fault`), it answers the way the fault says once the fault strikes.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::fault::{self, FaultBody, HttpFault};
use super::{answer, Message, Tools};
use crate::mcp::suite::Suite;

type Body = Either<Full<Bytes>, FaultBody>;

/// Serves streamable HTTP on 127.0.0.1:`port` on one thread until killed (or, under the `refuse`
/// fault, until it stops listening and its last connection closes).
pub fn serve_http(suite: Suite, port: u16, stateful: bool) -> std::io::Result<()> {
    serve_http_workers(suite, port, stateful, 1)
}

/// Serves with `workers` threads, each a worker of its own (its runtime, its listener on the
/// same port with SO_REUSEPORT, so the kernel spreads connections over them; its own sessions
/// and service clients), as a multi-worker server does. Returns when every worker has stopped.
pub fn serve_http_workers(suite: Suite, port: u16, stateful: bool, workers: u32) -> std::io::Result<()> {
    let reuse = workers > 1;
    let others: Vec<_> = (1..workers)
        .map(|_| std::thread::spawn(move || serve_worker(suite, port, stateful, reuse)))
        .collect();
    let first = serve_worker(suite, port, stateful, reuse);
    for t in others {
        t.join().map_err(|_| std::io::Error::other("a worker thread panicked"))??;
    }
    first
}

/// One worker: a single-threaded runtime serving its listener until killed.
fn serve_worker(suite: Suite, port: u16, stateful: bool, reuse_port: bool) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.set_reuseport(reuse_port)?;
        socket.bind(std::net::SocketAddr::from(([127, 0, 0, 1], port)))?;
        let listener = socket.listen(1024)?;
        let state = Rc::new(State::new(suite));
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => accepted?,
                () = state.refuse.notified() => break,
            };
            let _ = stream.set_nodelay(true);
            let fd = stream.as_raw_fd();
            let state = state.clone();
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(http_answer(stateful, &state, fd, req).await) }
            });
            tokio::task::spawn_local(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
        // `refuse`: the port is closed; the connections still open close after their next answer.
        drop(listener);
        std::future::pending::<std::io::Result<()>>().await
    })
}

/// The stateful mode's sessions (the ids handed out and not yet deleted, and the next number),
/// the `refuse` fault's signal to the accept loop, and what answers tools (the shop's service
/// clients, kept for the process: their blocking loopback I/O runs on this one thread, which
/// is acceptable for the floor server).
struct State {
    live: RefCell<HashSet<String>>,
    next: Cell<u64>,
    refuse: tokio::sync::Notify,
    tools: RefCell<Tools>,
}

impl State {
    fn new(suite: Suite) -> State {
        State {
            live: RefCell::default(),
            next: Cell::default(),
            refuse: tokio::sync::Notify::default(),
            tools: RefCell::new(Tools::new(suite)),
        }
    }
}

fn reply(status: StatusCode, body: Vec<u8>, session: Option<String>) -> Response<Body> {
    let mut b = Response::builder().status(status).header("content-type", "application/json");
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    b.body(Either::Left(Full::new(Bytes::from(body)))).expect("static headers are valid")
}

async fn http_answer(
    stateful: bool,
    state: &State,
    fd: RawFd,
    req: hyper::Request<hyper::body::Incoming>,
) -> Response<Body> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let session = parts.headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
    let Ok(body) = body.collect().await.map(|c| c.to_bytes()) else {
        return reply(StatusCode::BAD_REQUEST, b"{}".to_vec(), None);
    };
    if parts.method != hyper::Method::POST {
        if parts.method == hyper::Method::DELETE && stateful {
            if let Some(s) = session {
                state.live.borrow_mut().remove(s);
            }
            return reply(StatusCode::OK, Vec::new(), None);
        }
        return reply(StatusCode::METHOD_NOT_ALLOWED, b"{}".to_vec(), None);
    }
    if let Some(tool) = path.strip_prefix("/api/") {
        return rest_answer(&mut state.tools.borrow_mut(), tool, &body);
    }
    if path != "/mcp" {
        return reply(StatusCode::NOT_FOUND, b"{}".to_vec(), None);
    }
    // Only with a fault installed is the method read here (the floor path stays as it was).
    let method = || serde_json::from_slice::<Message>(&body).ok().and_then(|m| m.method);
    let struck = fault::http_fault().filter(|_| fault::struck(method() == Some("tools/call")));
    let is_call = struck.is_some() && method() == Some("tools/call");
    let mut new_session = None;
    if stateful {
        if method() == Some("initialize") {
            let n = state.next.get();
            state.next.set(n + 1);
            let id = format!("null-{n}");
            state.live.borrow_mut().insert(id.clone());
            new_session = Some(id);
        } else if !session.is_some_and(|s| state.live.borrow().contains(s))
            || (is_call && struck == Some(HttpFault::DropSession))
        {
            return reply(StatusCode::NOT_FOUND, b"{}".to_vec(), None);
        }
    }
    if let Some(f) = struck.filter(|_| is_call) {
        if let Some(r) = faulty_answer(f, fd) {
            return r;
        }
    }
    let mut r = match answer(&mut state.tools.borrow_mut(), &body) {
        Some(line) => {
            let mut line = line.into_bytes();
            line.pop(); // the stdio newline
            if is_call && struck == Some(HttpFault::Wrong) {
                fault::wrong_value(&mut line);
            }
            reply(StatusCode::OK, line, new_session)
        }
        None => reply(StatusCode::ACCEPTED, Vec::new(), None),
    };
    if struck == Some(HttpFault::Refuse) {
        state.refuse.notify_one();
        r.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
    }
    r
}

/// `POST /api/<tool>`: the arguments object in, the value out.
fn rest_answer(tools: &mut Tools, tool: &str, body: &[u8]) -> Response<Body> {
    let args: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return reply(
                StatusCode::BAD_REQUEST,
                json!({"error": e.to_string()}).to_string().into_bytes(),
                None,
            )
        }
    };
    match tools.call(tool, &args) {
        Ok(v) => reply(StatusCode::OK, v.to_string().into_bytes(), None),
        Err(e) => reply(StatusCode::UNPROCESSABLE_ENTITY, json!({"error": e}).to_string().into_bytes(), None),
    }
}

/// What a struck fault answers to a tools/call instead of the answer; `None` where the answer
/// goes out as usual (`refuse`, `drop_session`: handled around it).
fn faulty_answer(f: HttpFault, fd: RawFd) -> Option<Response<Body>> {
    let stream = |status: StatusCode, ctype: &'static str, body: FaultBody| {
        Response::builder().status(status).header("content-type", ctype).body(Either::Right(body)).ok()
    };
    const SSE: &str = "text/event-stream";
    match f {
        HttpFault::Refuse | HttpFault::DropSession | HttpFault::Wrong => None,
        HttpFault::Exit => {
            eprintln!("benchlab null server: fault exit: exiting mid-load");
            std::process::exit(3)
        }
        HttpFault::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            let mut r = reply(
                status,
                json!({"error": format!("fault: status {code}")}).to_string().into_bytes(),
                None,
            );
            if code == 429 || code == 503 {
                r.headers_mut()
                    .insert(hyper::header::RETRY_AFTER, hyper::header::HeaderValue::from_static("1"));
            }
            Some(r)
        }
        HttpFault::Reset => {
            fault::reset_on_close(fd);
            let half = Bytes::from_static(br#"{"jsonrpc":"2.0","id":"#);
            stream(StatusCode::OK, "application/json", FaultBody::Partial(Some(half)))
        }
        HttpFault::SseStall => {
            stream(StatusCode::OK, SSE, FaultBody::Stall(Some(Bytes::from_static(b": stalled\n\n"))))
        }
        HttpFault::BadSse => {
            let event = Bytes::from_static(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":,,}\n\n");
            Some(Response::builder().header("content-type", SSE).body(Either::Left(Full::new(event))).ok()?)
        }
        HttpFault::BadJson => {
            Some(reply(StatusCode::OK, br#"{"jsonrpc":"2.0","result":{"content":["#.to_vec(), None))
        }
    }
}
