//! The HTTP workloads: `concurrency` (closed loop), `open_loop` (fixed arrival rate, latency from
//! each request's intended send time, as wrk2 does) and `http_api` (the plain REST route). The
//! server is spawned through the shim with its output in a log; the driver waits for its port,
//! runs the correctness gate over the cell's transport, then the load on a single-threaded tokio
//! runtime (one connection per virtual user, one HdrHistogram per worker, merged at the end),
//! while a sampler thread reads the server tree's memory and CPU through the shim.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use serde_json::Value;

use crate::driver::httpclient::{rest_body, CallError, ErrorKind, McpClient, RestClient, ServerHello};
use crate::driver::stdio::{stderr_tail, ShimClient};
use crate::driver::workload::Progress;
use crate::mcp::suite::{Expected, Suite};
use crate::mcp::transport::HttpTarget;
use crate::mcp::{self};
use crate::spec::TreeMemory;
use crate::spec::{DriverOutcome, DriverSpec};
use crate::spec::{Failure, FailureReason, HistogramMetric, LoadMemory, LoadMetrics};
use crate::spec::{Lifecycle, Workload};
use crate::stats;

/// How many distinct argument sets a load cycles through (so no layer answers from a cache).
const PREPARED: u64 = 16;
/// How often the server's memory is sampled during a load.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(250);
/// A request that starts later than its intended time by more than this is `late`.
const LATE: Duration = Duration::from_millis(1);

/// One prepared call: its bodies, and the answer a correct server gives.
struct Prepared {
    params_json: String,
    rest: Bytes,
    args: Value,
    expected: Value,
    /// The raw result text last verified correct: an identical answer needs no JSON tree.
    verified: RefCell<Option<String>>,
}

impl Prepared {
    /// Checks a raw answer: an MCP tools/call result (`mcp`) or a REST value.
    fn check(&self, tool: &str, raw: &str, mcp_result: bool) -> Result<(), CallError> {
        if self.verified.borrow().as_deref() == Some(raw) {
            return Ok(());
        }
        let v: Value = serde_json::from_str(raw).map_err(|e| CallError {
            kind: ErrorKind::ProtocolError,
            detail: format!("{tool}: not JSON: {e}"),
        })?;
        let value = if mcp_result {
            mcp::tool_value(&v).map_err(|e| CallError {
                kind: ErrorKind::ToolError,
                detail: format!("{tool} {}: the tool reported an error: {e}", self.args),
            })?
        } else {
            v
        };
        if mcp::values_match(&self.expected, &value) {
            *self.verified.borrow_mut() = Some(raw.to_string());
            Ok(())
        } else {
            Err(CallError {
                kind: ErrorKind::WrongResult,
                detail: format!("{tool} {}: expected {}, got {value}", self.args, self.expected),
            })
        }
    }
}

/// What every worker shares (single-threaded: `Rc`).
struct Shared {
    target: HttpTarget,
    tool: String,
    rest: bool,
    lifecycle: Lifecycle,
    prepared: Vec<Prepared>,
    call_limit: Duration,
    warm_end: Instant,
    end: Instant,
}

/// A virtual user's connection: an MCP session or a REST client.
enum Client {
    Mcp(Box<McpClient>),
    Rest(RestClient),
}

impl Shared {
    async fn open(&self) -> Result<Client, CallError> {
        if self.rest {
            Ok(Client::Rest(RestClient::open(&self.target).await?))
        } else {
            Ok(Client::Mcp(Box::new(McpClient::open(&self.target, self.call_limit).await?.0)))
        }
    }

