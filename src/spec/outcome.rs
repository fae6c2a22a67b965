//! What a cell produced beyond samples: named failure reasons and the HTTP load figures (throughput,
//! latency histogram, errors by kind, memory under load). Stored in records as they are.

use std::collections::BTreeMap;

use crate::spec::{StableRule, TreeMemory};
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
    /// `--require-quiet`: the host stayed loud on the cell's CPUs for the whole wait allowed, so
    /// the cell was not run (the detail names the readings).
    NoisyHost,
    /// A backing service (`[[service]]`) was not ready in time, could not be seeded, or exited
    /// during the cell (the detail names it).
    Service,
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
            FailureReason::NoisyHost => "noisy_host",
            FailureReason::Service => "service",
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
    /// Serial calls warmed up by rule (`warmup = "stable"`): how the warm-up before these calls
    /// went. Absent for a fixed warm-up, in a load's latency, and in records written before
    /// warm-up rules existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupReport>,
}

/// How a warm-up by rule went (see `spec::StableRule` for the rule): whether the p50 settled or
/// the cap ended it, what it took, and the p50s it judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WarmupReport {
    /// The rule as the workload stated it (window and max in calls for `serial_calls`, in ms
    /// for load workloads).
    pub rule: StableRule,
    /// True when the rule ended warm-up; false when it reached `max` first.
    pub stable: bool,
    /// The correct calls the windows were made of: every warm-up call of `serial_calls` (a
    /// wrong answer fails the cell), the correct answers of every worker together under load.
    pub calls: u64,
    /// The warm-up's wall time, ms (rounded to the µs).
    pub ms: f64,
    /// How many windows were judged.
    pub windows_seen: u32,
    /// The p50 of each of the last (at most 64) windows judged, in order, ms; null for a window
    /// in which no call completed correctly.
    pub window_p50_ms: Vec<Option<f64>>,
}

/// Memory of the server while an HTTP load ran, and after it in the idle phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadMemory {
    /// The server's process tree after start-up, before the first virtual user connected.
    pub idle_before: Option<TreeMemory>,
    /// The sample with the largest tree RSS taken while the load ran (warm-up included).
    pub peak_during: Option<TreeMemory>,
    /// The server's process tree read once at the end of the post-load phase: `idle_after_ms`
    /// after every connection was closed (the last sample of `after_series`), or, when there was
    /// no idle phase (`idle_after_ms` 0, and every record written before it existed), 500 ms
    /// after. One reading, no interval: for the level after the load, read `after_level`.
    pub after: Option<TreeMemory>,
    /// How many samples were taken during the load, and how often (the idle phase samples at
    /// the same interval).
    pub samples: u32,
    pub interval_ms: u64,
    /// The server container's cgroup memory peak (memory.max_usage_in_bytes on cgroup v1,
    /// memory.peak on v2): it includes the shim (a few MiB) and the page cache the container
    /// touched.
    pub cgroup_peak_bytes: Option<u64>,
    /// The post-load idle phase as configured (the workload's `idle_after`), ms; 0 (absent) when
    /// there was none.
    #[serde(default, skip_serializing_if = "super::workload::is_zero")]
    pub idle_after_ms: u64,
    /// The idle phase sampled every `interval_ms`, from the instant every connection was closed
    /// to `idle_after_ms` after it (both ends included). Absent without an idle phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_series: Option<IdleSeries>,
    /// The server tree's RSS level at the end of the idle phase, with its range (see
    /// [`MemoryLevel`]): what "memory after the load" claims read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_level: Option<MemoryLevel>,
    /// The same for the container's cgroup memory usage (`after_series.cgroup_bytes`); absent
    /// when the shim could not read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_cgroup_level: Option<MemoryLevel>,
}

