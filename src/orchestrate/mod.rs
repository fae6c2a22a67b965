//! Running a plan: every cell resolved against recipes and placement and admitted by its backend
//! before anything is built (`plan`), what the cells need prepared once per image, the cells
//! scheduled onto the backends' free CPU slots — at once with `--parallel`, only the missing ones
//! on `--resume`, abandoned cleanly on an interruption (`schedule`) — and a record built from each
//! cell's outcome (`records`) and appended to the run's store, so a run keeps one hash chain. How
//! long cells take has one model (`estimate`), and `view` is what `benchlab plan` shows.
//! It never prints: it emits events, and the CLI decides what the user sees.
//! docs/ARCHITECTURE.md follows one cell through it.

pub mod estimate;
pub mod order;
pub mod plan;
pub mod records;
pub mod run_dir;
pub mod schedule;
pub mod view;

use std::path::{Path, PathBuf};

pub use plan::{admit, distinct_images, plan, unbuildable, PlannedCell};

use crate::backend::{Backend, BackendConfig, CellEvent, EngineError, PrepareEvent};
use crate::placement;
use crate::recipe::RecipeBook;
use crate::record::Record;
use crate::scenario::{Scenario, ScenarioError};

/// What the orchestrator reports as it works.
#[derive(Debug, Clone)]
pub enum Event {
    Planned {
        run_id: String,
        run_dir: PathBuf,
        cells: usize,
        images: usize,
    },
    /// A backend is making what cells need (bases, images, native installs).
    Prepare(PrepareEvent),
    CellStarted {
        index: usize,
        total: usize,
        cell_id: String,
        /// Seconds left: the cells' estimates (as `plan` gives them), scaled by the pace of the
        /// cells so far.
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
        /// Seconds the run has left, when the cells were all handed to a cluster's queue.
        eta_s: Option<f64>,
    },
    /// A cluster's job for a cell: queued, running on a node, requeued.
    CellDispatch {
        cell_id: String,
        event: CellEvent,
    },
    /// How many cells run at once, and why: `--parallel`'s slots, or a cluster's queue.
    Parallel {
        slots: usize,
        why: String,
    },
    /// The run's order: `random` with its seed, or `as-written`, and how many A/A control cells
    /// it holds.
    Order {
        order: crate::spec::Order,
        seed: Option<u32>,
        control_cells: usize,
    },
    /// The host's speed fingerprint, measured before the first cell (`None`: a cluster's nodes
    /// measure their own).
    Fingerprint {
        summary: Option<String>,
    },
    /// At start: containers and volumes left by a benchlab that died without cleaning up
    /// (`kill -9`, a crash) were found by their owner label and removed.
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
    /// The seed of the run's permutation (`--order-seed`); a fresh one when absent, the earlier
    /// records' on `--resume`.
    pub order_seed: Option<u32>,
    /// `--require-quiet`: how long each cell may wait for a quiet host before it fails.
    pub require_quiet_s: Option<u64>,
    /// The source's own result files (`[source] results`), read at its commit: kept in the run
    /// folder beside the scenario copy.
    pub published: Option<std::sync::Arc<crate::source::results::Published>>,
}

impl RunOptions {
    /// What every backend of a run is made with.
    pub fn backend_config(&self) -> BackendConfig {
        BackendConfig {
            ca_bundle: self.ca_bundle.clone(),
            work_dir: self.work_dir.clone(),
            lab_volume_bytes: self.lab_volume_bytes,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Placement(#[from] placement::PlacementError),
    /// Bad input that is not a scenario file's (a version range, a family, a run folder): exit 2.
    #[error("{what}: {message}")]
    Input { what: String, message: String },
    #[error(transparent)]
    Store(#[from] crate::record::store::StoreError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("interrupted by {signal} during cell {cell}: {done} of {total} cells were recorded in {}; the cells in flight were abandoned and {removed} of the run's jobs, containers and volumes cancelled or removed; `benchlab run --resume {}` runs the rest", run_dir.display(), run_dir.display())]
    Interrupted {
        signal: &'static str,
        run_dir: PathBuf,
        done: usize,
        total: usize,
        cell: String,
        removed: usize,
    },
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

/// Runs a scenario end to end on `backends` (a cell goes to the one its server names, else the
/// first).
pub async fn run<B: Backend>(
    backends: &[B],
    scenario: &Scenario,
    recipes: &RecipeBook,
    opts: &RunOptions,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<RunSummary, RunError> {
    schedule::run_cells(backends, scenario, recipes, opts, None, run_dir::interrupted(), emit).await
}

/// Resumes the run in `run_dir` (`<results>/<scenario>/<run id>`): its own copy of the scenario,
/// the same run id, and only the cells with no ok record yet. `adjust` may change the scenario as
/// it was loaded (the CLI's --duration/--warmup/--only).
pub async fn resume<B: Backend>(
    backends: &[B],
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
        return Err(RunError::Input {
            what: format!("resume {}", run_dir.display()),
            message: "not a run folder of the form <results>/<scenario>/<run id>".into(),
        });
    };
    if parent.to_str() != Some(scenario.name.as_str()) {
        return Err(RunError::Input {
            what: format!("resume {}", run_dir.display()),
            message: (format!(
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
    schedule::run_cells(backends, &scenario, recipes, &opts, Some(earlier), run_dir::interrupted(), emit)
        .await
}

/// Whether a record is of this planned cell (same id, same repeat, same A/A control place).
pub fn same_cell(r: &Record, c: &PlannedCell) -> bool {
    let control = |s: Option<&crate::spec::Schedule>| s.and_then(|s| s.control);
    r.cell.id == c.id
        && r.cell.repeat.map(|x| x.index) == c.repeat.map(|x| x.index)
        && control(r.schedule.as_ref()) == control(c.schedule.as_ref())
}

/// Makes (or finds) each image on its backend, with counts and an estimate of the time left;
/// returns each one's reference and whether it was built now.
pub async fn build_plans<B: Backend>(
    backend: &B,
    plans: &[crate::recipe::ImagePlan],
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<Vec<(String, bool)>, RunError> {
    let distinct: Vec<(usize, crate::recipe::ImagePlan)> = plans.iter().map(|p| (0, p.clone())).collect();
    let ready = schedule::prepare_all(std::slice::from_ref(backend), &distinct, emit).await?;
    Ok(ready.into_iter().map(|(_, _, p)| (p.reference, p.built)).collect())
}

#[cfg(test)]
mod tests;
