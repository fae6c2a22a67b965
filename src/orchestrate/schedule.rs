//! Scheduling a run's cells onto its backends: plan and admit every cell, prepare each distinct
//! image once, then keep every free CPU slot busy with a cell until none is left — one at a time,
//! or at once on slots that share no physical core with `--parallel` — appending each cell's
//! record as it finishes. A failed cell is a record, never the end of the run; an interruption
//! abandons the cells in flight (each backend removes what they left) and loses no record
//! already written. It sees backends only through the `Backend` trait.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt};

use super::estimate::{self, Countdown, Eta};
use super::plan::{admit, distinct_images, plan, PlannedCell};
use super::records::{build_record, environment_changes, RunContext};
use super::run_dir::{freeze_binary, keep_scenario_copy, new_run_id};
use super::{same_cell, Event, RunError, RunOptions, RunSummary};
use crate::backend::{Backend, BackendKind, CellEvent, ImageProgress, Prepared, Topology};
use crate::placement;
use crate::recipe::{ImagePlan, RecipeBook};
use crate::record::manifest::{BenchlabManifest, EngineManifest};
use crate::record::store::Store;
use crate::record::{Record, Status};
use crate::scenario::Scenario;
use crate::spec::{CellJob, DriverEvent, ParallelSlot, Placement, PlacementMode};

/// The cells of a run that are still to run, and where its records go.
struct Planned {
    run_id: String,
    run_dir: PathBuf,
    cells: Vec<PlannedCell>,
    skipped: usize,
    /// Holds the run folder's lock from before anything is built, when the folder exists.
    early_store: Option<Store>,
}

