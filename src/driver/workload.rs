//! The stdio workloads: `cold_start` (fresh spawns timed to the initialize result, plus the first
//! tools/list) and `serial_calls` (one session, warm-up, then N sequential checked calls into an
//! HdrHistogram). Both pass the suite's correctness gate before anything counts, except for an
//! ungated spec (`DriverSpec::ungated`, `benchlab measure` on any server): no gate, any tool
//! list, and any tool answer that is not an error counts.

use std::time::Duration;

use serde_json::Value;

use crate::driver::stdio::{stderr_tail, Session, ShimClient};
use crate::mcp::data::ListRule;
use crate::mcp::suite::{AnySuite, Expected, Suite};
use crate::mcp::{self};
use crate::spec::{CallWarmup, Warmup, WarmupReport, Workload};
use crate::spec::{DriverOutcome, DriverSpec};
use crate::spec::{Failure, FailureReason};
use crate::stats;

/// A progress callback: phase, done, total.
pub type Progress<'a> = dyn FnMut(&str, u64, u64) + 'a;

/// Runs the spec's workload; never panics on server misbehaviour, which becomes `failure`.
pub fn run(spec: &DriverSpec, progress: &mut Progress) -> DriverOutcome {
    let mut out = DriverOutcome::default();
    let result = (|| {
        let (suite, ungated) = match (&spec.ungated, &spec.suite_data) {
            (Some(args), _) => (None, Some(args)),
            (None, Some(data)) => (Some(AnySuite::Data(std::sync::Arc::new(data.clone()))), None),
            (None, None) => (
                Some(AnySuite::Builtin(Suite::from_name(&spec.suite).ok_or_else(|| {
                    Failure::new(FailureReason::EngineError, format!("unknown suite {:?}", spec.suite))
                })?)),
                None,
            ),
        };
        let mut shim = ShimClient::connect(&spec.lab_dir, Duration::from_secs(30))?;
        // The services were readied and seeded in their containers before this driver started
        // (the backend's `services::prepare`): a server may connect to them as it starts.
        let suite = match (suite, spec.services.first()) {
            (Some(AnySuite::Builtin(s)), Some(service)) => Some(AnySuite::Builtin(s.with_seed(service.seed))),
            (s, _) => s,
        };
        let suite = suite.as_ref();
        let r = match (&spec.workload, suite) {
            (Workload::ColdStart { spawns }, _) => {
                cold_start(spec, suite, &mut shim, *spawns, &mut out, progress)
            }
            (Workload::SerialCalls { tool, warmup, calls }, _) => {
                serial_calls(spec, suite, ungated, &mut shim, tool, warmup, *calls, &mut out, progress)
            }
            (
                Workload::Concurrency { .. }
                | Workload::OpenLoop { .. }
                | Workload::HttpApi { .. }
                | Workload::Soak { .. },
                Some(suite),
            ) => crate::driver::load::run(spec, suite, &mut shim, &mut out, progress),
            (_, None) => Err(Failure::new(
                FailureReason::EngineError,
                format!("the {} workload needs a real suite, not {:?}", spec.workload.kind(), spec.suite),
            )),
        };
        let _ = shim.call(&crate::spec::Request::Shutdown);
        r
    })();
    if let Err(f) = result {
        out.failure = Some(f);
    }
    out
}

/// Spawns the server and performs the handshake; returns the session and the cold start.
fn handshake(
    spec: &DriverSpec,
    shim: &mut ShimClient,
    n: u32,
    out: &mut DriverOutcome,
) -> Result<(Session, Duration), Failure> {
    let started = std::time::Instant::now();
    let mut session = Session::spawn(shim, &spec.server, &spec.lab_dir, n, spec.timeouts.call())?;
    match initialize(spec, &mut session, out) {
        Ok(()) => Ok((session, started.elapsed())),
        Err(f) => Err(fail(spec, shim, session, out, f)),
    }
}

