//! `benchlab measure --url`'s measuring: a load (closed loop of virtual users, or an open loop at
//! a fixed rate) on an MCP server that is already running and listening over HTTP, driven from
//! this process pinned to the driver's CPUs, with the lab's HTTP driver, into a `UrlResult`. It
//! starts nothing and prints nothing; the server's placement is the user's.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{MeasureArgs, MeasureError, MeasureErrorKind, MeasureEvent};
use crate::driver::load::{drive, gate_server, no_success_failure, probe_server, LoadPlan};
use crate::mcp::suite::{AnySuite, Suite};
use crate::mcp::transport::{HttpTarget, Transport};
use crate::spec::{Lifecycle, LoadMetrics, Warmup, Workload};

/// What `--json` prints for `--url`.
#[derive(Debug, Clone, Serialize)]
pub struct UrlResult {
    pub url: String,
    pub transport: String,
    /// The suite whose gate was passed, if any (none: any answer that is not an error counted).
    pub suite: Option<String>,
    /// What identifies the suite's content (`SuiteData::sha256`: its calls, checks, seed and the
    /// sha256 of each file it read); absent without a suite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suite_sha256: Option<String>,
    pub tool: String,
    /// The call's arguments when no suite gave them.
    pub args: Option<serde_json::Value>,
    pub protocol_version: String,
    /// The server's `serverInfo`: its claim, bounded as a record bounds it.
    pub server_info: Option<serde_json::Value>,
    /// Its size in bytes when it was cut to its name and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info_truncated: Option<u64>,
    /// The CPUs this client ran on.
    pub driver_cpus: String,
    /// Its threads: one per CPU of `driver_cpus`, no more than the connections.
    pub driver_threads: u32,
    pub load: LoadMetrics,
}

/// Reads `http://HOST[:PORT][/PATH]`: HOST an IP address or `localhost`.
pub fn parse_url(url: &str, transport: Transport) -> Result<HttpTarget, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        if url.starts_with("https://") {
            "https is not spoken here: the driver measures plain HTTP/1.1 (point it at the server's own port, not a TLS proxy)".to_string()
        } else {
            format!("{url:?} is not an http:// URL (e.g. http://127.0.0.1:8000/mcp)")
        }
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
            (h, p.parse::<u16>().map_err(|_| format!("{p:?} is not a port number"))?)
        }
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = match host {
        "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
        h => h.parse().map_err(|_| {
            format!("{h:?} is not an IP address: name the server by its address (or localhost), so that the target is exactly the one you give")
        })?,
    };
    if port == 0 {
        return Err("port 0 is not a server's port".into());
    }
    Ok(HttpTarget {
        transport,
        port,
        path: path.to_string(),
        reply: None,
        session: None,
        api_route: None,
        api_style: None,
        // The loopback's usual address is the default; any other is kept.
        host: (ip != std::net::IpAddr::from(std::net::Ipv4Addr::LOCALHOST)).then_some(ip),
    })
}

fn transport(name: Option<&str>) -> Result<Transport, MeasureError> {
    match name.unwrap_or("streamable-http") {
        "streamable-http" => Ok(Transport::StreamableHttp),
        "sse" => Ok(Transport::Sse),
        other => Err(MeasureError::input(format!(
            "--transport {other:?}: use streamable-http (the default) or sse (the legacy HTTP+SSE transport)"
        ))),
    }
}

