//! The quiet-host check: how loud the host was around one cell — CPU time of processes outside
//! the cell on the cell's CPUs, steal time, CPU frequency and governor, SMT siblings of the cell's
//! cores, memory pressure — sampled before the cell starts and over the cell, and the verdict
//! (`noisy`, with its reasons) against stated thresholds.

use serde::{Deserialize, Serialize};

/// The check of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quiet {
    /// True when some reading passed its threshold: the cell's figures are flagged, never
    /// silently averaged in.
    pub noisy: bool,
    /// One line per threshold passed.
    pub reasons: Vec<String>,
}
