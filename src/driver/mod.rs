//! Inside the sidecar: `benchlab driver` receives one cell's spec, runs its workload against the
//! server through the shim, and prints JSON lines on stdout — progress events, then one outcome.
//! It decides nothing about what to run; the orchestrator hands it everything.

pub mod httpclient;
pub mod load;
pub mod stdio;
pub mod workload;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::mcp::transport::HttpTarget;
use crate::record::{Failure, LoadMemory, LoadMetrics};
use crate::scenario::Workload;
use crate::shim::{ExitInfo, TreeMemory};

/// How to start the server process inside its container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerLaunch {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
}

/// Limits that turn misbehaviour into a failure instead of a hang.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    /// From the spawn request to the initialize result.
    pub startup_ms: u64,
    /// One request's answer.
    pub call_ms: u64,
    /// After stdin is closed, before SIGTERM.
    pub stop_grace_ms: u64,
    /// After SIGTERM, before SIGKILL.
    pub term_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { startup_ms: 30_000, call_ms: 10_000, stop_grace_ms: 2_000, term_ms: 2_000 }
    }
}

impl Timeouts {
    pub fn startup(&self) -> Duration {
        Duration::from_millis(self.startup_ms)
    }
    pub fn call(&self) -> Duration {
        Duration::from_millis(self.call_ms)
    }
}

/// Everything the driver needs for one cell.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriverSpec {
    /// The shared volume with the shim's control socket.
    pub lab_dir: PathBuf,
    pub server: ServerLaunch,
    /// How to reach the server over HTTP (HTTP cells only).
    #[serde(default)]
    pub http: Option<HttpTarget>,
    /// The tool suite the server exposes (`tools/list` must list exactly it).
    pub suite: String,
    pub workload: Workload,
    pub timeouts: Timeouts,
    /// Set for a server the lab knows nothing of (`benchlab measure` without a suite): no gate,
    /// any tool list and any answer that is not an error count, every serial call sends these
    /// arguments, and an empty serial-calls tool means the first one `tools/list` returns. The
    /// suite is then only a label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ungated: Option<serde_json::Value>,
}

/// What the driver measured, successful or not; a failure keeps what was measured before it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DriverOutcome {
    pub failure: Option<Failure>,
    /// The protocol version the server answered.
    pub protocol_version: Option<String>,
    pub server_info: Option<serde_json::Value>,
    /// Spawn request to initialize result, one per spawn, in nanoseconds.
    pub cold_start_ns: Vec<u64>,
    /// The first tools/list after each handshake, in nanoseconds.
    pub tools_list_ns: Vec<u64>,
    /// Serial call latencies: an HdrHistogram (V2 deflate, base64) of nanoseconds.
    pub calls_histogram: Option<String>,
    pub calls_ok: u64,
    /// Memory of the server's process tree after the handshake, and just before it was stopped.
    pub memory_after_initialize: Option<TreeMemory>,
    pub memory_end: Option<TreeMemory>,
    pub exits: Vec<ExitInfo>,
    /// HTTP load workloads: throughput, latency, errors; memory before, during and after.
    pub load: Option<LoadMetrics>,
    pub load_memory: Option<LoadMemory>,
}

/// One line of the driver's output.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DriverEvent {
    Progress { phase: String, done: u64, total: u64 },
    Outcome { outcome: Box<DriverOutcome> },
}

/// Prints one event line and flushes it, so the orchestrator sees progress as it happens.
pub fn emit(event: &DriverEvent) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, event);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// Runs the driver role: the spec comes as JSON (an argument or the environment).
pub fn run(spec: &DriverSpec) -> DriverOutcome {
    let outcome = workload::run(spec, &mut |phase, done, total| {
        emit(&DriverEvent::Progress { phase: phase.to_string(), done, total })
    });
    emit(&DriverEvent::Outcome { outcome: Box::new(outcome.clone()) });
    outcome
}
