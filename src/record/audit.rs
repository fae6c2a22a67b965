//! Verifies a run's `records.jsonl` as stored: every line a record of the known format in the
//! writer's exact encoding, every hash and the chain between them, the store's head and the
//! scenario beside it. It reports every problem it finds, first one first; it never repairs a
//! store and never prints (the CLI renders an `AuditReport`).

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hash::{canonical_json, sha256_hex};
use crate::record::store::{Head, HEAD_FILE, LOCK_FILE};
use crate::record::{Record, FORMAT_VERSION, READABLE_FORMAT_VERSIONS};

/// The scenario file a run folder keeps beside its records.
pub const SCENARIO_FILE: &str = "scenario.toml";

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

/// Audits the records file at `records_path` (a run folder's `records.jsonl`), with the
/// `records.head` and `scenario.toml` beside it when they exist.
pub fn audit(records_path: &Path) -> AuditReport {
    audit_with(records_path, true)
}

/// `probe_lock`: whether to look for a writer holding the run's lock (the store itself, holding
/// that lock, must not).
pub(crate) fn audit_with(records_path: &Path, probe_lock: bool) -> AuditReport {
    let dir = records_path.parent().unwrap_or(Path::new("."));
    let mut report = AuditReport {
        path: records_path.to_path_buf(),
        format_version: FORMAT_VERSION,
        lines: 0,
        records: 0,
        run_id: None,
        last_seq: None,
        last_hash: None,
        head: None,
        scenario_sha256: None,
        being_written: false,
        writer_pid: None,
        notes: Vec::new(),
        problems: Vec::new(),
    };
    if probe_lock {
        if let Some(pid) = writer(&dir.join(LOCK_FILE)) {
            report.being_written = true;
            report.writer_pid = pid;
            let who = pid.map_or("a benchlab".to_string(), |p| format!("benchlab pid {p}"));
            report.notes.push(format!("{who} is writing this run now: its last line may be in flight"));
        }
    }

    let scenario_path = dir.join(SCENARIO_FILE);
    match std::fs::read(&scenario_path) {
        Ok(bytes) => report.scenario_sha256 = Some(sha256_hex(&bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => report
            .notes
            .push(format!("no {SCENARIO_FILE} beside the records: scenario_sha256 was not checked")),
        Err(e) => report.problems.push(store_problem(
            Check::Read,
            format!("a readable {}", scenario_path.display()),
            e.to_string(),
        )),
    }

    let bytes = match std::fs::read(records_path) {
        Ok(b) => b,
        Err(e) => {
            report.problems.push(store_problem(
                Check::Read,
                format!("a readable {}", records_path.display()),
                e.to_string(),
            ));
            return report;
        }
    };

    let mut chain = Chain::Start;
    let mut complete = 0usize;
    let mut last_prev_hash: Option<Option<String>> = None;
    let mut offset = 0usize;
    for (i, segment) in bytes.split_inclusive(|b| *b == b'\n').enumerate() {
        let n = i + 1;
        report.lines = n;
        let Some(content) = segment.strip_suffix(b"\n") else {
            report.problems.push(Problem {
                line: Some(n),
                column: None,
                seq: None,
                cell_id: None,
                check: Check::Torn,
                expected: "a line ending in a newline".into(),
                found: format!(
                    "{} byte(s) without one (a write cut short; truncating the file to {offset} bytes drops it)",
                    segment.len()
                ),
            });
            break;
        };
        offset += segment.len();
        // The head counts records; a blank line is reported as itself.
        complete += usize::from(!content.is_empty());
        let line = audit_line(n, content, &mut chain, &mut report);
        if let Some(p) = line {
            last_prev_hash = Some(p);
        } else if !content.is_empty() {
            last_prev_hash = None;
        }
    }
    if let Chain::Known { seq, hash } = &chain {
        report.last_seq = *seq;
        report.last_hash = hash.clone();
    }

    check_head(dir, complete, &chain, last_prev_hash, &mut report);
    // File order, store-wide problems (an unreadable scenario.toml, the head) last.
    report.problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    report
}

/// What the next line must follow.
enum Chain {
    /// No record yet: seq 0, prev_hash null.
    Start,
    /// The previous line was a JSON object with these fields (None: absent or of the wrong type).
    Known { seq: Option<u64>, hash: Option<String> },
    /// The previous line could not be read: the next line's seq and prev_hash cannot be checked.
    Unknown,
}

/// Audits one complete line; returns its `prev_hash` as written (for the head check) when the
/// line is a JSON object.
fn audit_line(
    n: usize,
    content: &[u8],
    chain: &mut Chain,
    report: &mut AuditReport,
) -> Option<Option<String>> {
    let problem = |check, column, seq, cell_id: &Option<String>, expected: String, found: String| Problem {
        line: Some(n),
        column,
        seq,
        cell_id: cell_id.clone(),
        check,
        expected,
        found,
    };
    if content.is_empty() {
        // Not a record and no damage to one: the chain runs on to the next line.
        report.problems.push(problem(
            Check::Blank,
            None,
            None,
            &None,
            "a record".into(),
            "an empty line".into(),
        ));
        return None;
    }
    let text = match std::str::from_utf8(content) {
        Ok(t) => t,
        Err(e) => {
            report.problems.push(problem(
                Check::Json,
                Some(e.valid_up_to() + 1),
                None,
                &None,
                "UTF-8 text".into(),
                format!("an invalid byte 0x{:02x}", content[e.valid_up_to()]),
            ));
            *chain = Chain::Unknown;
            return None;
        }
    };
    // One parse that keeps the line's order and spelling (for the encoding check), turned into a
    // Value for the rest.
    let written: Written = match serde_json::from_str(text) {
        Ok(w) => w,
        Err(e) => {
            report.problems.push(problem(
                Check::Json,
                Some(e.column()),
                None,
                &None,
                "one JSON object".into(),
                cut(&e.to_string(), 120),
            ));
            *chain = Chain::Unknown;
            return None;
        }
    };
    let value = match written.to_value() {
        Value::Object(m) => Value::Object(m),
        other => {
            report.problems.push(problem(
                Check::Json,
                None,
                None,
                &None,
                "a JSON object".into(),
                format!("a JSON {}", json_kind(&other)),
            ));
            *chain = Chain::Unknown;
            return None;
        }
    };

    let seq = value.get("seq").and_then(Value::as_u64);
    let cell_id = value.pointer("/cell/id").and_then(Value::as_str).map(String::from);
    let hash = value.get("hash").and_then(Value::as_str).map(String::from);
    let prev_hash_found = value.get("prev_hash");

    let version = value.get("format_version");
    let known_version = version
        .and_then(Value::as_u64)
        .is_some_and(|v| READABLE_FORMAT_VERSIONS.iter().any(|&k| u64::from(k) == v));
    if !known_version {
        report.problems.push(problem(
            Check::FormatVersion,
            None,
            seq,
            &cell_id,
            READABLE_FORMAT_VERSIONS.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" or "),
            shown(version),
        ));
    }

    // Content checks mean nothing for a format this build does not know; the chain still does.
    if known_version {
        if let Some((column, expected, found)) = encoding_difference(&written, text) {
            report.problems.push(problem(Check::Encoding, Some(column), seq, &cell_id, expected, found));
        }

        let record = match serde_json::from_str::<Record>(text) {
            Ok(r) => {
                report.records += 1;
                Some(r)
            }
            Err(e) => {
                report.problems.push(problem(
                    Check::Schema,
                    Some(e.column()),
                    seq,
                    &cell_id,
                    "a record".into(),
                    cut(&e.to_string(), 120),
                ));
                None
            }
        };

        if let Some(r) = &record {
            let again = serde_json::to_value(r).expect("records serialise");
            if let Some((path, expected, found)) = first_difference(&again, &value, "") {
                report.problems.push(problem(
                    Check::RoundTrip,
                    None,
                    seq,
                    &cell_id,
                    format!("{path} = {expected}"),
                    format!("{path} = {found}"),
                ));
            }
        }

        // Record::compute_hash() is the definition. For a line that is not a record, the same
        // canonical hash over the line's own JSON still says whether `hash` was tampered with
        // (for a record that round-trips the two are equal).
        let expected_hash = match &record {
            Some(r) => r.compute_hash(),
            None => {
                let mut without = value.clone();
                without.as_object_mut().expect("checked to be an object").remove("hash");
                sha256_hex(canonical_json(&without).as_bytes())
            }
        };
        if hash.as_deref() != Some(expected_hash.as_str()) {
            report.problems.push(problem(
                Check::Hash,
                None,
                seq,
                &cell_id,
                expected_hash,
                shown(value.get("hash")),
            ));
        }

        let expected_env = match &record {
            Some(r) => Some(r.environment.hash()),
            None => value.get("environment").map(|env| sha256_hex(canonical_json(env).as_bytes())),
        };
        let env_found = value.get("env_hash");
        match expected_env {
            Some(e) if env_found.and_then(Value::as_str) != Some(e.as_str()) => {
                report.problems.push(problem(Check::EnvHash, None, seq, &cell_id, e, shown(env_found)))
            }
            _ => {}
        }

        let run_id = value.get("run_id");
        match (&report.run_id, run_id.and_then(Value::as_str)) {
            (None, Some(id)) => report.run_id = Some(id.to_string()),
            (Some(first), Some(id)) if first == id => {}
            (Some(first), _) => {
                let first = format!("{first:?} (the first record's)");
                report.problems.push(problem(Check::RunId, None, seq, &cell_id, first, shown(run_id)))
            }
            (None, None) => {}
        }

        if let Some(want) = &report.scenario_sha256 {
            let found = value.pointer("/environment/scenario_sha256");
            if found.and_then(Value::as_str) != Some(want.as_str()) {
                let want = want.clone();
                report.problems.push(problem(Check::Scenario, None, seq, &cell_id, want, shown(found)));
            }
        }
    }

    let (want_seq, want_prev) = match chain {
        Chain::Start => (Some(0), Some(None)),
        Chain::Known { seq, hash } => (seq.map(|s| s + 1), hash.clone().map(Some)),
        Chain::Unknown => (None, None),
    };
    if let Some(w) = want_seq {
        if seq != Some(w) {
            report.problems.push(problem(
                Check::Seq,
                None,
                seq,
                &cell_id,
                w.to_string(),
                shown(value.get("seq")),
            ));
        }
    }
    if let Some(w) = want_prev {
        let ok = match (&w, prev_hash_found) {
            (None, Some(Value::Null)) => true,
            (Some(h), Some(Value::String(f))) => h == f,
            _ => false,
        };
        if !ok {
            let expected = w.unwrap_or_else(|| "null (the first record)".into());
            report.problems.push(problem(
                Check::PrevHash,
                None,
                seq,
                &cell_id,
                expected,
                shown(prev_hash_found),
            ));
        }
    }
    *chain = Chain::Known { seq, hash };
    Some(prev_hash_found.and_then(Value::as_str).map(String::from))
}

fn check_head(
    dir: &Path,
    complete: usize,
    chain: &Chain,
    last_prev_hash: Option<Option<String>>,
    report: &mut AuditReport,
) {
    let head_path = dir.join(HEAD_FILE);
    let text = match std::fs::read_to_string(&head_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            report.notes.push(format!(
                "no {HEAD_FILE} beside the records (a store written before heads were kept): \
                 records cut from the end at a line boundary cannot be detected"
            ));
            return;
        }
        Err(e) => {
            report.problems.push(store_problem(
                Check::Read,
                format!("a readable {}", head_path.display()),
                e.to_string(),
            ));
            return;
        }
    };
    let head: Head = match serde_json::from_str(&text) {
        Ok(h) => h,
        Err(e) => {
            report.problems.push(store_problem(
                Check::Head,
                format!("{HEAD_FILE} holding {{\"records\":N,\"hash\":...}}"),
                cut(&e.to_string(), 120),
            ));
            return;
        }
    };
    report.head = Some(head.clone());
    let last_hash = match chain {
        Chain::Known { hash, .. } => hash.clone(),
        Chain::Start | Chain::Unknown => None,
    };
    let here = describe_tip(complete as u64, last_hash.as_deref());
    if head.records == complete as u64 && head.hash == last_hash {
        return;
    }
    // A crash between appending a line and updating the head leaves the head one record behind,
    // naming the record the last line chains onto. Store::open repairs it.
    if head.records + 1 == complete as u64 && last_prev_hash.as_ref() == Some(&head.hash) {
        report.notes.push(format!(
            "{HEAD_FILE} is one record behind ({}): the writer stopped between appending the last \
             line and updating the head; reopening the store repairs it",
            describe_tip(head.records, head.hash.as_deref())
        ));
        return;
    }
    report.problems.push(store_problem(Check::Head, describe_tip(head.records, head.hash.as_deref()), here));
}

