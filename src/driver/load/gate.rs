//! The correctness gate over HTTP before a load: the handshake (retried while the app mounts its
//! routes), tools/list and every gate call over MCP, then the valued ones over the REST route.
//! Also how a call error becomes a cell's failure.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::Value;

use crate::driver::httpclient::{
    rest_body, CallError, Counts, ErrorKind, McpClient, RestClient, ServerHello,
};
use crate::driver::load::drive::runtime;
use crate::driver::load::worker::{Prepared, Shared};
use crate::driver::load::LoadPlan;
use crate::mcp::suite::{AnySuite, Expected};
use crate::mcp::{self};
use crate::spec::{Failure, FailureReason};

pub(super) fn failure_of(e: CallError, what: &str) -> Failure {
    let reason = match e.kind {
        ErrorKind::Timeout => FailureReason::Timeout,
        ErrorKind::ToolError => FailureReason::ToolError,
        ErrorKind::WrongResult => FailureReason::WrongResult,
        ErrorKind::Connect => FailureReason::Crash,
        ErrorKind::HttpStatus
        | ErrorKind::RateLimited
        | ErrorKind::ProtocolError
        | ErrorKind::SessionExpired => FailureReason::ProtocolError,
    };
    Failure::new(reason, format!("{what}: {}", e.detail))
}

/// The correctness gate over HTTP: tools/list and every gate call over MCP, then (for REST
/// cells) every valued gate call over the REST route.
pub(super) async fn gate(
    sh: &Shared,
    suite: &AnySuite,
    startup_deadline: Instant,
) -> Result<ServerHello, Failure> {
    // The port may be open before the app has mounted its routes: retry until the deadline.
    // As over stdio, the first handshake is bounded by the start-up limit, not the call limit,
    // and running out of it is a start-up timeout. What the gate's clients count is not part of
    // the load's figures.
    let mut counts = Counts::default();
    let (mut client, hello) = loop {
        let left = startup_deadline.saturating_duration_since(Instant::now()).max(sh.call_limit);
        match McpClient::open(&sh.target, left, &mut counts).await {
            Ok(x) => break x,
            Err(e)
                if Instant::now() < startup_deadline
                    && matches!(e.kind, ErrorKind::Connect | ErrorKind::HttpStatus) =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) if e.kind == ErrorKind::Timeout => {
                return Err(Failure::new(FailureReason::StartupTimeout, format!("handshake: {}", e.detail)))
            }
            Err(e) => return Err(failure_of(e, "handshake")),
        }
    };
    let listed = client
        .request("tools/list", "{}", sh.call_limit, &mut counts)
        .await
        .map_err(|e| failure_of(e, "tools/list"))?
        .map(|raw| serde_json::from_str(&raw).unwrap_or(Value::Null));
    crate::driver::workload::check_tool_list(suite, listed)?;
    for (tool, args, expected) in suite.gate() {
        let params = mcp::tools_call_params(&tool, &args).to_string();
        let out = client
            .request("tools/call", &params, sh.call_limit, &mut counts)
            .await
            .map_err(|e| failure_of(e, "gate"))?;
        match expected {
            Expected::Error => {
                if let Ok(raw) = out {
                    let v: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
                    if let Ok(val) = mcp::tool_value(&v) {
                        return Err(Failure::new(
                            FailureReason::WrongResult,
                            format!("gate: {tool} {args}: expected an error result, got the value {val}"),
                        ));
                    }
                }
            }
            expected => {
                let raw = out.map_err(|e| {
                    Failure::new(
                        FailureReason::ToolError,
                        format!("gate: {tool} {args}: JSON-RPC error {} {}", e.code, e.message),
                    )
                })?;
                let p = Prepared::new(&tool, params, Bytes::new(), args.clone(), Some(expected));
                p.check(&tool, &raw, true).map_err(|e| failure_of(e, "gate"))?;
            }
        }
    }
    client.close(&mut counts).await;
    if sh.rest {
        let mut rest = RestClient::open(&sh.target).await.map_err(|e| failure_of(e, "REST gate"))?;
        let style = sh.target.api_style.unwrap_or_default();
        for (tool, args, expected) in suite.gate() {
            // The REST routes are the built-in suites' (a plain value per tool); how a route
            // answers arguments it refuses is not part of the suites.
            if expected == Expected::Error {
                continue;
            }
            let body = rest_body(style, &args);
            let raw = crate::driver::httpclient::timed(sh.call_limit, rest.call(&tool, &body, &mut counts))
                .await
                .map_err(|e| failure_of(e, "REST gate"))?;
            let p = Prepared::new(&tool, String::new(), body, args.clone(), Some(expected));
            p.check(&tool, &raw, false).map_err(|e| failure_of(e, "REST gate"))?;
        }
    }
    Ok(hello)
}

/// Runs the correctness gate against a listening server (retrying the handshake until
/// `startup_deadline` while the app mounts its routes).
pub fn gate_server(
    plan: &LoadPlan,
    suite: &AnySuite,
    startup_deadline: Instant,
) -> Result<ServerHello, Failure> {
    let (rt, local) = runtime()?;
    local.block_on(&rt, gate(&plan.shared(Vec::new()), suite, startup_deadline))
}

/// Without a suite (`benchlab measure --url`): the handshake and tools/list; returns what the
/// server said and the tool to call, `plan.tool` or else the first one listed (which must be
/// listed). Every later answer is checked only for not being an error.
pub fn probe_server(plan: &LoadPlan, deadline: Instant) -> Result<(ServerHello, String), Failure> {
    let (rt, local) = runtime()?;
    local.block_on(&rt, async {
        let mut counts = Counts::default();
        let limit = deadline.saturating_duration_since(Instant::now()).max(plan.call_limit);
        let (mut client, hello) = McpClient::open(&plan.target, limit, &mut counts)
            .await
            .map_err(|e| failure_of(e, "handshake"))?;
        let listed = client
            .request("tools/list", "{}", plan.call_limit, &mut counts)
            .await
            .map_err(|e| failure_of(e, "tools/list"))?
            .map_err(|e| {
                Failure::new(
                    FailureReason::ProtocolError,
                    format!("tools/list failed: {} ({})", e.message, e.code),
                )
            })?;
        let names = mcp::tool_names(&serde_json::from_str(&listed).unwrap_or(Value::Null));
        client.close(&mut counts).await;
        if plan.tool.is_empty() {
            let first = names.first().cloned();
            return first
                .map(|t| (hello, t))
                .ok_or_else(|| Failure::new(FailureReason::ProtocolError, "the server lists no tool"));
        }
        if !names.contains(&plan.tool) {
            return Err(Failure::new(
                FailureReason::ToolError,
                format!("the server has no tool {:?} (it lists: {})", plan.tool, names.join(", ")),
            ));
        }
        Ok((hello, plan.tool.clone()))
    })
}
