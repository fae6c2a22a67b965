//! The append-only attestation log (`ATTESTATIONS.log` beside the runs of a results folder): one
//! line per attestation made, naming the run, the envelope's sha256 and the signing keyid, so an
//! attestation replaced later stays visible in the log's history (git's, for committed results).
//! This file finds the log, appends a line and checks an envelope against the run's newest line;
//! it never rewrites a line.
//!
//! A line is four tab-separated fields: the run folder relative to the log's folder,
//! `sha256:<hex of the envelope file's bytes>`, `keyid:<hex>`, and when the attestation was made
//! (RFC 3339). Lines starting with `#` are comments.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::AttestError;

/// The log's file name.
pub const LOG_FILE: &str = "ATTESTATIONS.log";

/// One attestation the log names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub run: String,
    pub sha256: String,
    pub keyid: String,
    pub made_at: String,
    /// 1-based line number in the log.
    pub line: usize,
}

/// The log that covers `run_dir`: an `ATTESTATIONS.log` in the run's parent or grandparent folder
/// (`results/ATTESTATIONS.log` for `results/<scenario>/<run>`), the nearest first. None when
/// neither holds one: the log is opted into by creating it (or by `--log`).
pub fn find(run_dir: &Path) -> Option<PathBuf> {
    let run = run_dir.canonicalize().ok()?;
    run.ancestors().skip(1).take(2).map(|d| d.join(LOG_FILE)).find(|p| p.is_file())
}

/// How the log names `run_dir`: its path relative to the log's folder (canonical paths), or the
/// canonical path when the run lies elsewhere.
pub fn run_name(log: &Path, run_dir: &Path) -> String {
    let run = run_dir.canonicalize().unwrap_or_else(|_| run_dir.to_path_buf());
    let base = log.parent().and_then(|d| d.canonicalize().ok());
    match base.as_deref().and_then(|b| run.strip_prefix(b).ok()) {
        Some(rel) => rel.display().to_string(),
        None => run.display().to_string(),
    }
}

/// Appends one line for an attestation of `run_dir` (creating the log when it does not exist).
pub fn append(
    log: &Path,
    run_dir: &Path,
    envelope_sha256: &str,
    keyid: &str,
    made_at: &str,
) -> Result<(), AttestError> {
    let line = format!("{}\tsha256:{envelope_sha256}\tkeyid:{keyid}\t{made_at}\n", run_name(log, run_dir));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
        f.write_all(line.as_bytes())?;
        f.sync_all()
    };
    write().map_err(|source| AttestError::Write { path: log.into(), source })
}

/// Every entry of the log, in order; a malformed line is bad input naming its number.
pub fn read(log: &Path) -> Result<Vec<Entry>, AttestError> {
    let text =
        std::fs::read_to_string(log).map_err(|source| AttestError::Read { path: log.into(), source })?;
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| AttestError::Log { path: log.into(), line: i + 1, reason: why.to_string() };
        let fields: Vec<&str> = line.split('\t').collect();
        let [run, sha, keyid, made_at] = fields[..] else {
            return Err(bad("expected 4 tab-separated fields: run, sha256:<hex>, keyid:<hex>, made_at"));
        };
        let (Some(sha256), Some(keyid)) = (sha.strip_prefix("sha256:"), keyid.strip_prefix("keyid:")) else {
            return Err(bad("the 2nd field must start with sha256: and the 3rd with keyid:"));
        };
        entries.push(Entry {
            run: run.into(),
            sha256: sha256.into(),
            keyid: keyid.into(),
            made_at: made_at.into(),
            line: i + 1,
        });
    }
    Ok(entries)
}

/// Checks an envelope (its file's sha256, the keyid that verified it) against the newest line
/// the log holds for `run_dir`: the run must be listed, and its newest line name this envelope
/// and key. Returns the line's description for the checked list.
pub fn check(log: &Path, run_dir: &Path, envelope_sha256: &str, keyid: &str) -> Result<String, AttestError> {
    let name = run_name(log, run_dir);
    let entries = read(log)?;
    let Some(newest) = entries.iter().rev().find(|e| e.run == name) else {
        return Err(AttestError::NotLogged { log: log.into(), run: name });
    };
    let earlier = entries.iter().filter(|e| e.run == name).count() - 1;
    if newest.sha256 != envelope_sha256 || newest.keyid != keyid {
        return Err(AttestError::Replaced {
            log: log.into(),
            line: newest.line,
            logged: format!("sha256:{} keyid:{}", newest.sha256, newest.keyid),
            found: format!("sha256:{envelope_sha256} keyid:{keyid}"),
        });
    }
    Ok(format!(
        "log: {} line {} names this envelope and key as the run's newest attestation ({earlier} earlier)",
        log.display(),
        newest.line
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_checked_against_its_newest_line() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("scn").join("run1");
        std::fs::create_dir_all(&run).unwrap();
        let log = dir.path().join(LOG_FILE);
        assert_eq!(find(&run), None);
        append(&log, &run, "aa", "k1", "2026-12-08T00:00:00Z").unwrap();
        assert_eq!(find(&run), Some(log.canonicalize().unwrap()));
        assert_eq!(read(&log).unwrap()[0].run, "scn/run1");
        assert!(check(&log, &run, "aa", "k1").unwrap().contains("0 earlier"));
        // A newer attestation replaces the old one: the old envelope no longer passes.
        append(&log, &run, "bb", "k2", "2026-12-08T01:00:00Z").unwrap();
        let e = check(&log, &run, "aa", "k1").unwrap_err();
        assert!(matches!(e, AttestError::Replaced { line: 2, .. }), "{e}");
        assert!(e.to_string().contains("sha256:bb keyid:k2"), "{e}");
        assert!(check(&log, &run, "bb", "k2").is_ok());
        // Another run is not listed.
        let other = dir.path().join("scn").join("run2");
        std::fs::create_dir_all(&other).unwrap();
        assert!(matches!(check(&log, &other, "bb", "k2"), Err(AttestError::NotLogged { .. })));
    }

    #[test]
    fn a_malformed_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join(LOG_FILE);
        std::fs::write(&log, "# comment\nrun\tsha256:aa\n").unwrap();
        let e = read(&log).unwrap_err();
        assert!(matches!(e, AttestError::Log { line: 2, .. }), "{e}");
    }
}
