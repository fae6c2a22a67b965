//! Matrix expansion: a `[[matrix]]` table becomes one server entry per combination of its axes,
//! with release ranges expanded against the committed release lists. It reads those lists and
//! nothing else; the entries it makes are validated with the scenario's own servers.

use std::path::Path;

use toml::Spanned;

use super::raw::{EngineKind, RawMatrix, ServerEntry, SpanErr};
use crate::mcp::transport::Transport;
use crate::recipe::releases::{Pick, Range, Releases, RELEASES_FILE};
use crate::spec::{Expect, PlacementMode};

/// Where release ranges are looked up: `<dir>/<family>/releases.toml`.
pub const DEFAULT_LOCKFILES: &str = "lockfiles";

/// The values of one axis of a matrix: each listed value, or the one default (None) when the
/// axis is not given.
fn axis<T: Clone>(values: &Option<Spanned<Vec<T>>>, key: &str) -> Result<Vec<Option<T>>, SpanErr> {
    match values {
        Some(v) if v.get_ref().is_empty() => Err((v.span(), format!("`{key}` is empty"))),
        Some(v) => Ok(v.get_ref().iter().cloned().map(Some).collect()),
        None => Ok(vec![None]),
    }
}

/// A matrix's servers, and the ids of those that are A/A controls.
#[derive(Debug, Default)]
pub(super) struct Expanded {
    pub(super) servers: Vec<ServerEntry>,
    pub(super) controls: Vec<String>,
}

/// One combination of a matrix's axes.
struct Combination<'a> {
    version: &'a String,
    runtime: &'a Option<String>,
    transport: Option<Transport>,
    placement: Option<PlacementMode>,
    engine: Option<EngineKind>,
}

