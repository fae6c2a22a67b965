//! The source's result files read from a git repository the test makes, through a mirror named
//! for an invented URL: kept in a run folder with their sha256s, read back offline, a changed copy
//! refused, and a file or folder the commit lacks blamed on its `results` entry.

use std::path::Path;
use std::process::Command;

use super::results::*;
use super::{Mirrors, SourceField};
use crate::spec::{SourceStatement, StatedRepository};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

const URL: &str = "https://example.invalid/lab/bench";
const ONE: &str = r#"{"config":{"vus":4},"servers":{"a":{"http":{"rps":10.5}}}}"#;

/// A repository with two result files in one folder and one at the top; its commit.
fn repo(dir: &Path) -> String {
    std::fs::create_dir_all(dir.join("out/r1")).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("out/r1/summary.json"), ONE).unwrap();
    std::fs::write(dir.join("out/r1/other.json"), "{}").unwrap();
    std::fs::write(dir.join("top.json"), "[1]").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "results"]);
    git(dir, &["rev-parse", "HEAD"])
}

fn stated(commit: &str, results: &[&str]) -> SourceStatement {
    SourceStatement {
        repository: Some(StatedRepository { git: URL.into(), commit: commit.into() }),
        results: results.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn result_files_are_read_at_the_commit_kept_in_the_run_folder_and_read_back_offline() {
    let d = tempfile::tempdir().unwrap();
    let commit = repo(&d.path().join("repo"));
    let mirrors = Mirrors::parse(&[format!("{URL}={}", d.path().join("repo").display())]).unwrap();
    let cache = d.path().join("cache");
    let s = stated(&commit[..7], &["out/r1/summary.json", "top.json"]);
    let p = fetch_results(&s, d.path(), &mirrors, &cache).unwrap().unwrap();
    assert_eq!((p.git.as_str(), p.commit.as_str()), (URL, commit.as_str()), "the full commit");
    assert_eq!(p.files[0].content, ONE.as_bytes());
    assert_eq!(p.files[0].sha256, crate::hash::sha256_hex(ONE.as_bytes()));
    assert_eq!((p.files[1].path.as_str(), p.files[1].bytes), ("top.json", 3));

    let run = d.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    keep(&run, &p).unwrap();
    keep(&run, &p).unwrap();
    assert_eq!(std::fs::read_to_string(run.join("published/out/r1/summary.json")).unwrap(), ONE);
    // The mirror and the cache gone: the run folder alone gives the same files.
    std::fs::remove_dir_all(d.path().join("repo")).unwrap();
    std::fs::remove_dir_all(&cache).unwrap();
    assert_eq!(read_kept(&run).unwrap().unwrap(), p);
    // Another run's files in the same folder are refused; a changed copy is never read.
    let mut other = p.clone();
    other.files.truncate(1);
    assert!(keep(&run, &other).unwrap_err().contains("keeps other result files"));
    std::fs::write(run.join("published/top.json"), "[2]").unwrap();
    let e = read_kept(&run).unwrap_err();
    assert!(e.contains("the kept copy was changed"), "{e}");
    assert_eq!(read_kept(&d.path().join("no-run")).unwrap(), None);
}

#[test]
fn a_file_or_commit_the_repository_lacks_is_blamed_on_its_key() {
    let d = tempfile::tempdir().unwrap();
    let commit = repo(&d.path().join("repo"));
    let mirrors = Mirrors::parse(&[format!("{URL}={}", d.path().join("repo").display())]).unwrap();
    let cache = d.path().join("cache");
    let fetch = |s: &SourceStatement| fetch_results(s, d.path(), &mirrors, &cache).unwrap_err();
    // A file missing from a folder the commit has, and a folder it does not have.
    for (path, says) in [
        ("out/r1/missing.json", "no file \"out/r1/missing.json\""),
        ("out/r9/summary.json", "no \"out/r9/summary.json\""),
    ] {
        let e = fetch(&stated(&commit, &["top.json", path]));
        assert_eq!(e.entry, Some(1), "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    let e = fetch(&stated("abcdef0", &["top.json"]));
    assert_eq!((e.entry, e.error.field()), (None, Some(SourceField::Commit)), "{e}");
    // No repository or no results: nothing to read.
    assert!(fetch_results(&SourceStatement::default(), d.path(), &mirrors, &cache).unwrap().is_none());
}
