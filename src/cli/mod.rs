//! The command line: the clap `Cli` type, the dispatch to one module per command, and what the
//! commands share (the checkout's recipes and scenarios, run options, a run's records). Each
//! command's module holds its arguments and prints its own output; the library under it never
//! prints.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::orchestrate::RunOptions;
use crate::recipe::RecipeBook;
use crate::record::store::{read_records, RECORDS_FILE};
use crate::scenario::Scenario;

mod attest;
mod audit;
mod base;
mod build;
mod compare;
mod diff_env;
mod driver;
pub mod exit;
mod fingerprint;
mod import;
mod lock;
mod measure;
mod null_server;
mod plan;
mod progress;
mod report;
mod run;
mod schema;
mod service_api;
mod service_mock;
mod service_probe;
mod shim;
mod site;
mod source;
mod status;
mod verify;
mod worker;

pub use exit::Exit;
use exit::EXIT_HELP;

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
    Run(run::RunArgs),
    /// Show the summary table of a finished run, from its records.
    ///
    /// Example: benchlab report results/20261130T091500Z-quickstart-1234
    Report(report::ReportArgs),
    /// Compare two runs cell by cell: the ratio b/a of every metric with its 95% interval, flagged
    /// slower or faster only when the whole interval is beyond the threshold, with what changed in
    /// each cell's environment.
    ///
    /// Example: benchlab compare results/quickstart/<run-a> results/quickstart/<run-b> --fail-if-slower 10
    Compare(compare::CompareArgs),
    /// The environment differences between two runs, field by field (packages by name), cell by
    /// cell, with the differences every cell shares listed once.
    DiffEnv(diff_env::DiffEnvArgs),
    /// Verify a run's store: every record's hash and env_hash, the hash chain and sequence, the
    /// head file and the scenario copy; names the first bad line and every problem found.
    ///
    /// Example: benchlab audit results/seed-000-stdio/20261130T095040Z-seed-000-stdio-8336
    Audit(audit::AuditArgs),
    /// Check a published source's claims against a run: every `[[claim]]` of the scenario (absolute
    /// figures, ratios, orderings, soak slopes, outcomes, and findings about the source itself) is
    /// matched to the run's records and judged reproduced, contradicted, inconclusive or
    /// not_measured, with the measured value, its 95% interval, the tolerance used and the
    /// environment differences that could explain a gap: CPU and placement, and every difference
    /// from what the scenario's `[source]` states the source ran (package versions, runtime,
    /// machine, kernel, client, its own program), as recorded or derived again from the records.
    ///
    /// A figure is reproduced when its whole interval lies within the tolerance band, contradicted
    /// when it lies wholly outside, inconclusive when it straddles an edge. A figure with no
    /// between-run interval (one reading, one run's histogram) gets no verdict; run the cell with
    /// repeats. A noisy figure (CV over 10%) has its interval widened by 1 + CV on each side and
    /// is judged by the same rule. Runs are the unit: a cell's repeats give the median of their
    /// values and a between-run interval (Student t on the logarithms), never narrower than the
    /// runs' pooled within-run interval, which is printed beside it; a ratio of two such cells
    /// gets Welch's t, and one run's samples are resampled. Runs the quiet check flagged are
    /// counted, and records from hosts whose speed fingerprints differ are labelled. Absolute
    /// figures from other hardware are judged by the ratio they imply to a reference figure
    /// (the claim's `relative_to`), and the report says so.
    ///
    /// Every claim is also judged with its figure halved and doubled (an ordering reversed, an
    /// outcome flipped): a claim still reproduced both ways cannot fail, and is named. Claims
    /// are grouped by the measurement they rest on, so mirrored or repeated claims count once.
    ///
    /// Exit codes: 0 every measurable claim reproduced (not_measured and inconclusive do not
    /// fail); 1 some claim contradicted, or some claim cannot fail; 2 bad input (a claim or
    /// scenario error, with file:line:column; unreadable records); 3 the environment (a report
    /// that cannot be written).
    ///
    /// Example: benchlab verify scenarios/seed-000-stdio.toml --markdown results/seed-000-stdio/AUDIT.md
    Verify(verify::VerifyArgs),
    /// Sign a run: an in-toto attestation of its records, scenario copy and images, in a DSSE
    /// envelope signed with Ed25519.
    ///
    /// The statement's subjects are records.jsonl, scenario.toml and every image digest the
    /// records name; its predicate holds the run ids, env hashes, record count, audit result,
    /// claims' verdict counts and the lab binary's sha256 (format: src/attest/mod.rs). A damaged
    /// run is refused. --generate-key writes a key pair first.
    ///
    /// Example: benchlab attest --generate-key lab.key
    ///
    /// Example: benchlab attest results/seed-000-sse/20261130T122735Z-seed-000-sse-5513 --key lab.key
    Attest(attest::AttestArgs),
    /// Check a run's attestation: its signature, then the run folder as it is now.
    ///
    /// The run must audit clean, every subject's sha256 match the files and the records' images,
    /// and the predicate (run ids, record count, env hashes, verdicts of a fresh verify) match.
    /// The key comes from a keyring named by the user, never from the run folder; the envelope
    /// must be the run's newest line in an ATTESTATIONS.log beside the runs, when there is one.
    /// Exit codes: 0 it holds; 1 a bad signature, an untrusted key or a mismatch (named); 2 bad
    /// input (no keyring, a key inside the run).
    ///
    /// Example: benchlab verify-attestation results/seed-000-sse/20261130T122735Z-seed-000-sse-5513 --keyring results/keyring
    VerifyAttestation(attest::VerifyAttestationArgs),
    /// Bootstrap a base image from a Debian suite (debootstrap, then import); does nothing when
    /// the same base exists already.
    ///
    /// Example: benchlab base --suite trixie --package python3 --package python3-venv
    Base(base::BaseArgs),
    /// Show what a scenario would do, without doing it: its cells (matrices expanded, every
    /// combination validated against the recipes), the images they need and which the engine
    /// holds already, and the time a run would take.
    ///
    /// Example: benchlab plan scenarios/sweep-python-mcp.toml
    Plan(plan::PlanArgs),
    /// Build the image of every recipe version × runtime (or those the filters pick); images
    /// whose inputs are unchanged are cache hits.
    ///
    /// Example: benchlab build --family ts-sdk --runtime bun-1.1.38
    Build(build::BuildArgs),
    /// Regenerate lock folders (lockfiles/<family>/<version>-<runtime>/) with a real locker (uv
    /// for Python, npm for Node/Bun, cargo for Rust) run in a container of the target's own base.
    ///
    /// Examples: benchlab lock python-mcp 2.3.0 --runtime cpython-trixie;
    /// benchlab lock rmcp 0.17.0..3.x --pick latest-patch (every minor's latest patch, each as of
    /// its publication day)
    Lock(lock::LockArgs),
    /// The built-in floor server: MCP over stdio, or streamable HTTP (JSON replies) with a plain
    /// REST route per tool, with the least work a correct server can do.
    NullServer(null_server::NullServerArgs),
    /// The lab's API service, a backing service of `shop` cells: the shop's catalogue and prices
    /// over HTTP/1.1 (JSON, keep-alive) on 127.0.0.1, generated from a seed (docs/TOOLS-shop.md).
    ///
    /// Routes: GET /health → {ok, seed, seed_sha256, products}; GET /search?q=<text>&limit=<n>
    /// → {results: [{id, name, price_cents}], count}: products whose name or category contains q,
    /// case-insensitively, by id (limit 10 by default, at most 50); GET /items/<id> → {id, name,
    /// category, price_cents}, 404 when unknown; POST /price with {items: [{id, qty}]} →
    /// {subtotal_cents, tax_cents, total_cents} (8 % tax, half up to a cent), 400 on a bad body or
    /// an unknown id. Anything else is 404.
    ///
    /// Example: benchlab service-api --port 8901 --seed 1
    ServiceApi(service_api::ServiceApiArgs),
    /// Turn a benchmark's own files into a scenario: `import compose` writes a skeleton from its
    /// compose file (servers as sources, their environment and limits, what the lab cannot take
    /// as written in `# lab:` comments).
    ///
    /// Example: benchlab import compose docker-compose.yml --git URL --commit HASH -o repro.toml
    Import(import::ImportArgs),
    /// A server's own code by content: `source fetch` fetches every server `source` of a
    /// scenario (a git commit, a folder, a tarball) into the cache and prints its tree hash.
    ///
    /// Example: benchlab source fetch scenarios/repro.toml --source-mirror URL=PATH
    Source(source::SourceArgs),
    /// Where a run on a Slurm cluster stands: each cell queued, running (node, CPUs, attempt) or
    /// done, with its job's Slurm state, beside the records written so far.
    ///
    /// Example: benchlab status results/cluster-sweep/<run-id>
    Status(status::StatusArgs),
    /// Measure this host's speed fingerprint: a short fixed calibration that tells two hosts
    /// apart by speed when their CPU model, kernel and CPU count read the same.
    ///
    /// Four probes, each in 15 rounds (after a warm-up) with its median and a 95% interval of
    /// the median: an integer loop (ns per iteration) and a 64 MiB memory copy (GB/s) on CPU A,
    /// one-byte round trips over pipes between CPU A and CPU B (µs), and fork+exec of /bin/true
    /// from CPU A (ms). The loop, the copy and the spawns are timed by CPU time, so other
    /// processes on the CPUs slow them little. It takes about a second.
    ///
    /// Every run records its host's fingerprint in each record's host_check.fingerprint (on a
    /// Slurm cluster each node measures its own, once per run, before its first cell), so
    /// comparisons across hosts whose fingerprints differ beyond noise can be refused or labelled.
    /// Two fingerprints differ when some probe's intervals are disjoint and its ratio is beyond
    /// its threshold: 15% for the CPU loop, 75% for spawn, 2.5x for memory bandwidth (which
    /// drifts on a shared VM); the pipe round trip is shown, never counted.
    ///
    /// Example: benchlab fingerprint --cpus 1,0 --json
    Fingerprint(fingerprint::FingerprintArgs),
    /// Print the JSON Schema of result records.
    Schema,
    /// Write one static site over every run in results/: a front page (each series' newest
    /// figures, filterable; the newest steps the history rule found; the claims audits), a
    /// history page per SDK family x runtime x transport (a chart per metric with 95% intervals,
    /// fitted levels and named steps; click a point for its release, lock and records; two
    /// releases compared), each reproduction's audit (verdicts by evidence, the source's words
    /// beside the lab's figure), a compare page per scenario with two runs or more, and every
    /// run's report. Series are split by host class (CPU model, CPUs, memory, cgroup, engine)
    /// and by server environment, never merged across them.
    ///
    /// No page fetches anything: it works from file:// and any static host. Every view (filters,
    /// metric, percentile, the compared pair) is kept in the address as a permalink.
    ///
    /// Example: benchlab site results --out docs/site
    ///
    /// Example: benchlab site --out /tmp/site --serve --port 8000
    Site(site::SiteArgs),
    /// Measure a local stdio MCP server command (cold start, tools/list, serial calls), or with
    /// --url a running HTTP server under load (closed loop, or open loop with --rate).
    ///
    /// Example: benchlab measure -- python3 server.py
    ///
    /// Example: benchlab measure --url http://127.0.0.1:8000/mcp --workers 50
    Measure(crate::measure::MeasureArgs),
    /// (inside a server container) spawn and stop servers for the driver.
    #[command(hide = true)]
    Shim(shim::ShimArgs),
    /// (inside a sidecar container) run one cell's workload.
    #[command(hide = true)]
    Driver(driver::DriverArgs),
    /// (in a Slurm job on a node) run one cell of a run through the node's own backend.
    #[command(hide = true)]
    Worker(worker::WorkerArgs),
    /// (in a cell's service container) the mock HTTP service: canned answers from MockServer-style
    /// expectations.
    #[command(hide = true)]
    ServiceMock(service_mock::ServiceMockArgs),
    /// (in a cell's program service container) one readiness probe: tcp or http.
    #[command(hide = true)]
    ServiceProbe(service_probe::ServiceProbeArgs),
    /// (in a cell's service container) one of the lab's own services readied and seeded.
    #[command(hide = true)]
    ServiceReady(service_probe::ServiceReadyArgs),
}

