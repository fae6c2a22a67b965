//! `benchlab run`: a scenario run (or a run folder resumed) on the engines that can run it, with
//! progress, then the summary table and the cells that did not do what the scenario expects.
//! Planning, scheduling and records live in `orchestrate`; this chooses engines and prints.

use std::path::PathBuf;

use super::exit::{error_chain, Exit, FAILED, OK};
use super::progress::Progress;
use super::{run_options, tokio_runtime, Checkout};
use crate::backend::containers::docker::DockerEngine;
use crate::backend::containers::ContainersBackend;
use crate::backend::native::{NativeBackend, NativeEngine};
use crate::backend::scripted::{Script, ScriptedBackend};
use crate::backend::AnyBackend;
use crate::orchestrate::{self, RunOptions, RunSummary};
use crate::recipe::RecipeBook;
use crate::record::store::RECORDS_FILE;
use crate::record::Status;
use crate::report;
use crate::scenario::Scenario;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The scenario file (scenarios/*.toml).
    #[arg(required_unless_present = "resume")]
    scenario: Option<PathBuf>,
    /// Continue an interrupted or partly failed run: run only the cells of RUN_DIR
    /// (<results>/<scenario>/<run id>) that have no ok record, from the scenario copy kept
    /// there, appending to its records. Environment changes since its earlier records are
    /// reported.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["scenario", "run_id", "results"])]
    resume: Option<PathBuf>,
    /// Where run folders are written: <results>/<scenario name>/<run id>/.
    #[arg(long, default_value = "results")]
    results: PathBuf,
    /// Name the run folder yourself (default: UTC time, scenario name, a nonce).
    #[arg(long)]
    run_id: Option<String>,
    #[command(flatten)]
    checkout: Checkout,
    /// Print the summary as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// Measure every HTTP load workload for this long instead of the scenario's `duration`
    /// (a reduced run: "3s", "500ms"). Each record keeps the durations it ran with.
    #[arg(long, value_parser = parse_duration_arg)]
    duration: Option<u64>,
    /// Warm every HTTP load workload up for this long instead of the scenario's `warmup`.
    #[arg(long, value_parser = parse_duration_arg)]
    warmup: Option<u64>,
    /// Run only the cells whose id matches this pattern (`*` matches anything; e.g.
    /// "gradio-*/mcp-echo-*"). May be given several times.
    #[arg(long, value_name = "PATTERN")]
    only: Vec<String>,
    /// Where cells run: `docker` (containers through the Docker engine), `native` (host
    /// processes in lab cgroups, servers installed from the same lockfiles into a
    /// content-hashed cache with the host's interpreters; stdio only), or `auto` (docker
    /// when an engine answers, otherwise native, with a notice).
    #[arg(long, default_value = "auto", value_enum, hide_possible_values = true)]
    engine: EngineChoice,
    /// With the hidden `--engine scripted` (the CLI's own tests, as hyperfine's debug mode):
    /// what a cell does instead of running, `CELL=WHAT` with WHAT `ok[:DURATION]`, `hang` or
    /// `fail:REASON[:DURATION]`; CELL `*` for every cell not named (default `ok`).
    #[arg(long, value_name = "CELL=WHAT", hide = true)]
    script: Vec<String>,
    /// Run several cells at once, each on its own CPUs, no two sharing a physical core
    /// (recorded in each cell's placement). On a host with too few cores for two cells this
    /// runs one at a time and says so.
    #[arg(long)]
    parallel: bool,
    #[command(flatten)]
    noise: NoiseArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

/// How a run meets the host's noise: its order, its repeats, a quiet host.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NoiseArgs {
    /// The order cells run in: `random` (the scenario's default: a seeded permutation within
    /// each round of repeats, A B C A B C…, so a drift of the host spreads across versions
    /// instead of lining up with them) or `as-written` (server by server, repeats together).
    /// Every record keeps its position and the seed.
    #[arg(long, value_enum)]
    pub order: Option<OrderChoice>,
    /// The seed of the random order (default: a fresh one, printed and recorded; a resumed run
    /// keeps its own).
    #[arg(long, value_name = "SEED")]
    pub order_seed: Option<u32>,
    /// Run every cell this many times, each in fresh containers, instead of the scenario's
    /// `repeats` (3 by default for sweeps and reproductions: figures use the between-run
    /// interval, runs as the unit).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: Option<u32>,
    /// Before each cell, wait up to DURATION (default 60s) for its CPUs to be quiet (no other
    /// process above the threshold, no steal, no memory pressure); a cell whose host stays
    /// loud fails as `noisy_host` instead of being measured. Without it every cell is still
    /// checked and a loud one is flagged `noisy` in its record.
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "60s", value_parser = crate::text::parse_duration_arg)]
    pub require_quiet: Option<crate::text::DurationArg>,
}

