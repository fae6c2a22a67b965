//! A server's `source = { … }`: checked where it is written (one origin, its commit or sha256,
//! a path inside the tree) and turned into `spec::ServerSource`, each key's place kept so that a
//! fetch's problem (a commit not in the mirror, a wrong sha256) is reported at that key.

use std::ops::Range;

use super::raw::RawServerSource;
use super::{Scenario, ScenarioError};
use crate::source::SourceField;
use crate::spec::{ServerSource, SourceOrigin};

/// A server's source with the place of each of its keys in the scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceRef {
    pub server: String,
    pub source: ServerSource,
    /// The whole `source` value.
    pub span: Range<usize>,
    keys: Vec<(SourceField, Range<usize>)>,
}

/// How a service's source is keyed among the fetched sources (`Scenario::fetched`), beside the
/// servers' ids.
pub const SERVICE_KEY: &str = "service:";

impl SourceRef {
    /// `server "id"` or `service "name"`, for messages.
    pub fn label(&self) -> String {
        match self.server.strip_prefix(SERVICE_KEY) {
            Some(name) => format!("service {name:?}"),
            None => format!("server {:?}", self.server),
        }
    }

    /// Where `field` is written (the whole `source` value when it is not).
    pub fn span_of(&self, field: SourceField) -> Range<usize> {
        self.keys.iter().find(|(f, _)| *f == field).map_or_else(|| self.span.clone(), |(_, s)| s.clone())
    }
}

