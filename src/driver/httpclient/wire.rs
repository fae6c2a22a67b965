//! The driver's own HTTP/1.1 connection for MCP's streamable transport, the hot path of every
//! HTTP load: a request is one buffer written with one `write`, a response is read into a reused
//! buffer and parsed as it arrives (httparse for the head; `Content-Length`, chunked and
//! close-delimited bodies), on the task that awaits it — no request or response objects, no
//! allocation per request once warm, no read that is known to find nothing. It speaks HTTP, not
//! MCP: what is sent and what an answer means are the clients' business.

use std::io;
use std::net::SocketAddr;

use tokio::io::Interest;
use tokio::net::TcpStream;

use super::{err, CallError, Counts, ErrorKind};

/// The most a response head may take before it is refused.
const MAX_HEAD: usize = 64 * 1024;
/// The most a response body may take before it is refused.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// What a response's `Content-Type` says, as far as the clients care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyKind {
    Json,
    Sse,
    /// Anything else, as the server wrote it (empty: no header).
    Other(String),
}

/// The head of the last response: its status, its content type, and the `Mcp-Session-Id` when
/// the request asked for it.
#[derive(Debug, Clone)]
pub struct Head {
    pub status: u16,
    pub kind: BodyKind,
    pub session: Option<String>,
}

/// Why an exchange failed, before it is a [`CallError`].
enum Fault {
    /// The socket failed; `early`: before any byte of the response came.
    Io(io::Error, bool),
    /// The server closed the connection; `early`: before any byte of the response came.
    Closed(bool),
    /// Bytes that are not an HTTP/1.1 response.
    Protocol(String),
}

impl Fault {
    fn early(&self) -> bool {
        matches!(self, Fault::Io(_, true) | Fault::Closed(true))
    }

    fn into_error(self, what: &str) -> CallError {
        match self {
            Fault::Io(e, _) => err(ErrorKind::Connect, format!("{what}: {e}")),
            Fault::Closed(true) => {
                err(ErrorKind::Connect, format!("{what}: the server closed the connection"))
            }
            Fault::Closed(false) => {
                err(ErrorKind::Connect, format!("{what}: the server closed the connection mid-response"))
            }
            Fault::Protocol(m) => err(ErrorKind::ProtocolError, format!("{what}: {m}")),
        }
    }
}

/// One HTTP/1.1 connection to the server.
pub struct Wire {
    stream: TcpStream,
    addr: SocketAddr,
    /// Bytes read: `buf[pos..len]` are not consumed yet.
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    /// The last response's body, decoded.
    body: Vec<u8>,
    /// Requests this connection has carried (a kept-alive connection that fails before any
    /// answer is reopened once, as HTTP clients do).
    served: u64,
    /// The server ends the connection after the last response (`Connection: close`, HTTP/1.0,
    /// or a body it delimited by closing): the next request opens a new one, silently.
    closing: bool,
    /// An exchange began and has not ended: if it was abandoned (its future dropped at a time
    /// limit), its answer may still come, so the next request goes on a new connection.
    in_flight: bool,
}

