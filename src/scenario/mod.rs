//! Scenario files (`scenarios/*.toml`): parsing with file:line:column errors, the parsed and
//! validated `Scenario`, and its expansion into cells (servers × workloads). The schema is in
//! `raw`, matrices in `matrix`, workloads in `workload`, cross-entry checks in `validate`. It
//! reads the file and nothing else: recipes are resolved by the orchestrator, before anything is
//! built.

pub mod compose;
mod matrix;
mod program_service;
mod raw;
mod services;
mod shape;
mod sources;
mod suites;
mod validate;
mod workload;

use std::path::{Path, PathBuf};

use crate::spec::{PlacementSpec, Timeouts, Workload};
use crate::text::{glob_match, line_col};
use raw::RawScenario;

pub use matrix::DEFAULT_LOCKFILES;
pub use raw::{Bytecode, EngineKind, ServerEntry, SourceStatement, StatedHardware};
pub use services::DEFAULT_SEED;
pub use sources::{FetchFailure, SourceRef, SERVICE_KEY};

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
    /// How many times every cell runs (3 by default for sweeps and reproductions).
    pub repeats: u32,
    /// How the run orders its cells (`order`; `--order` overrides).
    pub order: crate::spec::Order,
    /// The ids of the A/A control servers (a sweep's first and last release unless its matrix
    /// names them): measured again at the start, middle and end of a run.
    pub controls: Vec<String>,
    /// Cell-id patterns (`*` wildcards) a run is limited to; empty: every cell.
    pub only: Vec<String>,
    /// What the reproduced source states (`[source]`; empty for other scenarios).
    pub stated: SourceStatement,
    /// Backing services every cell gets beside its server (`[[service]]`).
    pub services: Vec<crate::spec::ServiceSpec>,
    /// Each mock service's expectations, its file's text as read at load, by service name (the
    /// service's spec keeps the hash).
    pub expectations: std::collections::BTreeMap<String, std::sync::Arc<str>>,
    /// The files its `[[suite]]` tables read, relative to the scenario's folder as written (the
    /// suite files and the files they name), each with its text: a run keeps them beside its
    /// copy of the scenario, so the copy reads again.
    pub suite_files: Vec<(String, String)>,
    /// The program services built from their own source, each as `service:<name>`.
    pub service_sources: Vec<sources::SourceRef>,
    /// The scenario's own data suites (`[[suite]]`), by name.
    pub suites: std::collections::BTreeMap<String, std::sync::Arc<crate::mcp::data::SuiteData>>,
    /// Each server source, fetched (`fetch_sources`), by server id; empty until then.
    pub fetched: std::collections::BTreeMap<String, crate::source::Fetched>,
}

