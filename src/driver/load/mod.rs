//! The HTTP workloads: `concurrency` (closed loop), `open_loop` (fixed arrival rate, latency from
//! each request's intended send time, as wrk2 does) and `http_api` (the plain REST route). The
//! server is spawned through the shim with its output in a log; the driver waits for its port,
//! runs the correctness gate over the cell's transport, then the load on a single-threaded tokio
//! runtime (one connection per virtual user, one HdrHistogram per worker, merged at the end),
//! while a sampler thread reads the server tree's memory and CPU through the shim; then, with
//! every connection closed, the idle phase samples its memory for the workload's `idle_after`.
//! Every load keeps a time series (`series`: per-interval histograms, the sampler's resources on
//! the same clock); a `soak` adds an idle phase before the load and its figures (`soak`).
//! This file runs a cell end to end and resolves its plan; the parts are `gate`, `drive` (with
//! the loops in `closed` and `open` and their plumbing in `worker`), `sampler` and `idle`.

mod closed;
mod drive;
mod flows;
mod gate;
mod idle;
mod open;
mod sampler;
mod series;
mod settle;
mod soak;
mod worker;

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::driver::httpclient::rest_body;
use crate::driver::stdio::{stderr_tail, ShimClient};
use crate::driver::workload::Progress;
use crate::mcp::suite::AnySuite;
use crate::mcp::transport::HttpTarget;
use crate::mcp::{self};
use crate::spec::{DriverOutcome, DriverSpec};
use crate::spec::{Failure, FailureReason, LoadMemory};
use crate::spec::{Lifecycle, Warmup, Workload};

pub use drive::{drive, no_success_failure};
pub use gate::{gate_server, probe_server};

use sampler::{sampler, SAMPLE_INTERVAL};
use worker::{Prepared, Shared, Warming, Window, PREPARED};

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
    suite: &AnySuite,
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
    let result = run_spawned(spec, suite, shim, out, progress, target, pid, started);
    let stopped = shim.stop_pid(pid, Duration::from_millis(spec.timeouts.term_ms));
    // Read after the stop: the shim answers it once the server's output has all reached the log.
    let result = result.map_err(with_log);
    match stopped {
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
    /// In ms: that long, or until the p50 settles (`spec::StableRule`).
    pub warmup: Warmup,
    pub duration: Duration,
    pub lifecycle: Lifecycle,
    /// Through the plain REST route instead of MCP.
    pub rest: bool,
    /// Open loop: calls per second.
    pub rate: Option<u64>,
    pub call_limit: Duration,
    /// A soak's ramp (the warm-up): closed-loop virtual users start one by one across it, an
    /// open loop's rate climbs linearly from 0 over it. Zero: all at once.
    pub ramp: Duration,
    /// The time series' interval.
    pub interval: Duration,
    /// A weighted mix of tools instead of `tool` (empty: `tool`).
    pub mix: Vec<crate::spec::MixEntry>,
    /// `lifecycle = "iteration"`: the calls of each iteration.
    pub session_calls: u32,
    /// Not a suite's calls: `tool` with these arguments, and any answer that is not an error
    /// counts (`benchlab measure --url` without a suite).
    pub ungated: Option<serde_json::Value>,
    /// k6's ramping-vus (empty: `workers` throughout), from `start_vus`; the stages' clock
    /// starts with the load (the warm-up is their first part).
    pub stages: Vec<crate::spec::Stage>,
    pub start_vus: u32,
    /// Slept after each iteration (or call), outside every timed step.
    pub think: Option<crate::spec::Think>,
    /// Iterations as sessions of steps (empty: one session of tools/list and the mix's calls).
    pub flow: Vec<Vec<String>>,
    pub session: crate::spec::SessionScope,
    pub warmup_excludes: crate::spec::WarmupExcludes,
    /// Two or more CPUs: one driver thread pinned to each, the workers dealt among them
    /// (`benchlab measure --url --driver-cpus`, or a cell's driver cpuset: `DriverSpec::driver_cpus`).
    /// Empty or one: the calling thread alone, as it is.
    pub driver_cpus: Vec<u32>,
}