/// `--order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OrderChoice {
    Random,
    AsWritten,
}

impl NoiseArgs {
    /// Applies the order and repeats to a scenario.
    pub fn adjust(&self, s: &mut Scenario) {
        if let Some(o) = self.order {
            s.order = match o {
                OrderChoice::Random => crate::spec::Order::Random,
                OrderChoice::AsWritten => crate::spec::Order::AsWritten,
            };
        }
        if let Some(r) = self.repeats {
            s.repeats = r;
        }
    }

    /// Applies the seed and the quiet wait to the run's options.
    pub fn options(&self, opts: &mut RunOptions) {
        opts.order_seed = self.order_seed;
        if let Some(n) = self.require_quiet.and_then(|d| d.deprecation("--require-quiet")) {
            eprintln!("benchlab: {n}");
        }
        // The quiet wait counts whole seconds (at least one).
        opts.require_quiet_s = self.require_quiet.map(|d| d.ms.div_ceil(1000).max(1));
    }
}

/// Where a run's cells go: this host, or a Slurm cluster.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterArgs {
    /// `local` runs cells on this host; `slurm` makes every cell a Slurm job (a sweep one job
    /// array) that runs on a node through the node's own engine (`--engine`: docker, or native)
    /// on the CPUs Slurm allocates, its record naming the node, job and CPUs. Images are built
    /// here once and pulled by digest from a registry. Needs the Slurm client programs and a
    /// controller that answers (`scripts/slurm-up.sh` starts a two-node cluster on this machine).
    #[arg(long, default_value = "local", value_enum, hide_possible_values = true)]
    pub backend: BackendChoice,
    /// With `--backend slurm`: the partition (default: the cluster's default partition).
    #[arg(long)]
    pub partition: Option<String>,
    /// With `--backend slurm`: one more sbatch option, passed as it is (e.g.
    /// --slurm-opt=--account=lab --slurm-opt=--qos=bench). May be given several times; checked
    /// with `sbatch --test-only` before anything runs.
    #[arg(long, value_name = "OPTION", allow_hyphen_values = true)]
    pub slurm_opt: Vec<String>,
    /// With `--backend slurm`: the cluster's slurm.conf (default: $SLURM_CONF, else the
    /// client's own). `scripts/slurm-up.sh` prints the one of the lab's cluster.
    #[arg(long, value_name = "FILE")]
    pub slurm_conf: Option<PathBuf>,
    /// With `--backend slurm`: a registry every node can pull from (HOST:PORT). Default: the lab
    /// starts Debian's docker-registry on loopback for the run (nodes on this host only).
    #[arg(long, value_name = "HOST:PORT")]
    pub registry: Option<String>,
    /// With `--backend slurm`: where job folders go (job files, outcomes, per-job logs); must be
    /// a file system every node sees, as must the lab's work folder. Default: <work>/slurm-jobs.
    #[arg(long, value_name = "DIR")]
    pub slurm_dir: Option<PathBuf>,
}

