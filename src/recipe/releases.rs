//! Release ranges: comparing release versions, ranges such as `1.1.2..1.x` (every release from
//! 1.1.2 to the latest 1.x), picking from them (every release, or the latest patch of each
//! minor), and the committed list of a package's releases (`lockfiles/<family>/releases.toml`)
//! that `benchlab lock` writes and a scenario's range is expanded against, offline.

use std::cmp::Ordering;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The file in `lockfiles/<family>/` that lists the package's releases as they were when locked.
pub const RELEASES_FILE: &str = "releases.toml";

/// A release version, compared numerically part by part (1.9.0 < 1.10.0); a pre-release
/// (`1.23.0-beta.0`, `2.0.0rc1`) sorts before its release.
pub fn compare(a: &str, b: &str) -> Ordering {
    let (an, ap) = split(a);
    let (bn, bp) = split(b);
    let len = an.len().max(bn.len());
    for i in 0..len {
        let x = an.get(i).copied().unwrap_or(0);
        let y = bn.get(i).copied().unwrap_or(0);
        match x.cmp(&y) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    match (ap.is_empty(), bp.is_empty()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => ap.cmp(bp),
    }
}

/// Numeric parts and the pre-release tail (empty for a release).
fn split(v: &str) -> (Vec<u64>, &str) {
    let mut parts = Vec::new();
    let mut rest = v;
    loop {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            break;
        }
        parts.push(rest[..digits].parse().unwrap_or(u64::MAX));
        rest = &rest[digits..];
        match rest.strip_prefix('.') {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => rest = r,
            _ => break,
        }
    }
    (parts, rest)
}

/// Whether a version is a final release (no pre-release, dev or local tail).
pub fn is_release(v: &str) -> bool {
    let (parts, tail) = split(v);
    !parts.is_empty() && tail.is_empty()
}

/// An upper end: an exact version, or `1.x` (any release whose first parts are these).
#[derive(Debug, Clone, PartialEq)]
enum Upper {
    Exact(String),
    Prefix(Vec<u64>),
    Open,
}

/// How to pick from a range's releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pick {
    /// Every release.
    #[default]
    All,
    /// The latest patch of each minor (x.y.*), plus the range's first release.
    LatestPatch,
}

impl Pick {
    pub fn parse(s: &str) -> Result<Pick, String> {
        match s {
            "all" => Ok(Pick::All),
            "latest-patch" => Ok(Pick::LatestPatch),
            _ => Err(format!("unknown pick {s:?} (known: all, latest-patch)")),
        }
    }
}

/// A range of releases: `1.1.2..1.x`, `1.1.2..1.30.0`, `1.1.2..` (to the newest), or one version.
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    pub text: String,
    from: String,
    upper: Upper,
}

impl Range {
    pub fn parse(text: &str) -> Result<Range, String> {
        let bad = |why: &str| {
            format!("release range {text:?}: {why} (write FROM..TO: `1.1.2..1.30.0`, `1.1.2..1.x` for the latest 1.x, `1.1.2..` for the newest)")
        };
        let Some((from, to)) = text.split_once("..") else {
            if !is_release(text) {
                return Err(bad("not a release version"));
            }
            return Ok(Range { text: text.into(), from: text.into(), upper: Upper::Exact(text.into()) });
        };
        if !is_release(from) {
            return Err(bad("its start is not a release version"));
        }
        let upper = if to.is_empty() {
            Upper::Open
        } else if let Some(prefix) = to.strip_suffix(".x") {
            let (parts, tail) = split(prefix);
            if parts.is_empty() || !tail.is_empty() {
                return Err(bad("its end is neither a version nor N.x"));
            }
            Upper::Prefix(parts)
        } else if is_release(to) {
            Upper::Exact(to.into())
        } else {
            return Err(bad("its end is neither a version nor N.x"));
        };
        if let Upper::Exact(to) = &upper {
            if compare(from, to) == Ordering::Greater {
                return Err(bad("it ends before it starts"));
            }
        }
        Ok(Range { text: text.into(), from: from.into(), upper })
    }

    /// Whether a release falls in the range (pre-releases never do).
    pub fn contains(&self, v: &str) -> bool {
        if !is_release(v) || compare(v, &self.from) == Ordering::Less {
            return false;
        }
        match &self.upper {
            Upper::Open => true,
            Upper::Exact(to) => compare(v, to) != Ordering::Greater,
            // `3.x` ends after the last 3.x: a release whose leading parts are at most the
            // prefix's (`0.17.0..3.x` holds 1.2.0 and 3.4.1, not 4.0.0).
            Upper::Prefix(p) => {
                let parts = split(v).0;
                let head: Vec<u64> = (0..p.len()).map(|i| parts.get(i).copied().unwrap_or(0)).collect();
                head <= *p
            }
        }
    }

    /// The releases of `known` in the range, oldest first, picked as asked.
    pub fn select(&self, known: &[String], pick: Pick) -> Vec<String> {
        let mut inside: Vec<String> = known.iter().filter(|v| self.contains(v)).cloned().collect();
        inside.sort_by(|a, b| compare(a, b));
        inside.dedup();
        match pick {
            Pick::All => inside,
            Pick::LatestPatch => {
                let minor = |v: &str| split(v).0.into_iter().take(2).collect::<Vec<_>>();
                let mut out: Vec<String> = Vec::new();
                for (i, v) in inside.iter().enumerate() {
                    let last_of_minor = inside.get(i + 1).is_none_or(|next| minor(next) != minor(v));
                    if i == 0 || last_of_minor {
                        out.push(v.clone());
                    }
                }
                out
            }
        }
    }
}