    async fn call(&self, client: &mut Client, i: u64, reinit: &mut u64) -> Result<(), CallError> {
        let p = &self.prepared[(i % PREPARED) as usize];
        match client {
            Client::Mcp(c) => {
                let out = c.request("tools/call", &p.params_json, self.call_limit, reinit).await?;
                let raw = out.map_err(|e| CallError {
                    kind: ErrorKind::ToolError,
                    detail: format!("{} {}: JSON-RPC error {} {}", self.tool, p.args, e.code, e.message),
                })?;
                p.check(&self.tool, &raw, true)
            }
            Client::Rest(c) => {
                let raw =
                    crate::driver::httpclient::timed(self.call_limit, c.call(&self.tool, &p.rest)).await?;
                p.check(&self.tool, &raw, false)
            }
        }
    }
}

/// One worker's counts.
struct WorkerStats {
    hist: Histogram<u64>,
    ok: u64,
    errors: BTreeMap<&'static str, u64>,
    examples: Vec<String>,
    sessions: u64,
    reinit: u64,
    /// Open loop: requests taken in the window, and those that started late.
    taken: u64,
    late: u64,
}

impl WorkerStats {
    fn new() -> Self {
        WorkerStats {
            hist: stats::latency_histogram(),
            ok: 0,
            errors: BTreeMap::new(),
            examples: Vec::new(),
            sessions: 0,
            reinit: 0,
            taken: 0,
            late: 0,
        }
    }

    fn account(&mut self, latency: Duration, r: &Result<(), CallError>) {
        match r {
            Ok(()) => {
                self.ok += 1;
                stats::record(&mut self.hist, latency);
            }
            Err(e) => {
                *self.errors.entry(e.kind.as_str()).or_default() += 1;
                if self.examples.len() < 3 {
                    self.examples.push(format!("{}: {}", e.kind.as_str(), e.detail));
                }
            }
        }
    }
}

