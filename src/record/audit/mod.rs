//! Verifies a run's `records.jsonl` as stored: every line a record of the known format in the
//! writer's exact encoding, every hash and the chain between them, the store's head and the
//! scenario beside it. It reports every problem it finds, first one first; it never repairs a
//! store and never prints (the CLI renders an `AuditReport`). This file walks the run folder
//! (the lock, the scenario, the lines, the head); `line` checks one line, `written` its bytes,
//! `report` holds what is found.

mod line;
mod report;
mod written;

use std::path::Path;

use crate::hash::sha256_hex;
use crate::record::files::{Head, HEAD_FILE, LOCK_FILE, RECORDS_FILE};
use crate::record::{Record, FORMAT_VERSION};

pub use crate::record::files::SCENARIO_FILE;
pub use report::{AuditReport, Check, Problem};

use line::{cut, follow, read_line, Chain, Line};

/// Audits the records file at `records_path` (a run folder's `records.jsonl`), with the
/// `records.head` and `scenario.toml` beside it when they exist.
pub fn audit(records_path: &Path) -> AuditReport {
    audit_with(records_path, true, false).0
}

/// The audit, and the records themselves when it found no problem (then every line is a record
/// of a format this build reads, as `store::read_records` would return them): what a reader that
/// audits first gets without reading the file twice.
pub fn audit_and_read(records_path: &Path) -> (AuditReport, Option<Vec<Record>>) {
    let (report, records) = audit_with(records_path, true, true);
    let records = records.filter(|_| report.problems.is_empty());
    (report, records)
}

/// `probe_lock`: whether to look for a writer holding the run's lock (the store itself, holding
/// that lock, must not).
/// `keep`: whether to return the records read.
pub(crate) fn audit_with(
    records_path: &Path,
    probe_lock: bool,
    keep: bool,
) -> (AuditReport, Option<Vec<Record>>) {
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
        warnings: Vec::new(),
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

    // Each complete line is checked on its own on every CPU as the file is read; the run and
    // chain checks then follow in file order.
    let read = match crate::par::map_lines(records_path, |n, content| read_line(n, content, keep)) {
        Ok(read) => read,
        Err(e) => {
            report.problems.push(store_problem(
                Check::Read,
                format!("a readable {}", records_path.display()),
                e.to_string(),
            ));
            return (report, None);
        }
    };
    let (len, torn) = (read.len, (read.rest > 0).then_some(read.rest));
    let mut lines: Vec<Line> = read.into_results().collect();
    // The records, when every line holds one (else there is a problem, and none are returned),
    // taken out on every CPU.
    let kept = (keep && lines.iter().all(Line::has_record)).then(|| {
        crate::par::par_map_mut(&mut lines, |l| l.take_record().expect("every line holds a record"))
    });
    let mut chain = Chain::Start;
    let mut complete = 0usize;
    let mut last_prev_hash: Option<Option<String>> = None;
    let total = lines.len();
    for (i, line) in lines.into_iter().enumerate() {
        report.lines = i + 1;
        // The head counts records; a blank line is reported as itself.
        let blank = line.is_blank();
        complete += usize::from(!blank);
        if let Some(p) = follow(line, &mut chain, &mut report) {
            last_prev_hash = Some(p);
        } else if !blank {
            last_prev_hash = None;
        }
    }
    if let Some(rest) = torn {
        let offset = len - rest;
        report.lines = total + 1;
        report.problems.push(Problem {
            line: Some(report.lines),
            column: None,
            seq: None,
            cell_id: None,
            check: Check::Torn,
            expected: "a line ending in a newline".into(),
            found: format!(
                "{rest} byte(s) without one (a write cut short; truncating the file to {offset} bytes drops it)"
            ),
        });
    }
    if let Chain::Known { seq, hash } = &chain {
        report.last_seq = *seq;
        report.last_hash = hash.clone();
    }
    check_head(dir, complete, &chain, last_prev_hash, &mut report);
    // File order, store-wide problems (an unreadable scenario.toml, the head) last.
    report.problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    (report, kept)
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
            report.warnings.push(no_head_warning());
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

/// The warning for a run folder without a head file: not damage, but a check the audit cannot
/// make.
pub(super) fn no_head_warning() -> String {
    format!(
        "no {HEAD_FILE}: a cut at the end of {RECORDS_FILE} cannot be detected (the run predates head files)"
    )
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

#[cfg(test)]
mod tests;
