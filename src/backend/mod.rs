//! Where a cell runs: one trait at the level of a whole cell. A backend describes its engine,
//! offers the CPUs cells may be placed on, admits a cell (or says why it cannot run it) before
//! anything is built, prepares what a cell needs (an image, a native install), runs one cell and
//! returns its outcome as a value, and abandons or sweeps what its cells left behind.
//!
//! Implementations: `containers` (a container engine through the `Engine` trait: bollard's Docker,
//! or the fake engine of unit tests), `native` (host processes in lab cgroups, cgroups-rs + nix)
//! and `scripted` (canned outcomes, for the scheduler's unit tests). The scheduler sees only this
//! trait; [`AnyBackend`] is the closed set the CLI chooses from, never a branch in the scheduler.
//! Everything that crosses the seam (`spec::CellJob` in, [`Prepared`] and [`CellOutcome`] out) is a
//! serde value, so a cluster backend can ship it to another machine and back.
//!
//! It knows nothing of scenarios or records: it never appends a record (the orchestrator does, so
//! a run keeps one hash chain) and it does not know MCP (the driver does).
//! docs/ARCHITECTURE.md shows the path of one cell through it.

pub mod containers;
pub mod link;
pub mod native;
pub mod scripted;
pub mod slurm;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::recipe::{ImagePlan, RecipeBook, ServerWant};
use crate::record::manifest::{BaseManifest, EngineManifest, HostManifest, Package};
use crate::record::Dispatch;
use crate::spec::{CellJob, DriverEvent, DriverOutcome, Failure, Placement, Sandbox, ServerLaunch};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("no container engine answers at {endpoint}: {detail}\n  start one: `scripts/engine.sh` (installs docker.io and starts dockerd), or `dockerd &`")]
    Unreachable { endpoint: String, detail: String },
    #[error("image {reference} cannot be pulled: {detail}\n  without a registry, bootstrap a base here instead: `benchlab base --suite bookworm`, and name the suite in the recipe's runtime (suite = \"bookworm\") in place of base_image")]
    Pull { reference: String, detail: String },
    #[error("building image {reference} failed at step {step:?}: {detail}\n--- last lines of the build log ---\n{tail}")]
    Build { reference: String, step: String, detail: String, tail: String },
    #[error("{op} {object}: {detail}")]
    Op { op: &'static str, object: String, detail: String },
    /// The backend cannot run this cell as the scenario asks (bad input for this backend: exit 2).
    #[error("cell {cell}: {detail}")]
    Refused { cell: String, detail: String },
    #[error("bootstrapping base {reference}: {source}")]
    Bootstrap { reference: String, source: crate::recipe::base::BootstrapError },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

impl EngineError {
    pub fn op(op: &'static str, object: impl Into<String>, detail: impl std::fmt::Display) -> Self {
        EngineError::Op { op, object: object.into(), detail: detail.to_string() }
    }
}

/// The backends there are. A scenario's server may ask for one by its engine name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// A container engine (Docker): server and sidecar containers.
    Containers,
    /// Host processes in lab cgroups.
    Native,
    /// Canned outcomes for unit tests of the scheduler.
    Scripted,
    /// A Slurm cluster: each cell a job, run on a node by that node's own backend.
    Slurm,
}

impl BackendKind {
    /// The name a scenario and the CLI use for it.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Containers => "docker",
            BackendKind::Native => "native",
            BackendKind::Scripted => "scripted",
            BackendKind::Slurm => "slurm",
        }
    }

    /// What to do when a cell asks for this backend and it is not available.
    pub fn missing_hint(self) -> &'static str {
        match self {
            BackendKind::Containers => "start one (`scripts/engine.sh`) or drop the server's `engine`",
            BackendKind::Native => {
                "run as root on a host with the cpuset, memory and pids cgroup controllers"
            }
            BackendKind::Scripted => "only unit tests have it",
            BackendKind::Slurm => {
                "run with --backend slurm against a cluster (`scripts/slurm-up.sh` starts one here)"
            }
        }
    }
}

/// The CPUs a backend offers cells and the physical core of each (`(package, core)`), so the
/// scheduler can give parallel cells slots that never share a core.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    pub cpus: Vec<u32>,
    pub cores: Vec<(u32, (u32, u32))>,
}

impl Topology {
    /// This host's CPUs (the process's affinity) and their cores from sysfs.
    pub fn host() -> Topology {
        let cpus = crate::placement::available_cpus();
        let cores = cpus.iter().map(|&c| (c, crate::placement::core_of(c))).collect();
        Topology { cpus, cores }
    }

    /// The core of a CPU; a CPU of unknown topology is a core of its own.
    pub fn core_of(&self, cpu: u32) -> (u32, u32) {
        self.cores.iter().find(|(c, _)| *c == cpu).map_or((u32::MAX, cpu), |(_, k)| *k)
    }
}

