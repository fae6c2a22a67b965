//! How rmcp 1.0–1.3 serves a suite's handler (every suite file's `mod serve`): over stdio, or over
//! streamable HTTP at `/mcp` on axum, as the lab's environment says. `$BENCHLAB_TRANSPORT` is
//! `stdio` (default) or `streamable-http` (rmcp has no legacy SSE server);
//! `$BENCHLAB_HOST:$BENCHLAB_PORT`; `$BENCHLAB_REPLY=json` for JSON replies and
//! `$BENCHLAB_SESSION=stateless` for stateless mode (1.x: `stateful_mode = false`; JSON
//! replies only apply when stateless); `$BENCHLAB_SERVER_WORKERS` tokio worker threads
//! (default 1), for either transport.

use rmcp::{
    ServerHandler, ServiceExt,
    model::{Implementation, ServerCapabilities},
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};

/// The initialize result's type, as 1.x names it (1.0 made it non-exhaustive: builders only).
pub use rmcp::model::ServerInfo as Info;

/// What the server says of itself at initialize: tools, and the suite's name.
pub fn info(name: &str) -> Info {
    Info::new(ServerCapabilities::builder().enable_tools().build())
        .with_server_info(Implementation::new(name, env!("CARGO_PKG_VERSION")))
}

/// The HTTP options of this generation: JSON replies and stateless mode as asked. The config
/// is a plain struct in 1.0–1.2 and non-exhaustive with builders from 1.3, so its public fields
/// are set on the default (which both allow); 1.0–1.3 have no Host allow-list.
fn http_config(s: &Settings) -> StreamableHttpServerConfig {
    let mut config = StreamableHttpServerConfig::default();
    config.stateful_mode = !s.stateless;
    config.json_response = s.json_reply;
    config
}

pub struct Settings {
    http: bool,
    host: String,
    port: u16,
    json_reply: bool,
    stateless: bool,
    workers: usize,
}

impl Settings {
    fn from_env() -> Result<Self, String> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let http = match env("BENCHLAB_TRANSPORT").as_deref() {
            None | Some("stdio") => false,
            Some("streamable-http") => true,
            Some(t) => return Err(format!("BENCHLAB_TRANSPORT={t:?}: rmcp serves stdio and streamable-http")),
        };
        let port = env("BENCHLAB_PORT").map_or(Ok(8000), |p| p.parse().map_err(|_| format!("BENCHLAB_PORT={p:?}")))?;
        let workers = env("BENCHLAB_SERVER_WORKERS").map_or(Ok(1), |w| {
            w.parse::<usize>().ok().filter(|&n| n >= 1).ok_or(format!("BENCHLAB_SERVER_WORKERS={w:?}"))
        })?;
        Ok(Settings {
            http,
            host: env("BENCHLAB_HOST").unwrap_or_else(|| "127.0.0.1".into()),
            port,
            json_reply: env("BENCHLAB_REPLY").as_deref() == Some("json"),
            stateless: env("BENCHLAB_SESSION").as_deref() == Some("stateless"),
            workers,
        })
    }
}

async fn serve<S>(make: fn() -> S, rest: Option<axum::Router>, s: &Settings) -> Result<(), Box<dyn std::error::Error>>
where
    S: ServerHandler + Send + Sync + 'static,
{
    if !s.http {
        make().serve(rmcp::transport::stdio()).await?.waiting().await?;
        return Ok(());
    }
    let mcp = StreamableHttpService::new(move || Ok(make()), LocalSessionManager::default().into(), http_config(s));
    let app = axum::Router::new().nest_service("/mcp", mcp).merge(rest.unwrap_or_default());
    // TCP_NODELAY on every accepted connection, as Node's http server and Python's asyncio (under
    // uvicorn) set it by default and hyper does not: without it an SSE reply, written as its
    // headers and then its event, waits for the client's delayed ACK (about 44 ms a call here).
    use axum::serve::ListenerExt;
    let listener = tokio::net::TcpListener::bind((s.host.as_str(), s.port)).await?.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await?;
    Ok(())
}

/// Runs the suite's server until its client leaves (stdio) or it is stopped (HTTP).
pub fn main<S: ServerHandler + Send + Sync + 'static>(make: fn() -> S, rest: Option<axum::Router>) {
    let settings = Settings::from_env().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = runtime.block_on(serve(make, rest, &settings)) {
        eprintln!("rmcp server: {e}");
        std::process::exit(1);
    }
}
