//! The Slurm backend: every cell a Slurm job. Images are built here once by the node engine's
//! own backend and pushed to a registry (`registry`), so nodes pull them by digest; cells handed
//! over together go in as one job array (`submit`) asking for the CPUs the cell's placement needs
//! (one core shared, two cores split, the whole node for load cells) and a time limit from the
//! cell's own bound. On the node the lab's frozen binary runs as a worker (`worker`): it runs the
//! cell through the node's own backend on the CPUs Slurm allocated and writes the outcome into
//! the shared job folder (`jobs`), where this side reads it back; only the orchestrator appends
//! records. A node that dies gets the job requeued once; a job that ends without an outcome is a
//! failed cell named by its Slurm state. An interruption cancels the run's jobs (`scancel`); the
//! nodes' epilog removes their containers by job label. The Slurm programs live in `ctl`.

pub mod ctl;
pub mod jobs;
pub mod registry;
pub mod status;
mod submit;
pub mod worker;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ctl::{JobRow, NodeInfo, PartitionInfo, Slurm};
use jobs::{cell_dir, WorkerJob};
use registry::Registry;

use super::containers::docker::DockerEngine;
use super::containers::owners::owner_alive;
use super::containers::{ContainersBackend, Engine};
use super::native::NativeBackend;
use super::{
    Admission, Backend, BackendConfig, BackendKind, CellEvent, CellOutcome, EngineError, ImageProgress,
    ImageState, Leftover, PrepareEvent, Prepared, Queue, Topology,
};
use crate::recipe::ImagePlan;
use crate::record::manifest::EngineManifest;
use crate::spec::CellJob;

/// How the lab reaches a Slurm cluster (the command line's `--partition`, `--slurm-opt`, …).
#[derive(Debug, Clone, Default)]
pub struct SlurmOptions {
    /// The partition; the cluster's default when absent.
    pub partition: Option<String>,
    /// More sbatch options, passed as they are.
    pub sbatch: Vec<String>,
    /// The cluster's slurm.conf (`SLURM_CONF`).
    pub conf: Option<PathBuf>,
    /// A registry every node can pull from; the lab's own on loopback when absent.
    pub registry: Option<String>,
    /// Where job folders go (a file system every node sees); `<work>/slurm-jobs` when absent.
    pub jobs_dir: Option<PathBuf>,
}

/// This machine's host name (as a job comment and a worker without SLURMD_NODENAME name it).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string()
}

/// Where runs' job folders go: `--slurm-dir`, else `<work>/slurm-jobs`.
pub fn jobs_root(opts: &SlurmOptions, work_dir: &std::path::Path) -> PathBuf {
    opts.jobs_dir.clone().unwrap_or_else(|| work_dir.join("slurm-jobs"))
}

/// The backend a node runs its cells with; the orchestrator's copy prepares images.
#[allow(clippy::large_enum_variant)] // one per run
pub enum NodeBackend {
    Containers(ContainersBackend<DockerEngine>),
    Native(NativeBackend),
}

macro_rules! node {
    ($self:expr, $b:ident => $e:expr) => {
        match $self {
            NodeBackend::Containers($b) => $e,
            NodeBackend::Native($b) => $e,
        }
    };
}

impl NodeBackend {
    pub fn kind(&self) -> BackendKind {
        node!(self, b => b.kind())
    }
}

/// The run a backend is submitting for: its id and job folder.
struct RunJobs {
    id: String,
    dir: PathBuf,
}

/// Cells on a Slurm cluster. See the module documentation.
pub struct SlurmBackend {
    slurm: Slurm,
    opts: SlurmOptions,
    cluster: String,
    version: String,
    partition: PartitionInfo,
    nodes: Vec<NodeInfo>,
    node: NodeBackend,
    config: BackendConfig,
    registry: tokio::sync::Mutex<Option<Registry>>,
    /// Local image reference → (what nodes pull, its digest).
    pushed: Mutex<HashMap<String, (String, String)>>,
    run: Mutex<Option<RunJobs>>,
    /// Array job ids submitted by this run.
    submitted: Mutex<Vec<String>>,
    pending: Mutex<Vec<submit::Pending>>,
    queue: tokio::sync::Mutex<(Option<Instant>, Vec<JobRow>)>,
}

