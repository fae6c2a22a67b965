//! Scenario files (`scenarios/*.toml`): the schema, parsing with file:line:column errors, unknown
//! keys refused, validation, and expansion into cells (servers × workloads). It reads the file and
//! nothing else: recipes are resolved by the orchestrator, before anything is built.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::mcp::suite::Suite;
use crate::mcp::transport::{ReplyMode, SessionMode, Transport};
use crate::spec::Timeouts;
use crate::spec::{Expect, Lifecycle, PlacementMode, PlacementSpec, Workload};
use crate::text::{glob_match, line_col, parse_duration_ms};

/// One server under test.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// The scenario's name for the server, unique within it.
    pub id: Spanned<String>,
    /// A recipe family in `images/` (`python-mcp`, ...), or `benchlab-null` for the floor.
    pub family: Spanned<String>,
    /// The SDK version; required for recipe families.
    pub version: Option<Spanned<String>>,
    /// The runtime (`cpython-bookworm`, ...); the recipe's default when absent.
    pub runtime: Option<Spanned<String>>,
    /// Overrides the scenario's suite for this server.
    pub suite: Option<String>,
    /// Runs the server source of another API generation than the version's own; only with
    /// `expect = "failure"` (to show that it fails, as a published claim may say).
    pub api: Option<Spanned<String>>,
    /// Extra environment for the server process (recorded in the cell).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `success` (the default) or `failure`: a cell expected to fail is a result when it fails.
    #[serde(default)]
    pub expect: Expect,
    /// `stdio` (the default), `streamable-http` or `sse`: the transport the cell reaches the
    /// server through. `concurrency`, `open_loop` and `http_api` workloads need an HTTP one.
    pub transport: Option<Spanned<Transport>>,
    /// Streamable HTTP only: `json` or `sse` replies (the recipe's first when absent).
    pub reply: Option<Spanned<ReplyMode>>,
    /// Streamable HTTP only: `stateful` or `stateless` (the recipe's first when absent).
    pub session: Option<Spanned<SessionMode>>,
    /// The runtime version the source being reproduced used (e.g. "3.12.3"); when the cell runs
    /// another, the record's environment lists the deviation.
    pub source_runtime: Option<String>,
    /// `split` or `shared`: this server's placement mode instead of the scenario's (a matrix's
    /// `placements` axis sets it).
    pub placement: Option<Spanned<PlacementMode>>,
    /// `docker` or `native`: where this server's cells run, whatever `run --engine` says (a
    /// matrix's `engines` axis sets it; comparing both shows what the container costs).
    pub engine: Option<Spanned<EngineKind>>,
}

/// Where a cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// Containers through the Docker engine.
    Docker,
    /// Host processes in lab cgroups (`engine::native`).
    Native,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Native => "native",
        }
    }
}

/// A version matrix: one `[[server]]` per combination of its axes, expanded and validated
/// before anything is built. `versions` is a list or a release range (`"1.1.2..1.x"`) expanded
/// against `lockfiles/<family>/releases.toml`; `id` is a template over `{version}`, `{runtime}`,
/// `{transport}`, `{placement}`, `{engine}` and `{api}` that must name every axis with more than
/// one value.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMatrix {
    id: Spanned<String>,
    family: Spanned<String>,
    versions: Spanned<toml::Value>,
    /// With a range: `all` (default) or `latest-patch` (of each minor).
    pick: Option<Spanned<String>>,
    runtimes: Option<Spanned<Vec<String>>>,
    transports: Option<Spanned<Vec<Transport>>>,
    placements: Option<Spanned<Vec<PlacementMode>>>,
    engines: Option<Spanned<Vec<EngineKind>>>,
    api: Option<Spanned<String>>,
    suite: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    reply: Option<Spanned<ReplyMode>>,
    session: Option<Spanned<SessionMode>>,
}

/// Where release ranges are looked up: `<dir>/<family>/releases.toml`.
pub const DEFAULT_LOCKFILES: &str = "lockfiles";

