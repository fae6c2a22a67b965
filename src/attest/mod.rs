//! Signed run attestations: an in-toto Statement about one run folder, in a DSSE envelope signed
//! with Ed25519, and its verification against the folder as it is now. This file holds the
//! format, its types and errors, and the two entry points (`attest`, `verify`); `facts` reads a
//! run folder into subjects and a predicate, `check` compares them, `dsse` signs, `keys` reads
//! and writes key files. It never prints (the CLI's `attest` does).
//!
//! # The format (predicate type `https://benchlab.dev/attestation/run/v1`)
//!
//! The envelope is DSSE v1 JSON, `attestation.dsse.json` in the run folder by default:
//!
//! ```json
//! {"payloadType": "application/vnd.in-toto+json",
//!  "payload": "<standard base64 of the statement's bytes>",
//!  "signatures": [{"keyid": "<hex sha256 of the raw 32-byte Ed25519 public key>",
//!                  "sig": "<standard base64 of the 64-byte Ed25519 signature>"}]}
//! ```
//!
//! The signature is Ed25519 (RFC 8032, verified strictly) over DSSE's pre-authentication
//! encoding `"DSSEv1" SP LEN(payloadType) SP payloadType SP LEN(payload) SP payload`, where SP is
//! one space and each LEN is the byte length in ASCII decimal. The payload bytes are signed as
//! they are; nothing is re-encoded before verifying. Keys: the private key is PKCS#8 PEM (mode
//! 0600; refused when group or others may read it), the public key SubjectPublicKeyInfo PEM
//! (`benchlab attest --generate-key K` writes `K` and `K.pub`).
//!
//! The payload is an in-toto Statement v1 (`_type` `https://in-toto.io/Statement/v1`) whose
//! `subject` list is, in this order:
//!
//! - `records.jsonl` and `scenario.toml`: the run folder's records and scenario copy, digest
//!   `{"sha256": hex of the file's bytes}`;
//! - `published.json`, when the run keeps the source's own result files its claims cite (the
//!   list holds each file's sha256, and a file is read only when it matches): the same digest;
//! - every container image the records name, sorted by name then digest, each once:
//!   `image:<reference>` with the engine's image id (`environment.image.image_id` and
//!   `environment.image.base.image_id`, `sha256:<hex>`: the digest of the image's config) as
//!   digest, and `image:<repo>@sha256:<hex>` for an image a cluster node pulled by registry
//!   digest (`dispatch.image_digest`), with that digest. Natively run cells name no image (their
//!   install is identified by the records' `input_hash`, under the records' own digest). A tag
//!   rebuilt during a run gives two subjects of one name with different digests.
//!
//! `predicateType` is `https://benchlab.dev/attestation/run/v1`, a name (nothing is fetched from
//! it), and `predicate` holds (every field always present):
//!
//! | field | meaning |
//! |---|---|
//! | `scenario` | the scenario's `name` (from the scenario copy) |
//! | `run_ids` | the records' distinct `run_id`s, in record order |
//! | `records` | how many records `records.jsonl` holds |
//! | `last_record_hash` | the last record's `hash` (the chain's tip), null for an empty store |
//! | `env_hashes` | the records' distinct `env_hash`es, sorted |
//! | `verdicts` | `benchlab verify`'s verdict counts for the scenario copy's `[[claim]]`s against these records (`reproduced`, `contradicted`, `inconclusive`, `not_measured`, `finding`, all five keys), or null when the scenario has no claims |
//! | `audit` | `benchlab audit`'s result when attested: `{"clean": bool, "warnings": [..], "notes": [..]}`; `attest` refuses a damaged or in-flight run, so `clean` is true in every attestation benchlab makes |
//! | `lab_binary` | `{"recorded_sha256": [..], "attester_sha256": hex, "attester_version": ".."}`: the records' distinct `environment.benchlab.binary_sha256` (the frozen binary that measured), sorted, and the sha256 and version of the `benchlab` executable that made the attestation |
//! | `made_at` | when the attestation was made, RFC 3339 UTC |
//!
//! Verifying (`verify`) checks, stopping at the first failure: a signature by one of the trusted
//! public keys verifies (its keyid names that key, or is empty; a signature naming only keys the
//! keyring does not hold fails, naming both keyids). The trusted keys are a keyring the verifier
//! names (`keys::Keyring`), never a key from the run folder: a run re-signed with a fresh key
//! whose public half replaced the one beside it fails; `payloadType`, `_type` and `predicateType` are the
//! ones above; the files' sha256 now equal their subjects'; the run audits clean now; the image
//! subjects are exactly those the records name now; and `scenario`, `run_ids`, `records`,
//! `last_record_hash`, `env_hashes`, `lab_binary.recorded_sha256` and `verdicts` (a fresh
//! `claims::verify` of the scenario copy against the records) equal the predicate's. The claims
//! are re-read with the checkout's `lockfiles/` (matrices with release ranges) and judged by the
//! verifying benchlab, so verdicts can differ when the lockfiles listing releases changed since,
//! or when this benchlab judges claims differently from the one that attested (the error names
//! that one's version and sha256).

