//! Image recipes (`images/<family>/recipe.toml`) and their lockfiles (`lockfiles/`): which SDK
//! versions a family builds, with which runtime and API generation; the image input hash (the
//! build cache key); and the build context handed to the engine. It never talks to the engine.
use crate::spec::SourceInfo;

pub mod base;
pub mod releases;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::mcp::transport::{ApiStyle, HttpTarget, ReplyMode, SessionMode, Transport};
use crate::spec::ServerLaunch;
use base::BaseSource;

/// The family name of the built-in floor server.
pub const NULL_FAMILY: &str = "benchlab-null";

/// Where the lab's own binary is mounted in every container.
pub const LAB_BINARY: &str = "/benchlab/benchlab";

/// Where images built by recipes describe themselves (runtime and installed packages).
pub const IMAGE_MANIFEST_PATH: &str = "/usr/share/benchlab/image.json";

/// Labels on images the lab builds.
pub const LABEL_INPUT_HASH: &str = "org.benchlab.input-hash";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipeFile {
    family: String,
    description: String,
    default_runtime: String,
    runtime: BTreeMap<String, RuntimeSpec>,
    api: BTreeMap<String, ApiSpec>,
    #[serde(rename = "version")]
    versions: Vec<VersionSpec>,
    /// Releases declared by range (`benchlab lock <family> <range>` locks them).
    #[serde(rename = "range", default)]
    ranges: Vec<RangeSpec>,
}

/// A runtime a family can be built on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeSpec {
    /// `cpython`, `node`, `bun`.
    pub kind: String,
    /// The Dockerfile template, relative to the recipe folder.
    pub dockerfile: String,
    /// Debian suite of the bootstrapped base, with the Debian packages the runtime needs.
    pub suite: Option<String>,
    #[serde(default)]
    pub base_packages: Vec<String>,
    /// Extra Debian packages for the download stage only (e.g. npm); the runtime image never
    /// holds them.
    #[serde(default)]
    pub fetch_packages: Vec<String>,
    /// A registry base pinned by digest, instead of a bootstrapped one.
    pub base_image: Option<String>,
    /// The interpreter the server's argv is appended to.
    pub launcher: Vec<String>,
}

/// The server sources of one API generation of the SDK, one self-contained file per suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiSpec {
    /// Appended to the runtime's launcher; `{suite}` becomes the suite's name.
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Suite name → source file, relative to the recipe folder.
    pub sources: BTreeMap<String, String>,
    /// Whether the stdio sources serve stdio (Gradio has no stdio transport).
    #[serde(default = "yes")]
    pub stdio: bool,
    /// The HTTP transports of this API generation, when it has any.
    pub http: Option<HttpSpec>,
}

fn yes() -> bool {
    true
}

/// How an API generation's servers are served over HTTP (see the recipes' contract in
/// `images/README` comments): which transports, where, and in which modes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    pub transports: Vec<Transport>,
    /// Appended to the runtime's launcher; `{suite}` becomes the suite's name.
    pub argv: Vec<String>,
    /// Transport → path: the streamable POST endpoint, or the legacy SSE GET stream.
    pub paths: BTreeMap<Transport, String>,
    /// Streamable HTTP reply modes the server can be asked for; the first is the default.
    #[serde(default)]
    pub replies: Vec<ReplyMode>,
    /// Streamable HTTP session modes; the first is the default.
    #[serde(default)]
    pub sessions: Vec<SessionMode>,
    /// A plain REST route template beside MCP (`{tool}` is replaced).
    pub http_api: Option<String>,
    pub http_api_style: Option<ApiStyle>,
    /// Suite → HTTP server source (copied as `srv/<suite>_http.<ext>`); when empty, the stdio
    /// sources serve HTTP too.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VersionSpec {
    pub version: String,
    /// The API generation this version's server sources use.
    pub api: String,
    /// Runtimes this version is locked for: `lockfiles/<family>/<version>-<runtime>/`.
    pub runtimes: Vec<String>,
    /// Other API generations this version also serves (a sweep keeps one server source across
    /// releases, so that its line shows the SDK and not the source). Not part of the image's
    /// inputs: the sources of the API a cell runs are.
    #[serde(default, skip_serializing)]
    pub also: Vec<String>,
}

