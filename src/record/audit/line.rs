//! The checks of one complete line of `records.jsonl`: that it is one JSON object, of a format
//! this build reads, in the writer's encoding, a record that round-trips, with its hashes, run id
//! and scenario right, and chained to the line before. The run folder's walk is `audit`'s.

use serde_json::Value;

use crate::hash::{canonical_json, sha256_hex};
use crate::record::audit::report::{AuditReport, Check, Problem};
use crate::record::audit::written::{encoding_difference, Written};
use crate::record::{Record, READABLE_FORMAT_VERSIONS};

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

/// Audits one complete line; returns its `prev_hash` as written (for the head check) when the
/// line is a JSON object.
pub(super) fn audit_line(
    n: usize,
    content: &[u8],
    chain: &mut Chain,
    report: &mut AuditReport,
) -> Option<Option<String>> {
    if content.is_empty() {
        // Not a record and no damage to one: the chain runs on to the next line.
        let at = At { line: n, seq: None, cell_id: None };
        report.problems.push(at.problem(Check::Blank, None, "a record".into(), "an empty line".into()));
        return None;
    }
    let Some((text, written, value)) = read_object(n, content, report) else {
        *chain = Chain::Unknown;
        return None;
    };

    let at = At {
        line: n,
        seq: value.get("seq").and_then(Value::as_u64),
        cell_id: value.pointer("/cell/id").and_then(Value::as_str).map(String::from),
    };
    let hash = value.get("hash").and_then(Value::as_str).map(String::from);
    let prev_hash_found = value.get("prev_hash");

    // Content checks mean nothing for a format this build does not know; the chain still does.
    if check_format_version(&at, &value, report) {
        let record = check_record(&at, text, &written, &value, report);
        check_hashes(&at, record.as_ref(), &hash, &value, report);
        check_run(&at, &value, report);
    }

    check_chain(&at, chain, prev_hash_found, &value, report);
    *chain = Chain::Known { seq: at.seq, hash };
    Some(prev_hash_found.and_then(Value::as_str).map(String::from))
}

/// The line as UTF-8 text, parsed once keeping its order and spelling (for the encoding check)
/// and as a `Value` (for the rest); None, with the problem reported, when it is not one JSON
/// object.
fn read_object<'a>(
    n: usize,
    content: &'a [u8],
    report: &mut AuditReport,
) -> Option<(&'a str, Written, Value)> {
    let at = At { line: n, seq: None, cell_id: None };
    let text = match std::str::from_utf8(content) {
        Ok(t) => t,
        Err(e) => {
            report.problems.push(at.problem(
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
            report.problems.push(at.problem(
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
            report.problems.push(at.problem(
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

/// Whether `format_version` is one this build reads (reported when not).
fn check_format_version(at: &At, value: &Value, report: &mut AuditReport) -> bool {
    let version = value.get("format_version");
    let known_version = version
        .and_then(Value::as_u64)
        .is_some_and(|v| READABLE_FORMAT_VERSIONS.iter().any(|&k| u64::from(k) == v));
    if !known_version {
        report.problems.push(at.problem(
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
    report: &mut AuditReport,
) -> Option<Record> {
    if let Some((column, expected, found)) = encoding_difference(written, text) {
        report.problems.push(at.problem(Check::Encoding, Some(column), expected, found));
    }

    let record = match serde_json::from_str::<Record>(text) {
        Ok(r) => {
            report.records += 1;
            Some(r)
        }
        Err(e) => {
            report.problems.push(at.problem(
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
            report.problems.push(at.problem(
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
    report: &mut AuditReport,
) {
    // Record::compute_hash() is the definition. For a line that is not a record, the same
    // canonical hash over the line's own JSON still says whether `hash` was tampered with
    // (for a record that round-trips the two are equal).
    let expected_hash = match record {
        Some(r) => r.compute_hash(),
        None => {
            let mut without = value.clone();
            without.as_object_mut().expect("checked to be an object").remove("hash");
            sha256_hex(canonical_json(&without).as_bytes())
        }
    };
    if hash.as_deref() != Some(expected_hash.as_str()) {
        report.problems.push(at.problem(Check::Hash, None, expected_hash, shown(value.get("hash"))));
    }

    let expected_env = match record {
        Some(r) => Some(r.environment.hash()),
        None => value.get("environment").map(|env| sha256_hex(canonical_json(env).as_bytes())),
    };
    let env_found = value.get("env_hash");
    match expected_env {
        Some(e) if env_found.and_then(Value::as_str) != Some(e.as_str()) => {
            report.problems.push(at.problem(Check::EnvHash, None, e, shown(env_found)))
        }
        _ => {}
    }
}

/// The checks against the run: the first record's `run_id`, and the scenario beside the records.
fn check_run(at: &At, value: &Value, report: &mut AuditReport) {
    let run_id = value.get("run_id");
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
        let found = value.pointer("/environment/scenario_sha256");
        if found.and_then(Value::as_str) != Some(want.as_str()) {
            let want = want.clone();
            report.problems.push(at.problem(Check::Scenario, None, want, shown(found)));
        }
    }
}

/// The `seq` and `prev_hash` checks against what the previous line left in `chain`.
fn check_chain(
    at: &At,
    chain: &Chain,
    prev_hash_found: Option<&Value>,
    value: &Value,
    report: &mut AuditReport,
) {
    let (want_seq, want_prev) = match chain {
        Chain::Start => (Some(0), Some(None)),
        Chain::Known { seq, hash } => (seq.map(|s| s + 1), hash.clone().map(Some)),
        Chain::Unknown => (None, None),
    };
    if let Some(w) = want_seq {
        if at.seq != Some(w) {
            report.problems.push(at.problem(Check::Seq, None, w.to_string(), shown(value.get("seq"))));
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
