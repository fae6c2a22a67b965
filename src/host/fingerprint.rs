//! The host speed fingerprint: a short, fixed calibration (CPU-bound loop, memory bandwidth,
//! pipe ping-pong between two CPUs, process spawn), each probe repeated with its median and 95 %
//! interval, and the comparison of two fingerprints (same speed within noise, or which probes
//! differ and by how much).

use serde::{Deserialize, Serialize};

/// One probe's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// `cpu_loop`, `memory_bandwidth`, `pipe_pingpong`, `spawn`.
    pub name: String,
    /// The unit of `value` (`ns`, `GB/s`, `us`, `ms`).
    pub unit: String,
    /// Whether a higher value means a faster host (bandwidth) or a slower one (times).
    pub higher_is_faster: bool,
    /// Median of the repetitions.
    pub value: f64,
    /// 95 % interval of the median.
    pub lower: f64,
    pub upper: f64,
    pub repetitions: u32,
}

/// A host's speed, measured on `cpus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// UTC, RFC 3339.
    pub measured_at: String,
    /// The CPUs measured: `<a>` for single-CPU probes, `<a>,<b>` for the ping-pong.
    pub cpus: String,
    pub probes: Vec<Probe>,
}
