//! The command line: arguments (clap), the orchestrator's events rendered as progress, the
//! summary table, and the mapping of errors to documented exit codes. The only place that prints.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::docker::DockerEngine;
use crate::engine::native::NativeEngine;
use crate::orchestrate::{self, Event, Lab, RunError, RunOptions};
use crate::recipe::base::BaseSource;
use crate::recipe::RecipeBook;
use crate::record::store::{read_records, RECORDS_FILE};
use crate::record::Status;
use crate::report;
use crate::scenario::Scenario;

const EXIT_HELP: &str = "\
Exit codes:
  0  every cell ran and passed its checks
  1  some cells did not do what the scenario expects (their records say why: crash, timeout,
     wrong_result, ...); a failure the scenario expects (expect = \"failure\") is a result
  2  bad input: a scenario, recipe or record that cannot be used (file:line:column in the message)
  3  the environment: no container engine, a base or image that cannot be made, a full disk
  130 interrupted (SIGINT or SIGTERM): the cells recorded so far stay; nothing is left running";

/// benchlab: a reproducible benchmark lab for MCP servers.
///
/// It builds a pinned image per SDK x runtime x version, runs each server in a cgroup-limited
/// container on pinned CPUs, drives it from a sidecar container on other CPUs, and appends a
/// hashed record per cell to results/<run-id>/records.jsonl.
#[derive(Debug, Parser)]
#[command(name = "benchlab", version, after_help = EXIT_HELP)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scenario: build what is missing, measure every cell, print the summary table.
    ///
    /// Example: benchlab run scenarios/quickstart.toml
    Run {
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
        #[arg(long, default_value = "auto", value_parser = ["auto", "docker", "native"])]
        engine: String,
        /// Run several cells at once, each on its own CPUs, no two sharing a physical core
        /// (recorded in each cell's placement). On a host with too few cores for two cells this
        /// runs one at a time and says so.
        #[arg(long)]
        parallel: bool,
    },
    /// Show the summary table of a finished run, from its records.
    ///
    /// Example: benchlab report results/20261130T091500Z-quickstart-1234
    Report {
        /// A run folder (holding records.jsonl) or a records.jsonl file.
        run: PathBuf,
        /// Output format: table, json, markdown, csv, bencher (Bencher Metric Format), html (a
        /// self-contained page with SVG charts) or history (JSON of the history across SDK
        /// versions of a sweep: points with intervals and the steps beyond noise). Table,
        /// Markdown and HTML show that history too when the run holds one.
        #[arg(long, default_value = "table", value_parser = clap::value_parser!(report::Format))]
        format: report::Format,
        /// Write to FILE instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Same as --format json.
        #[arg(long)]
        json: bool,
    },
    /// Compare two runs cell by cell: the ratio b/a of every metric with its 95% interval, flagged
    /// slower or faster only when the whole interval is beyond the threshold, with what changed in
    /// each cell's environment.
    ///
    /// Example: benchlab compare results/quickstart/<run-a> results/quickstart/<run-b> --fail-if-slower 10
    Compare {
        run_a: PathBuf,
        run_b: PathBuf,
        /// Percent beyond which a ratio's whole interval counts as slower or faster.
        #[arg(long, default_value_t = report::DEFAULT_THRESHOLD_PCT)]
        threshold: f64,
        /// For CI gates: exit 1 when any metric is slower by more than PCT at its lower bound.
        #[arg(long, value_name = "PCT")]
        fail_if_slower: Option<f64>,
        /// table, markdown or json.
        #[arg(long, default_value = "table", value_parser = clap::value_parser!(report::CompareFormat))]
        format: report::CompareFormat,
    },
    /// The environment differences between two runs, field by field (packages by name), cell by
    /// cell, with the differences every cell shares listed once.
    DiffEnv {
        run_a: PathBuf,
        run_b: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify a run's store: every record's hash and env_hash, the hash chain and sequence, the
    /// head file and the scenario copy; names the first bad line and every problem found.
    ///
    /// Example: benchlab audit results/seed-000-stdio/20261130T095040Z-seed-000-stdio-8336
    Audit {
        /// A run folder (holding records.jsonl) or a records.jsonl file.
        run: PathBuf,
        /// Print the full report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a published source's claims against a run: every `[[claim]]` of the scenario (absolute
    /// figures, ratios, orderings, soak slopes, outcomes, and findings about the source itself) is
    /// matched to the run's records and judged reproduced, contradicted, inconclusive or
    /// not_measured, with the measured value, its 95% interval, the tolerance used and the
    /// environment differences (CPU, runtime and SDK versions, placement) that could explain a gap.
    ///
    /// A figure is reproduced when its whole interval lies within the tolerance band, contradicted
    /// when it lies wholly outside, inconclusive when it straddles an edge or its cell is noisy
    /// (CV over 10%). Repeats of a cell are pooled (median across repeats, bootstrap interval);
    /// ratios between cells get intervals from paired (repeats) or independent (samples)
    /// resampling. Absolute figures from other hardware are judged by the ratio they imply to a
    /// reference figure (the claim's `relative_to`), and the report says so.
    ///
    /// Exit codes: 0 every measurable claim reproduced (not_measured and inconclusive do not
    /// fail); 1 some claim contradicted; 2 bad input (a claim or scenario error, with
    /// file:line:column; unreadable records); 3 the environment (a report that cannot be written).
    ///
    /// Example: benchlab verify scenarios/seed-000-stdio.toml --markdown results/seed-000-stdio/AUDIT.md
    Verify {
        /// The scenario file whose `[[claim]]` tables are checked.
        scenario: PathBuf,
        /// The run folder (or records.jsonl) to check against (default: the newest run folder
        /// under <results>/<scenario name>/ that has records; none: every claim not_measured).
        #[arg(long)]
        run: Option<PathBuf>,
        /// Where run folders are looked for when --run is not given.
        #[arg(long, default_value = "results")]
        results: PathBuf,
        /// Print the audit as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Also write the Markdown audit report to FILE.
        #[arg(long, value_name = "FILE")]
        markdown: Option<PathBuf>,
    },
    /// Bootstrap a base image from a Debian suite (debootstrap, then import); does nothing when
    /// the same base exists already.
    ///
    /// Example: benchlab base --suite trixie --package python3 --package python3-venv
    Base {
        /// Debian suite: bookworm or trixie.
        #[arg(long, default_value = "bookworm")]
        suite: String,
        /// Extra Debian packages in the base (repeat the flag).
        #[arg(long = "package")]
        packages: Vec<String>,
    },
    /// Build the image of every recipe version × runtime (or those the filters pick); images
    /// whose inputs are unchanged are cache hits.
    ///
    /// Example: benchlab build --family ts-sdk --runtime bun-1.1.38
    /// Show what a scenario would do, without doing it: its cells (matrices expanded, every
    /// combination validated against the recipes), the images they need and which the engine
    /// holds already, and the time a run would take.
    ///
    /// Example: benchlab plan scenarios/sweep-python-mcp.toml
    Plan {
        scenario: PathBuf,
        /// The plan as JSON, with every cell.
        #[arg(long)]
        json: bool,
        /// Plan for `benchlab run --parallel` (cells on disjoint CPU sets at once).
        #[arg(long)]
        parallel: bool,
        /// Where earlier runs are (their records refine the time estimate).
        #[arg(long, default_value = "results")]
        results: PathBuf,
        #[command(flatten)]
        checkout: Checkout,
    },
    Build {
        /// Build every image this scenario's cells need (after expanding its matrices), instead
        /// of filtering the recipes.
        #[arg(long, conflicts_with_all = ["family", "version", "runtime"])]
        scenario: Option<PathBuf>,
        #[arg(long)]
        family: Option<String>,
        #[arg(long)]
        version: Option<String>,
        #[arg(long)]
        runtime: Option<String>,
        #[command(flatten)]
        checkout: Checkout,
    },
    /// Regenerate lock folders (lockfiles/<family>/<version>-<runtime>/) with a real locker (uv
    /// for Python, npm for Node/Bun) run in a container of the target's own base.
    ///
    /// Example: benchlab lock python-mcp 2.3.0 --runtime cpython-trixie
    Lock {
        /// A recipe family (images/<family>/).
        family: String,
        /// One of the family's versions, or a release range of its recipe's [[range]]:
        /// `1.1.2..1.x` (every release from 1.1.2 to the latest 1.x), `1.1.2..1.30.0`, `1.1.2..`.
        /// A range lists the package index into lockfiles/<family>/releases.toml and locks every
        /// release that has no fresh lock yet, one container per runtime.
        version: String,
        /// Only this runtime (default: every runtime the version lists).
        #[arg(long)]
        runtime: Option<String>,
        /// With a range: `all` releases, or the `latest-patch` of each minor.
        #[arg(long, default_value = "all", value_parser = crate::recipe::releases::Pick::parse)]
        pick: crate::recipe::releases::Pick,
        #[command(flatten)]
        checkout: Checkout,
    },
    /// The built-in floor server: MCP over stdio, or streamable HTTP (JSON replies) with a plain
    /// REST route per tool, with the least work a correct server can do.
    NullServer {
        /// The tool suite to serve (default: $BENCHLAB_SUITE or weekly).
        #[arg(long)]
        suite: Option<String>,
        /// Serve streamable HTTP on 127.0.0.1 at this port (POST /mcp, POST /api/<tool>)
        /// instead of stdio (default: $BENCHLAB_PORT when $BENCHLAB_TRANSPORT is
        /// streamable-http).
        #[arg(long)]
        http: Option<u16>,
        /// With --http: keep sessions (Mcp-Session-Id) instead of answering statelessly.
        #[arg(long)]
        stateful: bool,
    },
    /// Print the JSON Schema of result records.
    Schema,
    /// Measure a local stdio MCP server command: cold start, tools/list, serial calls.
    ///
    /// Example: benchlab measure -- python3 server.py
    Measure(crate::measure::MeasureArgs),
    /// (inside a server container) spawn and stop servers for the driver.
    #[command(hide = true)]
    Shim {
        #[arg(long)]
        dir: PathBuf,
        #[arg(long, default_value = "/proc")]
        proc_root: PathBuf,
    },
    /// (inside a sidecar container) run one cell's workload.
    #[command(hide = true)]
    Driver {
        /// The cell's DriverSpec as JSON.
        #[arg(long)]
        spec: String,
    },
}

/// Where recipes and lockfiles live, and the CA bundle for downloads (builds' fetch stage,
/// lockers).
#[derive(Debug, clap::Args)]
pub struct Checkout {
    /// The checkout holding images/ and lockfiles/.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// CA bundle for downloads in image builds' fetch stage and in lockers (default:
    /// $SSL_CERT_FILE or the system bundle). It never reaches a runtime image or a hash.
    #[arg(long)]
    ca_bundle: Option<PathBuf>,
}

impl Checkout {
    /// A scenario, its matrices' release ranges read from this checkout's lockfiles.
    fn scenario(&self, path: &Path) -> Result<Scenario, Exit> {
        Scenario::load_in(path, &self.root.join("lockfiles")).map_err(|e| Exit::new(2, e.to_string()))
    }

    fn recipes(&self) -> Result<RecipeBook, Exit> {
        RecipeBook::load(&self.root)
            .map_err(|e| Exit::new(2, format!("{e}\n  (run from the benchlab checkout, or pass --root)")))
    }
}

/// An error with its exit code and, where one exists, what to do.
pub struct Exit {
    pub code: i32,
    pub message: String,
}

impl Exit {
    fn new(code: i32, message: impl Into<String>) -> Self {
        Exit { code, message: message.into() }
    }
}

impl From<RunError> for Exit {
    fn from(e: RunError) -> Self {
        let code = match &e {
            RunError::Scenario(_) => 2,
            RunError::Store(
                crate::record::store::StoreError::Io { .. }
                | crate::record::store::StoreError::Head { .. }
                | crate::record::store::StoreError::Poisoned { .. },
            )
            | RunError::Io { .. } => 3,
            RunError::Store(_) => 2,
            RunError::Placement(_) => 2,
            RunError::Engine(_) | RunError::Bootstrap { .. } => 3,
            RunError::Interrupted { .. } => 130,
        };
        Exit::new(code, error_chain(&e))
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(&format!("\n  caused by: {text}"));
        }
        src = inner.source();
    }
    s
}

fn parse_duration_arg(s: &str) -> Result<u64, String> {
    crate::text::parse_duration_ms(s)
}

/// Runs a command; returns the process exit code.
pub fn main_with(cli: Cli) -> Result<i32, Exit> {
    match cli.command {
        Command::NullServer { suite, http, stateful } => {
            let name =
                suite.or_else(|| std::env::var("BENCHLAB_SUITE").ok()).unwrap_or_else(|| "weekly".into());
            let suite = crate::mcp::suite::Suite::from_name(&name)
                .ok_or_else(|| Exit::new(2, format!("unknown suite {name:?}")))?;
            let env = |k: &str| std::env::var(k).ok();
            let port = http.or_else(|| {
                (env("BENCHLAB_TRANSPORT").as_deref() == Some("streamable-http"))
                    .then(|| env("BENCHLAB_PORT").and_then(|p| p.parse().ok()))
                    .flatten()
            });
            match port {
                Some(port) => {
                    let stateful = stateful || env("BENCHLAB_SESSION").as_deref() == Some("stateful");
                    crate::nullserver::serve_http(suite, port, stateful)
                        .map_err(|e| Exit::new(3, format!("null-server: {e}")))?
                }
                None => {
                    crate::nullserver::serve(suite).map_err(|e| Exit::new(3, format!("null-server: {e}")))?
                }
            }
            Ok(0)
        }
        Command::Measure(args) => crate::measure::main(args),
        Command::Shim { dir, proc_root } => {
            crate::shim::run(&dir, &proc_root).map_err(|e| Exit::new(3, format!("shim: {e:#}")))?;
            Ok(0)
        }
        Command::Driver { spec } => {
            let spec: crate::spec::DriverSpec =
                serde_json::from_str(&spec).map_err(|e| Exit::new(2, format!("driver: bad spec: {e}")))?;
            let outcome = crate::driver::run(&spec);
            Ok(if outcome.failure.is_some() { 1 } else { 0 })
        }
        Command::Schema => {
            print!("{}", crate::record::SCHEMA);
            Ok(0)
        }
        Command::Audit { run, json } => audit_cmd(&run, json),
        Command::Compare { run_a, run_b, threshold, fail_if_slower, format } => {
            compare_cmd(&run_a, &run_b, threshold, fail_if_slower, format)
        }
        Command::DiffEnv { run_a, run_b, json } => {
            let d = crate::record::diffenv::diff_runs(&load_run(&run_a)?, &load_run(&run_b)?);
            let format = if json { report::CompareFormat::Json } else { report::CompareFormat::Table };
            print!("{}", report::render_diff_env(format, &d));
            Ok(0)
        }
        Command::Verify { scenario, run, results, json, markdown } => {
            verify_cmd(&scenario, run.as_deref(), &results, json, markdown.as_deref())
        }
        Command::Report { run, format, out, json } => {
            report_cmd(&run, if json { report::Format::Json } else { format }, out.as_deref())
        }
        Command::Base { suite, packages } => {
            let pk: Vec<&str> = packages.iter().map(String::as_str).collect();
            let source = BaseSource::bootstrap(&suite, &pk);
            source.validate().map_err(|m| Exit::new(2, m))?;
            tokio_runtime().block_on(async {
                let engine = DockerEngine::connect().await.map_err(|e| Exit::new(3, error_chain(&e)))?;
                let mut ui = Progress::new();
                let work = std::env::temp_dir().join("benchlab-work");
                let base = orchestrate::ensure_base(&engine, &source, &work, &mut |e| ui.event(e)).await?;
                ui.finish();
                println!("{}  {}", base.reference, base.image_id);
                if let Some(sha) = base.rootfs_sha256 {
                    println!("rootfs sha256 {sha}");
                }
                Ok(0)
            })
        }
        Command::Plan { scenario, json, parallel, results, checkout } => {
            let recipes = checkout.recipes()?;
            let sc = checkout.scenario(&scenario)?;
            let cpus = crate::placement::available_cpus();
            let cells = orchestrate::plan(&sc, &recipes, &cpus).map_err(Exit::from)?;
            let slots = if parallel { crate::placement::slots(&sc.placement, &cpus).len().max(1) } else { 1 };
            let mut images: Vec<(bool, crate::recipe::ImagePlan)> = Vec::new();
            for c in &cells {
                let native = c.engine == Some(crate::scenario::EngineKind::Native);
                if !images.iter().any(|(n, p)| *n == native && p.same_image(&c.image)) {
                    images.push((native, c.image.clone()));
                }
            }
            let states = tokio_runtime().block_on(async {
                let mut out = Vec::new();
                let engine = DockerEngine::connect().await.ok();
                for (native, p) in &images {
                    let state = match (&engine, native) {
                        (_, true) => crate::plan::ImageState::Native,
                        (Some(e), false) => {
                            orchestrate::image_state(e, p).await.unwrap_or(crate::plan::ImageState::Unknown)
                        }
                        (None, false) => crate::plan::ImageState::Unknown,
                    };
                    out.push((
                        crate::plan::PlannedImage {
                            engine: if *native { "native" } else { "docker" }.into(),
                            family: p.family.clone(),
                            version: p.version.clone(),
                            runtime: p.runtime_name.clone(),
                            state,
                        },
                        p.runtime_kind,
                    ));
                }
                out
            });
            let mut earlier = Vec::new();
            for run in glob_runs(&results) {
                if let Ok(r) = crate::record::store::read_records(&run) {
                    earlier.extend(r.into_iter().filter(|r| r.status == crate::record::Status::Ok));
                }
            }
            let learned = crate::plan::learned(&earlier);
            let view = crate::plan::PlanView::new(&sc.name, &cells, states, &learned, slots);
            if json {
                let cells_json: Vec<serde_json::Value> = cells
                    .iter()
                    .map(|c| {
                        serde_json::json!({
                            "id": c.id,
                            "family": c.image.family,
                            "version": c.image.version,
                            "runtime": c.image.runtime_name,
                            "api": c.image.api,
                            "workload": c.workload.kind(),
                            "placement": c.placement,
                            "estimate_s": crate::plan::estimate(c, &learned).seconds,
                        })
                    })
                    .collect();
                let mut v = serde_json::to_value(&view).expect("plans serialise");
                v["cell_list"] = serde_json::Value::Array(cells_json);
                println!("{}", serde_json::to_string_pretty(&v).expect("JSON prints"));
            } else {
                print!("{}", view.text());
            }
            Ok(0)
        }
        Command::Build { scenario, family, version, runtime, checkout } => {
            let recipes = checkout.recipes()?;
            let plans = match &scenario {
                Some(path) => {
                    let scenario = checkout.scenario(path)?;
                    let cells = orchestrate::plan(&scenario, &recipes, &crate::placement::available_cpus())
                        .map_err(Exit::from)?;
                    orchestrate::distinct_images(&cells)
                }
                None => {
                    let wants = recipes.all_wants(family.as_deref(), version.as_deref(), runtime.as_deref());
                    if wants.is_empty() {
                        return Err(Exit::new(2, "no recipe version and runtime match those filters"));
                    }
                    let mut plans = Vec::new();
                    for w in &wants {
                        plans.push(recipes.resolve(w).map_err(|e| Exit::new(2, e.message))?);
                    }
                    plans
                }
            };
            let opts = run_options(PathBuf::from("results"), None, checkout.ca_bundle)?;
            tokio_runtime().block_on(async {
                let engine = DockerEngine::connect().await.map_err(|e| Exit::new(3, error_chain(&e)))?;
                let mut ui = Progress::new();
                let r = orchestrate::build_plans(&engine, &plans, &opts, &mut |e| ui.event(e)).await;
                ui.finish();
                let images = r.map_err(Exit::from)?;
                let built = images.iter().filter(|(_, b)| *b).count();
                for (reference, _) in &images {
                    println!("{reference}");
                }
                eprintln!("{} image(s): {built} built, {} cache hit(s)", images.len(), images.len() - built);
                Ok(0)
            })
        }
        Command::Lock { family, version, runtime, pick, checkout } => {
            let recipes = checkout.recipes()?;
            let opts = run_options(PathBuf::from("results"), None, checkout.ca_bundle)?;
            tokio_runtime().block_on(async {
                let engine = DockerEngine::connect().await.map_err(|e| Exit::new(3, error_chain(&e)))?;
                let mut ui = Progress::new();
                let r = orchestrate::lock(
                    &engine,
                    &recipes,
                    &family,
                    &version,
                    pick,
                    runtime.as_deref(),
                    &opts,
                    &mut |e| ui.event(e),
                )
                .await;
                ui.finish();
                for dir in r.map_err(Exit::from)? {
                    println!("locked {}", dir.display());
                }
                Ok(0)
            })
        }
        Command::Run {
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
            parallel,
        } => {
            let mut adjust = |s: &mut Scenario| {
                s.override_load_times(warmup, duration);
                if !only.is_empty() {
                    s.only = only.clone();
                }
            };
            let scenario = match &scenario {
                Some(path) => {
                    let mut scenario = checkout.scenario(path)?;
                    adjust(&mut scenario);
                    if !scenario.only.is_empty() && scenario.cells().is_empty() {
                        return Err(Exit::new(
                            2,
                            format!(
                                "--only {:?} matches no cell of {}",
                                scenario.only,
                                scenario.path.display()
                            ),
                        ));
                    }
                    Some(scenario)
                }
                None => None,
            };
            let recipes = checkout.recipes()?;
            let mut opts = run_options(results, run_id, checkout.ca_bundle)?;
            opts.parallel = parallel;
            let summary = tokio_runtime().block_on(async {
                // Native cells need root and cgroups; a scenario may name either engine per server.
                let native = NativeEngine::new();
                let docker = match engine.as_str() {
                    "native" => None,
                    _ => match DockerEngine::connect().await {
                        Ok(d) => Some(d),
                        Err(e) if engine == "docker" => return Err(Exit::new(3, error_chain(&e))),
                        Err(e) => {
                            if let Err(n) = &native {
                                return Err(Exit::new(
                                    3,
                                    format!(
                                        "{}\nand the native engine cannot run here either: {}",
                                        error_chain(&e),
                                        error_chain(n)
                                    ),
                                ));
                            }
                            eprintln!(
                                "notice: no container engine answers ({}), so this run uses the native engine: \
                                 servers run as host processes in lab cgroups, installed from the same lockfiles \
                                 into {} with this host's interpreters (recorded in each record's environment). \
                                 Start Docker (`scripts/engine.sh`) or pass --engine docker to insist on containers.",
                                e.to_string().lines().next().unwrap_or(""),
                                crate::engine::native::cache::cache_root().display()
                            );
                            None
                        }
                    },
                };
                let native = match (&native, engine.as_str()) {
                    (Err(e), "native") => return Err(Exit::new(3, error_chain(e))),
                    (n, _) => n.as_ref().ok(),
                };
                let lab = Lab { containers: docker.as_ref(), native };
                run_with(lab, &scenario, &resume, &recipes, &opts, &mut adjust).await
            })?;
            if resume.is_some() {
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
                return Ok(1);
            }
            Ok(0)
        }
    }
}

/// Run options from the command line: the lab's own executable and the fetch-stage CA bundle.
fn run_options(
    results: PathBuf,
    run_id: Option<String>,
    ca_bundle: Option<PathBuf>,
) -> Result<RunOptions, Exit> {
    let exe =
        std::env::current_exe().map_err(|e| Exit::new(3, format!("cannot find my own executable: {e}")))?;
    let ca = ca_bundle
        .or_else(|| std::env::var_os("SSL_CERT_FILE").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
    Ok(RunOptions {
        results_dir: results,
        run_id,
        benchlab_exe: exe,
        ca_bundle: ca,
        work_dir: std::env::temp_dir().join("benchlab-work"),
        lab_volume_bytes: 64 << 20,
        parallel: false,
    })
}

fn tokio_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

/// A run folder's records.jsonl, or the file itself when given one.
fn records_path(run: &Path) -> PathBuf {
    if run.is_dir() {
        run.join(RECORDS_FILE)
    } else {
        run.to_path_buf()
    }
}

/// A run's records, from its folder or its records.jsonl.
fn load_run(run: &Path) -> Result<Vec<crate::record::Record>, Exit> {
    read_records(&records_path(run)).map_err(|e| Exit::new(2, e.to_string()))
}

fn compare_cmd(
    a: &Path,
    b: &Path,
    threshold: f64,
    fail_if_slower: Option<f64>,
    format: report::CompareFormat,
) -> Result<i32, Exit> {
    if threshold.is_nan() || threshold < 0.0 || fail_if_slower.is_some_and(|p| p.is_nan() || p < 0.0) {
        return Err(Exit::new(2, "--threshold and --fail-if-slower take a percentage >= 0"));
    }
    let c = report::compare(&load_run(a)?, &load_run(b)?, threshold);
    print!("{}", report::render_compare(format, &c));
    if let Some(pct) = fail_if_slower {
        let bad = report::gate_failures(&c, pct);
        for m in &bad {
            eprintln!(
                "gate: {} {} is {:.3}x (lower bound {:.3} > {:.3})",
                m.cell,
                m.metric.label(),
                m.ratio.estimate,
                m.ratio.lower,
                1.0 + pct / 100.0
            );
        }
        if !bad.is_empty() {
            return Ok(1);
        }
    }
    Ok(0)
}

fn audit_cmd(run: &Path, json: bool) -> Result<i32, Exit> {
    let path = records_path(run);
    let report = crate::record::audit::audit(&path);
    if json {
        println!("{}", serde_json::to_string_pretty(&report).expect("reports serialise"));
        return Ok(if report.is_clean() { 0 } else { 2 });
    }
    let short = |v: &str| {
        if v.len() == 64 && v.chars().all(|c| c.is_ascii_hexdigit()) {
            format!("{}…", &v[..12])
        } else {
            v.to_string()
        }
    };
    match report.first_problem() {
        None => println!(
            "{}: intact: {} record(s) of run {}, last seq {} (hash {})",
            path.display(),
            report.records,
            report.run_id.as_deref().unwrap_or("—"),
            report.last_seq.map_or("—".into(), |s| s.to_string()),
            report.last_hash.as_deref().map_or("—".into(), short)
        ),
        Some(first) => {
            println!(
                "{}: DAMAGED: {} problem(s); the first is {first}",
                path.display(),
                report.problems.len()
            );
            let mut t = comfy_table::Table::new();
            t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
            t.set_header(vec!["line", "col", "seq", "cell", "check", "expected", "found"]);
            for p in &report.problems {
                let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
                t.add_row(vec![
                    opt(p.line.map(|l| l.to_string())),
                    opt(p.column.map(|c| c.to_string())),
                    opt(p.seq.map(|s| s.to_string())),
                    opt(p.cell_id.clone()),
                    p.check.as_str().to_string(),
                    short(&p.expected),
                    short(&p.found),
                ]);
            }
            println!("{t}");
            for (check, _) in report.counts() {
                println!("  {}: {}", check.as_str(), check.describe());
            }
        }
    }
    for note in &report.notes {
        println!("note: {note}");
    }
    Ok(if report.is_clean() { 0 } else { 2 })
}

/// The newest run folder under `<results>/<name>/` whose records.jsonl holds something.
fn newest_run(results: &Path, name: &str) -> Option<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(results.join(name))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(RECORDS_FILE).metadata().is_ok_and(|m| m.len() > 0))
        .collect();
    // Run ids start with a UTC timestamp, so the name orders them.
    runs.sort();
    runs.pop()
}

