//! `benchlab null-server`: the built-in floor server, chosen from flags or the environment the
//! orchestrator sets. The server lives in `crate::nullserver`.

use super::exit::{Exit, OK};

#[derive(Debug, clap::Args)]
pub struct NullServerArgs {
    /// The tool suite to serve (default: $BENCHLAB_SUITE or weekly).
    #[arg(long)]
    suite: Option<String>,
    /// Serve streamable HTTP on 127.0.0.1 at this port (POST /mcp, POST /api/<tool>)
    /// instead of stdio (default: $BENCHLAB_PORT when $BENCHLAB_TRANSPORT is
    /// streamable-http).
    #[arg(long)]
    http: Option<u16>,
    /// With --http: keep sessions (Mcp-Session-Id) instead of answering statelessly.
    #[arg(long)]
    stateful: bool,
    /// A fault on purpose, for the lab's own tests (default: $BENCHLAB_NULL_FAULT):
    /// `leak:<bytes>` leaks that many bytes of resident memory (whole pages) at every tools/call;
    /// over HTTP, `refuse`, `reset`, `status:<code>`, `sse_stall`, `bad_sse`, `bad_json`,
    /// `drop_session`, `wrong` or `exit`, each striking after `@<calls>` tools/call (e.g. `reset@200`);
    /// `shop_wrong` (suite shop): get_cart and checkout answer total_cents one cent too high.
    #[arg(long)]
    fault: Option<String>,
}

pub(super) fn run(args: NullServerArgs) -> Result<i32, Exit> {
    let NullServerArgs { suite, http, stateful, fault } = args;
    let fault = fault
        .or_else(|| std::env::var("BENCHLAB_NULL_FAULT").ok())
        .filter(|f| !f.is_empty())
        .map(|f| crate::nullserver::fault::Fault::parse(&f))
        .transpose()
        .map_err(Exit::input)?;
    let name = suite.or_else(|| std::env::var("BENCHLAB_SUITE").ok()).unwrap_or_else(|| "weekly".into());
    let suite = crate::mcp::suite::Suite::from_name(&name)
        .ok_or_else(|| Exit::input(format!("unknown suite {name:?}")))?;
    let env = |k: &str| std::env::var(k).ok();
    let port = http.or_else(|| {
        (env("BENCHLAB_TRANSPORT").as_deref() == Some("streamable-http"))
            .then(|| env("BENCHLAB_PORT").and_then(|p| p.parse().ok()))
            .flatten()
    });
    if let Some(f) = fault {
        if f.is_http() && port.is_none() {
            return Err(Exit::input(format!("fault {f:?} is an HTTP fault: serve HTTP (--http <port>)")));
        }
        f.install();
    }
    match port {
        Some(port) => {
            let stateful = stateful || env("BENCHLAB_SESSION").as_deref() == Some("stateful");
            let workers = match env(crate::spec::ENV_SERVER_WORKERS) {
                None => 1,
                Some(w) => w.parse::<u32>().ok().filter(|n| (1..=64).contains(n)).ok_or_else(|| {
                    Exit::input(format!(
                        "${}: {w:?} is not a worker count from 1 to 64",
                        crate::spec::ENV_SERVER_WORKERS
                    ))
                })?,
            };
            crate::nullserver::serve_http_workers(suite, port, stateful, workers)
                .map_err(|e| Exit::environment(format!("null-server: {e}")))?
        }
        None => {
            crate::nullserver::serve(suite).map_err(|e| Exit::environment(format!("null-server: {e}")))?
        }
    }
    Ok(OK)
}