fn describe_tip(records: u64, hash: Option<&str>) -> String {
    match hash {
        Some(h) => format!("{records} record(s) ending in {h}"),
        None if records == 0 => "no records".into(),
        None => format!("{records} record(s), the last without a readable hash"),
    }
}

fn store_problem(check: Check, expected: String, found: String) -> Problem {
    Problem { line: None, column: None, seq: None, cell_id: None, check, expected, found }
}

/// Some(pid, if known) when a store holds the run's lock now. A shared lock, taken and dropped at
/// once, so an audit never stands in a writer's way for longer than the probe.
fn writer(lock_path: &Path) -> Option<Option<u32>> {
    use nix::fcntl::{Flock, FlockArg};
    let file = std::fs::File::open(lock_path).ok()?;
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(_unlocked_on_drop) => None,
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            Some(std::fs::read_to_string(lock_path).ok().and_then(|t| t.trim().parse().ok()))
        }
        Err(_) => None,
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as found on the line, for a report: JSON text, or "(absent)".
fn shown(v: Option<&Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => cut(&other.to_string(), 120),
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Where `a` (what the record re-encodes to) and `b` (the line) first differ, as a JSON pointer
/// and the two values there; None when they are equal.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<(String, String, String)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(u), Some(v)) => first_difference(u, v, &p),
                    (u, v) => Some((p, shown(u), shown(v))),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) => {
            let len = x.len().max(y.len());
            (0..len).find_map(|i| {
                let p = format!("{path}/{i}");
                match (x.get(i), y.get(i)) {
                    (Some(u), Some(v)) => first_difference(u, v, &p),
                    (u, v) => Some((p, shown(u), shown(v))),
                }
            })
        }
        _ if a == b => None,
        _ => Some((if path.is_empty() { "/".into() } else { path.into() }, shown(Some(a)), shown(Some(b)))),
    }
}

