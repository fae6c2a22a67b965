//! Planning a run: every cell of a scenario resolved against the recipes and a placement before
//! anything is built, each given its backend (which may adapt or refuse it), and the distinct
//! images the cells need. Pure but for the backends' admission checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::RunError;
use crate::backend::{Admission, Backend, BackendKind};
use crate::placement;
use crate::recipe::{ImagePlan, RecipeBook, ServerWant, SourcePlanError, SourceServer, WantField};
use crate::scenario::{Bytecode, EngineKind, Scenario};
use crate::spec::{CellJob, DriverSpec, Expect, Placement, Sandbox, ServiceJob, ServiceSpec, Timeouts};

/// A cell resolved against recipes and placement.
#[derive(Debug, Clone)]
pub struct PlannedCell {
    pub id: String,
    pub server_id: String,
    pub image: ImagePlan,
    pub suite: String,
    /// The suite's data when it is one of the scenario's own (`[[suite]]`); None for a built-in.
    pub suite_data: Option<std::sync::Arc<crate::mcp::data::SuiteData>>,
    pub workload: crate::spec::Workload,
    pub placement: Placement,
    pub timeouts: Timeouts,
    pub expect: Expect,
    /// How the server and sidecar containers are confined.
    pub sandbox: Sandbox,
    /// The runtime version the reproduced source used, if the scenario says.
    pub source_runtime: Option<String>,
    /// What the server stands in for, when the scenario says it is a stand-in.
    pub stand_in: Option<String>,
    /// What the reproduced source states (the scenario's `[source]`), for the derived deviations.
    pub stated: crate::scenario::SourceStatement,
    /// The scenario's extra environment for the server.
    pub env: BTreeMap<String, String>,
    /// Which repeat of its cell this is, when the scenario repeats cells.
    pub repeat: Option<crate::spec::Repeat>,
    /// The engine the server entry names, if any.
    pub engine: Option<crate::scenario::EngineKind>,
    /// What the server entry asked of the recipes (re-resolved when a native host lacks the
    /// runtime's interpreter).
    pub want: ServerWant,
    /// Departures from the scenario this cell had to make, for the record's environment.
    pub deviations: Vec<String>,
    /// Which of the run's backends runs it (set by [`admit`]).
    pub backend: usize,
    /// Its place in the run's order, and whether it is an A/A control (set when the run is
    /// ordered).
    pub schedule: Option<crate::record::Schedule>,
    /// The backing services started beside its server, each with its image.
    pub services: Vec<(ServiceSpec, ImagePlan)>,
    /// Each mock service's expectations (its file's text), by service name: its job's to carry.
    pub expectations: BTreeMap<String, std::sync::Arc<str>>,
    /// The server's worker processes or threads (1 unless the scenario says).
    pub workers: u32,
}

impl PlannedCell {
    /// What a backend needs to run this cell (the driver's `lab_dir` is the backend's to set).
    pub fn job(&self, run_id: &str, index: usize, benchlab_exe: &Path) -> CellJob {
        let mut server = self.image.launch.clone();
        server.env.extend(self.services.iter().map(|(s, _)| s.server_env()));
        let services_cpus =
            self.placement.services_cpus.clone().unwrap_or_else(|| self.placement.driver_cpus.clone());
        CellJob {
            run_id: run_id.to_string(),
            cell_id: self.id.clone(),
            index,
            driver: DriverSpec {
                lab_dir: PathBuf::new(),
                server,
                http: self.image.http.clone(),
                suite: self.suite.clone(),
                // A suite of the scenario's own travels whole (its calls and checks); a built-in
                // one by its name.
                suite_data: self.suite_data.as_deref().cloned(),
                workload: self.workload.clone(),
                timeouts: self.timeouts,
                ungated: None,
                services: self.services.iter().map(|(s, _)| s.clone()).collect(),
                // The backend sets them from the placement it runs the cell on.
                driver_cpus: Vec::new(),
            },
            placement: self.placement.clone(),
            sandbox: self.sandbox.clone(),
            labels: Default::default(),
            benchlab_exe: benchlab_exe.to_path_buf(),
            require_quiet_s: None,
            // The image is the plan's reference until the scheduler names the prepared one.
            services: self
                .services
                .iter()
                .map(|(spec, image)| ServiceJob {
                    spec: spec.clone(),
                    image: image.base.reference(),
                    cpus: services_cpus.clone(),
                    memory_limit_bytes: spec
                        .program
                        .as_ref()
                        .and_then(|p| p.memory_bytes)
                        .unwrap_or(self.placement.memory_limit_bytes),
                    expectations: self.expectations.get(&spec.name).map(|t| t.to_string()),
                })
                .collect(),
        }
    }

