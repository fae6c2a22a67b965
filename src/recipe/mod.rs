//! Image recipes (`images/<family>/recipe.toml`) and their lockfiles (`lockfiles/`): loading and
//! checking the recipes of a checkout, and what they can build. The schema is in `file`, the
//! closed sets (runtime kinds, lockers) in `kinds`, resolution of a scenario's server in
//! `resolve`, the image plan, input hash and build context in `image`, lock folders in `lock`.
//! It never talks to the engine.

pub mod base;
mod file;
mod image;
mod kinds;
mod lock;
pub mod releases;
mod resolve;
mod source_image;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::mcp::transport::{ReplyMode, SessionMode, Transport};
use base::BaseSource;
use file::RecipeFile;

pub use file::{ApiSpec, HttpSpec, ProgramSpec, RangeSpec, RuntimeSpec, VersionSpec};
pub use image::{BuildInputs, ImagePlan, CA_FILE};
pub use kinds::{Locker, RuntimeKind};
pub use lock::{check_lock, is_locked, LockJob};
pub use resolve::{count_loc, ResolveError, ServerWant, WantField, HTTP_PORT};
pub use source_image::{SourceKey, SourcePlanError, SourceServer, SOURCE_FAMILY};

/// The family name of the built-in floor server.
pub const NULL_FAMILY: &str = "benchlab-null";

/// Where the lab's own binary is mounted in every container.
pub const LAB_BINARY: &str = "/benchlab/benchlab";

/// Where images built by recipes describe themselves (runtime and installed packages).
pub const IMAGE_MANIFEST_PATH: &str = "/usr/share/benchlab/image.json";

/// A lock folder's note that its lock departs from what was asked of it (a release locked as
/// of the day it was locked, not of its own day), in words; records carry it as a deviation.
pub const LOCK_DEVIATION_FILE: &str = "lock-deviation";

/// Labels on images the lab builds.
pub const LABEL_INPUT_HASH: &str = "org.benchlab.input-hash";

/// A loaded recipe.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub dir: PathBuf,
    pub family: String,
    pub description: String,
    default_runtime: String,
    runtimes: BTreeMap<String, RuntimeSpec>,
    apis: BTreeMap<String, ApiSpec>,
    versions: Vec<VersionSpec>,
    ranges: Vec<RangeSpec>,
}

/// All recipes of a checkout.
#[derive(Debug, Clone)]
pub struct RecipeBook {
    pub images_dir: PathBuf,
    pub lockfiles_dir: PathBuf,
    recipes: BTreeMap<String, Recipe>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{0}")]
    Resolve(String),
}

fn read(path: &Path) -> Result<Vec<u8>, RecipeError> {
    std::fs::read(path).map_err(|source| RecipeError::Read { path: path.into(), source })
}