/// Runs a scenario's cells; with `earlier` (a resumed run's records), only the cells that have no
/// ok record among them, checking each new record's environment against the earlier ones. The
/// run stops, abandoning the cells in flight, when `interrupt` resolves (with the signal's name).
pub async fn run_cells<B: Backend>(
    backends: &[B],
    scenario: &Scenario,
    recipes: &RecipeBook,
    opts: &RunOptions,
    earlier: Option<Vec<Record>>,
    interrupt: impl Future<Output = &'static str>,
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<RunSummary, RunError> {
    let earlier = earlier.unwrap_or_default();
    let topology = backends.first().map_or_else(Topology::host, |b| b.topology());
    let Planned { run_id, run_dir, cells, skipped, early_store } =
        plan_run(backends, scenario, recipes, opts, &earlier, &topology.cpus).await?;
    let distinct = distinct_images(&cells);
    emit(Event::Planned {
        run_id: run_id.clone(),
        run_dir: run_dir.clone(),
        cells: cells.len(),
        images: distinct.len(),
    });
    emit(Event::Order {
        order: scenario.order,
        seed: cells.iter().find_map(|c| c.schedule.as_ref()?.seed),
        control_cells: cells
            .iter()
            .filter(|c| c.schedule.as_ref().is_some_and(|s| s.control.is_some()))
            .count(),
    });

    // Every cell of the run mounts (or runs) this frozen copy, so the binary that runs is the one
    // the records name even if the executable is rebuilt while the run goes on.
    // Held (and so kept from pruning) until the run returns.
    let frozen = freeze_binary(&opts.benchlab_exe, &opts.work_dir)?;
    // The host's speed, once, before anything runs: on the first cell's server and driver CPUs
    // (a cluster's nodes measure their own).
    // (the scripted backend of the scheduler's tests runs nothing on this host).
    let measures_here =
        backends.first().is_some_and(|b| b.queue().is_none() && b.kind() != BackendKind::Scripted);
    let fingerprint = match (measures_here, cells.first()) {
        (true, Some(c)) => Some(host_fingerprint(&c.placement).await),
        _ => None,
    };
    emit(Event::Fingerprint { summary: fingerprint.as_ref().map(crate::host::fingerprint::summary) });
    let ctx = RunContext {
        run_id: run_id.clone(),
        host: crate::record::manifest::read_host(Path::new("/")),
        benchlab: BenchlabManifest {
            version: env!("CARGO_PKG_VERSION").into(),
            binary_sha256: frozen.sha256.clone(),
        },
        scenario_sha256: scenario.sha256(),
        fingerprint,
    };
    let mut engines = Vec::new();
    for b in backends {
        engines.push(b.describe().await?);
        // Before anything is made: what dead runs left behind goes, and this run is registered,
        // so its own leftovers can be found if it dies the same way.
        for l in b.start(&run_id).await? {
            emit(Event::LeftoversRemoved { run_id: l.run_id, owner: l.owner, removed: l.removed });
        }
    }
    // Every image first: a build failure stops the run before anything is measured.
    let images = prepare_all(backends, &distinct, emit).await?;
    let built = images.iter().filter(|(_, _, p)| p.built).count();

    let store = match early_store {
        Some(s) => s,
        None => Store::open(&run_dir)?,
    };
    keep_scenario_copy(&run_dir, &scenario.source)?;
    super::run_dir::keep_suite_files(&run_dir, &scenario.suite_files)?;
    if let Some(p) = &opts.published {
        crate::source::results::keep(&run_dir, p).map_err(|message| RunError::Input {
            what: format!("keep the source's result files in {}", run_dir.display()),
            message,
        })?;
    }
    // A cluster places cells itself: every cell goes to its queue at once, and the CPUs are
    // the ones its scheduler allocates on a node (`--parallel`'s slots do not apply).
    let queue = backends.first().and_then(|b| b.queue());
    let slots = match opts.parallel && queue.is_none() {
        true => {
            let (slots, why) = parallel_slots(scenario, &cells, &topology);
            emit(Event::Parallel { slots: slots.len(), why: format!("--parallel: {why}") });
            slots
        }
        false => Vec::new(),
    };
    let learned = estimate::learned_from(&opts.results_dir);
    let estimates = cells.iter().map(|c| estimate::estimate(c, &learned).seconds).collect();
    let (lanes, countdown) = match queue {
        Some(q) => {
            let lanes = q.depth.min(cells.len()).max(1);
            emit(Event::Parallel {
                slots: lanes,
                why: format!(
                    "{lanes} cell(s) handed to the cluster's queue at once; it places each on a node"
                ),
            });
            // A queued cell's time includes its wait, so no pace is learnt from it.
            (lanes, Countdown::queued(estimates, q.at_once))
        }
        None => (slots.len().max(1), Countdown::new(estimates, slots.len())),
    };
    let run = Scheduler {
        backends,
        engines: &engines,
        images: &images,
        ctx: &ctx,
        benchlab_exe: &frozen.path,
        slots: &slots,
        lanes,
        require_quiet_s: opts.require_quiet_s,
    };
    let (records, env_changes) =
        run.cells(&cells, store, &earlier, countdown, &run_dir, interrupt, emit).await?;
    Ok(RunSummary { run_id, run_dir, records, images_built: built, skipped, env_changes })
}

/// Plans and admits the cells, names the run and locks an existing run folder, and leaves out
/// the cells that already have an ok record.
async fn plan_run<B: Backend>(
    backends: &[B],
    scenario: &Scenario,
    recipes: &RecipeBook,
    opts: &RunOptions,
    earlier: &[Record],
    cpus: &[u32],
) -> Result<Planned, RunError> {
    let cells = plan(scenario, recipes, cpus)?;
    // A resumed run keeps its permutation: the seed its records name.
    let seed = super::order::seed_of(earlier).or(opts.order_seed).unwrap_or_else(super::order::fresh_seed);
    let mut cells = super::order::arrange(cells, &scenario.controls, scenario.order, seed);
    admit(backends, recipes, &mut cells).await?;
    let run_id = opts.run_id.clone().unwrap_or_else(|| new_run_id(&scenario.name));
    let run_dir = opts.results_dir.join(&scenario.name).join(&run_id);
    // A run folder that exists already is locked before anything is built, so a second benchlab
    // on it stops at once with the holder's pid (a new folder is locked when it is created).
    let early_store = match run_dir.exists() {
        true => Some(Store::open(&run_dir)?),
        false => None,
    };
    let before = cells.len();
    cells.retain(|c| !earlier.iter().any(|r| r.status == Status::Ok && same_cell(r, c)));
    Ok(Planned { run_id, run_dir, skipped: before - cells.len(), cells, early_store })
}

/// The speed fingerprint of this host on a placement's first server and driver CPUs.
async fn host_fingerprint(p: &Placement) -> crate::host::Fingerprint {
    let first =
        |list: &str| placement::parse_cpu_list(list).ok().and_then(|v| v.first().copied()).unwrap_or(0);
    let (a, b) = (first(&p.server_cpus), first(&p.driver_cpus));
    match tokio::task::spawn_blocking(move || crate::host::fingerprint::measure(a, b)).await {
        Ok(f) => f,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Prepares each distinct image on its backend, once, with counts and the time left.
pub async fn prepare_all<B: Backend>(
    backends: &[B],
    distinct: &[(usize, ImagePlan)],
    emit: &mut (dyn FnMut(Event) + Send),
) -> Result<Vec<(usize, ImagePlan, Prepared)>, RunError> {
    let mut images = Vec::new();
    let mut eta = Eta::default();
    for (index, (backend, image)) in distinct.iter().enumerate() {
        let progress =
            ImageProgress { index, total: distinct.len(), eta_s: eta.left(distinct.len() - index) };
        let started = Instant::now();
        let ready = backends[*backend].prepare(image, progress, &mut |e| emit(Event::Prepare(e))).await?;
        if ready.built {
            eta.add(started.elapsed().as_secs_f64());
        }
        images.push((*backend, image.clone(), ready));
    }
    Ok(images)
}

/// The CPU slots `--parallel` runs cells in, and the reason for their number: one slot (the
/// cells' own placements) when the scenario names its cpusets or its cells mix placement modes,
/// otherwise as many as the backend's cores allow.
pub fn parallel_slots(
    scenario: &Scenario,
    cells: &[PlannedCell],
    topology: &Topology,
) -> (Vec<Placement>, String) {
    let cpus = &topology.cpus;
    if scenario.placement.server_cpus.is_some() || scenario.placement.driver_cpus.is_some() {
        return (Vec::new(), "the scenario names its cpusets, so its cells run one at a time".into());
    }
    let shared = scenario.placement.mode == PlacementMode::Shared;
    if cells.iter().any(|c| c.placement.shared != shared) {
        return (Vec::new(), "the cells have different placement modes, so they run one at a time".into());
    }
    let slots = placement::slots_with(&scenario.placement, cpus, |c| topology.core_of(c));
    let need = if shared { "one physical core" } else { "two physical cores (server and driver apart)" };
    let why = format!(
        "{} CPU(s) here ({}); a cell needs {need} and no two cells share a core, so {} cell(s) run at once",
        cpus.len(),
        placement::format_cpu_list(cpus),
        slots.len().max(1)
    );
    (slots, why)
}

/// What the cell loop needs of its run.
struct Scheduler<'a, B: Backend> {
    backends: &'a [B],
    engines: &'a [EngineManifest],
    images: &'a [(usize, ImagePlan, Prepared)],
    ctx: &'a RunContext,
    benchlab_exe: &'a Path,
    /// `--parallel`'s slots; empty: one cell at a time on its own placement.
    slots: &'a [Placement],
    /// How many cells run at once (the slots, or a cluster's queue depth).
    lanes: usize,
    /// `--require-quiet`'s wait, for every cell's job.
    require_quiet_s: Option<u64>,
}

impl<B: Backend> Scheduler<'_, B> {
    /// Runs the cells on the free slots, appending each record as its cell finishes; on
    /// `interrupt`, abandons the cells in flight and says how far the run got.
    #[allow(clippy::too_many_arguments)]
    async fn cells(
        &self,
        cells: &[PlannedCell],
        mut store: Store,
        earlier: &[Record],
        mut countdown: Countdown,
        run_dir: &Path,
        interrupt: impl Future<Output = &'static str>,
        emit: &mut (dyn FnMut(Event) + Send),
    ) -> Result<(Vec<Record>, Vec<String>), RunError> {
        let total = cells.len();
        let mut records = Vec::new();
        let mut env_changes = Vec::new();
        let emit = Mutex::new(emit);
        let send = |e: Event| (emit.lock().expect("the event sink is not poisoned"))(e);
        let mut free: Vec<usize> = (0..self.lanes).collect();
        // The cells running now, by slot: what an interruption abandons.
        let in_flight = Mutex::new(BTreeMap::<usize, String>::new());
        let mut pending = cells.iter().enumerate();
        let mut running = FuturesUnordered::new();
        let work = async {
            loop {
                // Start a cell on every free slot, then wait for one to finish.
                while let Some(slot) = free.pop() {
                    let Some((index, cell)) = pending.next() else {
                        free.push(slot);
                        break;
                    };
                    in_flight.lock().expect("not poisoned").insert(slot, cell.id.clone());
                    send(Event::CellStarted {
                        index,
                        total,
                        cell_id: cell.id.clone(),
                        eta_s: countdown.at_start(index),
                    });
                    running.push(self.one(cell, index, slot, &send));
                }
                let Some((slot, index, record, seconds)) = running.next().await else { break };
                free.push(slot);
                in_flight.lock().expect("not poisoned").remove(&slot);
                let stored = store.append(record)?;
                env_changes.extend(environment_changes(earlier, &stored));
                countdown.finished(index, seconds);
                let eta_s = countdown.after_finish();
                send(Event::CellFinished { record: Box::new(stored.clone()), eta_s });
                records.push(stored);
            }
            Ok::<(), RunError>(())
        };
        tokio::select! {
            r = work => r?,
            signal = interrupt => {
                // The cells in flight are abandoned, not recorded; every record already written
                // stays as it is.
                drop(running);
                let mut removed = 0;
                for b in self.backends {
                    removed += b.abandon(&self.ctx.run_id).await;
                }
                return Err(RunError::Interrupted {
                    signal,
                    run_dir: run_dir.to_path_buf(),
                    done: records.len(),
                    total,
                    cell: in_flight.lock().expect("not poisoned").values().cloned().collect::<Vec<_>>().join(", "),
                    removed,
                });
            }
        }
        Ok((records, env_changes))
    }

    /// Runs one cell on its backend in `slot` and builds its record.
    async fn one(
        &self,
        cell: &PlannedCell,
        index: usize,
        slot: usize,
        send: &(dyn Fn(Event) + Sync),
    ) -> (usize, usize, Record, f64) {
        let started = Instant::now();
        let mut cell = cell.clone();
        if let Some(p) = self.slots.get(slot).filter(|_| self.slots.len() > 1) {
            let services_cpus = cell.placement.services_cpus.as_ref().map(|_| p.driver_cpus.clone());
            cell.placement = Placement {
                parallel: Some(ParallelSlot { slot: slot as u32, slots: self.slots.len() as u32 }),
                services_share_driver: services_cpus.is_some(),
                services_cpus,
                ..p.clone()
            };
        }
        let (_, _, prepared) = self
            .images
            .iter()
            .find(|(b, p, _)| *b == cell.backend && p.same_image(&cell.image))
            .expect("every cell's image is prepared");
        let mut job = CellJob {
            require_quiet_s: self.require_quiet_s,
            ..cell.job(&self.ctx.run_id, index, self.benchlab_exe)
        };
        for (service, (_, plan)) in job.services.iter_mut().zip(&cell.services) {
            let found = self.images.iter().find(|(b, p, _)| *b == cell.backend && p.same_image(plan));
            service.image = found.expect("every service's image is prepared").2.id.clone();
        }
        let cell_id = cell.id.clone();
        let mut on_event = |e: CellEvent| match e {
            CellEvent::Driver(DriverEvent::Progress { phase, done, total }) => {
                send(Event::CellProgress { cell_id: cell_id.clone(), phase, done, total })
            }
            CellEvent::Driver(_) => {}
            event => send(Event::CellDispatch { cell_id: cell_id.clone(), event }),
        };
        let outcome = self.backends[cell.backend].run_cell(&job, prepared, &mut on_event).await;
        let record = build_record(self.ctx, &cell, prepared, &self.engines[cell.backend], outcome);
        (slot, index, record, started.elapsed().as_secs_f64())
    }
}
