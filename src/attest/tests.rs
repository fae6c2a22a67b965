//! Attesting and verifying a copy of a committed run folder in-process: the round trip, and each
//! kind of change named by its own error.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ed25519_dalek::SigningKey;

use super::*;

const RUN: &str = "results/seed-000-sse/20261130T122735Z-seed-000-sse-5513";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn lockfiles() -> PathBuf {
    root().join("lockfiles")
}

/// A copy of the committed run's files (not its lock) in a fresh folder.
fn run_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for f in ["records.jsonl", "records.head", "scenario.toml"] {
        std::fs::copy(root().join(RUN).join(f), dir.path().join(f)).unwrap();
    }
    dir
}

fn key() -> SigningKey {
    SigningKey::from_bytes(&[9; 32])
}

fn attester() -> Attester {
    Attester { sha256: "a".repeat(64), version: "0.0.0-test".into() }
}

/// The envelope of `statement` signed again with `key()`: a signed statement that lies.
fn resign(statement: &Statement) -> Envelope {
    Envelope::sign(PAYLOAD_TYPE, &serde_json::to_vec(statement).unwrap(), &key())
}

#[test]
fn an_attestation_verifies_against_its_run() {
    let run = run_copy();
    let (envelope, statement) = attest(run.path(), &key(), &lockfiles(), &attester()).unwrap();
    let names: Vec<&str> = statement.subject.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names[..2], ["records.jsonl", "scenario.toml"]);
    assert!(names[2..].iter().all(|n| n.starts_with("image:")), "{names:?}");
    assert!(names.len() > 2, "the records name images: {names:?}");
    let records = std::fs::read(run.path().join("records.jsonl")).unwrap();
    assert_eq!(statement.subject[0].sha256_hex(), crate::hash::sha256_hex(&records));
    let p = &statement.predicate;
    assert_eq!(p.scenario, "seed-000-sse");
    assert_eq!(p.records, 12);
    assert_eq!(p.run_ids, ["20261130T122735Z-seed-000-sse-5513"]);
    assert!(p.audit.clean);
    let verdicts = p.verdicts.as_ref().expect("the scenario has claims");
    assert_eq!(verdicts.len(), 5);
    assert!(verdicts.values().sum::<u64>() > 0);
    assert_eq!(p.lab_binary.attester_sha256, "a".repeat(64));

    let verified = verify(run.path(), &envelope, &[key().verifying_key()], &lockfiles()).unwrap();
    assert_eq!(verified.statement, statement);
    assert_eq!(verified.keyid, dsse::keyid(&key().verifying_key()));
    assert!(
        verified.checked.iter().any(|c| c.starts_with("verdicts: a fresh verify")),
        "{:?}",
        verified.checked
    );
}

#[test]
fn a_changed_file_is_named() {
    let run = run_copy();
    let (envelope, _) = attest(run.path(), &key(), &lockfiles(), &attester()).unwrap();
    let scenario = run.path().join("scenario.toml");
    let mut text = std::fs::read_to_string(&scenario).unwrap();
    text.push_str("\n# edited\n");
    std::fs::write(&scenario, text).unwrap();
    let e = verify(run.path(), &envelope, &[key().verifying_key()], &lockfiles()).unwrap_err();
    assert!(matches!(&e, AttestError::SubjectDigest { name, .. } if name == "scenario.toml"), "{e}");
    assert_eq!(e.class(), ErrorClass::Mismatch);
}

#[test]
fn a_signed_statement_that_lies_is_caught() {
    let run = run_copy();
    let (_, statement) = attest(run.path(), &key(), &lockfiles(), &attester()).unwrap();
    let check =
        |s: &Statement| verify(run.path(), &resign(s), &[key().verifying_key()], &lockfiles()).unwrap_err();

    let mut s = statement.clone();
    *s.predicate.verdicts.as_mut().unwrap().get_mut("reproduced").unwrap() += 1;
    let e = check(&s);
    assert!(matches!(e, AttestError::Verdicts { .. }), "{e}");
    assert!(e.to_string().contains("0.0.0-test"), "names the attester's version: {e}");

    let mut s = statement.clone();
    s.predicate.records += 1;
    assert!(matches!(check(&s), AttestError::Predicate { field: "records", .. }));

    let mut s = statement.clone();
    let image = s.subject.pop().unwrap();
    assert!(matches!(check(&s), AttestError::MissingSubject { name, .. } if name == image.name));

    let mut s = statement.clone();
    s.subject.push(Subject::sha256("image:someone/else:1", "0".repeat(64)));
    assert!(matches!(check(&s), AttestError::UnknownSubject { .. }));

    let mut s = statement.clone();
    let last = s.subject.len() - 1;
    s.subject[last] = Subject::sha256(s.subject[last].name.clone(), "f".repeat(64));
    assert!(matches!(check(&s), AttestError::SubjectDigest { place, .. } if place == "in the records"));

    let mut s = statement.clone();
    s.predicate_type = "https://example.org/other/v1".into();
    assert!(matches!(check(&s), AttestError::StatementType { field: "predicateType", .. }));
}

