//! Verifying an attestation: the envelope's signature, the statement's types, then the run
//! folder as it is now against every subject and the predicate, in the order the module doc
//! gives. The first failure is returned, typed, naming what did not match.

use std::path::Path;

use ed25519_dalek::VerifyingKey;
use serde::Serialize;

use super::facts::{self, Run};
use super::{
    AttestError, Attester, Envelope, Statement, Subject, PAYLOAD_TYPE, PREDICATE_TYPE, STATEMENT_TYPE,
};
use crate::record::files::RECORDS_FILE;

/// An attestation that holds: the key that verified it, its statement, and what was checked.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub keyid: String,
    /// One line per check made, in order.
    pub checked: Vec<String>,
    pub statement: Statement,
}

pub(super) fn verify(
    run_dir: &Path,
    envelope: &Envelope,
    keys: &[VerifyingKey],
    lockfiles: &Path,
) -> Result<Verified, AttestError> {
    let (keyid, payload) = envelope.verify_any(keys)?;
    let mut checked = vec![format!("signature: Ed25519 over the DSSE PAE verifies with key {keyid}")];
    let statement = read_statement(envelope, &payload)?;
    let p = &statement.predicate;
    checked.push(format!(
        "statement: {STATEMENT_TYPE}, predicate {PREDICATE_TYPE}, made at {} by benchlab {}",
        p.made_at, p.lab_binary.attester_version
    ));

    // The files before anything parses them: a changed file is named as such.
    let files = facts::file_subjects(run_dir)?;
    for now in &files {
        let Some(attested) = statement.subject.iter().find(|s| s.name == now.name) else {
            return Err(AttestError::MissingSubject {
                name: now.name.clone(),
                digest: now.sha256_hex().into(),
            });
        };
        if attested.sha256_hex() != now.sha256_hex() {
            return Err(AttestError::SubjectDigest {
                name: now.name.clone(),
                place: run_dir.join(&now.name).display().to_string(),
                attested: attested.sha256_hex().into(),
                now: now.sha256_hex().into(),
            });
        }
        checked.push(format!("{}: sha256 {} as attested", now.name, now.sha256_hex()));
    }

    let audit = crate::record::audit::audit(&run_dir.join(RECORDS_FILE));
    if let Some(first) = audit.first_problem() {
        return Err(AttestError::NotClean {
            path: run_dir.into(),
            problems: audit.problems.len(),
            first: first.to_string(),
        });
    }
    checked.push(format!(
        "audit: clean, {} record(s), hash chain and head intact{}",
        audit.records,
        match audit.warnings.len() {
            0 => String::new(),
            n => format!(" ({n} warning(s): {})", audit.warnings.join("; ")),
        }
    ));

    let run = Run::load(run_dir, lockfiles)?;
    let attested_images: Vec<&Subject> =
        statement.subject.iter().filter(|s| !files.iter().any(|f| f.name == s.name)).collect();
    let images = run.image_subjects();
    same_images(&attested_images, &images)?;
    checked.push(format!("images: {} subject(s), exactly those the records name", images.len()));

    let attester = Attester {
        sha256: p.lab_binary.attester_sha256.clone(),
        version: p.lab_binary.attester_version.clone(),
    };
    let now = run.predicate(&audit, &attester, p.made_at.clone());
    same("scenario", &p.scenario, &now.scenario)?;
    same("run_ids", &p.run_ids, &now.run_ids)?;
    same("records", &p.records, &now.records)?;
    same("last_record_hash", &p.last_record_hash, &now.last_record_hash)?;
    same("env_hashes", &p.env_hashes, &now.env_hashes)?;
    same("lab_binary.recorded_sha256", &p.lab_binary.recorded_sha256, &now.lab_binary.recorded_sha256)?;
    checked.push(format!(
        "predicate: scenario {}, {} run id(s), {} record(s), last record hash, {} env hash(es), {} lab \
         binary sha256(s) as attested",
        now.scenario,
        now.run_ids.len(),
        now.records,
        now.env_hashes.len(),
        now.lab_binary.recorded_sha256.len()
    ));
    if p.verdicts != now.verdicts {
        return Err(AttestError::Verdicts {
            attested: show(&p.verdicts),
            now: show(&now.verdicts),
            attester_version: attester.version,
            attester_sha256: attester.sha256,
        });
    }
    checked.push(match &now.verdicts {
        None => "verdicts: the scenario has no claims (none attested)".to_string(),
        Some(v) => {
            let counts: Vec<String> = v.iter().map(|(k, n)| format!("{k} {n}")).collect();
            format!("verdicts: a fresh verify of the claims gives {} as attested", counts.join(", "))
        }
    });
    Ok(Verified { keyid, checked, statement })
}

fn read_statement(envelope: &Envelope, payload: &[u8]) -> Result<Statement, AttestError> {
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(AttestError::PayloadType { found: envelope.payload_type.clone() });
    }
    // The types first, so another kind of statement is named as such rather than as a bad shape.
    let value: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| AttestError::Statement(e.to_string()))?;
    for (field, expected) in [("_type", STATEMENT_TYPE), ("predicateType", PREDICATE_TYPE)] {
        let found =
            value.get(field).map_or("(none)".to_string(), |v| v.as_str().unwrap_or("(not a string)").into());
        if found != expected {
            return Err(AttestError::StatementType { field, found, expected });
        }
    }
    serde_json::from_value(value).map_err(|e| AttestError::Statement(e.to_string()))
}

/// The attested image subjects against those the records name now: the same set.
fn same_images(attested: &[&Subject], now: &[Subject]) -> Result<(), AttestError> {
    for a in attested {
        if now.contains(a) {
            continue;
        }
        // One image of that name now, not attested itself: its digest changed.
        let named: Vec<&Subject> = now.iter().filter(|n| n.name == a.name).collect();
        if let [n] = named[..] {
            if !attested.contains(&n) {
                return Err(AttestError::SubjectDigest {
                    name: a.name.clone(),
                    place: "in the records".into(),
                    attested: a.sha256_hex().into(),
                    now: n.sha256_hex().into(),
                });
            }
        }
        return Err(AttestError::UnknownSubject { name: a.name.clone(), digest: a.sha256_hex().into() });
    }
    match now.iter().find(|n| !attested.contains(n)) {
        Some(n) => Err(AttestError::MissingSubject { name: n.name.clone(), digest: n.sha256_hex().into() }),
        None => Ok(()),
    }
}

fn same<T: PartialEq + Serialize>(field: &'static str, attested: &T, now: &T) -> Result<(), AttestError> {
    if attested == now {
        return Ok(());
    }
    Err(AttestError::Predicate { field, attested: show(attested), now: show(now) })
}

/// A predicate field as JSON, cut at 300 characters.
fn show<T: Serialize>(v: &T) -> String {
    let s = serde_json::to_string(v).expect("predicate fields serialise");
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}