/// Closed loop: open a session, then call back to back until the end; count completions in the
/// window.
async fn closed_worker(sh: Rc<Shared>, w: u64) -> WorkerStats {
    let mut st = WorkerStats::new();
    let mut client: Option<Client> = None;
    let mut i = w;
    let per_call = sh.lifecycle == Lifecycle::PerCall && !sh.rest;
    loop {
        let t0 = Instant::now();
        if t0 >= sh.end {
            break;
        }
        let fresh = client.is_none() || per_call;
        if fresh {
            match sh.open().await {
                Ok(c) => {
                    st.sessions += 1;
                    client = Some(c);
                }
                Err(e) => {
                    let done = Instant::now();
                    if done >= sh.warm_end && done <= sh.end {
                        st.account(done - t0, &Err(e));
                    }
                    // Do not spin on a refusing server.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let c = client.as_mut().expect("opened above");
        // Per call: the lifecycle is the measured unit. Otherwise only the call is (a session
        // reopened after an error is not part of it).
        let t_call = if per_call || !fresh { t0 } else { Instant::now() };
        let r = sh.call(c, i, &mut st.reinit).await;
        i += 1;
        let done = Instant::now();
        if done >= sh.warm_end && done <= sh.end {
            st.account(done - t_call, &r);
        }
        let poisoned = matches!(&r, Err(e) if e.kind.poisons_connection());
        if per_call || poisoned {
            if let Some(Client::Mcp(m)) = client.take() {
                if !poisoned {
                    m.close().await;
                }
            }
        }
    }
    if let Some(Client::Mcp(m)) = client {
        m.close().await;
    }
    st
}

/// Waits until `t`: sleeps while it is far, then yields until it comes (the timer wheel is
/// 1 ms coarse; sub-millisecond spacing needs the yield loop).
async fn wait_until(t: Instant) {
    loop {
        let now = Instant::now();
        if now >= t {
            return;
        }
        if t - now > Duration::from_millis(2) {
            tokio::time::sleep_until((t - Duration::from_millis(1)).into()).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
}

/// Open loop: take the next slot of the global schedule, wait for its intended time, send,
/// measure from the intended time.
async fn open_worker(
    sh: Rc<Shared>,
    mut client: Client,
    next: Rc<Cell<u64>>,
    t0: Instant,
    period_ns: f64,
) -> WorkerStats {
    let mut st = WorkerStats::new();
    st.sessions = 1;
    loop {
        // Slots not taken by the end of the window are dropped, not sent late after it.
        if Instant::now() >= sh.end {
            break;
        }
        let k = next.get();
        next.set(k + 1);
        let intended = t0 + Duration::from_nanos((k as f64 * period_ns) as u64);
        if intended >= sh.end {
            break;
        }
        wait_until(intended).await;
        let sent = Instant::now();
        let in_window = intended >= sh.warm_end;
        if in_window {
            st.taken += 1;
            if sent - intended > LATE {
                st.late += 1;
            }
        }
        let r = sh.call(&mut client, k, &mut st.reinit).await;
        if in_window {
            st.account(Instant::now() - intended, &r);
        }
        if matches!(&r, Err(e) if e.kind.poisons_connection()) {
            match sh.open().await {
                Ok(c) => {
                    client = c;
                    st.sessions += 1;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }
    if let Client::Mcp(m) = client {
        m.close().await;
    }
    st
}

/// What the sampler thread saw.
#[derive(Default)]
struct Sampled {
    peak: Option<TreeMemory>,
    samples: u32,
    cpu_window: Option<(u64, Duration)>,
    died: bool,
}

/// Samples the server tree's memory every interval, and its CPU time exactly at the window's
/// start and end, through its own handle on the shim's socket.
fn sampler(
    mut shim: ShimClient,
    pid: u32,
    warm_end: Instant,
    end: Instant,
    stop: Arc<AtomicBool>,
) -> Sampled {
    let mut out = Sampled::default();
    let mut cpu_a: Option<(u64, Instant)> = None;
    loop {
        let now = Instant::now();
        if cpu_a.is_none() && now >= warm_end {
            cpu_a = shim.cpu_ns(pid).ok().map(|c| (c, Instant::now()));
        }
        if out.cpu_window.is_none() && now >= end {
            if let (Some((a, ta)), Ok(b)) = (cpu_a, shim.cpu_ns(pid)) {
                out.cpu_window = Some((b.saturating_sub(a), Instant::now() - ta));
            }
        }
        match shim.memory(pid) {
            Ok(m) if m.processes == 0 => out.died = true,
            Ok(m) => {
                out.samples += 1;
                if out.peak.as_ref().is_none_or(|p| m.rss_bytes > p.rss_bytes) {
                    out.peak = Some(m);
                }
            }
            Err(_) => {}
        }
        if stop.load(Ordering::Relaxed) || out.died {
            return out;
        }
        let mut next = Instant::now() + SAMPLE_INTERVAL;
        for edge in [warm_end, end] {
            if edge > Instant::now() && edge < next {
                next = edge;
            }
        }
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(20)));
        }
    }
}

fn failure_of(e: CallError, what: &str) -> Failure {
    let reason = match e.kind {
        ErrorKind::Timeout => FailureReason::Timeout,
        ErrorKind::ToolError => FailureReason::ToolError,
        ErrorKind::WrongResult => FailureReason::WrongResult,
        ErrorKind::Connect => FailureReason::Crash,
        ErrorKind::HttpStatus | ErrorKind::ProtocolError | ErrorKind::SessionExpired => {
            FailureReason::ProtocolError
        }
    };
    Failure::new(reason, format!("{what}: {}", e.detail))
}

/// The correctness gate over HTTP: tools/list and every gate call over MCP, then (for REST
/// cells) every valued gate call over the REST route.
async fn gate(sh: &Shared, suite: Suite, startup_deadline: Instant) -> Result<ServerHello, Failure> {
    // The port may be open before the app has mounted its routes: retry until the deadline.
    // As over stdio, the first handshake is bounded by the start-up limit, not the call limit,
    // and running out of it is a start-up timeout.
    let (mut client, hello) = loop {
        let left = startup_deadline.saturating_duration_since(Instant::now()).max(sh.call_limit);
        match McpClient::open(&sh.target, left).await {
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
    let mut reinit = 0;
    let listed = client
        .request("tools/list", "{}", sh.call_limit, &mut reinit)
        .await
        .map_err(|e| failure_of(e, "tools/list"))?
        .map(|raw| serde_json::from_str(&raw).unwrap_or(Value::Null));
    crate::driver::workload::check_tool_list(suite, listed)?;
    for (tool, args, expected) in suite.gate() {
        let params = mcp::tools_call_params(tool, &args).to_string();
        let out = client
            .request("tools/call", &params, sh.call_limit, &mut reinit)
            .await
            .map_err(|e| failure_of(e, "gate"))?;
        match expected {
            Expected::Value(v) => {
                let raw = out.map_err(|e| {
                    Failure::new(
                        FailureReason::ToolError,
                        format!("gate: {tool} {args}: JSON-RPC error {} {}", e.code, e.message),
                    )
                })?;
                let p = Prepared {
                    params_json: params,
                    rest: Bytes::new(),
                    args: args.clone(),
                    expected: v,
                    verified: RefCell::new(None),
                };
                p.check(tool, &raw, true).map_err(|e| failure_of(e, "gate"))?;
            }
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
        }
    }
    client.close().await;
    if sh.rest {
        let mut rest = RestClient::open(&sh.target).await.map_err(|e| failure_of(e, "REST gate"))?;
        let style = sh.target.api_style.unwrap_or_default();
        for (tool, args, expected) in suite.gate() {
            let Expected::Value(v) = expected else { continue };
            let body = rest_body(style, &args);
            let raw = crate::driver::httpclient::timed(sh.call_limit, rest.call(tool, &body))
                .await
                .map_err(|e| failure_of(e, "REST gate"))?;
            let p = Prepared {
                params_json: String::new(),
                rest: body,
                args: args.clone(),
                expected: v,
                verified: RefCell::new(None),
            };
            p.check(tool, &raw, false).map_err(|e| failure_of(e, "REST gate"))?;
        }
    }
    Ok(hello)
}

/// Waits for the server's port; a dead server is a crash, a silent one a start-up timeout.
fn wait_for_port(shim: &mut ShimClient, pid: u32, port: u16, deadline: Instant) -> Result<(), Failure> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut polls = 0u32;
    loop {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return Ok(());
        }
        polls += 1;
        if polls.is_multiple_of(5) && shim.memory(pid)?.processes == 0 {
            return Err(Failure::new(
                FailureReason::Crash,
                format!("the server exited before it listened on port {port}"),
            ));
        }
        if Instant::now() >= deadline {
            return Err(Failure::new(
                FailureReason::StartupTimeout,
                format!("the server did not listen on 127.0.0.1:{port} within the start-up limit"),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs an HTTP workload end to end.
pub fn run(
    spec: &DriverSpec,
    suite: Suite,
    shim: &mut ShimClient,
    out: &mut DriverOutcome,
    progress: &mut Progress,
) -> Result<(), Failure> {
    let target = spec.http.clone().ok_or_else(|| {
        Failure::new(
            FailureReason::EngineError,
            "an HTTP workload needs the server's HTTP target in its spec",
        )
    })?;
    let log = spec.lab_dir.join("server.log");
    let started = Instant::now();
    let pid = shim.spawn_logged(&spec.server, &log)?;
    let with_log = |mut f: Failure| {
        if let Some(tail) = stderr_tail(&log) {
            f.detail = format!("{}\n--- server output (tail) ---\n{}", f.detail, tail.trim_end());
        }
        f
    };
    let result = run_spawned(spec, suite, shim, out, progress, target, pid, started).map_err(with_log);
    match shim.stop_pid(pid, Duration::from_millis(spec.timeouts.term_ms)) {
        Ok((exit, _)) => out.exits.push(exit),
        Err(f) if result.is_ok() => return Err(f),
        Err(_) => {}
    }
    result
}

/// What a load does, resolved from the workload and the server's HTTP target.
#[derive(Debug, Clone)]
pub struct LoadPlan {
    pub target: HttpTarget,
    pub tool: String,
    /// Virtual users (closed loop) or connections (open loop).
    pub workers: u32,
    pub warmup: Duration,
    pub duration: Duration,
    pub lifecycle: Lifecycle,
    /// Through the plain REST route instead of MCP.
    pub rest: bool,
    /// Open loop: calls per second.
    pub rate: Option<u64>,
    pub call_limit: Duration,
}

impl LoadPlan {
    pub fn new(workload: &Workload, target: HttpTarget, call_limit: Duration) -> Result<LoadPlan, Failure> {
        let ms = Duration::from_millis;
        let (tool, workers, warmup, duration, lifecycle, rest, rate) = match workload {
            Workload::Concurrency { tool, workers, warmup_ms, duration_ms, lifecycle } => {
                (tool, *workers, *warmup_ms, *duration_ms, *lifecycle, false, None)
            }
            Workload::HttpApi { tool, workers, warmup_ms, duration_ms } => {
                (tool, *workers, *warmup_ms, *duration_ms, Lifecycle::Session, true, None)
            }
            Workload::OpenLoop { tool, rate, connections, warmup_ms, duration_ms } => {
                (tool, *connections, *warmup_ms, *duration_ms, Lifecycle::Session, false, Some(*rate))
            }
            other => {
                return Err(Failure::new(
                    FailureReason::EngineError,
                    format!("{} is not an HTTP workload", other.kind()),
                ))
            }
        };
        if rest && target.api_route.is_none() {
            return Err(Failure::new(
                FailureReason::EngineError,
                "an http_api workload needs a server with a plain HTTP route",
            ));
        }
        Ok(LoadPlan {
            target,
            tool: tool.clone(),
            workers,
            warmup: ms(warmup),
            duration: ms(duration),
            lifecycle,
            rest,
            rate,
            call_limit,
        })
    }

    fn prepared(&self, suite: Suite) -> Result<Vec<Prepared>, Failure> {
        let style = self.target.api_style.unwrap_or_default();
        (0..PREPARED)
            .map(|i| {
                let (args, expected) = suite.call(&self.tool, i).ok_or_else(|| {
                    Failure::new(
                        FailureReason::EngineError,
                        format!("suite {} has no tool {:?}", suite.name(), self.tool),
                    )
                })?;
                Ok(Prepared {
                    params_json: mcp::tools_call_params(&self.tool, &args).to_string(),
                    rest: rest_body(style, &args),
                    args,
                    expected,
                    verified: RefCell::new(None),
                })
            })
            .collect()
    }

    fn shared(&self, prepared: Vec<Prepared>) -> Shared {
        let now = Instant::now();
        Shared {
            target: self.target.clone(),
            tool: self.tool.clone(),
            rest: self.rest,
            lifecycle: self.lifecycle,
            prepared,
            call_limit: self.call_limit,
            warm_end: now,
            end: now,
        }
    }
}

fn runtime() -> Result<(tokio::runtime::Runtime, tokio::task::LocalSet), Failure> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(FailureReason::EngineError, format!("tokio runtime: {e}")))?;
    Ok((rt, tokio::task::LocalSet::new()))
}

/// Runs the correctness gate against a listening server (retrying the handshake until
/// `startup_deadline` while the app mounts its routes).
pub fn gate_server(plan: &LoadPlan, suite: Suite, startup_deadline: Instant) -> Result<ServerHello, Failure> {
    let (rt, local) = runtime()?;
    local.block_on(&rt, gate(&plan.shared(Vec::new()), suite, startup_deadline))
}

/// Drives the load on this thread (a single-threaded runtime: one core is enough, and the
/// figures do not depend on thread hand-offs). `on_window` is called once with the window's
/// start and end before any worker starts (the caller starts its samplers there). Returns the
/// merged metrics, with `server_cpu_cores` left for the caller.
pub fn drive(
    plan: &LoadPlan,
    suite: Suite,
    progress: &mut Progress,
    on_window: &mut dyn FnMut(Instant, Instant),
) -> Result<LoadMetrics, Failure> {
    let prepared = plan.prepared(suite)?;
    let (rt, local) = runtime()?;
    let total_ms = (plan.warmup + plan.duration).as_millis() as u64;
    let warmup_ms = plan.warmup.as_millis() as u64;
    crate::driver::httpclient::take_reconnects();
    let (cpu0, wall0) = (process_cpu_ns(), Instant::now());
    let stats = local.block_on(&rt, async {
        let mut sh = Rc::new(plan.shared(prepared));
        // Open loop: every connection's session is opened before the schedule starts.
        let mut clients = Vec::new();
        if plan.rate.is_some() {
            for _ in 0..plan.workers {
                clients
                    .push(sh.open().await.map_err(|e| failure_of(e, "opening the open-loop connections"))?);
            }
        }
        let t_start = Instant::now() + Duration::from_millis(5);
        {
            let s = Rc::get_mut(&mut sh).expect("not shared yet");
            s.warm_end = t_start + plan.warmup;
            s.end = t_start + plan.warmup + plan.duration;
        }
        on_window(sh.warm_end, sh.end);
        let mut handles = Vec::new();
        match plan.rate {
            None => {
                for w in 0..u64::from(plan.workers) {
                    handles.push(tokio::task::spawn_local(closed_worker(sh.clone(), w)));
                }
            }
            Some(r) => {
                let next = Rc::new(Cell::new(0u64));
                let period_ns = 1e9 / r as f64;
                for c in clients {
                    handles.push(tokio::task::spawn_local(open_worker(
                        sh.clone(),
                        c,
                        next.clone(),
                        t_start,
                        period_ns,
                    )));
                }
            }
        }
        let all = futures_util::future::join_all(handles);
        tokio::pin!(all);
        let results = loop {
            tokio::select! {
                r = &mut all => break r,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {
                    let el = t_start.elapsed().as_millis() as u64;
                    progress(if el < warmup_ms { "warmup" } else { "load" }, el.min(total_ms), total_ms);
                }
            }
        };
        Ok::<_, Failure>(results.into_iter().filter_map(Result::ok).collect::<Vec<WorkerStats>>())
    })?;
    drop(local);
    drop(rt); // closes every connection
    let mut m = merge(plan, &stats);
    m.reconnects = crate::driver::httpclient::take_reconnects();
    let wall = wall0.elapsed().as_nanos() as f64;
    m.driver_cpu_cores = (wall > 0.0).then(|| process_cpu_ns().saturating_sub(cpu0) as f64 / wall);
    Ok(m)
}

/// CPU time this process has used, in nanoseconds.
fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own; the clock id is a constant.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Merges the workers' counts and histograms into the record's metrics.
fn merge(plan: &LoadPlan, stats: &[WorkerStats]) -> LoadMetrics {
    let mut hist = stats::latency_histogram();
    let mut m = LoadMetrics {
        mode: if plan.rate.is_some() { "open" } else { "closed" }.into(),
        workers: plan.workers,
        connections: plan.workers,
        warmup_ms: plan.warmup.as_millis() as u64,
        window_ms: plan.duration.as_secs_f64() * 1e3,
        ..Default::default()
    };
    let (mut taken, mut late) = (0u64, 0u64);
    for s in stats {
        let _ = hist.add(&s.hist);
        m.ok += s.ok;
        for (k, v) in &s.errors {
            *m.errors.entry(k.to_string()).or_default() += v;
        }
        m.sessions += s.sessions;
        m.reinitializations += s.reinit;
        taken += s.taken;
        late += s.late;
        for e in &s.examples {
            if m.error_examples.len() < 5 {
                m.error_examples.push(e.clone());
            }
        }
    }
    m.failed = m.errors.values().sum();
    let secs = plan.duration.as_secs_f64();
    m.throughput_rps = if secs > 0.0 { m.ok as f64 / secs } else { 0.0 };
    let sent = m.ok + m.failed;
    m.error_rate = if sent > 0 { m.failed as f64 / sent as f64 } else { 0.0 };
    if let Some(r) = plan.rate {
        let slots = (secs * r as f64).floor() as u64;
        m.target_rps = Some(r as f64);
        m.late = Some(late);
        m.dropped = Some(slots.saturating_sub(taken));
    }
    m.latency = stats::summarize(&hist)
        .map(|summary| HistogramMetric { summary, histogram: stats::encode_histogram(&hist) });
    m
}

/// The failure of a load in which no call succeeded, named by its most common error.
pub fn no_success_failure(m: &LoadMetrics) -> Option<Failure> {
    if m.ok > 0 {
        return None;
    }
    if m.failed == 0 {
        return Some(Failure::new(
            FailureReason::Timeout,
            format!(
                "no call completed within the {:.1} s measured window ({} sessions open): every call took longer",
                m.window_ms / 1e3,
                m.sessions
            ),
        ));
    }
    let dominant = m.errors.iter().max_by_key(|(_, v)| **v).map(|(k, _)| k.as_str());
    let reason = match dominant {
        Some("timeout") => FailureReason::Timeout,
        Some("tool_error") => FailureReason::ToolError,
        Some("wrong_result") => FailureReason::WrongResult,
        Some("connect") => FailureReason::Crash,
        _ => FailureReason::ProtocolError,
    };
    let summary = m.errors.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ");
    Some(Failure::new(reason, format!("no call succeeded in the measured window ({summary})")))
}

#[allow(clippy::too_many_arguments)]
fn run_spawned(
    spec: &DriverSpec,
    suite: Suite,
    shim: &mut ShimClient,
    out: &mut DriverOutcome,
    progress: &mut Progress,
    target: HttpTarget,
    pid: u32,
    started: Instant,
) -> Result<(), Failure> {
    let startup_deadline = started + spec.timeouts.startup();
    wait_for_port(shim, pid, target.port, startup_deadline)?;
    let plan = LoadPlan::new(&spec.workload, target, spec.timeouts.call())?;
    let hello = gate_server(&plan, suite, startup_deadline)?;
    out.protocol_version = Some(hello.protocol_version);
    out.server_info = hello.server_info;
    progress("gate", 1, 1);

    // Idle memory, then the load with the sampler running beside it.
    let idle = shim.memory(pid)?;
    out.memory_after_initialize = Some(idle.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let mut sampler_thread = None;
    let mut sampler_err = None;
    let mut on_window = |warm_end: Instant, end: Instant| match shim.try_clone() {
        Ok(s) => {
            let st = stop.clone();
            sampler_thread = Some(std::thread::spawn(move || sampler(s, pid, warm_end, end, st)));
        }
        Err(f) => sampler_err = Some(f),
    };
    let result = drive(&plan, suite, progress, &mut on_window);
    stop.store(true, Ordering::Relaxed);
    let sampled = sampler_thread.map(|t| t.join().unwrap_or_default()).unwrap_or_default();
    if let Some(f) = sampler_err {
        return Err(f);
    }
    let mut m = result?;
    m.server_cpu_cores =
        sampled.cpu_window.filter(|(_, d)| !d.is_zero()).map(|(ns, d)| ns as f64 / d.as_nanos() as f64);

    // After: let the server settle without clients, then read it again.
    std::thread::sleep(Duration::from_millis(500));
    let after = shim.memory(pid).ok().filter(|m| m.processes > 0);
    out.memory_end = after.clone();
    out.load_memory = Some(LoadMemory {
        idle_before: Some(idle),
        peak_during: sampled.peak,
        after,
        samples: sampled.samples,
        interval_ms: SAMPLE_INTERVAL.as_millis() as u64,
        cgroup_peak_bytes: shim.cgroup_peak().ok().flatten(),
    });
    let total_ms = (plan.warmup + plan.duration).as_millis() as u64;
    progress("load", total_ms, total_ms);
    let no_success = no_success_failure(&m);
    out.load = Some(m);
    if sampled.died {
        return Err(Failure::new(FailureReason::Crash, "the server exited during the load"));
    }
    match no_success {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rate: Option<u64>) -> LoadPlan {
        LoadPlan {
            target: HttpTarget {
                transport: crate::mcp::transport::Transport::StreamableHttp,
                port: 1,
                path: "/mcp".into(),
                reply: None,
                session: None,
                api_route: None,
                api_style: None,
            },
            tool: "echo".into(),
            workers: 2,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(2),
            lifecycle: Lifecycle::Session,
            rest: false,
            rate,
            call_limit: Duration::from_secs(1),
        }
    }

    #[test]
    fn workers_merge_into_rates_errors_and_one_histogram() {
        let mut a = WorkerStats::new();
        let mut b = WorkerStats::new();
        for _ in 0..300 {
            a.account(Duration::from_micros(500), &Ok(()));
        }
        for _ in 0..100 {
            b.account(Duration::from_millis(2), &Ok(()));
        }
        let timeout = CallError { kind: ErrorKind::Timeout, detail: "slow".into() };
        for _ in 0..4 {
            b.account(Duration::ZERO, &Err(timeout.clone()));
        }
        b.taken = 90;
        b.late = 7;
        let m = merge(&plan(Some(250)), &[a, b]);
        assert_eq!((m.ok, m.failed), (400, 4));
        assert_eq!(m.throughput_rps, 200.0);
        assert!((m.error_rate - 4.0 / 404.0).abs() < 1e-12);
        assert_eq!(m.errors.get("timeout"), Some(&4));
        assert_eq!(m.error_examples.len(), 3, "examples are capped per worker");
        let s = &m.latency.as_ref().unwrap().summary;
        assert_eq!(s.count, 400);
        assert!((s.p50_ms - 0.5).abs() < 0.01 && (s.max_ms - 2.0).abs() < 0.01, "{s:?}");
        // Open loop: 2 s at 250/s is 500 slots; 90 taken, so 410 were dropped.
        assert_eq!((m.target_rps, m.late, m.dropped), (Some(250.0), Some(7), Some(410)));
        assert!(no_success_failure(&m).is_none());
    }

    #[test]
    fn a_load_without_one_success_fails_by_its_most_common_error() {
        let mut w = WorkerStats::new();
        let e = |kind| Err(CallError { kind, detail: String::new() });
        w.account(Duration::ZERO, &e(ErrorKind::Timeout));
        w.account(Duration::ZERO, &e(ErrorKind::Timeout));
        w.account(Duration::ZERO, &e(ErrorKind::HttpStatus));
        let m = merge(&plan(None), &[w]);
        assert_eq!((m.mode.as_str(), m.error_rate, m.dropped), ("closed", 1.0, None));
        let f = no_success_failure(&m).unwrap();
        assert_eq!(f.reason, FailureReason::Timeout);
        assert!(f.detail.contains("http_status 1, timeout 2"), "{}", f.detail);
        let none = merge(&plan(None), &[WorkerStats::new()]);
        let f = no_success_failure(&none).unwrap();
        assert_eq!(f.reason, FailureReason::Timeout);
        assert!(f.detail.contains("no call completed within the 2.0 s"), "{}", f.detail);
    }
}