/// The load `args` asks for: an open loop with --rate, else a closed loop.
fn workload(args: &MeasureArgs, tool: &str) -> Result<Workload, MeasureError> {
    let duration_ms = args.duration.map_or(10_000, |d| d.ms);
    if duration_ms == 0 {
        return Err(MeasureError::input("--duration must be more than 0 seconds"));
    }
    let warmup_ms = args.warmup_secs.map_or(2_000, |d| d.ms);
    match args.rate {
        Some(0) => Err(MeasureError::input("--rate must be at least 1 call per second")),
        Some(rate) => Ok(Workload::OpenLoop {
            tool: tool.to_string(),
            rate,
            connections: args.workers.unwrap_or(100).max(1),
            warmup_ms: Warmup::Fixed(warmup_ms),
            duration_ms,
            idle_after_ms: 0,
        }),
        None => Ok(Workload::Concurrency {
            tool: tool.to_string(),
            workers: args.workers.unwrap_or(10).max(1),
            warmup_ms: Warmup::Fixed(warmup_ms),
            duration_ms,
            lifecycle: Lifecycle::Session,
            idle_after_ms: 0,
            mix: Vec::new(),
            session_calls: 0,
            stages: Vec::new(),
            start_vus: 0,
            think: None,
            flow: Vec::new(),
            session: crate::spec::SessionScope::PerIteration,
            warmup_excludes: crate::spec::WarmupExcludes::Everything,
        }),
    }
}

/// Pins this thread (where the driver's runtime runs) to `cpus`.
fn pin(cpus: &[u32]) -> Result<(), MeasureError> {
    let set = crate::placement::cpu_mask(cpus).map_err(MeasureError::input)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(|e| MeasureError::environment(format!("pin the client to CPUs {cpus:?}: {e}")))
}

/// Measures the server at `args.url`.
pub fn measure_url(
    args: &MeasureArgs,
    url: &str,
    on_event: &mut (dyn FnMut(MeasureEvent) + Send),
) -> Result<UrlResult, MeasureError> {
    let transport = transport(args.transport.as_deref())?;
    let target = parse_url(url, transport).map_err(|e| MeasureError::input(format!("--url: {e}")))?;
    let allowed = crate::placement::available_cpus();
    let driver = match &args.driver_cpus {
        Some(d) => crate::placement::parse_cpu_list(d)
            .map_err(|e| MeasureError::input(format!("--driver-cpus: {e}")))?,
        None => allowed.first().map(|c| vec![*c]).unwrap_or_default(),
    };
    if let Some(c) = driver.iter().find(|c| !allowed.contains(c)) {
        return Err(MeasureError::input(format!(
            "CPU {c} is not one this process may use ({})",
            crate::placement::format_cpu_list(&allowed)
        )));
    }
    pin(&driver)?;
    let (suite, ungated) = match &args.suite {
        Some(name) => {
            if args.args.is_some() {
                return Err(MeasureError::input(
                    "--args cannot go with --suite: the suite's calls bring their own arguments",
                ));
            }
            (Some(any_suite(name)?), None)
        }
        None => (None, Some(super::call_args(args)?)),
    };
    let tool = match (&suite, &args.tool) {
        (Some(s), None) => s.tools()[0].to_string(),
        (Some(s), Some(t)) if s.call(t, 0).is_none() => {
            return Err(MeasureError::input(format!(
                "suite {} has no tool {t:?} (it has: {})",
                s.name(),
                s.tools().join(", ")
            )))
        }
        (_, t) => t.clone().unwrap_or_default(),
    };
    let limit = args.call_timeout.duration().max(Duration::from_millis(1));
    let mut plan =
        LoadPlan::new(&workload(args, &tool)?, target, limit).map_err(|f| MeasureError::input(f.detail))?;
    plan.ungated = ungated.clone();
    plan.driver_cpus = crate::placement::threads_on(driver.clone());
    let failed = |what: &str, f: crate::spec::Failure| MeasureError::failed(format!("{what}: {f}"));
    on_event(MeasureEvent::Workload("gate".into()));
    // The server is already up: no retrying the handshake while it starts.
    let deadline = Instant::now();
    let hello = match &suite {
        Some(s) => gate_server(&plan, s, deadline).map_err(|f| failed("the correctness gate failed", f))?,
        None => {
            let (hello, tool) = probe_server(&plan, deadline).map_err(|f| failed(url, f))?;
            plan.tool = tool;
            hello
        }
    };
    on_event(MeasureEvent::Workload("load".into()));
    let mut progress = |phase: &str, done: u64, total: u64| {
        on_event(MeasureEvent::Progress { phase: phase.to_string(), done, total })
    };
    // Ungated, the suite is not used: the plan's one call and any answer that is not an error.
    let suite_name = suite.as_ref().map(|s| s.name().to_string());
    let suite_sha256 = suite.as_ref().and_then(AnySuite::sha256);
    let m =
        drive(&plan, &suite.unwrap_or(AnySuite::Builtin(Suite::Weekly)), &mut progress, &mut |_, _, _| {})
            .map_err(|f| failed("the load failed", f))?;
    if let Some(f) = no_success_failure(&m) {
        let example = m.error_examples.first().map(|e| format!("\nfor example: {e}")).unwrap_or_default();
        let hint = match (&ungated, m.errors.contains_key("tool_error")) {
            (Some(a), true) => {
                format!("\n(the tool was called with {a}; give it the arguments it needs with --args)")
            }
            _ => String::new(),
        };
        return Err(MeasureError::new(
            MeasureErrorKind::Failed,
            format!("the load failed: {f}{example}{hint}"),
        ));
    }
    let info = crate::record::claimed::bound_server_info(hello.server_info);
    Ok(UrlResult {
        url: url.to_string(),
        transport: transport.as_str().to_string(),
        suite: suite_name,
        suite_sha256,
        tool: plan.tool.clone(),
        args: ungated,
        protocol_version: hello.protocol_version,
        server_info: info.0,
        server_info_truncated: info.1,
        driver_cpus: crate::placement::format_cpu_list(&driver),
        driver_threads: m.driver_threads.unwrap_or(1),
        load: m,
    })
}