impl RecipeBook {
    /// Loads every `images/*/recipe.toml` under `root` (the checkout).
    pub fn load(root: &Path) -> Result<RecipeBook, RecipeError> {
        let images_dir = root.join("images");
        let lockfiles_dir = root.join("lockfiles");
        let mut recipes = BTreeMap::new();
        let entries = std::fs::read_dir(&images_dir)
            .map_err(|source| RecipeError::Read { path: images_dir.clone(), source })?;
        let mut dirs: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.join("recipe.toml").is_file()).collect();
        dirs.sort();
        for dir in dirs {
            let path = dir.join("recipe.toml");
            let text = String::from_utf8_lossy(&read(&path)?).into_owned();
            let file: RecipeFile = toml::from_str(&text).map_err(|e| {
                let (line, column) = crate::text::line_col(&text, e.span().map_or(0, |s| s.start));
                RecipeError::Parse { path: path.clone(), line, column, message: e.message().to_string() }
            })?;
            let invalid = |message: String| RecipeError::Invalid { path: path.clone(), message };
            if file.family == NULL_FAMILY {
                return Err(invalid(format!("{NULL_FAMILY} is the built-in floor server's name")));
            }
            if !file.runtime.contains_key(&file.default_runtime) {
                return Err(invalid(format!(
                    "default_runtime {:?} is not a [runtime.*] table",
                    file.default_runtime
                )));
            }
            for (name, rt) in &file.runtime {
                base_of(rt)
                    .and_then(|b| b.validate())
                    .map_err(|m| invalid(format!("runtime {name}: {m}")))?;
            }
            for v in &file.versions {
                if !file.api.contains_key(&v.api) {
                    return Err(invalid(format!(
                        "version {} uses api {:?}, which has no [api.{}] table",
                        v.version, v.api, v.api
                    )));
                }
                for rt in &v.runtimes {
                    if !file.runtime.contains_key(rt) {
                        return Err(invalid(format!(
                            "version {} names runtime {rt:?}, which has no [runtime.{rt}] table",
                            v.version
                        )));
                    }
                }
            }
            for r in &file.ranges {
                releases::Range::parse(&r.releases).map_err(&invalid)?;
                for api in std::iter::once(&r.api).chain(&r.also) {
                    if !file.api.contains_key(api) {
                        return Err(invalid(format!(
                            "range {} uses api {api:?}, which has no [api.{api}] table",
                            r.releases
                        )));
                    }
                }
                if !file.versions.iter().any(|v| v.version == r.template) {
                    return Err(invalid(format!(
                        "range {}: its template {:?} is no [[version]]",
                        r.releases, r.template
                    )));
                }
                for rt in &r.runtimes {
                    if !file.runtime.contains_key(rt) {
                        return Err(invalid(format!(
                            "range {} names runtime {rt:?}, which has no [runtime.{rt}] table",
                            r.releases
                        )));
                    }
                }
            }
            for v in &file.versions {
                for api in &v.also {
                    if !file.api.contains_key(api) {
                        return Err(invalid(format!(
                            "version {} also serves api {api:?}, which has no [api.{api}] table",
                            v.version
                        )));
                    }
                }
            }
            for (name, api) in &file.api {
                for suite in api.sources.keys() {
                    // `bench` is served over HTTP only (Gradio), which the lab drives later.
                    if crate::mcp::suite::Suite::from_name(suite).is_none() && suite != "bench" {
                        return Err(invalid(format!("[api.{name}.sources] names unknown suite {suite:?}")));
                    }
                }
                for (program, spec) in &api.programs {
                    if crate::mcp::suite::Suite::from_name(&spec.suite).is_none() {
                        return Err(invalid(format!(
                            "[api.{name}.programs.{program}] names unknown suite {:?}",
                            spec.suite
                        )));
                    }
                }
            }
            recipes.insert(
                file.family.clone(),
                Recipe {
                    dir,
                    family: file.family,
                    description: file.description,
                    default_runtime: file.default_runtime,
                    runtimes: file.runtime,
                    apis: file.api,
                    versions: file.versions,
                    ranges: file.ranges,
                },
            );
        }
        Ok(RecipeBook { images_dir, lockfiles_dir, recipes })
    }

    /// A family's recipe and one of its versions; the errors name what the recipes do have.
    fn recipe_version(
        &self,
        family: &str,
        version: Option<&str>,
    ) -> Result<(&Recipe, VersionSpec), ResolveError> {
        let recipe = self.recipes.get(family).ok_or_else(|| {
            let known: Vec<&str> =
                std::iter::once(NULL_FAMILY).chain(self.recipes.keys().map(String::as_str)).collect();
            format!("unknown server family {family:?} (known: {})", known.join(", "))
        })?;
        let version = version
            .ok_or_else(|| format!("family {family} needs a version (one of: {})", recipe.version_list()))?;
        if let Some(v) = recipe.versions.iter().find(|v| v.version == version) {
            return Ok((recipe, v.clone()));
        }
        // A release of a declared range: the range's API and runtimes, its own lock folder.
        let in_range = recipe
            .ranges
            .iter()
            .find(|r| releases::Range::parse(&r.releases).is_ok_and(|range| range.contains(version)));
        match in_range {
            Some(r) => Ok((
                recipe,
                VersionSpec {
                    version: version.into(),
                    api: r.api.clone(),
                    runtimes: r.runtimes.clone(),
                    also: r.also.clone(),
                },
            )),
            None => Err(WantField::Version.error(format!(
                "{family} has no recipe for version {version:?} (it has: {})",
                recipe.version_list()
            ))),
        }
    }
}

impl RecipeBook {
    /// A family's runtime names (none for unknown families and the null server).
    pub fn runtimes_of(&self, family: &str) -> Vec<String> {
        self.recipes.get(family).map(|r| r.runtimes.keys().cloned().collect()).unwrap_or_default()
    }
}