    /// The backend kind the scenario's server names, if it names one.
    pub fn wanted_backend(&self) -> Option<BackendKind> {
        self.engine.map(|e| match e {
            EngineKind::Docker => BackendKind::Containers,
            EngineKind::Native => BackendKind::Native,
        })
    }
}

/// Picks each cell's backend (the one its server names, else the first there is) and lets it
/// admit the cell before anything is built: it may swap the cell's image for one it can run (a
/// deviation the record keeps) or refuse the cell, saying why.
pub async fn admit<B: Backend>(
    backends: &[B],
    recipes: &RecipeBook,
    cells: &mut [PlannedCell],
) -> Result<(), RunError> {
    for c in cells.iter_mut() {
        let index = match c.wanted_backend() {
            None if !backends.is_empty() => 0,
            None => {
                return Err(RunError::Input {
                    what: format!("cell {}", c.id),
                    message: "no backend to run it on".into(),
                })
            }
            Some(kind) => backends.iter().position(|b| b.runs(kind)).ok_or_else(|| RunError::Input {
                what: format!("cell {}", c.id),
                message: format!(
                    "it runs on the {} engine, which is not available here: {}",
                    kind.as_str(),
                    kind.missing_hint()
                ),
            })?,
        };
        c.backend = index;
        let a = Admission {
            cell_id: &c.id,
            want: &c.want,
            recipes,
            placement: &c.placement,
            time_limit: c.workload.time_limit(&c.timeouts),
            services: &c.services.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>(),
        };
        backends[index].admit(a, &mut c.image, &mut c.deviations).await?;
    }
    Ok(())
}

/// The distinct images a plan's cells need, per backend, in first-use order: one rule for `run`,
/// `plan` and `build`.
pub fn distinct_images(cells: &[PlannedCell]) -> Vec<(usize, ImagePlan)> {
    let mut distinct: Vec<(usize, ImagePlan)> = Vec::new();
    for c in cells {
        for image in std::iter::once(&c.image).chain(c.services.iter().map(|(_, i)| i)) {
            if !distinct.iter().any(|(b, d)| *b == c.backend && d.same_image(image)) {
                distinct.push((c.backend, image.clone()));
            }
        }
    }
    distinct
}

