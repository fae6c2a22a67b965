//! The checks of one complete line of `records.jsonl`: that it is one JSON object, of a format
//! this build reads, in the writer's encoding, a record that round-trips, with its hashes, run id
//! and scenario right, and chained to the line before. The run folder's walk is `audit`'s.

use serde_json::Value;

use crate::hash::canonical_sha256;
use crate::record::audit::report::{AuditReport, Check, Problem};
use crate::record::audit::written::{encoding_difference, Written};
use crate::record::{shared, Record, READABLE_FORMAT_VERSIONS};

/// What the next line must follow.
pub(super) enum Chain {
    /// No record yet: seq 0, prev_hash null.
    Start,
    /// The previous line was a JSON object with these fields (None: absent or of the wrong type).
    Known { seq: Option<u64>, hash: Option<String> },
    /// The previous line could not be read: the next line's seq and prev_hash cannot be checked.
    Unknown,
}

/// Where a line's problems are pinned: the line, and its `seq` and cell id as written once the
/// line is known to be a JSON object.
struct At {
    line: usize,
    seq: Option<u64>,
    cell_id: Option<String>,
}

impl At {
    fn problem(&self, check: Check, column: Option<usize>, expected: String, found: String) -> Problem {
        Problem {
            line: Some(self.line),
            column,
            seq: self.seq,
            cell_id: self.cell_id.clone(),
            check,
            expected,
            found,
        }
    }
}

/// What one complete line says on its own, checked without the lines around it (so the lines of
/// a store are checked in parallel); [`follow`] then checks it against the run and the chain.
pub(super) enum Line {
    /// An empty line.
    Blank(usize),
    /// Not UTF-8 or not one JSON object: the problem, and nothing to chain.
    Unreadable(Box<Problem>),
    Object(Box<Facts>),
}

/// A JSON object line: its own problems and the fields the run and chain checks need, as found.
pub(super) struct Facts {
    at: At,
    /// The format version, encoding, schema, round-trip, hash and env_hash problems, in order.
    own: Vec<Problem>,
    /// The format is one this build reads (else the content checks did not run).
    known_format: bool,
    is_record: bool,
    seq_found: Option<Value>,
    hash: Option<String>,
    prev_hash_found: Option<Value>,
    run_id: Option<Value>,
    scenario_found: Option<Value>,
    /// The record the line holds, when it is one.
    record: Option<Record>,
}

impl Line {
    /// Whether the line was empty.
    pub(super) fn is_blank(&self) -> bool {
        matches!(self, Line::Blank(_))
    }

    /// Whether the line holds a record (not yet taken out).
    pub(super) fn has_record(&self) -> bool {
        matches!(self, Line::Object(facts) if facts.record.is_some())
    }

    /// The record the line holds, taken out (for a reader that wants the records too).
    pub(super) fn take_record(&mut self) -> Option<Record> {
        match self {
            Line::Object(facts) => facts.record.take(),
            _ => None,
        }
    }
}

/// Checks one line on its own. A line the writer wrote (a record that re-encodes to exactly its
/// bytes) takes the short way: one parse, one re-encoding, both hashes from its text. Any
/// other line is parsed keeping its order and spelling, to say where it departs.
/// `keep`: whether the line keeps its record (for [`Line::take_record`]).
pub(super) fn read_line(n: usize, content: &[u8], keep: bool) -> Line {
    let mut line = if content.is_empty() {
        Line::Blank(n)
    } else {
        match as_written(n, content) {
            Some(facts) => Line::Object(Box::new(facts)),
            None => read_line_parsed(n, content),
        }
    };
    if !keep {
        line.take_record();
    }
    line
}

/// The long way: the line parsed keeping its order and spelling, every check made from that.
pub(super) fn read_line_parsed(n: usize, content: &[u8]) -> Line {
    let mut own = Vec::new();
    let Some((text, written, value)) = read_object(n, content, &mut own) else {
        return Line::Unreadable(Box::new(own.remove(0)));
    };
    let at = At {
        line: n,
        seq: value.get("seq").and_then(Value::as_u64),
        cell_id: value.pointer("/cell/id").and_then(Value::as_str).map(String::from),
    };
    let hash = value.get("hash").and_then(Value::as_str).map(String::from);
    // Content checks mean nothing for a format this build does not know; the chain still does.
    let known_format = check_format_version(&at, &value, &mut own);
    let mut record = None;
    if known_format {
        record = check_record(&at, text, &written, &value, &mut own);
        check_hashes(&at, record.as_ref(), &hash, &value, &mut own);
    }
    Line::Object(Box::new(Facts {
        own,
        known_format,
        is_record: record.is_some(),
        record,
        seq_found: value.get("seq").cloned(),
        hash,
        prev_hash_found: value.get("prev_hash").cloned(),
        run_id: value.get("run_id").cloned(),
        scenario_found: value.pointer("/environment/scenario_sha256").cloned(),
        at,
    }))
}

