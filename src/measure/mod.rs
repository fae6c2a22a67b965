//! `benchlab measure`'s measuring: one local stdio MCP server command measured the way hyperfine
//! measures a command — cold starts, tools/list, serial calls — on pinned CPUs, in a lab cgroup
//! when it can, through the native engine, into a `MeasureResult`; or, with `--url`, a load on a
//! running HTTP server (`url`). It builds no images, writes no records and prints nothing:
//! notices and progress are events, the table is `cli::measure`'s.

pub mod url;

use std::path::PathBuf;

use serde::Serialize;

use crate::backend::native::{CellLimits, NativeEngine, NativeRun};
use crate::mcp::suite::Suite;
use crate::spec::TreeMemory;
use crate::spec::Workload;
use crate::spec::{DriverEvent, DriverOutcome, DriverSpec, ServerLaunch, Timeouts};
use crate::stats::LatencySummary;

const EXAMPLE: &str = "\
Examples:
  benchlab measure -- python3 server.py
      10 cold starts, tools/list, then 200 warm-up + 1000 serial calls of the first tool the
      server lists, with {} as arguments.
  benchlab measure --tool echo --args '{\"message\": \"hi\"}' --runs 20 --calls 5000 -- node dist/index.js
  benchlab measure --suite weekly --json -- uv run weekly.py
      The weekly suite's correctness gate first (its tools, its fixed inputs), then its calls.
  benchlab measure --url http://127.0.0.1:8000/mcp --workers 50 --duration 10
      A running server over streamable HTTP: 50 virtual users calling back to back for 10 s
      (after 2 s of warm-up), from this process pinned to --driver-cpus (default: the first
      allowed CPU; pin the server elsewhere yourself, e.g. taskset -c 1).
  benchlab measure --url http://127.0.0.1:8000/mcp --rate 20000 --suite weekly --json
      An open loop at 20,000 calls/s over 100 connections; latency from each call's intended
      send time (no coordinated omission), with the late and dropped calls.

The command runs in this folder with this environment. As root, the server (and the lab's shim,
which stands in for a client's parent process) runs in its own cgroup on --server-cpus with the
memory limit; otherwise both sides are only pinned by CPU affinity, and the output says so.";

/// Measure a local stdio MCP server command: cold start, tools/list, serial calls.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = EXAMPLE)]
pub struct MeasureArgs {
    /// Fresh server processes to time from spawn to the initialize result (0: none).
    #[arg(long, default_value_t = 10)]
    pub runs: u32,
    /// Serial tools/call requests to time, after the warm-up (0: none).
    #[arg(long, default_value_t = 1000)]
    pub calls: u32,
    /// Unrecorded calls before the timed ones.
    #[arg(long, default_value_t = 200)]
    pub warmup: u32,
    /// The tool to call (default: the first tool tools/list returns; with --suite, the suite's
    /// first tool).
    #[arg(long)]
    pub tool: Option<String>,
    /// The call's arguments, a JSON object (not with --suite, whose calls bring their own).
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Check the server against a lab suite (weekly, pulse, bench) before measuring; without,
    /// any tool list and any answer that is not an error is accepted. With --url it may also be
    /// a suite file (a path ending in .toml): a benchmark's own tools, their arguments and how
    /// each answer is checked (docs/reproduce.md, step 5).
    #[arg(long)]
    pub suite: Option<String>,
    /// The server's CPUs (cpuset list; default: the last allowed CPU).
    #[arg(long, value_name = "CPUS")]
    pub server_cpus: Option<String>,
    /// The measuring client's CPUs (default: another allowed CPU). With --url, two or more CPUs
    /// drive the load from one thread pinned to each, the connections dealt among them.
    #[arg(long, value_name = "CPUS")]
    pub driver_cpus: Option<String>,
    /// Allow server and client on one CPU (needed on a single-CPU machine; figures then include
    /// contention).
    #[arg(long)]
    pub shared: bool,
    /// The server side's memory limit, swap disabled ("512MiB", "1GiB"); needs a cgroup.
    #[arg(long, value_name = "SIZE", value_parser = crate::text::parse_memory)]
    pub memory: Option<u64>,
    /// Do not use a cgroup even when one could be made: CPU pinning only.
    #[arg(long)]
    pub no_cgroup: bool,
    /// How long to wait for the initialize result of one spawn ("30s", "500ms").
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = crate::text::parse_duration_arg)]
    pub startup_timeout: crate::text::DurationArg,
    /// How long to wait for one call's answer ("10s", "500ms").
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::text::parse_duration_arg)]
    pub call_timeout: crate::text::DurationArg,
    /// Print the result as JSON on stdout instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Drive a server that is already running, over HTTP: http://ADDRESS:PORT/PATH (an IP
    /// address or localhost; plain HTTP/1.1). Instead of a command.
    #[arg(long, value_name = "URL", conflicts_with_all = ["runs", "calls", "warmup", "server_cpus", "shared", "memory", "no_cgroup"])]
    pub url: Option<String>,
    /// With --url: streamable-http (default) or sse (the legacy HTTP+SSE transport).
    #[arg(long, value_name = "TRANSPORT")]
    pub transport: Option<String>,
    /// With --url: virtual users, each on its own connection calling back to back (default
    /// 10); with --rate, the connections the calls are spread over (default 100).
    #[arg(long, value_name = "N")]
    pub workers: Option<u32>,
    /// With --url: an open loop at this many calls per second instead of a closed loop.
    #[arg(long, value_name = "CALLS_PER_S")]
    pub rate: Option<u64>,
    /// With --url: the measured window ("10s", the default; "500ms", "2m").
    #[arg(long, value_name = "DURATION", value_parser = crate::text::parse_duration_arg)]
    pub duration: Option<crate::text::DurationArg>,
    /// With --url: the warm-up before the window, its calls not counted ("2s", the default).
    #[arg(long, value_name = "DURATION", value_parser = crate::text::parse_duration_arg)]
    pub warmup_secs: Option<crate::text::DurationArg>,
    /// The server command and its arguments, after `--` (not with --url).
    #[arg(last = true, required_unless_present = "url", conflicts_with = "url", value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Where the measurement ran.