impl LoadPlan {
    pub fn new(workload: &Workload, target: HttpTarget, call_limit: Duration) -> Result<LoadPlan, Failure> {
        let ms = Duration::from_millis;
        let mut ramp = Duration::ZERO;
        let (mix, session_calls) = match workload {
            Workload::Concurrency { mix, session_calls, .. } => (mix.clone(), *session_calls),
            _ => (Vec::new(), 0),
        };
        let shaped = match workload {
            Workload::Concurrency { stages, start_vus, think, flow, session, warmup_excludes, .. } => {
                (stages.clone(), *start_vus, *think, flow.clone(), *session, *warmup_excludes)
            }
            _ => Default::default(),
        };
        let (stages, start_vus, think, flow, session, warmup_excludes) = shaped;
        let (tool, workers, warmup, duration, lifecycle, rest, rate) = match workload {
            Workload::Concurrency { tool, workers, warmup_ms, duration_ms, lifecycle, .. } => {
                (tool, *workers, *warmup_ms, *duration_ms, *lifecycle, false, None)
            }
            Workload::HttpApi { tool, workers, warmup_ms, duration_ms, .. } => {
                (tool, *workers, *warmup_ms, *duration_ms, Lifecycle::Session, true, None)
            }
            Workload::OpenLoop { tool, rate, connections, warmup_ms, duration_ms, .. } => {
                (tool, *connections, *warmup_ms, *duration_ms, Lifecycle::Session, false, Some(*rate))
            }
            Workload::Soak { tool, workers, rate, lifecycle, ramp_ms, steady_ms, .. } => {
                ramp = ms(*ramp_ms);
                (tool, *workers, Warmup::Fixed(*ramp_ms), *steady_ms, *lifecycle, false, *rate)
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
            warmup,
            duration: ms(duration),
            lifecycle,
            rest,
            rate,
            call_limit,
            ramp,
            interval: ms(workload.series_interval_ms().max(1)),
            mix,
            session_calls,
            stages,
            start_vus,
            think,
            flow,
            session,
            warmup_excludes,
            ungated: None,
            driver_cpus: Vec::new(),
        })
    }

    fn prepared(&self, suite: &AnySuite) -> Result<Vec<Prepared>, Failure> {
        let style = self.target.api_style.unwrap_or_default();
        if let Some(args) = &self.ungated {
            let params = mcp::tools_call_params(&self.tool, args).to_string();
            return Ok(vec![Prepared::new(&self.tool, params, rest_body(style, args), args.clone(), None)]);
        }
        // A mix: its cycle of slots, repeated to at least PREPARED slots (whole cycles, so every
        // tool keeps its weight). A flow: PREPARED slots of each of its tools in turn.
        let tools = crate::spec::flow_tools(&self.flow);
        let cycle: Vec<&str> = match (self.mix.is_empty(), tools.is_empty()) {
            (_, false) => tools.iter().flat_map(|t| std::iter::repeat_n(*t, PREPARED as usize)).collect(),
            (true, true) => vec![self.tool.as_str()],
            (false, true) => crate::spec::mix_cycle(&self.mix),
        };
        let n = (cycle.len() as u64) * PREPARED.div_ceil(cycle.len() as u64);
        (0..n)
            .map(|i| {
                let tool = cycle[(i % cycle.len() as u64) as usize];
                let (args, expected) = suite.call(tool, i).ok_or_else(|| {
                    Failure::new(
                        FailureReason::EngineError,
                        format!("suite {} has no tool {tool:?}", suite.name()),
                    )
                })?;
                let params = mcp::tools_call_params(tool, &args).to_string();
                Ok(Prepared::new(tool, params, rest_body(style, &args), args, Some(expected)))
            })
            .collect()
    }

    fn shared(&self, prepared: Vec<Prepared>) -> Shared {
        self.shared_with(prepared, Arc::new(Window::new(Instant::now())), Warming::default())
    }