mod check;
pub mod dsse;
mod facts;
pub mod keys;
pub mod log;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

pub use check::Verified;
pub use dsse::{DsseError, Envelope, PAYLOAD_TYPE};

/// The in-toto Statement type this module writes and reads.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of a benchlab run attestation (a name, never fetched).
pub const PREDICATE_TYPE: &str = "https://benchlab.dev/attestation/run/v1";
/// Where `benchlab attest` writes the envelope in a run folder unless told otherwise.
pub const ENVELOPE_FILE: &str = "attestation.dsse.json";

/// An in-toto Statement v1 about one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Statement {
    #[serde(rename = "_type")]
    pub statement_type: String,
    pub subject: Vec<Subject>,
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    pub predicate: Predicate,
}

/// One artifact the statement is about: a name and its digests (benchlab writes `sha256`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    pub name: String,
    pub digest: BTreeMap<String, String>,
}

impl Subject {
    pub fn sha256(name: impl Into<String>, hex: impl Into<String>) -> Subject {
        Subject { name: name.into(), digest: BTreeMap::from([("sha256".to_string(), hex.into())]) }
    }

    /// The sha256 digest, or "" when there is none.
    pub fn sha256_hex(&self) -> &str {
        self.digest.get("sha256").map_or("", String::as_str)
    }
}

/// What a run attestation says of its run (the table in this module's doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    pub scenario: String,
    pub run_ids: Vec<String>,
    pub records: u64,
    pub last_record_hash: Option<String>,
    pub env_hashes: Vec<String>,
    pub verdicts: Option<BTreeMap<String, u64>>,
    pub audit: AuditSummary,
    pub lab_binary: LabBinary,
    pub made_at: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSummary {
    pub clean: bool,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabBinary {
    pub recorded_sha256: Vec<String>,
    pub attester_sha256: String,
    pub attester_version: String,
}

/// The `benchlab` executable making an attestation (the CLI hashes its own file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attester {
    pub sha256: String,
    pub version: String,
}

/// How an error counts: the CLI maps these to exit codes 2, 1 and 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Bad input: an unreadable or malformed file, key, envelope, scenario or run folder.
    Input,
    /// The attestation does not hold: a signature that does not verify, something changed.
    Mismatch,
    /// Writing a key or an envelope failed.
    Environment,
}

/// An attestation that could not be made or did not verify, naming what and where.
#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    #[error("read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a run folder: it has no {file}")]
    NotARun { path: PathBuf, file: &'static str },
    #[error("key {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error("key {path} can be read by group or others (mode {mode:04o}); run `chmod 600 {path}`")]
    KeyPermissions { path: PathBuf, mode: u32 },
    #[error(
        "key {path} lies inside the run folder {run}: a key kept beside a run is never trusted (whoever \
         can rewrite the run can replace it); pass a keyring from outside the run (--keyring FILE|DIR \
         or --pub K.pub), holding the lab's public key whose keyid you checked out of band"
    )]
    KeyInRun { path: PathBuf, run: PathBuf },
    #[error("{path} exists already; not overwriting a key (remove it or choose another name)")]
    KeyExists { path: PathBuf },
    #[error(transparent)]
    Envelope(#[from] DsseError),
    #[error("the envelope's payload is not a benchlab run statement: {0}")]
    Statement(String),
    #[error("scenario copy: {0}\n  (run from the benchlab checkout, or pass --root: release ranges are read from its lockfiles/)")]
    Scenario(#[from] crate::scenario::ScenarioError),
    #[error("claims of the scenario copy: {0}")]
    Claims(#[from] crate::claims::ClaimsError),
    #[error("records: {0}")]
    Records(#[from] crate::record::store::StoreError),
    #[error("{path} is being written by {writer} now; attest it when the run has finished")]
    BeingWritten { path: PathBuf, writer: String },
    #[error(
        "{path} does not audit clean: {problems} problem(s), the first at {first}; an attestation \
         of a damaged run would never verify (see `benchlab audit {path}`)"
    )]
    Damaged { path: PathBuf, problems: usize, first: String },
    #[error("write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    #[error("payloadType is {found:?}, not {PAYLOAD_TYPE:?}")]
    PayloadType { found: String },
    #[error("the statement's {field} is {found:?}, not {expected:?}")]
    StatementType { field: &'static str, found: String, expected: &'static str },
    /// `place`: the file's path, or "in the records" for an image.
    #[error(
        "{name} ({place}) has sha256 {now} now, but the attestation says {attested}: it changed \
         since it was attested"
    )]
    SubjectDigest { name: String, place: String, attested: String, now: String },
    #[error("{name} (sha256 {digest}) is attested, but the records no longer name it")]
    UnknownSubject { name: String, digest: String },
    #[error("{name} (sha256 {digest}) is named by the records now, but not attested")]
    MissingSubject { name: String, digest: String },
    #[error(
        "{path} does not audit clean now: {problems} problem(s), the first at {first} (see \
         `benchlab audit {path}`)"
    )]
    NotClean { path: PathBuf, problems: usize, first: String },
    #[error("attestation log {path} line {line}: {reason}")]
    Log { path: PathBuf, line: usize, reason: String },
    #[error(
        "the attestation log {log} has no line for {run}: an attestation made by `benchlab attest` \
         is logged; this one was not, or its log line was removed"
    )]
    NotLogged { log: PathBuf, run: String },
    #[error(
        "the attestation log {log} names {logged} as this run's newest attestation (line {line}), but \
         the envelope checked is {found}: the attestation was replaced since (see the log's history)"
    )]
    Replaced { log: PathBuf, line: usize, logged: String, found: String },
    #[error("predicate.{field}: the attestation says {attested}, the run gives {now} now")]
    Predicate { field: &'static str, attested: String, now: String },
    #[error(
        "predicate.verdicts: the attestation says {attested}, a fresh verify of the claims gives \
         {now} (judged by this benchlab; the attestation was made by benchlab {attester_version}, \
         sha256 {attester_sha256}: a change in how claims are judged changes verdicts)"
    )]
    Verdicts { attested: String, now: String, attester_version: String, attester_sha256: String },
}

