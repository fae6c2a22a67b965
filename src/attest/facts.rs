//! What a run folder says now, in the attestation's terms: the files' digests, the images its
//! records name, and the predicate (records, scenario copy, claims' verdicts). Used both to make
//! a statement and to check one; it reads files but never writes or signs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{AttestError, Attester, AuditSummary, LabBinary, Predicate, Subject};
use crate::claims::Verdict;
use crate::record::audit::AuditReport;
use crate::record::files::{PUBLISHED_FILE, RECORDS_FILE, SCENARIO_FILE};
use crate::record::store::read_records;
use crate::record::Record;
use crate::scenario::Scenario;

/// The run folder's file subjects, records first; both files must exist. A run that keeps the
/// source's result files adds their list (`published.json`, which holds each file's sha256, and
/// the files are read only when they match it): the claims' verdicts rest on them.
pub(super) fn file_subjects(run_dir: &Path) -> Result<Vec<Subject>, AttestError> {
    let mut files = vec![RECORDS_FILE, SCENARIO_FILE];
    if run_dir.join(PUBLISHED_FILE).exists() {
        files.push(PUBLISHED_FILE);
    }
    files.into_iter().map(|f| file_subject(run_dir, f)).collect()
}

fn file_subject(run_dir: &Path, file: &'static str) -> Result<Subject, AttestError> {
    let path = run_dir.join(file);
    match crate::hash::sha256_file(&path) {
        Ok(hex) => Ok(Subject::sha256(file, hex)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(AttestError::NotARun { path: run_dir.into(), file })
        }
        Err(source) => Err(AttestError::Read { path, source }),
    }
}

/// A run's records and scenario copy, read, and its claims judged.
pub(super) struct Run {
    pub records: Vec<Record>,
    pub scenario: Scenario,
    /// Verdict counts, None when the scenario has no claims.
    pub verdicts: Option<BTreeMap<String, u64>>,
}

impl Run {
    pub fn load(run_dir: &Path, lockfiles: &Path) -> Result<Run, AttestError> {
        let records = read_records(&run_dir.join(RECORDS_FILE))?;
        let scenario = Scenario::load_in(&run_dir.join(SCENARIO_FILE), lockfiles)?;
        let published = crate::source::results::read_kept(run_dir)
            .map_err(|message| crate::claims::ClaimsError::Whole { path: run_dir.into(), message })?;
        let claims = crate::claims::scenario_claims(&scenario, published.as_ref())?;
        let verdicts = (!claims.is_empty()).then(|| {
            let audit =
                crate::claims::verify(&scenario, &claims, &records, Some(run_dir.display().to_string()));
            Verdict::ALL.iter().map(|v| (v.as_str().to_string(), audit.count(*v) as u64)).collect()
        });
        Ok(Run { records, scenario, verdicts })
    }

    /// Every container image the records name, each (name, digest) once, sorted.
    pub fn image_subjects(&self) -> Vec<Subject> {
        let mut out = BTreeSet::new();
        for r in &self.records {
            let image = &r.environment.image;
            for (reference, id) in
                [(&image.reference, &image.image_id), (&image.base.reference, &image.base.image_id)]
            {
                if let Some(hex) = sha256_of(id) {
                    out.insert(Subject::sha256(format!("image:{reference}"), hex));
                }
            }
            if let Some(pinned) = r.dispatch.as_ref().and_then(|d| d.image_digest.as_ref()) {
                if let Some(hex) = pinned.rsplit_once('@').and_then(|(_, d)| sha256_of(d)) {
                    out.insert(Subject::sha256(format!("image:{pinned}"), hex));
                }
            }
        }
        out.into_iter().collect()
    }

    /// The predicate for these records, audited as `audit` says, made by `attester` at `made_at`.
    pub fn predicate(&self, audit: &AuditReport, attester: &Attester, made_at: String) -> Predicate {
        let mut run_ids: Vec<String> = Vec::new();
        for r in &self.records {
            if !run_ids.contains(&r.run_id) {
                run_ids.push(r.run_id.clone());
            }
        }
        let distinct = |f: fn(&Record) -> &String| -> Vec<String> {
            self.records.iter().map(f).cloned().collect::<BTreeSet<_>>().into_iter().collect()
        };
        Predicate {
            scenario: self.scenario.name.clone(),
            run_ids,
            records: self.records.len() as u64,
            last_record_hash: self.records.last().map(|r| r.hash.clone()),
            env_hashes: distinct(|r| &r.env_hash),
            verdicts: self.verdicts.clone(),
            audit: AuditSummary {
                clean: audit.is_clean(),
                warnings: audit.warnings.clone(),
                notes: audit.notes.clone(),
            },
            lab_binary: LabBinary {
                recorded_sha256: distinct(|r| &r.environment.benchlab.binary_sha256),
                attester_sha256: attester.sha256.clone(),
                attester_version: attester.version.clone(),
            },
            made_at,
        }
    }
}

/// The hex of a `sha256:<64 hex>` digest; None for anything else (a native install's hash, "").
fn sha256_of(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hex)
}

#[cfg(test)]
mod tests {
    use super::sha256_of;

    #[test]
    fn only_sha256_digests_name_images() {
        let hex = "b5df871bd1ddb14356efeee9c614606a57f8e022379aae24fe3fe5e95e0d79d3";
        assert_eq!(sha256_of(&format!("sha256:{hex}")), Some(hex));
        assert_eq!(sha256_of(hex), None);
        assert_eq!(sha256_of("sha256:00"), None);
        assert_eq!(sha256_of(""), None);
    }
}