/// `--suite`: a built-in suite's name, or a suite file (a path: it has a `/` or ends in `.toml`)
/// with the tools, arguments and checks of a suite written as data.
fn any_suite(name: &str) -> Result<AnySuite, MeasureError> {
    if name.contains('/') || name.ends_with(".toml") {
        let path = std::path::Path::new(name);
        let text = std::fs::read_to_string(path)
            .map_err(|e| MeasureError::input(format!("cannot read the suite file {name}: {e}")))?;
        let data = crate::mcp::data::parse_file(path, &text).map_err(MeasureError::input)?;
        return Ok(AnySuite::Data(std::sync::Arc::new(data)));
    }
    Suite::from_name(name).map(AnySuite::Builtin).ok_or_else(|| {
        MeasureError::input(format!(
            "unknown suite {name:?}: use weekly, pulse or bench, or a suite file (path/to/suite.toml)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_an_address_a_port_and_a_path() {
        let t = parse_url("http://127.0.0.1:8000/mcp", Transport::StreamableHttp).unwrap();
        assert_eq!((t.port, t.path.as_str(), t.host), (8000, "/mcp", None));
        let t = parse_url("http://localhost:9/", Transport::Sse).unwrap();
        assert_eq!((t.port, t.path.as_str(), t.host, t.transport), (9, "/", None, Transport::Sse));
        let t = parse_url("http://10.1.2.3", Transport::StreamableHttp).unwrap();
        assert_eq!((t.port, t.path.as_str(), t.host), (80, "/", Some("10.1.2.3".parse().unwrap())));
        let t = parse_url("http://[::1]:8080/mcp", Transport::StreamableHttp).unwrap();
        assert_eq!((t.port, t.host), (8080, Some("::1".parse().unwrap())));
        assert_eq!(t.addr().to_string(), "[::1]:8080");
        assert!(parse_url("https://127.0.0.1/mcp", Transport::StreamableHttp).unwrap_err().contains("https"));
        assert!(parse_url("http://example.org/mcp", Transport::StreamableHttp)
            .unwrap_err()
            .contains("IP address"));
        assert!(parse_url("http://127.0.0.1:x/mcp", Transport::StreamableHttp).is_err());
        assert!(parse_url("127.0.0.1:80", Transport::StreamableHttp).is_err());
    }
}
