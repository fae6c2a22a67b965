//! The versioned result record: what a cell was, what it measured, the environment manifest it
//! ran in and the hashes that make the store tamper-evident. Canonical JSON and sha256 live here;
//! computing metrics does not.
use crate::hash::canonical_sha256;
use crate::spec::{CellTransport, Failure, HistogramMetric, LoadMemory, LoadMetrics, Placement, Repeat};
pub use crate::spec::{ControlAt, Order, Schedule};

pub mod audit;
pub mod claimed;
pub mod deviations;
pub mod diffenv;
pub mod files;
pub mod manifest;
pub mod shared;
pub mod store;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mcp::transport::HttpTarget;
use crate::spec::SourceInfo;
use crate::spec::Timeouts;
use crate::spec::{CgroupMemory, ExitInfo, TreeMemory};
use crate::spec::{Expect, Workload};
use crate::stats::LatencySummary;
use std::collections::BTreeMap;

pub use manifest::Environment;
pub use shared::SharedEnvironment;

/// The record format this build writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 3;

/// Record format versions this build reads: 2 (stdio only) and 3 (adds HTTP cells, load metrics,
/// memory under load and repeats; every addition is optional, so a version-2 record reads as is).
pub const READABLE_FORMAT_VERSIONS: &[u32] = &[2, 3];

/// The JSON Schema of a record (draft 2020-12), kept beside the code that writes it.
pub const SCHEMA: &str = include_str!("record.schema.json");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
}

/// The server under test in a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerIdent {
    /// The scenario's name for it.
    pub id: String,
    /// Recipe family (`python-mcp`, ...) or `benchlab-null` for the built-in floor server.
    pub family: String,
    /// SDK version (the lab's own version for the null server).
    pub sdk_version: String,
    /// The SDK's API generation the server source uses (`mcpserver`, `fastmcp`, `lowlevel`, ...).
    pub api: String,
    /// Runtime name (`cpython-bookworm`, `node-22.12.0`, `native`, ...) and the version actually
    /// installed.
    pub runtime: String,
    pub runtime_version: String,
    /// The server source file of the cell's suite, its sha256 and lines of code (non-blank,
    /// non-comment); null for the built-in null server.
    pub source: Option<SourceInfo>,
    /// The server process's environment beyond the image's own.
    pub env: BTreeMap<String, String>,
    /// Its worker processes or threads, when more than one (`workers` of the server entry);
    /// the tree RSS and CPU cover them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// A server built from its own source (`family = "source"`): its origin (the full commit)
    /// and the fetched tree's content hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_from: Option<crate::spec::FetchedSource>,
}

/// What one cell is: the server, transport, suite, workload and limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// `<server id>/<workload kind>`, unique within a scenario.
    pub id: String,
    pub server: ServerIdent,
    /// `stdio`, `streamable-http`, `sse`, or `http-api` (a plain REST route).
    pub transport: CellTransport,
    pub suite: String,
    /// A suite of the scenario's own (`[[suite]]`): the sha256 of the suite as the driver
    /// received it (its calls, checks and the files they read). Absent for a built-in suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite_sha256: Option<String>,
    pub workload: Workload,
    pub placement: Placement,
    pub timeouts: Timeouts,
    /// Whether the scenario expects this cell to succeed or to fail.
    pub expect: Expect,
    /// How the driver reached the server over HTTP: transport, port, path, reply and session
    /// modes, REST route (HTTP cells only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpTarget>,
    /// Which run of a repeated cell this record is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<Repeat>,
    /// The backing services beside the server (`[[service]]`): kind, name, seed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<crate::spec::ServiceSpec>,
}

/// A latency metric from individual samples (cold starts, first tools/list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleMetric {
    /// Every sample, in the order taken, in milliseconds.
    pub samples_ms: Vec<f64>,
    pub summary: LatencySummary,
}

/// Memory of the server's process tree (from /proc inside its container), and of its container's
/// cgroup at the same points: the tree is the figure reports and claims read; the cgroup is where
/// memory held outside the tree (a detached child) cannot hide.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryMetrics {
    pub after_initialize: Option<TreeMemory>,
    pub end: Option<TreeMemory>,
    /// Load workloads: the server tree sampled before, during and after the load, and the
    /// container's cgroup memory peak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_load: Option<LoadMemory>,
    /// The container's cgroup memory when `after_initialize` was read (absent in records written
    /// before it existed, and where the shim could not read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_after_initialize: Option<CgroupMemory>,
    /// The container's cgroup memory when `end` was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_end: Option<CgroupMemory>,
    /// Set when the cgroup held more anonymous memory outside the server's tree than
    /// [`OUTSIDE_TREE_THRESHOLD`] at either point: the tree's figures understate the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_tree: Option<OutsideTree>,
}

