//! The messages that cross a process or machine boundary: the driver's spec, its JSON-line events
//! and outcome, and the shim's control-socket requests and replies. Pure serde types, no I/O.

use std::path::PathBuf;

use crate::mcp::transport::HttpTarget;
use crate::spec::{
    Failure, LoadMemory, LoadMetrics, Placement, Sandbox, ServerLaunch, Timeouts, WarmupReport, Workload,
};
use serde::{Deserialize, Serialize};

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
    /// The suite itself when it is written as data (`[[suite]]`, a suite file); `suite` is then
    /// its name. None for the built-in suites, which the driver knows by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_data: Option<crate::mcp::data::SuiteData>,
    pub workload: Workload,
    pub timeouts: Timeouts,
    /// Set for a server the lab knows nothing of (`benchlab measure` without a suite): no gate,
    /// any tool list and any answer that is not an error count, every serial call sends these
    /// arguments, and an empty serial-calls tool means the first one `tools/list` returns. The
    /// suite is then only a label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ungated: Option<serde_json::Value>,
    /// Backing services on the cell's loopback: the driver waits for each, empties and seeds it
    /// before the gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<crate::spec::ServiceSpec>,
    /// Two or more CPUs: a load is driven by one thread pinned to each (the backend sets them
    /// from the cell's placement, `placement::driver_thread_cpus`). Empty: one thread.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_cpus: Vec<u32>,
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
    /// Serial calls warmed up by rule: how the warm-up went (the record's `metrics.calls.warmup`);
    /// absent for a fixed warm-up (a load's report is `load.warmup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupReport>,
    /// Memory of the server's process tree after the handshake, and just before it was stopped.
    pub memory_after_initialize: Option<TreeMemory>,
    pub memory_end: Option<TreeMemory>,
    /// The server container's cgroup memory read at the same two points (absent where the shim
    /// could not read it, and from drivers older than it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_after_initialize: Option<CgroupMemory>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_end: Option<CgroupMemory>,
    pub exits: Vec<ExitInfo>,
    /// HTTP load workloads: throughput, latency, errors; memory before, during and after.
    pub load: Option<LoadMetrics>,
    pub load_memory: Option<LoadMemory>,
    /// The backing services the driver readied and seeded, in the spec's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<crate::spec::ServiceReady>,
}

/// One line of the driver's output.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DriverEvent {
    Progress { phase: String, done: u64, total: u64 },
    Outcome { outcome: Box<DriverOutcome> },
}

/// The control socket's file name inside the shared volume.
pub const SOCKET: &str = "ctl.sock";

/// A request from the driver, one JSON object per line on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Spawn the server on two anonymous pipes; the `Spawned` reply carries the write end of its
    /// stdin and the read end of its stdout as SCM_RIGHTS, in that order.
    /// With `output_to_log` (HTTP servers), stdin is /dev/null, stdout joins stderr in the log,
    /// and no descriptors come back.
    Spawn {
        argv: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
        stderr_log: PathBuf,
        #[serde(default)]
        output_to_log: bool,
    },
    /// The memory of the server's process tree now.
    Memory { pid: u32 },
    /// The CPU time (user + system) the server's live process tree has used so far.
    Cpu { pid: u32 },
    /// The server container's cgroup memory peak.
    CgroupPeak,
    /// The server container's cgroup memory usage now.
    CgroupUsage,
    /// The server container's cgroup memory now, beside the process tree of `pid`.
    CgroupMemory { pid: u32 },
    /// Stop the server: the driver has closed its stdin; wait `grace_ms` for it to exit, then
    /// SIGTERM its process group, wait `term_ms`, then SIGKILL.
    Stop { pid: u32, grace_ms: u64, term_ms: u64 },
    /// Stop everything and exit.
    Shutdown,
}

/// The shim's answer to one request, one JSON object per line.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    Spawned { pid: u32 },
    Memory { memory: TreeMemory },
    Cpu { cpu_ns: u64 },
    CgroupPeak { bytes: Option<u64>, source: String },
    CgroupUsage { bytes: Option<u64>, source: String },
    CgroupMemory { memory: Option<CgroupMemory>, source: String },
    Stopped { exit: ExitInfo, memory_before_stop: Option<TreeMemory> },
    Bye,
    Error { message: String },
}

/// How a server process ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExitInfo {
    /// `exited` by itself after stdin closed, `terminated` by SIGTERM, `killed` by SIGKILL, or
    /// `already_exited` before the stop was asked for.
    pub how: String,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Milliseconds from the stop request to the exit.
    pub stop_ms: f64,
    /// Processes of the server's user (or, without one, of its container) still alive once the
    /// server itself had exited and its process group was killed, or found before its spawn:
    /// the shim killed them before answering. Absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_behind: Option<Leftovers>,
}

/// Processes a server left behind, found and killed by the shim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leftovers {
    pub processes: u32,
    /// Their summed VmRSS when found, bytes.
    pub rss_bytes: u64,
}

impl Leftovers {
    pub fn plus(self, other: Leftovers) -> Leftovers {
        Leftovers { processes: self.processes + other.processes, rss_bytes: self.rss_bytes + other.rss_bytes }
    }
}

/// The server container's cgroup memory at one point. It counts every process of the container
/// (the shim's few MiB included) and, in `usage_bytes`, the page cache and tmpfs pages it
/// touched; a process outside the server's tree (a detached child) cannot hide from it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupMemory {
    /// cgroup v1 `memory.usage_in_bytes` (v2 `memory.current`, untested: no v2 host here).
    pub usage_bytes: u64,
    /// cgroup v1 `memory.max_usage_in_bytes` (v2 `memory.peak`): the high-water mark since the
    /// container started.
    pub peak_bytes: Option<u64>,
    /// Anonymous memory charged to the cgroup: v1 `memory.stat` `total_rss` (v2 `anon`).
    pub anon_bytes: Option<u64>,
    /// `anon_bytes` less the anonymous resident memory (RssAnon) of the server's process tree
    /// and of the shim: memory held by processes outside the server's tree, 0 when negative.
    pub outside_tree_bytes: Option<u64>,
}

/// Memory of a process tree, summed over the server and all its descendants.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeMemory {
    /// Sum of VmRSS (resident set) over the tree.
    pub rss_bytes: u64,
    /// Sum of VmHWM (each process's own peak resident set) over the tree: an upper bound on the
    /// tree's peak, exact for a single process.
    pub hwm_bytes: u64,
    pub processes: u32,
}

/// One cell as a backend receives it: what the driver does, where it runs and how the server is
/// confined. A value, so a cluster backend can hand it to a worker on another machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellJob {
    pub run_id: String,
    pub cell_id: String,
    /// Its position in the run (for unique container names).
    pub index: usize,
    /// The driver's spec; `lab_dir` is the backend's to set.
    pub driver: DriverSpec,
    pub placement: Placement,
    pub sandbox: Sandbox,
    /// The lab's own (static) executable: shim and driver.
    pub benchlab_exe: PathBuf,
    /// Labels for everything the cell creates beside the lab's own (a cluster's job id, so
    /// the node's epilog can find what a cancelled job left).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// `--require-quiet`: wait up to this many seconds for the cell's CPUs to be quiet before
    /// the cell starts; still loud then, the cell fails as `noisy_host` (its backend checks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_quiet_s: Option<u64>,
    /// Backing services to start beside the server, in its network namespace, before the driver.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<crate::spec::ServiceJob>,
}

impl CellJob {
    /// A generous bound on the whole cell.
    pub fn time_limit(&self) -> std::time::Duration {
        self.driver.workload.time_limit(&self.driver.timeouts)
    }
}