/// initialize, its checks, then notifications/initialized.
fn initialize(spec: &DriverSpec, session: &mut Session, out: &mut DriverOutcome) -> Result<(), Failure> {
    let answer = session
        .request("initialize", &mcp::initialize_params(), spec.timeouts.startup())
        .map_err(startup_failure)?;
    let result = answer.outcome.map_err(|e| {
        Failure::new(
            FailureReason::ProtocolError,
            format!("initialize was refused: {} ({})", e.message, e.code),
        )
    })?;
    let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
    if !mcp::SUPPORTED_PROTOCOL_VERSIONS.contains(&version) {
        return Err(Failure::new(
            FailureReason::ProtocolError,
            format!("the server answered protocol version {version:?}, which the lab does not speak"),
        ));
    }
    out.protocol_version = Some(version.to_string());
    out.server_info = result.get("serverInfo").cloned();
    session.send(&mcp::notification_line("notifications/initialized"))
}

/// A failure once the server runs: the tail of its stderr goes into the detail, and it is
/// stopped the MCP way so that how it ended (a crash's signal, a kill) is recorded too.
fn fail(
    spec: &DriverSpec,
    shim: &mut ShimClient,
    session: Session,
    out: &mut DriverOutcome,
    f: Failure,
) -> Failure {
    // Stopped first: the shim answers once the server's stderr has all reached the log.
    let log = session.stderr_log.clone();
    let _ = stop(spec, shim, session, out);
    with_stderr(f, &log)
}

fn startup_failure(f: Failure) -> Failure {
    if f.reason == FailureReason::Timeout {
        Failure::new(FailureReason::StartupTimeout, f.detail)
    } else {
        f
    }
}

fn with_stderr(mut f: Failure, log: &std::path::Path) -> Failure {
    if let Some(tail) = stderr_tail(log) {
        f.detail = format!("{}\n--- server stderr (tail) ---\n{}", f.detail, tail.trim_end());
    }
    f
}

/// tools/list, timed, with the suite check (ungated: any answer that is not an error); returns
/// the latency and the listed tool names.
fn list_tools(
    spec: &DriverSpec,
    suite: Option<&AnySuite>,
    session: &mut Session,
) -> Result<(Duration, Vec<String>), Failure> {
    let answer = session.request("tools/list", &serde_json::json!({}), spec.timeouts.call())?;
    // The names are only needed where no suite says what to call.
    let names = match suite {
        Some(suite) => {
            check_tool_list(suite, answer.outcome)?;
            Vec::new()
        }
        None => {
            let listed = answer.outcome.map_err(|e| {
                Failure::new(
                    FailureReason::ProtocolError,
                    format!("tools/list failed: {} ({})", e.message, e.code),
                )
            })?;
            mcp::tool_names(&listed)
        }
    };
    Ok((answer.latency, names))
}

/// The suite check of a tools/list answer: exactly the suite's tools, in any order (a data suite
/// may say `includes`: at least them).
pub fn check_tool_list(suite: &AnySuite, outcome: Result<Value, mcp::RpcError>) -> Result<(), Failure> {
    let result = outcome.map_err(|e| {
        Failure::new(FailureReason::ProtocolError, format!("tools/list failed: {} ({})", e.message, e.code))
    })?;
    let mut names = mcp::tool_names(&result);
    names.sort();
    let mut want: Vec<String> = suite.tools().iter().map(|s| s.to_string()).collect();
    want.sort();
    let (ok, how) = match suite.list_rule() {
        ListRule::Exact => (names == want, "exactly"),
        ListRule::Includes => (want.iter().all(|w| names.contains(w)), "at least"),
    };
    if !ok {
        return Err(Failure::new(
            FailureReason::WrongResult,
            format!("tools/list: expected {how} the {} suite {want:?}, got {names:?}", suite.name()),
        ));
    }
    Ok(())
}