/// Anonymous memory the container's cgroup holds outside the server's tree and the shim beyond
/// which a record is flagged: well above the kernel's per-CPU charge batches and the shim's
/// stderr pumps, well below any process that holds memory to hide it.
pub const OUTSIDE_TREE_THRESHOLD: u64 = 32 << 20;

/// Memory outside the server's process tree, found in its container's cgroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutsideTree {
    /// The larger of the two readings' `outside_tree_bytes`.
    pub bytes: u64,
    /// Where it was read: `after_initialize` or `end`.
    pub at: String,
    pub threshold_bytes: u64,
}

impl MemoryMetrics {
    /// The flag from the two cgroup readings: the larger gap, when above the threshold.
    pub fn outside_tree_of(
        after_initialize: Option<&CgroupMemory>,
        end: Option<&CgroupMemory>,
    ) -> Option<OutsideTree> {
        [("after_initialize", after_initialize), ("end", end)]
            .into_iter()
            .filter_map(|(at, m)| Some((at, m?.outside_tree_bytes?)))
            .filter(|(_, bytes)| *bytes > OUTSIDE_TREE_THRESHOLD)
            .max_by_key(|(_, bytes)| *bytes)
            .map(|(at, bytes)| OutsideTree { bytes, at: at.into(), threshold_bytes: OUTSIDE_TREE_THRESHOLD })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    pub cold_start: Option<SampleMetric>,
    pub tools_list: Option<SampleMetric>,
    pub calls: Option<HistogramMetric>,
    pub memory: MemoryMetrics,
    /// HTTP load workloads only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Box<LoadMetrics>>,
    /// Each backing service: how it was readied and seeded, and its own CPU and memory over
    /// the cell, beside the server's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceMetrics>,
}

/// One backing service's figures in a cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceMetrics {
    pub name: String,
    /// From the driver's first probe to the service's first good answer, in milliseconds.
    pub ready_ms: Option<f64>,
    /// sha256 of the data set seeded into it before the gate (one per cell: every cell starts
    /// from the same pristine data); a mock's: of the expectations it said it serves.
    pub seed_sha256: Option<String>,
    /// Keys (Redis), products (the API) it held after seeding, or a mock's expectations.
    pub items: Option<u64>,
    /// CPU seconds over the driver's window and the window's length; their ratio is its share
    /// of one CPU.
    pub cpu_s: Option<f64>,
    pub window_s: Option<f64>,
    /// Its cgroup's memory high-water mark and its usage at the end of the window, in bytes.
    pub memory_peak_bytes: Option<u64>,
    pub memory_end_bytes: Option<u64>,
    /// Its exit code, when it exited before the cell ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exited: Option<i64>,
}

/// What the server said about itself and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observed {
    pub protocol_version: Option<String>,
    /// The server's `serverInfo`: its claim about itself, never the lab's fact (reports show it
    /// as claimed). Kept as written up to `claimed::SERVER_INFO_MAX_BYTES`; beyond that only its
    /// name and version, cut (`server_info_truncated`). One copy for the records of a reading
    /// that have the same text (see `reading::part`).
    #[serde(default, deserialize_with = "crate::reading::part")]
    pub server_info: Option<Arc<Value>>,
    /// The size in bytes of a `serverInfo` over the limit, when it was cut to its name and
    /// version; absent when it was kept as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info_truncated: Option<u64>,
    pub exits: Vec<ExitInfo>,
    /// Set when a spawn left processes behind (each exit's `left_behind`, summed): the shim
    /// killed them before the next spawn, and the cell's figures may owe them something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_behind: Option<LeftBehind>,
}

/// The processes a cell's server spawns left behind, over all its spawns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeftBehind {
    /// How many spawns left any.
    pub spawns: u32,
    pub processes: u32,
    /// Their summed RSS when the shim found them, bytes.
    pub rss_bytes: u64,
}

impl LeftBehind {
    pub fn of(exits: &[ExitInfo]) -> Option<LeftBehind> {
        let left: Vec<_> = exits.iter().filter_map(|e| e.left_behind).collect();
        (!left.is_empty()).then(|| LeftBehind {
            spawns: left.len() as u32,
            processes: left.iter().map(|l| l.processes).sum(),
            rss_bytes: left.iter().map(|l| l.rss_bytes).sum(),
        })
    }
}