/// Every release of a range (`1.2.0..1.x`) with one API generation: what a version sweep uses.
/// A release of the range is locked like a listed version, from the lock input of `template`
/// (same runtime) with `package` pinned to the release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RangeSpec {
    /// The releases, as `FROM..TO` (see [`releases::Range`]).
    pub releases: String,
    pub api: String,
    #[serde(default)]
    pub also: Vec<String>,
    pub runtimes: Vec<String>,
    /// The SDK's package on its index (`mcp`, `@modelcontextprotocol/sdk`).
    pub package: String,
    /// A listed version whose lock input is the pattern for the range's releases.
    pub template: String,
}

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

    /// Resolves a server of a scenario to what must be built and run. `api` overrides the
    /// version's own API generation (only to show that it fails: the scenario says so). Errors
    /// are sentences that the scenario layer places at the entry's line and column.
    pub fn resolve(&self, want: &ServerWant) -> Result<ImagePlan, ResolveError> {
        use WantField::{Api, Runtime};
        let family = want.family.as_str();
        if family == NULL_FAMILY {
            return ImagePlan::null_server(want);
        }
        let (recipe, v) = self.recipe_version(family, want.version.as_deref())?;
        let version = v.version.as_str();
        let runtime_name = want.runtime.as_deref().unwrap_or(&recipe.default_runtime);
        let rt = recipe.runtimes.get(runtime_name).ok_or_else(|| {
            Runtime.error(format!(
                "{family} has no runtime {runtime_name:?} (it has: {})",
                recipe.runtimes.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        if !v.runtimes.iter().any(|r| r == runtime_name) {
            return Err(Runtime.error(format!(
                "{family} {version} is not locked for runtime {runtime_name} (it is for: {}); lock it with `benchlab lock {family} {version} --runtime {runtime_name}`",
                v.runtimes.join(", ")
            )));
        }
        let api_name = want.api.as_deref().unwrap_or(&v.api);
        let api = recipe.apis.get(api_name).ok_or_else(|| {
            Api.error(format!(
                "{family} has no API generation {api_name:?} (it has: {})",
                recipe.apis.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        if api_name != v.api && !v.also.iter().any(|a| a == api_name) && !want.expect_failure {
            return Err(Api.error(format!(
                "{family} {version} uses the {} API; running it with the {api_name} API is refused unless the server entry says `expect = \"failure\"`",
                v.api
            )));
        }
        let (sources, argv_template, http) = serve_plan(family, api_name, api, want)?;
        sources.get(&want.suite).ok_or_else(|| {
            Api.error(format!(
                "the {api_name} {} server of {family} has no {} suite (it has: {})",
                want.transport,
                want.suite,
                sources.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        let base = base_of(rt)?;
        let fetch_base = match (&rt.suite, rt.fetch_packages.is_empty()) {
            (Some(suite), false) => {
                let mut all: Vec<&str> = rt.base_packages.iter().map(String::as_str).collect();
                all.extend(rt.fetch_packages.iter().map(String::as_str));
                Some(BaseSource::bootstrap(suite, &all))
            }
            _ => None,
        };
        let read = |rel: &Path| std::fs::read(rel).map_err(|e| format!("{}: {e}", rel.display()));
        let dockerfile = String::from_utf8(read(&recipe.dir.join(&rt.dockerfile))?)
            .map_err(|_| format!("{} is not UTF-8", rt.dockerfile))?;
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        let lock_dir = self.lockfiles_dir.join(family).join(format!("{version}-{runtime_name}"));
        let mut lock_names: Vec<String> = std::fs::read_dir(&lock_dir)
            .map_err(|e| format!("lock folder {}: {e}; lock it with `benchlab lock {family} {version} --runtime {runtime_name}`", lock_dir.display()))?
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        lock_names.sort();
        check_lock(&lock_dir).map_err(|m| {
            format!(
                "{}: the lock no longer matches its input ({m}); regenerate it with `benchlab lock {family} {version} --runtime {runtime_name}`",
                lock_dir.display()
            )
        })?;
        for name in lock_names {
            files.push((format!("lock/{name}"), read(&lock_dir.join(&name))?));
        }
        // Every suite's sources (stdio and HTTP) go in, so one image serves them all; the cell's
        // own is the one launched and counted.
        let rel = &sources[&want.suite];
        let ext = Path::new(rel).extension().and_then(|e| e.to_str()).unwrap_or("txt");
        let data = read(&recipe.dir.join(rel))?;
        let source = Some(SourceInfo {
            file: format!("images/{family}/{rel}"),
            sha256: crate::hash::sha256_hex(&data),
            loc: count_loc(&String::from_utf8_lossy(&data), ext),
        });
        let http_sources = api.http.as_ref().map(|h| &h.sources);
        let all = api
            .sources
            .iter()
            .map(|e| (e, ""))
            .chain(http_sources.into_iter().flatten().map(|e| (e, "_http")));
        for ((suite, rel), suffix) in all {
            let path = recipe.dir.join(rel);
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("txt").to_string();
            let data = read(&path)?;
            files.push((format!("srv/{suite}{suffix}.{ext}"), data));
        }
        let manifest_script = if rt.kind == "cpython" { "image-manifest.py" } else { "image-manifest.mjs" };
        files.push((
            manifest_script.to_string(),
            read(&self.images_dir.join("common").join(manifest_script))?,
        ));
        let mut env: Vec<(String, String)> = api.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        env.extend(want.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.push(("BENCHLAB_SUITE".into(), want.suite.clone()));
        if let Some(h) = &http {
            env.extend(h.server_env());
        }
        let mut argv = rt.launcher.clone();
        argv.extend(argv_template.iter().map(|a| a.replace("{suite}", &want.suite)));
        Ok(ImagePlan {
            family: family.into(),
            version: version.into(),
            api: api_name.into(),
            runtime_name: runtime_name.into(),
            runtime_kind: rt.kind.clone(),
            base,
            fetch_base,
            launch: ServerLaunch { argv, env, cwd: Some("/srv".into()) },
            http,
            source,
            build: Some(BuildInputs {
                dockerfile_template: dockerfile,
                launcher: rt.launcher.join(" "),
                files,
                recipe_entry: serde_json::json!({"version": v, "runtime": rt, "api": api_name}),
            }),
        })
    }
}

/// What `benchlab lock` needs to regenerate one lock folder.
#[derive(Debug, Clone, PartialEq)]
pub struct LockJob {
    pub family: String,
    pub version: String,
    pub runtime: String,
    /// `uv` (Python: requirements.in → requirements.txt) or `npm` (package.json →
    /// package-lock.json).
    pub locker: &'static str,
    /// The base the locker runs in: the target's own, so platform tags and versions match.
    pub base: BaseSource,
    pub dir: PathBuf,
}

impl RecipeBook {
    /// The lock jobs for a family's version (every runtime it is locked for, or one).
    pub fn lock_jobs(
        &self,
        family: &str,
        version: &str,
        runtime: Option<&str>,
    ) -> Result<Vec<LockJob>, String> {
        let (recipe, v) = self.recipe_version(family, Some(version)).map_err(|e| e.message)?;
        let mut out = Vec::new();
        for name in &v.runtimes {
            if runtime.is_some_and(|r| r != name) {
                continue;
            }
            let rt = &recipe.runtimes[name];
            let (locker, base) = match rt.kind.as_str() {
                "cpython" => ("uv", base_of(rt)?),
                _ => {
                    let suite = rt.suite.clone().ok_or("npm locking needs a bootstrapped base (suite)")?;
                    let mut all: Vec<&str> = rt.base_packages.iter().map(String::as_str).collect();
                    all.extend(rt.fetch_packages.iter().map(String::as_str));
                    ("npm", BaseSource::bootstrap(&suite, &all))
                }
            };
            out.push(LockJob {
                family: family.into(),
                version: version.into(),
                runtime: name.clone(),
                locker,
                base,
                dir: self.lockfiles_dir.join(family).join(format!("{version}-{name}")),
            });
        }
        if out.is_empty() {
            return Err(format!(
                "{family} {version} has no runtime {:?} in its recipe's `runtimes`",
                runtime.unwrap_or("")
            ));
        }
        Ok(out)
    }
}

impl RecipeBook {
    /// A family's ranged package and a lock job of the runtime to list the index from (the one
    /// asked for, or the ranges' first).
    pub fn range_locking(&self, family: &str, runtime: Option<&str>) -> Result<(String, LockJob), String> {
        let recipe = self.recipes.get(family).ok_or_else(|| format!("unknown family {family:?}"))?;
        let range = recipe.ranges.first().ok_or_else(|| {
            format!(
                "{family}'s recipe declares no [[range]]: lock one of its versions ({})",
                recipe.version_list()
            )
        })?;
        let rt = runtime.unwrap_or(&range.runtimes[0]);
        let job = self.lock_jobs(family, &range.template, Some(rt))?.remove(0);
        Ok((range.package.clone(), job))
    }

    /// The releases of `range` a scenario may run, from the committed release list, as `pick`
    /// says. Errors say which `benchlab lock` makes the list.
    pub fn expand_range(
        &self,
        family: &str,
        range: &str,
        pick: releases::Pick,
    ) -> Result<Vec<String>, String> {
        let r = releases::Range::parse(range)?;
        let recipe = self.recipes.get(family).ok_or_else(|| format!("unknown family {family:?}"))?;
        if !r.text.contains("..") {
            return Ok(vec![r.text.clone()]);
        }
        if recipe.ranges.is_empty() {
            return Err(format!("{family}'s recipe declares no [[range]] of releases"));
        }
        let dir = self.lockfiles_dir.join(family);
        let listed = releases::Releases::load(&dir)?.ok_or_else(|| {
            format!(
                "{} does not exist yet: list and lock the releases with `benchlab lock {family} {range}`",
                dir.join(releases::RELEASES_FILE).display()
            )
        })?;
        let chosen = r.select(&listed.versions, pick);
        if chosen.is_empty() {
            return Err(format!(
                "no release of {} listed on {} falls in {range}",
                listed.package, listed.listed
            ));
        }
        Ok(chosen)
    }

    /// Writes a range release's lock input (requirements.in or package.json) from its range's
    /// template of the same runtime, with the SDK package pinned to the release; an existing
    /// input is left alone.
    ///
    /// `before` (the end of the release's publication day) goes into the folder's
    /// `exclude-newer` file: the locker resolves no dependency published after it, so an old
    /// release gets the dependencies it shipped with, not today's (which may no longer work
    /// with it).
    pub fn write_lock_input(
        &self,
        family: &str,
        version: &str,
        runtime: &str,
        before: Option<&str>,
    ) -> Result<PathBuf, String> {
        let recipe = self.recipes.get(family).ok_or_else(|| format!("unknown family {family:?}"))?;
        let dir = self.lockfiles_dir.join(family).join(format!("{version}-{runtime}"));
        if dir.join("requirements.in").is_file() || dir.join("package.json").is_file() {
            return Ok(dir);
        }
        if let Some(b) = before {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            std::fs::write(dir.join(releases::EXCLUDE_NEWER_FILE), format!("{b}\n"))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let range = recipe
            .ranges
            .iter()
            .find(|r| releases::Range::parse(&r.releases).is_ok_and(|x| x.contains(version)))
            .ok_or_else(|| format!("{family} {version} is in no [[range]] of the recipe"))?;
        let template = self.lockfiles_dir.join(family).join(format!("{}-{runtime}", range.template));
        let pkg = &range.package;
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if let Ok(text) = std::fs::read_to_string(template.join("requirements.in")) {
            let mut found = false;
            let lines: Vec<String> = text
                .lines()
                .map(|l| {
                    let name = l.split("==").next().unwrap_or("").trim();
                    if name.eq_ignore_ascii_case(pkg) {
                        found = true;
                        format!("{pkg}=={version}")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            if !found {
                return Err(format!("{}/requirements.in does not pin {pkg}", template.display()));
            }
            std::fs::write(dir.join("requirements.in"), lines.join("\n") + "\n")
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        } else if let Ok(text) = std::fs::read_to_string(template.join("package.json")) {
            let mut json: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| format!("{}/package.json: {e}", template.display()))?;
            let deps = json
                .get_mut("dependencies")
                .and_then(|d| d.as_object_mut())
                .filter(|d| d.contains_key(pkg.as_str()))
                .ok_or_else(|| format!("{}/package.json does not depend on {pkg}", template.display()))?;
            deps.insert(pkg.clone(), serde_json::Value::String(version.into()));
            json["description"] = serde_json::Value::String(format!("{pkg} {version} on {runtime}"));
            let out = serde_json::to_string_pretty(&json).expect("JSON serialises") + "\n";
            std::fs::write(dir.join("package.json"), out).map_err(|e| format!("{}: {e}", dir.display()))?;
        } else {
            return Err(format!("the template lock folder {} has no lock input", template.display()));
        }
        Ok(dir)
    }
}

impl RecipeBook {
    /// A family's runtime names (none for unknown families and the null server).
    pub fn runtimes_of(&self, family: &str) -> Vec<String> {
        self.recipes.get(family).map(|r| r.runtimes.keys().cloned().collect()).unwrap_or_default()
    }
}

/// Whether a lock folder holds a lock that still pins its input.
pub fn is_locked(dir: &Path) -> bool {
    (dir.join("requirements.txt").is_file() || dir.join("package-lock.json").is_file())
        && check_lock(dir).is_ok()
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

/// Checks that a lock folder's lock still pins what its input asks for: every `name==version` of
/// `requirements.in` in `requirements.txt`, or `package.json`'s dependencies as the root of
/// `package-lock.json`. Builds never resolve, so a stale lock must stop the build, not be ignored.
pub fn check_lock(dir: &Path) -> Result<(), String> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    if let Some(input) = read("requirements.in") {
        let lock = read("requirements.txt").ok_or("requirements.txt is missing")?;
        let norm = |s: &str| s.trim().to_ascii_lowercase().replace('_', "-");
        let pinned: Vec<String> = lock
            .lines()
            .filter(|l| !l.starts_with([' ', '#']))
            .filter_map(|l| l.split_whitespace().next())
            .map(norm)
            .collect();
        for line in input.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty())
        {
            let Some((name, version)) = line.split_once("==") else { continue };
            let name = name.split('[').next().unwrap_or(name);
            let want = format!("{}=={}", norm(name), norm(version));
            if !pinned.contains(&want) {
                return Err(format!("requirements.in asks for {line}, requirements.txt does not pin it"));
            }
        }
    }
    if let Some(manifest) = read("package.json") {
        let lock = read("package-lock.json").ok_or("package-lock.json is missing")?;
        let deps = |v: &serde_json::Value| v.get("dependencies").cloned().unwrap_or_default();
        let manifest: serde_json::Value =
            serde_json::from_str(&manifest).map_err(|e| format!("package.json: {e}"))?;
        let lock: serde_json::Value =
            serde_json::from_str(&lock).map_err(|e| format!("package-lock.json: {e}"))?;
        let root = lock.pointer("/packages/").cloned().unwrap_or_default();
        if deps(&manifest) != deps(&root) {
            return Err(format!(
                "package.json asks for {}, package-lock.json's root has {}",
                deps(&manifest),
                deps(&root)
            ));
        }
    }
    Ok(())
}

/// The port HTTP servers listen on, on the loopback of their own network namespace.
pub const HTTP_PORT: u16 = 8000;

/// Which sources and argv serve the wanted transport, and how the driver reaches an HTTP server.
#[allow(clippy::type_complexity)]
fn serve_plan<'a>(
    family: &str,
    api_name: &str,
    api: &'a ApiSpec,
    want: &ServerWant,
) -> Result<(&'a BTreeMap<String, String>, &'a [String], Option<HttpTarget>), ResolveError> {
    use WantField::Transport as T;
    if !want.transport.is_http() {
        if !api.stdio {
            return Err(T.error(format!(
                "{family} ({api_name} API) has no stdio transport; set `transport` on the server entry to one of: {}",
                api.http.as_ref().map(|h| h.transports.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_default()
            )));
        }
        if want.reply.is_some() || want.session.is_some() {
            return Err(T.error("`reply` and `session` belong to streamable-http servers".into()));
        }
        return Ok((&api.sources, &api.argv, None));
    }
    let h = api.http.as_ref().ok_or_else(|| {
        T.error(format!(
            "{family} ({api_name} API) has no HTTP transport in its recipe; it serves stdio only"
        ))
    })?;
    if !h.transports.contains(&want.transport) {
        return Err(T.error(format!(
            "{family} ({api_name} API) does not serve {} (it serves: {})",
            want.transport,
            h.transports.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    let path = h.paths.get(&want.transport).cloned().ok_or_else(|| {
        WantField::Family.error(format!(
            "the recipe of {family} has no [api.{api_name}.http.paths] entry for {}",
            want.transport
        ))
    })?;
    let (reply, session) = if want.transport == Transport::StreamableHttp {
        let pick = |asked: Option<&str>, have: Vec<&str>, what: &str| -> Result<(), ResolveError> {
            match asked {
                Some(a) if !have.contains(&a) => Err(T.error(format!(
                    "{family} ({api_name} API) cannot serve {what} {a:?} over streamable-http (it can: {})",
                    have.join(", ")
                ))),
                _ => Ok(()),
            }
        };
        pick(want.reply.map(|r| r.as_str()), h.replies.iter().map(|r| r.as_str()).collect(), "reply mode")?;
        pick(
            want.session.map(|r| r.as_str()),
            h.sessions.iter().map(|r| r.as_str()).collect(),
            "session mode",
        )?;
        (want.reply.or(h.replies.first().copied()), want.session.or(h.sessions.first().copied()))
    } else {
        if want.reply.is_some() || want.session.is_some() {
            return Err(T.error("`reply` and `session` belong to streamable-http servers, not sse".into()));
        }
        (None, None)
    };
    let sources = if h.sources.is_empty() { &api.sources } else { &h.sources };
    let target = HttpTarget {
        transport: want.transport,
        port: HTTP_PORT,
        path,
        reply,
        session,
        api_route: h.http_api.clone(),
        api_style: h.http_api.as_ref().map(|_| h.http_api_style.unwrap_or_default()),
    };
    Ok((sources, &h.argv, Some(target)))
}

/// The part of a server entry a resolve error is about, so the scenario layer can point at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WantField {
    /// The family, or the recipe and its files as a whole.
    Family,
    Version,
    Runtime,
    /// The API generation (and the suites its sources serve).
    Api,
    /// The transport, reply or session mode.
    Transport,
}

impl WantField {
    fn error(self, message: String) -> ResolveError {
        ResolveError { field: self, message }
    }
}

/// Why a server entry cannot be resolved, and which of its fields is at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ResolveError {
    pub field: WantField,
    pub message: String,
}

impl From<String> for ResolveError {
    fn from(message: String) -> Self {
        WantField::Family.error(message)
    }
}

/// What a scenario asks of a server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerWant {
    pub family: String,
    pub transport: Transport,
    /// Streamable HTTP reply and session modes; the recipe's first when absent.
    pub reply: Option<ReplyMode>,
    pub session: Option<SessionMode>,
    pub version: Option<String>,
    pub runtime: Option<String>,
    pub api: Option<String>,
    pub suite: String,
    pub env: BTreeMap<String, String>,
    pub expect_failure: bool,
}

/// Non-blank, non-comment lines of a source file (`#` for Python; `//` and `/* */` for
/// JavaScript and TypeScript). Docstrings count: they are part of what the programmer writes.
pub fn count_loc(text: &str, ext: &str) -> u32 {
    let mut in_block = false;
    let mut n = 0;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        match ext {
            "py" => {
                if !t.starts_with('#') {
                    n += 1;
                }
            }
            _ => {
                if in_block {
                    if t.contains("*/") {
                        in_block = false;
                        if !t.ends_with("*/") {
                            n += 1;
                        }
                    }
                    continue;
                }
                if t.starts_with("//") {
                    continue;
                }
                if t.starts_with("/*") {
                    in_block = !t.contains("*/");
                    continue;
                }
                n += 1;
            }
        }
    }
    n
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

/// What a cell's server image is made of.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePlan {
    pub family: String,
    pub version: String,
    pub api: String,
    pub runtime_name: String,
    pub runtime_kind: String,
    pub base: BaseSource,
    /// The download stage's base, when it needs more than the runtime's (npm for Node images).
    pub fetch_base: Option<BaseSource>,
    pub launch: ServerLaunch,
    /// How the driver reaches the server over HTTP; None for stdio cells.
    pub http: Option<HttpTarget>,
    pub source: Option<SourceInfo>,
    /// None for the null server, which runs the lab's binary on the bare base.
    pub build: Option<BuildInputs>,
}

impl ImagePlan {
    /// Whether two cells can share one image (the launch and source may differ by suite).
    pub fn same_image(&self, other: &ImagePlan) -> bool {
        self.family == other.family
            && self.version == other.version
            && self.runtime_name == other.runtime_name
            && self.base == other.base
            && self.fetch_base == other.fetch_base
            && self.build == other.build
    }
}

/// The inputs of a recipe build. The CA bundle is not among them: it reaches the fetch stage of
/// the build context only and changes neither the image's runtime layers nor its input hash.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildInputs {
    pub dockerfile_template: String,
    /// The runtime's launcher, as the Dockerfile's {{LAUNCHER}}.
    pub launcher: String,
    /// (name in the build context, content)
    pub files: Vec<(String, Vec<u8>)>,
    pub recipe_entry: serde_json::Value,
}

/// The build context's name for the fetch-stage CA bundle.
pub const CA_FILE: &str = "fetch-ca.pem";

impl ImagePlan {
    pub fn null_server(want: &ServerWant) -> Result<ImagePlan, ResolveError> {
        let suite = &want.suite;
        let http = match want.transport {
            Transport::Stdio => None,
            Transport::StreamableHttp => {
                if want.reply == Some(ReplyMode::Sse) {
                    return Err(WantField::Transport.error(
                        "the built-in null server answers streamable-http with JSON replies only".into(),
                    ));
                }
                Some(HttpTarget {
                    transport: Transport::StreamableHttp,
                    port: HTTP_PORT,
                    path: "/mcp".into(),
                    reply: Some(ReplyMode::Json),
                    session: Some(want.session.unwrap_or(SessionMode::Stateless)),
                    api_route: Some("/api/{tool}".into()),
                    api_style: Some(ApiStyle::Plain),
                })
            }
            Transport::Sse => {
                return Err(WantField::Transport.error(
                    "the built-in null server speaks stdio and streamable-http, not legacy sse".into(),
                ))
            }
        };
        let mut env = vec![("BENCHLAB_SUITE".to_string(), suite.clone())];
        if let Some(h) = &http {
            env.extend(h.server_env());
        }
        Ok(ImagePlan {
            family: NULL_FAMILY.into(),
            version: env!("CARGO_PKG_VERSION").into(),
            api: "builtin".into(),
            runtime_name: "native".into(),
            runtime_kind: "native".into(),
            base: BaseSource::bootstrap("bookworm", &[]),
            fetch_base: None,
            launch: ServerLaunch { argv: vec![LAB_BINARY.into(), "null-server".into()], env, cwd: None },
            http,
            source: None,
            build: None,
        })
    }

    /// The Dockerfile with its bases and launcher filled in.
    pub fn dockerfile(&self, base_ref: &str, fetch_base_ref: &str) -> Option<String> {
        self.build.as_ref().map(|b| {
            b.dockerfile_template
                .replace("{{BASE}}", base_ref)
                .replace("{{FETCH_BASE}}", fetch_base_ref)
                .replace("{{LAUNCHER}}", &b.launcher)
        })
    }

    /// sha256 over the recipe entry, the Dockerfile template, every context file and the bases'
    /// image ids: equal hashes mean an equal image, so an existing one is reused without a build.
    pub fn input_hash(&self, base_image_id: &str, fetch_base_image_id: &str) -> String {
        let files: BTreeMap<&str, String> = self
            .build
            .iter()
            .flat_map(|b| b.files.iter())
            .map(|(n, c)| (n.as_str(), crate::hash::sha256_hex(c)))
            .collect();
        crate::hash::canonical_hash(&serde_json::json!({
            "family": self.family,
            "version": self.version,
            "runtime": self.runtime_name,
            "recipe": self.build.as_ref().map(|b| &b.recipe_entry),
            "dockerfile": self.build.as_ref().map(|b| crate::hash::sha256_hex(b.dockerfile_template.as_bytes())),
            "launcher": self.build.as_ref().map(|b| &b.launcher),
            "files": files,
            "base_image_id": base_image_id,
            "fetch_base_image_id": fetch_base_image_id,
        }))
    }

    /// The engine reference of the built image for an input hash.
    pub fn reference(&self, input_hash: &str) -> String {
        format!("benchlab/{}:{}-{}-{}", self.family, self.version, self.runtime_name, &input_hash[..12])
    }

    /// The build context as a tar: Dockerfile, context files and the fetch-stage CA bundle.
    pub fn context_tar(
        &self,
        base_ref: &str,
        fetch_base_ref: &str,
        ca_bundle: &[u8],
    ) -> std::io::Result<Vec<u8>> {
        let build = self
            .build
            .as_ref()
            .ok_or_else(|| std::io::Error::other("the null server has nothing to build"))?;
        let mut tar = tar::Builder::new(Vec::new());
        let mut add = |name: &str, data: &[u8]| -> std::io::Result<()> {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_mtime(0);
            h.set_cksum();
            tar.append_data(&mut h, name, data)
        };
        add("Dockerfile", self.dockerfile(base_ref, fetch_base_ref).unwrap_or_default().as_bytes())?;
        for (name, data) in &build.files {
            add(name, data)?;
        }
        add(CA_FILE, ca_bundle)?;
        tar.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkout with one recipe: two API generations, two runtimes, two suites.
    fn fixture() -> (tempfile::TempDir, RecipeBook) {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let w = |p: &str, c: &str| {
            std::fs::create_dir_all(r.join(p).parent().unwrap()).unwrap();
            std::fs::write(r.join(p), c).unwrap();
        };
        w(
            "images/common/Dockerfile.cpython",
            "FROM {{FETCH_BASE}} AS fetch\nFROM {{BASE}}\nRUN {{LAUNCHER}} x\n",
        );
        w("images/common/image-manifest.py", "print('{}')\n");
        w(
            "images/sdk/recipe.toml",
            r#"
family = "sdk"
description = "a test SDK"
default_runtime = "py-a"
[runtime.py-a]
kind = "cpython"
dockerfile = "../common/Dockerfile.cpython"
suite = "bookworm"
base_packages = ["python3"]
launcher = ["/opt/venv/bin/python"]
[runtime.py-b]
kind = "cpython"
dockerfile = "../common/Dockerfile.cpython"
suite = "trixie"
base_packages = ["python3"]
fetch_packages = ["git"]
launcher = ["/opt/venv/bin/python"]
[api.new]
argv = ["/srv/{suite}.py"]
env = { QUIET = "1" }
[api.new.sources]
weekly = "servers/new/weekly.py"
pulse = "servers/new/pulse.py"
[api.old]
argv = ["/srv/{suite}.py"]
[api.old.sources]
weekly = "servers/old/weekly.py"
[[version]]
version = "2.0"
api = "new"
runtimes = ["py-a", "py-b"]
"#,
        );
        w("images/sdk/servers/new/weekly.py", "# a comment\nimport sdk\n\nsdk.run()\n");
        w("images/sdk/servers/new/pulse.py", "import sdk\n");
        w("images/sdk/servers/old/weekly.py", "import old\n");
        w("lockfiles/sdk/2.0-py-a/requirements.txt", "sdk==2.0 --hash=sha256:00\n");
        w("lockfiles/sdk/2.0-py-b/requirements.txt", "sdk==2.0 --hash=sha256:11\n");
        let book = RecipeBook::load(r).unwrap();
        (d, book)
    }

    fn want(suite: &str) -> ServerWant {
        ServerWant {
            family: "sdk".into(),
            version: Some("2.0".into()),
            suite: suite.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_stale_lock_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("requirements.in"), "mcp==1.1.2\nUvicorn[standard]==0.54.0  # asgi\n").unwrap();
        std::fs::write(
            d.join("requirements.txt"),
            "# generated\nmcp==1.1.2 \\\n    --hash=sha256:aa\nuvicorn==0.54.0 \\\n    --hash=sha256:bb\n",
        )
        .unwrap();
        assert_eq!(check_lock(d), Ok(()));
        std::fs::write(d.join("requirements.in"), "mcp==1.1.3\n").unwrap();
        assert!(check_lock(d).unwrap_err().contains("mcp==1.1.3"));
        let js = tempfile::tempdir().unwrap();
        let j = js.path();
        std::fs::write(j.join("package.json"), r#"{"dependencies":{"a":"1.0.0"}}"#).unwrap();
        std::fs::write(j.join("package-lock.json"), r#"{"packages":{"":{"dependencies":{"a":"1.0.0"}}}}"#)
            .unwrap();
        assert_eq!(check_lock(j), Ok(()));
        std::fs::write(j.join("package.json"), r#"{"dependencies":{"a":"2.0.0"}}"#).unwrap();
        assert!(check_lock(j).unwrap_err().contains("2.0.0"));
    }

    #[test]
    fn resolves_launch_sources_and_loc() {
        let (_d, book) = fixture();
        let plan = book.resolve(&want("weekly")).unwrap();
        assert_eq!(plan.api, "new");
        assert_eq!(plan.launch.argv, ["/opt/venv/bin/python", "/srv/weekly.py"]);
        assert!(plan.launch.env.contains(&("QUIET".into(), "1".into())));
        assert!(plan.launch.env.contains(&("BENCHLAB_SUITE".into(), "weekly".into())));
        let src = plan.source.as_ref().unwrap();
        assert_eq!((src.file.as_str(), src.loc), ("images/sdk/servers/new/weekly.py", 2));
        let names: Vec<&str> = plan.build.as_ref().unwrap().files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lock/requirements.txt", "srv/pulse.py", "srv/weekly.py", "image-manifest.py"]);
        assert_eq!(plan.fetch_base, None);
        // The other suite shares the image.
        assert!(plan.same_image(&book.resolve(&want("pulse")).unwrap()));
        // A runtime with download-only packages gets its own fetch base.
        let b = book.resolve(&ServerWant { runtime: Some("py-b".into()), ..want("weekly") }).unwrap();
        assert_eq!(b.fetch_base, Some(BaseSource::bootstrap("trixie", &["python3", "git"])));
        assert_eq!(
            b.dockerfile("BASE", "FETCH").unwrap(),
            "FROM FETCH AS fetch\nFROM BASE\nRUN /opt/venv/bin/python x\n"
        );
    }

    #[test]
    fn resolve_errors_name_the_field_at_fault() {
        let (_d, book) = fixture();
        let field = |w: ServerWant| book.resolve(&w).unwrap_err().field;
        assert_eq!(field(ServerWant { family: "nope".into(), ..want("weekly") }), WantField::Family);
        assert_eq!(field(ServerWant { version: Some("9".into()), ..want("weekly") }), WantField::Version);
        assert_eq!(field(ServerWant { runtime: Some("py-z".into()), ..want("weekly") }), WantField::Runtime);
        assert_eq!(field(ServerWant { api: Some("old".into()), ..want("weekly") }), WantField::Api);
    }

    #[test]
    fn refuses_what_the_recipe_cannot_build() {
        let (_d, book) = fixture();
        let e = |w: ServerWant| book.resolve(&w).unwrap_err().to_string();
        assert!(e(ServerWant { version: Some("9".into()), ..want("weekly") })
            .contains("no recipe for version \"9\""));
        assert!(e(ServerWant { family: "nope".into(), ..want("weekly") }).contains("unknown server family"));
        assert!(
            e(ServerWant { runtime: Some("py-z".into()), ..want("weekly") }).contains("no runtime \"py-z\"")
        );
        assert!(e(ServerWant { api: Some("old".into()), ..want("pulse") }).contains("refused unless"));
        let ok = book
            .resolve(&ServerWant { api: Some("old".into()), expect_failure: true, ..want("weekly") })
            .unwrap();
        assert_eq!(ok.api, "old");
        assert!(e(ServerWant { api: Some("old".into()), expect_failure: true, ..want("pulse") })
            .contains("has no pulse suite"));
        assert_eq!(
            book.resolve(&ServerWant { family: NULL_FAMILY.into(), ..want("weekly") }).unwrap().build,
            None
        );
    }

    #[test]
    fn input_hash_tracks_inputs_but_not_the_ca_bundle() {
        let (_d, book) = fixture();
        let plan = book.resolve(&want("weekly")).unwrap();
        let h = plan.input_hash("sha256:base1", "sha256:base1");
        assert_eq!(h, plan.input_hash("sha256:base1", "sha256:base1"));
        assert_ne!(h, plan.input_hash("sha256:base2", "sha256:base1"));
        assert_ne!(h, plan.input_hash("sha256:base1", "sha256:base2"));
        let mut changed = plan.clone();
        changed.build.as_mut().unwrap().files[0].1.push(b'\n');
        assert_ne!(h, changed.input_hash("sha256:base1", "sha256:base1"));
        let a = plan.context_tar("b", "b", b"ca-one").unwrap();
        let b = plan.context_tar("b", "b", b"ca-two").unwrap();
        assert_ne!(a, b, "the CA bundle is in the context, not in the hash");
        assert!(plan.reference(&h).starts_with("benchlab/sdk:2.0-py-a-"));
    }

    #[test]
    fn counts_lines_of_code_without_comments() {
        assert_eq!(count_loc("# c\n\nimport x\n  # d\nx()\n", "py"), 2);
        assert_eq!(count_loc("// c\nimport x;\n/* a\n b */\nconst y = 1; /* z */\n", "mjs"), 2);
    }
}