/// Runs a command; returns the process exit code.
pub fn main_with(cli: Cli) -> Result<i32, Exit> {
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Report(args) => report::run(args),
        Command::Compare(args) => compare::run(args),
        Command::DiffEnv(args) => diff_env::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Attest(args) => attest::run(args),
        Command::VerifyAttestation(args) => attest::verify(args),
        Command::Base(args) => base::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Build(args) => build::run(args),
        Command::Lock(args) => lock::run(args),
        Command::NullServer(args) => null_server::run(args),
        Command::ServiceApi(args) => service_api::run(args),
        Command::Import(args) => import::run(args),
        Command::Source(args) => source::run(args),
        Command::Status(args) => status::run(args),
        Command::Fingerprint(args) => fingerprint::run(args),
        Command::Schema => schema::run(),
        Command::Site(args) => site::run(args),
        Command::Measure(args) => measure::run(args),
        Command::Shim(args) => shim::run(args),
        Command::Driver(args) => driver::run(args),
        Command::Worker(args) => worker::run(args),
        Command::ServiceMock(args) => service_mock::run(args),
        Command::ServiceProbe(args) => service_probe::run(args),
        Command::ServiceReady(args) => service_probe::ready(args),
    }
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
    /// A local clone to read a source's repository from, as URL=PATH (a working copy or a bare
    /// repository; nothing is written into it), for hosts that reach no git host: the servers'
    /// own `source`, and the `[source] results` files a run keeps in its folder (`published/`,
    /// `published.json`) for `verify`. May be given several times.
    #[arg(long, value_name = "URL=PATH")]
    source_mirror: Vec<String>,
}

