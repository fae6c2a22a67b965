//! A server's own code, pinned by content (`[[server]] source = { … }`): fetched once from a git
//! repository at a commit (through a mirror on offline hosts), a local folder or a tarball with
//! its sha256, into a content-addressed cache (`<work>/sources/trees/<tree sha256>/`), and
//! hashed (`tree`: the listing that pins it). It fetches and hashes; building what it fetched is
//! the image side's (not yet: see docs/reproduce.md).

pub mod build;
pub mod dockerfile;
mod git;
pub mod results;
pub mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::spec::{FetchedSource, ServerSource, SourceOrigin};
use tree::{Tree, TreeError};

/// Local copies of repositories, by their URL (`--source-mirror URL=PATH`): a host without
/// network reads the commit from the copy, and the record still names the URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mirrors(BTreeMap<String, PathBuf>);

impl Mirrors {
    /// `URL=PATH` pairs as the command line gives them.
    pub fn parse(pairs: &[String]) -> Result<Mirrors, String> {
        let mut m = BTreeMap::new();
        for p in pairs {
            let (url, path) = p
                .split_once('=')
                .filter(|(u, p)| !u.is_empty() && !p.is_empty())
                .ok_or_else(|| format!("--source-mirror {p:?}: expected URL=PATH (a local clone of URL)"))?;
            if m.insert(normalize(url), PathBuf::from(path)).is_some() {
                return Err(format!("--source-mirror names {url} twice"));
            }
        }
        Ok(Mirrors(m))
    }

    fn get(&self, url: &str) -> Option<&Path> {
        self.0.get(&normalize(url)).map(PathBuf::as_path)
    }
}

/// A URL as mirrors match it: without a trailing `/` or `.git`.
fn normalize(url: &str) -> String {
    let u = url.trim_end_matches('/');
    u.strip_suffix(".git").unwrap_or(u).to_string()
}

/// Which key of a server's `source` a problem belongs to, so the scenario can point at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceField {
    Git,
    Commit,
    Dir,
    Tarball,
    Sha256,
    Path,
}

/// Why a source could not be fetched. `field` says which key to blame; `Tool` and `Cache` are
/// the host's problems (exit 3), the others the scenario's (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{0}")]
    Repository(String),
    #[error("cannot fetch {url} ({why}); on a host without network, name a local clone: --source-mirror {url}=PATH")]
    Unreachable { url: String, why: String },
    #[error("{0}")]
    Commit(String),
    #[error("{0}")]
    Path(String),
    #[error("{0}")]
    Dir(String),
    #[error("{0}")]
    Tarball(String),
    #[error("the tarball's sha256 is {actual}, not the {stated} the scenario states")]
    Sha256 { stated: String, actual: String },
    #[error("{what}")]
    Tool { what: String },
    #[error("source cache {dir}: {why}")]
    Cache { dir: PathBuf, why: String },
}

impl SourceError {
    /// The key of `source` to point at; None for the host's problems.
    pub fn field(&self) -> Option<SourceField> {
        match self {
            SourceError::Repository(_) | SourceError::Unreachable { .. } => Some(SourceField::Git),
            SourceError::Commit(_) => Some(SourceField::Commit),
            SourceError::Path(_) => Some(SourceField::Path),
            SourceError::Dir(_) => Some(SourceField::Dir),
            SourceError::Tarball(_) => Some(SourceField::Tarball),
            SourceError::Sha256 { .. } => Some(SourceField::Sha256),
            SourceError::Tool { .. } | SourceError::Cache { .. } => None,
        }
    }
}

/// A fetched source: what its record keeps, and where its tree is.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    pub record: FetchedSource,
    /// `<cache>/trees/<tree sha256>`: the files, read-only by convention.
    pub tree_dir: PathBuf,
    /// The listing that `tree_sha256` hashes, beside the tree.
    pub listing: PathBuf,
    /// True when nothing was read from the origin (the commit's tree was in the cache already).
    pub cached: bool,
}

/// The `FROM`s of a fetched source's own Dockerfile (at the top of its tree) and what the
/// scenario's `[source.base]` rules make of each; None when the tree has no Dockerfile.
pub fn from_plan(
    fetched: &Fetched,
    rules: &BTreeMap<String, crate::spec::BaseRule>,
) -> Option<Vec<(dockerfile::From, dockerfile::Mapped)>> {
    let text = std::fs::read_to_string(fetched.tree_dir.join("Dockerfile")).ok()?;
    Some(dockerfile::map(&dockerfile::froms(&text), rules))
}

/// Where fetched sources live: `<work>/sources`.
pub fn cache_root(work_dir: &Path) -> PathBuf {
    work_dir.join("sources")
}