#[test]
fn a_wrong_key_or_payload_type_is_refused() {
    let run = run_copy();
    let (envelope, statement) = attest(run.path(), &key(), &lockfiles(), &attester()).unwrap();
    let other = SigningKey::from_bytes(&[10; 32]).verifying_key();
    let e = verify(run.path(), &envelope, &[other], &lockfiles()).unwrap_err();
    assert!(matches!(e, AttestError::Envelope(DsseError::NotTrusted { .. })), "{e}");
    assert_eq!(e.class(), ErrorClass::Mismatch);
    // Both keyids are named: the one that signed and the one trusted.
    let text = e.to_string();
    assert!(text.contains(&dsse::keyid(&key().verifying_key())), "{text}");
    assert!(text.contains(&dsse::keyid(&other)), "{text}");

    let payload = serde_json::to_vec(&statement).unwrap();
    let json = Envelope::sign("application/json", &payload, &key());
    let e = verify(run.path(), &json, &[key().verifying_key()], &lockfiles()).unwrap_err();
    assert!(matches!(e, AttestError::PayloadType { .. }), "{e}");

    let mut flipped = envelope.clone();
    let mut bytes = STANDARD.decode(&flipped.payload).unwrap();
    bytes[10] ^= 0x20;
    flipped.payload = STANDARD.encode(bytes);
    let e = verify(run.path(), &flipped, &[key().verifying_key()], &lockfiles()).unwrap_err();
    assert!(matches!(e, AttestError::Envelope(DsseError::BadSignature { .. })), "{e}");
}

#[test]
fn a_damaged_run_is_not_attested_and_does_not_verify() {
    let run = run_copy();
    let (envelope, _) = attest(run.path(), &key(), &lockfiles(), &attester()).unwrap();
    // The head says one record more than there is: damage the audit finds, with the records intact.
    let head = run.path().join("records.head");
    let text = std::fs::read_to_string(&head).unwrap().replace("{\"records\":12,", "{\"records\":13,");
    std::fs::write(&head, text).unwrap();
    let e = attest(run.path(), &key(), &lockfiles(), &attester()).unwrap_err();
    assert!(matches!(e, AttestError::Damaged { .. }), "{e}");
    assert_eq!(e.class(), ErrorClass::Input);
    let e = verify(run.path(), &envelope, &[key().verifying_key()], &lockfiles()).unwrap_err();
    assert!(matches!(e, AttestError::NotClean { .. }), "{e}");
}

#[test]
fn a_folder_without_records_is_not_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let e = attest(dir.path(), &key(), &lockfiles(), &attester()).unwrap_err();
    assert!(matches!(e, AttestError::NotARun { file: "records.jsonl", .. }), "{e}");
    assert_eq!(e.class(), ErrorClass::Input);
}

#[test]
fn a_runs_kept_result_files_are_a_subject_and_a_changed_one_is_named() {
    let run = run_copy();
    let content = br#"{"invented":1}"#.to_vec();
    let published = crate::source::results::Published {
        format_version: crate::source::results::FORMAT_VERSION,
        git: "https://example.invalid/bench".into(),
        commit: "0".repeat(40),
        files: vec![crate::source::results::ResultFile {
            path: "r/summary.json".into(),
            sha256: crate::hash::sha256_hex(&content),
            bytes: content.len() as u64,
            content,
        }],
    };
    crate::source::results::keep(run.path(), &published).unwrap();
    let (envelope, statement) = attest(run.path(), &key(), &lockfiles(), &attester()).unwrap();
    let names: Vec<&str> = statement.subject.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names[..3], ["records.jsonl", "scenario.toml", "published.json"]);
    verify(run.path(), &envelope, &[key().verifying_key()], &lockfiles()).unwrap();
    let list = run.path().join("published.json");
    let text = std::fs::read_to_string(&list).unwrap().replace("example.invalid", "example.test");
    std::fs::write(&list, text).unwrap();
    let e = verify(run.path(), &envelope, &[key().verifying_key()], &lockfiles()).unwrap_err();
    assert!(matches!(&e, AttestError::SubjectDigest { name, .. } if name == "published.json"), "{e}");
}