/// The idle phase after a load, one sample per index of every list (all of equal length).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdleSeries {
    /// When the sample was read, ms from the instant every connection was closed.
    pub t_ms: Vec<u64>,
    /// The server's process tree RSS (sum of VmRSS, as `TreeMemory::rss_bytes`), bytes.
    pub rss_bytes: Vec<u64>,
    /// The server container's cgroup memory usage, bytes: cgroup v1 `memory.usage_in_bytes`
    /// (v2 `memory.current`). It includes the shim, the page cache and tmpfs pages the
    /// container wrote (the server's log), and on v1 it is the kernel's approximate figure
    /// (per-CPU charge batches). Null where it could not be read.
    pub cgroup_bytes: Vec<Option<u64>>,
}

/// A memory level from the last part of a series: the samples whose time is within the last
/// 5 s or the last 20 % of the phase, whichever is shorter (at least the last 3 samples). The
/// interval is the range (min to max) of those samples, not a confidence interval: successive
/// samples of one process are not independent draws, so a bootstrap would claim a precision
/// they do not have; the range says how much the level still moved while it was read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryLevel {
    /// The median of those samples (for an even count, the mean of the middle two, rounded
    /// down), bytes.
    pub estimate: u64,
    /// The smallest and the largest of those samples, bytes.
    pub lower: u64,
    pub upper: u64,
    /// How many samples.
    pub n: u32,
    /// The time of the first and the last of them, ms from the instant every connection was
    /// closed (as `IdleSeries::t_ms`).
    pub from_ms: u64,
    pub to_ms: u64,
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
    /// The warm-up's length, ms: as configured for a fixed one, as it ran for a rule.
    pub warmup_ms: u64,
    /// A warm-up by rule (`warmup = "stable"`): how it went. Absent for a fixed warm-up and in
    /// records written before warm-up rules existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupReport>,
    /// The measured window, ms: from the instant it started (the end of the warm-up) to the
    /// later of the instant it closed (`window_nominal_ms` after) and the instant the last call
    /// counted in it completed (answered, or failed; a timeout completes at the call limit).
    /// Closed loop: a call counts when it completes inside the window, so this is the nominal
    /// window. Open loop: a call counts by its intended send time, and the last ones are
    /// answered after the window closed, so this runs on to the last answer. Records without
    /// `window_nominal_ms` store the nominal window here.
    pub window_ms: f64,
    /// The window the workload asked for (`duration`), ms; absent in records written before the
    /// window was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_nominal_ms: Option<u64>,
    /// Calls answered correctly, and calls that failed, in the window.
    pub ok: u64,
    pub failed: u64,
    /// `ok` per second of the measured window (`window_ms`).
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
    /// The driver's threads, when more than one drove the load: one per CPU of the driver's
    /// cpuset, no more than the connections, each with its share of them. Absent: one thread (as
    /// every load before this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_threads: Option<u32>,
    /// A few of the first error messages, for the reader (not counted anywhere).
    pub error_examples: Vec<String>,
    /// Per step, the latency of its correct completions in the window: under a mix, each tool;
    /// under `lifecycle = "iteration"`, also `initialize` (its HTTP request; over the legacy SSE
    /// transport, the handshake), `tools/list`, `session` (a session from the start of its
    /// initialize to its last step's answer, its close excluded; not kept with `session =
    /// "per_vu"`), `delete` (the session's close, a DELETE with its id over streamable HTTP) and
    /// `http` (every HTTP request of the window, whatever its status). Absent otherwise.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub steps: BTreeMap<String, HistogramMetric>,
    /// `lifecycle = "iteration"`: iterations completed (every step correct) in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u64>,
    /// Iterations: every HTTP request the driver made in the window (initialize, the initialized
    /// notification, calls, tools/list, DELETE; any status), and those per second of
    /// `window_ms` (k6's `http_reqs` and its rate). Their durations are `steps["http"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_rps: Option<f64>,
    /// A staged load (k6's ramping-vus): its stages as they ran (a reduced run's, scaled), from
    /// `start_vus`, and the most virtual users that were running at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<super::Stage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_vus: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_vus: Option<u32>,
    /// The load over time: per-interval latency and counts, the server's resources on the same
    /// clock. Absent in records written before the series existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<super::LoadSeries>,
    /// A `soak` workload's figures: the leak slope, the idle levels, latency drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<super::SoakFigures>,
}