#[derive(Debug, Clone, Serialize)]
pub struct MeasurePlacement {
    pub server_cpus: String,
    pub driver_cpus: String,
    pub memory_limit_bytes: Option<u64>,
    /// "cgroup v1", "cgroup v2", or "none (CPU affinity only)".
    pub isolation: String,
}

/// What `--json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct MeasureResult {
    pub command: Vec<String>,
    /// The suite whose gate was passed, if any.
    pub suite: Option<String>,
    /// The tool called (None: the first one the server listed).
    pub tool: Option<String>,
    pub protocol_version: Option<String>,
    /// The server's `serverInfo`: its claim, bounded as a record bounds it
    /// (`record::claimed::bound_server_info`).
    pub server_info: Option<serde_json::Value>,
    /// Its size in bytes when it was cut to its name and version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info_truncated: Option<u64>,
    pub cold_start: Option<LatencySummary>,
    pub tools_list: Option<LatencySummary>,
    pub calls: Option<LatencySummary>,
    /// Serial calls per second (1 / mean latency).
    pub throughput_per_s: Option<f64>,
    pub memory_after_initialize: Option<TreeMemory>,
    pub memory_end: Option<TreeMemory>,
    /// The most memory the server's cgroup used (cgroup runs only).
    pub cgroup_peak_bytes: Option<u64>,
    pub placement: MeasurePlacement,
}

/// Why a measurement stopped, which is also the exit class it implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeasureErrorKind {
    /// An argument that cannot be used (CPUs, suite, tool, --args).
    BadInput,
    /// This host: no executable, no working folder, no runtime, the engine failed.
    Environment,
    /// The server did not do what a server must (a crash, a wrong answer, out of memory).
    Failed,
    /// Ctrl-C: the server and the client were stopped.
    Interrupted,
}

/// A measurement that did not finish, with what the user should read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct MeasureError {
    pub kind: MeasureErrorKind,
    pub message: String,
}

impl MeasureError {
    fn new(kind: MeasureErrorKind, message: impl Into<String>) -> Self {
        MeasureError { kind, message: message.into() }
    }

    fn input(message: impl Into<String>) -> Self {
        MeasureError::new(MeasureErrorKind::BadInput, message)
    }

    fn environment(message: impl Into<String>) -> Self {
        MeasureError::new(MeasureErrorKind::Environment, message)
    }

    fn failed(message: impl Into<String>) -> Self {
        MeasureError::new(MeasureErrorKind::Failed, message)
    }
}

/// What a measurement reports while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeasureEvent {
    /// A departure from what was asked (no cgroup, no memory limit), for the user to read.
    Notice(String),
    /// A workload starts: "cold start" or "calls".
    Workload(String),
    /// The driver's progress within the workload.
    Progress { phase: String, done: u64, total: u64 },
}

