//! Running a plan: resolve every cell's recipe and placement before anything is built, make sure
//! each base and image exists (bootstrap/build once, then cache hits), then run the cells one at
//! a time — server container with the shim, sidecar with the driver — and append a record for
//! each. At start it removes what a benchlab killed without cleaning up left in the engine (by
//! owner label); `resume` continues a run folder with only its cells that have no ok record.
//! It never prints: it emits events, and the CLI decides what the user sees.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::engine::{ContainerSpec, Engine, EngineError, Mount, Network, OutputLine, LABEL_RUN};
use crate::placement;
use crate::recipe::base::{self, BaseSource};
use crate::recipe::{
    ImagePlan, RecipeBook, ServerWant, WantField, IMAGE_MANIFEST_PATH, LABEL_INPUT_HASH, LAB_BINARY,
};
use crate::record::manifest::{
    parse_dpkg_list, BaseManifest, BenchlabManifest, EngineManifest, Environment, HostManifest,
    ImageManifest, Package, RuntimeManifest,
};
use crate::record::store::Store;
use crate::record::{Cell, MemoryMetrics, Metrics, Observed, Record, SampleMetric, ServerIdent, Status};
use crate::scenario::{Scenario, ScenarioError};
use crate::spec::Expect;
use crate::spec::Sandbox;
use crate::spec::{DriverEvent, DriverOutcome, DriverSpec, Timeouts};
use crate::spec::{Failure, FailureReason, HistogramMetric, Placement};
use crate::stats;

/// What the orchestrator reports as it works.
#[derive(Debug, Clone)]
pub enum Event {
    Planned {
        run_id: String,
        run_dir: PathBuf,
        cells: usize,
        images: usize,
    },
    BaseBootstrapping {
        reference: String,
        suite: String,
    },
    /// A base (`what = "base"`) or a recipe image (`what = "image"`) is ready: found in the
    /// engine with the same inputs (`cached`), or just made.
    Ready {
        what: &'static str,
        reference: String,
        cached: bool,
        seconds: f64,
    },
    /// `benchlab lock` is running a locker in a container of the target's base.
    Locking {
        what: String,
    },
    ImageBuilding {
        reference: String,
        progress: ImageProgress,
    },
    BuildLog {
        line: String,
    },
    CellStarted {
        index: usize,
        total: usize,
        cell_id: String,
        /// Seconds left at the mean pace of the cells so far.
        eta_s: Option<f64>,
    },
    CellProgress {
        cell_id: String,
        phase: String,
        done: u64,
        total: u64,
    },
    CellFinished {
        record: Box<Record>,
    },
    /// At start: containers and volumes left by a benchlab that died without cleaning up
    /// (`kill -9`, a crash) were found by their owner label and removed.
    /// `--parallel`: how many cells run at once, and why not more.
    Parallel {
        slots: usize,
        why: String,
    },
    LeftoversRemoved {
        /// The run the dead benchlab was writing.
        run_id: String,
        /// Its owner token (`<pid>-<start time>`).
        owner: String,
        removed: usize,
    },
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Where run folders go (`results/`).
    pub results_dir: PathBuf,
    /// A run id; a fresh one when absent.
    pub run_id: Option<String>,
    /// The lab's own (static) executable, mounted into every container.
    pub benchlab_exe: PathBuf,
    /// The CA bundle for the build's fetch stage.
    pub ca_bundle: PathBuf,
    /// Scratch space for bootstrapping bases.
    pub work_dir: PathBuf,
    /// Size of the shared /lab tmpfs.
    pub lab_volume_bytes: u64,
    /// Run cells at once on disjoint CPU slots that share no physical core (`--parallel`).
    pub parallel: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Placement(#[from] placement::PlacementError),
    #[error("bootstrapping base {reference}: {source}")]
    Bootstrap { reference: String, source: base::BootstrapError },
    #[error(transparent)]
    Store(#[from] crate::record::store::StoreError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("interrupted by {signal} during cell {cell}: {done} of {total} cells were recorded in {}; the cell in flight was abandoned and {removed} container(s) and volume(s) of the run removed", run_dir.display())]
    Interrupted {
        signal: &'static str,
        run_dir: PathBuf,
        done: usize,
        total: usize,
        cell: String,
        removed: usize,
    },
}

/// A cell resolved against recipes and placement.
#[derive(Debug, Clone)]
pub struct PlannedCell {
    pub id: String,
    pub server_id: String,
    pub image: ImagePlan,
    pub suite: String,
    pub workload: crate::spec::Workload,
    pub placement: Placement,
    pub timeouts: Timeouts,
    pub expect: Expect,
    /// How the server and sidecar containers are confined.
    pub sandbox: Sandbox,
    /// The runtime version the reproduced source used, if the scenario says.
    pub source_runtime: Option<String>,
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
}

impl PlannedCell {
    /// What the driver needs for this cell, with the shim's socket in `lab_dir`.
    fn driver_spec(&self, lab_dir: PathBuf) -> DriverSpec {
        DriverSpec {
            lab_dir,
            server: self.image.launch.clone(),
            http: self.image.http.clone(),
            suite: self.suite.clone(),
            workload: self.workload.clone(),
            timeouts: self.timeouts,
            ungated: None,
        }
    }
}

/// Resolves every cell: recipe, version, runtime and placement. Errors point into the scenario.
pub fn plan(scenario: &Scenario, recipes: &RecipeBook, cpus: &[u32]) -> Result<Vec<PlannedCell>, RunError> {
    let placement = placement::choose(&scenario.placement, cpus)?;
    let mut out = Vec::new();
    for spec in scenario.cells() {
        let s = &spec.server;
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
        };
        let image = recipes.resolve(&want).map_err(|e| {
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
            };
            // A field the entry left to the recipe's default is pointed at through the family.
            scenario.error_at(span.unwrap_or_else(|| s.family.span()), e.message)
        })?;
        out.push(PlannedCell {
            id: spec.id(),
            server_id: s.id.get_ref().clone(),
            image,
            suite: spec.suite.clone(),
            workload: spec.workload.clone(),
            placement,
            timeouts: scenario.timeouts,
            expect: s.expect,
            sandbox: Sandbox::hardened(),
            source_runtime: s.source_runtime.clone(),
            env: s.env.clone(),
            repeat: (spec.repeats > 1).then_some(crate::spec::Repeat {
                index: spec.repeat,
                of: spec.repeats,
                // Every cell, repeats included, runs in fresh containers.
                fresh_container: true,
            }),
            engine: s.engine.as_ref().map(|e| *e.get_ref()),
            want,
            deviations: Vec::new(),
        });
    }
    Ok(out)
}

/// An image ready to run, with what the manifest needs to know of it.
#[derive(Debug, Clone)]
struct ReadyImage {
    reference: String,
    id: String,
    input_hash: String,
    base: BaseManifest,
    /// Whether this call built it (false: found with the same input hash, or the bare base).
    built: bool,
}

/// A fresh run id: UTC time and scenario name.
pub fn new_run_id(scenario: &str) -> String {
    let t = crate::record::now_rfc3339().replace([':', '-'], "");
    let nonce = std::process::id() % 10_000;
    format!("{t}-{scenario}-{nonce:04}")
}

