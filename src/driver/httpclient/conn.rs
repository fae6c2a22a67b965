//! One HTTP/1.1 connection to the server on the loopback, its hyper state machine polled inline
//! by whoever awaits on it, reopened once when the server closed it between two requests. What is
//! sent on it (MCP, REST) is the clients' business.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;

use super::{err, CallError, Counts, ErrorKind};

type Http1Connection = hyper::client::conn::http1::Connection<TokioIo<tokio::net::TcpStream>, Full<Bytes>>;

/// One HTTP/1.1 connection to the server on the loopback. Its hyper connection state machine is
/// polled inline by whoever awaits a request or a body on it ([`Conn::drive`]), so a request
/// costs no hand-off to another task; only a connection that must make progress on its own
/// (a legacy SSE stream read elsewhere) gets a task of its own.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    /// None once the connection ended, or when a task of its own drives it.
    conn: Option<std::pin::Pin<Box<Http1Connection>>>,
    host: HeaderValue,
    addr: std::net::SocketAddr,
    /// Requests this connection has carried; a kept-alive connection the server closed
    /// between two requests is reopened once, as HTTP clients do.
    served: u64,
}

/// Awaits `f` while polling the connection `conn` drives (both in this task).
async fn drive<F: std::future::Future>(
    conn: &mut Option<std::pin::Pin<Box<Http1Connection>>>,
    f: F,
) -> F::Output {
    use std::future::Future;
    use std::task::Poll;
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = f.as_mut().poll(cx) {
            return Poll::Ready(v);
        }
        if let Some(c) = conn.as_mut() {
            if c.as_mut().poll(cx).is_ready() {
                // The connection ended; whatever waited on it learns so now.
                *conn = None;
                return f.as_mut().poll(cx);
            }
        }
        Poll::Pending
    })
    .await
}

impl Conn {
    pub async fn open(addr: std::net::SocketAddr) -> Result<Conn, CallError> {
        Conn::open_with(addr, false).await
    }

    /// A connection driven by a task of its own (for a response body read outside `drive`).
    pub async fn open_spawned(addr: std::net::SocketAddr) -> Result<Conn, CallError> {
        Conn::open_with(addr, true).await
    }

    async fn open_with(addr: std::net::SocketAddr, spawned: bool) -> Result<Conn, CallError> {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| err(ErrorKind::Connect, format!("connect {addr}: {e}")))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| err(ErrorKind::Connect, format!("HTTP handshake: {}", chain(&e))))?;
        let conn = if spawned {
            tokio::task::spawn_local(async move {
                let _ = conn.await;
            });
            None
        } else {
            Some(Box::pin(conn))
        };
        let host = HeaderValue::from_str(&addr.to_string()).expect("a valid header value");
        Ok(Conn { sender, conn, host, addr, served: 0 })
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Reads a whole response body that arrived on this connection.
    pub async fn read_body(&mut self, resp: Response<Incoming>) -> Result<Bytes, CallError> {
        drive(&mut self.conn, resp.into_body().collect())
            .await
            .map(|c| c.to_bytes())
            .map_err(|e| err(ErrorKind::Connect, format!("reading the body: {}", chain(&e))))
    }

    /// Sends a request; returns the response head with its body still streaming.
    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
        counts: &mut Counts,
    ) -> Result<Response<Incoming>, CallError> {
        let build = |host: &HeaderValue| {
            let mut b = Request::builder().method(method.clone()).uri(path).header("host", host.clone());
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            b.body(Full::new(body.clone()))
        };
        let req = build(&self.host).map_err(|e| err(ErrorKind::ProtocolError, format!("request: {e}")))?;
        self.dispatch(req, |h| build(h).expect("built once already"), counts).await
    }

    async fn send_once(&mut self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>, hyper::Error> {
        drive(&mut self.conn, self.sender.ready()).await?;
        let sent = self.sender.send_request(req);
        drive(&mut self.conn, sent).await
    }

    /// Sends on this connection; when a kept-alive connection fails before any response, reopens
    /// it and sends once more (counted in `counts.reconnects`).
    async fn dispatch(
        &mut self,
        req: Request<Full<Bytes>>,
        again: impl Fn(&HeaderValue) -> Request<Full<Bytes>>,
        counts: &mut Counts,
    ) -> Result<Response<Incoming>, CallError> {
        let result = match self.send_once(req).await {
            // No response head came: the server closed or reset the kept-alive connection (an
            // error in its previous response's handler does that, e.g. fastmcp 0.4.1's SSE
            // POST route). Reopen and send once more, as HTTP clients do.
            Err(_) if self.served > 0 => {
                counts.reconnects += 1;
                let spawned = self.conn.is_none() && !self.sender.is_closed();
                *self = Conn::open_with(self.addr, spawned).await?;
                let req = again(&self.host);
                self.send_once(req).await
            }
            r => r,
        };
        self.served += 1;
        // The URI for the message is rebuilt on failure only: nothing extra on the hot path.
        result.map_err(|e| err(ErrorKind::Connect, format!("{}: {}", again(&self.host).uri(), chain(&e))))
    }
}

/// Reads a whole body whose connection a task of its own drives.
pub async fn read_body(resp: Response<Incoming>) -> Result<Bytes, CallError> {
    resp.into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| err(ErrorKind::Connect, format!("reading the body: {}", chain(&e))))
}

/// An error with its causes, `: `-joined (hyper's own text, "connection error", hides the
/// reset or refusal under it).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let t = s.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        source = s.source();
    }
    text
}