fn hex(s: &str, lengths: std::ops::RangeInclusive<usize>) -> bool {
    lengths.contains(&s.len()) && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// `path` as a tree keeps it (`a/b`), or why it cannot be one.
fn tree_path(p: &str) -> Result<String, String> {
    let parts: Vec<&str> = p.split('/').filter(|x| !x.is_empty() && *x != ".").collect();
    if p.starts_with('/') || parts.contains(&"..") {
        return Err(format!("path {p:?} must be a folder inside the source (relative, without `..`)"));
    }
    Ok(parts.join("/"))
}

/// `[source]` as a whole: its base rules and its result files.
pub(super) fn check_statement(
    path: &std::path::Path,
    source: &str,
    stated: &crate::spec::SourceStatement,
) -> Result<(), ScenarioError> {
    check_base_rules(path, source, stated)?;
    check_results(path, source, stated)
}

/// `[source.base]` rules: each is a base (`suite`, with its `packages`) or `unavailable`. The
/// statement is read without spans (as it is stored), so a bad rule is found by its key's text.
fn check_base_rules(
    path: &std::path::Path,
    source: &str,
    stated: &crate::spec::SourceStatement,
) -> Result<(), ScenarioError> {
    let bad = |r: &crate::spec::BaseRule| {
        r.suite.is_some() == r.unavailable.is_some()
            || (r.suite.is_none()
                && !(r.packages.is_empty() && r.build_env.is_empty() && r.pip_constraints.is_empty()))
    };
    let Some((image, _)) = stated.base.iter().find(|(_, r)| bad(r)) else {
        return Ok(());
    };
    let message = format!(
        "[source.base] {image:?}: a rule is `suite` (with its `packages` and `build_env`) or `unavailable` (why), not both or neither"
    );
    Err(match source.find(&format!("{image:?}")) {
        Some(at) => ScenarioError::at(path, source, at, message),
        None => ScenarioError::Whole { path: path.into(), message },
    })
}

/// Why a scenario's sources could not all be fetched.
#[derive(Debug)]
pub enum FetchFailure {
    /// The scenario is at fault (a commit the mirror lacks, a wrong sha256): placed at its key.
    Input(ScenarioError),
    /// This host is (no git, a cache that cannot be written, a repository that cannot be read).
    Host(String),
}

/// `[source] repository` and `results`: a repository is a URL and a commit hash; each result is
/// a file path inside it (relative, without `..`), named once; results need a repository. The
/// statement is read without spans (as it is stored), so a bad value is found by its text.
fn check_results(
    path: &std::path::Path,
    source: &str,
    stated: &crate::spec::SourceStatement,
) -> Result<(), ScenarioError> {
    let at = |needle: String, message: String| match source.find(&needle) {
        Some(at) => ScenarioError::at(path, source, at, message),
        None => ScenarioError::Whole { path: path.into(), message },
    };
    match &stated.repository {
        None if !stated.results.is_empty() => {
            return Err(at(
                "results =".into(),
                "[source] `results` are files of the source's repository: add `repository = { git = URL, commit = HASH }`"
                    .into(),
            ))
        }
        Some(r) if !hex(&r.commit, 7..=40) => {
            return Err(at(
                format!("{:?}", r.commit),
                format!("[source] repository: commit {:?} must be a commit hash (7 to 40 hex digits)", r.commit),
            ))
        }
        _ => {}
    }
    for (i, p) in stated.results.iter().enumerate() {
        let why = match tree_path(p) {
            Err(m) => Some(m.replace("a folder", "a file")),
            Ok(t) if t.is_empty() || p.ends_with('/') => Some(format!("result {p:?} must name a file")),
            Ok(t) if t != *p => Some(format!("result {p:?} must be written as {t:?}")),
            Ok(_) if stated.results[..i].contains(p) => Some(format!("result {p:?} is named twice")),
            Ok(_) => None,
        };
        if let Some(m) = why {
            return Err(at(format!("{p:?}"), format!("[source] results: {m}")));
        }
    }
    Ok(())
}

impl Scenario {
    /// Fetches every server's source into `cache` (git commits through `mirrors`; paths relative
    /// to the scenario's folder) and keeps each by server id for the plan. Sources fetched before
    /// are read from the cache.
    pub fn fetch_sources(
        &mut self,
        mirrors: &crate::source::Mirrors,
        cache: &std::path::Path,
    ) -> Result<(), FetchFailure> {
        let base = self.path.parent().map(std::path::PathBuf::from).unwrap_or_default();
        let services = self.service_sources.clone();
        for r in self.server_sources().map_err(FetchFailure::Input)?.into_iter().chain(services) {
            let f = crate::source::fetch(&r.source, &base, mirrors, cache).map_err(|e| match e.field() {
                Some(field) => {
                    FetchFailure::Input(self.error_at(r.span_of(field), format!("{}: {e}", r.label())))
                }
                None => FetchFailure::Host(format!("{}: {e}", r.label())),
            })?;
            self.fetched.insert(r.server.clone(), f);
        }
        self.fetch_expectations(mirrors, cache).map_err(FetchFailure::Host)
    }

    /// Every server's source, checked; servers without one are left out.
    pub fn server_sources(&self) -> Result<Vec<SourceRef>, ScenarioError> {
        let mut out = Vec::new();
        for srv in &self.servers {
            let Some(raw) = &srv.source else { continue };
            let id = srv.id.get_ref();
            let r = self
                .source_ref(id, raw.get_ref(), raw.span())
                .map_err(|(span, m)| self.error_at(span, format!("server {id:?}: {m}")))?;
            out.push(r);
        }
        Ok(out)
    }

    pub(super) fn source_ref(
        &self,
        server: &str,
        r: &RawServerSource,
        span: Range<usize>,
    ) -> Result<SourceRef, (Range<usize>, String)> {
        let mut keys = Vec::new();
        let mut key = |f: SourceField, v: &Option<toml::Spanned<String>>| {
            v.as_ref().map(|v| {
                keys.push((f, v.span()));
                (v.get_ref().clone(), v.span())
            })
        };
        let git = key(SourceField::Git, &r.git);
        let commit = key(SourceField::Commit, &r.commit);
        let dir = key(SourceField::Dir, &r.dir);
        let tarball = key(SourceField::Tarball, &r.tarball);
        let sha256 = key(SourceField::Sha256, &r.sha256);
        let path = key(SourceField::Path, &r.path);
        let origin = match (git, dir, tarball) {
            (Some((url, _)), None, None) => {
                let (commit, at) =
                    commit.clone().ok_or((span.clone(), "a git source needs its `commit`".to_string()))?;
                if !hex(&commit, 7..=40) {
                    return Err((
                        at,
                        format!("commit {commit:?} must be a commit hash (7 to 40 hex digits)"),
                    ));
                }
                SourceOrigin::Git { url, commit }
            }
            (None, Some((dir, _)), None) => SourceOrigin::Dir { dir },
            (None, None, Some((file, _))) => {
                let (sha, at) = sha256
                    .clone()
                    .ok_or((span.clone(), "a tarball source needs its `sha256`".to_string()))?;
                if !hex(&sha, 64..=64) {
                    return Err((at, format!("sha256 {sha:?} must be 64 hex digits")));
                }
                SourceOrigin::Tarball { file, sha256: sha.to_ascii_lowercase() }
            }
            _ => {
                return Err((
                    span,
                    "a source is one of `git` (with `commit`), `dir` or `tarball` (with `sha256`)"
                        .to_string(),
                ))
            }
        };
        let stray = match &origin {
            SourceOrigin::Git { .. } => sha256.map(|(_, s)| (s, "`sha256` belongs to a tarball source")),
            SourceOrigin::Tarball { .. } => commit.map(|(_, s)| (s, "`commit` belongs to a git source")),
            SourceOrigin::Dir { .. } => commit
                .map(|(_, s)| (s, "`commit` belongs to a git source"))
                .or(sha256.map(|(_, s)| (s, "`sha256` belongs to a tarball source"))),
        };
        if let Some((at, m)) = stray {
            return Err((at, m.to_string()));
        }
        let path = match path {
            Some((p, at)) => tree_path(&p).map_err(|m| (at, m))?,
            None => String::new(),
        };
        Ok(SourceRef { server: server.to_string(), source: ServerSource { origin, path }, span, keys })
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;
    use crate::source::SourceField;
    use crate::spec::SourceOrigin;

    fn with_source(source: &str) -> Result<Vec<super::SourceRef>, String> {
        let text = format!(
            "name = \"s\"\n[[server]]\nid = \"py\"\n\n\nsource = {source}\n[[workload]]\nkind = \"cold_start\"\nspawns = 1\n"
        );
        let s = Scenario::parse(std::path::Path::new("s.toml"), text).map_err(|e| e.to_string())?;
        s.server_sources().map_err(|e| e.to_string())
    }

    #[test]
    fn a_git_a_folder_and_a_tarball_source_parse_with_their_keys_placed() {
        let r = with_source(r#"{ git = "https://h/o/r", commit = "ccb84cf", path = "./python-server/" }"#)
            .unwrap();
        assert_eq!(
            r[0].source.origin,
            SourceOrigin::Git { url: "https://h/o/r".into(), commit: "ccb84cf".into() }
        );
        assert_eq!(r[0].source.path, "python-server");
        assert!(r[0].span_of(SourceField::Commit).start > r[0].span_of(SourceField::Git).start);
        let r = with_source(r#"{ dir = "servers/py" }"#).unwrap();
        assert_eq!(r[0].source.origin, SourceOrigin::Dir { dir: "servers/py".into() });
        let sha = "A".repeat(64);
        let r = with_source(&format!(r#"{{ tarball = "s.tgz", sha256 = "{sha}", path = "s" }}"#)).unwrap();
        assert_eq!(
            r[0].source.origin,
            SourceOrigin::Tarball { file: "s.tgz".into(), sha256: "a".repeat(64) }
        );
    }

    #[test]
    fn a_bad_source_is_refused_at_its_key_with_what_to_write() {
        for (source, line_col, says) in [
            (r#"{ git = "u" }"#, "s.toml:6:10", "needs its `commit`"),
            (r#"{ git = "u", commit = "xyz" }"#, "s.toml:6:32", "7 to 40 hex digits"),
            (r#"{ git = "u", dir = "d" }"#, "s.toml:6:10", "one of `git`"),
            (r#"{ tarball = "t.tgz" }"#, "s.toml:6:10", "needs its `sha256`"),
            (r#"{ tarball = "t", sha256 = "00" }"#, "s.toml:6:36", "64 hex digits"),
            (r#"{ dir = "d", commit = "abcdefa" }"#, "s.toml:6:32", "`commit` belongs to a git source"),
            (r#"{ dir = "d", path = "../up" }"#, "s.toml:6:30", "without `..`"),
            (r#"{ dir = "d", branch = "main" }"#, "s.toml:6:23", "unknown field `branch`"),
        ] {
            let e = with_source(source).unwrap_err();
            assert!(e.starts_with(line_col) && e.contains(says), "{source}: {e}");
        }
    }

    fn with_results(stated: &str) -> Result<crate::spec::SourceStatement, String> {
        let text = format!(
            "name = \"s\"\n[[server]]\nid = \"py\"\nfamily = \"python-mcp\"\nversion = \"2.3.0\"\n[[workload]]\nkind = \"cold_start\"\nspawns = 1\n[source]\n{stated}\n"
        );
        Scenario::parse(std::path::Path::new("s.toml"), text).map(|s| s.stated).map_err(|e| e.to_string())
    }

    #[test]
    fn result_files_name_a_repository_at_a_commit_and_files_inside_it() {
        let s = with_results(
            "repository = { git = \"https://h/o/r\", commit = \"ccb84cf\" }\nresults = [\"b/r/summary.json\", \"top.json\"]",
        )
        .unwrap();
        assert_eq!(s.repository.unwrap().commit, "ccb84cf");
        assert_eq!(s.results, ["b/r/summary.json", "top.json"]);
        let repo = "repository = { git = \"u\", commit = \"abcdef0\" }\n";
        for (stated, line_col, says) in [
            ("results = [\"a.json\"]".to_string(), "s.toml:10:1", "add `repository"),
            ("repository = { git = \"u\", commit = \"main\" }".into(), "s.toml:10:36", "7 to 40 hex digits"),
            (
                "repository = { git = \"u\", commit = \"abcdef0\", branch = \"x\" }".into(),
                "s.toml:10:",
                "unknown field `branch`",
            ),
            (format!("{repo}results = [\"../up.json\"]"), "s.toml:11:12", "without `..`"),
            (format!("{repo}results = [\"/abs.json\"]"), "s.toml:11:12", "relative"),
            (format!("{repo}results = [\"dir/\"]"), "s.toml:11:12", "must name a file"),
            (format!("{repo}results = [\"a.json\", \"a.json\"]"), "s.toml:11:12", "named twice"),
            (format!("{repo}result = [\"a.json\"]"), "s.toml:11:1", "unknown field `result`"),
        ] {
            let e = with_results(&stated).unwrap_err();
            assert!(e.starts_with(line_col) && e.contains(says), "{stated}: {e}");
        }
    }
}