/// Resolves every cell: recipe, version, runtime and placement. Errors point into the scenario.
pub fn plan(scenario: &Scenario, recipes: &RecipeBook, cpus: &[u32]) -> Result<Vec<PlannedCell>, RunError> {
    let placement = placement::choose(&scenario.placement, cpus)?;
    let with_services = |p: Placement, services: &[(ServiceSpec, ImagePlan)]| match services.is_empty() {
        true => p,
        false => placement::with_services(p, cpus),
    };
    expectations_fetched(scenario)?;
    let mut out = Vec::new();
    for spec in scenario.cells() {
        let s = &spec.server;
        // A server built from its own source: its Dockerfile on the lab's bases, or, where a
        // `[source.base]` rule says an image cannot be had here, no cell at all (`unbuildable`).
        let from_source = match source_plan(scenario, s)? {
            SourceOutcome::Recipe => None,
            SourceOutcome::Unavailable(_) => continue,
            SourceOutcome::Built(plan, notes) => Some((*plan, notes)),
        };
        // A server of a matrix's `placements` axis has its own mode.
        let placement = match &s.placement {
            Some(mode) if *mode.get_ref() != scenario.placement.mode => placement::choose(
                &crate::spec::PlacementSpec { mode: *mode.get_ref(), ..scenario.placement.clone() },
                cpus,
            )
            .map_err(|e| scenario.error_at(mode.span(), e.to_string()))?,
            _ => placement.clone(),
        };
        let want = ServerWant {
            family: s.family.get_ref().clone(),
            version: s.version.as_ref().map(|v| v.get_ref().clone()),
            runtime: s.runtime.as_ref().map(|v| v.get_ref().clone()),
            api: s.api.as_ref().map(|v| v.get_ref().clone()),
            transport: s.transport.as_ref().map(|t| *t.get_ref()).unwrap_or_default(),
            reply: s.reply.as_ref().map(|t| *t.get_ref()),
            session: s.session.as_ref().map(|t| *t.get_ref()),
            suite: spec.suite.clone(),
            env: s.env.clone(),
            expect_failure: s.expect == Expect::Failure,
            program: s.program.as_ref().map(|p| p.get_ref().clone()),
            lock: s.lock.as_ref().map(|l| l.get_ref().clone()),
            no_bytecode: s.bytecode.as_ref().is_some_and(|b| *b.get_ref() == Bytecode::Absent),
            workers: s.workers.as_ref().map_or(1, |w| *w.get_ref()),
        };
        // Several workers get a CPU each where the host has them, then the services theirs.
        let workers = s.workers.as_ref().map_or(1, |w| *w.get_ref());
        let named = scenario.placement.server_cpus.is_some();
        let (placement, workers_note) = placement::for_workers(placement, workers, cpus, named);
        let (source_notes, resolved) = match from_source {
            Some((plan, notes)) => (notes, Ok(plan)),
            None => (Vec::new(), recipes.resolve(&want)),
        };
        let mut image = resolved.map_err(|e| {
            let span = match e.field {
                WantField::Family => None,
                WantField::Version => s.version.as_ref().map(|v| v.span()),
                WantField::Runtime => s.runtime.as_ref().map(|v| v.span()),
                WantField::Api => s.api.as_ref().map(|v| v.span()),
                WantField::Transport => s
                    .reply
                    .as_ref()
                    .map(|v| v.span())
                    .or(s.session.as_ref().map(|v| v.span()))
                    .or(s.transport.as_ref().map(|v| v.span())),
                WantField::Program => s.program.as_ref().map(|v| v.span()),
                WantField::Lock => s.lock.as_ref().map(|v| v.span()),
                WantField::Bytecode => s.bytecode.as_ref().map(|v| v.span()),
                WantField::Workers => s.workers.as_ref().map(|v| v.span()),
            };
            // A field the entry left to the recipe's default is pointed at through the family.
            scenario.error_at(span.unwrap_or_else(|| s.family.span()), e.message)
        })?;
        let lock_note = image.lock_deviation();
        let services = cell_services(scenario, recipes, &want, s.family.span())?;
        let placement = with_services(placement, &services);
        if workers > 1 {
            image.launch.env.push((crate::spec::ENV_SERVER_WORKERS.into(), workers.to_string()));
        }
        out.push(PlannedCell {
            id: spec.id(),
            server_id: s.id.get_ref().clone(),
            image,
            suite_data: scenario.suites.get(&spec.suite).cloned(),
            suite: spec.suite.clone(),
            workload: spec.workload.clone(),
            placement,
            timeouts: crate::spec::Timeouts {
                startup_ms: s.startup_ms.as_ref().map_or(scenario.timeouts.startup_ms, |ms| *ms.get_ref()),
                ..scenario.timeouts
            },
            expect: s.expect,
            sandbox: sandbox_for(s.source.is_some(), want.no_bytecode),
            source_runtime: s.source_runtime.clone(),
            stand_in: s.stand_in.clone(),
            stated: scenario.stated.clone(),
            env: s.env.clone(),
            repeat: (spec.repeats > 1).then_some(crate::spec::Repeat {
                index: spec.repeat,
                of: spec.repeats,
                // Every cell, repeats included, runs in fresh containers.
                fresh_container: true,
            }),
            engine: s.engine.as_ref().map(|e| *e.get_ref()),
            want,
            deviations: workers_note.into_iter().chain(lock_note).chain(source_notes.clone()).collect(),
            backend: 0,
            schedule: None,
            services,
            expectations: scenario.expectations.clone(),
            workers,
        });
    }
    Ok(out)
}

