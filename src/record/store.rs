//! The append-only store of a run: `results/<run-id>/records.jsonl`, one record per line, each
//! chained to the one before by `prev_hash`, appended with a single write and an fsync; beside it
//! `records.head` (the count and hash of the last record, so a cut at a line boundary shows) and
//! `.lock` (one writer per run folder). Verifying a store is `audit`'s job; this module refuses to
//! extend one that does not verify.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

use crate::record::audit::audit_with;
pub use crate::record::files::{Head, HEAD_FILE, LOCK_FILE, RECORDS_FILE};
use crate::record::{Record, FORMAT_VERSION, READABLE_FORMAT_VERSIONS};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: not a record: {message}")]
    Parse { path: PathBuf, line: usize, message: String },
    #[error("{path}:{line}: record format_version {found} is not one this benchlab reads (it reads 2 and {FORMAT_VERSION})")]
    Version { path: PathBuf, line: usize, found: u64 },
    #[error("{path}:{line}: the last line is incomplete (a write was cut short); it is not a record")]
    Torn { path: PathBuf, line: usize },
    #[error("run directory {} is being written by another benchlab ({holder})", run_dir.display())]
    Locked { run_dir: PathBuf, holder: String },
    #[error("{at}: refusing to append to a damaged store: {problem}; {count} problem(s) in all (`benchlab audit {}` lists them)", run_dir.display())]
    Damaged { at: String, run_dir: PathBuf, problem: String, count: usize },
    #[error("{path}: an earlier append failed part-way, so this store takes no more records")]
    Poisoned { path: PathBuf },
    #[error("{path}: a record of run {found:?} cannot join the records of run {expected:?}")]
    RunId { path: PathBuf, expected: String, found: String },
    #[error("{path}: the record was stored but the head could not be updated: {source}")]
    Head { path: PathBuf, source: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io { path: path.to_path_buf(), source }
}

/// An open run directory that records are appended to. Holds the run's lock while it lives.
pub struct Store {
    path: PathBuf,
    run_dir: PathBuf,
    file: File,
    _lock: Flock<File>,
    /// Bytes of records.jsonl, all complete lines: where a failed append is rolled back to.
    len: u64,
    last_hash: Option<String>,
    next_seq: u64,
    run_id: Option<String>,
    /// Set when an append failed in a way that leaves the file's state unknown (fsync failed,
    /// a partial line could not be removed): no further appends.
    poisoned: bool,
}