impl Wire {
    pub async fn open(addr: SocketAddr) -> Result<Wire, CallError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| err(ErrorKind::Connect, format!("connect {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        Ok(Wire {
            stream,
            addr,
            buf: vec![0; 16 * 1024],
            pos: 0,
            len: 0,
            body: Vec::with_capacity(4096),
            served: 0,
            closing: false,
            in_flight: false,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The last response's body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Sends one rendered request and reads its whole response (the body stays in [`Wire::body`]).
    /// A kept-alive connection the server closed or reset before answering is reopened and the
    /// request sent once more (`counts.reconnects`). `what` names the request in errors.
    pub async fn exchange(
        &mut self,
        request: &[u8],
        want_session: bool,
        counts: &mut Counts,
        what: &str,
    ) -> Result<Head, CallError> {
        if self.closing || self.in_flight {
            *self = Wire::open(self.addr).await?;
        }
        self.in_flight = true;
        let result = match self.exchange_once(request, want_session).await {
            Err(f) if f.early() && self.served > 0 => {
                counts.reconnects += 1;
                *self = Wire::open(self.addr).await?;
                self.exchange_once(request, want_session).await
            }
            r => r,
        };
        self.served += 1;
        self.in_flight = false;
        result.map_err(|f| {
            // Whatever the connection holds now is unknown: the next request starts afresh.
            self.closing = true;
            f.into_error(what)
        })
    }

    async fn exchange_once(&mut self, request: &[u8], want_session: bool) -> Result<Head, Fault> {
        // Nothing is pipelined, so bytes left from before are not an answer to this request.
        self.pos = 0;
        self.len = 0;
        self.body.clear();
        self.write_all(request).await?;
        loop {
            let (head, framing) = self.read_head(want_session).await?;
            self.body.clear();
            match framing {
                Framing::Interim => continue,
                Framing::None => {}
                Framing::Length(n) => self.read_length(n).await?,
                Framing::Chunked => self.read_chunked().await?,
                Framing::UntilClose => {
                    self.read_until_close().await?;
                    self.closing = true;
                }
            }
            if self.pos == self.len {
                self.pos = 0;
                self.len = 0;
                // The whole answer is in and nothing else is due until the next request: forget
                // the socket's readiness, so that waiting for the next answer goes to epoll
                // instead of first making a read that finds nothing. (A close keeps its
                // readiness: tokio never clears the closed states.)
                let _ =
                    self.stream.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
            }
            return Ok(head);
        }
    }

    async fn write_all(&mut self, mut data: &[u8]) -> Result<(), Fault> {
        while !data.is_empty() {
            match self.stream.try_write(data) {
                Ok(n) => data = &data[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stream.writable().await.map_err(|e| Fault::Io(e, true))?
                }
                Err(e) => return Err(Fault::Io(e, true)),
            }
        }
        Ok(())
    }

    /// Reads more bytes into the buffer (growing it up to `limit` when it is full).
    async fn fill(&mut self, limit: usize) -> Result<(), Fault> {
        let early = self.served_bytes() == 0;
        if self.len == self.buf.len() {
            if self.pos > 0 {
                self.buf.copy_within(self.pos..self.len, 0);
                self.len -= self.pos;
                self.pos = 0;
            } else if self.buf.len() < limit {
                let grown = (self.buf.len() * 2).min(limit);
                self.buf.resize(grown, 0);
            } else {
                return Err(Fault::Protocol(format!("a response larger than {limit} bytes")));
            }
        }
        loop {
            match self.stream.try_read(&mut self.buf[self.len..]) {
                Ok(0) => return Err(Fault::Closed(early)),
                Ok(n) => {
                    self.len += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stream.readable().await.map_err(|e| Fault::Io(e, early))?
                }
                Err(e) => return Err(Fault::Io(e, early)),
            }
        }
    }

    /// Whether any byte of the current response has come (for telling a dead kept-alive
    /// connection from a server that failed mid-answer).
    fn served_bytes(&self) -> usize {
        self.len + self.body.len()
    }

    async fn read_head(&mut self, want_session: bool) -> Result<(Head, Framing), Fault> {
        loop {
            if self.pos < self.len {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut resp = httparse::Response::new(&mut headers);
                match resp.parse(&self.buf[self.pos..self.len]) {
                    Ok(httparse::Status::Complete(n)) => {
                        let parsed = parse_head(&resp, want_session);
                        self.pos += n;
                        let (head, framing, close) = parsed?;
                        if close {
                            self.closing = true;
                        }
                        return Ok((head, framing));
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(e) => {
                        return Err(Fault::Protocol(format!(
                            "not an HTTP/1.1 response ({e}): {}",
                            super::preview(&self.buf[self.pos..self.len])
                        )))
                    }
                }
            }
            self.fill(MAX_HEAD).await?;
        }
    }

    async fn read_length(&mut self, mut remaining: usize) -> Result<(), Fault> {
        if remaining > MAX_BODY {
            return Err(Fault::Protocol(format!("a body of {remaining} bytes")));
        }
        while remaining > 0 {
            if self.pos == self.len {
                self.fill(MAX_HEAD).await?;
            }
            let take = remaining.min(self.len - self.pos);
            self.body.extend_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
            remaining -= take;
        }
        Ok(())
    }

    /// The next CRLF-ended line's length (without its CRLF), reading until it is whole.
    async fn line(&mut self) -> Result<usize, Fault> {
        loop {
            if let Some(i) = self.buf[self.pos..self.len].windows(2).position(|w| w == b"\r\n") {
                return Ok(i);
            }
            if self.len - self.pos > 4096 {
                return Err(Fault::Protocol("a chunk-size line longer than 4 KiB".into()));
            }
            self.fill(MAX_HEAD).await?;
        }
    }

    async fn read_chunked(&mut self) -> Result<(), Fault> {
        loop {
            let n = self.line().await?;
            let size = chunk_size(&self.buf[self.pos..self.pos + n])?;
            self.pos += n + 2;
            if size == 0 {
                // Trailers, if any, up to the empty line.
                loop {
                    let n = self.line().await?;
                    self.pos += n + 2;
                    if n == 0 {
                        return Ok(());
                    }
                }
            }
            if self.body.len() + size > MAX_BODY {
                return Err(Fault::Protocol(format!("a body larger than {MAX_BODY} bytes")));
            }
            self.read_length(size).await?;
            let n = self.line().await?;
            if n != 0 {
                return Err(Fault::Protocol("a chunk longer than its size".into()));
            }
            self.pos += 2;
        }
    }

    async fn read_until_close(&mut self) -> Result<(), Fault> {
        loop {
            self.body.extend_from_slice(&self.buf[self.pos..self.len]);
            self.pos = self.len;
            if self.body.len() > MAX_BODY {
                return Err(Fault::Protocol(format!("a body larger than {MAX_BODY} bytes")));
            }
            match self.fill(MAX_HEAD).await {
                Ok(()) => {}
                Err(Fault::Closed(_)) => return Ok(()),
                Err(f) => return Err(f),
            }
        }
    }
}

/// How a response's body ends.
enum Framing {
    /// A 1xx: another head follows.
    Interim,
    None,
    Length(usize),
    Chunked,
    UntilClose,
}

/// The head's status, content type, session, framing and whether the server closes after it.
fn parse_head(resp: &httparse::Response, want_session: bool) -> Result<(Head, Framing, bool), Fault> {
    let status = resp.code.unwrap_or(0);
    let mut close = resp.version == Some(0);
    let (mut length, mut chunked) = (None, false);
    let mut kind = BodyKind::Other(String::new());
    let mut session = None;
    for h in resp.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<usize>().ok());
            length = Some(n.ok_or_else(|| Fault::Protocol("a Content-Length that is not a number".into()))?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = h.value.split(|b| *b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"content-type") {
            kind = content_kind(h.value);
        } else if name.eq_ignore_ascii_case(b"connection") {
            close = crate::http1::connection_closes(h.value, resp.version == Some(0), close);
        } else if want_session && name.eq_ignore_ascii_case(b"mcp-session-id") {
            session = std::str::from_utf8(h.value).ok().map(str::to_string);
        }
    }
    let framing = match status {
        100..=199 => Framing::Interim,
        204 | 304 => Framing::None,
        _ if chunked => Framing::Chunked,
        _ => match length {
            Some(0) => Framing::None,
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        },
    };
    Ok((Head { status, kind, session }, framing, close))
}

/// Classifies a `Content-Type` value by its media type (parameters and case aside).
fn content_kind(value: &[u8]) -> BodyKind {
    let media = value.split(|b| *b == b';').next().unwrap_or_default().trim_ascii();
    if media.eq_ignore_ascii_case(b"application/json") {
        BodyKind::Json
    } else if media.eq_ignore_ascii_case(b"text/event-stream") {
        BodyKind::Sse
    } else {
        BodyKind::Other(String::from_utf8_lossy(value).into_owned())
    }
}

/// A chunk-size line's size (extensions after `;` ignored).
fn chunk_size(line: &[u8]) -> Result<usize, Fault> {
    let hex = line.split(|b| *b == b';').next().unwrap_or_default().trim_ascii();
    std::str::from_utf8(hex)
        .ok()
        .and_then(|h| usize::from_str_radix(h, 16).ok())
        .ok_or_else(|| Fault::Protocol(format!("a bad chunk-size line {:?}", String::from_utf8_lossy(line))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn content_types_and_chunk_sizes() {
        assert_eq!(content_kind(b"application/json; charset=utf-8"), BodyKind::Json);
        assert_eq!(content_kind(b"Text/Event-Stream"), BodyKind::Sse);
        assert_eq!(content_kind(b"text/html"), BodyKind::Other("text/html".into()));
        assert_eq!(chunk_size(b"1a;ext=1").ok(), Some(26));
        assert!(chunk_size(b"zz").is_err());
    }

    /// A server that answers each request with the next canned response, cut into the given
    /// pieces (each written on its own), then does what `end` says.
    async fn serve(answers: Vec<Vec<&'static [u8]>>, close_after: bool) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            for pieces in answers {
                let _ = s.read(&mut buf).await.unwrap();
                for p in pieces {
                    s.write_all(p).await.unwrap();
                    s.flush().await.unwrap();
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
            }
            if close_after {
                drop(s);
            } else {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        });
        port
    }

    const REQ: &[u8] = b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";

    #[tokio::test]
    async fn reads_length_chunked_and_split_responses_on_one_connection() {
        let port = serve(
            vec![
                vec![b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello"],
                vec![b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nMcp-Session-Id: s1\r\n\r\n5\r\nev", b"ent\r\n3;x\r\n: x\r\n0\r\n\r\n"],
                vec![b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\n", b"Content-Length: 0\r\n\r\n"],
                vec![b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\ngone"],
            ],
            true,
        )
        .await;
        let mut w = Wire::open(([127, 0, 0, 1], port).into()).await.unwrap();
        let mut c = Counts::default();
        let h = w.exchange(REQ, false, &mut c, "t").await.unwrap();
        assert_eq!((h.status, &h.kind, w.body()), (200, &BodyKind::Json, &b"hello"[..]));
        let h = w.exchange(REQ, true, &mut c, "t").await.unwrap();
        assert_eq!((h.status, &h.kind, w.body()), (200, &BodyKind::Sse, &b"event: x"[..]));
        assert_eq!(h.session.as_deref(), Some("s1"));
        let h = w.exchange(REQ, false, &mut c, "t").await.unwrap();
        assert_eq!((h.status, w.body()), (202, &b""[..]));
        let h = w.exchange(REQ, false, &mut c, "t").await.unwrap();
        assert_eq!((h.status, w.body()), (404, &b"gone"[..]));
        assert!(w.closing, "a close-delimited body ends the connection");
        assert_eq!(c, Counts::default());
    }

    #[tokio::test]
    async fn a_kept_alive_connection_closed_before_the_answer_is_reopened_once_and_counted() {
        // The first connection answers once and closes; the second answers again.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let ok: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            let mut buf = vec![0u8; 4096];
            let (mut s, _) = listener.accept().await.unwrap();
            let _ = s.read(&mut buf).await.unwrap();
            s.write_all(ok).await.unwrap();
            let _ = s.read(&mut buf).await; // the second request, left unanswered
            drop(s);
            let (mut s, _) = listener.accept().await.unwrap();
            let _ = s.read(&mut buf).await.unwrap();
            s.write_all(ok).await.unwrap();
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        });
        let mut w = Wire::open(([127, 0, 0, 1], port).into()).await.unwrap();
        let mut c = Counts::default();
        assert_eq!(w.exchange(REQ, false, &mut c, "t").await.unwrap().status, 200);
        assert_eq!(w.exchange(REQ, false, &mut c, "t").await.unwrap().status, 200);
        assert_eq!(c.reconnects, 1);
    }

    #[tokio::test]
    async fn a_response_cut_mid_body_is_a_connect_error_not_a_retry() {
        let port = serve(vec![vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhal"]], true).await;
        let mut w = Wire::open(([127, 0, 0, 1], port).into()).await.unwrap();
        let mut c = Counts::default();
        let e = w.exchange(REQ, false, &mut c, "POST /mcp").await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Connect);
        assert!(e.detail.contains("mid-response"), "{}", e.detail);
        assert_eq!(c.reconnects, 0);
        let port = serve(vec![vec![b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n"]], true).await;
        let mut w = Wire::open(([127, 0, 0, 1], port).into()).await.unwrap();
        assert_eq!(w.exchange(REQ, false, &mut c, "t").await.unwrap_err().kind, ErrorKind::ProtocolError);
    }
}
