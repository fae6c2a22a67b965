//! The git side of a source: which repository to read (a mirror the user named for the URL, the
//! URL itself when it is a folder on this host, or a cache clone fetched from the URL), a commit
//! resolved to its full hash, and a folder of it as a tar stream (`git archive`). It runs the
//! `git` program; nothing is ever written into a mirror.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::SourceError;

/// A repository git can read: its git folder.
pub(super) struct Repo {
    git_dir: PathBuf,
    /// What the user knows it as (the mirror's path or the URL), for messages.
    pub(super) shown: String,
}

fn git(args: &[&str]) -> Command {
    let mut c = Command::new("git");
    // No prompt for credentials, no pager, no user configuration that changes the output.
    c.args(args).env("GIT_TERMINAL_PROMPT", "0").env("GIT_CONFIG_NOSYSTEM", "1").env("GIT_PAGER", "cat");
    c
}

fn run(mut c: Command, what: &str) -> Result<std::process::Output, SourceError> {
    c.output().map_err(|e| SourceError::Tool { what: format!("{what}: cannot run git ({e}); install git") })
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string()
}

impl Repo {
    /// A repository on this host: a working copy (its `.git`) or a bare one.
    pub(super) fn local(path: &Path, shown: String) -> Result<Repo, String> {
        let dot = path.join(".git");
        let git_dir = if dot.is_dir() { dot } else { path.to_path_buf() };
        let out = git(&["--git-dir", &git_dir.to_string_lossy(), "rev-parse", "--git-dir"])
            .output()
            .map_err(|e| format!("cannot run git ({e}); install git"))?;
        if !out.status.success() {
            return Err(format!("{} is not a git repository", path.display()));
        }
        Ok(Repo { git_dir, shown })
    }

    /// A clone of `url` in the cache (made bare once), with `commit` fetched into it. A remote
    /// serves a commit by its full hash only.
    pub(super) fn fetched(url: &str, commit: &str, cache: &Path) -> Result<Repo, SourceError> {
        let git_dir = cache.join("repos").join(crate::hash::sha256_hex(url.as_bytes()));
        let shown = url.to_string();
        let repo = Repo { git_dir: git_dir.clone(), shown };
        if repo.resolve(commit).is_ok() {
            return Ok(repo);
        }
        if !git_dir.join("HEAD").is_file() {
            let out =
                run(git(&["init", "--quiet", "--bare", &git_dir.to_string_lossy()]), "make a cache clone")?;
            if !out.status.success() {
                return Err(SourceError::Tool {
                    what: format!("git init {}: {}", git_dir.display(), first_line(&out.stderr)),
                });
            }
        }
        let gd = git_dir.to_string_lossy().into_owned();
        let out = run(
            git(&["--git-dir", &gd, "fetch", "--quiet", "--no-tags", "--depth", "1", url, commit]),
            "fetch",
        )?;
        if !out.status.success() {
            return Err(SourceError::Unreachable { url: url.to_string(), why: first_line(&out.stderr) });
        }
        Ok(repo)
    }

    fn dir(&self) -> String {
        self.git_dir.to_string_lossy().into_owned()
    }

    /// The full hash of `commit` (a full or abbreviated hash), which must name a commit.
    pub(super) fn resolve(&self, commit: &str) -> Result<String, String> {
        let spec = format!("{commit}^{{commit}}");
        let out =
            git(&["--git-dir", &self.dir(), "rev-parse", "--verify", "--quiet", "--end-of-options", &spec])
                .output()
                .map_err(|e| format!("cannot run git ({e}); install git"))?;
        let full = first_line(&out.stdout);
        if out.status.success() && full.len() == 40 {
            return Ok(full);
        }
        Err(format!("commit {commit:?} is not in {} (fetch it into the mirror, or fix the hash)", self.shown))
    }

    /// `path` (a folder, empty for the whole tree) at `commit` as a tar stream.
    pub(super) fn archive(&self, commit: &str, path: &str) -> Result<Vec<u8>, SourceError> {
        let mut args =
            vec!["--git-dir".to_string(), self.dir(), "archive".into(), "--format=tar".into(), commit.into()];
        if !path.is_empty() {
            args.extend(["--".to_string(), path.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(git(&args), "archive")?;
        if !out.status.success() {
            let why = first_line(&out.stderr);
            return Err(if why.contains("did not match") {
                SourceError::Path(format!("no {path:?} at commit {commit} of {}", self.shown))
            } else {
                SourceError::Tool { what: format!("git archive {commit} in {}: {why}", self.shown) }
            });
        }
        Ok(out.stdout)
    }
}
