//! The files of a run folder and their formats: `records.jsonl`, `records.head`, `.lock`,
//! `scenario.toml` and the source's result files (`published/`, `published.json`). Shared by the store (which writes them) and the audit (which reads them), so
//! neither needs the other for a name; no reading or writing happens here.

use serde::{Deserialize, Serialize};

/// One record per line, each chained to the one before.
pub const RECORDS_FILE: &str = "records.jsonl";
/// The head of the chain, rewritten (atomically, by rename) after every append.
pub const HEAD_FILE: &str = "records.head";
/// Held with an exclusive flock by the one benchlab writing the run; holds its pid.
pub const LOCK_FILE: &str = ".lock";
/// The scenario file a run folder keeps beside its records.
pub const SCENARIO_FILE: &str = "scenario.toml";
/// The reproduced source's own result files a run keeps (`[source] results`), by their paths in
/// the source's repository, and the list of them with each file's sha256 (`source::results`).
pub const PUBLISHED_DIR: &str = "published";
pub const PUBLISHED_FILE: &str = "published.json";

/// The last record of a store: how many records there are and the last one's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    pub records: u64,
    pub hash: Option<String>,
}