/// Chooses the two CPU sets: given ones, else the last allowed CPU for the server and the one
/// before it for the driver.
fn choose_cpus(args: &MeasureArgs, allowed: &[u32]) -> Result<(String, String), MeasureError> {
    let last = *allowed.last().ok_or_else(|| MeasureError::input("this process may run on no CPU"))?;
    let server = args.server_cpus.clone().unwrap_or_else(|| last.to_string());
    let driver = match &args.driver_cpus {
        Some(d) => d.clone(),
        None if args.shared => server.clone(),
        None => {
            let server_set = crate::placement::parse_cpu_list(&server).map_err(MeasureError::input)?;
            let other = allowed.iter().rev().find(|c| !server_set.contains(c)).ok_or_else(|| {
                MeasureError::input(
                    format!(
                        "server and client need two different CPUs, and only {} is free here; pass --shared to put both on one (figures then include contention)",
                        crate::placement::format_cpu_list(allowed)
                    ),
                )
            })?;
            other.to_string()
        }
    };
    let s = crate::placement::parse_cpu_list(&server)
        .map_err(|e| MeasureError::input(format!("--server-cpus: {e}")))?;
    let d = crate::placement::parse_cpu_list(&driver)
        .map_err(|e| MeasureError::input(format!("--driver-cpus: {e}")))?;
    for c in s.iter().chain(&d) {
        if !allowed.contains(c) {
            return Err(MeasureError::input(format!(
                "CPU {c} is not one this process may use ({})",
                crate::placement::format_cpu_list(allowed)
            )));
        }
    }
    if !args.shared && s.iter().any(|c| d.contains(c)) {
        return Err(MeasureError::input(format!(
            "server CPUs {server} and client CPUs {driver} overlap; pass --shared to allow it"
        )));
    }
    Ok((server, driver))
}

/// What the driver gets: the suite (a label when ungated), the tool it calls, and the arguments
/// of an ungated run (no suite named: the gate is off).
fn suite_and_tool(args: &MeasureArgs) -> Result<(String, String, Option<serde_json::Value>), MeasureError> {
    match &args.suite {
        Some(name) => {
            let suite = Suite::from_name(name).ok_or_else(|| {
                MeasureError::input(format!("unknown suite {name:?}: use weekly, pulse or bench"))
            })?;
            if args.args.is_some() {
                return Err(MeasureError::input(
                    "--args cannot go with --suite: the suite's calls bring their own arguments",
                ));
            }
            let tool = args.tool.clone().unwrap_or_else(|| suite.tools()[0].to_string());
            if suite.call(&tool, 0).is_none() {
                return Err(MeasureError::input(format!(
                    "suite {name} has no tool {tool:?} (it has: {})",
                    suite.tools().join(", ")
                )));
            }
            Ok((name.clone(), tool, None))
        }
        None => Ok(("none".into(), args.tool.clone().unwrap_or_default(), Some(call_args(args)?))),
    }
}

/// The arguments of an ungated call: --args, a JSON object, or `{}`.
fn call_args(args: &MeasureArgs) -> Result<serde_json::Value, MeasureError> {
    let Some(json) = &args.args else {
        return Ok(serde_json::json!({}));
    };
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| MeasureError::input(format!("--args is not JSON: {e}")))?;
    if !v.is_object() {
        return Err(MeasureError::input("--args must be a JSON object, e.g. '{\"message\": \"hi\"}'"));
    }
    Ok(v)
}