/// Where a cluster backend ran one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dispatch {
    /// The cluster engine: "slurm".
    pub scheduler: String,
    /// The cluster's name (Slurm's ClusterName).
    pub cluster: String,
    pub partition: String,
    /// The node the cell's last attempt ran on.
    pub node: String,
    /// The job id of the cell's own job (for an array task, its own job id).
    pub job_id: String,
    /// For a job array's task: the array's job id and the task's index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_job_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<u32>,
    /// The CPUs the scheduler allocated to the job on its node (`cpuset` syntax).
    pub allocated_cpus: String,
    /// 1, or 2 when the job was requeued once (a node failed under it).
    pub attempts: u32,
    /// Why the job was requeued, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeued: Option<String>,
    /// The image reference the node ran (by digest, from the run's registry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
}

/// One measured cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub format_version: u32,
    pub run_id: String,
    /// Position in the run's store, from 0.
    pub seq: u64,
    /// UTC, RFC 3339, when the record was written (not part of env_hash).
    pub recorded_at: String,
    pub status: Status,
    pub failure: Option<Failure>,
    pub cell: Cell,
    /// Boxed: a record in memory is then half its size, so a reader that keeps many moves and
    /// copies less (the stored form is the same). The cell is not: the claims' and the
    /// report's passes over every record look at it, and a box each would be a cache miss each.
    pub metrics: Box<Metrics>,
    pub observed: Observed,
    /// Shared between the records read in one environment (see `shared`); derefs to it.
    pub environment: SharedEnvironment,
    /// sha256 hex of the environment's canonical JSON.
    pub env_hash: String,
    /// The previous record's `hash` in this store; null for the first.
    pub prev_hash: Option<String>,
    /// Where a cluster ran the cell (node, job ids, allocated CPUs, attempts); absent when the
    /// cell ran on the orchestrator's own host. Not part of `env_hash`: the node's CPU model,
    /// kernel and engine are in `environment`, its name and job ids are not what ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<Box<Dispatch>>,
    /// Where the cell fell in the run's order (a seeded permutation, or as written) and whether
    /// it was an A/A control measurement. Not part of `env_hash`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// The host's state around the cell: the run's (or node's) speed fingerprint and the cell's
    /// quiet check. Not part of `env_hash`: conditions, not what ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_check: Option<Box<crate::host::HostCheck>>,
    /// sha256 hex of this record's canonical JSON without the `hash` field.
    pub hash: String,
}

impl Record {
    /// True when the cell did what the scenario expected: succeeded, or failed when a failure
    /// was expected.
    pub fn as_expected(&self) -> bool {
        match self.cell.expect {
            Expect::Success => self.status == Status::Ok,
            Expect::Failure => self.status == Status::Failed,
        }
    }

    /// True when the quiet check found the host loud while this cell ran.
    pub fn on_noisy_host(&self) -> bool {
        self.host_check.as_ref().and_then(|h| h.quiet.as_ref()).is_some_and(|q| q.noisy)
    }

    /// The hash this record should carry: over everything but `hash` itself.
    pub fn compute_hash(&self) -> String {
        let mut value = serde_json::to_value(self).expect("records serialise");
        value.as_object_mut().expect("a record is an object").remove("hash");
        canonical_sha256(&value)
    }
}

