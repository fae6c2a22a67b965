//! A source's own Dockerfile read for what the lab must map: its stages' `FROM` images (build
//! arguments declared before the first `FROM` expanded with their defaults; a stage that starts
//! from an earlier stage named as such), each matched to a scenario's `[source.base]` rule.
//! Pure: text in, a plan out; the build itself is the image side's.

use std::collections::BTreeMap;

use crate::spec::{BaseRule, DebianSuite};

/// One `FROM` of a Dockerfile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct From {
    /// 1-based line of the instruction.
    pub line: usize,
    /// The image as written, build arguments expanded.
    pub image: String,
    /// `AS name`.
    pub stage: Option<String>,
}

/// What the lab does with a `FROM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapped {
    /// An earlier stage of the same Dockerfile.
    Stage(String),
    /// A lab base from Debian's packages, by the scenario's rule.
    Base { suite: DebianSuite, packages: Vec<String> },
    /// The scenario says this image cannot be had here, and why.
    Unavailable(String),
    /// No rule names it: the build cannot start.
    Unmapped,
}

/// The instructions of a Dockerfile: (1-based line of its start, keyword upper-cased, rest).
/// Comments and blank lines are dropped; a trailing `\` joins the next line.
pub(super) fn instructions(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if pending.is_none() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        if pending.is_some() && line.starts_with('#') {
            continue;
        }
        let (start, mut acc) = pending.take().unwrap_or((i + 1, String::new()));
        match line.strip_suffix('\\') {
            Some(part) => {
                acc.push_str(part);
                acc.push(' ');
                pending = Some((start, acc));
            }
            None => {
                acc.push_str(line);
                let (kw, rest) = acc.split_once(char::is_whitespace).unwrap_or((&acc, ""));
                out.push((start, kw.to_ascii_uppercase(), rest.trim().to_string()));
            }
        }
    }
    out
}

/// `${NAME}`, `$NAME` and `${NAME:-default}` expanded from `args`; unknown names stay as written.
fn expand(s: &str, args: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let (name, default, used) = if let Some(inner) = tail.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => {
                    let body = &inner[..end];
                    let (n, d) = body.split_once(":-").map_or((body, None), |(n, d)| (n, Some(d)));
                    (n.to_string(), d.map(String::from), end + 2)
                }
                None => (String::new(), None, 0),
            }
        } else {
            let n: String = tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let len = n.len();
            (n, None, len)
        };
        match args.get(&name).cloned().or(default) {
            Some(v) if used > 0 => out.push_str(&v),
            _ => out.push_str(&rest[at..at + 1 + used]),
        }
        rest = &rest[at + 1 + used..];
    }
    out.push_str(rest);
    out
}

/// The `FROM`s of a Dockerfile, in order.
pub fn froms(text: &str) -> Vec<From> {
    let mut args = BTreeMap::new();
    let mut out = Vec::new();
    for (line, kw, rest) in instructions(text) {
        match kw.as_str() {
            "ARG" if out.is_empty() => {
                let (name, default) = rest.split_once('=').map_or((rest.as_str(), ""), |(n, d)| (n, d));
                args.insert(name.trim().to_string(), default.trim().trim_matches('"').to_string());
            }
            "FROM" => {
                let words: Vec<&str> = rest.split_whitespace().filter(|w| !w.starts_with("--")).collect();
                let image = expand(words.first().copied().unwrap_or(""), &args);
                let stage = match words.get(1..) {
                    Some([as_, name, ..]) if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                    _ => None,
                };
                out.push(From { line, image, stage });
            }
            _ => {}
        }
    }
    out
}

/// Each `FROM` with what the lab does with it, by the scenario's rules (keyed by image as
/// written in the Dockerfile, tag included).
pub fn map(froms: &[From], rules: &BTreeMap<String, BaseRule>) -> Vec<(From, Mapped)> {
    let mut stages: Vec<String> = Vec::new();
    froms
        .iter()
        .map(|f| {
            let m = if stages.iter().any(|s| s.eq_ignore_ascii_case(&f.image)) {
                Mapped::Stage(f.image.clone())
            } else {
                match rules.get(&f.image) {
                    Some(BaseRule { unavailable: Some(why), .. }) => Mapped::Unavailable(why.clone()),
                    Some(BaseRule { suite: Some(suite), packages, .. }) => {
                        Mapped::Base { suite: *suite, packages: packages.clone() }
                    }
                    _ => Mapped::Unmapped,
                }
            };
            if let Some(s) = &f.stage {
                stages.push(s.clone());
            }
            (f.clone(), m)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUST: &str = "# syntax=docker/dockerfile:1\nARG RUST=1.88\nFROM --platform=linux/amd64 rust:${RUST}-slim AS builder\nWORKDIR /app\nRUN apt-get update && \\\n    # a comment inside\n    apt-get install -y pkg\nFROM debian:bookworm-slim\nCOPY --from=builder /app/x .\nfrom builder as again\n";

    #[test]
    fn froms_are_found_with_their_lines_stages_and_arguments() {
        let f = froms(RUST);
        assert_eq!(
            f,
            vec![
                From { line: 3, image: "rust:1.88-slim".into(), stage: Some("builder".into()) },
                From { line: 8, image: "debian:bookworm-slim".into(), stage: None },
                From { line: 10, image: "builder".into(), stage: Some("again".into()) },
            ]
        );
        assert_eq!(expand("a${X:-d}b$Y.c${Z}", &BTreeMap::from([("Y".into(), "y".into())])), "adby.c${Z}");
    }

    #[test]
    fn each_from_maps_to_a_stage_a_base_an_unavailable_image_or_nothing() {
        let rules = BTreeMap::from([
            (
                "debian:bookworm-slim".to_string(),
                BaseRule {
                    suite: Some(DebianSuite::Bookworm),
                    packages: vec!["ca-certificates".into()],
                    unavailable: None,
                    build_env: BTreeMap::new(),
                    pip_constraints: Vec::new(),
                },
            ),
            (
                "rust:1.88-slim".to_string(),
                BaseRule { unavailable: Some("not in this test".into()), ..Default::default() },
            ),
        ]);
        let m: Vec<Mapped> = map(&froms(RUST), &rules).into_iter().map(|(_, m)| m).collect();
        assert_eq!(
            m,
            vec![
                Mapped::Unavailable("not in this test".into()),
                Mapped::Base { suite: DebianSuite::Bookworm, packages: vec!["ca-certificates".into()] },
                Mapped::Stage("builder".into()),
            ]
        );
        assert_eq!(map(&froms("FROM python:3.11-slim\n"), &rules)[0].1, Mapped::Unmapped);
    }
}
