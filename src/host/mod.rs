//! The host a cell runs on, as it was when it ran: `fingerprint` (a short fixed calibration of
//! the machine's speed — CPU loop, memory bandwidth, pipe ping-pong between the cell's CPUs,
//! process spawn — each with its interval, measured once per run and node) and `quiet` (whether
//! other processes, steal, frequency, SMT siblings or memory pressure disturbed a cell, checked
//! before and during it). Both end up in every record's `host_check`, outside `env_hash`: they
//! describe the conditions, not what ran. docs/ARCHITECTURE.md places it among the rooms.

pub mod fingerprint;
pub mod quiet;

use serde::{Deserialize, Serialize};

pub use fingerprint::Fingerprint;
pub use quiet::Quiet;

/// What a record says of its host's state: the run's (or node's) speed fingerprint and the
/// cell's quiet check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostCheck {
    /// One copy for the records of a reading that have the same text (a run's records share
    /// it; see `reading::part`).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::reading::part")]
    pub fingerprint: Option<std::sync::Arc<Fingerprint>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet: Option<Quiet>,
}