pub use crate::text::{now_rfc3339, rfc3339};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hash::{canonical_hash, canonical_json};
    use crate::record::manifest::*;
    use serde_json::json;

    /// A complete record with awkward floats, for store and hash tests.
    pub(crate) fn sample_record(id: &str) -> Record {
        let placement = Placement {
            server_cpus: "1".into(),
            driver_cpus: "0".into(),
            shared: false,
            memory_limit_bytes: 1 << 30,
            parallel: None,
            services_cpus: None,
            services_share_driver: false,
            cpu_quota: None,
        };
        let summary = LatencySummary {
            count: 3,
            min_ms: 0.1,
            p50_ms: 0.30000000000000004,
            p90_ms: 0.7,
            p95_ms: 0.7,
            p99_ms: 0.7,
            max_ms: 0.7,
            mean_ms: 1.0 / 3.0,
        };
        Record {
            format_version: FORMAT_VERSION,
            run_id: "run".into(),
            seq: 0,
            recorded_at: rfc3339(0),
            status: Status::Ok,
            failure: None,
            cell: Cell {
                id: format!("{id}/cold_start"),
                server: ServerIdent {
                    id: id.into(),
                    family: "benchlab-null".into(),
                    sdk_version: "0".into(),
                    api: "builtin".into(),
                    runtime: "native".into(),
                    runtime_version: "0".into(),
                    source: None,
                    env: BTreeMap::new(),
                    workers: None,
                    built_from: None,
                },
                transport: CellTransport::Stdio,
                suite: "weekly".into(),
                suite_sha256: None,
                workload: Workload::ColdStart { spawns: 3 },
                placement: placement.clone(),
                timeouts: Timeouts::default(),
                expect: Expect::Success,
                http: None,
                repeat: None,
                services: vec![],
            },
            metrics: Box::new(Metrics {
                cold_start: Some(SampleMetric {
                    samples_ms: vec![0.1, 0.30000000000000004, 0.7000000000000001],
                    summary: summary.clone(),
                }),
                tools_list: None,
                calls: None,
                memory: MemoryMetrics {
                    after_initialize: Some(TreeMemory { rss_bytes: 4096, hwm_bytes: 8192, processes: 1 }),
                    end: None,
                    under_load: None,
                    ..Default::default()
                },
                load: None,
                services: vec![],
            }),
            observed: Observed {
                server_info_truncated: None,
                protocol_version: Some("2025-11-25".into()),
                server_info: Some(Arc::new(json!({"name": "x", "v": 1.5e-7}))),
                exits: vec![],
                left_behind: None,
            },
            environment: Environment {
                image: ImageManifest {
                    reference: "benchlab/base:bookworm".into(),
                    image_id: "sha256:00".into(),
                    input_hash: "0".repeat(64),
                    base: BaseManifest {
                        reference: "benchlab/base:bookworm".into(),
                        image_id: "sha256:00".into(),
                        suite: Some("bookworm".into()),
                        rootfs_sha256: None,
                    },
                    packages: vec![],
                    system_packages: vec![Package { name: "libc6".into(), version: "2.36".into() }],
                },
                runtime: RuntimeManifest { name: "native".into(), version: "0".into() },
                host: HostManifest {
                    kernel: "6".into(),
                    cpu_model: "cpu".into(),
                    cpus_online: "0-1".into(),
                    logical_cpus: 2,
                    memory_bytes: 1,
                    cgroup_version: 1,
                },
                engine: EngineManifest {
                    kind: "docker".into(),
                    version: "20".into(),
                    api_version: "1.41".into(),
                },
                placement,
                benchlab: BenchlabManifest { version: "0".into(), binary_sha256: "1".repeat(64) },
                scenario_sha256: "2".repeat(64),
                deviations: vec![],
                sandbox: None,
                services: vec![],
            }
            .into(),
            env_hash: String::new(),
            prev_hash: None,
            dispatch: None,
            schedule: None,
            host_check: None,
            hash: String::new(),
        }
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let v = json!({"b": 1, "a": {"z": [3, {"y": 1, "x": 2}], "c": "é\n"}});
        assert_eq!(canonical_json(&v), r#"{"a":{"c":"é\n","z":[3,{"x":2,"y":1}]},"b":1}"#);
        let w: Value = serde_json::from_str(r#"{"a":{"z":[3,{"x":2,"y":1}],"c":"é\n"},"b":1}"#).unwrap();
        assert_eq!(canonical_hash(&v), canonical_hash(&w));
    }

    #[test]
    fn formats_utc_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_796_032_245), "2026-11-30T09:50:45Z");
    }

    #[test]
    fn memory_outside_the_tree_is_flagged_above_the_threshold_only() {
        let at = |outside: u64| CgroupMemory {
            usage_bytes: outside + (20 << 20),
            peak_bytes: None,
            anon_bytes: Some(outside + (10 << 20)),
            outside_tree_bytes: Some(outside),
        };
        assert_eq!(MemoryMetrics::outside_tree_of(None, None), None);
        assert_eq!(MemoryMetrics::outside_tree_of(Some(&at(OUTSIDE_TREE_THRESHOLD)), None), None);
        let unread = CgroupMemory { outside_tree_bytes: None, ..at(0) };
        assert_eq!(MemoryMetrics::outside_tree_of(Some(&unread), Some(&unread)), None);
        let flag = MemoryMetrics::outside_tree_of(Some(&at(40 << 20)), Some(&at(300 << 20))).unwrap();
        assert_eq!((flag.bytes, flag.at.as_str()), (300 << 20, "end"));
        let flag = MemoryMetrics::outside_tree_of(Some(&at(40 << 20)), Some(&at(1 << 20))).unwrap();
        assert_eq!(
            (flag.bytes, flag.at.as_str(), flag.threshold_bytes),
            (40 << 20, "after_initialize", 32 << 20)
        );
        let exit = |left| ExitInfo {
            how: "exited".into(),
            code: Some(0),
            signal: None,
            stop_ms: 1.0,
            left_behind: left,
        };
        let one = crate::spec::Leftovers { processes: 2, rss_bytes: 7 };
        assert_eq!(LeftBehind::of(&[exit(None)]), None);
        assert_eq!(
            LeftBehind::of(&[exit(Some(one)), exit(None), exit(Some(one))]),
            Some(LeftBehind { spawns: 2, processes: 4, rss_bytes: 14 })
        );
    }
}