impl AttestError {
    pub fn class(&self) -> ErrorClass {
        use AttestError::*;
        match self {
            Read { .. }
            | NotARun { .. }
            | Key { .. }
            | KeyPermissions { .. }
            | KeyExists { .. }
            | KeyInRun { .. } => ErrorClass::Input,
            Envelope(DsseError::BadSignature { .. } | DsseError::NotTrusted { .. }) => ErrorClass::Mismatch,
            Envelope(_) | Statement(_) | Scenario(_) | Claims(_) | Records(_) => ErrorClass::Input,
            BeingWritten { .. } | Damaged { .. } | Log { .. } => ErrorClass::Input,
            NotLogged { .. } | Replaced { .. } => ErrorClass::Mismatch,
            Write { .. } => ErrorClass::Environment,
            PayloadType { .. }
            | StatementType { .. }
            | SubjectDigest { .. }
            | UnknownSubject { .. }
            | MissingSubject { .. }
            | NotClean { .. }
            | Predicate { .. }
            | Verdicts { .. } => ErrorClass::Mismatch,
        }
    }
}

/// Attests the run in `run_dir`: audits it (refusing a damaged or in-flight run), reads its
/// records, scenario copy and claims (release ranges from `lockfiles`), and signs the statement.
pub fn attest(
    run_dir: &Path,
    key: &SigningKey,
    lockfiles: &Path,
    attester: &Attester,
) -> Result<(Envelope, Statement), AttestError> {
    let files = facts::file_subjects(run_dir)?;
    let audit = crate::record::audit::audit(&run_dir.join(crate::record::files::RECORDS_FILE));
    if audit.being_written {
        let writer = audit.writer_pid.map_or("a benchlab".to_string(), |p| format!("benchlab pid {p}"));
        return Err(AttestError::BeingWritten { path: run_dir.into(), writer });
    }
    if let Some(first) = audit.first_problem() {
        return Err(AttestError::Damaged {
            path: run_dir.into(),
            problems: audit.problems.len(),
            first: first.to_string(),
        });
    }
    let run = facts::Run::load(run_dir, lockfiles)?;
    let mut subject = files;
    subject.extend(run.image_subjects());
    let statement = Statement {
        statement_type: STATEMENT_TYPE.into(),
        subject,
        predicate_type: PREDICATE_TYPE.into(),
        predicate: run.predicate(&audit, attester, crate::record::now_rfc3339()),
    };
    let payload = serde_json::to_vec(&statement).expect("statements serialise");
    Ok((Envelope::sign(PAYLOAD_TYPE, &payload, key), statement))
}

/// Verifies `envelope` with one of the trusted `keys` (a keyring from outside the run) and checks its statement against `run_dir` as it is now (the
/// module doc lists the checks, in order). The first failure is the error.
pub fn verify(
    run_dir: &Path,
    envelope: &Envelope,
    keys: &[VerifyingKey],
    lockfiles: &Path,
) -> Result<Verified, AttestError> {
    check::verify(run_dir, envelope, keys, lockfiles)
}

#[cfg(test)]
mod tests;