/// Calls a tool and checks its answer (`expected` None: any value that is not an error); the
/// latency is returned only for a correct answer.
#[allow(clippy::too_many_arguments)]
fn checked_call(
    spec: &DriverSpec,
    session: &mut Session,
    id: u64,
    line: &str,
    tool: &str,
    args: &Value,
    expected: Option<&Expected>,
) -> Result<Duration, Failure> {
    let answer = session.request_prerendered(id, line, spec.timeouts.call(), tool)?;
    let result = answer.outcome.map_err(|e| {
        Failure::new(
            FailureReason::ToolError,
            format!("{tool} {args}: JSON-RPC error {} {}", e.code, e.message),
        )
    })?;
    let v = mcp::tool_value(&result).map_err(|e| {
        Failure::new(FailureReason::ToolError, format!("{tool} {args}: the tool reported an error: {e}"))
    })?;
    match expected.map_or(Ok(()), |e| e.verdict(&v)) {
        Ok(()) => Ok(answer.latency),
        Err(why) => Err(Failure::new(FailureReason::WrongResult, format!("{tool} {args}: {why}"))),
    }
}

/// The correctness gate: every tool of the suite with its fixed inputs, error cases included.
fn gate(spec: &DriverSpec, suite: Option<&AnySuite>, session: &mut Session) -> Result<(), Failure> {
    let Some(suite) = suite else {
        return Ok(());
    };
    for (tool, args, expected) in suite.gate() {
        let tool = tool.as_str();
        let id = session.reserve_ids(1);
        let line = mcp::request_line(id, "tools/call", &mcp::tools_call_params(tool, &args));
        match expected {
            Expected::Error => {
                let answer = session.request_prerendered(id, &line, spec.timeouts.call(), tool)?;
                // Either form of error is right: SDKs differ (MCP-NOTES).
                if let Ok(result) = answer.outcome {
                    if let Ok(v) = mcp::tool_value(&result) {
                        return Err(Failure::new(
                            FailureReason::WrongResult,
                            format!("gate: {tool} {args}: expected an error result, got the value {v}"),
                        ));
                    }
                }
            }
            expected => {
                checked_call(spec, session, id, &line, tool, &args, Some(&expected))?;
            }
        }
    }
    Ok(())
}

fn stop(
    spec: &DriverSpec,
    shim: &mut ShimClient,
    session: Session,
    out: &mut DriverOutcome,
) -> Result<(), Failure> {
    let (exit, _) = session.stop(
        shim,
        Duration::from_millis(spec.timeouts.stop_grace_ms),
        Duration::from_millis(spec.timeouts.term_ms),
    )?;
    out.exits.push(exit);
    Ok(())
}