/// The short way: the facts of a line that is a record of a known format whose re-encoding is
/// exactly the line (so the encoding and round-trip checks hold); None otherwise.
/// Its environment is read shared: parsed, re-encoded and hashed once for all the lines that ran
/// in it (an environment whose text is not its encoding fails the re-encoding as before).
/// The line is not checked as UTF-8 first: its re-encoding, which is, is compared with it byte
/// for byte.
fn as_written(n: usize, text: &[u8]) -> Option<Facts> {
    let r: Record = shared::read_record(text).ok()?;
    if !READABLE_FORMAT_VERSIONS.contains(&r.format_version) {
        return None;
    }
    let mut again = Vec::with_capacity(text.len());
    shared::writing_as_read(|| serde_json::to_writer(&mut again, &r)).ok()?;
    if again != text {
        return None;
    }
    let at = At { line: n, seq: Some(r.seq), cell_id: Some(r.cell.id.clone()) };
    let mut own = Vec::new();
    // The line is the record's encoding, so its hashes can be taken from the text itself.
    let known = r.environment.read().map(|e| crate::hash::Known {
        text: e.text.get().as_bytes(),
        canonical: &e.canonical,
        hash: &e.hash,
    });
    let (hash, env_hash) = match crate::hash::canonical_sha256_of_compact(text, "hash", "environment", known)
    {
        Some((hash, Some(env))) => (hash, env),
        _ => (r.compute_hash(), r.environment.hash()),
    };
    if r.hash != hash {
        own.push(at.problem(Check::Hash, None, hash, r.hash.clone()));
    }
    if r.env_hash != env_hash {
        own.push(at.problem(Check::EnvHash, None, env_hash, r.env_hash.clone()));
    }
    Some(Facts {
        at,
        own,
        known_format: true,
        is_record: true,
        seq_found: Some(Value::from(r.seq)),
        prev_hash_found: Some(r.prev_hash.clone().map_or(Value::Null, Value::String)),
        run_id: Some(Value::String(r.run_id.clone())),
        scenario_found: Some(Value::String(r.environment.scenario_sha256.clone())),
        hash: Some(r.hash.clone()),
        record: Some(r),
    })
}

/// Checks a line against the run and the line before (in file order), and records it in the
/// report; returns its `prev_hash` as written (for the head check) when the line is a JSON object.
pub(super) fn follow(line: Line, chain: &mut Chain, report: &mut AuditReport) -> Option<Option<String>> {
    let facts = match line {
        Line::Blank(n) => {
            // Not a record and no damage to one: the chain runs on to the next line.
            let at = At { line: n, seq: None, cell_id: None };
            report.problems.push(at.problem(Check::Blank, None, "a record".into(), "an empty line".into()));
            return None;
        }
        Line::Unreadable(problem) => {
            report.problems.push(*problem);
            *chain = Chain::Unknown;
            return None;
        }
        Line::Object(facts) => *facts,
    };
    report.records += usize::from(facts.is_record);
    report.problems.extend(facts.own);
    if facts.known_format {
        check_run(&facts.at, facts.run_id.as_ref(), facts.scenario_found.as_ref(), report);
    }
    check_chain(&facts.at, chain, facts.prev_hash_found.as_ref(), facts.seq_found.as_ref(), report);
    *chain = Chain::Known { seq: facts.at.seq, hash: facts.hash };
    Some(facts.prev_hash_found.as_ref().and_then(Value::as_str).map(String::from))
}

/// The line as UTF-8 text, parsed once keeping its order and spelling (for the encoding check)
/// and as a `Value` (for the rest); None, with the problem pushed, when it is not one JSON object.
fn read_object<'a>(n: usize, content: &'a [u8], own: &mut Vec<Problem>) -> Option<(&'a str, Written, Value)> {
    let at = At { line: n, seq: None, cell_id: None };
    let text = match std::str::from_utf8(content) {
        Ok(t) => t,
        Err(e) => {
            own.push(at.problem(
                Check::Json,
                Some(e.valid_up_to() + 1),
                "UTF-8 text".into(),
                format!("an invalid byte 0x{:02x}", content[e.valid_up_to()]),
            ));
            return None;
        }
    };
    let written: Written = match serde_json::from_str(text) {
        Ok(w) => w,
        Err(e) => {
            own.push(at.problem(
                Check::Json,
                Some(e.column()),
                "one JSON object".into(),
                cut(&e.to_string(), 120),
            ));
            return None;
        }
    };
    let value = match written.to_value() {
        Value::Object(m) => Value::Object(m),
        other => {
            own.push(at.problem(
                Check::Json,
                None,
                "a JSON object".into(),
                format!("a JSON {}", json_kind(&other)),
            ));
            return None;
        }
    };
    Some((text, written, value))
}