/// Makes sure a base image exists: bootstrapped here, or pulled by digest.
pub async fn ensure_base<E: Engine>(
    engine: &E,
    source: &BaseSource,
    work_dir: &Path,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<BaseManifest, RunError> {
    let reference = source.reference();
    let started = Instant::now();
    let manifest = |id: String, labels: &BTreeMap<String, String>| BaseManifest {
        reference: reference.clone(),
        image_id: id,
        suite: source.suite().map(String::from),
        rootfs_sha256: labels.get(base::LABEL_ROOTFS_SHA256).cloned(),
    };
    if let Some(img) = engine.image(&reference).await? {
        let same_spec = match source {
            BaseSource::Bootstrap { .. } => {
                img.labels.get(base::LABEL_BASE_SPEC) == Some(&source.spec_hash())
            }
            BaseSource::Registry { .. } => true,
        };
        if same_spec {
            emit(Event::Ready { what: "base", reference: reference.clone(), cached: true, seconds: 0.0 });
            return Ok(manifest(img.id.clone(), &img.labels));
        }
    }
    match source {
        BaseSource::Registry { reference } => {
            let img = engine.pull(reference).await?;
            emit(Event::Ready {
                what: "base",
                reference: reference.clone(),
                cached: false,
                seconds: started.elapsed().as_secs_f64(),
            });
            Ok(manifest(img.id.clone(), &img.labels))
        }
        BaseSource::Bootstrap { suite, packages } => {
            // One bootstrap per base at a time on this host: another benchlab making the same
            // base holds this lock, and when it is released the base is there.
            std::fs::create_dir_all(work_dir)
                .map_err(|e| RunError::Io { what: format!("create {}", work_dir.display()), source: e })?;
            let lock_path = work_dir.join(format!("base-{}.lock", &source.spec_hash()[..12]));
            let _lock =
                tokio::task::spawn_blocking(move || lock_exclusive(&lock_path)).await.map_err(|e| {
                    RunError::Io { what: "base lock task".into(), source: std::io::Error::other(e) }
                })??;
            if let Some(img) = engine.image(&reference).await? {
                if img.labels.get(base::LABEL_BASE_SPEC) == Some(&source.spec_hash()) {
                    emit(Event::Ready {
                        what: "base",
                        reference: reference.clone(),
                        cached: true,
                        seconds: 0.0,
                    });
                    return Ok(manifest(img.id.clone(), &img.labels));
                }
            }
            emit(Event::BaseBootstrapping { reference: reference.clone(), suite: suite.clone() });
            let work = work_dir.join(format!("base-{}", &source.spec_hash()[..12]));
            let _ = std::fs::remove_dir_all(&work);
            let (suite2, packages2, work2) = (suite.clone(), packages.clone(), work.clone());
            let rootfs = tokio::task::spawn_blocking(move || base::bootstrap(&suite2, &packages2, &work2))
                .await
                .map_err(|e| RunError::Io {
                    what: "bootstrap task".into(),
                    source: std::io::Error::other(e),
                })?
                .map_err(|e| RunError::Bootstrap { reference: reference.clone(), source: e })?;
            let mut labels = BTreeMap::new();
            labels.insert(base::LABEL_ROOTFS_SHA256.to_string(), rootfs.sha256.clone());
            labels.insert(base::LABEL_SUITE.to_string(), suite.clone());
            labels.insert(base::LABEL_BASE_SPEC.to_string(), source.spec_hash());
            let img = engine.import_rootfs(&rootfs.tar, &reference, &labels).await?;
            let _ = std::fs::remove_dir_all(&work);
            emit(Event::Ready {
                what: "base",
                reference: reference.clone(),
                cached: false,
                seconds: started.elapsed().as_secs_f64(),
            });
            Ok(manifest(img.id, &labels))
        }
    }
}

/// Makes sure a cell's image exists; a known input hash is a cache hit with no build call.
async fn ensure_image<E: Engine>(
    engine: &E,
    plan: &ImagePlan,
    opts: &RunOptions,
    bases: &mut HashMap<String, BaseManifest>,
    progress: ImageProgress,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<ReadyImage, RunError> {
    let mut base_for =
        async |source: &BaseSource, emit: &mut (dyn FnMut(Event) + Send)| -> Result<BaseManifest, RunError> {
            let key = source.reference();
            if let Some(b) = bases.get(&key) {
                return Ok(b.clone());
            }
            let b = ensure_base(engine, source, &opts.work_dir, emit).await?;
            bases.insert(key, b.clone());
            Ok(b)
        };
    let base = base_for(&plan.base, emit).await?;
    let fetch_base = match &plan.fetch_base {
        Some(f) => base_for(f, emit).await?,
        None => base.clone(),
    };
    let input_hash = plan.input_hash(&base.image_id, &fetch_base.image_id);
    if plan.build.is_none() {
        return Ok(ReadyImage {
            reference: base.reference.clone(),
            id: base.image_id.clone(),
            input_hash,
            base,
            built: false,
        });
    }
    let reference = plan.reference(&input_hash);
    let started = Instant::now();
    if let Some(img) = engine.image(&reference).await? {
        if img.labels.get(LABEL_INPUT_HASH) == Some(&input_hash) {
            emit(Event::Ready { what: "image", reference: reference.clone(), cached: true, seconds: 0.0 });
            return Ok(ReadyImage { reference, id: img.id, input_hash, base, built: false });
        }
    }
    emit(Event::ImageBuilding { reference: reference.clone(), progress });
    let ca = std::fs::read(&opts.ca_bundle).map_err(|e| RunError::Io {
        what: format!(
            "read the CA bundle {} for the build's fetch stage (set SSL_CERT_FILE to another)",
            opts.ca_bundle.display()
        ),
        source: e,
    })?;
    // The base is named by id, so a re-tagged base can never slip into a build.
    let context = plan
        .context_tar(&base.image_id, &fetch_base.image_id, &ca)
        .map_err(|e| RunError::Io { what: "render the build context".into(), source: e })?;
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_INPUT_HASH.to_string(), input_hash.clone());
    labels.insert("org.benchlab.family".to_string(), plan.family.clone());
    labels.insert("org.benchlab.version".to_string(), plan.version.clone());
    let img = engine
        .build(context, &reference, &labels, &mut |line| emit(Event::BuildLog { line: line.to_string() }))
        .await?;
    emit(Event::Ready {
        what: "image",
        reference: reference.clone(),
        cached: false,
        seconds: started.elapsed().as_secs_f64(),
    });
    Ok(ReadyImage { reference, id: img.id, input_hash, base, built: true })
}

/// The parts of the environment shared by every cell of a run.
#[derive(Debug, Clone)]
struct RunContext {
    run_id: String,
    host: HostManifest,
    engine: EngineManifest,
    benchlab: BenchlabManifest,
    scenario_sha256: String,
}

/// What a run produced.
#[derive(Debug)]
pub struct RunSummary {
    pub run_id: String,
    pub run_dir: PathBuf,
    pub records: Vec<Record>,
    pub images_built: usize,
    /// `--resume` only: the cells skipped because the run already holds an ok record of them.
    pub skipped: usize,
    /// `--resume` only: where a cell's environment differs from the one the run recorded before
    /// (the cell's own earlier record, or for run-wide fields any earlier record), one line each.
    pub env_changes: Vec<String>,
}

/// Where cells run: in containers of an engine, or natively on the host (`engine::native`:
/// lab cgroups, servers installed from the same lockfiles into a content-hashed cache). A cell
/// whose server names an engine runs there; the others run in containers when there is an
/// engine, natively otherwise.
pub struct Lab<'a, E: Engine> {
    pub containers: Option<&'a E>,
    pub native: Option<&'a crate::engine::native::NativeEngine>,
}

impl<E: Engine> Clone for Lab<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E: Engine> Copy for Lab<'_, E> {}

/// One of the lab's backends, for one cell.
#[derive(Clone, Copy)]
enum Backend<'a, E: Engine> {
    Containers(&'a E),
    Native(&'a crate::engine::native::NativeEngine),
}

impl<'a, E: Engine> Lab<'a, E> {
    /// The backend of a cell, or an error naming what is missing.
    fn backend(&self, cell: &PlannedCell) -> Result<Backend<'a, E>, RunError> {
        use crate::scenario::EngineKind;
        let missing = |what: &str, hint: &str| RunError::Io {
            what: format!("cell {}", cell.id),
            source: std::io::Error::other(format!(
                "it runs on the {what} engine, which is not available here: {hint}"
            )),
        };
        match (cell.engine, self.containers, self.native) {
            (Some(EngineKind::Docker) | None, Some(e), _) => Ok(Backend::Containers(e)),
            (Some(EngineKind::Native) | None, _, Some(n)) => Ok(Backend::Native(n)),
            (Some(EngineKind::Docker), None, _) => {
                Err(missing("docker", "start one (`scripts/engine.sh`) or drop the server's `engine`"))
            }
            _ => Err(missing(
                "native",
                "run as root on a host with the cpuset, memory and pids cgroup controllers",
            )),
        }
    }
}