fn cold_start(
    spec: &DriverSpec,
    suite: Option<&AnySuite>,
    shim: &mut ShimClient,
    spawns: u32,
    out: &mut DriverOutcome,
    progress: &mut Progress,
) -> Result<(), Failure> {
    for n in 0..spawns {
        let (mut session, cold) = handshake(spec, shim, n, out)?;
        out.cold_start_ns.push(cold.as_nanos() as u64);
        let (listed, _) = match list_tools(spec, suite, &mut session) {
            Ok(l) => l,
            Err(f) => return Err(fail(spec, shim, session, out, f)),
        };
        out.tools_list_ns.push(listed.as_nanos() as u64);
        if n == 0 {
            out.memory_after_initialize = Some(shim.memory(session.pid)?);
            out.cgroup_after_initialize = shim.cgroup_memory(session.pid)?;
            if let Err(f) = gate(spec, suite, &mut session) {
                return Err(fail(spec, shim, session, out, f));
            }
        }
        if n + 1 == spawns {
            out.memory_end = Some(shim.memory(session.pid)?);
            out.cgroup_end = shim.cgroup_memory(session.pid)?;
        }
        stop(spec, shim, session, out)?;
        progress("spawns", u64::from(n) + 1, u64::from(spawns));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn serial_calls(
    spec: &DriverSpec,
    suite: Option<&AnySuite>,
    ungated_args: Option<&Value>,
    shim: &mut ShimClient,
    tool: &str,
    warmup: &Warmup,
    calls: u32,
    out: &mut DriverOutcome,
    progress: &mut Progress,
) -> Result<(), Failure> {
    if let Some(suite) = suite.filter(|s| s.call(tool, 0).is_none()) {
        return Err(Failure::new(
            FailureReason::EngineError,
            format!("suite {} has no tool {tool:?}", suite.name()),
        ));
    }
    let (mut session, cold) = handshake(spec, shim, 0, out)?;
    out.cold_start_ns.push(cold.as_nanos() as u64);
    let (listed, names) = match list_tools(spec, suite, &mut session) {
        Ok(l) => l,
        Err(f) => return Err(fail(spec, shim, session, out, f)),
    };
    out.tools_list_ns.push(listed.as_nanos() as u64);
    let tool = match (suite, tool, names.first()) {
        (None, "", Some(first)) => first.clone(),
        (None, "", None) => {
            let f = Failure::new(FailureReason::WrongResult, "tools/list listed no tool to call".to_string());
            return Err(fail(spec, shim, session, out, f));
        }
        _ => tool.to_string(),
    };
    let tool = tool.as_str();
    out.memory_after_initialize = Some(shim.memory(session.pid)?);
    out.cgroup_after_initialize = shim.cgroup_memory(session.pid)?;
    if let Err(f) = gate(spec, suite, &mut session) {
        return Err(fail(spec, shim, session, out, f));
    }

    let no_args = serde_json::json!({});
    let fixed_args = ungated_args.unwrap_or(&no_args);
    // The i-th call of the session (the suite's arguments vary with i): its latency if correct.
    let call = |session: &mut Session, i: u64| {
        let (args, expected) = match suite {
            Some(suite) => {
                let (args, expected) = suite.call(tool, i).expect("checked above");
                (std::borrow::Cow::Owned(args), Some(expected))
            }
            None => (std::borrow::Cow::Borrowed(fixed_args), None),
        };
        let id = session.reserve_ids(1);
        // Rendered before the clock starts: the figure is the server's, not our JSON encoder's.
        let line = mcp::request_line(id, "tools/call", &mcp::tools_call_params(tool, &args));
        checked_call(spec, session, id, &line, tool, &args, expected.as_ref())
    };
    let mut hist = stats::latency_histogram();
    let result = (|| {
        let (warm, report) = warm_up(&mut |i| call(&mut session, i), warmup, calls, progress)?;
        out.warmup = report;
        let total = warm + u64::from(calls);
        let step = (total / 50).max(1);
        for i in warm..total {
            stats::record(&mut hist, call(&mut session, i)?);
            out.calls_ok += 1;
            if (i + 1) % step == 0 || i + 1 == total {
                progress("calls", i + 1, total);
            }
        }
        Ok(())
    })();
    if !hist.is_empty() {
        out.calls_histogram = Some(stats::encode_histogram(&hist));
    }
    if let Err(f) = result {
        return Err(fail(spec, shim, session, out, f));
    }
    out.memory_end = Some(shim.memory(session.pid)?);
    out.cgroup_end = shim.cgroup_memory(session.pid)?;
    stop(spec, shim, session, out)
}

/// The warm-up of `serial_calls`, call by call (`call(i)` makes the i-th): a fixed number of
/// calls, or calls until the rule ends it (`spec::StableRule`). Returns how many calls it made
/// and, for a rule, what the record says of it.
fn warm_up(
    call: &mut dyn FnMut(u64) -> Result<Duration, Failure>,
    warmup: &Warmup,
    calls: u32,
    progress: &mut Progress,
) -> Result<(u64, Option<WarmupReport>), Failure> {
    // Until a rule ends it, the total counts its cap.
    let total = warmup.cap() + u64::from(calls);
    let step = (total / 50).max(1);
    let mut tick = |i: u64| {
        if (i + 1).is_multiple_of(step) {
            progress("warmup", i + 1, total);
        }
    };
    match warmup {
        Warmup::Fixed(n) => {
            for i in 0..*n {
                call(i)?;
                tick(i);
            }
            Ok((*n, None))
        }
        Warmup::Stable(rule) => {
            let started = std::time::Instant::now();
            let mut w = CallWarmup::new(*rule);
            loop {
                let i = w.calls();
                let latency = call(i)?;
                if let Some(stable) = w.call(latency.as_nanos() as u64) {
                    let report = w.report(stable, started.elapsed().as_secs_f64() * 1e3);
                    return Ok((w.calls(), Some(report)));
                }
                tick(i);
            }
        }
    }
}
