//! The scenario file's schema as written (serde types with spans, unknown keys refused): servers,
//! matrices, workloads and timeouts. It checks nothing beyond what serde does; expansion and
//! validation live beside it (`matrix`, `workload`, `validate`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::mcp::transport::{ReplyMode, SessionMode, Transport};
use crate::spec::{Expect, Lifecycle, PlacementMode, PlacementSpec};
pub use crate::spec::{SourceStatement, StatedHardware};

/// One server under test.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerEntry {
    /// The scenario's name for the server, unique within it.
    pub id: Spanned<String>,
    /// A recipe family in `images/` (`python-mcp`, ...), `benchlab-null` for the floor, or
    /// `source` (the default, and only, family of a server with a `source`).
    #[serde(default = "source_family")]
    pub family: Spanned<String>,
    /// The SDK version; required for recipe families.
    pub version: Option<Spanned<String>>,
    /// The runtime (`cpython-bookworm`, ...); the recipe's default when absent.
    pub runtime: Option<Spanned<String>>,
    /// Overrides the scenario's suite for this server.
    pub suite: Option<String>,
    /// Runs the server source of another API generation than the version's own; only with
    /// `expect = "failure"` (to show that it fails, as a published claim may say).
    pub api: Option<Spanned<String>>,
    /// Extra environment for the server process (recorded in the cell).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `success` (the default) or `failure`: a cell expected to fail is a result when it fails.
    #[serde(default)]
    pub expect: Expect,
    /// `stdio` (the default), `streamable-http` or `sse`: the transport the cell reaches the
    /// server through. `concurrency`, `open_loop` and `http_api` workloads need an HTTP one.
    pub transport: Option<Spanned<Transport>>,
    /// Streamable HTTP only: `json` or `sse` replies (the recipe's first when absent).
    pub reply: Option<Spanned<ReplyMode>>,
    /// Streamable HTTP only: `stateful` or `stateless` (the recipe's first when absent).
    pub session: Option<Spanned<SessionMode>>,
    /// The runtime version the source being reproduced used (e.g. "3.12.3"); when the cell runs
    /// another, the record's environment lists the deviation.
    pub source_runtime: Option<String>,
    /// What the source ran that this server stands in for, in words (e.g. "the seed's
    /// unpublished arithmetic hashing server"): the lab's suite server runs in its place, which
    /// every record and verdict of its cells says.
    pub stand_in: Option<String>,
    /// `split` or `shared`: this server's placement mode instead of the scenario's (a matrix's
    /// `placements` axis sets it).
    pub placement: Option<Spanned<PlacementMode>>,
    /// `docker` or `native`: where this server's cells run, whatever `run --engine` says (a
    /// matrix's `engines` axis sets it; comparing both shows what the container costs).
    pub engine: Option<Spanned<EngineKind>>,
    /// A program the reproduced source published (`[api.<name>.programs.<program>]` of the
    /// family's recipe), run over stdio instead of the lab's suite server.
    pub program: Option<Spanned<String>>,
    /// A labelled lock of the version (`lockfiles/<family>/<version>-<runtime>+<lock>/`, e.g.
    /// `era`: resolved as of the release's day) instead of its plain lock.
    pub lock: Option<Spanned<String>>,
    /// `precompiled` (the default: the image holds compiled bytecode of its packages) or `none`
    /// (a program's first start compiles it, as after an install that does not compile).
    pub bytecode: Option<Spanned<Bytecode>>,
    /// Server worker processes or threads (the runtime's own model: Node `cluster`, uvicorn
    /// workers, Bun's `reusePort`, threads of the floor server), each given a CPU of its own
    /// where the host has one. HTTP servers only; default 1.
    pub workers: Option<Spanned<u32>>,
    /// How long this server may take to start (milliseconds), instead of the scenario's
    /// `[timeouts] startup_ms`: a server known to be slow to import, or one expected to fail by
    /// never starting, which need not hold the run for the whole scenario's wait.
    pub startup_ms: Option<Spanned<u64>>,
    /// The server's own code, pinned by content: `{ git = URL, commit = HASH, path = "dir" }`,
    /// `{ dir = "folder" }` or `{ tarball = "file.tgz", sha256 = "…" }` (`benchlab source fetch`).
    pub source: Option<Spanned<RawServerSource>>,
    /// A server built from its source: the port it listens on (the Dockerfile's one `EXPOSE`
    /// when absent), its streamable HTTP endpoint (`/mcp` when absent), and the command that
    /// replaces its Dockerfile's `ENTRYPOINT`/`CMD`.
    pub port: Option<Spanned<u16>>,
    pub http_path: Option<Spanned<String>>,
    pub command: Option<Spanned<Vec<String>>>,
}

/// A server without `family` is one built from its `source` (checked in `validate`).
fn source_family() -> Spanned<String> {
    Spanned::new(0..0, crate::recipe::SOURCE_FAMILY.to_string())
}