    /// One driver thread's `Shared`, around the window and warm-up answers all threads share.
    fn shared_with(&self, prepared: Vec<Prepared>, window: Arc<Window>, warming: Warming) -> Shared {
        let now = Instant::now();
        Shared {
            target: self.target.clone(),
            rest: self.rest,
            lifecycle: self.lifecycle,
            prepared,
            per_tool: !self.mix.is_empty() || self.lifecycle == Lifecycle::Iteration,
            session_calls: self.session_calls,
            flow: flows::Flow::of(self),
            think: self.think,
            staging: (!self.stages.is_empty()).then(|| (self.start_vus, self.stages.clone())),
            warmup_counts: self.warmup_excludes == crate::spec::WarmupExcludes::Latency,
            call_limit: self.call_limit,
            window,
            warming,
            series: RefCell::new(series::Intervals::new(now, self.interval)),
            latencies: RefCell::new(worker::Latencies::new()),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_spawned(
    spec: &DriverSpec,
    suite: &AnySuite,
    shim: &mut ShimClient,
    out: &mut DriverOutcome,
    progress: &mut Progress,
    target: HttpTarget,
    pid: u32,
    started: Instant,
) -> Result<(), Failure> {
    let startup_deadline = started + spec.timeouts.startup();
    wait_for_port(shim, pid, target.port, startup_deadline)?;
    let mut plan = LoadPlan::new(&spec.workload, target, spec.timeouts.call())?;
    plan.driver_cpus.clone_from(&spec.driver_cpus);
    let hello = gate_server(&plan, suite, startup_deadline)?;
    out.protocol_version = Some(hello.protocol_version);
    out.server_info = hello.server_info;
    progress("gate", 1, 1);

    // Idle memory (a soak samples a whole idle phase), then the load with the sampler beside it.
    let idle = shim.memory(pid)?;
    out.memory_after_initialize = Some(idle.clone());
    out.cgroup_after_initialize = shim.cgroup_memory(pid)?;
    let soak_before = soak::idle_before(spec, shim, pid, progress)?;
    let (result, sampled, closed_at) = load_with_sampler(&plan, suite, shim, pid, progress)?;
    let mut m = result?;
    if let Some(series) = m.series.as_mut() {
        series.resources = sampled.resources;
    }
    m.server_cpu_cores =
        sampled.cpu_window.filter(|(_, d)| !d.is_zero()).map(|(ns, d)| ns as f64 / d.as_nanos() as f64);

    let total_ms = m.warmup_ms + plan.duration.as_millis() as u64;
    progress("load", total_ms, total_ms);
    let no_success = no_success_failure(&m);
    out.load = Some(m);

    let mut mem = LoadMemory {
        idle_before: Some(idle),
        peak_during: sampled.peak,
        samples: sampled.samples,
        interval_ms: SAMPLE_INTERVAL.as_millis() as u64,
        ..Default::default()
    };
    let died_idle =
        if sampled.died { None } else { after_the_load(spec, shim, pid, closed_at, &mut mem, progress) };
    mem.cgroup_peak_bytes = shim.cgroup_peak().ok().flatten();
    if let (Some(before), Some(load)) = (soak_before, out.load.as_mut()) {
        load.soak = Some(soak::figures(&spec.workload, load, before));
    }
    out.memory_end = mem.after.clone();
    out.cgroup_end = shim.cgroup_memory(pid)?;
    out.load_memory = Some(mem);
    if !sampled.died && died_idle.is_none() && no_success.is_none() {
        if let Some(soak) = out.load.as_mut().and_then(|l| l.soak.as_mut()) {
            soak::cycles(spec, &plan, suite, shim, pid, &mut soak.cycles, progress)?;
        }
    }
    if sampled.died {
        let when =
            sampled.died_at_ms.map(|t| format!(" ({:.1} s into it)", t as f64 / 1e3)).unwrap_or_default();
        return Err(Failure::new(FailureReason::Crash, format!("the server exited during the load{when}")));
    }
    if let Some(ms) = died_idle {
        return Err(Failure::new(
            FailureReason::Crash,
            format!("the server exited while idle after the load ({ms} ms after the last connection closed)"),
        ));
    }
    match no_success {
        Some(f) => Err(f),
        None => Ok(()),
    }
}

/// Drives a load with the sampler thread beside it (started when the load sets its window),
/// and returns the load's result, what the sampler saw, and the instant every connection was
/// closed. Only a sampler that could not start is an error here.
fn load_with_sampler(
    plan: &LoadPlan,
    suite: &AnySuite,
    shim: &mut ShimClient,
    pid: u32,
    progress: &mut Progress,
) -> Result<(Result<crate::spec::LoadMetrics, Failure>, sampler::Sampled, Instant), Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut sampler_thread = None;
    let mut sampler_err = None;
    // The first call starts the sampler; a warm-up rule calls again when it moves the window.
    let now = Instant::now();
    let edges = Arc::new(Mutex::new((now, now, now)));
    let mut on_window = |origin: Instant, warm_end: Instant, end: Instant| {
        *edges.lock().unwrap_or_else(PoisonError::into_inner) = (origin, warm_end, end);
        if sampler_thread.is_some() || sampler_err.is_some() {
            return;
        }
        match shim.try_clone() {
            Ok(s) => {
                let (st, e, every) = (stop.clone(), edges.clone(), plan.interval);
                sampler_thread = Some(std::thread::spawn(move || sampler(s, pid, e, every, st)));
            }
            Err(f) => sampler_err = Some(f),
        }
    };
    let result = drive(plan, suite, progress, &mut on_window);
    // `drive` returns once its runtime, and with it every connection, is gone.
    let closed_at = Instant::now();
    stop.store(true, Ordering::Relaxed);
    let sampled = sampler_thread.map(|t| t.join().unwrap_or_default()).unwrap_or_default();
    match sampler_err {
        Some(f) => Err(f),
        None => Ok((result, sampled, closed_at)),
    }
}

/// After the load, with every connection closed since `closed_at`: the idle phase (the
/// workload's `idle_after`: its series, the levels at its end, and `after` its last reading) or,
/// without one, a single reading 500 ms after (`after`, as records before the phase have it).
/// Returns when the server was found dead in the phase, if it was.
fn after_the_load(
    spec: &DriverSpec,
    shim: &mut ShimClient,
    pid: u32,
    closed_at: Instant,
    mem: &mut LoadMemory,
    progress: &mut Progress,
) -> Option<u64> {
    let idle_after_ms = spec.workload.idle_after_ms();
    if idle_after_ms == 0 {
        std::thread::sleep(Duration::from_millis(500).saturating_sub(closed_at.elapsed()));
        mem.after = shim.memory(pid).ok().filter(|m| m.processes > 0);
        return None;
    }
    let phase = idle::idle_phase(shim, pid, closed_at, Duration::from_millis(idle_after_ms), progress);
    mem.idle_after_ms = idle_after_ms;
    (mem.after_level, mem.after_cgroup_level) = phase.levels(idle_after_ms);
    mem.after = phase.last.filter(|_| phase.died_at_ms.is_none());
    mem.after_series = Some(phase.series);
    phase.died_at_ms
}

#[cfg(test)]
mod tests;