/// Runs a scenario end to end.
pub async fn run<E: Engine>(
    lab: Lab<'_, E>,
    scenario: &Scenario,
    recipes: &RecipeBook,
    opts: &RunOptions,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<RunSummary, RunError> {
    run_cells(lab, scenario, recipes, opts, None, emit).await
}

/// Runs a scenario's cells; with `earlier` (a resumed run's records), only the cells that have no
/// ok record among them, checking each new record's environment against the earlier ones.
async fn run_cells<E: Engine>(
    lab: Lab<'_, E>,
    scenario: &Scenario,
    recipes: &RecipeBook,
    opts: &RunOptions,
    earlier: Option<Vec<Record>>,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<RunSummary, RunError> {
    let mut cells = plan(scenario, recipes, &placement::available_cpus())?;
    // Native cells are checked before anything is built: stdio only, and a CPython runtime the
    // host's interpreter can run (the host is asked once).
    let mut host_python = None;
    for c in &mut cells {
        if matches!(lab.backend(c)?, Backend::Native(_)) {
            if c.image.http.is_some() {
                return Err(RunError::Io {
                    what: format!("cell {}", c.id),
                    source: std::io::Error::other(
                        "the native engine runs stdio servers only; use --engine docker for HTTP cells",
                    ),
                });
            }
            native_runtime(recipes, c, &mut host_python).await?;
        }
    }
    let run_id = opts.run_id.clone().unwrap_or_else(|| new_run_id(&scenario.name));
    let run_dir = opts.results_dir.join(&scenario.name).join(&run_id);
    // A run folder that exists already is locked before anything is built, so a second benchlab
    // on it stops at once with the holder's pid (a new folder is locked when it is created).
    let mut early_store = match run_dir.exists() {
        true => Some(Store::open(&run_dir)?),
        false => None,
    };
    let earlier = earlier.unwrap_or_default();
    let before = cells.len();
    cells.retain(|c| !earlier.iter().any(|r| r.status == Status::Ok && same_cell(r, c)));
    let skipped = before - cells.len();
    let mut distinct: Vec<(bool, ImagePlan)> = Vec::new();
    for c in &cells {
        let native = matches!(lab.backend(c)?, Backend::Native(_));
        if !distinct.iter().any(|(n, d)| *n == native && d.same_image(&c.image)) {
            distinct.push((native, c.image.clone()));
        }
    }
    emit(Event::Planned {
        run_id: run_id.clone(),
        run_dir: run_dir.clone(),
        cells: cells.len(),
        images: distinct.len(),
    });

    let lab_binary = freeze_binary(&opts.benchlab_exe, &opts.work_dir)?;
    let ctx = RunContext {
        run_id: run_id.clone(),
        host: crate::record::manifest::read_host(Path::new("/")),
        engine: match (lab.containers, lab.native) {
            (Some(engine), _) => engine.describe().await?,
            (None, Some(native)) => native.describe(),
            (None, None) => unreachable!("a lab has at least one engine"),
        },
        benchlab: BenchlabManifest {
            version: env!("CARGO_PKG_VERSION").into(),
            binary_sha256: lab_binary.1.clone(),
        },
        scenario_sha256: scenario.sha256(),
    };
    // Before anything is made: remove what a benchlab killed without cleaning up left behind,
    // and register this one, so its own leftovers can be found if it dies the same way.
    if let Some(native) = lab.native {
        native.remove_leftovers();
    }
    let _owner = match lab.containers {
        Some(engine) => Some(sweep_leftovers(engine, &opts.work_dir, &run_id, emit).await?),
        None => None,
    };
    // Containers mount this frozen copy, so the binary that runs is the one the records name
    // even if the executable is rebuilt while the run goes on.
    let opts = &RunOptions { benchlab_exe: lab_binary.0, ..opts.clone() };

    // Every image first: a build failure stops the run before anything is measured.
    let mut bases = HashMap::new();
    // Each image with the native install that stands for it, for native cells.
    let mut images: Vec<(bool, ImagePlan, ReadyImage, Option<crate::engine::native::NativeEnv>)> = Vec::new();
    let mut eta = Eta::default();
    for (index, (native, plan)) in distinct.iter().enumerate() {
        let progress =
            ImageProgress { index, total: distinct.len(), eta_s: eta.left(distinct.len() - index) };
        let started = Instant::now();
        let (ready, env) = match (*native, lab.containers, lab.native) {
            (false, Some(engine), _) => {
                (ensure_image(engine, plan, opts, &mut bases, progress, emit).await?, None)
            }
            (_, _, Some(native)) => {
                let (ready, env) = prepare_native(native, plan, opts, progress, emit).await?;
                (ready, Some(env))
            }
            _ => unreachable!("backends were checked when the images were listed"),
        };
        if ready.built {
            eta.add(started.elapsed().as_secs_f64());
        }
        images.push((*native, plan.clone(), ready, env));
    }
    let built = images.iter().filter(|(_, _, ready, _)| ready.built).count();

    let mut store = match early_store.take() {
        Some(s) => s,
        None => Store::open(&run_dir)?,
    };
    keep_scenario_copy(&run_dir, &scenario.source)?;
    let mut records = Vec::new();
    let mut env_changes = Vec::new();
    let image_facts: std::sync::Mutex<HashMap<String, ImageFacts>> = Default::default();
    let slots = match opts.parallel {
        true => {
            let (slots, why) = parallel_slots(scenario, &cells);
            emit(Event::Parallel { slots: slots.len(), why });
            slots
        }
        false => Vec::new(),
    };
    let total = cells.len();
    let emit = std::sync::Mutex::new(emit);
    let send = |e: Event| (emit.lock().expect("the event sink is not poisoned"))(e);
    let mut cell_eta = Eta::default();
    let mut free: Vec<usize> = (0..slots.len().max(1)).collect();
    // The cells running now, by slot: what an interruption abandons.
    let in_flight = std::sync::Mutex::new(BTreeMap::<usize, String>::new());
    let mut pending = cells.iter().enumerate();
    let mut running = futures_util::stream::FuturesUnordered::new();
    let work = async {
        loop {
            // Start a cell on every free slot, then wait for one to finish.
            while let Some(slot) = free.pop() {
                let Some((index, cell)) = pending.next() else {
                    free.push(slot);
                    break;
                };
                let mut cell = cell.clone();
                if let Some(p) = slots.get(slot).filter(|_| slots.len() > 1) {
                    cell.placement = crate::spec::Placement {
                        parallel: Some(crate::spec::ParallelSlot {
                            slot: slot as u32,
                            slots: slots.len() as u32,
                        }),
                        ..p.clone()
                    };
                }
                in_flight.lock().expect("not poisoned").insert(slot, cell.id.clone());
                send(Event::CellStarted {
                    index,
                    total,
                    cell_id: cell.id.clone(),
                    eta_s: cell_eta.left(total - index).map(|s| s / slots.len().max(1) as f64),
                });
                let backend = lab.backend(&cell)?;
                let native = matches!(backend, Backend::Native(_));
                let (_, _, ready, env) = images
                    .iter()
                    .find(|(n, p, _, _)| *n == native && p.same_image(&cell.image))
                    .expect("every cell's image is ready");
                let (ctx, facts, send) = (&ctx, &image_facts, &send);
                running.push(async move {
                    let started = Instant::now();
                    let mut sink = |e: Event| send(e);
                    let record = match backend {
                        Backend::Containers(engine) => {
                            run_cell(engine, ctx, &cell, index, ready, opts, facts, &mut sink).await
                        }
                        Backend::Native(native) => {
                            let env = env.as_ref().expect("every native cell's server is prepared");
                            run_cell_native(native, ctx, &cell, env, ready, opts, &mut sink).await
                        }
                    };
                    (slot, record, started.elapsed().as_secs_f64())
                });
            }
            let Some((slot, record, seconds)) = futures_util::StreamExt::next(&mut running).await else {
                break;
            };
            free.push(slot);
            in_flight.lock().expect("not poisoned").remove(&slot);
            let stored = store.append(record)?;
            env_changes.extend(environment_changes(&earlier, &stored));
            send(Event::CellFinished { record: Box::new(stored.clone()) });
            records.push(stored);
            cell_eta.add(seconds);
        }
        Ok::<(), RunError>(())
    };
    tokio::select! {
        r = work => r?,
        signal = interrupted() => {
            // The cells in flight are abandoned, not recorded: their containers and volumes go
            // by the run's label; every record already written stays as it is.
            let mut removed = 0;
            if let Some(engine) = lab.containers {
                removed += engine.remove_labelled(&format!("{LABEL_RUN}={run_id}")).await.unwrap_or(0);
            }
            // A native cell's processes and cgroup go with its dropped future; stragglers here.
            if let Some(native) = lab.native {
                removed += native.remove_leftovers();
            }
            return Err(RunError::Interrupted {
                signal,
                run_dir: run_dir.clone(),
                done: records.len(),
                total,
                cell: in_flight.lock().expect("not poisoned").values().cloned().collect::<Vec<_>>().join(", "),
                removed,
            });
        }
    }
    Ok(RunSummary { run_id, run_dir, records, images_built: built, skipped, env_changes })
}

/// Resumes the run in `run_dir` (`<results>/<scenario>/<run id>`): its own copy of the scenario,
/// the same run id, and only the cells with no ok record yet. `adjust` may change the scenario as
/// it was loaded (the CLI's --duration/--warmup/--only).
pub async fn resume<E: Engine>(
    lab: Lab<'_, E>,
    run_dir: &Path,
    recipes: &RecipeBook,
    opts: &RunOptions,
    adjust: &mut dyn FnMut(&mut Scenario),
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<RunSummary, RunError> {
    let io = |what: String| move |source| RunError::Io { what, source };
    let run_dir = std::fs::canonicalize(run_dir).map_err(io(format!(
        "resume {}: not a run folder (give the folder holding records.jsonl and scenario.toml)",
        run_dir.display()
    )))?;
    let mut scenario = Scenario::load(&run_dir.join(crate::record::audit::SCENARIO_FILE))?;
    adjust(&mut scenario);
    let (Some(run_id), Some(results_dir), Some(parent)) = (
        run_dir.file_name().and_then(|n| n.to_str()).map(String::from),
        run_dir.parent().and_then(Path::parent),
        run_dir.parent().and_then(Path::file_name),
    ) else {
        return Err(RunError::Io {
            what: format!("resume {}", run_dir.display()),
            source: std::io::Error::other("not a run folder of the form <results>/<scenario>/<run id>"),
        });
    };
    if parent.to_str() != Some(scenario.name.as_str()) {
        return Err(RunError::Io {
            what: format!("resume {}", run_dir.display()),
            source: std::io::Error::other(format!(
                "its scenario is named {:?} but the folder sits under {:?}; move it back to <results>/{}/",
                scenario.name,
                parent.to_string_lossy(),
                scenario.name
            )),
        });
    }
    let records_path = run_dir.join(crate::record::store::RECORDS_FILE);
    let earlier = match records_path.exists() {
        true => crate::record::store::read_records(&records_path)?,
        false => Vec::new(),
    };
    let opts = RunOptions { results_dir: results_dir.to_path_buf(), run_id: Some(run_id), ..opts.clone() };
    run_cells(lab, &scenario, recipes, &opts, Some(earlier), emit).await
}

/// Whether a record is of this planned cell (same id, same repeat).
fn same_cell(r: &Record, c: &PlannedCell) -> bool {
    r.cell.id == c.id && r.cell.repeat.map(|x| x.index) == c.repeat.map(|x| x.index)
}

/// Manifest fields every cell of a run shares: a difference there in any earlier record is a
/// change of the run's environment, not of one cell's.
const RUN_WIDE: &[&str] = &["host", "engine", "benchlab", "scenario_sha256", "sandbox"];

/// How a new record's environment differs from what the run recorded before: against the same
/// cell's latest earlier record (every field), else against the run's first record (run-wide
/// fields only). One line per differing field.
fn environment_changes(earlier: &[Record], new: &Record) -> Vec<String> {
    let same = earlier.iter().rev().find(|r| r.cell.id == new.cell.id && r.cell.repeat == new.cell.repeat);
    let (base, run_wide_only) = match same {
        Some(r) if r.env_hash == new.env_hash => return Vec::new(),
        Some(r) => (r, false),
        None => match earlier.first() {
            Some(r) => (r, true),
            None => return Vec::new(),
        },
    };
    crate::record::diffenv::diff_env(&base.environment, &new.environment)
        .into_iter()
        .filter(|d| {
            !run_wide_only || RUN_WIDE.iter().any(|p| d.path == *p || d.path.starts_with(&format!("{p}.")))
        })
        .map(|d| {
            use crate::record::diffenv::EnvDiff;
            format!(
                "{}: environment changed since record {} ({}): {} {} -> {}",
                new.cell.id,
                base.seq,
                base.recorded_at,
                d.path,
                EnvDiff::show(d.a.as_ref()),
                EnvDiff::show(d.b.as_ref())
            )
        })
        .collect()
}

/// Label on every container and volume of a run: the benchlab process that made it, as
/// `<pid>-<start time>` (the start time tells a reused pid from the original).
pub const LABEL_OWNER: &str = "org.benchlab.owner";

/// This process's owner token, read once.
fn owner_token() -> &'static str {
    static TOKEN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TOKEN.get_or_init(|| {
        let pid = std::process::id();
        process_token(Path::new("/proc"), pid).unwrap_or_else(|| format!("{pid}-0"))
    })
}

/// `<pid>-<start time>` of a live process, from a /proc-like folder; None when it is gone.
fn process_token(proc_root: &Path, pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    // Field 22 (starttime), counted from past the command name's last ')'.
    let start = stat[stat.rfind(')')? + 1..].split_whitespace().nth(19)?;
    Some(format!("{pid}-{start}"))
}

/// This benchlab's entry in `<work>/owners/` (file name: its owner token; content: its run id),
/// removed when the run ends by any path but a kill.
struct OwnerEntry(PathBuf);

impl Drop for OwnerEntry {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Removes the containers and volumes of every registered benchlab that is no longer alive
/// (found by their owner label), then registers this one.
async fn sweep_leftovers<E: Engine>(
    engine: &E,
    work_dir: &Path,
    run_id: &str,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<OwnerEntry, RunError> {
    let io = |what: String| move |source| RunError::Io { what, source };
    let dir = work_dir.join("owners");
    std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    for entry in std::fs::read_dir(&dir).map_err(io(format!("read {}", dir.display())))? {
        let Ok(entry) = entry else { continue };
        let Some(token) = entry.file_name().to_str().map(String::from) else { continue };
        let Some(pid) = token.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if process_token(Path::new("/proc"), pid).as_deref() == Some(token.as_str()) {
            continue; // alive: its containers are its own business
        }
        let dead_run = std::fs::read_to_string(entry.path()).unwrap_or_default().trim().to_string();
        let removed = engine.remove_labelled(&format!("{LABEL_OWNER}={token}")).await?;
        let _ = std::fs::remove_file(entry.path());
        if removed > 0 {
            emit(Event::LeftoversRemoved { run_id: dead_run, owner: token, removed });
        }
    }
    let path = dir.join(owner_token());
    std::fs::write(&path, format!("{run_id}\n")).map_err(io(format!("write {}", path.display())))?;
    Ok(OwnerEntry(path))
}

/// Keeps the scenario beside its records (`scenario.toml`), written atomically. A run folder that
/// already holds a different scenario is refused: its records name the old one's sha256.
fn keep_scenario_copy(run_dir: &Path, source: &str) -> Result<(), RunError> {
    let path = run_dir.join(crate::record::audit::SCENARIO_FILE);
    let io = |what: String| move |source| RunError::Io { what, source };
    if let Ok(existing) = std::fs::read_to_string(&path) {
        if existing == source {
            return Ok(());
        }
        return Err(RunError::Io {
            what: format!("continue the run in {}", run_dir.display()),
            source: std::io::Error::other(
                "it was started from a different scenario file; use a new --run-id",
            ),
        });
    }
    let tmp = run_dir.join(format!(".scenario.toml.{}", std::process::id()));
    std::fs::write(&tmp, source).map_err(io(format!("write {}", tmp.display())))?;
    std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(io(format!("sync {}", tmp.display())))?;
    std::fs::rename(&tmp, &path).map_err(io(format!("place {}", path.display())))
}

/// Takes an exclusive advisory lock on `path` (created if needed), waiting for it; the lock is
/// held as long as the returned file is open.
fn lock_exclusive(path: &Path) -> Result<nix::fcntl::Flock<std::fs::File>, RunError> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| RunError::Io { what: format!("open {}", path.display()), source: e })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| RunError::Io { what: format!("lock {}", path.display()), source: e.into() })
}

/// Resolves when the user interrupts (SIGINT) or the system asks the run to stop (SIGTERM).
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// Copies the lab's executable to `<work>/bin/<sha256>/benchlab` (once per content) and returns
/// that path with the sha256.
fn freeze_binary(exe: &Path, work_dir: &Path) -> Result<(PathBuf, String), RunError> {
    let io = |what: String| move |source| RunError::Io { what, source };
    let sha = crate::hash::sha256_file(exe).map_err(io(format!("hash {}", exe.display())))?;
    let dir = work_dir.join("bin").join(&sha);
    let frozen = dir.join("benchlab");
    if crate::hash::sha256_file(&frozen).ok().as_deref() != Some(sha.as_str()) {
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
        let tmp = dir.join(format!("benchlab.{}", std::process::id()));
        std::fs::copy(exe, &tmp).map_err(io(format!("copy {} to {}", exe.display(), tmp.display())))?;
        std::fs::rename(&tmp, &frozen).map_err(io(format!("place {}", frozen.display())))?;
    }
    Ok((frozen, sha))
}

/// What an image says about itself: runtime version and installed packages.
#[derive(Debug, Clone, Default)]
struct ImageFacts {
    runtime_version: Option<String>,
    packages: Vec<Package>,
    system_packages: Vec<Package>,
}

async fn read_image_facts<E: Engine>(engine: &E, container: &str) -> Result<ImageFacts, EngineError> {
    let mut facts = ImageFacts::default();
    if let Some(bytes) = engine.read_file(container, base::DPKG_LIST_PATH).await? {
        facts.system_packages = parse_dpkg_list(&String::from_utf8_lossy(&bytes));
    }
    if let Some(bytes) = engine.read_file(container, IMAGE_MANIFEST_PATH).await? {
        #[derive(serde::Deserialize)]
        struct ImageJson {
            runtime: RuntimeManifest,
            packages: Vec<Package>,
        }
        let parsed: ImageJson =
            serde_json::from_slice(&bytes).map_err(|e| EngineError::op("parse", IMAGE_MANIFEST_PATH, e))?;
        facts.runtime_version = Some(parsed.runtime.version);
        facts.packages = parsed.packages;
        facts.packages.sort();
    }
    Ok(facts)
}

#[allow(clippy::too_many_arguments)]
async fn run_cell<E: Engine>(
    engine: &E,
    ctx: &RunContext,
    cell: &PlannedCell,
    index: usize,
    image: &ReadyImage,
    opts: &RunOptions,
    image_facts: &std::sync::Mutex<HashMap<String, ImageFacts>>,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Record {
    let name = format!("benchlab-{}-{index}", short(&ctx.run_id));
    let mut created: Vec<String> = Vec::new();
    let volume = format!("{name}-lab");
    let result = cell_in_containers(
        engine,
        cell,
        image,
        opts,
        &name,
        &volume,
        &ctx.run_id,
        &mut created,
        image_facts,
        emit,
    )
    .await;
    // Clean up whatever happened.
    for id in created.iter().rev() {
        let _ = engine.remove_container(id).await;
    }
    let _ = engine.remove_volume(&volume).await;

    let (outcome, failure_override) = match result {
        Ok((outcome, oom)) => {
            let oom = oom.then(|| {
                // What the driver saw (a crash, usually, with the server's stderr) stays in the
                // detail: the kernel's kill is the cause, not the whole story.
                let seen =
                    outcome.failure.as_ref().map(|f| format!("; the driver saw {f}")).unwrap_or_default();
                Failure::new(
                    FailureReason::Oom,
                    format!(
                        "the server container was killed for exceeding its memory limit ({} MiB){seen}",
                        cell.placement.memory_limit_bytes >> 20
                    ),
                )
            });
            (outcome, oom)
        }
        Err(e) => (DriverOutcome::default(), Some(Failure::new(FailureReason::EngineError, e.to_string()))),
    };
    let facts = image_facts.lock().expect("not poisoned").get(&image.id).cloned().unwrap_or_default();
    build_record(ctx, cell, image, &facts, outcome, failure_override)
}

fn short(run_id: &str) -> String {
    crate::hash::sha256_hex(run_id.as_bytes())[..8].to_string()
}

#[allow(clippy::too_many_arguments)]
async fn cell_in_containers<E: Engine>(
    engine: &E,
    cell: &PlannedCell,
    image: &ReadyImage,
    opts: &RunOptions,
    name: &str,
    volume: &str,
    run_id: &str,
    created: &mut Vec<String>,
    image_facts: &std::sync::Mutex<HashMap<String, ImageFacts>>,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<(DriverOutcome, bool), EngineError> {
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_RUN.to_string(), run_id.to_string());
    labels.insert(LABEL_OWNER.to_string(), owner_token().to_string());
    labels.insert("org.benchlab.cell".to_string(), cell.id.clone());
    engine.create_volume(volume, opts.lab_volume_bytes, &labels).await?;
    let mounts = vec![
        Mount::Bind { source: opts.benchlab_exe.clone(), target: LAB_BINARY.into(), read_only: true },
        Mount::Volume { name: volume.into(), target: "/lab".into() },
    ];
    // Both containers are sandboxed alike (same unprivileged user, so the driver can use the
    // shim's socket and logs in /lab); HOME and TMPDIR point at the scratch tmpfs.
    let sandbox = cell.sandbox.clone();
    let server = engine
        .create_container(&ContainerSpec {
            name: format!("{name}-server"),
            image: image.id.clone(),
            cmd: vec![LAB_BINARY.into(), "shim".into(), "--dir".into(), "/lab".into()],
            env: sandbox.environment(),
            labels: labels.clone(),
            cpuset: cell.placement.server_cpus.clone(),
            memory: Some(cell.placement.memory_limit_bytes),
            network: Network::None,
            mounts: mounts.clone(),
            sandbox: sandbox.clone(),
        })
        .await?;
    created.push(server.clone());
    let known = image_facts.lock().expect("not poisoned").contains_key(&image.id);
    if !known {
        let facts = read_image_facts(engine, &server).await?;
        image_facts.lock().expect("not poisoned").insert(image.id.clone(), facts);
    }
    engine.start(&server).await?;

    let spec = cell.driver_spec("/lab".into());
    let spec_json = serde_json::to_string(&spec).expect("specs serialise");
    let driver = engine
        .create_container(&ContainerSpec {
            name: format!("{name}-driver"),
            image: image.id.clone(),
            cmd: vec![LAB_BINARY.into(), "driver".into(), "--spec".into(), spec_json],
            env: sandbox.environment(),
            labels,
            cpuset: cell.placement.driver_cpus.clone(),
            memory: None,
            network: Network::Container(server.clone()),
            mounts,
            sandbox,
        })
        .await?;
    created.push(driver.clone());
    engine.start(&driver).await?;

    let mut outcome: Option<DriverOutcome> = None;
    let mut driver_stderr: Vec<String> = Vec::new();
    let cell_id = cell.id.clone();
    let mut on_line = |line| match line {
        OutputLine::Stdout(text) => match serde_json::from_str::<DriverEvent>(&text) {
            Ok(DriverEvent::Progress { phase, done, total }) => {
                emit(Event::CellProgress { cell_id: cell_id.clone(), phase, done, total })
            }
            Ok(DriverEvent::Outcome { outcome: o }) => outcome = Some(*o),
            Err(_) => driver_stderr.push(text),
        },
        OutputLine::Stderr(text) => {
            driver_stderr.push(text);
            if driver_stderr.len() > 40 {
                driver_stderr.remove(0);
            }
        }
    };
    let follow = engine.follow(&driver, &mut on_line);
    let limit = cell_time_limit(cell);
    match tokio::time::timeout(limit, follow).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(EngineError::op(
                "run",
                &cell.id,
                format!("the cell did not finish within {limit:?}; its containers were removed"),
            ))
        }
    }
    let driver_exit = engine.wait(&driver).await?;
    // The shim exits after the driver's shutdown request; give it a moment, then read its state.
    let server_exit = tokio::time::timeout(Duration::from_secs(10), engine.wait(&server)).await;
    let oom = matches!(server_exit, Ok(Ok(s)) if s.oom_killed);
    match outcome {
        Some(o) => Ok((o, oom)),
        None => Err(EngineError::op(
            "run driver for",
            &cell.id,
            format!(
                "it exited with code {} without an outcome; its output:\n{}",
                driver_exit.code,
                driver_stderr.join("\n")
            ),
        )),
    }
}