/// JSON kept in the order and form it was written, to compare a line against the writer's
/// encoding without depending on the order of fields in the code.
enum Written {
    Null,
    Bool(bool),
    Unsigned(u64),
    Signed(i64),
    Float(f64),
    Str(String),
    Array(Vec<Written>),
    Object(Vec<(String, Written)>),
}

impl<'de> Deserialize<'de> for Written {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Written;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("JSON")
            }
            fn visit_unit<E>(self) -> Result<Written, E> {
                Ok(Written::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Written, E> {
                Ok(Written::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Written, E> {
                Ok(Written::Unsigned(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Written, E> {
                Ok(Written::Signed(v))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Written, E> {
                Ok(Written::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Written, E> {
                Ok(Written::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Written, E> {
                Ok(Written::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Written, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element()? {
                    out.push(item);
                }
                Ok(Written::Array(out))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Written, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    out.push((key, map.next_value()?));
                }
                Ok(Written::Object(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl Written {
    fn to_value(&self) -> Value {
        match self {
            Written::Null => Value::Null,
            Written::Bool(b) => Value::Bool(*b),
            Written::Unsigned(u) => Value::from(*u),
            Written::Signed(i) => Value::from(*i),
            Written::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Written::Str(s) => Value::String(s.clone()),
            Written::Array(items) => Value::Array(items.iter().map(Written::to_value).collect()),
            // Like serde_json's own Value: of duplicate keys the last wins (the schema check
            // refuses duplicates).
            Written::Object(entries) => {
                Value::Object(entries.iter().map(|(k, v)| (k.clone(), v.to_value())).collect())
            }
        }
    }

    /// The writer's (serde_json's compact) encoding, keys in the order they came.
    fn encode(&self, out: &mut String) {
        match self {
            Written::Null => out.push_str("null"),
            Written::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Written::Unsigned(u) => out.push_str(&u.to_string()),
            Written::Signed(i) => out.push_str(&i.to_string()),
            Written::Float(f) => out.push_str(&serde_json::to_string(f).expect("a parsed float is finite")),
            Written::Str(s) => out.push_str(&serde_json::to_string(s).expect("strings serialise")),
            Written::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.encode(out);
                }
                out.push(']');
            }
            Written::Object(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).expect("strings serialise"));
                    out.push(':');
                    v.encode(out);
                }
                out.push('}');
            }
        }
    }
}

/// Where a line's bytes first depart from the writer's encoding of what they parse to:
/// (1-based column, expected excerpt, found excerpt). None when the line is exactly that encoding.
fn encoding_difference(written: &Written, text: &str) -> Option<(usize, String, String)> {
    let mut again = String::with_capacity(text.len());
    written.encode(&mut again);
    if again == text {
        return None;
    }
    let at = again.bytes().zip(text.bytes()).take_while(|(a, b)| a == b).count();
    Some((at + 1, excerpt(&again, at), excerpt(text, at)))
}

/// About 24 bytes either side of `at`, on character boundaries, with "…" where cut.
fn excerpt(s: &str, at: usize) -> String {
    let mut start = at.saturating_sub(24);
    while !s.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + 24).min(s.len());
    while !s.is_char_boundary(end) {
        end += 1;
    }
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&s[start..end]);
    if end < s.len() {
        out.push('…');
    }
    if at >= s.len() {
        out.push_str(" (end of line)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::store::{Store, RECORDS_FILE};
    use crate::record::tests::sample_record;

    fn store_with(n: usize) -> (tempfile::TempDir, PathBuf, Vec<Record>) {
        let d = tempfile::tempdir().unwrap();
        let mut store = Store::open(d.path()).unwrap();
        let records = (0..n).map(|i| store.append(sample_record(&format!("s{i}"))).unwrap()).collect();
        drop(store);
        let path = d.path().join(RECORDS_FILE);
        (d, path, records)
    }

    fn rewrite(path: &Path, f: impl FnOnce(&mut Vec<String>)) {
        let text = std::fs::read_to_string(path).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        f(&mut lines);
        std::fs::write(path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    }

    #[test]
    fn an_intact_store_audits_clean_and_the_raw_hash_is_the_record_hash() {
        let (_d, path, records) = store_with(3);
        let r = audit(&path);
        assert!(r.is_clean(), "{:#?}", r.problems);
        assert_eq!((r.lines, r.records, r.last_seq), (3, 3, Some(2)));
        assert_eq!(r.last_hash.as_deref(), Some(records[2].hash.as_str()));
        assert_eq!(r.run_id.as_deref(), Some("run"));
        assert_eq!(r.head, Some(Head { records: 3, hash: Some(records[2].hash.clone()) }));
        // The hash over the raw line (used for lines that are not records) is compute_hash().
        let line = std::fs::read_to_string(&path).unwrap().lines().next().unwrap().to_string();
        let mut v: Value = serde_json::from_str(&line).unwrap();
        v.as_object_mut().unwrap().remove("hash");
        assert_eq!(sha256_hex(canonical_json(&v).as_bytes()), records[0].compute_hash());
    }

    #[test]
    fn a_numerically_equal_respelling_is_an_encoding_problem() {
        let (_d, path, _) = store_with(2);
        rewrite(&path, |l| l[1] = l[1].replace("1.5e-7", "1.5E-7"));
        let r = audit(&path);
        let p = r.first_problem().unwrap();
        assert_eq!((p.check, p.line, p.seq), (Check::Encoding, Some(2), Some(1)));
        assert!(p.found.contains("1.5E-7") && p.expected.contains("1.5e-7"), "{p}");
        assert_eq!(r.problems.len(), 1, "the hash is over the value, so only the encoding differs");
    }

    #[test]
    fn an_absent_optional_field_is_a_round_trip_problem() {
        let (_d, path, _) = store_with(2);
        rewrite(&path, |l| l[0] = l[0].replace("\"failure\":null,", ""));
        let r = audit(&path);
        assert_eq!(r.problems.len(), 1, "{:#?}", r.problems);
        let p = &r.problems[0];
        assert_eq!((p.check, p.line), (Check::RoundTrip, Some(1)));
        assert_eq!((p.expected.as_str(), p.found.as_str()), ("/failure = null", "/failure = (absent)"));
    }

    #[test]
    fn a_deleted_line_is_pinpointed_at_the_record_after_it() {
        let (_d, path, records) = store_with(4);
        rewrite(&path, |l| {
            l.remove(1);
        });
        let r = audit(&path);
        let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
        assert_eq!(
            checks,
            vec![(Some(2), Check::Seq), (Some(2), Check::PrevHash), (None, Check::Head)],
            "{:#?}",
            r.problems
        );
        assert_eq!(r.problems[1].expected, records[0].hash);
        assert_eq!(r.problems[1].found, records[1].hash);
        assert_eq!(r.problems[0].cell_id.as_deref(), Some("s2/cold_start"));
    }

    #[test]
    fn the_last_line_cut_at_a_boundary_is_caught_by_the_head() {
        let (_d, path, records) = store_with(3);
        rewrite(&path, |l| {
            l.pop();
        });
        let r = audit(&path);
        assert_eq!(r.problems.len(), 1);
        let p = &r.problems[0];
        assert_eq!(p.check, Check::Head);
        assert_eq!(p.expected, format!("3 record(s) ending in {}", records[2].hash));
        assert_eq!(p.found, format!("2 record(s) ending in {}", records[1].hash));
    }

    #[test]
    fn a_head_one_behind_is_a_note_not_a_problem() {
        let (d, path, records) = store_with(3);
        let head = Head { records: 2, hash: Some(records[1].hash.clone()) };
        std::fs::write(d.path().join(HEAD_FILE), serde_json::to_string(&head).unwrap()).unwrap();
        let r = audit(&path);
        assert!(r.is_clean(), "{:#?}", r.problems);
        assert!(r.notes.iter().any(|n| n.contains("one record behind")), "{:?}", r.notes);
    }

    #[test]
    fn a_torn_line_is_reported_with_the_length_to_keep() {
        let (_d, path, _) = store_with(2);
        let good = std::fs::read(&path).unwrap();
        let mut bytes = good.clone();
        bytes.extend_from_slice(br#"{"format_version":2,"ru"#);
        std::fs::write(&path, &bytes).unwrap();
        let r = audit(&path);
        let p = r.first_problem().unwrap();
        assert_eq!((p.check, p.line), (Check::Torn, Some(3)));
        assert!(p.found.contains(&format!("truncating the file to {} bytes", good.len())), "{p}");
        assert_eq!(r.problems.len(), 1, "the head still names line 2: {:#?}", r.problems);
    }

    #[test]
    fn scenario_and_run_id_are_checked_on_every_record() {
        let (d, path, _) = store_with(2);
        std::fs::write(d.path().join(SCENARIO_FILE), "name = \"other\"\n").unwrap();
        let r = audit(&path);
        let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
        assert_eq!(checks, vec![(Some(1), Check::Scenario), (Some(2), Check::Scenario)]);
        match Store::open(d.path()) {
            Ok(_) => panic!("a store whose scenario does not match was continued"),
            Err(e) => assert!(e.to_string().contains(": scenario: expected "), "{e}"),
        }

        // A record of another run, correctly hashed and chained, is still caught.
        std::fs::write(d.path().join(SCENARIO_FILE), "x").unwrap();
        rewrite(&path, |l| l.clear());
        std::fs::remove_file(d.path().join(HEAD_FILE)).unwrap();
        let mut prev: Option<Record> = None;
        let mut text = String::new();
        for (i, run) in ["run", "run", "other"].into_iter().enumerate() {
            let mut r = sample_record("x");
            r.run_id = run.into();
            r.seq = i as u64;
            r.environment.scenario_sha256 = sha256_hex(b"x");
            r.env_hash = r.environment.hash();
            r.prev_hash = prev.as_ref().map(|p| p.hash.clone());
            r.hash = r.compute_hash();
            text.push_str(&serde_json::to_string(&r).unwrap());
            text.push('\n');
            prev = Some(r);
        }
        std::fs::write(&path, text).unwrap();
        let r = audit(&path);
        let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
        assert_eq!(checks, vec![(Some(3), Check::RunId)], "{:#?}", r.problems);
        assert_eq!(r.problems[0].found, "other");
    }

    #[test]
    fn garbage_lines_do_not_hide_the_rest() {
        let (_d, path, _) = store_with(3);
        rewrite(&path, |l| {
            l[0] = "not json".into();
            l.insert(2, String::new());
        });
        let r = audit(&path);
        let checks: Vec<_> = r.problems.iter().map(|p| (p.line, p.check)).collect();
        // Line 2 cannot be chained to line 1 (unreadable); the blank line 3 keeps line 4 chained
        // to line 2, which holds.
        assert_eq!(checks, vec![(Some(1), Check::Json), (Some(3), Check::Blank)], "{:#?}", r.problems);
        assert_eq!(r.problems[0].column, Some(2), "serde_json: `o` is where \"not\" stops being JSON");
    }

    #[test]
    fn problems_display_with_their_place() {
        let p = Problem {
            line: Some(3),
            column: None,
            seq: Some(2),
            cell_id: Some("a/cold_start".into()),
            check: Check::Hash,
            expected: "aa".into(),
            found: "bb".into(),
        };
        assert_eq!(p.to_string(), "line 3 (seq 2, cell a/cold_start): hash: expected aa, found bb");
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["check"], "hash");
    }
}