/// A mock's expectations from the source's repository are read when the sources are fetched:
/// none yet means the command never fetched them.
fn expectations_fetched(scenario: &Scenario) -> Result<(), RunError> {
    match scenario.services.iter().find(|m| m.expectations_from.is_some() && !scenario.expectations.contains_key(&m.name)) {
        Some(m) => Err(RunError::Input {
            what: format!("{}: service {:?}", scenario.path.display(), m.name),
            message: "its expectations are a file of the source's repository, not fetched yet (give --source-mirror where the host reaches no git host)".into(),
        }),
        None => Ok(()),
    }
}

/// How a cell's server and sidecar are confined: hardened; a program without compiled bytecode
/// writes it at its first start, so its root stays writable (recorded in the sandbox manifest);
/// a server built from its source runs as its image's user, as its Dockerfile has it (files under
/// a root-only WORKDIR such as /root stay readable), with no capabilities all the same.
fn sandbox_for(from_source: bool, no_bytecode: bool) -> Sandbox {
    match (from_source, no_bytecode) {
        (true, _) => Sandbox { user: None, lab_user: None, ..Sandbox::hardened() },
        (false, true) => Sandbox { read_only_root: false, ..Sandbox::hardened() },
        (false, false) => Sandbox::hardened(),
    }
}

/// What a server entry is built from.
enum SourceOutcome {
    /// A recipe (it has no `source`).
    Recipe,
    /// Its own source, and the deviations that building it here brings.
    Built(Box<ImagePlan>, Vec<String>),
    /// Its own source, which cannot be built on this host (why).
    Unavailable(String),
}

/// A server entry's own source planned: its fetched tree's Dockerfile with the scenario's
/// `[source.base]` rules and the server's declared transport, port, path and command. Errors
/// point at the key at fault.
fn source_plan(scenario: &Scenario, s: &crate::scenario::ServerEntry) -> Result<SourceOutcome, RunError> {
    let Some(src) = &s.source else { return Ok(SourceOutcome::Recipe) };
    let id = s.id.get_ref();
    let fetched = scenario.fetched.get(id).ok_or_else(|| {
        scenario.error_at(
            src.span(),
            format!("server {id:?}: its source is not fetched yet (`benchlab source fetch`)"),
        )
    })?;
    let server = SourceServer {
        transport: s.transport.as_ref().map(|t| *t.get_ref()).unwrap_or_default(),
        port: s.port.as_ref().map(|p| *p.get_ref()),
        path: s.http_path.as_ref().map_or_else(|| "/mcp".to_string(), |p| p.get_ref().clone()),
        command: s.command.as_ref().map(|c| c.get_ref().clone()),
        env: s.env.clone(),
    };
    match ImagePlan::from_source(fetched, &scenario.stated.base, &server) {
        Ok((plan, notes)) => Ok(SourceOutcome::Built(Box::new(plan), notes)),
        Err(SourcePlanError::Unavailable(why)) => Ok(SourceOutcome::Unavailable(why)),
        Err(SourcePlanError::Input { message, at }) => {
            use crate::recipe::SourceKey;
            let span = match at {
                SourceKey::Port => s.port.as_ref().map_or_else(|| s.id.span(), |p| p.span()),
                SourceKey::Transport => s.transport.as_ref().map_or_else(|| src.span(), |t| t.span()),
                SourceKey::Source => src.span(),
            };
            Err(scenario.error_at(span, format!("server {id:?}: {message}")).into())
        }
    }
}

/// The servers of a scenario built from their own source that cannot be built on this host,
/// with why (their `[source.base]` rule's words): they have no cells, and `plan` and `run` say so.
pub fn unbuildable(scenario: &Scenario) -> Result<Vec<(String, String)>, RunError> {
    let mut out = Vec::new();
    for s in &scenario.servers {
        if let SourceOutcome::Unavailable(why) = source_plan(scenario, s)? {
            out.push((s.id.get_ref().clone(), why));
        }
    }
    Ok(out)
}