impl RawMatrix {
    /// The server entries of the matrix, in axis order (version outermost).
    fn expand(&self, lockfiles: &Path) -> Result<Vec<ServerEntry>, SpanErr> {
        let family = self.family.get_ref();
        let vspan = self.versions.span();
        let pick = match &self.pick {
            Some(p) => crate::recipe::releases::Pick::parse(p.get_ref()).map_err(|m| (p.span(), m))?,
            None => crate::recipe::releases::Pick::All,
        };
        let versions: Vec<String> = match self.versions.get_ref() {
            toml::Value::String(text) => {
                let range = crate::recipe::releases::Range::parse(text).map_err(|m| (vspan.clone(), m))?;
                if !text.contains("..") {
                    vec![text.clone()]
                } else {
                    let dir = lockfiles.join(family);
                    let listed = crate::recipe::releases::Releases::load(&dir)
                        .map_err(|m| (vspan.clone(), m))?
                        .ok_or_else(|| {
                            (
                                vspan.clone(),
                                format!(
                                    "{} does not exist: list and lock the releases first with `benchlab lock {family} {text}`",
                                    dir.join(crate::recipe::releases::RELEASES_FILE).display()
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
        let span_of = |o: &Option<Spanned<Vec<_>>>| o.as_ref().map(|x| x.span());
        let runtimes: Vec<Option<String>> = match &self.runtimes {
            Some(r) if r.get_ref().is_empty() => return Err((r.span(), "`runtimes` is empty".into())),
            Some(r) => r.get_ref().iter().cloned().map(Some).collect(),
            None => vec![None],
        };
        let transports: Vec<Option<Transport>> = match &self.transports {
            Some(t) if t.get_ref().is_empty() => return Err((t.span(), "`transports` is empty".into())),
            Some(t) => t.get_ref().iter().copied().map(Some).collect(),
            None => vec![None],
        };
        let placements: Vec<Option<PlacementMode>> = match &self.placements {
            Some(p) if p.get_ref().is_empty() => return Err((p.span(), "`placements` is empty".into())),
            Some(p) => p.get_ref().iter().copied().map(Some).collect(),
            None => vec![None],
        };
        let engines: Vec<Option<EngineKind>> = match &self.engines {
            Some(e) if e.get_ref().is_empty() => return Err((e.span(), "`engines` is empty".into())),
            Some(e) => e.get_ref().iter().copied().map(Some).collect(),
            None => vec![None],
        };
        let template = self.id.get_ref();
        let axes = [
            ("{version}", versions.len(), Some(vspan.clone())),
            ("{runtime}", runtimes.len(), span_of(&self.runtimes)),
            ("{transport}", transports.len(), self.transports.as_ref().map(|x| x.span())),
            ("{placement}", placements.len(), self.placements.as_ref().map(|x| x.span())),
            ("{engine}", engines.len(), self.engines.as_ref().map(|x| x.span())),
        ];
        for (key, n, _) in &axes {
            if *n > 1 && !template.contains(key) {
                return Err((
                    self.id.span(),
                    format!("the matrix has {n} values of {key} but its id template {template:?} does not name {key}: every server id must differ"),
                ));
            }
        }
        let sp = |v: String, span: &std::ops::Range<usize>| Spanned::new(span.clone(), v);
        let mut out = Vec::new();
        for version in &versions {
            for runtime in &runtimes {
                for transport in &transports {
                    for (placement, engine) in
                        placements.iter().flat_map(|p| engines.iter().map(move |e| (p, e)))
                    {
                        let id = template
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
                        out.push(ServerEntry {
                            id: sp(id, &self.id.span()),
                            family: self.family.clone(),
                            version: Some(sp(version.clone(), &vspan)),
                            runtime: runtime
                                .clone()
                                .map(|r| sp(r, &self.runtimes.as_ref().expect("listed").span())),
                            suite: self.suite.clone(),
                            api: self.api.clone(),
                            env: self.env.clone(),
                            expect: Expect::Success,
                            transport: transport
                                .map(|t| Spanned::new(self.transports.as_ref().expect("listed").span(), t)),
                            reply: self.reply.clone(),
                            session: self.session.clone(),
                            source_runtime: None,
                            placement: placement
                                .map(|p| Spanned::new(self.placements.as_ref().expect("listed").span(), p)),
                            engine: engine
                                .map(|e| Spanned::new(self.engines.as_ref().expect("listed").span(), e)),
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "default_suite")]
    suite: Spanned<String>,
    #[serde(default)]
    placement: PlacementSpec,
    #[serde(default)]
    timeouts: TimeoutsSpec,
    #[serde(rename = "server", default)]
    servers: Vec<ServerEntry>,
    /// Version matrices, expanded into more servers.
    #[serde(rename = "matrix", default)]
    matrices: Vec<RawMatrix>,
    #[serde(rename = "workload", default)]
    workloads: Vec<Spanned<RawWorkload>>,
    /// Every cell runs this many times (records share the cell id, numbered by `repeat`).
    repeats: Option<Spanned<u32>>,
    /// The published claims the scenario checks (`benchlab verify`); parsed by `claims`.
    #[serde(rename = "claim", default)]
    #[allow(dead_code)]
    claims: Vec<toml::Value>,
}

/// A workload as written: flat, so that an unknown or misplaced key is reported at the key itself
/// (serde's tagged enums can only point at the whole table).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    kind: Spanned<String>,
    /// Names the workload in cell ids (`<server>/<name>`); needed when a kind appears twice.
    name: Option<Spanned<String>>,
    spawns: Option<Spanned<u32>>,
    tool: Option<Spanned<String>>,
    /// A number of calls (serial_calls) or a duration such as `"2s"` (load workloads).
    warmup: Option<Spanned<toml::Value>>,
    calls: Option<Spanned<u32>>,
    /// Load workloads: a number of virtual users, or a list of them (one cell each).
    workers: Option<Spanned<toml::Value>>,
    duration: Option<Spanned<String>>,
    rate: Option<Spanned<u64>>,
    connections: Option<Spanned<u32>>,
    lifecycle: Option<Spanned<Lifecycle>>,
    /// The ids of the servers this workload runs on (all of them when absent).
    servers: Option<Spanned<Vec<String>>>,
}

type SpanErr = (std::ops::Range<usize>, String);

impl RawWorkload {
    /// The typed workloads (one per worker count of a sweep, with the suffix for its cell id),
    /// or the span and message of what is wrong.
    fn typed(&self) -> Result<Vec<(Workload, String)>, SpanErr> {
        let kind = self.kind.get_ref().as_str();
        let stray = |name: &str, span: Option<std::ops::Range<usize>>| match span {
            Some(sp) => Err((sp, format!("`{name}` does not belong to a {kind} workload"))),
            None => Ok(()),
        };
        let need = |name: &str, v: &Option<Spanned<u32>>| {
            v.as_ref()
                .map(|x| *x.get_ref())
                .ok_or_else(|| (self.kind.span(), format!("a {kind} workload needs `{name}`")))
        };
        let tool = || {
            self.tool
                .as_ref()
                .map(|t| t.get_ref().clone())
                .ok_or_else(|| (self.kind.span(), format!("a {kind} workload needs `tool`")))
        };
        let sp = |o: &Option<Spanned<u32>>| o.as_ref().map(|t| t.span());
        let duration = |key: &str, v: Option<&Spanned<toml::Value>>, default: u64| -> Result<u64, SpanErr> {
            match v {
                None => Ok(default),
                Some(v) => match v.get_ref() {
                    toml::Value::String(t) => parse_duration_ms(t).map_err(|m| (v.span(), m)),
                    _ => {
                        Err((v.span(), format!("`{key}` of a {kind} workload is a duration such as \"2s\"")))
                    }
                },
            }
        };
        let load_time = || -> Result<(u64, u64), SpanErr> {
            let warmup = duration("warmup", self.warmup.as_ref(), 1_000)?;
            let d = self.duration.as_ref().ok_or_else(|| {
                (self.kind.span(), format!("a {kind} workload needs `duration` (e.g. \"10s\")"))
            })?;
            let dur = parse_duration_ms(d.get_ref()).map_err(|m| (d.span(), m))?;
            if dur == 0 {
                return Err((d.span(), "`duration` must be more than 0".into()));
            }
            Ok((warmup, dur))
        };
        let workers = || -> Result<Vec<u32>, SpanErr> {
            let w = self.workers.as_ref().ok_or_else(|| {
                (self.kind.span(), format!("a {kind} workload needs `workers` (a number or a list)"))
            })?;
            let bad = || {
                (
                    w.span(),
                    "`workers` is a number of virtual users from 1 to 10000, or a list of them".to_string(),
                )
            };
            let one = |v: &toml::Value| v.as_integer().filter(|n| (1..=10_000).contains(n)).map(|n| n as u32);
            let list = match w.get_ref() {
                toml::Value::Array(a) if !a.is_empty() => {
                    a.iter().map(|v| one(v).ok_or_else(bad)).collect::<Result<Vec<_>, _>>()?
                }
                v => vec![one(v).ok_or_else(bad)?],
            };
            let mut seen = list.clone();
            seen.sort();
            seen.dedup();
            if seen.len() != list.len() {
                return Err((w.span(), "`workers` lists a count twice".into()));
            }
            Ok(list)
        };
        let load_only = |this: &Self| -> Result<(), SpanErr> {
            stray("spawns", sp(&this.spawns))?;
            stray("calls", sp(&this.calls))
        };
        match kind {
            "cold_start" => {
                stray("tool", self.tool.as_ref().map(|t| t.span()))?;
                stray("warmup", self.warmup.as_ref().map(|t| t.span()))?;
                stray("calls", sp(&self.calls))?;
                self.no_load_keys()?;
                Ok(vec![(Workload::ColdStart { spawns: need("spawns", &self.spawns)? }, String::new())])
            }
            "serial_calls" => {
                stray("spawns", sp(&self.spawns))?;
                self.no_load_keys()?;
                let warmup = match &self.warmup {
                    None => 0,
                    Some(w) => w
                        .get_ref()
                        .as_integer()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| (w.span(), "`warmup` of a serial_calls workload is a number of calls".to_string()))?,
                };
                Ok(vec![(
                    Workload::SerialCalls { tool: tool()?, warmup, calls: need("calls", &self.calls)? },
                    String::new(),
                )])
            }
            "concurrency" | "http_api" => {
                load_only(self)?;
                stray("rate", self.rate.as_ref().map(|t| t.span()))?;
                stray("connections", sp(&self.connections))?;
                if kind == "http_api" {
                    stray("lifecycle", self.lifecycle.as_ref().map(|t| t.span()))?;
                }
                let (warmup_ms, duration_ms) = load_time()?;
                let tool = tool()?;
                let lifecycle = self.lifecycle.as_ref().map(|l| *l.get_ref()).unwrap_or_default();
                Ok(workers()?
                    .into_iter()
                    .map(|workers| {
                        let w = if kind == "http_api" {
                            Workload::HttpApi { tool: tool.clone(), workers, warmup_ms, duration_ms }
                        } else {
                            Workload::Concurrency { tool: tool.clone(), workers, warmup_ms, duration_ms, lifecycle }
                        };
                        (w, format!("-w{workers}"))
                    })
                    .collect())
            }
            "open_loop" => {
                load_only(self)?;
                stray("workers", self.workers.as_ref().map(|t| t.span()))?;
                stray("lifecycle", self.lifecycle.as_ref().map(|t| t.span()))?;
                let (warmup_ms, duration_ms) = load_time()?;
                let rate = self
                    .rate
                    .as_ref()
                    .ok_or_else(|| (self.kind.span(), "an open_loop workload needs `rate` (calls per second)".to_string()))?;
                if !(1..=10_000_000).contains(rate.get_ref()) {
                    return Err((rate.span(), "`rate` is calls per second, from 1 to 10,000,000".into()));
                }
                let connections = self.connections.as_ref().map_or(64, |c| *c.get_ref());
                if !(1..=10_000).contains(&connections) {
                    return Err((sp(&self.connections).unwrap_or(self.kind.span()), "`connections` is from 1 to 10000".into()));
                }
                Ok(vec![(
                    Workload::OpenLoop { tool: tool()?, rate: *rate.get_ref(), connections, warmup_ms, duration_ms },
                    String::new(),
                )])
            }
            other => Err((
                self.kind.span(),
                format!("unknown workload kind {other:?} (known: cold_start, serial_calls, concurrency, open_loop, http_api)"),
            )),
        }
    }

    /// Refuses the keys of load workloads on a stdio workload.
    fn no_load_keys(&self) -> Result<(), SpanErr> {
        let kind = self.kind.get_ref();
        let spans = [
            ("workers", self.workers.as_ref().map(|t| t.span())),
            ("duration", self.duration.as_ref().map(|t| t.span())),
            ("rate", self.rate.as_ref().map(|t| t.span())),
            ("connections", self.connections.as_ref().map(|t| t.span())),
            ("lifecycle", self.lifecycle.as_ref().map(|t| t.span())),
        ];
        for (name, span) in spans {
            if let Some(sp) = span {
                return Err((sp, format!("`{name}` does not belong to a {kind} workload")));
            }
        }
        Ok(())
    }
}

fn default_suite() -> Spanned<String> {
    Spanned::new(0..0, "weekly".to_string())
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TimeoutsSpec {
    startup_ms: Option<u64>,
    call_ms: Option<u64>,
    stop_grace_ms: Option<u64>,
    term_ms: Option<u64>,
}

/// A parsed, validated scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub path: PathBuf,
    pub source: String,
    pub name: String,
    pub description: String,
    pub suite: String,
    pub placement: PlacementSpec,
    pub timeouts: Timeouts,
    pub servers: Vec<ServerEntry>,
    pub workloads: Vec<Workload>,
    /// The name of each workload in cell ids (its kind unless the scenario names it).
    pub workload_names: Vec<String>,
    /// The server ids each workload is limited to (None: every server).
    pub workload_servers: Vec<Option<Vec<String>>>,
    /// How many times every cell runs.
    pub repeats: u32,
    /// Cell-id patterns (`*` wildcards) a run is limited to; empty: every cell.
    pub only: Vec<String>,
}

/// A scenario problem, located in its file.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    At { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}: {message}")]
    Whole { path: PathBuf, message: String },
}

/// One cell of the plan before recipes are resolved.
#[derive(Debug, Clone)]
pub struct CellSpec {
    pub server: ServerEntry,
    pub suite: String,
    pub workload: Workload,
    /// The workload's name in the cell id.
    pub name: String,
    /// Which run of the cell this is (0-based) and how many there are.
    pub repeat: u32,
    pub repeats: u32,
}

impl CellSpec {
    pub fn id(&self) -> String {
        format!("{}/{}", self.server.id.get_ref(), self.name)
    }
}

impl Scenario {
    /// Loads a scenario; release ranges of its matrices come from `lockfiles/` under the working
    /// folder.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        Scenario::load_in(path, Path::new(DEFAULT_LOCKFILES))
    }

    /// Loads a scenario whose matrices' release ranges are listed under `lockfiles`.
    pub fn load_in(path: &Path, lockfiles: &Path) -> Result<Scenario, ScenarioError> {
        let source = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Read { path: path.into(), source })?;
        Scenario::parse_in(path, source, lockfiles)
    }

    pub fn parse(path: &Path, source: String) -> Result<Scenario, ScenarioError> {
        Scenario::parse_in(path, source, Path::new(DEFAULT_LOCKFILES))
    }

    pub fn parse_in(path: &Path, source: String, lockfiles: &Path) -> Result<Scenario, ScenarioError> {
        let raw: RawScenario = toml::from_str(&source).map_err(|e| match e.span() {
            Some(span) => {
                let (line, column) = line_col(&source, span.start);
                ScenarioError::At { path: path.into(), line, column, message: e.message().to_string() }
            }
            None => ScenarioError::Whole { path: path.into(), message: e.message().to_string() },
        })?;
        let s = Scenario {
            path: path.into(),
            name: raw.name,
            description: raw.description,
            suite: raw.suite.get_ref().clone(),
            placement: raw.placement,
            timeouts: {
                let d = Timeouts::default();
                Timeouts {
                    startup_ms: raw.timeouts.startup_ms.unwrap_or(d.startup_ms),
                    call_ms: raw.timeouts.call_ms.unwrap_or(d.call_ms),
                    stop_grace_ms: raw.timeouts.stop_grace_ms.unwrap_or(d.stop_grace_ms),
                    term_ms: raw.timeouts.term_ms.unwrap_or(d.term_ms),
                }
            },
            servers: raw.servers,
            workloads: Vec::new(),
            workload_names: Vec::new(),
            workload_servers: Vec::new(),
            repeats: raw.repeats.as_ref().map_or(1, |r| *r.get_ref()),
            only: Vec::new(),
            source,
        };
        let mut s = s;
        let at = |span: std::ops::Range<usize>, message: String, s: &Scenario| {
            let (line, column) = line_col(&s.source, span.start);
            ScenarioError::At { path: path.into(), line, column, message }
        };
        for m in &raw.matrices {
            let servers = m.expand(lockfiles).map_err(|(span, msg)| at(span, msg, &s))?;
            s.servers.extend(servers);
        }
        if Suite::from_name(&s.suite).is_none() {
            let names: Vec<_> = Suite::ALL.iter().map(|x| x.name()).collect();
            return Err(at(
                raw.suite.span(),
                format!("unknown suite {:?} (known: {})", s.suite, names.join(", ")),
                &s,
            ));
        }
        if s.servers.is_empty() {
            return Err(ScenarioError::Whole {
                path: path.into(),
                message: "no [[server]] or [[matrix]] entries: nothing to measure".into(),
            });
        }
        if raw.workloads.is_empty() {
            return Err(ScenarioError::Whole {
                path: path.into(),
                message: "no [[workload]] entries: nothing to run".into(),
            });
        }
        for (i, srv) in s.servers.iter().enumerate() {
            let id = srv.id.get_ref();
            if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                return Err(at(
                    srv.id.span(),
                    format!("server id {id:?} must be non-empty letters, digits, '-', '_' or '.'"),
                    &s,
                ));
            }
            if s.servers[..i].iter().any(|o| o.id.get_ref() == id) {
                return Err(at(srv.id.span(), format!("server id {id:?} is used twice"), &s));
            }
            if let Some(suite) = &srv.suite {
                if Suite::from_name(suite).is_none() {
                    return Err(at(srv.id.span(), format!("server {id:?}: unknown suite {suite:?}"), &s));
                }
            }
        }
        if let Some(r) = &raw.repeats {
            if !(1..=1000).contains(r.get_ref()) {
                return Err(at(r.span(), "`repeats` is from 1 to 1000".into(), &s));
            }
        }
        for raw_w in &raw.workloads {
            let suite = Suite::from_name(&s.suite).expect("checked above");
            let typed = raw_w.get_ref().typed().map_err(|(span, m)| at(span, m, &s))?;
            let only = raw_w.get_ref().servers.as_ref();
            if let Some(list) = only {
                for id in list.get_ref() {
                    if !s.servers.iter().any(|x| x.id.get_ref() == id) {
                        return Err(at(
                            list.span(),
                            format!("`servers` names {id:?}, which is no [[server]] id"),
                            &s,
                        ));
                    }
                }
            }
            for (workload, suffix) in typed {
                let w = Spanned::new(raw_w.span(), workload);
                match w.get_ref() {
                    Workload::ColdStart { spawns } if *spawns == 0 => {
                        return Err(at(w.span(), "cold_start needs spawns >= 1".into(), &s))
                    }
                    Workload::SerialCalls { calls, .. } if *calls == 0 => {
                        return Err(at(w.span(), "serial_calls needs calls >= 1".into(), &s))
                    }
                    _ => {}
                }
                if let Some(tool) = w.get_ref().tool() {
                    for srv in
                        s.servers.iter().filter(|x| only.is_none_or(|l| l.get_ref().contains(x.id.get_ref())))
                    {
                        let suite = srv.suite.as_deref().and_then(Suite::from_name).unwrap_or(suite);
                        if suite.call(tool, 0).is_none() {
                            return Err(at(
                                raw_w.get_ref().tool.as_ref().map_or(w.span(), |t| t.span()),
                                format!(
                                    "{}: suite {} (of server {:?}) has no tool {tool:?} (it has {})",
                                    w.get_ref().kind(),
                                    suite.name(),
                                    srv.id.get_ref(),
                                    suite.tools().join(", ")
                                ),
                                &s,
                            ));
                        }
                    }
                }
                for srv in
                    s.servers.iter().filter(|x| only.is_none_or(|l| l.get_ref().contains(x.id.get_ref())))
                {
                    let http = srv.transport.as_ref().is_some_and(|t| t.get_ref().is_http());
                    if w.get_ref().is_load() != http {
                        let msg = if http {
                            format!(
                                "a {} workload runs over stdio, but server {:?} is {}: limit the workload with `servers = [...]`",
                                w.get_ref().kind(),
                                srv.id.get_ref(),
                                srv.transport.as_ref().map_or("stdio", |t| t.get_ref().as_str())
                            )
                        } else {
                            format!(
                                "a {} workload needs an HTTP server, but server {:?} is stdio: set its `transport` or limit the workload with `servers = [...]`",
                                w.get_ref().kind(),
                                srv.id.get_ref()
                            )
                        };
                        return Err(at(w.span(), msg, &s));
                    }
                }
                if s.workloads.contains(w.get_ref()) {
                    return Err(at(w.span(), "this workload is listed twice".into(), &s));
                }
                let name = match &raw_w.get_ref().name {
                    Some(n) => {
                        let v = n.get_ref();
                        if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                        {
                            return Err(at(
                                n.span(),
                                format!("workload name {v:?} must be letters, digits, '-', '_' or '.'"),
                                &s,
                            ));
                        }
                        format!("{v}{suffix}")
                    }
                    None => format!("{}{suffix}", w.get_ref().kind()),
                };
                if s.workload_names.contains(&name) {
                    return Err(at(
                        w.span(),
                        format!("a second workload named {name:?}: give each workload of the same kind its own `name`"),
                        &s,
                    ));
                }
                s.workloads.push(w.get_ref().clone());
                s.workload_names.push(name);
                s.workload_servers.push(only.map(|l| l.get_ref().clone()));
            }
        }
        Ok(s)
    }

    /// Replaces every load workload's warm-up and duration (a reduced run of a long scenario);
    /// the cells record the times they ran with.
    pub fn override_load_times(&mut self, warmup_ms: Option<u64>, duration_ms: Option<u64>) {
        for w in &mut self.workloads {
            w.override_times(warmup_ms, duration_ms);
        }
    }

    /// Locates a span of this scenario's file, for errors found after parsing (unknown recipe,
    /// impossible version).
    pub fn error_at(&self, span: std::ops::Range<usize>, message: impl Into<String>) -> ScenarioError {
        let (line, column) = line_col(&self.source, span.start);
        ScenarioError::At { path: self.path.clone(), line, column, message: message.into() }
    }

    /// Expands the scenario into cells, server by server, workload by workload.
    pub fn cells(&self) -> Vec<CellSpec> {
        let mut out = Vec::new();
        for server in &self.servers {
            for ((workload, name), only) in
                self.workloads.iter().zip(&self.workload_names).zip(&self.workload_servers)
            {
                if only.as_ref().is_some_and(|l| !l.contains(server.id.get_ref())) {
                    continue;
                }
                let id = format!("{}/{name}", server.id.get_ref());
                if !self.only.is_empty() && !self.only.iter().any(|p| glob_match(p, &id)) {
                    continue;
                }
                for repeat in 0..self.repeats {
                    out.push(CellSpec {
                        server: server.clone(),
                        suite: server.suite.clone().unwrap_or_else(|| self.suite.clone()),
                        workload: workload.clone(),
                        name: name.clone(),
                        repeat,
                        repeats: self.repeats,
                    });
                }
            }
        }
        out
    }

    pub fn sha256(&self) -> String {
        crate::hash::sha256_hex(self.source.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Memory;
    use crate::text::parse_memory;

    const GOOD: &str = r#"
name = "t"
suite = "weekly"
[placement]
mode = "split"
memory = "512MiB"

[[server]]
id = "null"
family = "benchlab-null"

[[server]]
id = "mcp"
family = "python-mcp"
version = "2.3.0"

[[workload]]
kind = "cold_start"
spawns = 3

[[workload]]
kind = "serial_calls"
tool = "add_numbers"
warmup = 10
calls = 100
"#;

    fn parse(s: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("scenarios/t.toml"), s.to_string())
    }

    #[test]
    fn expands_servers_times_workloads() {
        let s = parse(GOOD).unwrap();
        assert_eq!(s.placement.memory, Memory(512 << 20));
        let ids: Vec<_> = s.cells().iter().map(CellSpec::id).collect();
        assert_eq!(ids, ["null/cold_start", "null/serial_calls", "mcp/cold_start", "mcp/serial_calls"]);
    }

    #[test]
    fn unknown_keys_are_refused_with_line_and_column() {
        let bad = GOOD.replace("spawns = 3", "spawns = 3\nspwans = 4");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:20:1: "), "{e}");
        assert!(e.contains("spwans"), "{e}");
        let bad = GOOD.replace("spawns = 3", "spawns = 3\ncalls = 4");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:20:9: ") && e.contains("does not belong"), "{e}");
        let bad = GOOD.replace("mode = \"split\"", "mode = \"split\"\ncpus = 2");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:6:1: ") && e.contains("cpus"), "{e}");
    }

    #[test]
    fn wrong_types_are_refused_with_line_and_column() {
        let bad = GOOD.replace("spawns = 3", "spawns = \"three\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:19:10: "), "{e}");
        let bad = GOOD.replace("memory = \"512MiB\"", "memory = \"512MB\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:6:10: ") && e.contains("unknown unit"), "{e}");
    }

    #[test]
    fn semantic_errors_point_at_the_entry() {
        let bad = GOOD.replace("tool = \"add_numbers\"", "tool = \"fibonacci\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.contains("scenarios/t.toml:") && e.contains("no tool \"fibonacci\""), "{e}");
        let bad = GOOD.replace("id = \"mcp\"", "id = \"null\"");
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("scenarios/t.toml:13:6: ") && e.contains("used twice"), "{e}");
    }

    #[test]
    fn globs_and_durations() {
        assert!(glob_match("gradio-*/mcp-echo-*", "gradio-cl1/mcp-echo-w10"));
        assert!(!glob_match("gradio-*/mcp-echo-*", "fastmcp/mcp-echo-w10"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("a*b*c", "abc") && !glob_match("a*b*c", "acb"));
        assert!(glob_match("null/cold_start", "null/cold_start") && !glob_match("null", "null/x"));
        assert_eq!(parse_duration_ms("1.5s"), Ok(1500));
        assert_eq!(parse_duration_ms("250ms"), Ok(250));
        assert_eq!(parse_duration_ms("2m"), Ok(120_000));
        assert!(parse_duration_ms("10").is_err() && parse_duration_ms("5h").is_err());
    }

    #[test]
    fn http_workloads_expand_worker_lists_and_check_transports() {
        let http = GOOD.replace("family = \"benchlab-null\"", "family = \"benchlab-null\"\ntransport = \"streamable-http\"")
            + "\n[[workload]]\nkind = \"concurrency\"\ntool = \"echo\"\nworkers = [1, 10]\nduration = \"2s\"\nservers = [\"null\"]\n";
        let e = parse(&http).unwrap_err().to_string();
        assert!(e.contains("runs over stdio") && e.contains("\"null\""), "{e}");
        let fixed = http
            .replace(
                "kind = \"cold_start\"\nspawns = 3",
                "kind = \"cold_start\"\nspawns = 3\nservers = [\"mcp\"]",
            )
            .replace("warmup = 10\ncalls = 100", "warmup = 10\ncalls = 100\nservers = [\"mcp\"]");
        let s = parse(&fixed).unwrap();
        let ids: Vec<_> = s.cells().iter().map(CellSpec::id).collect();
        assert_eq!(
            ids,
            ["null/concurrency-w1", "null/concurrency-w10", "mcp/cold_start", "mcp/serial_calls"]
        );
        let bad = fixed.replace("workers = [1, 10]", "workers = [1, 1]");
        assert!(parse(&bad).unwrap_err().to_string().contains("twice"));
        let bad = fixed.replace("duration = \"2s\"", "duration = \"2 parsecs\"");
        assert!(parse(&bad).unwrap_err().to_string().contains("unknown unit"));
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1GiB"), Ok(1 << 30));
        assert_eq!(parse_memory("4096"), Ok(4096));
        assert!(parse_memory("1GB").is_err());
    }

    #[test]
    fn line_col_counts_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }

    const MATRIX: &str = r#"
name = "m"
[[matrix]]
id = "mcp-{version}-{runtime}"
family = "python-mcp"
versions = "1.1.2..1.x"
pick = "latest-patch"
runtimes = ["cpython-bookworm", "cpython-trixie"]
api = "lowlevel"

[[workload]]
kind = "cold_start"
spawns = 2
"#;

    fn with_releases(versions: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("python-mcp")).unwrap();
        let list: Vec<String> = versions.iter().map(|v| format!("{v:?}")).collect();
        std::fs::write(
            d.path().join("python-mcp/releases.toml"),
            format!("package = \"mcp\"\nlisted = \"2026-11-30\"\nversions = [{}]\n", list.join(", ")),
        )
        .unwrap();
        d
    }

    #[test]
    fn a_matrix_expands_ranges_and_axes_into_servers() {
        let d = with_releases(&["1.0.0", "1.1.2", "1.1.3", "1.2.0", "1.2.1", "1.10.0", "2.0.0"]);
        let s = Scenario::parse_in(Path::new("m.toml"), MATRIX.into(), d.path()).unwrap();
        let ids: Vec<&str> = s.servers.iter().map(|x| x.id.get_ref().as_str()).collect();
        assert_eq!(
            ids,
            [
                "mcp-1.1.2-cpython-bookworm",
                "mcp-1.1.2-cpython-trixie",
                "mcp-1.1.3-cpython-bookworm",
                "mcp-1.1.3-cpython-trixie",
                "mcp-1.2.1-cpython-bookworm",
                "mcp-1.2.1-cpython-trixie",
                "mcp-1.10.0-cpython-bookworm",
                "mcp-1.10.0-cpython-trixie",
            ]
        );
        assert!(s.servers.iter().all(|x| x.api.as_ref().map(|a| a.get_ref().as_str()) == Some("lowlevel")));
        assert_eq!(s.cells().len(), 8);
    }

    #[test]
    fn matrix_errors_point_at_the_field() {
        // No release list yet: the error names the lock command, at the `versions` line.
        let empty = tempfile::tempdir().unwrap();
        let e = Scenario::parse_in(Path::new("m.toml"), MATRIX.into(), empty.path()).unwrap_err().to_string();
        assert!(e.starts_with("m.toml:6:"), "{e}");
        assert!(e.contains("benchlab lock python-mcp 1.1.2..1.x"), "{e}");
        // Two runtimes but an id template without {runtime}: ids would collide.
        let d = with_releases(&["1.1.2"]);
        let src = MATRIX.replace("mcp-{version}-{runtime}", "mcp-{version}");
        let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
        assert!(e.starts_with("m.toml:4:") && e.contains("{runtime}"), "{e}");
        // A bad pick and a bad range.
        let src = MATRIX.replace("latest-patch", "newest");
        let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
        assert!(e.starts_with("m.toml:7:") && e.contains("unknown pick"), "{e}");
        let src = MATRIX.replace("1.1.2..1.x", "1.1.2..one");
        let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
        assert!(e.starts_with("m.toml:6:") && e.contains("release range"), "{e}");
        // A range that holds no release.
        let src = MATRIX.replace("1.1.2..1.x", "3.0.0..3.x");
        let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
        assert!(e.contains("no release of mcp"), "{e}");
        // Unknown key in a matrix.
        let src = MATRIX.replace("api = \"lowlevel\"", "apis = \"lowlevel\"");
        let e = Scenario::parse_in(Path::new("m.toml"), src, d.path()).unwrap_err().to_string();
        assert!(e.starts_with("m.toml:9:") && e.contains("apis"), "{e}");
    }

    #[test]
    fn matrix_lists_engines_and_placements() {
        let src = r#"
name = "e"
[[matrix]]
id = "mcp-{engine}-{placement}"
family = "python-mcp"
versions = ["2.3.0"]
engines = ["docker", "native"]
placements = ["split", "shared"]
[[workload]]
kind = "cold_start"
spawns = 1
"#;
        let s = Scenario::parse_in(Path::new("e.toml"), src.into(), Path::new("/nonexistent")).unwrap();
        let ids: Vec<&str> = s.servers.iter().map(|x| x.id.get_ref().as_str()).collect();
        assert_eq!(ids, ["mcp-docker-split", "mcp-native-split", "mcp-docker-shared", "mcp-native-shared"]);
        assert_eq!(s.servers[1].engine.as_ref().map(|e| *e.get_ref()), Some(EngineKind::Native));
        assert_eq!(s.servers[2].placement.as_ref().map(|p| *p.get_ref()), Some(PlacementMode::Shared));
    }
}
