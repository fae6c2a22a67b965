//! What a load looked like over time, and what a soak concluded from it: per-interval latency
//! histograms and counts, the server's resources sampled on the same clock (`LoadSeries`), and
//! the soak's figures (`SoakFigures`: the leak slope with its interval, the idle levels before
//! and after, latency drift). Pure serde types; the driver fills them, records store them.

use serde::{Deserialize, Serialize};

use crate::spec::MemoryLevel;
pub use crate::stats::Slope;

/// How long an interval of a load's time series is when the workload does not say.
pub const DEFAULT_SERIES_INTERVAL_MS: u64 = 1_000;

/// A load over time, from the instant its first call was due (the series' origin, 0 ms) to its
/// last completion: warm-up (or ramp) included, the measured window marked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSeries {
    /// The length of every interval, ms.
    pub interval_ms: u64,
    /// The measured window (the soak's steady phase), ms from the origin: the warm-up or ramp
    /// ends at `window_from_ms`.
    pub window_from_ms: u64,
    pub window_to_ms: u64,
    /// One entry per interval, in time order, from the origin to the last completion (intervals
    /// without completions included).
    pub intervals: Vec<SeriesInterval>,
    /// The server's process tree and container, read at the start of every interval.
    pub resources: ResourceSeries,
}

/// The calls that completed in one interval (by their completion time, as HdrHistogram interval
/// logs assign them), correct or failed, and the latency of the correct ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesInterval {
    /// The interval's start, ms from the origin (`k * interval_ms`).
    pub t_ms: u64,
    pub ok: u64,
    pub failed: u64,
    /// The correct calls' latencies (as the load's `latency`: ns, from the intended send time in
    /// an open loop), HdrHistogram V2 deflate, base64; absent when none completed correctly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
}

/// The server read at the start of every interval, one sample per index of every list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSeries {
    /// When it was read, ms from the origin.
    pub t_ms: Vec<u64>,
    /// The process tree's RSS (as `TreeMemory::rss_bytes`), bytes.
    pub rss_bytes: Vec<u64>,
    /// The process tree's CPU time so far (user + system), ns; null where it could not be read.
    pub cpu_ns: Vec<Option<u64>>,
    /// The server container's cgroup memory usage (as `IdleSeries::cgroup_bytes`), bytes.
    pub cgroup_bytes: Vec<Option<u64>>,
}

/// What a soak concluded (its series are the load's `series`, the idle phase's `after_series`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoakFigures {
    /// The process tree's RSS over the steady phase, bytes per hour (Theil–Sen).
    pub rss_bytes_per_hour: Option<Slope>,
    /// The container's cgroup memory usage over the steady phase, bytes per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_bytes_per_hour: Option<Slope>,
    /// The floor the workload states: a leak is named only when the RSS slope's interval lies
    /// wholly above it (and so excludes zero), bytes per hour.
    pub leak_floor_bytes_per_hour: u64,
    /// Whether a leak is named.
    pub leak: bool,
    /// The RSS level of the idle phase before the load (no client connected yet); the level
    /// after is the load memory's `after_level`.
    pub idle_before: Option<MemoryLevel>,
    /// The per-interval p50 and p99 latency over the steady phase, ms per hour (Theil–Sen over
    /// the intervals with at least `MIN_CALLS_FOR_DRIFT` correct calls).
    pub p50_ms_per_hour: Option<Slope>,
    pub p99_ms_per_hour: Option<Slope>,
    /// The connect/disconnect cycles after the idle phase, in order (the workload's `cycles`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycles: Vec<SoakCycle>,
}

/// One connect/disconnect cycle of a soak: the clients connected again (all at once) and loaded
/// the server for the workload's `cycle_load_ms`, then left for its `cycle_idle_ms`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoakCycle {
    /// Calls answered correctly and calls failed in the cycle's load.
    pub ok: u64,
    pub failed: u64,
    /// The highest RSS of the server tree the sampler read during the cycle's load.
    pub peak_rss_bytes: Option<u64>,
    /// The RSS level at the end of the cycle's idle phase (the clients gone).
    pub after: Option<MemoryLevel>,
}

/// An interval's percentile enters the drift fit only when this many calls completed in it.
pub const MIN_CALLS_FOR_DRIFT: u64 = 20;
