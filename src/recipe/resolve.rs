//! Resolving what a scenario asks of a server (`ServerWant`) against the recipes: the runtime,
//! API generation and transport it runs, its lock and sources, into an `ImagePlan`; errors name
//! the field at fault so the scenario layer can place them. It reads recipe and lock files only.

use std::collections::BTreeMap;
use std::path::Path;

use super::base::BaseSource;
use super::file::{ApiSpec, RuntimeSpec, VersionSpec};
use super::image::{BuildInputs, ImagePlan};
use super::kinds::RuntimeKind;
use super::lock::check_lock;
use super::{base_of, Recipe, RecipeBook, NULL_FAMILY};
use crate::mcp::transport::{HttpTarget, ReplyMode, SessionMode, Transport};
use crate::spec::{ServerLaunch, ServiceKind, SourceInfo};

/// A recipe or lock file's bytes; the error names the file.
fn read_input(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

impl RecipeBook {
    /// Resolves a server of a scenario to what must be built and run. `api` overrides the
    /// version's own API generation (only to show that it fails: the scenario says so). Errors
    /// are sentences that the scenario layer places at the entry's line and column.
    pub fn resolve(&self, want: &ServerWant) -> Result<ImagePlan, ResolveError> {
        let family = want.family.as_str();
        if family == NULL_FAMILY {
            return ImagePlan::null_server(want);
        }
        let (recipe, v) = self.recipe_version(family, want.version.as_deref())?;
        let (runtime_name, rt) = runtime_for(recipe, &v, want)?;
        let (api_name, api) = api_for(recipe, &v, want)?;
        if let Some(p) = &want.program {
            return self.resolve_program(recipe, &v, (runtime_name, rt), (api_name, api), p, want);
        }
        if want.no_bytecode {
            return Err(WantField::Bytecode.error(
                "`bytecode = \"none\"` is for a source's own program (set `program` too): the suite servers' images are shared".into(),
            ));
        }
        let (sources, argv_template, http) = serve_plan(family, api_name, api, want)?;
        sources.get(&want.suite).ok_or_else(|| {
            WantField::Api.error(format!(
                "the {api_name} {} server of {family} has no {} suite (it has: {})",
                want.transport,
                want.suite,
                sources.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        // Every suite's sources (stdio and HTTP) go in, so one image serves them all; the cell's
        // own is the one launched and counted.
        let source = source_info(recipe, family, &sources[&want.suite])?;
        let launch = launch_of(rt, api, argv_template, http.as_ref(), want);
        let served = Served { files: source_files(recipe, api)?, source, launch, http };
        self.image_plan(recipe, &v, (runtime_name, rt), api_name, want, served)
    }

    /// The image plan around what a cell serves: the runtime's base and Dockerfile (with the
    /// no-bytecode step when asked), the version's lock, the served files and the manifest
    /// script, and the recipe's part of the input hash.
    /// The backing services a server's recipe declares it needs (`[api.<name>] services`), in
    /// the order the lab starts them, with what declared them in words. The floor server's `shop`
    /// suite needs Redis and the API, as the SDKs' shop servers do. None when nothing is declared
    /// (or the want does not resolve: `resolve` says why).
    pub fn declared_services(&self, want: &ServerWant) -> Option<(String, Vec<ServiceKind>)> {
        if want.family == NULL_FAMILY {
            return (want.suite == crate::mcp::shop::SUITE).then(|| {
                (
                    format!("the floor server's {} suite", want.suite),
                    vec![ServiceKind::Redis, ServiceKind::Api],
                )
            });
        }
        let (recipe, v) = self.recipe_version(&want.family, want.version.as_deref()).ok()?;
        let (api_name, api) = api_for(recipe, &v, want).ok()?;
        let mut kinds = api.services.clone();
        kinds.sort();
        kinds.dedup();
        (!kinds.is_empty()).then(|| (format!("the recipe of {}, [api.{api_name}]", want.family), kinds))
    }

    fn image_plan(
        &self,
        recipe: &Recipe,
        v: &VersionSpec,
        (runtime_name, rt): (&str, &RuntimeSpec),
        api_name: &str,
        want: &ServerWant,
        served: Served,
    ) -> Result<ImagePlan, ResolveError> {
        let (family, version) = (want.family.as_str(), v.version.as_str());
        let mut dockerfile = String::from_utf8(read_input(&recipe.dir.join(&rt.dockerfile))?)
            .map_err(|_| format!("{} is not UTF-8", rt.dockerfile))?;
        if want.no_bytecode {
            dockerfile.push_str(&no_bytecode_step());
        }
        let mut files = self.lock_files(family, version, runtime_name, want.lock.as_deref())?;
        files.extend(served.files);
        let manifest_script = match rt.kind {
            RuntimeKind::Cpython => "image-manifest.py",
            RuntimeKind::Pypy => "image-manifest-pypy.py",
            RuntimeKind::Rust => "image-manifest-cargo.sh",
            _ => "image-manifest.mjs",
        };
        files.push((
            manifest_script.to_string(),
            read_input(&self.images_dir.join("common").join(manifest_script))?,
        ));
        Ok(ImagePlan {
            family: family.into(),
            version: version.into(),
            api: api_name.into(),
            runtime_name: runtime_name.into(),
            runtime_kind: rt.kind,
            base: base_of(rt)?,
            fetch_base: fetch_base_of(rt),
            launch: served.launch,
            http: served.http,
            source: Some(served.source),
            fetched: None,
            build: Some(BuildInputs {
                dockerfile_template: dockerfile,
                launcher: rt.launcher.join(" "),
                files,
                executables: Vec::new(),
                links: Vec::new(),
                recipe_entry: recipe_entry(v, rt, api_name, want),
            }),
        })
    }

    /// A cell running a source's own program (stdio only): an image holding that one file (as
    /// `srv/<program>.<ext>`) with the version's lock, launched like the API's suite servers.
    /// With `no_bytecode`, the image keeps no compiled bytecode of the installed packages, so
    /// the program's first start compiles (and caches) it, as a fresh install does.
    fn resolve_program(
        &self,
        recipe: &Recipe,
        v: &VersionSpec,
        (runtime_name, rt): (&str, &RuntimeSpec),
        (api_name, api): (&str, &ApiSpec),
        program: &str,
        want: &ServerWant,
    ) -> Result<ImagePlan, ResolveError> {
        let family = want.family.as_str();
        let spec = api.programs.get(program).ok_or_else(|| {
            WantField::Program.error(format!(
                "the {api_name} API of {family} has no program {program:?} (it has: {})",
                if api.programs.is_empty() {
                    "none".to_string()
                } else {
                    api.programs.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            ))
        })?;
        if want.transport.is_http() {
            return Err(WantField::Program.error(format!(
                "program {program:?} serves stdio only; drop `transport` from the server entry"
            )));
        }
        if spec.suite != want.suite {
            return Err(WantField::Program.error(format!(
                "program {program:?} serves suite {:?}; set `suite = {:?}` on the server entry",
                spec.suite, spec.suite
            )));
        }
        if want.no_bytecode && rt.kind != RuntimeKind::Cpython {
            return Err(WantField::Bytecode.error(format!(
                "`bytecode = \"none\"` is for CPython runtimes; {runtime_name} is {}",
                rt.kind.as_str()
            )));
        }
        let ext = Path::new(&spec.file).extension().and_then(|e| e.to_str()).unwrap_or("txt");
        let files = vec![(format!("srv/{program}.{ext}"), read_input(&recipe.dir.join(&spec.file))?)];
        let argv: Vec<String> = api.argv.iter().map(|a| a.replace("{suite}", program)).collect();
        let served = Served {
            files,
            source: source_info(recipe, family, &spec.file)?,
            launch: launch_of(rt, api, &argv, None, want),
            http: None,
        };
        self.image_plan(recipe, v, (runtime_name, rt), api_name, want, served)
    }

    /// The files of a version's lock folder for a runtime (`lock/<name>`), once it is known to
    /// still pin its input.
    fn lock_files(
        &self,
        family: &str,
        version: &str,
        runtime_name: &str,
        label: Option<&str>,
    ) -> Result<Vec<(String, Vec<u8>)>, ResolveError> {
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        let lock_dir = self.lockfiles_dir.join(family).join(lock_folder(version, runtime_name, label));
        let flag = label.map(|l| format!(" --lock {l}")).unwrap_or_default();
        if label.is_some() && !lock_dir.is_dir() {
            return Err(WantField::Lock.error(format!(
                "no labelled lock folder {}: write its requirements.in or package.json (and an `exclude-newer` file with the day it is locked as of), then run `benchlab lock {family} {version} --runtime {runtime_name}{flag}`",
                lock_dir.display()
            )));
        }
        let mut lock_names: Vec<String> = std::fs::read_dir(&lock_dir)
            .map_err(|e| format!("lock folder {}: {e}; lock it with `benchlab lock {family} {version} --runtime {runtime_name}{flag}`", lock_dir.display()))?
            .flatten()
            .filter(|e| e.path().is_file())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        lock_names.sort();
        check_lock(&lock_dir).map_err(|m| {
            format!(
                "{}: the lock no longer matches its input ({m}); regenerate it with `benchlab lock {family} {version} --runtime {runtime_name}{flag}`",
                lock_dir.display()
            )
        })?;
        for name in lock_names {
            files.push((format!("lock/{name}"), read_input(&lock_dir.join(&name))?));
        }
        Ok(files)
    }
}

/// What a cell serves from an image: the source files it holds, the cell's own source, how it is
/// launched and reached.
struct Served {
    files: Vec<(String, Vec<u8>)>,
    source: SourceInfo,
    launch: ServerLaunch,
    http: Option<HttpTarget>,
}

/// The lock folder of a version on a runtime (`<version>-<runtime>`), or of one of its labelled
/// locks (`<version>-<runtime>+<label>`, e.g. `+era`: resolved as of a given day).
pub fn lock_folder(version: &str, runtime: &str, label: Option<&str>) -> String {
    match label {
        Some(l) => format!("{version}-{runtime}+{l}"),
        None => format!("{version}-{runtime}"),
    }
}

/// The Dockerfile step of an image without compiled bytecode for its installed packages (after
/// every other step, so nothing compiles them again). The sandbox user owns the packages and the
/// cell's root stays writable, so the program's first start writes the bytecode it compiles.
fn no_bytecode_step() -> String {
    let (uid, gid) = (crate::spec::SANDBOX_UID, crate::spec::SANDBOX_GID);
    format!(
        "
# benchlab: no compiled bytecode for the installed packages (`bytecode = \"none\"`): the first
# import of each module compiles it and writes it beside its source, as after an install that
# does not compile (uv's default). The interpreter's own standard library keeps Debian's.
RUN find /opt/venv -name __pycache__ -type d -prune -exec rm -rf {{}} + \\
 && chown -R {uid}:{gid} /opt/venv
"
    )
}

/// The recipe's part of an image's inputs. The labelled lock, the program and the bytecode
/// variant appear only when a cell asks for them, so the images of every other cell keep their
/// input hashes.
fn recipe_entry(v: &VersionSpec, rt: &RuntimeSpec, api_name: &str, want: &ServerWant) -> serde_json::Value {
    let mut entry = serde_json::json!({"version": v, "runtime": rt, "api": api_name});
    if let Some(l) = &want.lock {
        entry["lock"] = serde_json::json!(l);
    }
    if let Some(p) = &want.program {
        entry["program"] = serde_json::json!(p);
    }
    if want.no_bytecode {
        entry["bytecode"] = serde_json::json!("none");
    }
    entry
}

/// The runtime a server runs on (the recipe's default unless it names one), if the version is
/// locked for it.
fn runtime_for<'r>(
    recipe: &'r Recipe,
    v: &VersionSpec,
    want: &ServerWant,
) -> Result<(&'r str, &'r RuntimeSpec), ResolveError> {
    let family = want.family.as_str();
    let version = v.version.as_str();
    let runtime_name = want.runtime.as_deref().unwrap_or(&recipe.default_runtime);
    let (runtime_name, rt) = recipe.runtimes.get_key_value(runtime_name).ok_or_else(|| {
        WantField::Runtime.error(format!(
            "{family} has no runtime {runtime_name:?} (it has: {})",
            recipe.runtimes.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    if !v.runtimes.iter().any(|r| r == runtime_name) {
        return Err(WantField::Runtime.error(format!(
            "{family} {version} is not locked for runtime {runtime_name} (it is for: {}); lock it with `benchlab lock {family} {version} --runtime {runtime_name}`",
            v.runtimes.join(", ")
        )));
    }
    Ok((runtime_name, rt))
}

/// The API generation a server runs (the version's own unless it names another, which only a
/// server expected to fail may).
fn api_for<'r>(
    recipe: &'r Recipe,
    v: &VersionSpec,
    want: &ServerWant,
) -> Result<(&'r str, &'r ApiSpec), ResolveError> {
    let family = want.family.as_str();
    let version = v.version.as_str();
    let api_name = want.api.as_deref().unwrap_or(&v.api);
    let (api_name, api) = recipe.apis.get_key_value(api_name).ok_or_else(|| {
        WantField::Api.error(format!(
            "{family} has no API generation {api_name:?} (it has: {})",
            recipe.apis.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    if *api_name != v.api && !v.also.iter().any(|a| a == api_name) && !want.expect_failure {
        return Err(WantField::Api.error(format!(
            "{family} {version} uses the {} API; running it with the {api_name} API is refused unless the server entry says `expect = \"failure\"`",
            v.api
        )));
    }
    Ok((api_name, api))
}

/// The download stage's own base, when the runtime needs packages there that its image must not
/// hold.
pub(super) fn fetch_base_of(rt: &RuntimeSpec) -> Option<BaseSource> {
    match (rt.fetch_suite.as_ref().or(rt.suite.as_ref()), rt.fetch_packages.is_empty()) {
        (Some(suite), false) => {
            let mut all: Vec<&str> = rt.base_packages.iter().map(String::as_str).collect();
            all.extend(rt.fetch_packages.iter().map(String::as_str));
            Some(BaseSource::bootstrap(suite, &all))
        }
        _ => None,
    }
}

/// The cell's own server source: its path in the checkout, hash and lines of code.
fn source_info(recipe: &Recipe, family: &str, rel: &str) -> Result<SourceInfo, String> {
    let ext = Path::new(rel).extension().and_then(|e| e.to_str()).unwrap_or("txt");
    let data = read_input(&recipe.dir.join(rel))?;
    Ok(SourceInfo {
        file: format!("images/{family}/{rel}"),
        sha256: crate::hash::sha256_hex(&data),
        loc: count_loc(&String::from_utf8_lossy(&data), ext),
    })
}

/// Every suite's server sources of an API generation, stdio and HTTP (`srv/<suite>[_http].<ext>`),
/// and the files they share (`srv/<file name>`).
fn source_files(recipe: &Recipe, api: &ApiSpec) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut files = Vec::new();
    for rel in &api.support {
        let name = Path::new(rel).file_name().and_then(|n| n.to_str()).unwrap_or(rel);
        files.push((format!("srv/{name}"), read_input(&recipe.dir.join(rel))?));
    }
    let http_sources = api.http.as_ref().map(|h| &h.sources);
    let all =
        api.sources.iter().map(|e| (e, "")).chain(http_sources.into_iter().flatten().map(|e| (e, "_http")));
    for ((suite, rel), suffix) in all {
        let path = recipe.dir.join(rel);
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("txt").to_string();
        let data = read_input(&path)?;
        files.push((format!("srv/{suite}{suffix}.{ext}"), data));
    }
    Ok(files)
}

/// How the server process starts: the runtime's launcher with the API's argv, the API's and the
/// entry's environment, the suite, and the HTTP target's settings.
fn launch_of(
    rt: &RuntimeSpec,
    api: &ApiSpec,
    argv_template: &[String],
    http: Option<&HttpTarget>,
    want: &ServerWant,
) -> ServerLaunch {
    let mut env: Vec<(String, String)> = api.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    env.extend(want.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.push(("BENCHLAB_SUITE".into(), want.suite.clone()));
    if let Some(h) = http {
        env.extend(h.server_env());
    }
    let mut argv = rt.launcher.clone();
    argv.extend(argv_template.iter().map(|a| a.replace("{suite}", &want.suite)));
    ServerLaunch { argv, env, cwd: Some("/srv".into()) }
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
    if want.workers > 1 && !h.workers {
        return Err(WantField::Workers.error(format!(
            "{family} ({api_name} API) has no multi-worker launch in its recipe ([api.{api_name}.http] workers = true); run it with one worker"
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
        let (reply, session) =
            (want.reply.or(h.replies.first().copied()), want.session.or(h.sessions.first().copied()));
        if let (false, Some(s), Some(allowed)) = (h.serves(reply, session), session, &h.json_sessions) {
            let allowed: Vec<&str> = allowed.iter().map(|m| m.as_str()).collect();
            return Err(T.error(format!(
                "{family} ({api_name} API) answers with JSON replies only in session mode {} (in {} mode it replies with SSE whatever it is asked); set `session = \"{}\"` or `reply = \"sse\"`",
                allowed.join(", "),
                s.as_str(),
                allowed.first().copied().unwrap_or("stateless")
            )));
        }
        (reply, session)
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
        host: None,
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
    /// The source's own program.
    Program,
    /// The labelled lock.
    Lock,
    /// The bytecode variant.
    Bytecode,
    /// The server's worker count.
    Workers,
}

impl WantField {
    pub(super) fn error(self, message: String) -> ResolveError {
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
    /// A source's own program (`[api.<name>.programs.<program>]`) instead of the suite's server.
    pub program: Option<String>,
    /// A labelled lock of the version (`lockfiles/<family>/<version>-<runtime>+<label>/`).
    pub lock: Option<String>,
    /// The image keeps no compiled bytecode of its installed packages (programs on CPython).
    pub no_bytecode: bool,
    /// Server workers (1: the server as it is).
    pub workers: u32,
}

/// Non-blank, non-comment lines of a source file (`#` for Python; `//` and `/* */` for
/// JavaScript, TypeScript and Rust). Rust's doc comments (`///`, `//!`) count, as Python's
/// docstrings do: an SDK reads them (schemars makes argument descriptions of them). Docstrings count: they are part of what the programmer writes.
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
                if t.starts_with("//") && !(ext == "rs" && (t.starts_with("///") || t.starts_with("//!"))) {
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