/// Where a build stands among the images of its run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ImageProgress {
    pub index: usize,
    pub total: usize,
    /// Seconds left if every remaining image needs a build as long as the mean one so far.
    pub eta_s: Option<f64>,
}

/// What a backend reports while it makes what cells need (bases, images, native installs, locks).
#[derive(Debug, Clone, PartialEq)]
pub enum PrepareEvent {
    BaseBootstrapping {
        reference: String,
        suite: String,
    },
    /// A base (`what = "base"`), a recipe image (`"image"`), a native install (`"native server"`)
    /// or a lock (`"lock"`) is ready: found with the same inputs (`cached`), or just made.
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
}

/// Whether what a cell needs exists already (for `benchlab plan`, which makes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImageState {
    /// The engine holds it with the same input hash: a cache hit.
    Cached,
    /// It must be built (its base exists).
    Build,
    /// Its base must be bootstrapped (or pulled) first, then it is built.
    BuildWithBase,
    /// No engine answered: unknown.
    Unknown,
    /// A native cell's server: installed into the native cache at run time (or found there).
    Native,
}

/// What an image (or a native install) says about itself, for the record's environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImageFacts {
    pub runtime_version: Option<String>,
    pub packages: Vec<Package>,
    pub system_packages: Vec<Package>,
}

/// What a cell needs, ready: an image in an engine, or a native install standing for one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    /// The image reference (`native:<dir>` for a native install).
    pub reference: String,
    pub id: String,
    pub input_hash: String,
    pub base: BaseManifest,
    /// Whether this run made it (false: found with the same input hash, or the bare base).
    pub built: bool,
    /// The launch that replaces the plan's inside the prepared environment (native installs).
    pub launch: Option<ServerLaunch>,
    /// Facts known when it was prepared (native installs); containers learn them at the first cell.
    pub facts: Option<ImageFacts>,
}

/// What one cell produced, as a value: the driver's outcome, a failure the backend saw that
/// overrides the driver's (the kernel's OOM kill, an engine error), and the facts of where it ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CellOutcome {
    pub driver: DriverOutcome,
    pub failure: Option<Failure>,
    pub facts: ImageFacts,
    /// The confinement the server really had (natively: none).
    pub sandbox: Option<Sandbox>,
    /// Set by a cluster backend: the node the cell ran on, as its records name it.
    #[serde(default)]
    pub ran_on: Option<RanOn>,
    /// The quiet-host check around the cell (the backend that ran it on its host takes it).
    #[serde(default)]
    pub quiet: Option<crate::host::Quiet>,
    /// Set by a cluster's worker: the speed fingerprint of the node that ran the cell.
    #[serde(default)]
    pub fingerprint: Option<crate::host::Fingerprint>,
    /// The backing services as the backend saw them: image, version, CPU and memory over the
    /// driver's window, and an exit before the cell's end.
    #[serde(default)]
    pub services: Vec<crate::spec::ServiceUsage>,
}

/// Where a cluster ran a cell: its dispatch (node, job ids, CPUs, attempts) and, when a worker
/// reached the node, the node's own host and engine and the placement it really had (for the
/// record's environment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RanOn {
    pub dispatch: Dispatch,
    pub node: Option<NodeFacts>,
}

/// What a node says of itself when its worker runs a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFacts {
    pub host: HostManifest,
    pub engine: EngineManifest,
    pub placement: Placement,
}

/// What a backend reports while it runs a cell: the driver's events, and where a cluster's
/// job stands.
#[derive(Debug, Clone)]
pub enum CellEvent {
    Driver(DriverEvent),
    /// Submitted; waiting for the cluster to start it.
    Queued {
        job: String,
    },
    /// Started on a node with these CPUs.
    Running {
        node: String,
        cpus: String,
    },
    /// The node failed under it and the cluster put it back in the queue.
    Requeued {
        node: String,
        reason: String,
    },
}

impl CellOutcome {
    /// A cell the backend could not run at all.
    pub fn engine_error(e: impl std::fmt::Display, facts: ImageFacts) -> CellOutcome {
        CellOutcome {
            failure: Some(Failure::new(crate::spec::FailureReason::EngineError, e.to_string())),
            facts,
            ..CellOutcome::default()
        }
    }
}

/// What every backend is made with: where fetch stages find their CA bundle, where scratch
/// space (bases, owner entries) goes, and the size of a cell's shared `/lab` folder.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendConfig {
    pub ca_bundle: PathBuf,
    pub work_dir: PathBuf,
    pub lab_volume_bytes: u64,
}

/// What a dead run left behind and a new one removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Leftover {
    /// The run the dead benchlab was writing.
    pub run_id: String,
    /// Its owner token.
    pub owner: String,
    pub removed: usize,
}

/// A cluster's queue, as the scheduler sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queue {
    /// Cells handed over at once.
    pub depth: usize,
    /// Cells the cluster runs at the same time (for the time estimate).
    pub at_once: usize,
}