/// `lockfiles/<family>/releases.toml`: the package's releases when they were last listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Releases {
    /// The package on its index (`mcp`, `@modelcontextprotocol/sdk`).
    pub package: String,
    /// When the index was read (UTC date).
    pub listed: String,
    /// Every final release, oldest first.
    pub versions: Vec<String>,
    /// When each release was published (RFC 3339, UTC), as the index says: a range release is
    /// locked with dependencies no newer than the end of that day.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub uploaded: std::collections::BTreeMap<String, String>,
}

/// The file in a lock folder that bounds its resolution in time (`uv pip compile --exclude-newer`,
/// `npm install --before`): the end of the day its SDK release was published.
pub const EXCLUDE_NEWER_FILE: &str = "exclude-newer";

/// The end of the UTC day of an RFC 3339 time: `2025-01-03T16:23:39Z` → `2025-01-03T23:59:59Z`.
pub fn end_of_day(time: &str) -> Option<String> {
    let day = time.get(..10)?;
    let ok = day.len() == 10
        && day
            .bytes()
            .enumerate()
            .all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    ok.then(|| format!("{day}T23:59:59Z"))
}

impl Releases {
    pub fn load(family_lock_dir: &Path) -> Result<Option<Releases>, String> {
        let path = family_lock_dir.join(RELEASES_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        toml::from_str(&text).map(Some).map_err(|e| {
            let (line, column) = crate::text::line_col(&text, e.span().map_or(0, |s| s.start));
            format!("{}:{line}:{column}: {}", path.display(), e.message())
        })
    }

    pub fn save(&self, family_lock_dir: &Path, command: &str) -> std::io::Result<()> {
        let body = toml::to_string(self).map_err(std::io::Error::other)?;
        let text = format!(
            "# The releases of {} on its package index on {}, written by `{command}`.\n# Scenario ranges are expanded against this list (offline); run the command again to add newer releases.\n{body}",
            self.package, self.listed
        );
        std::fs::write(family_lock_dir.join(RELEASES_FILE), text)
    }

    /// Keeps the final releases, oldest first, without repeats.
    pub fn normalise(versions: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut v: Vec<String> = versions.into_iter().filter(|v| is_release(v)).collect();
        v.sort_by(|a, b| compare(a, b));
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn versions_compare_numerically_and_prereleases_first() {
        assert_eq!(compare("1.9.0", "1.10.0"), Ordering::Less);
        assert_eq!(compare("1.23.0-beta.0", "1.23.0"), Ordering::Less);
        assert_eq!(compare("2.0.0rc1", "2.0.0"), Ordering::Less);
        assert_eq!(compare("1.2", "1.2.0"), Ordering::Equal);
        assert!(!is_release("1.23.0-beta.0"));
        assert!(is_release("1.30.0"));
    }

    #[test]
    fn ranges_parse_and_select() {
        let known = list(&[
            "1.0.0",
            "1.1.2",
            "1.1.3",
            "1.2.0",
            "1.2.1",
            "1.10.0",
            "1.23.0-beta.0",
            "1.23.0",
            "2.0.0",
        ]);
        let r = Range::parse("1.1.2..1.x").unwrap();
        assert_eq!(
            r.select(&known, Pick::All),
            list(&["1.1.2", "1.1.3", "1.2.0", "1.2.1", "1.10.0", "1.23.0"])
        );
        assert_eq!(
            r.select(&known, Pick::LatestPatch),
            list(&["1.1.2", "1.1.3", "1.2.1", "1.10.0", "1.23.0"])
        );
        let r = Range::parse("1.2.0..1.10.0").unwrap();
        assert_eq!(r.select(&known, Pick::All), list(&["1.2.0", "1.2.1", "1.10.0"]));
        assert_eq!(Range::parse("1.2.0..").unwrap().select(&known, Pick::All).last().unwrap(), "2.0.0");
        assert_eq!(Range::parse("1.2.1").unwrap().select(&known, Pick::All), list(&["1.2.1"]));
        // An `N.x` end reaches across majors: every release from the start to the last N.x.
        let r = Range::parse("1.1.3..2.x").unwrap();
        assert_eq!(
            r.select(&known, Pick::LatestPatch),
            list(&["1.1.3", "1.2.1", "1.10.0", "1.23.0", "2.0.0"])
        );
        assert!(!r.contains("3.0.0") && r.contains("2.9.9") && !r.contains("1.1.2"));
        let r = Range::parse("1.0.0..1.2.x").unwrap();
        assert_eq!(r.select(&known, Pick::All), list(&["1.0.0", "1.1.2", "1.1.3", "1.2.0", "1.2.1"]));
        assert!(Range::parse("2..1.0").unwrap_err().contains("ends before"));
        assert!(Range::parse("1.x..2").is_err());
        assert!(Range::parse("1.0..1.y").is_err());
    }

    #[test]
    fn a_release_day_ends_at_midnight_utc() {
        assert_eq!(end_of_day("2025-01-03T16:23:39.532156Z").as_deref(), Some("2025-01-03T23:59:59Z"));
        assert_eq!(end_of_day("yesterday"), None);
    }
}