/// A cell's backing services: the scenario's `[[service]]` entries, then each one the server's
/// recipe declares it needs that the scenario lacks (on the scenario's seed, named by its kind).
/// A `shop` server left without Redis or the API is refused at its entry.
fn cell_services(
    scenario: &Scenario,
    recipes: &RecipeBook,
    want: &ServerWant,
    at: std::ops::Range<usize>,
) -> Result<Vec<(ServiceSpec, ImagePlan)>, RunError> {
    let mut services = scenario.services.clone();
    let seed = services.first().map_or(crate::scenario::DEFAULT_SEED, |s| s.seed);
    if let Some((declared_by, kinds)) = recipes.declared_services(want) {
        for kind in kinds {
            if services.iter().any(|s| s.kind == kind) {
                continue;
            }
            let name = match services.iter().any(|s| s.name == kind.as_str()) {
                true => format!("{}-needed", kind.as_str()),
                false => kind.as_str().to_string(),
            };
            services.push(ServiceSpec {
                name,
                kind,
                seed,
                fault: None,
                declared_by: Some(declared_by.clone()),
                port: None,
                expectations_sha256: None,
                expectations_from: None,
                program: None,
            });
        }
    }
    if want.suite == crate::mcp::shop::SUITE {
        for need in [crate::spec::ServiceKind::Redis, crate::spec::ServiceKind::Api] {
            if !services.iter().any(|s| s.kind == need) {
                return Err(scenario.error_at(
                    at,
                    format!(
                        "the shop suite reads and writes a Redis and the lab's API service, and this server's recipe does not declare {0:?} ([api.<name>] services): add [[service]] kind = \"{0}\"",
                        need.as_str()
                    ),
                )
                .into());
            }
        }
    }
    services.into_iter().map(|s| service_image(scenario, s)).collect()
}