fn verify_cmd(
    scenario: &Path,
    run: Option<&Path>,
    results: &Path,
    json: bool,
    markdown: Option<&Path>,
) -> Result<i32, Exit> {
    let scenario = Scenario::load(scenario).map_err(|e| Exit::new(2, e.to_string()))?;
    let cell_ids: Vec<String> = scenario.cells().iter().map(|c| c.id()).collect();
    let claims = crate::claims::parse_claims(&scenario.path, &scenario.source, &cell_ids)
        .map_err(|e| Exit::new(2, e.to_string()))?;
    let run = match run {
        Some(r) => Some(r.to_path_buf()),
        None => newest_run(results, &scenario.name),
    };
    let records = match &run {
        Some(r) => load_run(r)?,
        None => Vec::new(),
    };
    let audit = crate::claims::verify(&scenario, &claims, &records, run.map(|r| r.display().to_string()));
    if json {
        print!("{}", crate::claims::render::json(&audit));
    } else {
        print!("{}", crate::claims::render::table(&audit));
    }
    if let Some(p) = markdown {
        std::fs::write(p, crate::claims::render::markdown(&audit))
            .map_err(|e| Exit::new(3, format!("write {}: {e}", p.display())))?;
    }
    Ok(audit.exit_code())
}

fn report_cmd(run: &Path, format: report::Format, out: Option<&Path>) -> Result<i32, Exit> {
    let records = load_run(run)?;
    // A report from a store that does not audit clean says so before anything else.
    let path = records_path(run);
    let audit = crate::record::audit::audit(&path);
    if let Some(first) = audit.first_problem() {
        eprintln!(
            "warning: {} does not audit clean ({} problem(s); the first is {first}); `benchlab audit {}` lists them",
            path.display(),
            audit.problems.len(),
            run.display()
        );
    }
    let text = report::render(format, &records);
    match out {
        Some(p) => {
            std::fs::write(p, text).map_err(|e| Exit::new(3, format!("write {}: {e}", p.display())))?
        }
        None => print!("{text}"),
    }
    Ok(if records.iter().all(|r| r.as_expected()) { 0 } else { 1 })
}