/// Measures the command of `args` (cold starts, then serial calls, as `args` asks), reporting
/// notices and progress through `on_event`.
pub fn measure(
    args: &MeasureArgs,
    on_event: &mut (dyn FnMut(MeasureEvent) + Send),
) -> Result<MeasureResult, MeasureError> {
    if args.transport.is_some()
        || args.workers.is_some()
        || args.rate.is_some()
        || args.duration.is_some()
        || args.warmup_secs.is_some()
    {
        return Err(MeasureError::input(
            "--transport, --workers, --rate, --duration and --warmup-secs go with --url (a running HTTP server); a command is measured with --runs, --calls and --warmup",
        ));
    }
    let allowed = crate::placement::available_cpus();
    let (server_cpus, driver_cpus) = choose_cpus(args, &allowed)?;
    let (suite, tool, ungated) = suite_and_tool(args)?;
    let exe = std::env::current_exe()
        .map_err(|e| MeasureError::environment(format!("find the benchlab executable: {e}")))?;
    let cwd = std::env::current_dir()
        .map_err(|e| MeasureError::environment(format!("read the working folder: {e}")))?;
    let engine = choose_engine(args, on_event);
    let limits = CellLimits {
        server_cpus: server_cpus.clone(),
        driver_cpus: driver_cpus.clone(),
        memory_limit: args.memory.filter(|_| engine.uses_cgroups()),
        pids_limit: None,
    };
    let placement = MeasurePlacement {
        server_cpus,
        driver_cpus,
        memory_limit_bytes: limits.memory_limit,
        isolation: engine.describe().api_version,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| MeasureError::environment(format!("start the async runtime: {e}")))?;
    let session = Session {
        args,
        engine,
        limits,
        exe,
        runtime,
        launch: ServerLaunch {
            argv: args.command.clone(),
            env: Vec::new(),
            cwd: Some(cwd.display().to_string()),
        },
        timeouts: Timeouts {
            startup_ms: args.startup_timeout.ms,
            call_ms: args.call_timeout.ms,
            ..Timeouts::default()
        },
        suite,
        ungated,
    };
    let cold = (args.runs > 0)
        .then(|| session.run(Workload::ColdStart { spawns: args.runs }, "cold start", on_event))
        .transpose()?;
    let serial = (args.calls > 0)
        .then(|| {
            let warmup = crate::spec::Warmup::Fixed(args.warmup.into());
            let workload = Workload::SerialCalls { tool: tool.clone(), warmup, calls: args.calls };
            session.run(workload, "calls", on_event)
        })
        .transpose()?;
    Ok(summarize(args, (!tool.is_empty()).then_some(tool), cold.as_ref(), serial.as_ref(), placement))
}

/// The native engine in a lab cgroup, or with CPU pinning only when asked or when no cgroup can
/// be made (with a notice); a notice too when --memory cannot be honoured.
fn choose_engine(args: &MeasureArgs, on_event: &mut (dyn FnMut(MeasureEvent) + Send)) -> NativeEngine {
    let engine = if args.no_cgroup {
        NativeEngine::pinned_only()
    } else {
        match NativeEngine::new() {
            Ok(e) => e,
            Err(e) => {
                on_event(MeasureEvent::Notice(format!(
                    "notice: no cgroup for the server ({}); measuring with CPU pinning only",
                    first_line(&e.to_string())
                )));
                NativeEngine::pinned_only()
            }
        }
    };
    if args.memory.is_some() && !engine.uses_cgroups() {
        on_event(MeasureEvent::Notice(
            "notice: --memory needs a cgroup; the server runs without a memory limit".into(),
        ));
    }
    engine
}

/// What every workload of one measurement shares: the engine, the limits, the server's launch.
struct Session<'a> {
    args: &'a MeasureArgs,
    engine: NativeEngine,
    limits: CellLimits,
    exe: PathBuf,
    runtime: tokio::runtime::Runtime,
    launch: ServerLaunch,
    timeouts: Timeouts,
    suite: String,
    ungated: Option<serde_json::Value>,
}

