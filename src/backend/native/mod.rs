//! The native engine: runs a cell's server and driver as host processes instead of containers —
//! servers installed into a content-hashed cache (`cache`), the server side in a lab cgroup
//! (`cgroup`), one cell at a time (`cell`). Stdio cells only. It decides nothing about what to
//! run; the orchestrator (or `benchlab measure`) hands it plans and specs.
//!
//! The cell-level backend the orchestrator sees is `backend::NativeBackend`; underneath it:
//!
//! ```text
//! let engine = NativeEngine::new()?;                      // root + cgroup controllers, or an error saying what to do
//! engine.describe() -> EngineManifest                     // kind "native", kernel, cgroup version
//! engine.remove_leftovers() -> usize                      // stale benchlab/* cgroups of killed labs
//! let env = engine.prepare(&plan, ca_bundle, &mut log).await?;      // install (or find) the server
//! spec.server = env.launch;                               // the install's launch
//! let run = engine.run_cell(spec, &CellLimits { .. }, benchlab_exe, time_limit, &mut on_event).await?;
//! // run.outcome: DriverOutcome, run.oom_killed: bool, run.memory_peak: Option<u64> (cgroup)
//! ```
//!
//! `NativeEnv` carries what the record's environment needs in place of image facts: the input
//! hash, runtime version, interpreter and installed packages.

pub mod backend;
pub mod cache;
pub mod cell;
pub mod cgroup;
pub mod runtime;

use std::path::Path;
use std::time::Duration;

pub use backend::NativeBackend;
pub use cache::NativeEnv;
pub use cell::NativeRun;
pub use cgroup::NativeCgroup;

use crate::backend::EngineError;
use crate::recipe::ImagePlan;
use crate::record::manifest::EngineManifest;
use crate::spec::{DriverEvent, DriverSpec};

/// The limits of one native cell.
#[derive(Debug, Clone, PartialEq)]
pub struct CellLimits {
    /// The server side's CPUs (cpuset list, e.g. "1").
    pub server_cpus: String,
    /// The driver's CPUs.
    pub driver_cpus: String,
    /// Memory limit of the server side in bytes, swap disabled.
    pub memory_limit: Option<u64>,
    /// The most processes and threads the server side may hold.
    pub pids_limit: Option<u32>,
}

/// Runs cells natively; see the module documentation.
#[derive(Debug, Clone)]
pub struct NativeEngine {
    /// False only for [`NativeEngine::pinned_only`]: affinity, no cgroup.
    cgroups: bool,
}

impl NativeEngine {
    /// An engine that places every server in its own lab cgroup; fails (saying what to do) when
    /// this process cannot create one.
    pub fn new() -> Result<NativeEngine, EngineError> {
        cgroup::probe().map_err(|e| {
            let hint = if nix::unistd::geteuid().is_root() {
                "the host must mount the cpuset, memory and pids cgroup controllers (v1) or enable them in the unified hierarchy (v2)"
            } else {
                "run the lab as root (sudo), or use --engine docker"
            };
            EngineError::op("use", "cgroups for the native engine", format!("{e}\n  {hint}"))
        })?;
        Ok(NativeEngine { cgroups: true })
    }

    /// An engine without cgroups: both sides pinned by CPU affinity only, no memory limit, no
    /// memory peak (for `benchlab measure` when not root).
    pub fn pinned_only() -> NativeEngine {
        NativeEngine { cgroups: false }
    }

    /// Whether servers run in lab cgroups.
    pub fn uses_cgroups(&self) -> bool {
        self.cgroups
    }

    /// The engine for the environment manifest: kind "native", version = the kernel release,
    /// api_version = the cgroup version ("cgroup v1", "cgroup v2", or "none" when pinned only).
    pub fn describe(&self) -> EngineManifest {
        let kernel = nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unknown".into());
        EngineManifest {
            kind: "native".into(),
            version: kernel,
            api_version: if self.cgroups { cgroup::describe() } else { "none (CPU affinity only)".into() },
        }
    }

    /// Installs (or finds in the cache) the plan's server; the null server needs nothing.
    pub async fn prepare(
        &self,
        plan: &ImagePlan,
        ca_bundle: &Path,
        log: &mut (dyn FnMut(&str) + Send),
    ) -> Result<NativeEnv, EngineError> {
        cache::prepare(plan, ca_bundle, log).await
    }

    /// Runs one cell (`spec.lab_dir` is ignored; the server is the prepared install's launch). Shim,
    /// driver and server get a minimal environment (PATH, LANG, HOME and TMPDIR in the cell's
    /// private folder) plus the launch's own, not this process's.
    pub async fn run_cell(
        &self,
        spec: DriverSpec,
        limits: &CellLimits,
        benchlab_exe: &Path,
        time_limit: Duration,
        on_event: &mut (dyn FnMut(DriverEvent) + Send),
    ) -> Result<NativeRun, EngineError> {
        self.run(spec, limits, true, benchlab_exe, time_limit, on_event).await
    }

    /// Runs one cell with the spec's own server launch, in this process's environment
    /// (`benchlab measure`: the user's command as the user would run it).
    pub async fn run_spec(
        &self,
        spec: DriverSpec,
        limits: &CellLimits,
        benchlab_exe: &Path,
        time_limit: Duration,
        on_event: &mut (dyn FnMut(DriverEvent) + Send),
    ) -> Result<NativeRun, EngineError> {
        self.run(spec, limits, false, benchlab_exe, time_limit, on_event).await
    }

    async fn run(
        &self,
        spec: DriverSpec,
        limits: &CellLimits,
        clean_env: bool,
        benchlab_exe: &Path,
        time_limit: Duration,
        on_event: &mut (dyn FnMut(DriverEvent) + Send),
    ) -> Result<NativeRun, EngineError> {
        let placement = cell::CellPlacement {
            server_cpus: &limits.server_cpus,
            driver_cpus: &limits.driver_cpus,
            memory_limit: limits.memory_limit,
            pids_limit: limits.pids_limit,
            cgroups: self.cgroups,
            clean_env,
        };
        cell::run_cell(spec, &placement, benchlab_exe, time_limit, on_event).await
    }

    /// Deletes `benchlab/*` cgroups that hold no process (left by a killed lab).
    pub fn remove_leftovers(&self) -> usize {
        if self.cgroups {
            cgroup::remove_leftovers()
        } else {
            0
        }
    }
}

/// A generous bound on a cell's whole run, from its spec's limits.
pub fn time_limit(spec: &DriverSpec) -> Duration {
    spec.workload.time_limit(&spec.timeouts)
}