impl ClusterArgs {
    /// Refuses Slurm options given without `--backend slurm` (they would be ignored).
    pub fn check(&self) -> Result<(), Exit> {
        let given = [
            ("--partition", self.partition.is_some()),
            ("--slurm-opt", !self.slurm_opt.is_empty()),
            ("--slurm-conf", self.slurm_conf.is_some()),
            ("--registry", self.registry.is_some()),
            ("--slurm-dir", self.slurm_dir.is_some()),
        ];
        match given.iter().find(|(_, g)| *g) {
            Some((flag, _)) if self.backend == BackendChoice::Local => {
                Err(Exit::input(format!("{flag} needs --backend slurm (this run's cells run on this host)")))
            }
            _ => Ok(()),
        }
    }
}

/// `--backend`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// This host.
    #[default]
    Local,
    /// A Slurm cluster.
    Slurm,
}

fn parse_duration_arg(s: &str) -> Result<u64, String> {
    crate::text::parse_duration_ms(s)
}

pub(super) fn run(args: RunArgs) -> Result<i32, Exit> {
    let RunArgs {
        scenario,
        resume,
        results,
        run_id,
        checkout,
        json,
        duration,
        warmup,
        only,
        engine,
        script,
        parallel,
        noise,
        cluster,
    } = args;
    cluster.check()?;
    let scripted = scripted_backend(engine, &script)?;
    let mut adjust = |s: &mut Scenario| {
        s.override_load_times(warmup, duration);
        noise.adjust(s);
        if !only.is_empty() {
            s.only = only.clone();
        }
    };
    let scenario = match &scenario {
        Some(path) => Some(load_scenario(&checkout, path, &mut adjust)?),
        None => None,
    };
    let recipes = checkout.recipes()?;
    let mirrors = checkout.mirrors()?;
    let mut opts = run_options(results, run_id, checkout.ca_bundle)?;
    opts.parallel = parallel;
    noise.options(&mut opts);
    // The source's result files, read before anything runs: a bad path stops the run here.
    if let Some(s) = &scenario {
        opts.published = super::source::fetch_published(s, &mirrors)?.map(std::sync::Arc::new);
    }
    let summary = tokio_runtime().block_on(async {
        let backends = match (cluster.backend, scripted) {
            (BackendChoice::Local, Some(s)) => vec![AnyBackend::Scripted(s)],
            (BackendChoice::Local, None) => backends(engine, &opts, true).await?,
            (BackendChoice::Slurm, _) => vec![slurm_backend(engine, &cluster, &opts, true).await?],
        };
        run_with(&backends, &scenario, &resume, &recipes, &opts, &mut adjust).await
    })?;
    Ok(print_summary(&summary, resume.is_some(), json))
}

/// The scenario with the command line's changes, refused when `--only` leaves no cell.
pub(super) fn load_scenario(
    checkout: &Checkout,
    path: &std::path::Path,
    adjust: &mut dyn FnMut(&mut Scenario),
) -> Result<Scenario, Exit> {
    let mut scenario = checkout.scenario(path)?;
    adjust(&mut scenario);
    // A server whose Dockerfile starts from an image this host cannot have has no cells: said
    // before anything runs, with its `[source.base]` rule's words.
    for (id, why) in crate::orchestrate::unbuildable(&scenario).map_err(Exit::from)? {
        eprintln!("server {id}: not measured: {why}");
    }
    if !scenario.only.is_empty() && scenario.cells().is_empty() {
        return Err(Exit::input(format!(
            "--only {:?} matches no cell of {}",
            scenario.only,
            scenario.path.display()
        )));
    }
    Ok(scenario)
}

/// Where `--engine` lets cells run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineChoice {
    /// Docker when an engine answers, otherwise native, with a notice.
    Auto,
    /// Containers through the Docker engine.
    Docker,
    /// Host processes in lab cgroups.
    Native,
    /// Canned outcomes (`--script`), nothing run: for the CLI's own tests of progress,
    /// interruption and resumption, which then wait on events instead of an engine.
    #[value(hide = true)]
    Scripted,
}

