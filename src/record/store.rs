//! The append-only store of a run: `results/<run-id>/records.jsonl`, one record per line, each
//! chained to the one before by `prev_hash`, appended with a single write and an fsync.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::record::{Record, FORMAT_VERSION};

pub const RECORDS_FILE: &str = "records.jsonl";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: not a record: {message}")]
    Parse { path: PathBuf, line: usize, message: String },
    #[error("{path}:{line}: record format_version {found} is not one this benchlab reads (it reads {FORMAT_VERSION})")]
    Version { path: PathBuf, line: usize, found: u64 },
    #[error("{path}:{line}: the last line is incomplete (a write was cut short); it is not a record")]
    Torn { path: PathBuf, line: usize },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_path_buf(), source }
}

/// An open run directory that records are appended to.
pub struct Store {
    path: PathBuf,
    file: File,
    last_hash: Option<String>,
    next_seq: u64,
}

impl Store {
    /// Opens (creating if needed) the store in `run_dir`, continuing its chain.
    pub fn open(run_dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(run_dir).map_err(io(run_dir))?;
        let path = run_dir.join(RECORDS_FILE);
        let existing = if path.exists() { read_records(&path)? } else { Vec::new() };
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(io(&path))?;
        if existing.is_empty() {
            // Make the new file's directory entry durable too.
            if let Ok(d) = File::open(run_dir) {
                let _ = d.sync_all();
            }
        }
        Ok(Store {
            path,
            file,
            last_hash: existing.last().map(|r| r.hash.clone()),
            next_seq: existing.len() as u64,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Chains, hashes and appends a record; returns it as stored.
    pub fn append(&mut self, mut record: Record) -> Result<Record, StoreError> {
        record.format_version = FORMAT_VERSION;
        record.seq = self.next_seq;
        record.prev_hash = self.last_hash.clone();
        record.env_hash = record.environment.hash();
        record.hash = record.compute_hash();
        let mut line = serde_json::to_string(&record).expect("records serialise");
        line.push('\n');
        // One write of the whole line: a crash leaves at most a torn last line, which readers
        // detect (no newline) and never take for a record.
        self.file.write_all(line.as_bytes()).map_err(io(&self.path))?;
        self.file.sync_data().map_err(io(&self.path))?;
        self.last_hash = Some(record.hash.clone());
        self.next_seq += 1;
        Ok(record)
    }
}

/// Reads every record of a store, refusing unknown format versions and torn lines.
pub fn read_records(path: &Path) -> Result<Vec<Record>, StoreError> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let mut out = Vec::new();
    let line_count = text.lines().count();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if n == line_count && !text.ends_with('\n') {
            return Err(StoreError::Torn { path: path.into(), line: n });
        }
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| StoreError::Parse {
            path: path.into(),
            line: n,
            message: e.to_string(),
        })?;
        let version = value.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0);
        if version != u64::from(FORMAT_VERSION) {
            return Err(StoreError::Version { path: path.into(), line: n, found: version });
        }
        let record: Record = serde_json::from_value(value).map_err(|e| StoreError::Parse {
            path: path.into(),
            line: n,
            message: e.to_string(),
        })?;
        out.push(record);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;

    #[test]
    fn appends_chain_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let mut store = Store::open(d.path()).unwrap();
        let a = store.append(sample_record("a")).unwrap();
        let b = store.append(sample_record("b")).unwrap();
        assert_eq!(a.prev_hash, None);
        assert_eq!(b.prev_hash.as_deref(), Some(a.hash.as_str()));
        assert_eq!((a.seq, b.seq), (0, 1));
        // A reopened store continues the chain.
        let mut again = Store::open(d.path()).unwrap();
        let c = again.append(sample_record("c")).unwrap();
        assert_eq!(c.prev_hash.as_deref(), Some(b.hash.as_str()));
        assert_eq!(c.seq, 2);
        let back = read_records(&d.path().join(RECORDS_FILE)).unwrap();
        assert_eq!(back, vec![a, b, c]);
        for r in &back {
            assert_eq!(r.compute_hash(), r.hash, "hashes survive the JSON round trip");
            assert_eq!(r.environment.hash(), r.env_hash);
        }
    }

    #[test]
    fn a_torn_last_line_is_reported_not_parsed() {
        let d = tempfile::tempdir().unwrap();
        let mut store = Store::open(d.path()).unwrap();
        store.append(sample_record("a")).unwrap();
        let path = d.path().join(RECORDS_FILE);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str(r#"{"format_version":2,"run_id":"#);
        std::fs::write(&path, text).unwrap();
        let e = read_records(&path).unwrap_err();
        assert!(matches!(e, StoreError::Torn { line: 2, .. }), "{e}");
    }

    #[test]
    fn unknown_format_versions_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(RECORDS_FILE);
        std::fs::write(&path, "{\"format_version\":99}\n").unwrap();
        let e = read_records(&path).unwrap_err().to_string();
        assert!(e.contains(":1: record format_version 99"), "{e}");
    }
}