impl RecipeBook {
    /// One want per (family, version, runtime) the recipes can build, optionally filtered: what
    /// `benchlab build` makes. The suite is any the version's API serves (one image holds all).
    pub fn all_wants(
        &self,
        family: Option<&str>,
        version: Option<&str>,
        runtime: Option<&str>,
    ) -> Vec<ServerWant> {
        let mut out = Vec::new();
        for r in self.recipes.values().filter(|r| family.is_none_or(|f| f == r.family)) {
            for v in r.versions.iter().filter(|v| version.is_none_or(|x| x == v.version)) {
                let Some(api) = r.apis.get(&v.api) else { continue };
                let Some(suite) = api.sources.keys().next() else { continue };
                // Any transport the API serves names the same image; HTTP-only APIs need one.
                let transport = match (&api.http, api.stdio) {
                    (Some(h), false) => h.transports.first().copied().unwrap_or_default(),
                    _ => Transport::Stdio,
                };
                for rt in v.runtimes.iter().filter(|rt| runtime.is_none_or(|x| x == rt.as_str())) {
                    out.push(ServerWant {
                        family: r.family.clone(),
                        version: Some(v.version.clone()),
                        runtime: Some(rt.clone()),
                        suite: suite.clone(),
                        transport,
                        ..Default::default()
                    });
                }
            }
        }
        out
    }
}

/// One HTTP server variant a recipe declares: what one server entry of a scenario names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HttpVariant {
    pub family: String,
    pub version: String,
    pub runtime: String,
    pub suite: String,
    pub transport: Transport,
    /// Streamable HTTP only (None elsewhere, and where the recipe lists no reply modes).
    pub reply: Option<ReplyMode>,
    /// Streamable HTTP only (None elsewhere, and where the recipe lists no session modes).
    pub session: Option<SessionMode>,
    /// It serves a plain REST route beside MCP (`http_api`); said of streamable HTTP variants.
    pub rest: bool,
}

impl RecipeBook {
    /// Every HTTP variant the recipes declare for their listed versions (ranges are sweeps',
    /// not listed): each version × runtime × suite (the HTTP sources', else the API's) ×
    /// transport, and for streamable HTTP each reply × session mode, less the JSON replies a
    /// recipe's `json_sessions` leaves out. What `scenarios/gate-http.toml` must hold.
    pub fn http_variants(&self) -> Vec<HttpVariant> {
        let mut out = Vec::new();
        for r in self.recipes.values() {
            for v in &r.versions {
                let Some(api) = r.apis.get(&v.api) else { continue };
                let Some(h) = &api.http else { continue };
                let suites = if h.sources.is_empty() { &api.sources } else { &h.sources };
                let replies: Vec<Option<ReplyMode>> = if h.replies.is_empty() {
                    vec![None]
                } else {
                    h.replies.iter().copied().map(Some).collect()
                };
                let sessions: Vec<Option<SessionMode>> = if h.sessions.is_empty() {
                    vec![None]
                } else {
                    h.sessions.iter().copied().map(Some).collect()
                };
                let streamable: Vec<(Option<ReplyMode>, Option<SessionMode>)> = replies
                    .iter()
                    .flat_map(|&reply| sessions.iter().map(move |&session| (reply, session)))
                    .filter(|&(reply, session)| h.serves(reply, session))
                    .collect();
                let runtime_suites =
                    v.runtimes.iter().flat_map(|rt| suites.keys().map(move |suite| (rt, suite)));
                for ((rt, suite), &transport) in
                    runtime_suites.flat_map(|c| h.transports.iter().map(move |t| (c, t)))
                {
                    let streaming = transport == Transport::StreamableHttp;
                    let modes = if streaming { &streamable[..] } else { &[(None, None)][..] };
                    out.extend(modes.iter().map(|&(reply, session)| HttpVariant {
                        family: r.family.clone(),
                        version: v.version.clone(),
                        runtime: rt.clone(),
                        suite: suite.clone(),
                        transport,
                        reply,
                        session,
                        rest: streaming && h.http_api.is_some(),
                    }));
                }
            }
        }
        out
    }
}

impl Recipe {
    fn version_list(&self) -> String {
        self.versions
            .iter()
            .map(|v| v.version.clone())
            .chain(self.ranges.iter().map(|r| format!("any release in {}", r.releases)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn base_of(rt: &RuntimeSpec) -> Result<BaseSource, String> {
    match (&rt.suite, &rt.base_image) {
        (Some(suite), None) => {
            let pk: Vec<&str> = rt.base_packages.iter().map(String::as_str).collect();
            let b = BaseSource::bootstrap(suite, &pk);
            b.validate()?;
            Ok(b)
        }
        (None, Some(reference)) => {
            let b = BaseSource::Registry { reference: reference.clone() };
            b.validate()?;
            Ok(b)
        }
        _ => Err("a runtime names exactly one of `suite` (bootstrapped base) and `base_image` (registry, pinned by digest)".into()),
    }
}

#[cfg(test)]
mod tests;
