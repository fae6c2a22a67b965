//! What a reproduced source states about how it measured (a scenario's `[source]`): the
//! statement the lab derives a cell's deviations from (`record::deviations`). Serde types only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the reproduced source states about how it measured (`[source]`): the lab derives every
/// difference between this and what a cell ran into the cell's `environment.deviations`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceStatement {
    /// The source, as `../shared/seeds/<file>` names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The machine it measured on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<StatedHardware>,
    /// The kernel release it ran (`6.8.0-45-generic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// The client that drove the servers, in the source's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Package versions the source states (`mcp = "1.1.2"`): a cell whose image holds one of
    /// them at another version ran something the source did not state.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub packages: BTreeMap<String, String>,
    /// The name of the source's own server programs in the recipes (`seed-000`): a cell that
    /// runs the lab's suite server instead ran another program than the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
}

/// A machine as a source describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatedHardware {
    /// A part of the CPU model name (`AMD EPYC 9654`, `Intel Xeon`).
    pub cpu_model: String,
    /// Logical CPUs.
    pub cpus: u32,
}