/// Whether `format_version` is one this build reads (pushed as a problem when not).
fn check_format_version(at: &At, value: &Value, own: &mut Vec<Problem>) -> bool {
    let version = value.get("format_version");
    let known_version = version
        .and_then(Value::as_u64)
        .is_some_and(|v| READABLE_FORMAT_VERSIONS.iter().any(|&k| u64::from(k) == v));
    if !known_version {
        own.push(at.problem(
            Check::FormatVersion,
            None,
            READABLE_FORMAT_VERSIONS.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" or "),
            shown(version),
        ));
    }
    known_version
}

/// The encoding, schema and round-trip checks; returns the record when the line is one.
fn check_record(
    at: &At,
    text: &str,
    written: &Written,
    value: &Value,
    own: &mut Vec<Problem>,
) -> Option<Record> {
    if let Some((column, expected, found)) = encoding_difference(written, text) {
        own.push(at.problem(Check::Encoding, Some(column), expected, found));
    }

    let record = match serde_json::from_str::<Record>(text) {
        Ok(r) => Some(r),
        Err(e) => {
            own.push(at.problem(
                Check::Schema,
                Some(e.column()),
                "a record".into(),
                cut(&e.to_string(), 120),
            ));
            None
        }
    };

    if let Some(r) = &record {
        let again = serde_json::to_value(r).expect("records serialise");
        if let Some((path, expected, found)) = first_difference(&again, value, "") {
            own.push(at.problem(
                Check::RoundTrip,
                None,
                format!("{path} = {expected}"),
                format!("{path} = {found}"),
            ));
        }
    }
    record
}

/// The `hash` and `env_hash` checks.
fn check_hashes(
    at: &At,
    record: Option<&Record>,
    hash: &Option<String>,
    value: &Value,
    own: &mut Vec<Problem>,
) {
    // Record::compute_hash() is the definition. For a line that is not a record, the same
    // canonical hash over the line's own JSON still says whether `hash` was tampered with
    // (for a record that round-trips the two are equal).
    let (expected_hash, expected_env) = match record {
        Some(r) => (r.compute_hash(), Some(r.environment.hash())),
        None => {
            let mut without = value.clone();
            without.as_object_mut().expect("checked to be an object").remove("hash");
            (canonical_sha256(&without), value.get("environment").map(canonical_sha256))
        }
    };
    if hash.as_deref() != Some(expected_hash.as_str()) {
        own.push(at.problem(Check::Hash, None, expected_hash, shown(value.get("hash"))));
    }
    let env_found = value.get("env_hash");
    match expected_env {
        Some(e) if env_found.and_then(Value::as_str) != Some(e.as_str()) => {
            own.push(at.problem(Check::EnvHash, None, e, shown(env_found)))
        }
        _ => {}
    }
}

/// The checks against the run: the first record's `run_id`, and the scenario beside the records.
fn check_run(at: &At, run_id: Option<&Value>, scenario_found: Option<&Value>, report: &mut AuditReport) {
    match (&report.run_id, run_id.and_then(Value::as_str)) {
        (None, Some(id)) => report.run_id = Some(id.to_string()),
        (Some(first), Some(id)) if first == id => {}
        (Some(first), _) => {
            let first = format!("{first:?} (the first record's)");
            report.problems.push(at.problem(Check::RunId, None, first, shown(run_id)))
        }
        (None, None) => {}
    }

    if let Some(want) = &report.scenario_sha256 {
        if scenario_found.and_then(Value::as_str) != Some(want.as_str()) {
            let want = want.clone();
            report.problems.push(at.problem(Check::Scenario, None, want, shown(scenario_found)));
        }
    }
}

/// The `seq` and `prev_hash` checks against what the previous line left in `chain`.
fn check_chain(
    at: &At,
    chain: &Chain,
    prev_hash_found: Option<&Value>,
    seq_found: Option<&Value>,
    report: &mut AuditReport,
) {
    let (want_seq, want_prev) = match chain {
        Chain::Start => (Some(0), Some(None)),
        Chain::Known { seq, hash } => (seq.map(|s| s + 1), hash.clone().map(Some)),
        Chain::Unknown => (None, None),
    };
    if let Some(w) = want_seq {
        if at.seq != Some(w) {
            report.problems.push(at.problem(Check::Seq, None, w.to_string(), shown(seq_found)));
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
            report.problems.push(at.problem(Check::PrevHash, None, expected, shown(prev_hash_found)));
        }
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

pub(super) fn cut(s: &str, max: usize) -> String {
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
    if a == b {
        return None;
    }
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