impl Store {
    /// Opens (creating if needed) the store in `run_dir`, continuing its chain. Takes the run's
    /// lock first, and refuses a store that does not audit clean (a torn last line, a broken
    /// chain, a head that does not match): a crash or an edit is never silently extended.
    pub fn open(run_dir: &Path) -> Result<Store, StoreError> {
        std::fs::create_dir_all(run_dir).map_err(io(run_dir))?;
        let lock = lock_run_dir(run_dir)?;
        let path = run_dir.join(RECORDS_FILE);
        let created = !path.exists();
        let file = OpenOptions::new().create(true).append(true).open(&path).map_err(io(&path))?;

        let (report, _) = audit_with(&path, false, false);
        if let Some(first) = report.first_problem() {
            let at = match first.line {
                Some(l) => format!("{}:{l}", path.display()),
                None => path.display().to_string(),
            };
            return Err(StoreError::Damaged {
                at,
                run_dir: run_dir.to_path_buf(),
                problem: first.to_string(),
                count: report.problems.len(),
            });
        }
        let len = file.metadata().map_err(io(&path))?.len();
        let head = Head { records: report.lines as u64, hash: report.last_hash.clone() };
        if report.head.as_ref() != Some(&head) {
            // A new store, one written before heads were kept, or a head one record behind
            // (the writer stopped between the two writes): make it name the last record.
            write_head(run_dir, &head)
                .map_err(|source| StoreError::Head { path: run_dir.join(HEAD_FILE), source })?;
        } else if created {
            // Make the new file's directory entry durable too.
            File::open(run_dir).and_then(|d| d.sync_all()).map_err(io(run_dir))?;
        }
        Ok(Store {
            path,
            run_dir: run_dir.to_path_buf(),
            file,
            _lock: lock,
            len,
            last_hash: report.last_hash,
            next_seq: report.lines as u64,
            run_id: report.run_id,
            poisoned: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Chains, hashes and appends a record; returns it as stored.
    pub fn append(&mut self, mut record: Record) -> Result<Record, StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned { path: self.path.clone() });
        }
        if let Some(expected) = &self.run_id {
            if *expected != record.run_id {
                return Err(StoreError::RunId {
                    path: self.path.clone(),
                    expected: expected.clone(),
                    found: record.run_id,
                });
            }
        }
        record.format_version = FORMAT_VERSION;
        record.seq = self.next_seq;
        record.prev_hash = self.last_hash.clone();
        record.env_hash = record.environment.hash();
        record.hash = record.compute_hash();
        let mut line = serde_json::to_string(&record).expect("records serialise");
        line.push('\n');
        // One write of the whole line (O_APPEND): a crash leaves at most a torn last line, which
        // readers detect (no newline) and never take for a record, and which `open` refuses.
        if let Err(e) = self.file.write_all(line.as_bytes()) {
            // A part of the line may be in the file (a full disk): cut it off, or stop here, so
            // that the next append cannot follow a fragment.
            if self.file.set_len(self.len).and_then(|_| self.file.sync_data()).is_err() {
                self.poisoned = true;
            }
            return Err(StoreError::Io { path: self.path.clone(), source: e });
        }
        if let Err(e) = self.file.sync_data() {
            // After a failed fsync the kernel may have dropped the dirty pages: what is on disk
            // is unknown, and retrying would report success for data that is not there.
            self.poisoned = true;
            return Err(StoreError::Io { path: self.path.clone(), source: e });
        }
        self.len += line.len() as u64;
        self.last_hash = Some(record.hash.clone());
        self.next_seq += 1;
        self.run_id.get_or_insert_with(|| record.run_id.clone());
        let head = Head { records: self.next_seq, hash: self.last_hash.clone() };
        if let Err(source) = write_head(&self.run_dir, &head) {
            // The record is durable; the head is one behind, which `open` repairs.
            self.poisoned = true;
            return Err(StoreError::Head { path: self.run_dir.join(HEAD_FILE), source });
        }
        Ok(record)
    }
}

/// Takes the run directory's lock (non-blocking) and writes this process's pid into it.
fn lock_run_dir(run_dir: &Path) -> Result<Flock<File>, StoreError> {
    let lock_path = run_dir.join(LOCK_FILE);
    // Not truncated on open: before the lock is ours, its pid is the holder's.
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let holder = match pid.trim().parse::<u32>() {
                Ok(p) => format!("pid {p}"),
                Err(_) => "pid unknown".into(),
            };
            return Err(StoreError::Locked { run_dir: run_dir.to_path_buf(), holder });
        }
        Err((_, errno)) => return Err(io(&lock_path)(std::io::Error::from(errno))),
    };
    lock.set_len(0).map_err(io(&lock_path))?;
    writeln!(*lock, "{}", std::process::id()).map_err(io(&lock_path))?;
    Ok(lock)
}

/// Replaces `records.head` atomically: a temporary file, fsync, rename, fsync of the directory.
fn write_head(run_dir: &Path, head: &Head) -> std::io::Result<()> {
    let tmp = run_dir.join(format!("{HEAD_FILE}.tmp"));
    let mut f = File::create(&tmp)?;
    let mut text = serde_json::to_string(head).expect("a head serialises");
    text.push('\n');
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, run_dir.join(HEAD_FILE))?;
    File::open(run_dir)?.sync_all()
}