/// The scripted backend `--engine scripted` asks for, on this host's topology, with the cells'
/// scripts; None for every other engine (`--script` without it is refused).
fn scripted_backend(engine: EngineChoice, script: &[String]) -> Result<Option<ScriptedBackend>, Exit> {
    if engine != EngineChoice::Scripted {
        return match script.first() {
            Some(_) => Err(Exit::input("--script needs --engine scripted")),
            None => Ok(None),
        };
    }
    let mut default = Script::Ok { after: std::time::Duration::ZERO, cold_start_ns: 1_000_000 };
    let mut named = Vec::new();
    for s in script {
        let (cell, what) =
            s.split_once('=').ok_or_else(|| Exit::input(format!("--script {s:?}: expected CELL=WHAT")))?;
        let what = Script::parse(what).map_err(|e| Exit::input(format!("--script {e}")))?;
        match cell {
            "*" => default = what,
            cell => named.push((cell.to_string(), what)),
        }
    }
    let backend = named
        .into_iter()
        .fold(ScriptedBackend::new(crate::backend::Topology::host(), default), |b, (cell, what)| {
            b.script(&cell, what)
        });
    Ok(Some(backend))
}

/// The backends `--engine` allows that answer here, in the order cells without an engine of
/// their own fall to them: containers (unless `native`), then the native engine (root and
/// cgroups). With `auto` and no Docker the run goes on natively, with a notice when `tell` is
/// set; an engine asked for by name that is missing is an environment error.
pub(super) async fn backends(
    choice: EngineChoice,
    opts: &RunOptions,
    tell: bool,
) -> Result<Vec<AnyBackend>, Exit> {
    let config = opts.backend_config();
    // Native cells need root and cgroups; a scenario may name either engine per server.
    let native = NativeEngine::new();
    let mut out = Vec::new();
    if choice != EngineChoice::Native {
        let connected = match DockerEngine::connect().await {
            Ok(d) => ContainersBackend::new(d, config.clone()).await,
            Err(e) => Err(e),
        };
        match connected {
            Ok(b) => out.push(AnyBackend::Containers(b)),
            Err(e) if choice == EngineChoice::Docker => return Err(Exit::environment(error_chain(&e))),
            Err(e) => {
                if let Err(n) = &native {
                    return Err(Exit::environment(format!(
                        "{}\nand the native engine cannot run here either: {}",
                        error_chain(&e),
                        error_chain(n)
                    )));
                }
                if tell {
                    eprintln!(
                        "notice: no container engine answers ({}), so this run uses the native engine: \
                         servers run as host processes in lab cgroups, installed from the same lockfiles \
                         into {} with this host's interpreters (recorded in each record's environment). \
                         Start Docker (`scripts/engine.sh`) or pass --engine docker to insist on containers.",
                        e.to_string().lines().next().unwrap_or(""),
                        crate::backend::native::cache::cache_root().display()
                    );
                }
            }
        }
    }
    match native {
        Ok(n) => out.push(AnyBackend::Native(NativeBackend::new(n, config))),
        Err(e) if choice == EngineChoice::Native => return Err(Exit::environment(error_chain(&e))),
        Err(_) => {}
    }
    Ok(out)
}

/// The Slurm backend `--backend slurm` asks for, its nodes running cells with `--engine`'s
/// engine (docker unless `native`); the cluster is checked before anything is built.
pub(super) async fn slurm_backend(
    engine: EngineChoice,
    cluster: &ClusterArgs,
    opts: &RunOptions,
    tell: bool,
) -> Result<AnyBackend, Exit> {
    use crate::backend::slurm::{NodeBackend, SlurmBackend, SlurmOptions};
    let config = opts.backend_config();
    let env_err = |e: crate::backend::EngineError| Exit::environment(error_chain(&e));
    let node = match engine {
        EngineChoice::Native => {
            NodeBackend::Native(NativeBackend::new(NativeEngine::new().map_err(env_err)?, config.clone()))
        }
        EngineChoice::Scripted => return Err(Exit::input("--engine scripted runs cells on this host only")),
        EngineChoice::Auto | EngineChoice::Docker => {
            let docker = DockerEngine::connect().await.map_err(env_err)?;
            NodeBackend::Containers(ContainersBackend::new(docker, config.clone()).await.map_err(env_err)?)
        }
    };
    let slurm_opts = SlurmOptions {
        partition: cluster.partition.clone(),
        sbatch: cluster.slurm_opt.clone(),
        conf: cluster.slurm_conf.clone(),
        registry: cluster.registry.clone(),
        jobs_dir: cluster.slurm_dir.clone(),
    };
    let b = SlurmBackend::connect(slurm_opts, node, config).await.map_err(|e| match e {
        crate::backend::EngineError::Refused { .. } => Exit::input(error_chain(&e)),
        e => env_err(e),
    })?;
    if tell {
        eprintln!("{}", b.summary());
    }
    Ok(AnyBackend::Slurm(Box::new(b)))
}

