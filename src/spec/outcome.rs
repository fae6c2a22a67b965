//! What a cell produced beyond samples: named failure reasons and the HTTP load figures (throughput,
//! latency histogram, errors by kind, memory under load). Stored in records as they are.

use std::collections::BTreeMap;

use crate::spec::TreeMemory;
use crate::stats::LatencySummary;
use serde::{Deserialize, Serialize};

/// Why a cell failed. Named reasons, never message strings, so failures can be counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// The server exited or closed its stdout while it was expected to answer.
    Crash,
    /// No initialize result within the start-up limit.
    StartupTimeout,
    /// No answer to a request within the call limit.
    Timeout,
    /// Something on stdout that is not the protocol, or a refused handshake.
    ProtocolError,
    /// A tool answered with a value other than the expected one, or tools/list was wrong.
    WrongResult,
    /// A tool answered with an error where a value was expected.
    ToolError,
    /// The server was killed by the kernel for exceeding its memory limit.
    Oom,
    /// The lab itself failed: engine, shim, driver or image.
    EngineError,
    /// A cluster's node failed under the cell (Slurm's NODE_FAIL), after its one requeue.
    NodeFail,
}

impl FailureReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Crash => "crash",
            FailureReason::StartupTimeout => "startup_timeout",
            FailureReason::Timeout => "timeout",
            FailureReason::ProtocolError => "protocol_error",
            FailureReason::WrongResult => "wrong_result",
            FailureReason::ToolError => "tool_error",
            FailureReason::Oom => "oom",
            FailureReason::EngineError => "engine_error",
            FailureReason::NodeFail => "node_fail",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    pub reason: FailureReason,
    pub detail: String,
}

impl Failure {
    pub fn new(reason: FailureReason, detail: impl Into<String>) -> Self {
        Failure { reason, detail: detail.into() }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason.as_str(), self.detail)
    }
}

/// A latency metric from a histogram (serial calls).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistogramMetric {
    pub summary: LatencySummary,
    /// HdrHistogram V2 deflate encoding, base64, values in nanoseconds.
    pub histogram: String,
}

/// Memory of the server while an HTTP load ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadMemory {
    /// The server's process tree after start-up, before the first virtual user connected.
    pub idle_before: Option<TreeMemory>,
    /// The sample with the largest tree RSS taken while the load ran (warm-up included).
    pub peak_during: Option<TreeMemory>,
    /// After every connection was closed, once the server had a moment to settle.
    pub after: Option<TreeMemory>,
    /// How many samples were taken during the load, and how often.
    pub samples: u32,
    pub interval_ms: u64,
    /// The server container's cgroup memory peak (memory.max_usage_in_bytes on cgroup v1,
    /// memory.peak on v2): it includes the shim (a few MiB) and the page cache the container
    /// touched.
    pub cgroup_peak_bytes: Option<u64>,
}

/// How an HTTP load sends its calls; stored as `"closed"` or `"open"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadMode {
    /// Virtual users call back to back (`concurrency`, `http_api`).
    #[default]
    Closed,
    /// Calls at a fixed arrival rate (`open_loop`).
    Open,
}

impl LoadMode {
    pub fn as_str(self) -> &'static str {
        match self {
            LoadMode::Closed => "closed",
            LoadMode::Open => "open",
        }
    }
}

/// Throughput, latency and errors of an HTTP load (closed or open loop).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadMetrics {
    /// `closed` (concurrency, http_api) or `open` (open_loop).
    pub mode: LoadMode,
    /// Virtual users (closed loop) and HTTP connections.
    pub workers: u32,
    pub connections: u32,
    pub warmup_ms: u64,
    /// The measured window as it really lasted, milliseconds.
    pub window_ms: f64,
    /// Calls answered correctly, and calls that failed, in the window.
    pub ok: u64,
    pub failed: u64,
    /// `ok` per second of the window.
    pub throughput_rps: f64,
    /// failed / (ok + failed); 0 when nothing was sent.
    pub error_rate: f64,
    /// Failed calls per kind: connect, http_status, protocol_error, tool_error, wrong_result,
    /// timeout, session_expired.
    pub errors: BTreeMap<String, u64>,
    /// MCP sessions opened (initialize answered), and how many of them re-initialized after a
    /// 404 on an expired session.
    pub sessions: u64,
    pub reinitializations: u64,
    /// Kept-alive connections the server closed or reset between two requests, reopened by the
    /// driver (warm-up included). Each costs a TCP handshake inside the measured figures.
    #[serde(default)]
    pub reconnects: u64,
    /// Latency of the correct calls in the window (open loop: from the intended send time).
    pub latency: Option<HistogramMetric>,
    /// Open loop: the target rate, requests that started later than their intended time by more
    /// than a millisecond, and intended requests never sent before the window closed.
    pub target_rps: Option<f64>,
    pub late: Option<u64>,
    pub dropped: Option<u64>,
    /// The server's process tree CPU time during the window, in cores (1.0 = one core busy).
    pub server_cpu_cores: Option<f64>,
    /// The driver's own CPU time over warm-up and window, in cores: near 1.0 on a one-core
    /// driver cpuset means the client, not the server, set the pace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_cpu_cores: Option<f64>,
    /// A few of the first error messages, for the reader (not counted anywhere).
    pub error_examples: Vec<String>,
}
