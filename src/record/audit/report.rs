//! The audit's findings: the checks it makes (`Check`), one failed check located in the file
//! (`Problem`) and the report of one records file (`AuditReport`), with their stable names and
//! text forms. Making the checks is the rest of `audit`'s job, not this file's.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use crate::record::files::Head;

/// One thing the audit verifies. The names (`as_str`, and the JSON form) are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// The records file (or the head or scenario beside it) can be read.
    Read,
    /// Every line ends in a newline; a last line without one is a write that was cut short.
    Torn,
    /// No empty lines (the writer never writes one).
    Blank,
    /// The line is UTF-8 and one JSON object.
    Json,
    /// `format_version` is the one this build reads.
    FormatVersion,
    /// The line's bytes are exactly the writer's encoding of what they parse to: no whitespace,
    /// numbers and strings spelled as serde_json spells them.
    Encoding,
    /// The line deserialises as a `Record` (types, no unknown or duplicate fields).
    Schema,
    /// The record re-encodes to the same JSON value as the line: nothing absent that the reader
    /// would default, nothing the reader would change.
    RoundTrip,
    /// `hash` equals `Record::compute_hash()`.
    Hash,
    /// `seq` is one more than the previous record's (0 for the first).
    Seq,
    /// `prev_hash` equals the previous record's `hash` (null for the first).
    PrevHash,
    /// `env_hash` equals `environment.hash()`.
    EnvHash,
    /// Every record carries the first record's `run_id`.
    RunId,
    /// `environment.scenario_sha256` equals the sha256 of the run folder's `scenario.toml`.
    Scenario,
    /// The store's head file (`records.head`) names the last record: nothing was cut from the
    /// end at a line boundary.
    Head,
}

impl Check {
    pub const ALL: [Check; 15] = [
        Check::Read,
        Check::Torn,
        Check::Blank,
        Check::Json,
        Check::FormatVersion,
        Check::Encoding,
        Check::Schema,
        Check::RoundTrip,
        Check::Hash,
        Check::Seq,
        Check::PrevHash,
        Check::EnvHash,
        Check::RunId,
        Check::Scenario,
        Check::Head,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Check::Read => "read",
            Check::Torn => "torn",
            Check::Blank => "blank",
            Check::Json => "json",
            Check::FormatVersion => "format_version",
            Check::Encoding => "encoding",
            Check::Schema => "schema",
            Check::RoundTrip => "round_trip",
            Check::Hash => "hash",
            Check::Seq => "seq",
            Check::PrevHash => "prev_hash",
            Check::EnvHash => "env_hash",
            Check::RunId => "run_id",
            Check::Scenario => "scenario",
            Check::Head => "head",
        }
    }

    /// What the check verifies, in a few words (for a legend under the table).
    pub fn describe(self) -> &'static str {
        match self {
            Check::Read => "the file can be read",
            Check::Torn => "every line ends in a newline",
            Check::Blank => "no empty lines",
            Check::Json => "each line is one UTF-8 JSON object",
            Check::FormatVersion => "format_version is one this benchlab reads",
            Check::Encoding => "bytes are exactly the writer's encoding",
            Check::Schema => "the line is a record (types, no unknown fields)",
            Check::RoundTrip => "the record re-encodes to the same JSON",
            Check::Hash => "hash matches the record",
            Check::Seq => "seq follows the previous record's",
            Check::PrevHash => "prev_hash is the previous record's hash",
            Check::EnvHash => "env_hash matches the environment",
            Check::RunId => "every record has the run's run_id",
            Check::Scenario => "scenario_sha256 matches scenario.toml",
            Check::Head => "records.head names the last record",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One failed check, located as precisely as the damage allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// 1-based line of records.jsonl; None for a problem of the store as a whole (head, an
    /// unreadable file).
    pub line: Option<usize>,
    /// 1-based byte column in the line, where the check can say (json, encoding, schema).
    pub column: Option<usize>,
    /// The record's `seq` and cell id as written on the line, when the line is JSON that has them.
    pub seq: Option<u64>,
    pub cell_id: Option<String>,
    pub check: Check,
    /// What the check wanted and what the line holds, as short human-readable text (hashes in
    /// full; long values cut with "…").
    pub expected: String,
    pub found: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}")?,
            (Some(l), None) => write!(f, "line {l}")?,
            (None, _) => f.write_str("store")?,
        }
        match (self.seq, &self.cell_id) {
            (Some(s), Some(c)) => write!(f, " (seq {s}, cell {c})")?,
            (Some(s), None) => write!(f, " (seq {s})")?,
            (None, Some(c)) => write!(f, " (cell {c})")?,
            (None, None) => {}
        }
        write!(f, ": {}: expected {}, found {}", self.check, self.expected, self.found)
    }
}

/// The outcome of auditing one records file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    /// The records file audited.
    pub path: PathBuf,
    /// The record format this build reads.
    pub format_version: u32,
    /// Lines in the file, a torn last line included.
    pub lines: usize,
    /// Lines that are records (parse as a `Record` of the known format), whatever else is wrong.
    pub records: usize,
    /// The first record's run id.
    pub run_id: Option<String>,
    /// `seq` and `hash` of the last complete line, as written.
    pub last_seq: Option<u64>,
    pub last_hash: Option<String>,
    /// What the head file says, when there is one.
    pub head: Option<Head>,
    /// sha256 of the scenario.toml beside the records, when there is one.
    pub scenario_sha256: Option<String>,
    /// Whether a benchlab is writing this run right now (it holds the run's lock): its last line
    /// may be in flight. The writer's pid, when its lock file says.
    pub being_written: bool,
    pub writer_pid: Option<u32>,
    /// What the audit cannot vouch for in a store that is not damaged: a store without
    /// `records.head` (written before heads were kept), whose end could have been cut at a line
    /// boundary unseen. Shown to the reader; they do not change `is_clean` or the exit code.
    pub warnings: Vec<String>,
    /// Checks that could not be made and facts worth knowing that are not problems.
    pub notes: Vec<String>,
    /// Every problem, in file order (store-wide ones last). Empty means the store is intact.
    pub problems: Vec<Problem>,
}

impl AuditReport {
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }

    /// The first bad thing in file order: where the damage starts.
    pub fn first_problem(&self) -> Option<&Problem> {
        self.problems.first()
    }

    /// How many problems each check found, in `Check::ALL` order, zeros left out.
    pub fn counts(&self) -> Vec<(Check, usize)> {
        Check::ALL
            .iter()
            .map(|c| (*c, self.problems.iter().filter(|p| p.check == *c).count()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}
