//! The native engine as a cell backend: admits stdio cells only (and swaps a CPython runtime for
//! the host's minor, `runtime`), prepares a server by installing it into the native cache (the
//! entry stands for the image in the record), runs a cell in a lab cgroup and reports what
//! confined it (no container sandbox) with its quiet-host check (the before probe here, which
//! `--require-quiet` may turn into a wait and a refusal; the during window in `cell`), and removes
//! stale lab cgroups of dead runs.

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use super::{CellLimits, NativeEngine};
use crate::backend::{
    Admission, Backend, BackendConfig, BackendKind, CellEvent, CellOutcome, EngineError, ImageFacts,
    ImageProgress, ImageState, Leftover, PrepareEvent, Prepared, Topology,
};
use crate::host::quiet::QuietCheck;
use crate::recipe::ImagePlan;
use crate::record::manifest::{BaseManifest, EngineManifest};
use crate::spec::{CellJob, Failure, FailureReason, Sandbox};

/// Cells as host processes. See the module documentation.
pub struct NativeBackend {
    pub engine: NativeEngine,
    config: BackendConfig,
    /// The host interpreter's `major.minor`, asked once.
    host_python: Mutex<Option<String>>,
}

impl NativeBackend {
    pub fn new(engine: NativeEngine, config: BackendConfig) -> NativeBackend {
        NativeBackend { engine, config, host_python: Mutex::default() }
    }
}

impl Backend for NativeBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Native
    }

    async fn describe(&self) -> Result<EngineManifest, EngineError> {
        Ok(self.engine.describe())
    }

    fn topology(&self) -> Topology {
        Topology::host()
    }

    async fn admit(
        &self,
        a: Admission<'_>,
        image: &mut ImagePlan,
        deviations: &mut Vec<String>,
    ) -> Result<(), EngineError> {
        if image.http.is_some() {
            return Err(EngineError::Refused {
                cell: a.cell_id.to_string(),
                detail: "the native engine runs stdio servers only; use --engine docker for HTTP cells"
                    .into(),
            });
        }
        if !a.services.is_empty() {
            return Err(EngineError::Refused {
                cell: a.cell_id.to_string(),
                detail: "the native engine starts no backing services ([[service]]); use --engine docker"
                    .into(),
            });
        }
        if a.want.no_bytecode {
            // The native cache installs once and is reused: after a first start wrote the
            // bytecode, no later cell would start without it.
            return Err(EngineError::Refused {
                cell: a.cell_id.to_string(),
                detail: "`bytecode = \"none\"` needs a fresh image for every cell, which the native engine's shared install cache is not; use --engine docker".into(),
            });
        }
        super::runtime::adapt(&a, image, deviations, &self.host_python).await
    }

    async fn state(&self, _: &ImagePlan) -> ImageState {
        ImageState::Native
    }

    /// Installs (or finds in the cache) the server from its lockfile.
    async fn prepare(
        &self,
        plan: &ImagePlan,
        progress: ImageProgress,
        emit: &mut (dyn FnMut(PrepareEvent) + Send),
    ) -> Result<Prepared, EngineError> {
        let started = Instant::now();
        let label = format!("native {} {} ({})", plan.family, plan.version, plan.runtime_name);
        if plan.build.is_some() {
            emit(PrepareEvent::ImageBuilding {
                reference: format!("{label}: installing or finding in the cache"),
                progress,
            });
        }
        let env = self
            .engine
            .prepare(plan, &self.config.ca_bundle, &mut |line| {
                emit(PrepareEvent::BuildLog { line: line.to_string() })
            })
            .await?;
        emit(PrepareEvent::Ready {
            what: "native server",
            reference: match env.dir.as_os_str().is_empty() {
                true => label.clone(),
                false => format!("{label} in {}", env.dir.display()),
            },
            cached: env.cached,
            seconds: started.elapsed().as_secs_f64(),
        });
        Ok(Prepared {
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
            launch: Some(env.launch),
            // What an image says of itself, the cache entry says natively.
            facts: Some(ImageFacts {
                runtime_version: Some(env.runtime_version),
                packages: env.packages,
                system_packages: Vec::new(),
            }),
        })
    }

    async fn run_cell(
        &self,
        job: &CellJob,
        prepared: &Prepared,
        on_event: &mut (dyn FnMut(CellEvent) + Send),
    ) -> CellOutcome {
        let mut on_event = |e| on_event(CellEvent::Driver(e));
        let on_event = &mut on_event;
        let mut spec = job.driver.clone();
        if let Some(launch) = &prepared.launch {
            spec.server = launch.clone();
        }
        let limits = CellLimits {
            server_cpus: job.placement.server_cpus.clone(),
            driver_cpus: job.placement.driver_cpus.clone(),
            memory_limit: Some(job.placement.memory_limit_bytes),
            pids_limit: job.sandbox.pids_limit,
        };
        let facts = prepared.facts.clone().unwrap_or_default();
        // Natively there is no container sandbox: the record says what confined the server.
        let sandbox = Some(Sandbox::none());
        let mut check = QuietCheck::new(Path::new("/"), &[&limits.server_cpus, &limits.driver_cpus]);
        if let Err(detail) = check.before(job.require_quiet_s).await {
            return CellOutcome {
                failure: Some(Failure::new(FailureReason::NoisyHost, detail)),
                facts,
                sandbox,
                quiet: Some(check.finish()),
                ..CellOutcome::default()
            };
        }
        let mut outcome =
            match self.engine.run_cell(spec, &limits, &job.benchlab_exe, job.time_limit(), on_event).await {
                Ok(run) => {
                    check.set_during(run.quiet_during.clone());
                    let failure = run.oom_killed.then(|| {
                        Failure::new(
                            FailureReason::Oom,
                            format!(
                                "the server's cgroup was killed for exceeding its memory limit ({} MiB)",
                                job.placement.memory_limit_bytes >> 20
                            ),
                        )
                    });
                    CellOutcome { driver: run.outcome, failure, facts, sandbox, ..CellOutcome::default() }
                }
                Err(e) => CellOutcome { sandbox, ..CellOutcome::engine_error(e, facts) },
            };
        outcome.quiet = Some(check.finish());
        outcome
    }

    async fn start(&self, _run_id: &str) -> Result<Vec<Leftover>, EngineError> {
        // Stale cgroups hold no process, so their run is unknown: they are removed, not reported.
        self.engine.remove_leftovers();
        Ok(Vec::new())
    }

    async fn abandon(&self, _run_id: &str) -> usize {
        // A native cell's processes and cgroup go with its dropped future; stragglers here.
        self.engine.remove_leftovers()
    }
}