/// The scenario file as written, or its first problem at its line and column.
fn raw_scenario(path: &Path, source: &str) -> Result<RawScenario, ScenarioError> {
    toml::from_str(source).map_err(|e| match e.span() {
        Some(span) => ScenarioError::at(path, source, span.start, e.message()),
        None => ScenarioError::Whole { path: path.into(), message: e.message().to_string() },
    })
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

impl ScenarioError {
    /// A problem at byte `offset` of the scenario file's `source`.
    fn at(path: &Path, source: &str, offset: usize, message: impl Into<String>) -> ScenarioError {
        let (line, column) = line_col(source, offset);
        ScenarioError::At { path: path.into(), line, column, message: message.into() }
    }
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
        let raw = raw_scenario(path, &source)?;
        let RawScenario {
            name,
            description,
            suite,
            placement,
            timeouts,
            servers,
            matrices,
            workloads,
            services,
            repeats,
            order,
            controls,
            source: stated_raw,
            claims,
        } = raw;
        let order = parse_order(path, &source, order.as_ref())?;
        // A start-up or call limit of 0 would fail every cell before it began.
        for (key, v) in [("startup_ms", &timeouts.startup_ms), ("call_ms", &timeouts.call_ms)] {
            if let Some(span) = validate::zero_limit(v) {
                let message = format!("[timeouts] {}", validate::limit_rule(key));
                return Err(ScenarioError::at(path, &source, span.start, message));
            }
        }
        let stated = stated_raw;
        sources::check_statement(path, &source, &stated)?;
        // Runs are the unit of a sweep's or a reproduction's figures: three unless stated.
        let reproduction = stated != SourceStatement::default() || !claims.is_empty();
        let default_repeats = if reproduction || matrices.iter().any(|m| m.is_sweep()) { 3 } else { 1 };
        let mut s = Scenario {
            path: path.into(),
            name,
            description,
            suite: String::new(),
            placement,
            timeouts: {
                let d = Timeouts::default();
                Timeouts {
                    startup_ms: timeouts.startup_ms.map_or(d.startup_ms, |v| *v.get_ref()),
                    call_ms: timeouts.call_ms.map_or(d.call_ms, |v| *v.get_ref()),
                    stop_grace_ms: timeouts.stop_grace_ms.unwrap_or(d.stop_grace_ms),
                    term_ms: timeouts.term_ms.unwrap_or(d.term_ms),
                }
            },
            servers,
            workloads: Vec::new(),
            workload_names: Vec::new(),
            workload_servers: Vec::new(),
            repeats: repeats.as_ref().map_or(default_repeats, |r| *r.get_ref()),
            order,
            controls: Vec::new(),
            only: Vec::new(),
            stated,
            services: Vec::new(),
            expectations: Default::default(),
            fetched: Default::default(),
            suites: Default::default(),
            suite_files: Vec::new(),
            service_sources: Vec::new(),
            source,
        };
        s.suite = s.read_suites(&suite)?;
        for m in &matrices {
            let expanded = m.expand(lockfiles).map_err(|(span, msg)| s.error_at(span, msg))?;
            s.servers.extend(expanded.servers);
            s.controls.extend(expanded.controls);
        }
        s.check_suite(suite.span())?;
        if let Some(c) = &controls {
            for id in c.get_ref() {
                if !s.servers.iter().any(|e| e.id.get_ref() == id) {
                    return Err(s.error_at(
                        c.span(),
                        format!("control {id:?} is not the id of a server of this scenario"),
                    ));
                }
                if !s.controls.contains(id) {
                    s.controls.push(id.clone());
                }
            }
        }
        if s.servers.is_empty() {
            return Err(ScenarioError::Whole {
                path: path.into(),
                message: "no [[server]] or [[matrix]] entries: nothing to measure".into(),
            });
        }
        if workloads.is_empty() {
            return Err(ScenarioError::Whole {
                path: path.into(),
                message: "no [[workload]] entries: nothing to run".into(),
            });
        }
        s.check_servers()?;
        s.server_sources()?;
        if let Some(r) = &repeats {
            if !(1..=1000).contains(r.get_ref()) {
                return Err(s.error_at(r.span(), "`repeats` is from 1 to 1000"));
            }
        }
        for raw_w in &workloads {
            s.add_workload(raw_w)?;
        }
        s.add_services(&services, suite.span())?;
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
        ScenarioError::at(&self.path, &self.source, span.start, message)
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

/// The `order` key: "random" (the default) or "as-written".
fn parse_order(
    path: &Path,
    source: &str,
    order: Option<&toml::Spanned<String>>,
) -> Result<crate::spec::Order, ScenarioError> {
    match order.map(|o| (o.get_ref().as_str(), o.span().start)) {
        None | Some(("random", _)) => Ok(crate::spec::Order::Random),
        Some(("as-written", _)) => Ok(crate::spec::Order::AsWritten),
        Some((other, at)) => Err(ScenarioError::at(
            path,
            source,
            at,
            format!("`order` is \"random\" or \"as-written\", not {other:?}"),
        )),
    }
}

#[cfg(test)]
mod tests;