/// Runs a scenario or resumes a run folder, with progress on stderr.
async fn run_with(
    backends: &[AnyBackend],
    scenario: &Option<Scenario>,
    resume: &Option<PathBuf>,
    recipes: &RecipeBook,
    opts: &RunOptions,
    adjust: &mut dyn FnMut(&mut Scenario),
) -> Result<RunSummary, Exit> {
    let mut ui = Progress::new();
    let r = match (scenario, resume) {
        (Some(scenario), _) => {
            orchestrate::run(backends, scenario, recipes, opts, &mut |e| ui.event(e)).await
        }
        (None, Some(dir)) => {
            orchestrate::resume(backends, dir, recipes, opts, adjust, &mut |e| ui.event(e)).await
        }
        (None, None) => unreachable!("clap requires a scenario or --resume"),
    };
    ui.finish();
    r.map_err(Exit::from)
}

/// Prints what the run did (the resumed cells, environment changes, the summary table or JSON,
/// the failed cells) and returns its exit code.
fn print_summary(summary: &RunSummary, resumed: bool, json: bool) -> i32 {
    if resumed {
        eprintln!(
            "resumed run {}: {} cell(s) already had an ok record and were skipped, {} ran now",
            summary.run_id,
            summary.skipped,
            summary.records.len()
        );
    }
    if !summary.env_changes.is_empty() {
        eprintln!(
            "warning: {} environment field(s) differ from the run's earlier records; these cells \
             were not measured in the same environment (`benchlab diff-env` compares records):",
            summary.env_changes.len()
        );
        for line in &summary.env_changes {
            eprintln!("  {line}");
        }
    }
    if json {
        print!("{}", report::render(report::Format::Json, &summary.records));
    } else {
        print!("{}", report::render(report::Format::Table, &summary.records));
        println!(
            "run {}: {} records in {}  ({} image(s) built{})",
            summary.run_id,
            summary.records.len(),
            summary.run_dir.join(RECORDS_FILE).display(),
            summary.images_built,
            if summary.images_built == 0 { ": every image was a cache hit" } else { "" }
        );
    }
    print_failures(summary)
}

/// The cells that failed as the scenario expects, then those that did not do what it expects;
/// exit 1 when there are any of the latter.
fn print_failures(summary: &RunSummary) -> i32 {
    let unexpected: Vec<&crate::record::Record> =
        summary.records.iter().filter(|r| !r.as_expected()).collect();
    for r in summary.records.iter().filter(|r| r.as_expected() && r.status == Status::Failed) {
        let reason = r.failure.as_ref().map_or("failed", |f| f.reason.as_str());
        eprintln!("  {}: failed as the scenario expects ({reason})", r.cell.id);
    }
    if !unexpected.is_empty() {
        eprintln!("{} cell(s) did not do what the scenario expects:", unexpected.len());
        for r in unexpected {
            match &r.failure {
                Some(f) => eprintln!("  {}: {f}", r.cell.id),
                None => eprintln!("  {}: succeeded, but the scenario expects a failure", r.cell.id),
            }
        }
        return FAILED;
    }
    OK
}