impl Session<'_> {
    fn spec(&self, workload: Workload) -> DriverSpec {
        DriverSpec {
            lab_dir: PathBuf::new(),
            server: self.launch.clone(),
            http: None,
            suite: self.suite.clone(),
            suite_data: None,
            workload,
            timeouts: self.timeouts,
            ungated: self.ungated.clone(),
            services: Vec::new(),
            driver_cpus: Vec::new(),
        }
    }

    /// Runs one workload; a failure of the server, an OOM kill or Ctrl-C ends the measurement.
    fn run(
        &self,
        workload: Workload,
        what: &str,
        on_event: &mut (dyn FnMut(MeasureEvent) + Send),
    ) -> Result<NativeRun, MeasureError> {
        let spec = self.spec(workload);
        let limit = crate::backend::native::time_limit(&spec);
        on_event(MeasureEvent::Workload(what.to_string()));
        let mut on_driver_event = |e: DriverEvent| {
            if let DriverEvent::Progress { phase, done, total } = e {
                on_event(MeasureEvent::Progress { phase, done, total });
            }
        };
        // Shim and driver run in their own process groups, so a Ctrl-C reaches only us: stop
        // the cell here (dropping it kills its processes and removes its cgroup).
        let r = self
            .runtime
            .block_on(async {
                tokio::select! {
                    r = self.engine.run_spec(spec, &self.limits, &self.exe, limit, &mut on_driver_event) => Some(r),
                    _ = tokio::signal::ctrl_c() => None,
                }
            })
            .ok_or_else(|| {
                MeasureError::new(
                    MeasureErrorKind::Interrupted,
                    "interrupted; the server and the client were stopped",
                )
            })?
            .map_err(|e| MeasureError::environment(format!("measure {}: {e}", self.args.command.join(" "))))?;
        if let Some(f) = &r.outcome.failure {
            return Err(MeasureError::failed(format!("{what} failed: {f}")));
        }
        if r.oom_killed {
            return Err(MeasureError::failed(format!(
                "{what}: the server was killed for exceeding its memory limit"
            )));
        }
        Ok(r)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

fn summarize(
    args: &MeasureArgs,
    tool: Option<String>,
    cold: Option<&NativeRun>,
    serial: Option<&NativeRun>,
    placement: MeasurePlacement,
) -> MeasureResult {
    let any: Option<&DriverOutcome> = serial.or(cold).map(|r| &r.outcome);
    let calls = serial
        .and_then(|r| r.outcome.calls_histogram.as_ref())
        .and_then(|h| crate::stats::decode_histogram(h).ok())
        .and_then(|h| crate::stats::summarize(&h));
    let tools_list: Vec<u64> =
        [cold, serial].iter().flatten().flat_map(|r| r.outcome.tools_list_ns.clone()).collect();
    let info = crate::record::claimed::bound_server_info(any.and_then(|o| o.server_info.clone()));
    MeasureResult {
        command: args.command.clone(),
        suite: args.suite.clone(),
        tool,
        protocol_version: any.and_then(|o| o.protocol_version.clone()),
        server_info: info.0,
        server_info_truncated: info.1,
        cold_start: cold.and_then(|r| crate::stats::summarize_samples(&r.outcome.cold_start_ns)),
        tools_list: crate::stats::summarize_samples(&tools_list),
        throughput_per_s: calls.as_ref().filter(|c| c.mean_ms > 0.0).map(|c| 1000.0 / c.mean_ms),
        calls,
        memory_after_initialize: any.and_then(|o| o.memory_after_initialize.clone()),
        memory_end: any.and_then(|o| o.memory_end.clone()),
        cgroup_peak_bytes: [cold, serial].iter().flatten().filter_map(|r| r.memory_peak).max(),
        placement,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        m: MeasureArgs,
    }

    fn args(a: &[&str]) -> MeasureArgs {
        T::parse_from(std::iter::once("t").chain(a.iter().copied())).m
    }

    #[test]
    fn cpus_default_to_two_different_ones_and_refuse_overlap() {
        let a = args(&["--", "srv"]);
        assert_eq!(
            choose_cpus(&a, &[0, 1]).unwrap_or_else(|e| panic!("{}", e.message)),
            ("1".into(), "0".into())
        );
        assert!(choose_cpus(&a, &[0]).err().map(|e| e.message).unwrap_or_default().contains("--shared"));
        let a = args(&["--shared", "--", "srv"]);
        assert_eq!(
            choose_cpus(&a, &[0]).unwrap_or_else(|e| panic!("{}", e.message)),
            ("0".into(), "0".into())
        );
        let a = args(&["--server-cpus", "0", "--driver-cpus", "0", "--", "srv"]);
        assert!(choose_cpus(&a, &[0, 1]).err().map(|e| e.message).unwrap_or_default().contains("overlap"));
        let a = args(&["--server-cpus", "5", "--", "srv"]);
        assert!(choose_cpus(&a, &[0, 1]).is_err());
    }

    #[test]
    fn the_gate_is_off_without_a_suite() {
        assert_eq!(
            suite_and_tool(&args(&["--", "s"])).unwrap_or_else(|e| panic!("{}", e.message)),
            ("none".into(), String::new(), Some(serde_json::json!({})))
        );
        assert_eq!(
            suite_and_tool(&args(&["--tool", "echo", "--args", "{\"m\": 1}", "--", "s"]))
                .unwrap_or_else(|e| panic!("{}", e.message)),
            ("none".into(), "echo".into(), Some(serde_json::json!({"m": 1})))
        );
        assert_eq!(
            suite_and_tool(&args(&["--suite", "weekly", "--", "s"]))
                .unwrap_or_else(|e| panic!("{}", e.message)),
            ("weekly".into(), "add_numbers".into(), None)
        );
        assert!(suite_and_tool(&args(&["--suite", "weekly", "--args", "{}", "--", "s"])).is_err());
        assert!(suite_and_tool(&args(&["--args", "[1]", "--", "s"])).is_err());
    }
}
