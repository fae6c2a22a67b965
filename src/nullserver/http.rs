//! The null server over streamable HTTP: `POST /mcp` answers JSON-RPC with `application/json`
//! (202 for notifications), statelessly or with sessions (`Mcp-Session-Id`); `POST /api/<tool>`
//! takes the arguments object and answers the value. One thread, or one per worker
//! (`$BENCHLAB_SERVER_WORKERS`: threads with a listener each on the same port, SO_REUSEPORT).
//! HTTP/1.1 is spoken by a lean loop of its own, as the floor should cost what a lean server
//! costs: each connection reads into one reused buffer, parses heads with httparse, takes
//! `Content-Length` bodies (a chunked request body is refused with 411), answers pipelined
//! requests in order and writes all the answers one read brought with one `write`. With an HTTP
//! fault installed (`fault`), it answers the way the fault says once the fault strikes.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::os::fd::AsRawFd;
use std::rc::Rc;

use hyper::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::fault::{self, HttpFault};
use super::{answer, Message, Tools};
use crate::mcp::suite::Suite;

/// The most a request head may take before it is refused (431).
const MAX_HEAD: usize = 64 * 1024;
/// The most header fields a request may have (431 beyond).
const MAX_HEADERS: usize = 64;
/// The most a request body may take before it is refused (413).
const MAX_BODY: usize = 16 * 1024 * 1024;

const JSON: &str = "application/json";
const SSE: &str = "text/event-stream";

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
        let state = Rc::new(State::new(suite, stateful));
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => accepted?,
                () = state.refuse.notified() => break,
            };
            let _ = stream.set_nodelay(true);
            tokio::task::spawn_local(connection(stream, state.clone()));
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
    stateful: bool,
    live: RefCell<HashSet<String>>,
    next: Cell<u64>,
    refuse: tokio::sync::Notify,
    tools: RefCell<Tools>,
}

impl State {
    fn new(suite: Suite, stateful: bool) -> State {
        State {
            stateful,
            live: RefCell::default(),
            next: Cell::default(),
            refuse: tokio::sync::Notify::default(),
            tools: RefCell::new(Tools::new(suite)),
        }
    }
}

/// One request, its body whole, borrowed from the connection's buffer.
struct Request<'a> {
    method: &'a str,
    /// Without its query.
    path: &'a str,
    session: Option<&'a str>,
    /// The client asked to close after the answer (or spoke HTTP/1.0 without keep-alive).
    close: bool,
    body: &'a [u8],
    /// Bytes the request took, head and body.
    len: usize,
}

/// What the buffer holds.
enum Parsed<'a> {
    /// Not a whole request yet; `expect_continue`: the head is whole and asks for a
    /// `100 Continue` before its body.
    More {
        expect_continue: bool,
    },
    Request(Request<'a>),
    /// Not a request the server takes: answered with this status and reason, then closed.
    Refused(StatusCode, &'static str),
}

fn parse(buf: &[u8]) -> Parsed<'_> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return Parsed::Refused(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "a request head over 64 KiB")
        }
        Ok(httparse::Status::Partial) => return Parsed::More { expect_continue: false },
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Refused(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "more than 64 header fields")
        }
        Err(_) => return Parsed::Refused(StatusCode::BAD_REQUEST, "not an HTTP/1.1 request"),
    };
    let (mut length, mut session, mut expect_continue) = (0, None, false);
    let mut close = req.version == Some(0);
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            match std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<usize>().ok()) {
                Some(n) => length = n,
                None => {
                    return Parsed::Refused(StatusCode::BAD_REQUEST, "a Content-Length that is not a number")
                }
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return Parsed::Refused(
                StatusCode::LENGTH_REQUIRED,
                "the null server reads request bodies by Content-Length, not chunked",
            );
        } else if name.eq_ignore_ascii_case(b"mcp-session-id") {
            session = std::str::from_utf8(h.value).ok();
        } else if name.eq_ignore_ascii_case(b"connection") {
            close = crate::http1::connection_closes(h.value, req.version == Some(0), close);
        } else if name.eq_ignore_ascii_case(b"expect") {
            expect_continue = h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    if length > MAX_BODY {
        return Parsed::Refused(StatusCode::PAYLOAD_TOO_LARGE, "a request body over 16 MiB");
    }
    let Some(body) = buf.get(head..head + length) else {
        return Parsed::More { expect_continue };
    };
    let (Some(method), Some(target)) = (req.method, req.path) else {
        return Parsed::Refused(StatusCode::BAD_REQUEST, "not an HTTP/1.1 request");
    };
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    Parsed::Request(Request { method, path, session, close, body, len: head + length })
}