/// Fetches `source` (paths in it relative to `base`, the scenario's folder) into `cache`. A git
/// commit or a tarball already fetched is read from the cache; a folder is read every time (it
/// can change), and only its new content is added.
pub fn fetch(
    source: &ServerSource,
    base: &Path,
    mirrors: &Mirrors,
    cache: &Path,
) -> Result<Fetched, SourceError> {
    let cache_err = |why: String| SourceError::Cache { dir: cache.to_path_buf(), why };
    std::fs::create_dir_all(cache.join("index")).map_err(|e| cache_err(e.to_string()))?;
    let (origin, tree) = match &source.origin {
        SourceOrigin::Git { url, commit } => {
            let repo = repository(url, commit, base, mirrors, cache)?;
            let full = repo.resolve(commit).map_err(SourceError::Commit)?;
            let resolved = ServerSource {
                origin: SourceOrigin::Git { url: url.clone(), commit: full.clone() },
                path: source.path.clone(),
            };
            if let Some(hit) = cached(&resolved, cache) {
                return Ok(hit);
            }
            let tar = repo.archive(&full, &source.path)?;
            let tree = Tree::from_tar(&tar[..], &source.path).map_err(|e| tree_err(e, &source.path))?;
            (resolved, tree)
        }
        SourceOrigin::Tarball { file, sha256 } => {
            if let Some(hit) = cached(source, cache) {
                return Ok(hit);
            }
            let path = base.join(file);
            let bytes = std::fs::read(&path)
                .map_err(|e| SourceError::Tarball(format!("cannot read {}: {e}", path.display())))?;
            let actual = crate::hash::sha256_hex(&bytes);
            if !actual.eq_ignore_ascii_case(sha256) {
                return Err(SourceError::Sha256 { stated: sha256.clone(), actual });
            }
            let tree = tarball_tree(&bytes, file, &source.path)?;
            (source.clone(), tree)
        }
        SourceOrigin::Dir { dir } => {
            let root = base.join(dir);
            if !root.is_dir() {
                return Err(SourceError::Dir(format!("{} is not a folder", root.display())));
            }
            let tree = Tree::from_dir(&root).map_err(|e| SourceError::Dir(e.to_string()))?;
            let tree = tree.subtree(&source.path).map_err(|e| tree_err(e, &source.path))?;
            (source.clone(), tree)
        }
    };
    store(origin, &tree, cache)
}

/// The repository to read a git source from: the URL's mirror, the URL itself when it is a
/// folder on this host (relative to the scenario), or a cache clone fetched from the URL.
fn repository(
    url: &str,
    commit: &str,
    base: &Path,
    mirrors: &Mirrors,
    cache: &Path,
) -> Result<git::Repo, SourceError> {
    if let Some(m) = mirrors.get(url) {
        return git::Repo::local(m, format!("the mirror {} of {url}", m.display()))
            .map_err(SourceError::Repository);
    }
    let local = url
        .strip_prefix("file://")
        .map(PathBuf::from)
        .or_else(|| (!url.contains("://") && !url.contains('@')).then(|| base.join(url)));
    match local {
        Some(path) => git::Repo::local(&path, url.to_string()).map_err(SourceError::Repository),
        None => git::Repo::fetched(url, commit, cache),
    }
}

fn tree_err(e: TreeError, path: &str) -> SourceError {
    match e {
        TreeError::NoPath(_) => SourceError::Path(format!("no folder {path:?} in the source")),
        other => SourceError::Tool { what: other.to_string() },
    }
}

fn tarball_tree(bytes: &[u8], file: &str, path: &str) -> Result<Tree, SourceError> {
    let gz = bytes.starts_with(&[0x1f, 0x8b]);
    let read = if gz {
        Tree::from_tar(flate2::read::GzDecoder::new(bytes), path)
    } else {
        Tree::from_tar(bytes, path)
    };
    read.map_err(|e| match e {
        TreeError::NoPath(_) => SourceError::Path(format!("no folder {path:?} in {file}")),
        other => SourceError::Tarball(format!("{file}: {other}")),
    })
}

/// The index entry of an origin that cannot change (a commit, a tarball by its hash).
fn index_file(source: &ServerSource, cache: &Path) -> PathBuf {
    cache.join("index").join(format!("{}.json", crate::hash::canonical_hash(source)))
}

fn paths(cache: &Path, tree_sha256: &str) -> (PathBuf, PathBuf) {
    let trees = cache.join("trees");
    (trees.join(tree_sha256), trees.join(format!("{tree_sha256}.listing")))
}

/// The cached fetch of an immutable origin, when its index entry and its tree are both there.
fn cached(source: &ServerSource, cache: &Path) -> Option<Fetched> {
    let text = std::fs::read_to_string(index_file(source, cache)).ok()?;
    let record: FetchedSource = serde_json::from_str(&text).ok()?;
    let (tree_dir, listing) = paths(cache, &record.tree_sha256);
    (record.source == *source && tree_dir.is_dir() && listing.is_file()).then_some(Fetched {
        record,
        tree_dir,
        listing,
        cached: true,
    })
}

/// Writes the tree under its hash (a new one beside, then renamed into place, so a tree folder
/// is whole or absent), its listing, and the origin's index entry.
fn store(source: ServerSource, tree: &Tree, cache: &Path) -> Result<Fetched, SourceError> {
    let cache_err = |why: String| SourceError::Cache { dir: cache.to_path_buf(), why };
    let sha = tree.sha256();
    let (tree_dir, listing) = paths(cache, &sha);
    if !tree_dir.is_dir() {
        let tmp = cache.join("trees").join(format!(".new-{}-{sha}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        tree.write(&tmp).map_err(|e| cache_err(e.to_string()))?;
        if let Err(e) = std::fs::rename(&tmp, &tree_dir) {
            let _ = std::fs::remove_dir_all(&tmp);
            // Another benchlab placed the same tree first: the content is the same.
            if !tree_dir.is_dir() {
                return Err(cache_err(format!("place {}: {e}", tree_dir.display())));
            }
        }
    }
    write_atomic(&listing, tree.listing().as_bytes()).map_err(cache_err)?;
    let (files, bytes) = tree.size();
    let record = FetchedSource { source, tree_sha256: sha, files, bytes };
    if !matches!(record.source.origin, SourceOrigin::Dir { .. }) {
        let json = serde_json::to_vec_pretty(&record).expect("a fetched source serializes");
        write_atomic(&index_file(&record.source, cache), &json).map_err(cache_err)?;
    }
    Ok(Fetched { record, tree_dir, listing, cached: false })
}

fn write_atomic(path: &Path, data: &[u8]) -> Result<(), String> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, data).map_err(|e| format!("write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("place {}: {e}", path.display()))
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod results_tests;