impl Checkout {
    /// A scenario, its matrices' release ranges read from this checkout's lockfiles, and every
    /// server's own source fetched into the work folder's cache (through `--source-mirror`).
    fn scenario(&self, path: &Path) -> Result<Scenario, Exit> {
        let mut sc =
            Scenario::load_in(path, &self.root.join("lockfiles")).map_err(|e| Exit::input(e.to_string()))?;
        let mirrors = self.mirrors()?;
        sc.fetch_sources(&mirrors, &crate::source::cache_root(&work_dir())).map_err(|e| match e {
            crate::scenario::FetchFailure::Input(e) => Exit::input(e.to_string()),
            crate::scenario::FetchFailure::Host(m) => Exit::environment(m),
        })?;
        Ok(sc)
    }

    fn mirrors(&self) -> Result<crate::source::Mirrors, Exit> {
        crate::source::Mirrors::parse(&self.source_mirror).map_err(Exit::input)
    }

    fn recipes(&self) -> Result<RecipeBook, Exit> {
        RecipeBook::load(&self.root)
            .map_err(|e| Exit::input(format!("{e}\n  (run from the benchlab checkout, or pass --root)")))
    }
}

/// Run options from the command line: the lab's own executable and the fetch-stage CA bundle.
fn run_options(
    results: PathBuf,
    run_id: Option<String>,
    ca_bundle: Option<PathBuf>,
) -> Result<RunOptions, Exit> {
    let exe = std::env::current_exe()
        .map_err(|e| Exit::environment(format!("cannot find my own executable: {e}")))?;
    let ca = ca_bundle
        .or_else(|| std::env::var_os("SSL_CERT_FILE").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/ssl/certs/ca-certificates.crt"));
    Ok(RunOptions {
        results_dir: results,
        run_id,
        benchlab_exe: exe,
        ca_bundle: ca,
        work_dir: work_dir(),
        lab_volume_bytes: 64 << 20,
        parallel: false,
        order_seed: None,
        require_quiet_s: None,
        published: None,
    })
}

/// The lab's scratch folder: bases, owner entries, the frozen binary, the registry's storage and
/// Slurm job folders.
fn work_dir() -> PathBuf {
    std::env::temp_dir().join("benchlab-work")
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
    read_records(&records_path(run)).map_err(|e| Exit::input(e.to_string()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_consistent() {
        <super::Cli as clap::CommandFactory>::command().debug_assert();
    }
}
