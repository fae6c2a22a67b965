//! The serving loop the lab's HTTP services share (`api`, `mock`): hyper's HTTP/1.1 with
//! keep-alive on 127.0.0.1, each connection a task of its own on one thread, so an answer that
//! waits (a mock's delay) holds only its own connection. What each request is answered is the
//! caller's.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};

/// Serves on 127.0.0.1:`port` (0: a free port) until killed or until accepting fails; `on_bound`
/// is told the address once the socket listens, before the first connection is accepted.
pub fn serve_http<F, Fut>(port: u16, on_bound: impl FnOnce(SocketAddr), answer: F) -> std::io::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + 'static,
{
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        on_bound(listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let answer = answer.clone();
            let service = hyper::service::service_fn(move |req| {
                let answered = answer(req);
                async move { Ok::<_, Infallible>(answered.await) }
            });
            tokio::task::spawn_local(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