/// A server's `source` as written: one origin (git with its commit, a folder, or a tarball with
/// its sha256) and the folder inside it that holds the server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServerSource {
    pub git: Option<Spanned<String>>,
    pub commit: Option<Spanned<String>>,
    pub dir: Option<Spanned<String>>,
    pub tarball: Option<Spanned<String>>,
    pub sha256: Option<Spanned<String>>,
    pub path: Option<Spanned<String>>,
}

/// Whether a CPython image holds compiled bytecode of its installed packages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bytecode {
    #[default]
    Precompiled,
    /// No compiled bytecode: the first import compiles it.
    #[serde(rename = "none")]
    Absent,
}

/// Where a cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// Containers through the Docker engine.
    Docker,
    /// Host processes in lab cgroups (`backend::native`).
    Native,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Native => "native",
        }
    }
}

/// A version matrix: one `[[server]]` per combination of its axes, expanded and validated
/// before anything is built. `versions` is a list or a release range (`"1.1.2..1.x"`) expanded
/// against `lockfiles/<family>/releases.toml`; `id` is a template over `{version}`, `{runtime}`,
/// `{transport}`, `{placement}`, `{engine}` and `{api}` that must name every axis with more than
/// one value.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMatrix {
    pub(super) id: Spanned<String>,
    pub(super) family: Spanned<String>,
    pub(super) versions: Spanned<toml::Value>,
    /// With a range: `all` (default) or `latest-patch` (of each minor).
    pub(super) pick: Option<Spanned<String>>,
    pub(super) runtimes: Option<Spanned<Vec<String>>>,
    pub(super) transports: Option<Spanned<Vec<Transport>>>,
    pub(super) placements: Option<Spanned<Vec<PlacementMode>>>,
    pub(super) engines: Option<Spanned<Vec<EngineKind>>>,
    pub(super) api: Option<Spanned<String>>,
    pub(super) suite: Option<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    pub(super) reply: Option<Spanned<ReplyMode>>,
    pub(super) session: Option<Spanned<SessionMode>>,
    /// A/A control releases, measured again at the start, middle and end of the run: versions
    /// of the matrix or `"first"`/`"last"`. Absent: the first and the last of a release range
    /// of three or more; `[]`: none.
    pub(super) controls: Option<Spanned<Vec<String>>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    /// The scenario's suite: a built-in suite's name, or `[[suite]]` tables (each a data suite
    /// written inline, or `file = "suite.toml"` beside the scenario); the first is the default.
    #[serde(default = "default_suite")]
    pub(super) suite: Spanned<toml::Value>,
    #[serde(default)]
    pub(super) placement: PlacementSpec,
    #[serde(default)]
    pub(super) timeouts: TimeoutsSpec,
    #[serde(rename = "server", default)]
    pub(super) servers: Vec<ServerEntry>,
    /// Version matrices, expanded into more servers.
    #[serde(rename = "matrix", default)]
    pub(super) matrices: Vec<RawMatrix>,
    #[serde(rename = "workload", default)]
    pub(super) workloads: Vec<Spanned<RawWorkload>>,
    /// Backing services every cell gets beside its server (`[[service]]`).
    #[serde(rename = "service", default)]
    pub(super) services: Vec<Spanned<RawService>>,
    /// Every cell runs this many times (records share the cell id, numbered by `repeat`).
    /// Absent: 3 for a sweep (a matrix over a release range) or a reproduction (`[source]` or
    /// `[[claim]]`), else 1.
    pub(super) repeats: Option<Spanned<u32>>,
    /// `"random"` (default: a seeded permutation within each round of repeats) or
    /// `"as-written"`.
    pub(super) order: Option<Spanned<String>>,
    /// Server ids measured again at the start, middle and end of the run (A/A controls), beside
    /// those of the matrices.
    pub(super) controls: Option<Spanned<Vec<String>>>,
    /// What the reproduced source states about how it measured.
    #[serde(default)]
    pub(super) source: SourceStatement,
    /// The published claims the scenario checks (`benchlab verify`); parsed by `claims`.
    #[serde(rename = "claim", default)]
    #[allow(dead_code)]
    pub(super) claims: Vec<toml::Value>,
}