impl RawMatrix {
    /// The server entries of the matrix, in axis order (version outermost).
    pub(super) fn expand(&self, lockfiles: &Path) -> Result<Expanded, SpanErr> {
        let versions = self.versions(lockfiles)?;
        let controls = self.controls(&versions)?;
        let runtimes = axis(&self.runtimes, "runtimes")?;
        let transports = axis(&self.transports, "transports")?;
        let placements = axis(&self.placements, "placements")?;
        let engines = axis(&self.engines, "engines")?;
        self.check_template(&[
            ("{version}", versions.len()),
            ("{runtime}", runtimes.len()),
            ("{transport}", transports.len()),
            ("{placement}", placements.len()),
            ("{engine}", engines.len()),
        ])?;
        let mut out = Expanded::default();
        for version in &versions {
            for runtime in &runtimes {
                for transport in &transports {
                    for (placement, engine) in
                        placements.iter().flat_map(|p| engines.iter().map(move |e| (p, e)))
                    {
                        let e = self.entry(Combination {
                            version,
                            runtime,
                            transport: *transport,
                            placement: *placement,
                            engine: *engine,
                        });
                        if controls.contains(version) {
                            out.controls.push(e.id.get_ref().clone());
                        }
                        out.servers.push(e);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Whether the matrix sweeps a release range (`"1.1.2..1.x"`), not a list.
    pub(super) fn is_sweep(&self) -> bool {
        self.versions.get_ref().as_str().is_some_and(|t| t.contains(".."))
    }

    /// The A/A control versions: as `controls` names them (`first`, `last` or versions of the
    /// matrix), else the first and the last of a release range of three or more.
    fn controls(&self, versions: &[String]) -> Result<Vec<String>, SpanErr> {
        let Some(c) = &self.controls else {
            return Ok(match self.is_sweep() && versions.len() >= 3 {
                true => vec![versions[0].clone(), versions[versions.len() - 1].clone()],
                false => Vec::new(),
            });
        };
        let mut out: Vec<String> = Vec::new();
        for name in c.get_ref() {
            let v = match name.as_str() {
                "first" => versions[0].clone(),
                "last" => versions[versions.len() - 1].clone(),
                v if versions.iter().any(|x| x == v) => v.to_string(),
                v => {
                    return Err((
                        c.span(),
                        format!(
                            "control {v:?} is not a version of this matrix ({} … {}); name versions it has, or \"first\" / \"last\"",
                            versions[0],
                            versions[versions.len() - 1]
                        ),
                    ))
                }
            };
            if !out.contains(&v) {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// The versions of the matrix: its list, or the releases of its range that `pick` keeps.
    fn versions(&self, lockfiles: &Path) -> Result<Vec<String>, SpanErr> {
        let family = self.family.get_ref();
        let vspan = self.versions.span();
        let pick = match &self.pick {
            Some(p) => Pick::parse(p.get_ref()).map_err(|m| (p.span(), m))?,
            None => Pick::All,
        };
        let versions: Vec<String> = match self.versions.get_ref() {
            toml::Value::String(text) => {
                let range = Range::parse(text).map_err(|m| (vspan.clone(), m))?;
                if !text.contains("..") {
                    vec![text.clone()]
                } else {
                    let dir = lockfiles.join(family);
                    let listed = Releases::load(&dir)
                        .map_err(|m| (vspan.clone(), m))?
                        .ok_or_else(|| {
                            (
                                vspan.clone(),
                                format!(
                                    "{} does not exist: list and lock the releases first with `benchlab lock {family} {text}`",
                                    dir.join(RELEASES_FILE).display()
                                ),
                            )
                        })?;
                    let v = range.select(&listed.versions, pick);
                    if v.is_empty() {
                        return Err((
                            vspan,
                            format!(
                                "no release of {} listed on {} falls in {text}",
                                listed.package, listed.listed
                            ),
                        ));
                    }
                    v
                }
            }
            toml::Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .filter(|v| !v.is_empty())
                .ok_or((
                    vspan.clone(),
                    "`versions` is a range string or a non-empty list of version strings".into(),
                ))?,
            _ => {
                return Err((
                    vspan,
                    "`versions` is a range string or a non-empty list of version strings".into(),
                ))
            }
        };
        Ok(versions)
    }

    /// Refuses an id template that does not name every axis with more than one value: the
    /// server ids would collide.
    fn check_template(&self, axes: &[(&str, usize)]) -> Result<(), SpanErr> {
        let template = self.id.get_ref();
        for (key, n) in axes {
            if *n > 1 && !template.contains(key) {
                return Err((
                    self.id.span(),
                    format!("the matrix has {n} values of {key} but its id template {template:?} does not name {key}: every server id must differ"),
                ));
            }
        }
        Ok(())
    }

    /// The server entry of one combination, its values spanned at the matrix's fields.
    fn entry(&self, c: Combination<'_>) -> ServerEntry {
        let Combination { version, runtime, transport, placement, engine } = c;
        let vspan = self.versions.span();
        let sp = |v: String, span: &std::ops::Range<usize>| Spanned::new(span.clone(), v);
        let id = self
            .id
            .get_ref()
            .replace("{engine}", engine.map_or("default", |e| e.as_str()))
            .replace("{version}", version)
            .replace("{runtime}", runtime.as_deref().unwrap_or("default"))
            .replace("{transport}", transport.map_or("stdio", |t| t.as_str()))
            .replace(
                "{placement}",
                match placement.unwrap_or_default() {
                    PlacementMode::Split => "split",
                    PlacementMode::Shared => "shared",
                },
            )
            .replace("{api}", self.api.as_ref().map_or("default", |a| a.get_ref()));
        ServerEntry {
            id: sp(id, &self.id.span()),
            family: self.family.clone(),
            version: Some(sp(version.clone(), &vspan)),
            runtime: runtime.clone().map(|r| sp(r, &self.runtimes.as_ref().expect("listed").span())),
            suite: self.suite.clone(),
            api: self.api.clone(),
            env: self.env.clone(),
            expect: Expect::Success,
            transport: transport.map(|t| Spanned::new(self.transports.as_ref().expect("listed").span(), t)),
            reply: self.reply.clone(),
            session: self.session.clone(),
            source_runtime: None,
            stand_in: None,
            placement: placement.map(|p| Spanned::new(self.placements.as_ref().expect("listed").span(), p)),
            engine: engine.map(|e| Spanned::new(self.engines.as_ref().expect("listed").span(), e)),
            program: None,
            lock: None,
            bytecode: None,
            workers: None,
            startup_ms: None,
            source: None,
            port: None,
            http_path: None,
            command: None,
        }
    }
}