/// A cell about to be admitted: what the scenario asked and the recipes to answer it.
pub struct Admission<'a> {
    pub cell_id: &'a str,
    pub want: &'a ServerWant,
    pub recipes: &'a RecipeBook,
    /// Where the plan put it (a cluster reads the CPUs it needs from this).
    pub placement: &'a Placement,
    /// A generous bound on the whole cell.
    pub time_limit: std::time::Duration,
    /// The backing services the cell starts beside its server.
    pub services: &'a [crate::spec::ServiceSpec],
}

/// One place cells can run. See the module documentation.
#[allow(async_fn_in_trait)]
pub trait Backend {
    fn kind(&self) -> BackendKind;
    /// Whether it runs cells whose server names this engine (a cluster runs its nodes' kind).
    fn runs(&self, kind: BackendKind) -> bool {
        self.kind() == kind
    }
    /// The engine line of every record of its cells.
    async fn describe(&self) -> Result<EngineManifest, EngineError>;
    /// The CPUs it offers cells.
    fn topology(&self) -> Topology;
    /// For a backend that queues and places cells itself (a cluster): how many cells it takes
    /// at once and how many it runs at once. `None` (local backends): the scheduler places cells
    /// on the topology's slots.
    fn queue(&self) -> Option<Queue> {
        None
    }
    /// Checks a cell before anything is built; may swap its image for one this backend can run
    /// (adding a deviation line for the record), or refuse it saying why.
    async fn admit(
        &self,
        a: Admission<'_>,
        image: &mut ImagePlan,
        deviations: &mut Vec<String>,
    ) -> Result<(), EngineError>;
    /// Whether what a cell needs is ready, making nothing.
    async fn state(&self, image: &ImagePlan) -> ImageState;
    /// Makes (or finds) what cells of this image need.
    async fn prepare(
        &self,
        image: &ImagePlan,
        progress: ImageProgress,
        emit: &mut (dyn FnMut(PrepareEvent) + Send),
    ) -> Result<Prepared, EngineError>;
    /// Runs one cell to its end; never fails: what went wrong is in the outcome.
    async fn run_cell(
        &self,
        job: &CellJob,
        prepared: &Prepared,
        on_event: &mut (dyn FnMut(CellEvent) + Send),
    ) -> CellOutcome;
    /// At the start of a run: removes what runs that died without cleaning up left behind (their
    /// owners are gone) and registers this run as an owner until the backend is dropped.
    async fn start(&self, run_id: &str) -> Result<Vec<Leftover>, EngineError>;
    /// Removes everything of this run still running (an interruption); returns how many.
    async fn abandon(&self, run_id: &str) -> usize;
}

/// The backends the CLI can choose from.
pub enum AnyBackend {
    Containers(containers::ContainersBackend<containers::docker::DockerEngine>),
    Native(native::NativeBackend),
    Scripted(scripted::ScriptedBackend),
    Slurm(Box<slurm::SlurmBackend>),
}

macro_rules! each {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            AnyBackend::Containers($b) => $e,
            AnyBackend::Native($b) => $e,
            AnyBackend::Scripted($b) => $e,
            AnyBackend::Slurm($b) => $e,
        }
    };
}

impl Backend for AnyBackend {
    fn kind(&self) -> BackendKind {
        each!(self, b => b.kind())
    }
    fn runs(&self, kind: BackendKind) -> bool {
        each!(self, b => b.runs(kind))
    }
    async fn describe(&self) -> Result<EngineManifest, EngineError> {
        each!(self, b => b.describe().await)
    }
    fn topology(&self) -> Topology {
        each!(self, b => b.topology())
    }
    fn queue(&self) -> Option<Queue> {
        each!(self, b => b.queue())
    }
    async fn admit(
        &self,
        a: Admission<'_>,
        image: &mut ImagePlan,
        deviations: &mut Vec<String>,
    ) -> Result<(), EngineError> {
        each!(self, b => b.admit(a, image, deviations).await)
    }
    async fn state(&self, image: &ImagePlan) -> ImageState {
        each!(self, b => b.state(image).await)
    }
    async fn prepare(
        &self,
        image: &ImagePlan,
        progress: ImageProgress,
        emit: &mut (dyn FnMut(PrepareEvent) + Send),
    ) -> Result<Prepared, EngineError> {
        each!(self, b => b.prepare(image, progress, emit).await)
    }
    async fn run_cell(
        &self,
        job: &CellJob,
        prepared: &Prepared,
        on_event: &mut (dyn FnMut(CellEvent) + Send),
    ) -> CellOutcome {
        each!(self, b => b.run_cell(job, prepared, on_event).await)
    }
    async fn start(&self, run_id: &str) -> Result<Vec<Leftover>, EngineError> {
        each!(self, b => b.start(run_id).await)
    }
    async fn abandon(&self, run_id: &str) -> usize {
        each!(self, b => b.abandon(run_id).await)
    }
}