/// A generous bound on a whole cell, from its own limits.
fn cell_time_limit(cell: &PlannedCell) -> Duration {
    time_limit(&cell.timeouts, &cell.workload)
}

/// A generous bound on a whole cell's run from its limits and workload (every engine's).
pub fn time_limit(t: &Timeouts, workload: &crate::spec::Workload) -> Duration {
    let per_session = t.startup_ms + t.stop_grace_ms + t.term_ms + 10 * t.call_ms;
    let ms = match workload {
        crate::spec::Workload::ColdStart { spawns } => u64::from(*spawns) * per_session,
        crate::spec::Workload::SerialCalls { warmup, calls, .. } => {
            per_session + (u64::from(*warmup) + u64::from(*calls)) * t.call_ms
        }
        w => per_session + w.load_time_ms() + 2 * t.call_ms,
    };
    Duration::from_millis(ms.min(6 * 3600 * 1000) + 60_000)
}

/// The sandbox as the environment manifest records it.
fn sandbox_manifest(s: &Sandbox) -> crate::record::manifest::SandboxManifest {
    crate::record::manifest::SandboxManifest {
        user: s.user.map(|(u, g)| format!("{u}:{g}")),
        drop_all_capabilities: s.drop_all_capabilities,
        no_new_privileges: s.no_new_privileges,
        read_only_root: s.read_only_root,
        scratch: s.scratch.iter().map(|(p, b)| format!("{p}:{b}")).collect(),
        pids_limit: s.pids_limit,
        network: "none".into(),
    }
}