/// What the connection does once the answers so far are written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Reads the next request.
    Next,
    Close,
    /// Closes with a TCP reset (`reset`).
    Reset,
    /// Sends nothing more and keeps the connection until the client closes it (`sse_stall`).
    Stall,
}

/// Serves one connection until the client closes it, a request says to close, or a fault ends it.
async fn connection(mut stream: TcpStream, state: Rc<State>) {
    let mut input: Vec<u8> = Vec::with_capacity(4096);
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    let mut continued = false;
    loop {
        let mut start = 0;
        let mut then = Then::Next;
        while then == Then::Next {
            match parse(&input[start..]) {
                Parsed::More { expect_continue } => {
                    if expect_continue && !continued {
                        out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                        continued = true;
                    }
                    break;
                }
                Parsed::Request(req) => {
                    start += req.len;
                    continued = false;
                    then = http_answer(&state, &req, &mut out);
                    if req.close && then == Then::Next {
                        then = Then::Close;
                    }
                }
                Parsed::Refused(status, why) => {
                    let body = json!({ "error": why }).to_string();
                    respond(&mut out, status, JSON, body.as_bytes(), &[("connection", "close")]);
                    then = Then::Close;
                }
            }
        }
        if !out.is_empty() {
            if stream.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        match then {
            Then::Next => {}
            Then::Close => return,
            Then::Reset => return fault::reset_on_close(stream.as_raw_fd()),
            Then::Stall => {
                let mut sink = [0u8; 4096];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
        }
        input.drain(..start);
        if input.capacity() - input.len() < 2048 {
            input.reserve(4096);
        }
        match stream.read_buf(&mut input).await {
            Ok(n) if n > 0 => {}
            _ => return,
        }
    }
}

/// Appends one whole response: status, content type, `Content-Length` and the `extra` header
/// fields.
fn respond(out: &mut Vec<u8>, status: StatusCode, ctype: &str, body: &[u8], extra: &[(&str, &str)]) {
    head(out, status, ctype, extra);
    out.extend_from_slice(b"content-length: ");
    out.extend_from_slice(crate::http1::Decimal::new(body.len() as u64).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
}

/// Appends a head's status line, content type and `extra` fields, without the blank line.
fn head(out: &mut Vec<u8>, status: StatusCode, ctype: &str, extra: &[(&str, &str)]) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.extend_from_slice(b"\r\ncontent-type: ");
    out.extend_from_slice(ctype.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in extra {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// Answers one request into `out`; says what the connection does next.
fn http_answer(state: &State, req: &Request, out: &mut Vec<u8>) -> Then {
    if req.method != "POST" {
        if req.method == "DELETE" && state.stateful {
            if let Some(s) = req.session {
                state.live.borrow_mut().remove(s);
            }
            respond(out, StatusCode::OK, JSON, b"", &[]);
        } else {
            respond(out, StatusCode::METHOD_NOT_ALLOWED, JSON, b"{}", &[]);
        }
        return Then::Next;
    }
    if let Some(tool) = req.path.strip_prefix("/api/") {
        rest_answer(&mut state.tools.borrow_mut(), tool, req.body, out);
        return Then::Next;
    }
    if req.path != "/mcp" {
        respond(out, StatusCode::NOT_FOUND, JSON, b"{}", &[]);
        return Then::Next;
    }
    // The method is read here, once, only where sessions or a fault need it (the stateless floor
    // leaves the request to `answer`).
    let installed = fault::http_fault();
    let method = if state.stateful || installed.is_some() {
        serde_json::from_slice::<Message>(req.body).ok().and_then(|m| m.method)
    } else {
        None
    };
    let struck = installed.filter(|_| fault::struck(method == Some("tools/call")));
    let is_call = struck.is_some() && method == Some("tools/call");
    let mut new_session = None;
    if state.stateful {
        if method == Some("initialize") {
            let n = state.next.get();
            state.next.set(n + 1);
            let id = format!("null-{n}");
            state.live.borrow_mut().insert(id.clone());
            new_session = Some(id);
        } else if !req.session.is_some_and(|s| state.live.borrow().contains(s))
            || (is_call && struck == Some(HttpFault::DropSession))
        {
            respond(out, StatusCode::NOT_FOUND, JSON, b"{}", &[]);
            return Then::Next;
        }
    }
    if let Some(f) = struck.filter(|_| is_call) {
        if let Some(then) = faulty_answer(f, out) {
            return then;
        }
    }
    // `refuse`: this answer closes its connection, and the port closes.
    let refuse = struck == Some(HttpFault::Refuse);
    if refuse {
        state.refuse.notify_one();
    }
    let close = refuse.then_some(("connection", "close"));
    match answer(&mut state.tools.borrow_mut(), req.body) {
        Some(line) => {
            let mut line = line.into_bytes();
            line.pop(); // the stdio newline
            if is_call && struck == Some(HttpFault::Wrong) {
                fault::wrong_value(&mut line);
            }
            let session = new_session.as_deref().map(|s| ("mcp-session-id", s));
            let extra: Vec<_> = [session, close].into_iter().flatten().collect();
            respond(out, StatusCode::OK, JSON, &line, &extra);
        }
        // A notification: no answer, and no session opened by it.
        None => respond(out, StatusCode::ACCEPTED, JSON, b"", close.as_slice()),
    }
    if refuse {
        Then::Close
    } else {
        Then::Next
    }
}

/// `POST /api/<tool>`: the arguments object in, the value out.
fn rest_answer(tools: &mut Tools, tool: &str, body: &[u8], out: &mut Vec<u8>) {
    let (status, value) = match serde_json::from_slice::<Value>(body) {
        Err(e) => (StatusCode::BAD_REQUEST, json!({"error": e.to_string()})),
        Ok(args) => match tools.call(tool, &args) {
            Ok(v) => (StatusCode::OK, v),
            Err(e) => (StatusCode::UNPROCESSABLE_ENTITY, json!({ "error": e })),
        },
    };
    respond(out, status, JSON, value.to_string().as_bytes(), &[]);
}

/// What a struck fault answers to a tools/call instead of the answer, and what the connection
/// does then; `None` where the answer goes out as usual (`refuse`, `drop_session`, `wrong`:
/// handled around it).
fn faulty_answer(f: HttpFault, out: &mut Vec<u8>) -> Option<Then> {
    // A body of unknown length: chunked, its first chunk only.
    let first_chunk = |out: &mut Vec<u8>, ctype: &str, chunk: &[u8]| {
        head(out, StatusCode::OK, ctype, &[("transfer-encoding", "chunked")]);
        out.extend_from_slice(format!("\r\n{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    };
    match f {
        HttpFault::Refuse | HttpFault::DropSession | HttpFault::Wrong => None,
        HttpFault::Exit => {
            eprintln!("benchlab null server: fault exit: exiting mid-load");
            std::process::exit(3)
        }
        HttpFault::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            let body = json!({"error": format!("fault: status {code}")}).to_string();
            let retry: &[(&str, &str)] =
                if code == 429 || code == 503 { &[("retry-after", "1")] } else { &[] };
            respond(out, status, JSON, body.as_bytes(), retry);
            Some(Then::Next)
        }
        // Half an answer, then a TCP reset.
        HttpFault::Reset => {
            first_chunk(out, JSON, br#"{"jsonrpc":"2.0","id":"#);
            Some(Then::Reset)
        }
        HttpFault::SseStall => {
            first_chunk(out, SSE, b": stalled\n\n");
            Some(Then::Stall)
        }
        HttpFault::BadSse => {
            respond(
                out,
                StatusCode::OK,
                SSE,
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":,,}\n\n",
                &[],
            );
            Some(Then::Next)
        }
        HttpFault::BadJson => {
            respond(out, StatusCode::OK, JSON, br#"{"jsonrpc":"2.0","result":{"content":["#, &[]);
            Some(Then::Next)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(raw: &[u8]) -> (String, String, Option<String>, bool, Vec<u8>, usize) {
        match parse(raw) {
            Parsed::Request(r) => {
                (r.method.into(), r.path.into(), r.session.map(Into::into), r.close, r.body.to_vec(), r.len)
            }
            Parsed::More { expect_continue } => panic!("more wanted (expect_continue {expect_continue})"),
            Parsed::Refused(s, why) => panic!("refused {s}: {why}"),
        }
    }

    #[test]
    fn parses_pipelined_requests_their_bodies_sessions_and_closes() {
        let one =
            b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nMcp-Session-Id: null-3\r\n\r\n{}";
        let two = b"DELETE /mcp HTTP/1.1\r\nConnection: close\r\n\r\n";
        let both = [&one[..], &two[..]].concat();
        let (method, path, session, close, body, len) = request(&both);
        assert_eq!(
            (method.as_str(), path.as_str(), session.as_deref(), close),
            ("POST", "/mcp", Some("null-3"), false)
        );
        assert_eq!((body.as_slice(), len), (&b"{}"[..], one.len()));
        let (method, _, session, close, body, len) = request(&both[len..]);
        assert_eq!((method.as_str(), session, close, body.len(), len), ("DELETE", None, true, 0, two.len()));
        let (.., close, _, _) = request(b"POST /mcp HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
        assert!(close, "HTTP/1.0 without keep-alive closes");
        let (.., close, _, _) = request(b"POST /mcp HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        assert!(!close);
    }

    #[test]
    fn waits_for_whole_requests_and_refuses_what_it_does_not_read() {
        for part in
            [&b"POST /mcp HTTP/1.1\r\nContent-Le"[..], b"POST /mcp HTTP/1.1\r\nContent-Length: 3\r\n\r\n{}"]
        {
            assert!(matches!(parse(part), Parsed::More { expect_continue: false }));
        }
        let expect = b"POST /mcp HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
        assert!(matches!(parse(expect), Parsed::More { expect_continue: true }));
        let refused = |raw: &[u8]| match parse(raw) {
            Parsed::Refused(s, _) => s.as_u16(),
            _ => 0,
        };
        assert_eq!(refused(b"POST /mcp HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 411);
        assert_eq!(refused(b"POST /mcp HTTP/1.1\r\nContent-Length: x\r\n\r\n"), 400);
        assert_eq!(refused(b"POST /mcp HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n"), 413);
        assert_eq!(refused(b"\x01\x02 nonsense\r\n\r\n"), 400);
        let many = format!("POST /mcp HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(refused(many.as_bytes()), 431);
        assert_eq!(refused(&vec![b'a'; MAX_HEAD + 1]), 431);
    }

    #[test]
    fn writes_whole_responses_and_the_faults_first_chunks() {
        let mut out = Vec::new();
        respond(&mut out, StatusCode::OK, JSON, b"{\"a\":1}", &[("mcp-session-id", "null-0")]);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: null-0\r\ncontent-length: 7\r\n\r\n{\"a\":1}"
        );
        out.clear();
        assert!(faulty_answer(HttpFault::Reset, &mut out) == Some(Then::Reset));
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n16\r\n{\"jsonrpc\":\"2.0\",\"id\":\r\n"
        );
        out.clear();
        assert!(faulty_answer(HttpFault::Status(429), &mut out) == Some(Then::Next));
        assert!(out.starts_with(b"HTTP/1.1 429 Too Many Requests\r\n"));
        assert!(out.windows(15).any(|w| w == b"retry-after: 1\r"));
    }
}