impl SlurmBackend {
    /// Checks that the cluster answers, the partition exists and the sbatch options are
    /// accepted, before anything is built. `node` prepares images here and names the engine
    /// nodes run cells with.
    pub async fn connect(
        opts: SlurmOptions,
        node: NodeBackend,
        config: BackendConfig,
    ) -> Result<SlurmBackend, EngineError> {
        const START: &str = "start the lab's two-node cluster with `scripts/slurm-up.sh` and pass the \
                             --slurm-conf it prints, or point --slurm-conf (or SLURM_CONF) at your cluster's";
        if let Some(conf) = opts.conf.as_ref().filter(|c| !c.exists()) {
            // The client would retry a missing file for a minute before it says so.
            return Err(EngineError::op(
                "read",
                conf.display().to_string(),
                format!("no such file\n  {START}"),
            ));
        }
        let slurm = Slurm { conf: opts.conf.clone() };
        let version =
            slurm.version().await.map_err(|e| EngineError::op("find", "Slurm", format!("{e}\n  {START}")))?;
        let conf_hint = match &opts.conf {
            Some(c) => format!("SLURM_CONF={}", c.display()),
            None => "the client's default slurm.conf".into(),
        };
        let settings = slurm.config().await.map_err(|e| {
            EngineError::op(
                "reach",
                "the Slurm controller",
                format!("{e}\n  no controller answers with {conf_hint}: {START}"),
            )
        })?;
        let cluster = settings.get("ClusterName").cloned().unwrap_or_else(|| "unknown".into());
        let partitions = slurm.partitions().await?;
        let partition = match &opts.partition {
            Some(p) => partitions.iter().find(|x| &x.name == p),
            None => partitions.iter().find(|x| x.default).or(partitions.first()),
        }
        .cloned()
        .ok_or_else(|| EngineError::Refused {
            cell: "every cell".into(),
            detail: format!(
                "cluster {cluster} has no partition {}; it has: {}",
                opts.partition.as_deref().unwrap_or("(none given, and no default)"),
                partitions.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        })?;
        let nodes: Vec<NodeInfo> =
            slurm.nodes().await?.into_iter().filter(|n| n.partitions.contains(&partition.name)).collect();
        let mut probe = vec![format!("--partition={}", partition.name)];
        probe.extend(opts.sbatch.iter().cloned());
        slurm.test_submit(&probe).await.map_err(|e| EngineError::Refused {
            cell: "every cell".into(),
            detail: format!("sbatch refuses the options {probe:?}: {e}"),
        })?;
        Ok(SlurmBackend {
            slurm,
            opts,
            cluster,
            version,
            partition,
            nodes,
            node,
            config,
            registry: Default::default(),
            pushed: Default::default(),
            run: Default::default(),
            submitted: Default::default(),
            pending: Default::default(),
            queue: Default::default(),
        })
    }

    /// The cluster, partition and nodes, as `plan` and the run's first line show them.
    pub fn summary(&self) -> String {
        let nodes: Vec<String> =
            self.nodes.iter().map(|n| format!("{} ({} CPU, {})", n.name, n.cpus, n.state)).collect();
        format!(
            "Slurm {} cluster {}, partition {}: {}; cells run on the nodes' {} engine",
            self.version,
            self.cluster,
            self.partition.name,
            nodes.join(", "),
            self.node.kind().as_str()
        )
    }

    /// How many cells like this the partition runs at once: one a node for a load cell (the
    /// whole node), otherwise as many as each node's CPUs hold.
    pub fn concurrent_cells(&self, shared: bool, load: bool) -> usize {
        let need = if shared { 1 } else { 2 };
        let n: u32 =
            self.nodes.iter().map(|n| if load { (n.cpus >= need) as u32 } else { n.cpus / need }).sum();
        (n as usize).max(1)
    }

    fn jobs_root(&self) -> PathBuf {
        jobs_root(&self.opts, &self.config.work_dir)
    }

    /// The registry to push to: the user's, or the lab's own, started at the first push.
    async fn registry_address(&self) -> Result<String, EngineError> {
        let mut r = self.registry.lock().await;
        if r.is_none() {
            *r = Some(match &self.opts.registry {
                Some(a) => Registry::given(a).await?,
                None => Registry::start_own(&self.config.work_dir).await?,
            });
        }
        Ok(r.as_ref().expect("set above").address.clone())
    }

    /// Pushes a container image to the registry once; what nodes pull, and its digest.
    async fn push(&self, prepared: &Prepared) -> Result<(String, String), EngineError> {
        if let Some(p) = self.pushed.lock().expect("not poisoned").get(&prepared.reference) {
            return Ok(p.clone());
        }
        let NodeBackend::Containers(b) = &self.node else {
            return Err(EngineError::op("push", &prepared.reference, "only container images are pushed"));
        };
        let address = self.registry_address().await?;
        let repo = registry::repository(&address, &prepared.reference);
        let tag = prepared.reference.rsplit_once(':').map_or("latest", |(_, t)| t);
        let pull = b.engine.push(&prepared.id, &repo, tag).await?;
        let digest = pull.rsplit_once('@').map(|(_, d)| d.to_string()).unwrap_or_default();
        let entry = (pull, digest);
        self.pushed.lock().expect("not poisoned").insert(prepared.reference.clone(), entry.clone());
        Ok(entry)
    }

    /// Cancels the jobs of benchlabs on this host that died without cancelling theirs (`kill -9`):
    /// their comment names the owner, which is gone.
    async fn cancel_orphans(&self) -> Vec<Leftover> {
        let Ok(rows) = self.slurm.queue().await else { return Vec::new() };
        let host = hostname();
        let mut found: Vec<Leftover> = Vec::new();
        let mut cancelled = std::collections::BTreeSet::new();
        for r in rows.iter().filter(|r| !ctl::is_final(&r.state)) {
            let Some((run, h, token)) = submit::parse_comment(&r.comment) else { continue };
            if h != host || owner_alive(token) || !cancelled.insert(r.array_job_id.clone()) {
                continue;
            }
            if self.slurm.cancel(std::slice::from_ref(&r.array_job_id)).await.is_ok() {
                let owner = format!("{h}:{token}");
                match found.iter_mut().find(|l| l.owner == owner) {
                    Some(l) => l.removed += 1,
                    None => found.push(Leftover { run_id: run.into(), owner, removed: 1 }),
                }
            }
        }
        self.wait_ended(&cancelled.into_iter().collect::<Vec<_>>()).await;
        found
    }

    /// Waits until these arrays' jobs have ended (their epilogs remove their containers), at
    /// most 30 s.
    async fn wait_ended(&self, arrays: &[String]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let rows = self.slurm.queue().await.unwrap_or_default();
            if !rows.iter().any(|r| arrays.contains(&r.array_job_id) && !ctl::is_final(&r.state)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Fresh squeue rows, at most every 400 ms however many cells ask.
    async fn rows(&self) -> Vec<JobRow> {
        let mut q = self.queue.lock().await;
        if q.0.is_none_or(|at| at.elapsed() > Duration::from_millis(400)) {
            if let Ok(rows) = self.slurm.queue().await {
                q.1 = rows;
            }
            q.0 = Some(Instant::now());
        }
        q.1.clone()
    }
}

impl Backend for SlurmBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Slurm
    }

    fn runs(&self, kind: BackendKind) -> bool {
        kind == BackendKind::Slurm || kind == self.node.kind()
    }

    async fn describe(&self) -> Result<EngineManifest, EngineError> {
        // Each cell's record names its node's own engine; this line stands when a cell never
        // reached a node.
        Ok(EngineManifest {
            kind: "slurm".into(),
            version: self.version.clone(),
            api_version: format!("cluster {} partition {}", self.cluster, self.partition.name),
        })
    }

    fn topology(&self) -> Topology {
        Topology::host()
    }

    fn queue(&self) -> Option<Queue> {
        Some(Queue { depth: 1000, at_once: self.concurrent_cells(true, false) })
    }

    async fn admit(
        &self,
        a: Admission<'_>,
        image: &mut ImagePlan,
        deviations: &mut Vec<String>,
    ) -> Result<(), EngineError> {
        let cell = a.cell_id.to_string();
        let (placement, limit) = (a.placement.clone(), a.time_limit);
        node!(&self.node, b => b.admit(a, image, deviations).await)?;
        let need = if placement.shared { 1 } else { 2 };
        let widest = self.nodes.iter().map(|n| n.cpus).max().unwrap_or(0);
        if widest < need {
            return Err(EngineError::Refused {
                cell,
                detail: format!(
                    "its placement ({}) needs {need} CPUs on one node, and the widest node of partition {} \
                     has {widest}: run a scenario whose placement mode is \"shared\" (one core for server \
                     and driver), or a partition with bigger nodes",
                    if placement.shared { "shared" } else { "split: server and driver on separate cores" },
                    self.partition.name
                ),
            });
        }
        let seconds = limit.as_secs() + submit::SETUP_SECONDS;
        if let Some(max) = self.partition.max_time_s.filter(|&m| m < seconds) {
            return Err(EngineError::Refused {
                cell,
                detail: format!(
                    "it may take up to {seconds} s with its setup, beyond partition {}'s time limit of {max} s",
                    self.partition.name
                ),
            });
        }
        Ok(())
    }

    async fn state(&self, image: &ImagePlan) -> ImageState {
        node!(&self.node, b => b.state(image).await)
    }

    async fn prepare(
        &self,
        image: &ImagePlan,
        progress: ImageProgress,
        emit: &mut (dyn FnMut(PrepareEvent) + Send),
    ) -> Result<Prepared, EngineError> {
        let prepared = node!(&self.node, b => b.prepare(image, progress, emit).await)?;
        if let NodeBackend::Containers(_) = &self.node {
            let started = Instant::now();
            let (pull, _) = self.push(&prepared).await?;
            emit(PrepareEvent::Ready {
                what: "pushed image",
                reference: pull,
                cached: false,
                seconds: started.elapsed().as_secs_f64(),
            });
        }
        Ok(prepared)
    }

    async fn run_cell(
        &self,
        job: &CellJob,
        prepared: &Prepared,
        on_event: &mut (dyn FnMut(CellEvent) + Send),
    ) -> CellOutcome {
        let (pull, digest) = match &self.node {
            NodeBackend::Containers(_) => match self.push(prepared).await {
                Ok((p, d)) => (Some(p), Some(d)),
                Err(e) => return CellOutcome::engine_error(e, Default::default()),
            },
            NodeBackend::Native(_) => (None, None),
        };
        let Some(run_dir) = self.run.lock().expect("not poisoned").as_ref().map(|r| r.dir.clone()) else {
            return CellOutcome::engine_error(
                "the Slurm backend was not started for a run",
                Default::default(),
            );
        };
        let dir = cell_dir(&run_dir, job.index, &job.cell_id);
        let worker = WorkerJob {
            job: job.clone(),
            prepared: prepared.clone(),
            node_engine: self.node.kind(),
            pull,
            digest,
            ca_bundle: self.config.ca_bundle.clone(),
            work_dir: self.config.work_dir.clone(),
            lab_volume_bytes: self.config.lab_volume_bytes,
            cluster: self.cluster.clone(),
            partition: self.partition.name.clone(),
        };
        submit::run(self, &run_dir, dir, worker, on_event).await
    }

    async fn start(&self, run_id: &str) -> Result<Vec<Leftover>, EngineError> {
        let dir = self.jobs_root().join(run_id);
        std::fs::create_dir_all(dir.join("cells"))
            .map_err(|source| EngineError::Io { what: format!("create {}", dir.display()), source })?;
        *self.run.lock().expect("not poisoned") = Some(RunJobs { id: run_id.to_string(), dir });
        let mut found = self.cancel_orphans().await;
        // What dead runs left on this host's engine goes as it does locally; on the nodes the
        // epilog removes a cancelled job's containers.
        found.extend(node!(&self.node, b => b.start(run_id).await)?);
        Ok(found)
    }

    async fn abandon(&self, run_id: &str) -> usize {
        let ids = std::mem::take(&mut *self.submitted.lock().expect("not poisoned"));
        let _ = self.slurm.cancel(&ids).await;
        self.wait_ended(&ids).await;
        let removed = node!(&self.node, b => b.abandon(run_id).await);
        ids.len() + removed
    }
}