/// The deviation to record when a reproduction asked for a runtime version this cell did not
/// run ("3.12" is met by any 3.12.x; "3.12.3" only by itself).
fn runtime_deviation(kind: &str, wanted: Option<&str>, actual: &str) -> Option<String> {
    let wanted = wanted?;
    let met = actual == wanted || actual.starts_with(&format!("{wanted}."));
    (!met).then(|| {
        format!("the reproduced source ran {kind} {wanted}, which cannot be had here; this cell ran {kind} {actual}")
    })
}

fn build_record(
    ctx: &RunContext,
    cell: &PlannedCell,
    image: &ReadyImage,
    facts: &ImageFacts,
    outcome: DriverOutcome,
    failure_override: Option<Failure>,
) -> Record {
    let runtime_version = match cell.image.runtime_kind {
        crate::recipe::RuntimeKind::Native => env!("CARGO_PKG_VERSION").to_string(),
        _ => facts.runtime_version.clone().unwrap_or_else(|| "unknown".into()),
    };
    let environment = Environment {
        image: ImageManifest {
            reference: image.reference.clone(),
            image_id: image.id.clone(),
            input_hash: image.input_hash.clone(),
            base: image.base.clone(),
            packages: facts.packages.clone(),
            system_packages: facts.system_packages.clone(),
        },
        runtime: RuntimeManifest {
            name: cell.image.runtime_kind.as_str().into(),
            version: runtime_version.clone(),
        },
        host: ctx.host.clone(),
        engine: ctx.engine.clone(),
        placement: cell.placement.clone(),
        benchlab: ctx.benchlab.clone(),
        scenario_sha256: ctx.scenario_sha256.clone(),
        deviations: cell
            .deviations
            .iter()
            .cloned()
            .chain(runtime_deviation(
                cell.image.runtime_kind.as_str(),
                cell.source_runtime.as_deref(),
                &runtime_version,
            ))
            .collect(),
        sandbox: Some(sandbox_manifest(&cell.sandbox)),
    };
    let failure = failure_override.or(outcome.failure.clone());
    let samples = |v: &[u64]| {
        stats::summarize_samples(v).map(|summary| SampleMetric {
            samples_ms: v.iter().map(|&ns| ns as f64 / 1e6).collect(),
            summary,
        })
    };
    let calls = outcome.calls_histogram.as_ref().and_then(|h| {
        let hist = stats::decode_histogram(h).ok()?;
        Some(HistogramMetric { summary: stats::summarize(&hist)?, histogram: h.clone() })
    });
    Record {
        format_version: crate::record::FORMAT_VERSION,
        run_id: ctx.run_id.clone(),
        seq: 0,
        recorded_at: crate::record::now_rfc3339(),
        status: if failure.is_some() { Status::Failed } else { Status::Ok },
        failure,
        cell: Cell {
            id: cell.id.clone(),
            server: ServerIdent {
                id: cell.server_id.clone(),
                family: cell.image.family.clone(),
                sdk_version: cell.image.version.clone(),
                api: cell.image.api.clone(),
                runtime: cell.image.runtime_name.clone(),
                runtime_version,
                source: cell.image.source.clone(),
                env: cell.env.clone(),
            },
            transport: match (&cell.image.http, &cell.workload) {
                (_, crate::spec::Workload::HttpApi { .. }) => "http-api".into(),
                (Some(h), _) => h.transport.as_str().into(),
                (None, _) => "stdio".into(),
            },
            suite: cell.suite.clone(),
            workload: cell.workload.clone(),
            placement: cell.placement.clone(),
            timeouts: cell.timeouts,
            expect: cell.expect,
            http: cell.image.http.clone(),
            repeat: cell.repeat,
        },
        metrics: Metrics {
            cold_start: samples(&outcome.cold_start_ns),
            tools_list: samples(&outcome.tools_list_ns),
            calls,
            memory: MemoryMetrics {
                after_initialize: outcome.memory_after_initialize,
                end: outcome.memory_end,
                under_load: outcome.load_memory,
            },
            load: outcome.load,
        },
        observed: Observed {
            protocol_version: outcome.protocol_version,
            server_info: outcome.server_info,
            exits: outcome.exits,
        },
        environment,
        env_hash: String::new(),
        prev_hash: None,
        hash: String::new(),
    }
}

/// The CPython minor version of each Debian suite a recipe runtime names (its `python3`).
const SUITE_PYTHON: &[(&str, &str)] = &[("bullseye", "3.9"), ("bookworm", "3.11"), ("trixie", "3.13")];