/// A workload as written: flat, so that an unknown or misplaced key is reported at the key itself
/// (serde's tagged enums can only point at the whole table).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkload {
    pub(super) kind: Spanned<String>,
    /// Names the workload in cell ids (`<server>/<name>`); needed when a kind appears twice.
    pub(super) name: Option<Spanned<String>>,
    pub(super) spawns: Option<Spanned<u32>>,
    pub(super) tool: Option<Spanned<String>>,
    /// A number of calls (serial_calls) or a duration such as `"2s"` (load workloads), or a rule:
    /// `"stable"` or `{ until = "stable", window, tolerance, max, windows }` (`workload::RawWarmup`).
    pub(super) warmup: Option<Spanned<super::workload::RawWarmup>>,
    pub(super) calls: Option<Spanned<u32>>,
    /// Load workloads: a number of virtual users, or a list of them (one cell each).
    pub(super) workers: Option<Spanned<toml::Value>>,
    pub(super) duration: Option<Spanned<String>>,
    pub(super) rate: Option<Spanned<u64>>,
    pub(super) connections: Option<Spanned<u32>>,
    pub(super) lifecycle: Option<Spanned<Lifecycle>>,
    /// `concurrency`: a weighted mix of tools instead of `tool` (`{ get_cart = 3, search_products = 1 }`).
    pub(super) mix: Option<Spanned<BTreeMap<String, u32>>>,
    /// `concurrency` with `lifecycle = "iteration"`: the tool calls of each session (default 5).
    pub(super) session_calls: Option<Spanned<u32>>,
    /// Load workloads: how long to keep sampling the server's memory after every connection
    /// closed (`"30s"` when absent, `"0s"` for none).
    pub(super) idle_after: Option<Spanned<toml::Value>>,
    /// `soak`: the idle phase before the load, the ramp, the series' interval (durations) and
    /// the floor under which no leak is named (`"1MiB/h"`).
    pub(super) idle_before: Option<Spanned<String>>,
    pub(super) ramp: Option<Spanned<String>>,
    pub(super) interval: Option<Spanned<String>>,
    pub(super) leak_floor: Option<Spanned<String>>,
    /// `soak`: connect/disconnect cycles after its idle phase, each a load of `cycle_load`
    /// (default "60s") and an idle phase of `cycle_idle` (default: `idle_after`).
    pub(super) cycles: Option<Spanned<u32>>,
    pub(super) cycle_load: Option<Spanned<String>>,
    pub(super) cycle_idle: Option<Spanned<String>>,
    /// `concurrency`: k6's ramping-vus, `[{ duration = "10s", target = 50 }, …]`, from `start`
    /// virtual users (default 0) (`shape`).
    pub(super) stages: Option<Spanned<Vec<Spanned<super::shape::RawStage>>>>,
    pub(super) start: Option<Spanned<u32>>,
    /// `concurrency`: think time after each iteration, `"100ms"` or `{ min, max, seed }`.
    pub(super) think: Option<Spanned<toml::Value>>,
    /// `concurrency`: an iteration as sessions of steps, `[["tool_a"], ["tools/list"]]`.
    pub(super) flow: Option<Spanned<Vec<RawSession>>>,
    /// With `flow`: `"per_iteration"` (default) or `"per_vu"`.
    pub(super) session: Option<Spanned<crate::spec::SessionScope>>,
    /// `concurrency`: `"everything"` (default) or `"latency"`.
    pub(super) warmup_excludes: Option<Spanned<crate::spec::WarmupExcludes>>,
    /// The ids of the servers this workload runs on (all of them when absent).
    pub(super) servers: Option<Spanned<Vec<String>>>,
}

/// A backing service as written: `kind` (`redis`, `api`, `postgres` or `mock`), an optional
/// `name`, the data set's `seed` and, for the lab's own tests, a `fault`; a mock's
/// `expectations` file and `port`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawService {
    pub(super) kind: Spanned<String>,
    pub(super) name: Option<Spanned<String>>,
    pub(super) seed: Option<Spanned<u64>>,
    pub(super) fault: Option<Spanned<String>>,
    /// A mock's MockServer-style expectations file (`services::mock`), relative to the
    /// scenario's folder unless absolute.
    pub(super) expectations: Option<Spanned<String>>,
    /// A mock's port on the cell's loopback (1080, MockServer's, when absent). Read as any
    /// integer so that one out of range is refused in words.
    pub(super) port: Option<Spanned<i64>>,
    /// A program service's (`kind = "program"`; `scenario::program_service`): the Debian packages
    /// its image adds, its command and environment, its readiness probe, the command that seeds
    /// it, its reset policy and its own limits.
    pub(super) source: Option<Spanned<RawServerSource>>,
    pub(super) packages: Option<Spanned<Vec<String>>>,
    pub(super) command: Option<Spanned<Vec<String>>>,
    pub(super) env: Option<Spanned<std::collections::BTreeMap<String, String>>>,
    pub(super) ready: Option<Spanned<toml::Value>>,
    pub(super) seed_command: Option<Spanned<Vec<String>>>,
    pub(super) reset: Option<Spanned<String>>,
    pub(super) cpus: Option<Spanned<f64>>,
    pub(super) memory: Option<Spanned<String>>,
}

pub(super) type SpanErr = (std::ops::Range<usize>, String);

/// One session of a `flow` as written: its steps, each with its place.
pub(super) type RawSession = Spanned<Vec<Spanned<String>>>;

fn default_suite() -> Spanned<toml::Value> {
    Spanned::new(0..0, toml::Value::String("weekly".to_string()))
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct TimeoutsSpec {
    pub(super) startup_ms: Option<Spanned<u64>>,
    pub(super) call_ms: Option<Spanned<u64>>,
    pub(super) stop_grace_ms: Option<u64>,
    pub(super) term_ms: Option<u64>,
}
