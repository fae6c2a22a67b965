//! A source's own committed result files (`[source] repository` and `results`): read from the
//! repository at its commit through the same fetch as a server's code (a mirror, a local folder or
//! a cache clone, then the content-addressed cache), hashed, kept in a run folder beside the
//! scenario copy (`published/<path>` with `published.json`, each file's sha256), and read back
//! from there — checked against those sha256s — so that judging claims on them needs neither the
//! network nor the mirror. It reads bytes; what a claim makes of them is `claims`' business.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{fetch, Mirrors, SourceError};
use crate::record::files::{PUBLISHED_DIR, PUBLISHED_FILE};
use crate::spec::{ServerSource, SourceOrigin, SourceStatement};

/// The format of `published.json`; readers refuse others.
pub const FORMAT_VERSION: u32 = 1;

/// One result file as read at the commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultFile {
    /// Its path in the repository, as `[source] results` names it.
    pub path: String,
    /// The sha256 of its bytes.
    pub sha256: String,
    /// Its length.
    pub bytes: u64,
    #[serde(skip)]
    pub content: Vec<u8>,
}

/// The result files of a source at its commit (`published.json` in a run folder, with the files).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    pub format_version: u32,
    /// The repository's URL, as the scenario names it.
    pub git: String,
    /// The commit, in full.
    pub commit: String,
    pub files: Vec<ResultFile>,
}

impl Published {
    pub fn file(&self, path: &str) -> Option<&ResultFile> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// Why the result files could not be had, and which `results` entry (by index) to blame; None:
/// the repository's keys (or the host, when the error's `field` is None).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ResultsError {
    pub entry: Option<usize>,
    pub error: SourceError,
}

/// Reads every `[source] results` file at the stated commit (None when the scenario states none).
/// Each file's folder is fetched into the cache (`source::fetch`) and the file read from there.
pub fn fetch_results(
    stated: &SourceStatement,
    base: &Path,
    mirrors: &Mirrors,
    cache: &Path,
) -> Result<Option<Published>, ResultsError> {
    let Some(repo) = &stated.repository else { return Ok(None) };
    if stated.results.is_empty() {
        return Ok(None);
    }
    let mut commit = repo.commit.clone();
    let mut files = Vec::new();
    for (i, path) in stated.results.iter().enumerate() {
        let blame = |error: SourceError| {
            let entry = matches!(error, SourceError::Path(_)).then_some(i);
            ResultsError { entry, error }
        };
        let (folder, name) = path.rsplit_once('/').unwrap_or(("", path));
        let src = ServerSource {
            origin: SourceOrigin::Git { url: repo.git.clone(), commit: repo.commit.clone() },
            path: folder.to_string(),
        };
        let fetched = fetch(&src, base, mirrors, cache).map_err(|e| match e {
            SourceError::Path(_) => {
                blame(SourceError::Path(format!("no {path:?} at commit {} of {}", repo.commit, repo.git)))
            }
            other => blame(other),
        })?;
        if let SourceOrigin::Git { commit: full, .. } = &fetched.record.source.origin {
            commit = full.clone();
        }
        let file = fetched.tree_dir.join(name);
        let content = match std::fs::symlink_metadata(&file) {
            Ok(m) if m.is_file() => std::fs::read(&file)
                .map_err(|e| blame(SourceError::Tool { what: format!("read {}: {e}", file.display()) }))?,
            _ => {
                return Err(blame(SourceError::Path(format!(
                    "no file {path:?} at commit {commit} of {}",
                    repo.git
                ))))
            }
        };
        files.push(ResultFile {
            path: path.clone(),
            sha256: crate::hash::sha256_hex(&content),
            bytes: content.len() as u64,
            content,
        });
    }
    Ok(Some(Published { format_version: FORMAT_VERSION, git: repo.git.clone(), commit, files }))
}

/// Keeps the files in a run folder: `published/<path>` and `published.json` (written last, so a
/// run folder with the list holds every file). A run folder that already keeps other bytes is
/// refused: its verdicts were judged on those.
pub fn keep(run_dir: &Path, p: &Published) -> Result<(), String> {
    if let Some(old) = read_kept(run_dir)? {
        if old == *p {
            return Ok(());
        }
        return Err(format!(
            "{} keeps other result files ({}@{}); use a new --run-id",
            run_dir.join(PUBLISHED_FILE).display(),
            old.git,
            old.commit
        ));
    }
    for f in &p.files {
        let to = run_dir.join(PUBLISHED_DIR).join(&f.path);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
        }
        write_synced(&to, &f.content)?;
    }
    let json = serde_json::to_vec_pretty(p).expect("the list serializes");
    write_synced(&run_dir.join(PUBLISHED_FILE), &json)
}

fn write_synced(path: &Path, data: &[u8]) -> Result<(), String> {
    let tmp = path.with_file_name(format!(
        ".{}.{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    std::fs::write(&tmp, data).map_err(|e| format!("write {}: {e}", tmp.display()))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("sync {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("place {}: {e}", path.display()))
}

/// The result files a run folder keeps, each checked against its sha256 (None when it keeps
/// none). A file whose bytes changed is an error, never read.
pub fn read_kept(run_dir: &Path) -> Result<Option<Published>, String> {
    let list = run_dir.join(PUBLISHED_FILE);
    let text = match std::fs::read_to_string(&list) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("read {}: {e}", list.display())),
    };
    let mut p: Published = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a list of result files: {e}", list.display()))?;
    if p.format_version != FORMAT_VERSION {
        return Err(format!(
            "{}: format_version {} is not the {FORMAT_VERSION} this benchlab reads",
            list.display(),
            p.format_version
        ));
    }
    for f in &mut p.files {
        let at = run_dir.join(PUBLISHED_DIR).join(&f.path);
        let content = std::fs::read(&at).map_err(|e| format!("read {}: {e}", at.display()))?;
        let sha = crate::hash::sha256_hex(&content);
        if sha != f.sha256 {
            return Err(format!(
                "{}: its sha256 is {sha}, not the {} {} lists: the kept copy was changed",
                at.display(),
                f.sha256,
                list.display()
            ));
        }
        f.content = content;
    }
    Ok(Some(p))
}