/// Natively a CPython server runs on the host's interpreter, and a lock's compiled wheels fit
/// one minor version: when the cell's runtime is for another minor than the host's, the cell
/// takes the family's runtime whose suite has the host's minor (its own lock), and the record
/// says so. Without such a runtime the cell cannot run natively, and the error says why.
async fn native_runtime(
    recipes: &RecipeBook,
    cell: &mut PlannedCell,
    host_python: &mut Option<String>,
) -> Result<(), RunError> {
    if cell.image.runtime_kind != crate::recipe::RuntimeKind::Cpython {
        return Ok(());
    }
    let Some(suite) = cell.image.base.suite() else { return Ok(()) };
    let wanted = SUITE_PYTHON.iter().find(|(s, _)| *s == suite).map(|(_, v)| *v);
    let host = match host_python {
        Some(h) => h.clone(),
        None => host_python.insert(host_python_minor().await?).clone(),
    };
    if wanted.is_none_or(|w| w == host) {
        return Ok(());
    }
    let io = |m: String| RunError::Io {
        what: format!("cell {} natively", cell.id),
        source: std::io::Error::other(m),
    };
    let host_suite = SUITE_PYTHON.iter().find(|(_, v)| *v == host).map(|(s, _)| *s);
    let mut tried = Vec::new();
    for rt in recipes.runtimes_of(&cell.image.family) {
        let mut want = cell.want.clone();
        want.runtime = Some(rt.clone());
        if let Ok(image) = recipes.resolve(&want) {
            if image.runtime_kind == crate::recipe::RuntimeKind::Cpython && image.base.suite() == host_suite {
                cell.deviations.push(format!(
                    "the scenario asks for {} (CPython {}); natively this host's python3 is {host}, so the cell ran the {rt} lock on it",
                    cell.image.runtime_name,
                    wanted.unwrap_or("?"),
                ));
                cell.image = image;
                return Ok(());
            }
        }
        tried.push(rt);
    }
    Err(io(format!(
        "{} needs CPython {} but this host's python3 is {host}, and {} has no lock for a runtime of CPython {host} (it has: {}); run it with --engine docker",
        cell.image.runtime_name,
        wanted.unwrap_or("?"),
        cell.image.family,
        tried.join(", ")
    )))
}