/// Runs a scenario or resumes a run folder, with progress on stderr.
async fn run_with<E: crate::engine::Engine>(
    lab: Lab<'_, E>,
    scenario: &Option<Scenario>,
    resume: &Option<PathBuf>,
    recipes: &RecipeBook,
    opts: &RunOptions,
    adjust: &mut dyn FnMut(&mut Scenario),
) -> Result<orchestrate::RunSummary, Exit> {
    let mut ui = Progress::new();
    let r = match (scenario, resume) {
        (Some(scenario), _) => orchestrate::run(lab, scenario, recipes, opts, &mut |e| ui.event(e)).await,
        (None, Some(dir)) => orchestrate::resume(lab, dir, recipes, opts, adjust, &mut |e| ui.event(e)).await,
        (None, None) => unreachable!("clap requires a scenario or --resume"),
    };
    ui.finish();
    r.map_err(Exit::from)
}

/// Every records file under a results folder (`<results>/<scenario>/<run>/records.jsonl`).
fn glob_runs(results: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for scenario in std::fs::read_dir(results).into_iter().flatten().flatten() {
        for run in std::fs::read_dir(scenario.path()).into_iter().flatten().flatten() {
            let p = run.path().join("records.jsonl");
            if p.is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A duration for a person: "45 s", "12 min", "2 h 05 min".
pub fn eta_text(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..=89 => format!("{s} s"),
        90..=5399 => format!("{} min", (s + 30) / 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600 + 30) / 60),
    }
}

/// Renders orchestrator events: bars on a terminal, plain lines elsewhere (CI logs).
struct Progress {
    bar: Option<ProgressBar>,
    tty: bool,
    /// Cells run at once: plain lines, not one bar.
    parallel: bool,
}

impl Progress {
    fn new() -> Self {
        Progress { bar: None, tty: std::io::stderr().is_terminal(), parallel: false }
    }

    fn spinner(&mut self, msg: String) {
        self.finish_bar();
        if self.tty {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("valid template"),
            );
            b.enable_steady_tick(Duration::from_millis(120));
            b.set_message(msg);
            self.bar = Some(b);
        } else {
            eprintln!("{msg}");
        }
    }

    fn line(&mut self, msg: String) {
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    fn finish_bar(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }

    fn finish(&mut self) {
        self.finish_bar();
    }

    fn event(&mut self, e: Event) {
        match e {
            Event::Planned { run_id, run_dir, cells, images } => self.line(format!(
                "run {run_id}: {cells} cell(s), {images} image(s); records in {}",
                run_dir.display()
            )),
            Event::BaseBootstrapping { reference, suite } => self.spinner(format!(
                "bootstrapping base {reference} from Debian {suite} (debootstrap, about a minute)"
            )),
            Event::Ready { what, reference, cached, seconds } => {
                self.finish_bar();
                if cached {
                    self.line(format!("{what} {reference}: cache hit, no build"));
                } else {
                    self.line(format!("{what} {reference}: ready in {seconds:.0} s"));
                }
            }
            Event::ImageBuilding { reference, progress } => {
                let eta =
                    progress.eta_s.map(|s| format!(", at most {} left", eta_text(s))).unwrap_or_default();
                self.spinner(format!(
                    "building image {}/{} {reference}{eta}",
                    progress.index + 1,
                    progress.total
                ))
            }
            Event::Locking { what } => self.spinner(format!("locking {what}, inside the target's base")),
            Event::BuildLog { line } => match &self.bar {
                Some(b) => b.set_message(line.chars().take(100).collect::<String>()),
                None => eprintln!("  | {line}"),
            },
            Event::CellStarted { index, total, cell_id, eta_s } => {
                self.finish_bar();
                let eta = eta_s.map(|s| format!(" (about {} left)", eta_text(s))).unwrap_or_default();
                let msg = format!("cell {}/{total} {cell_id}{eta}", index + 1);
                if self.tty && !self.parallel {
                    let b = ProgressBar::new(1);
                    b.set_style(
                        ProgressStyle::with_template(
                            "{prefix:40} {msg:7} [{bar:30}] {pos}/{len} {elapsed_precise}",
                        )
                        .expect("valid template")
                        .progress_chars("=> "),
                    );
                    b.set_prefix(msg);
                    self.bar = Some(b);
                } else {
                    eprintln!("{msg}");
                }
            }
            Event::CellProgress { phase, done, total, .. } => {
                if let Some(b) = &self.bar {
                    b.set_length(total);
                    b.set_position(done);
                    b.set_message(phase);
                }
            }
            Event::Parallel { slots, why } => {
                self.parallel = slots > 1;
                self.line(format!("--parallel: {why}"))
            }
            Event::LeftoversRemoved { run_id, owner, removed } => self.line(format!(
                "removed {removed} container(s) and volume(s) left by benchlab {owner} (run {run_id}), which \
                 died without cleaning up"
            )),
            Event::CellFinished { record } => {
                self.finish_bar();
                let status = match &record.failure {
                    None => "ok".to_string(),
                    Some(f) => {
                        format!("FAILED {}: {}", f.reason.as_str(), f.detail.lines().next().unwrap_or(""))
                    }
                };
                self.line(format!("  {} {status}", record.cell.id));
            }
        }
    }
}