/// Reads every record of a store, refusing unknown format versions and torn lines (the first
/// problem in file order). Lines are parsed on every CPU.
pub fn read_records(path: &Path) -> Result<Vec<Record>, StoreError> {
    // Lines as `str::lines` cuts them (a `\r` before the newline dropped), parsed on every CPU as
    // the file is read.
    let read =
        crate::par::map_lines(path, |n, line| read_line(path, n, line.strip_suffix(b"\r").unwrap_or(line)))
            .map_err(io(path))?;
    let torn = (read.rest > 0).then_some(read.count() + 1);
    let mut out = Vec::with_capacity(read.count());
    for r in read.into_results() {
        out.extend(r?);
    }
    match torn {
        Some(line) => Err(StoreError::Torn { path: path.into(), line }),
        None => Ok(out),
    }
}

/// A store's records and its audit. A store that audits clean is read once (the audit's own
/// reading); any other is read again by [`read_records`], which refuses what it cannot read.
pub fn read_audited(path: &Path) -> Result<(Vec<Record>, crate::record::audit::AuditReport), StoreError> {
    let (audit, clean) = crate::record::audit::audit_and_read(path);
    let records = match clean {
        Some(records) => records,
        None => read_records(path)?,
    };
    Ok((records, audit))
}

/// One line of a store: None when blank.
fn read_line(path: &Path, n: usize, line: &[u8]) -> Result<Option<Record>, StoreError> {
    /// The version alone: read when a line is not a record of a format this build reads, to
    /// say whether its format is why (the rest's shape depends on it).
    #[derive(serde::Deserialize)]
    struct Version {
        format_version: Option<serde_json::Value>,
    }
    let parse = |message: String| StoreError::Parse { path: path.into(), line: n, message };
    let line = std::str::from_utf8(line).map_err(|e| parse(format!("not UTF-8 text: {e}")))?;
    if line.trim().is_empty() {
        return Ok(None);
    }
    let readable = |v: u64| READABLE_FORMAT_VERSIONS.iter().any(|&k| u64::from(k) == v);
    // One pass, its environment shared (see `record::shared`), for a record this build reads.
    if let Ok(r) = crate::record::shared::read_record(line.as_bytes()) {
        if readable(u64::from(r.format_version)) {
            return Ok(Some(r));
        }
    }
    // Else the version first, then a plain reading, whose error says where in the line it is.
    let version = serde_json::from_str::<Version>(line).map_err(|e| parse(e.to_string()))?;
    let version = version.format_version.and_then(|v| v.as_u64()).unwrap_or(0);
    if !readable(version) {
        return Err(StoreError::Version { path: path.into(), line: n, found: version });
    }
    serde_json::from_str::<Record>(line).map(Some).map_err(|e| parse(e.to_string()))
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
        drop(store);
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

    fn open_err(dir: &Path) -> StoreError {
        match Store::open(dir) {
            Ok(_) => panic!("{} opened", dir.display()),
            Err(e) => e,
        }
    }

    #[test]
    fn a_second_writer_is_refused_while_the_first_holds_the_run() {
        let d = tempfile::tempdir().unwrap();
        let mut first = Store::open(d.path()).unwrap();
        // Store::open opens .lock anew: a separate open file description, so flock applies even
        // within one process.
        let e = open_err(d.path());
        assert!(matches!(&e, StoreError::Locked { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "run directory {} is being written by another benchlab (pid {})",
                d.path().display(),
                std::process::id()
            )
        );
        first.append(sample_record("a")).unwrap();
        drop(first);
        let mut again = Store::open(d.path()).unwrap();
        assert_eq!(again.append(sample_record("b")).unwrap().seq, 1);
    }

    #[test]
    fn a_torn_store_is_not_continued() {
        let d = tempfile::tempdir().unwrap();
        let mut store = Store::open(d.path()).unwrap();
        store.append(sample_record("a")).unwrap();
        drop(store);
        let path = d.path().join(RECORDS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(br#"{"format_version":2,"#).unwrap();
        let e = open_err(d.path()).to_string();
        assert!(
            e.starts_with(&format!(
                "{}:2: refusing to append to a damaged store: line 2: torn:",
                path.display()
            )),
            "{e}"
        );
        assert!(e.contains("1 problem(s) in all"), "{e}");
    }

    #[test]
    fn a_broken_chain_or_a_cut_end_is_not_continued() {
        let d = tempfile::tempdir().unwrap();
        let mut store = Store::open(d.path()).unwrap();
        for id in ["a", "b", "c"] {
            store.append(sample_record(id)).unwrap();
        }
        drop(store);
        let path = d.path().join(RECORDS_FILE);
        let good = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = good.lines().collect();

        std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[2])).unwrap();
        let e = open_err(d.path()).to_string();
        assert!(e.starts_with(&format!("{}:2: refusing", path.display())), "{e}");
        assert!(e.contains("line 2 (seq 2, cell c/cold_start): seq: expected 1, found 2"), "{e}");

        std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[1])).unwrap();
        let e = open_err(d.path()).to_string();
        assert!(e.contains("store: head: expected 3 record(s)"), "{e}");
    }

    #[test]
    fn a_store_without_a_head_or_one_behind_is_continued_and_repaired() {
        let d = tempfile::tempdir().unwrap();
        let mut store = Store::open(d.path()).unwrap();
        let a = store.append(sample_record("a")).unwrap();
        store.append(sample_record("b")).unwrap();
        drop(store);
        let head_path = d.path().join(HEAD_FILE);
        // One behind: the writer stopped between the append and the head update.
        std::fs::write(&head_path, serde_json::to_string(&Head { records: 1, hash: Some(a.hash) }).unwrap())
            .unwrap();
        drop(Store::open(d.path()).unwrap());
        let head: Head = serde_json::from_str(&std::fs::read_to_string(&head_path).unwrap()).unwrap();
        assert_eq!(head.records, 2);
        // Written before heads were kept.
        std::fs::remove_file(&head_path).unwrap();
        let mut store = Store::open(d.path()).unwrap();
        assert!(head_path.exists());
        assert_eq!(store.append(sample_record("c")).unwrap().seq, 2);
    }

    #[test]
    fn records_of_another_run_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let mut store = Store::open(d.path()).unwrap();
        store.append(sample_record("a")).unwrap();
        let mut other = sample_record("b");
        other.run_id = "other".into();
        let e = store.append(other).unwrap_err().to_string();
        assert!(e.ends_with(r#"a record of run "other" cannot join the records of run "run""#), "{e}");
        assert_eq!(store.append(sample_record("c")).unwrap().seq, 1);
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
    fn lines_read_back_as_written_with_their_faults_named_by_line() {
        let d = tempfile::tempdir().unwrap();
        let mut store = Store::open(d.path()).unwrap();
        let written: Vec<Record> = ["a", "b", "c"].map(|id| store.append(sample_record(id)).unwrap()).into();
        drop(store);
        let path = d.path().join(RECORDS_FILE);
        let good = std::fs::read(&path).unwrap();
        // Blank lines and CRLF endings, as `str::lines` reads them.
        let crlf = String::from_utf8(good.clone()).unwrap().replace('\n', "\r\n\n");
        std::fs::write(&path, crlf).unwrap();
        let back = read_records(&path).unwrap();
        assert_eq!(back, written);
        assert!(back[1].environment.same_copy(&back[2].environment), "read shared");
        // A byte that is not UTF-8 is named by its line.
        let mut bad = good.clone();
        let second = good.iter().position(|b| *b == b'\n').unwrap() + 10;
        bad[second] = 0xff;
        std::fs::write(&path, bad).unwrap();
        let e = read_records(&path).unwrap_err().to_string();
        assert!(e.contains(":2: not a record: not UTF-8 text"), "{e}");
        // A line that is not a record of this format: where in the line, from a plain reading.
        let text = String::from_utf8(good).unwrap().replacen("\"kernel\"", "\"kernal\"", 1);
        std::fs::write(&path, text).unwrap();
        let e = read_records(&path).unwrap_err().to_string();
        assert!(e.contains(":1: not a record: unknown field `kernal`") && e.contains("column"), "{e}");
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