/// A service's image: its kind's base with its packages, or, for a program service with a
/// `source`, its own Dockerfile built as a server's is (its command, when the scenario gives
/// none, the Dockerfile's). One whose Dockerfile cannot be built here is refused at the service.
fn service_image(scenario: &Scenario, mut s: ServiceSpec) -> Result<(ServiceSpec, ImagePlan), RunError> {
    let Some(source) = s.program.as_ref().and_then(|p| p.source.clone()) else {
        let image = ImagePlan::service(&s);
        return Ok((s, image));
    };
    let key = format!("{}{}", crate::scenario::SERVICE_KEY, s.name);
    let at =
        scenario.service_sources.iter().find(|r| r.server == key).map(|r| r.span.clone()).unwrap_or(0..0);
    let fail = |m: String| -> RunError {
        scenario.error_at(at.clone(), format!("service {:?}: {m}", s.name)).into()
    };
    let fetched = scenario.fetched.get(&key).ok_or_else(|| {
        fail(format!("its source ({}) is not fetched yet (`benchlab source fetch`)", source.path))
    })?;
    let program = s.program.as_mut().expect("a program");
    let server = SourceServer {
        transport: crate::mcp::transport::Transport::Stdio,
        port: None,
        path: String::new(),
        command: (!program.command.is_empty()).then(|| program.command.clone()),
        env: program.env.clone(),
    };
    match ImagePlan::from_source(fetched, &scenario.stated.base, &server) {
        Ok((plan, _notes)) => {
            program.command = plan.launch.argv.clone();
            Ok((s, plan))
        }
        Err(SourcePlanError::Unavailable(why)) => Err(fail(format!("cannot be built on this host: {why}"))),
        Err(SourcePlanError::Input { message, .. }) => Err(fail(message)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::spec::ServiceKind;

    fn scenario(text: &str) -> Scenario {
        Scenario::parse(Path::new("scenarios/s.toml"), text.to_string()).expect("a scenario")
    }

    fn recipes() -> RecipeBook {
        RecipeBook::load(Path::new(env!("CARGO_MANIFEST_DIR"))).expect("the checkout's recipes")
    }

    /// Each cell's services as (name, kind, seed, declared by).
    fn services(c: &PlannedCell) -> Vec<(String, ServiceKind, u64, Option<String>)> {
        c.services.iter().map(|(s, _)| (s.name.clone(), s.kind, s.seed, s.declared_by.clone())).collect()
    }

    const SHOP: &str = "name = \"s\"\nsuite = \"shop\"\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\ntransport = \"streamable-http\"\n[[server]]\nid = \"f\"\nfamily = \"fastmcp\"\nversion = \"4.1.3\"\napi = \"fastmcp-shop\"\nlock = \"shop\"\ntransport = \"streamable-http\"\n[[workload]]\nkind = \"concurrency\"\ntool = \"get_cart\"\nworkers = 2\nduration = \"1s\"\n";

    #[test]
    fn a_recipes_declared_services_join_its_cells_on_the_scenarios_seed() {
        // No [[service]] at all: each server's own declaration brings Redis and the API.
        let cells = plan(&scenario(SHOP), &recipes(), &[0, 1]).unwrap();
        let fastmcp = Some("the recipe of fastmcp, [api.fastmcp-shop]".to_string());
        let floor = Some("the floor server's shop suite".to_string());
        assert_eq!(
            services(&cells[0]),
            [
                ("redis".into(), ServiceKind::Redis, 1, floor.clone()),
                ("api".into(), ServiceKind::Api, 1, floor)
            ]
        );
        assert_eq!(
            services(&cells[1]),
            [
                ("redis".into(), ServiceKind::Redis, 1, fastmcp.clone()),
                ("api".into(), ServiceKind::Api, 1, fastmcp.clone())
            ]
        );
        assert!(cells.iter().all(|c| c.placement.services_cpus.is_some()), "services get their CPUs");
        // A scenario's own service stays as written, and what it lacks comes on its seed.
        let own = format!("{SHOP}[[service]]\nkind = \"redis\"\nname = \"kv\"\nseed = 3\n");
        let cells = plan(&scenario(&own), &recipes(), &[0, 1]).unwrap();
        assert_eq!(
            services(&cells[1]),
            [("kv".into(), ServiceKind::Redis, 3, None), ("api".into(), ServiceKind::Api, 3, fastmcp)]
        );
        // A server that declares nothing gets nothing.
        let weekly = "name = \"w\"\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\n[[workload]]\nkind = \"serial_calls\"\ntool = \"add_numbers\"\ncalls = 5\n";
        let cells = plan(&scenario(weekly), &recipes(), &[0, 1]).unwrap();
        assert!(cells[0].services.is_empty() && cells[0].placement.services_cpus.is_none());
    }

    #[test]
    fn a_mocks_job_carries_its_expectations_and_its_server_is_told_its_url() {
        let d = tempfile::tempdir().unwrap();
        let text = r#"[{"httpRequest": {"path": "/api"}, "httpResponse": {"body": "ok"}}]"#;
        std::fs::write(d.path().join("e.json"), text).unwrap();
        let weekly = "name = \"w\"\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\n[[workload]]\nkind = \"serial_calls\"\ntool = \"add_numbers\"\ncalls = 5\n[[service]]\nkind = \"mock\"\nname = \"mock-api\"\nexpectations = \"e.json\"\nport = 1081\n";
        let sc = Scenario::parse(&d.path().join("s.toml"), weekly.to_string()).unwrap();
        let cells = plan(&sc, &recipes(), &[0, 1]).unwrap();
        let job = cells[0].job("run", 0, Path::new("/bin/benchlab"));
        assert_eq!(job.services[0].expectations.as_deref(), Some(text));
        assert_eq!(
            job.services[0].spec.expectations_sha256.as_deref(),
            Some(crate::hash::sha256_hex(text.as_bytes()).as_str())
        );
        // The driver's spec and the record's cell name the hash; the text travels in the job only.
        assert_eq!(job.driver.services, [job.services[0].spec.clone()]);
        assert!(!serde_json::to_string(&job.driver).unwrap().contains("/api"));
        let url =
            job.driver.server.env.iter().find(|(k, _)| k == "BENCHLAB_MOCK_URL").map(|(_, v)| v.as_str());
        assert_eq!(url, Some("http://127.0.0.1:1081"));
    }

    #[test]
    fn a_shop_server_whose_recipe_declares_nothing_is_refused_at_its_entry() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("images")).unwrap();
        let empty = RecipeBook::load(d.path()).unwrap();
        let sc = scenario(SHOP);
        let want = ServerWant { family: "fastmcp".into(), suite: "shop".into(), ..ServerWant::default() };
        let e = cell_services(&sc, &empty, &want, sc.servers[1].family.span()).unwrap_err().to_string();
        assert!(e.contains("s.toml:9:10:") && e.contains("does not declare \"redis\""), "{e}");
    }
}