/// The host interpreter's `major.minor`.
async fn host_python_minor() -> Result<String, RunError> {
    let python = crate::engine::native::cache::host_python()?;
    let out = tokio::process::Command::new(&python)
        .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
        .output()
        .await
        .map_err(|e| RunError::Io { what: format!("run {}", python.display()), source: e })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The native engine's counterpart of [`ensure_image`]: installs (or finds in the cache) the
/// server from its lockfile; the cache entry stands for the image in the record.
async fn prepare_native(
    native: &crate::engine::native::NativeEngine,
    plan: &ImagePlan,
    opts: &RunOptions,
    progress: ImageProgress,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<(ReadyImage, crate::engine::native::NativeEnv), RunError> {
    let started = Instant::now();
    let label = format!("native {} {} ({})", plan.family, plan.version, plan.runtime_name);
    if plan.build.is_some() {
        emit(Event::ImageBuilding {
            reference: format!("{label}: installing or finding in the cache"),
            progress,
        });
    }
    let env = native
        .prepare(plan, &opts.ca_bundle, &mut |line| emit(Event::BuildLog { line: line.to_string() }))
        .await?;
    emit(Event::Ready {
        what: "native server",
        reference: match env.dir.as_os_str().is_empty() {
            true => label.clone(),
            false => format!("{label} in {}", env.dir.display()),
        },
        cached: env.cached,
        seconds: started.elapsed().as_secs_f64(),
    });
    let ready = ReadyImage {
        reference: format!("native:{}", env.dir.display()),
        id: env.input_hash.clone(),
        input_hash: env.input_hash.clone(),
        base: BaseManifest {
            reference: format!("host:{}", env.interpreter),
            image_id: String::new(),
            suite: None,
            rootfs_sha256: None,
        },
        built: !env.cached,
    };
    Ok((ready, env))
}

/// Runs one cell natively and makes its record.
#[allow(clippy::too_many_arguments)]
async fn run_cell_native(
    native: &crate::engine::native::NativeEngine,
    ctx: &RunContext,
    cell: &PlannedCell,
    env: &crate::engine::native::NativeEnv,
    image: &ReadyImage,
    opts: &RunOptions,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Record {
    // The native engine makes its own lab folder and launches the server from its cache entry.
    let spec = cell.driver_spec(PathBuf::new());
    let limits = crate::engine::native::CellLimits {
        server_cpus: cell.placement.server_cpus.clone(),
        driver_cpus: cell.placement.driver_cpus.clone(),
        memory_limit: Some(cell.placement.memory_limit_bytes),
        pids_limit: cell.sandbox.pids_limit,
    };
    let cell_id = cell.id.clone();
    let mut on_event = |e: DriverEvent| {
        if let DriverEvent::Progress { phase, done, total } = e {
            emit(Event::CellProgress { cell_id: cell_id.clone(), phase, done, total })
        }
    };
    // HTTP cells never get here: run_cells refuses them before anything is built.
    let result =
        native.run_cell(env, spec, &limits, &opts.benchlab_exe, cell_time_limit(cell), &mut on_event).await;
    let (outcome, failure) = match result {
        Ok(run) => {
            let oom = run.oom_killed.then(|| {
                Failure::new(
                    FailureReason::Oom,
                    format!(
                        "the server's cgroup was killed for exceeding its memory limit ({} MiB)",
                        cell.placement.memory_limit_bytes >> 20
                    ),
                )
            });
            (run.outcome, oom)
        }
        Err(e) => (DriverOutcome::default(), Some(Failure::new(FailureReason::EngineError, e.to_string()))),
    };
    let mut cell = cell.clone();
    // Natively there is no container sandbox: the record says what confined the server.
    cell.sandbox = Sandbox::none();
    let ctx = RunContext { engine: native.describe(), ..ctx.clone() };
    // What an image says of itself, the cache entry says natively.
    let facts = ImageFacts {
        runtime_version: Some(env.runtime_version.clone()),
        packages: env.packages.clone(),
        system_packages: Vec::new(),
    };
    build_record(&ctx, &cell, image, &facts, outcome, failure)
}

/// The CPU slots `--parallel` runs cells in, and the reason for their number: one slot (the
/// cells' own placements) when the scenario names its cpusets or its cells mix placement modes,
/// otherwise as many as the host's cores allow.
fn parallel_slots(scenario: &Scenario, cells: &[PlannedCell]) -> (Vec<crate::spec::Placement>, String) {
    let cpus = placement::available_cpus();
    if scenario.placement.server_cpus.is_some() || scenario.placement.driver_cpus.is_some() {
        return (Vec::new(), "the scenario names its cpusets, so its cells run one at a time".into());
    }
    let shared = scenario.placement.mode == crate::spec::PlacementMode::Shared;
    if cells.iter().any(|c| c.placement.shared != shared) {
        return (Vec::new(), "the cells have different placement modes, so they run one at a time".into());
    }
    let slots = placement::slots(&scenario.placement, &cpus);
    let need = if shared { "one physical core" } else { "two physical cores (server and driver apart)" };
    let why = format!(
        "{} CPU(s) here ({}); a cell needs {need} and no two cells share a core, so {} cell(s) run at once",
        cpus.len(),
        placement::format_cpu_list(&cpus),
        slots.len().max(1)
    );
    (slots, why)
}

/// Whether an image is in the engine already, without making anything.
pub async fn image_state<E: Engine>(
    engine: &E,
    plan: &ImagePlan,
) -> Result<crate::plan::ImageState, EngineError> {
    use crate::plan::ImageState;
    let base_id = |source: &BaseSource| {
        let reference = source.reference();
        async move { engine.image(&reference).await.map(|i| i.map(|i| i.id)) }
    };
    let Some(base) = base_id(&plan.base).await? else { return Ok(ImageState::BuildWithBase) };
    let fetch = match &plan.fetch_base {
        Some(f) => match base_id(f).await? {
            Some(id) => id,
            None => return Ok(ImageState::BuildWithBase),
        },
        None => base.clone(),
    };
    if plan.build.is_none() {
        return Ok(ImageState::Cached);
    }
    let input_hash = plan.input_hash(&base, &fetch);
    Ok(match engine.image(&plan.reference(&input_hash)).await? {
        Some(img) if img.labels.get(LABEL_INPUT_HASH) == Some(&input_hash) => ImageState::Cached,
        _ => ImageState::Build,
    })
}

/// The distinct images a plan's cells need, in first-use order.
pub fn distinct_images(cells: &[PlannedCell]) -> Vec<ImagePlan> {
    let mut distinct: Vec<ImagePlan> = Vec::new();
    for c in cells {
        if !distinct.iter().any(|d| d.same_image(&c.image)) {
            distinct.push(c.image.clone());
        }
    }
    distinct
}

/// Builds (or finds) each image, with counts and an estimate of the time left.
pub async fn build_plans<E: Engine>(
    engine: &E,
    plans: &[ImagePlan],
    opts: &RunOptions,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<Vec<(String, bool)>, RunError> {
    let mut bases = HashMap::new();
    let mut out = Vec::new();
    let mut eta = Eta::default();
    for (index, plan) in plans.iter().enumerate() {
        let progress = ImageProgress { index, total: plans.len(), eta_s: eta.left(plans.len() - index) };
        let started = Instant::now();
        let ready = ensure_image(engine, plan, opts, &mut bases, progress, emit).await?;
        if ready.built {
            eta.add(started.elapsed().as_secs_f64());
        }
        out.push((ready.reference, ready.built));
    }
    Ok(out)
}

/// Where a build stands among the images of its run.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImageProgress {
    pub index: usize,
    pub total: usize,
    /// Seconds left if every remaining image needs a build as long as the mean one so far.
    pub eta_s: Option<f64>,
}

/// The mean of finished steps, times the steps left.
#[derive(Debug, Default)]
struct Eta {
    n: u32,
    sum: f64,
}

impl Eta {
    fn add(&mut self, seconds: f64) {
        self.n += 1;
        self.sum += seconds;
    }
    fn left(&self, remaining: usize) -> Option<f64> {
        (self.n > 0).then(|| self.sum / f64::from(self.n) * remaining as f64)
    }
}

/// The uv release `benchlab lock` installs in the target base to lock Python sets.
pub const UV_VERSION: &str = "0.13.9";

/// Regenerates lock folders with a real locker run inside a container of each target's base
/// (so the Python version and platform tags are the image's own). The container has the default
/// network (it downloads); the CA bundle is mounted read-only for it.
///
/// `versions` is one version or a release range (`1.1.2..1.x`): for a range the package index is
/// listed first (in a container of the same base), the list is kept in
/// `lockfiles/<family>/releases.toml`, and every release of the range (as `pick` says) that has no
/// fresh lock yet gets its lock input from the recipe's template and is locked — one container
/// per runtime for all of them.
#[allow(clippy::too_many_arguments)]
pub async fn lock<E: Engine>(
    engine: &E,
    recipes: &RecipeBook,
    family: &str,
    versions: &str,
    pick: crate::recipe::releases::Pick,
    runtime: Option<&str>,
    opts: &RunOptions,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<Vec<PathBuf>, RunError> {
    let plan_err =
        |m: String| RunError::Io { what: "plan the lock".into(), source: std::io::Error::other(m) };
    let is_range = versions.contains("..");
    let mut jobs = Vec::new();
    if is_range {
        let range = crate::recipe::releases::Range::parse(versions).map_err(plan_err)?;
        let (package, first) = recipes.range_locking(family, runtime).map_err(plan_err)?;
        let base = ensure_base(engine, &first.base, &opts.work_dir, emit).await?;
        emit(Event::Locking { what: format!("the releases of {package} (listing the package index)") });
        // Every release with its publication time, from the index the tools use by default
        // (pip's own idea of it; npm's registry): `{"1.2.0": "2025-01-03T16:23:39Z", ...}`.
        let script = match first.locker {
            crate::recipe::Locker::Uv => format!(
                "set -e; python3 -m venv /tmp/lister; SSL_CERT_FILE=/ca.pem /tmp/lister/bin/python -c '{}' {package}",
                PYPI_RELEASES.replace('\'', "\"")
            ),
            crate::recipe::Locker::Npm => format!("set -e; npm_config_cafile=/ca.pem npm view {package} time --json"),
        };
        let out = run_locker(engine, &base.image_id, script, Vec::new(), opts, "list releases", emit).await?;
        let text = out.join("\n");
        let mut times: BTreeMap<String, String> = serde_json::from_str(&text).map_err(|e| {
            plan_err(format!(
                "the index listing of {package} is not a JSON object of release times ({e}): {text}"
            ))
        })?;
        times.retain(|v, _| crate::recipe::releases::is_release(v));
        let releases = crate::recipe::releases::Releases {
            package: package.clone(),
            listed: crate::record::now_rfc3339()[..10].to_string(),
            versions: crate::recipe::releases::Releases::normalise(times.keys().cloned()),
            uploaded: times,
        };
        if releases.versions.is_empty() {
            return Err(plan_err(format!("the package index listed no release of {package}")));
        }
        let family_dir = recipes.lockfiles_dir.join(family);
        std::fs::create_dir_all(&family_dir)
            .map_err(|e| RunError::Io { what: format!("create {}", family_dir.display()), source: e })?;
        let command = format!("benchlab lock {family} {versions}");
        releases
            .save(&family_dir, &command)
            .map_err(|e| RunError::Io { what: format!("write {}", family_dir.display()), source: e })?;
        // An index that re-published (or mirrored) releases reports times that run backwards
        // against the versions: the day bounds are then the index's word, not the release days.
        let backwards: Vec<String> = releases
            .versions
            .windows(2)
            .filter(|w| range.contains(&w[0]) && range.contains(&w[1]))
            .filter_map(|w| {
                let (a, b) = (releases.uploaded.get(&w[0])?, releases.uploaded.get(&w[1])?);
                (b < a).then(|| format!("{} ({a}) > {} ({b})", w[0], w[1]))
            })
            .collect();
        if !backwards.is_empty() {
            emit(Event::BuildLog {
                line: format!(
                    "warning: the index's publication times of {package} run backwards at {} place(s) (e.g. {}); each release is still locked as of its own listed day",
                    backwards.len(),
                    backwards[0]
                ),
            });
        }
        let chosen = range.select(&releases.versions, pick);
        if chosen.is_empty() {
            return Err(plan_err(format!("no release of {package} falls in {versions}")));
        }
        for v in &chosen {
            for job in recipes.lock_jobs(family, v, runtime).map_err(plan_err)? {
                let before = releases.uploaded.get(v).and_then(|t| crate::recipe::releases::end_of_day(t));
                recipes.write_lock_input(family, v, &job.runtime, before.as_deref()).map_err(plan_err)?;
                // Fresh locks are kept: a range is locked in one go and again only where needed.
                if crate::recipe::is_locked(&job.dir) {
                    continue;
                }
                jobs.push(job);
            }
        }
    } else {
        jobs = recipes.lock_jobs(family, versions, runtime).map_err(plan_err)?;
    }
    // One container per runtime locks every folder of that runtime.
    let mut by_runtime: Vec<(String, Vec<crate::recipe::LockJob>)> = Vec::new();
    for job in jobs {
        match by_runtime.iter_mut().find(|(r, _)| *r == job.runtime) {
            Some((_, list)) => list.push(job),
            None => by_runtime.push((job.runtime.clone(), vec![job])),
        }
    }
    let mut done = Vec::new();
    for (runtime, jobs) in by_runtime {
        let first = &jobs[0];
        let base = ensure_base(engine, &first.base, &opts.work_dir, emit).await?;
        let family_dir =
            std::fs::canonicalize(recipes.lockfiles_dir.join(family)).map_err(|e| RunError::Io {
                what: format!("lock folder {}", recipes.lockfiles_dir.join(family).display()),
                source: e,
            })?;
        let mut script = String::from("set -e; ");
        if first.locker == crate::recipe::Locker::Uv {
            script.push_str(&format!(
                "python3 -m venv /tmp/locker; \
                 PIP_CERT=/ca.pem /tmp/locker/bin/pip install --quiet --disable-pip-version-check uv=={UV_VERSION}; "
            ));
        }
        for job in &jobs {
            let folder = format!("{}-{}", job.version, job.runtime);
            let command = format!("benchlab lock {} {} --runtime {}", job.family, job.version, job.runtime);
            script.push_str(&format!(
                "echo 'locking {folder}'; cd /lock/{folder}; \
                 before=''; [ -f {f} ] && before=$(cat {f}); ",
                f = crate::recipe::releases::EXCLUDE_NEWER_FILE
            ));
            script.push_str(&match first.locker {
                crate::recipe::Locker::Uv => format!(
                    "SSL_CERT_FILE=/ca.pem /tmp/locker/bin/uv pip compile --quiet requirements.in --generate-hashes \
                     ${{before:+--exclude-newer $before}} \
                     --python /usr/bin/python3 --custom-compile-command '{command}' -o requirements.txt; "
                ),
                crate::recipe::Locker::Npm => "npm_config_cafile=/ca.pem npm install --package-lock-only --ignore-scripts --no-audit --no-fund --omit-lockfile-registry-resolved --loglevel=warn ${before:+--before $before}; ".to_string(),
            });
        }
        let started = Instant::now();
        emit(Event::Locking {
            what: format!("{} folder(s) of {family} ({runtime}) with {}", jobs.len(), first.locker),
        });
        let mounts =
            vec![Mount::Bind { source: family_dir.clone(), target: "/lock".into(), read_only: false }];
        run_locker(engine, &base.image_id, script, mounts, opts, &format!("lock {family} ({runtime})"), emit)
            .await?;
        emit(Event::Ready {
            what: "lock",
            reference: format!("{} folder(s) of {family} ({runtime})", jobs.len()),
            cached: false,
            seconds: started.elapsed().as_secs_f64(),
        });
        done.extend(jobs.into_iter().map(|j| j.dir));
    }
    Ok(done)
}

/// Prints `{version: first upload time}` of the package named by argv[1], from the JSON API of
/// pip's default index (pip names it; the lab does not).
const PYPI_RELEASES: &str = r#"import json, ssl, sys, urllib.request
from pip._internal.models.index import PyPI
ctx = ssl.create_default_context(cafile="/ca.pem")
data = json.load(urllib.request.urlopen(PyPI.url + "pypi/" + sys.argv[1] + "/json", context=ctx))
out = {}
for version, files in data["releases"].items():
    times = sorted(f["upload_time_iso_8601"] for f in files)
    if times:
        out[version] = times[0]
print(json.dumps(out))"#;

/// Runs a shell script in a container of `image` with egress and the CA bundle at /ca.pem;
/// returns its standard output lines, or an error with the tail of its output.
async fn run_locker<E: Engine>(
    engine: &E,
    image: &str,
    script: String,
    mut mounts: Vec<Mount>,
    opts: &RunOptions,
    what: &str,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<Vec<String>, RunError> {
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_RUN.to_string(), format!("lock-{}", std::process::id()));
    mounts.push(Mount::Bind { source: opts.ca_bundle.clone(), target: "/ca.pem".into(), read_only: true });
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let id = engine
        .create_container(&ContainerSpec {
            name: format!("benchlab-lock-{}-{n}", std::process::id()),
            image: image.to_string(),
            cmd: vec!["sh".into(), "-c".into(), script],
            env: Vec::new(),
            labels,
            cpuset: String::new(),
            memory: None,
            network: Network::Egress,
            mounts,
            sandbox: Sandbox::none(),
        })
        .await?;
    let result = async {
        engine.start(&id).await?;
        let mut tail: Vec<String> = Vec::new();
        let mut stdout: Vec<String> = Vec::new();
        engine
            .follow(&id, &mut |line| {
                let text = match line {
                    OutputLine::Stdout(t) => {
                        stdout.push(t.clone());
                        t
                    }
                    OutputLine::Stderr(t) => t,
                };
                emit(Event::BuildLog { line: text.clone() });
                tail.push(text);
                if tail.len() > 30 {
                    tail.remove(0);
                }
            })
            .await?;
        let exit = engine.wait(&id).await?;
        if exit.code != 0 {
            return Err(EngineError::op(
                "lock",
                what,
                format!("the locker exited with {}:\n{}", exit.code, tail.join("\n")),
            ));
        }
        Ok(stdout)
    }
    .await;
    let _ = engine.remove_container(&id).await;
    Ok(result?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fake::FakeEngine;
    use crate::recipe::BuildInputs;
    use crate::spec::ServerLaunch;

    #[test]
    fn runtime_deviations_are_named() {
        assert_eq!(runtime_deviation("cpython", Some("3.13"), "3.13.5"), None);
        assert_eq!(runtime_deviation("cpython", Some("3.13.5"), "3.13.5"), None);
        assert_eq!(runtime_deviation("cpython", None, "3.11.2"), None);
        let d = runtime_deviation("cpython", Some("3.12.3"), "3.13.5").unwrap();
        assert!(d.contains("3.12.3") && d.contains("3.13.5"), "{d}");
        assert!(runtime_deviation("node", Some("22.1"), "22.12.0").is_some());
    }

    fn plan(base: BaseSource, lock: &[u8]) -> ImagePlan {
        ImagePlan {
            family: "sdk".into(),
            version: "1.0".into(),
            api: "new".into(),
            runtime_name: "py".into(),
            runtime_kind: crate::recipe::RuntimeKind::Cpython,
            base,
            fetch_base: None,
            launch: ServerLaunch { argv: vec!["/srv/weekly.py".into()], env: vec![], cwd: None },
            http: None,
            source: None,
            build: Some(BuildInputs {
                dockerfile_template: "FROM {{BASE}}\n".into(),
                launcher: "python".into(),
                files: vec![("lock/requirements.txt".into(), lock.to_vec())],
                recipe_entry: serde_json::json!({}),
            }),
        }
    }

    fn options(dir: &Path) -> RunOptions {
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "not a real bundle").unwrap();
        RunOptions {
            results_dir: dir.join("results"),
            run_id: None,
            benchlab_exe: dir.join("benchlab"),
            ca_bundle: ca,
            work_dir: dir.join("work"),
            lab_volume_bytes: 1 << 20,
            parallel: false,
        }
    }

    fn with_base(engine: &FakeEngine, base: &BaseSource) {
        engine.add_image(&base.reference(), "sha256:base", &[(base::LABEL_BASE_SPEC, &base.spec_hash())]);
    }

    #[tokio::test]
    async fn an_image_is_built_once_then_found_by_its_input_hash() {
        let d = tempfile::tempdir().unwrap();
        let engine = FakeEngine::new();
        let base = BaseSource::bootstrap("bookworm", &["python3"]);
        with_base(&engine, &base);
        let p = plan(base, b"sdk==1.0");
        let mut bases = HashMap::new();
        let first =
            ensure_image(&engine, &p, &options(d.path()), &mut bases, ImageProgress::default(), &mut |_| {})
                .await
                .unwrap();
        let second =
            ensure_image(&engine, &p, &options(d.path()), &mut bases, ImageProgress::default(), &mut |_| {})
                .await
                .unwrap();
        assert_eq!(first.id, second.id);
        assert!(first.built && !second.built);
        let builds: Vec<String> = engine.calls().into_iter().filter(|c| c.starts_with("build ")).collect();
        assert_eq!(builds, [format!("build {}", first.reference)], "one build, then a cache hit");
        assert!(
            !engine.calls().iter().any(|c| c.starts_with("import")),
            "an existing base is not bootstrapped again"
        );
        // A changed lockfile is another image.
        let changed = plan(p.base.clone(), b"sdk==1.1");
        let third = ensure_image(
            &engine,
            &changed,
            &options(d.path()),
            &mut bases,
            ImageProgress::default(),
            &mut |_| {},
        )
        .await
        .unwrap();
        assert_ne!(third.input_hash, first.input_hash);
        assert_eq!(engine.calls().iter().filter(|c| c.starts_with("build ")).count(), 2);
    }

    #[tokio::test]
    async fn an_image_under_the_same_name_with_other_inputs_is_rebuilt() {
        let d = tempfile::tempdir().unwrap();
        let engine = FakeEngine::new();
        let base = BaseSource::bootstrap("bookworm", &["python3"]);
        with_base(&engine, &base);
        let p = plan(base, b"sdk==1.0");
        let reference = p.reference(&p.input_hash("sha256:base", "sha256:base"));
        engine.add_image(&reference, "sha256:stale", &[(LABEL_INPUT_HASH, "something else")]);
        let ready = ensure_image(
            &engine,
            &p,
            &options(d.path()),
            &mut HashMap::new(),
            ImageProgress::default(),
            &mut |_| {},
        )
        .await
        .unwrap();
        assert_ne!(ready.id, "sha256:stale");
        assert!(engine.calls().contains(&format!("build {reference}")));
    }

    #[test]
    fn owner_tokens_name_a_live_process_and_its_start_time() {
        let me = owner_token();
        assert!(me.starts_with(&format!("{}-", std::process::id())), "{me}");
        assert_ne!(me, format!("{}-0", std::process::id()), "the start time was read");
        assert_eq!(process_token(Path::new("/proc"), std::process::id()).as_deref(), Some(me));
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("42")).unwrap();
        let stat = "42 (a) b) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        std::fs::write(d.path().join("42/stat"), stat).unwrap();
        assert_eq!(process_token(d.path(), 42).as_deref(), Some("42-987654"));
        assert_eq!(process_token(d.path(), 43), None);
    }

    #[test]
    fn a_resumed_cell_in_another_environment_is_reported() {
        use crate::record::tests::sample_record;
        let hashed = |mut r: Record| {
            r.env_hash = r.environment.hash();
            r
        };
        let a = hashed(sample_record("a"));
        let b = hashed(sample_record("b"));
        // The same cell again, same environment: nothing to say.
        assert!(environment_changes(std::slice::from_ref(&a), &a).is_empty());
        // Another binary: reported against the cell's own earlier record.
        let mut a2 = a.clone();
        a2.environment.benchlab.binary_sha256 = "f00d".into();
        let a2 = hashed(a2);
        let lines = environment_changes(std::slice::from_ref(&a), &a2);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("benchlab.binary_sha256") && lines[0].contains("f00d"), "{lines:?}");
        // A cell never recorded before: only run-wide fields count, not its own image.
        let mut c = b.clone();
        c.cell.id = "c/cold_start".into();
        c.environment.image.image_id = "sha256:other".into();
        assert!(environment_changes(std::slice::from_ref(&a), &hashed(c.clone())).is_empty());
        c.environment.host.kernel = "6.99".into();
        let lines = environment_changes(std::slice::from_ref(&a), &hashed(c));
        assert!(lines.len() == 1 && lines[0].contains("host.kernel"), "{lines:?}");
    }

    #[tokio::test]
    async fn leftovers_of_dead_benchlabs_are_removed_by_owner_and_live_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        let owners = d.path().join("owners");
        std::fs::create_dir_all(&owners).unwrap();
        // A pid that cannot exist, and a live pid (ours) with another start time: a reused pid.
        let dead = "4194399-12345".to_string();
        let reused = format!("{}-1", std::process::id());
        let alive = owner_token().to_string();
        for (token, run) in [(&dead, "run-a"), (&reused, "run-b")] {
            std::fs::write(owners.join(token), format!("{run}\n")).unwrap();
        }
        let engine = FakeEngine::new();
        let mut events = Vec::new();
        let entry = sweep_leftovers(&engine, d.path(), "run-c", &mut |e| events.push(e)).await.unwrap();
        let calls = engine.calls();
        for token in [&dead, &reused] {
            assert!(calls.contains(&format!("remove_labelled {LABEL_OWNER}={token}")), "{calls:?}");
            assert!(!owners.join(token).exists());
        }
        assert!(!calls.iter().any(|c| c.contains(&format!("={alive}"))), "{calls:?}");
        assert_eq!(std::fs::read_to_string(owners.join(&alive)).unwrap(), "run-c\n");
        // The fake removes nothing, so nothing is reported.
        assert!(events.is_empty());
        drop(entry);
        assert!(!owners.join(&alive).exists(), "the entry goes when the run ends");
    }

    #[tokio::test]
    async fn a_registry_base_that_cannot_be_pulled_says_how_to_bootstrap() {
        let d = tempfile::tempdir().unwrap();
        let engine = FakeEngine::new();
        engine.fail("pull", "no registry reachable");
        let base = BaseSource::Registry { reference: format!("debian@sha256:{}", "a".repeat(64)) };
        let err = ensure_image(
            &engine,
            &plan(base, b"x"),
            &options(d.path()),
            &mut HashMap::new(),
            ImageProgress::default(),
            &mut |_| {},
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains("cannot be pulled") && err.contains("benchlab base --suite bookworm"), "{err}");
        assert!(
            !engine.calls().iter().any(|c| c.starts_with("build ")),
            "nothing is built on a missing base"
        );
    }
}
