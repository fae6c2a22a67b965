//! Pins the JSON shapes that outlive the code: record format 3 (the record, its environment
//! manifest and every spec type it embeds) and the wire messages between orchestrator, driver and
//! shim. Each shape is an insta snapshot of hand-built values with every option set and every
//! enum variant used; each snapshot is read back to the same value; and every committed
//! `results/**/records.jsonl` line must read as a `Record` and write back to the same JSON, so a
//! change to a parser or a serde attribute cannot change the stored format unnoticed. It does not
//! check what the numbers mean (the report snapshots and the audit do).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use benchlab::mcp::transport::{ApiStyle, HttpTarget, ReplyMode, SessionMode, Transport};
use benchlab::record::manifest::{
    BaseManifest, BenchlabManifest, EngineManifest, Environment, HostManifest, ImageManifest, Package,
    RuntimeManifest, SandboxManifest,
};
use benchlab::record::{
    Cell, LeftBehind, MemoryMetrics, Metrics, Observed, Record, SampleMetric, ServerIdent, Status,
    FORMAT_VERSION,
};
use benchlab::spec::{
    CgroupMemory, DriverEvent, DriverOutcome, DriverSpec, ExitInfo, Expect, Failure, FailureReason,
    HistogramMetric, IdleSeries, Leftovers, Lifecycle, LoadMemory, LoadMetrics, LoadSeries, MemoryLevel,
    ParallelSlot, Placement, Repeat, Reply, Request, ResourceSeries, SeriesInterval, ServerLaunch, Slope,
    SoakCycle, SoakFigures, SourceInfo, Timeouts, TreeMemory, Warmup, Workload,
};
use benchlab::stats::LatencySummary;

/// Snapshots `value` as pretty JSON under `name`, then reads that JSON back and checks it writes
/// the same JSON again (for types without `PartialEq`, such as the wire messages).
fn pin<T: Serialize + DeserializeOwned>(name: &str, value: &T) -> T {
    let text = serde_json::to_string_pretty(value).expect("serialises");
    insta::assert_snapshot!(name, text);
    let back: T =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: snapshot JSON reads back: {e}"));
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(value).unwrap(),
        "{name}: round trip through the snapshot JSON"
    );
    back
}

/// [`pin`], and the value read back equals the original.
fn pin_eq<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(name: &str, value: &T) {
    let back = pin(name, value);
    assert_eq!(&back, value, "{name}: round trip through the snapshot JSON");
}

fn summary(base: f64) -> LatencySummary {
    LatencySummary {
        count: 5,
        min_ms: base,
        p50_ms: base + 0.30000000000000004,
        p90_ms: base + 0.7,
        p95_ms: base + 0.75,
        p99_ms: base + 0.9,
        max_ms: base + 1.25,
        mean_ms: base + 1.0 / 3.0,
    }
}

fn tree(rss: u64) -> TreeMemory {
    TreeMemory { rss_bytes: rss, hwm_bytes: rss * 2, processes: 3 }
}

fn histogram() -> HistogramMetric {
    HistogramMetric {
        summary: summary(0.5),
        histogram: "HISTFAAAACR4nJNpmSzMwMDAxAABzFCaEUzOmQQRAAA3NwKH".into(),
        warmup: None,
    }
}

fn stable_rule() -> benchlab::spec::StableRule {
    benchlab::spec::StableRule { window: 200, tolerance: 0.05, max: 10_000, windows: 3 }
}

fn placement() -> Placement {
    Placement {
        server_cpus: "2-3".into(),
        driver_cpus: "1".into(),
        shared: false,
        memory_limit_bytes: 1 << 30,
        parallel: Some(ParallelSlot { slot: 1, slots: 2 }),
        services_cpus: None,
        services_share_driver: false,
        cpu_quota: None,
    }
}

fn http_target() -> HttpTarget {
    HttpTarget {
        transport: Transport::StreamableHttp,
        port: 8123,
        path: "/mcp".into(),
        reply: Some(ReplyMode::Sse),
        session: Some(SessionMode::Stateful),
        api_route: Some("/api/{tool}".into()),
        api_style: Some(ApiStyle::Gradio),
        host: None,
    }
}

fn load_memory() -> LoadMemory {
    LoadMemory {
        idle_before: Some(tree(40 << 20)),
        peak_during: Some(tree(90 << 20)),
        after: Some(tree(60 << 20)),
        samples: 42,
        interval_ms: 250,
        cgroup_peak_bytes: Some(123_456_789),
        idle_after_ms: 1_000,
        after_series: Some(IdleSeries {
            t_ms: vec![1, 250, 500, 750, 1_000],
            rss_bytes: vec![70 << 20, 65 << 20, 61 << 20, 60 << 20, 60 << 20],
            cgroup_bytes: vec![Some(100 << 20), Some(95 << 20), None, Some(90 << 20), Some(90 << 20)],
        }),
        after_level: Some(MemoryLevel {
            estimate: 60 << 20,
            lower: 60 << 20,
            upper: 61 << 20,
            n: 3,
            from_ms: 500,
            to_ms: 1_000,
        }),
        after_cgroup_level: Some(MemoryLevel {
            estimate: 90 << 20,
            lower: 90 << 20,
            upper: 95 << 20,
            n: 3,
            from_ms: 250,
            to_ms: 1_000,
        }),
    }
}

fn load_metrics() -> LoadMetrics {
    LoadMetrics {
        mode: benchlab::spec::LoadMode::Open,
        workers: 8,
        connections: 4,
        warmup_ms: 1_000,
        window_ms: 5_000.25,
        window_nominal_ms: Some(5_000),
        ok: 9_876,
        failed: 12,
        throughput_rps: 1975.2,
        error_rate: 0.0012135922330097086,
        errors: BTreeMap::from([("timeout".to_string(), 5), ("http_status".to_string(), 7)]),
        sessions: 8,
        reinitializations: 1,
        reconnects: 2,
        latency: Some(histogram()),
        target_rps: Some(2_000.0),
        late: Some(3),
        dropped: Some(4),
        server_cpu_cores: Some(0.97),
        driver_cpu_cores: Some(0.31),
        driver_threads: None,
        error_examples: vec!["timed out after 10000 ms".into()],
        warmup: None,
        series: Some(load_series()),
        soak: Some(soak_figures()),
        steps: BTreeMap::new(),
        iterations: None,
        http_requests: None,
        http_rps: None,
        stages: Vec::new(),
        start_vus: None,
        peak_vus: None,
    }
}

/// A staged load of iterations: k6's ramping-vus and its HTTP requests, its steps by name.
fn load_metrics_staged() -> LoadMetrics {
    let steps = ["calculate_fibonacci", "delete", "http", "initialize", "session", "tools/list"];
    LoadMetrics {
        mode: benchlab::spec::LoadMode::Closed,
        workers: 50,
        connections: 50,
        warmup_ms: 0,
        window_nominal_ms: Some(320_000),
        iterations: Some(1_000),
        http_requests: Some(21_000),
        http_rps: Some(65.625),
        stages: vec![
            benchlab::spec::Stage { duration_ms: 10_000, target: 50 },
            benchlab::spec::Stage { duration_ms: 300_000, target: 50 },
            benchlab::spec::Stage { duration_ms: 10_000, target: 0 },
        ],
        start_vus: Some(0),
        peak_vus: Some(50),
        steps: steps.iter().map(|s| (s.to_string(), histogram())).collect(),
        series: None,
        soak: None,
        ..load_metrics()
    }
}

fn load_series() -> LoadSeries {
    LoadSeries {
        interval_ms: 1_000,
        window_from_ms: 1_000,
        window_to_ms: 3_000,
        intervals: vec![
            SeriesInterval { t_ms: 0, ok: 0, failed: 1, histogram: None },
            SeriesInterval { t_ms: 1_000, ok: 1_990, failed: 0, histogram: Some("HISTFAAAAB".into()) },
            SeriesInterval { t_ms: 2_000, ok: 2_001, failed: 2, histogram: Some("HISTFAAAAC".into()) },
        ],
        resources: ResourceSeries {
            t_ms: vec![0, 1_000, 2_000],
            rss_bytes: vec![40 << 20, 41 << 20, 42 << 20],
            cpu_ns: vec![Some(1_000_000), None, Some(900_000_000)],
            cgroup_bytes: vec![Some(50 << 20), Some(51 << 20), None],
        },
    }
}

fn soak_figures() -> SoakFigures {
    let slope = |e: f64| Slope { estimate: e, lower: e - 1.0, upper: e + 1.0, n: 1_800, n_effective: 412.5 };
    SoakFigures {
        rss_bytes_per_hour: Some(slope(3_600_000.0)),
        cgroup_bytes_per_hour: Some(slope(3_700_000.0)),
        leak_floor_bytes_per_hour: 1 << 20,
        leak: true,
        idle_before: Some(MemoryLevel {
            estimate: 39 << 20,
            lower: 39 << 20,
            upper: 40 << 20,
            n: 60,
            from_ms: 0,
            to_ms: 60_000,
        }),
        p50_ms_per_hour: Some(slope(0.25)),
        p99_ms_per_hour: Some(slope(-0.5)),
        cycles: vec![
            SoakCycle {
                ok: 6_000,
                failed: 2,
                peak_rss_bytes: Some(52 << 20),
                after: Some(MemoryLevel {
                    estimate: 40 << 20,
                    lower: 40 << 20,
                    upper: 41 << 20,
                    n: 20,
                    from_ms: 115_000,
                    to_ms: 120_000,
                }),
            },
            SoakCycle { ok: 0, failed: 6_000, peak_rss_bytes: None, after: None },
        ],
    }
}

fn cgroup(usage: u64, outside: u64) -> CgroupMemory {
    CgroupMemory {
        usage_bytes: usage,
        peak_bytes: Some(usage + (1 << 20)),
        anon_bytes: Some(usage - (8 << 20)),
        outside_tree_bytes: Some(outside),
    }
}

fn exit_info() -> ExitInfo {
    ExitInfo { how: "terminated".into(), code: Some(143), signal: Some(15), stop_ms: 12.5, left_behind: None }
}

fn environment() -> Environment {
    Environment {
        image: ImageManifest {
            reference: "benchlab/python-mcp:1.2.3".into(),
            image_id: "sha256:aa".into(),
            input_hash: "0".repeat(64),
            base: BaseManifest {
                reference: "benchlab/base:bookworm".into(),
                image_id: "sha256:bb".into(),
                suite: Some("bookworm".into()),
                rootfs_sha256: Some("1".repeat(64)),
            },
            packages: vec![Package { name: "mcp".into(), version: "1.2.3".into() }],
            system_packages: vec![Package { name: "libc6".into(), version: "2.36-9".into() }],
        },
        runtime: RuntimeManifest { name: "cpython-bookworm".into(), version: "3.11.2".into() },
        host: HostManifest {
            kernel: "6.1.0-test".into(),
            cpu_model: "Test CPU @ 2GHz".into(),
            cpus_online: "0-3".into(),
            logical_cpus: 4,
            memory_bytes: 8 << 30,
            cgroup_version: 2,
        },
        engine: EngineManifest {
            kind: "docker".into(),
            version: "27.0.1".into(),
            api_version: "1.46".into(),
        },
        placement: placement(),
        benchlab: BenchlabManifest { version: "0.1.0".into(), binary_sha256: "2".repeat(64) },
        scenario_sha256: "3".repeat(64),
        deviations: vec!["runtime 3.11.2 instead of 3.11.9".into()],
        sandbox: Some(SandboxManifest {
            user: Some("65534:65534".into()),
            drop_all_capabilities: true,
            no_new_privileges: true,
            read_only_root: true,
            scratch: vec!["/tmp:67108864".into()],
            pids_limit: Some(1024),
            network: "none".into(),
            lab_user: Some("65533:65533".into()),
        }),
        services: Vec::new(),
    }
}

/// A record with every option set; `status` decides whether it carries a failure.
fn record(seq: u64, status: Status, expect: Expect, workload: Workload) -> Record {
    let failure = match status {
        Status::Ok => None,
        Status::Failed => Some(Failure::new(FailureReason::Timeout, "no answer within 10000 ms")),
    };
    let environment = environment();
    let mut r = Record {
        format_version: FORMAT_VERSION,
        run_id: "20261130T000000Z-shapes-0001".into(),
        seq,
        recorded_at: "2026-11-30T00:00:00Z".into(),
        status,
        failure,
        cell: Cell {
            id: format!("python-mcp-1.2.3/{}", workload.kind()),
            server: ServerIdent {
                id: "python-mcp-1.2.3".into(),
                family: "python-mcp".into(),
                sdk_version: "1.2.3".into(),
                api: "fastmcp".into(),
                runtime: "cpython-bookworm".into(),
                runtime_version: "3.11.2".into(),
                source: Some(SourceInfo {
                    file: "servers/python/server.py".into(),
                    sha256: "4".repeat(64),
                    loc: 57,
                }),
                env: BTreeMap::from([("PYTHONHASHSEED".to_string(), "0".to_string())]),
                workers: None,
                built_from: None,
            },
            transport: benchlab::spec::CellTransport::StreamableHttp,
            suite: "weekly".into(),
            suite_sha256: None,
            workload,
            placement: placement(),
            timeouts: Timeouts { startup_ms: 30_000, call_ms: 10_000, stop_grace_ms: 2_000, term_ms: 1_500 },
            expect,
            http: Some(http_target()),
            repeat: Some(Repeat { index: 1, of: 3, fresh_container: true }),
            services: Vec::new(),
        },
        metrics: Box::new(Metrics {
            cold_start: Some(SampleMetric {
                samples_ms: vec![101.5, 99.25, 100.0, 0.1, 1e-7],
                summary: summary(99.0),
            }),
            tools_list: Some(SampleMetric { samples_ms: vec![1.5, 2.0], summary: summary(1.5) }),
            calls: Some(HistogramMetric {
                warmup: Some(benchlab::spec::WarmupReport {
                    rule: stable_rule(),
                    stable: true,
                    calls: 600,
                    ms: 93.5,
                    windows_seen: 3,
                    window_p50_ms: vec![Some(0.25), None, Some(0.125)],
                }),
                ..histogram()
            }),
            memory: MemoryMetrics {
                after_initialize: Some(tree(30 << 20)),
                end: Some(tree(31 << 20)),
                under_load: Some(load_memory()),
                cgroup_after_initialize: Some(cgroup(40 << 20, 0)),
                cgroup_end: Some(cgroup(360 << 20, 300 << 20)),
                outside_tree: MemoryMetrics::outside_tree_of(None, Some(&cgroup(360 << 20, 300 << 20))),
            },
            load: Some(Box::new(load_metrics())),
            services: Vec::new(),
        }),
        observed: Observed {
            server_info_truncated: None,
            protocol_version: Some("2025-06-18".into()),
            server_info: Some(std::sync::Arc::new(
                json!({"name": "shapes", "version": "1.2.3", "ratio": 1.5e-7}),
            )),
            exits: vec![
                exit_info(),
                ExitInfo {
                    how: "exited".into(),
                    code: Some(0),
                    signal: None,
                    stop_ms: 0.5,
                    left_behind: Some(Leftovers { processes: 2, rss_bytes: 300 << 20 }),
                },
            ],
            left_behind: Some(LeftBehind { spawns: 1, processes: 2, rss_bytes: 300 << 20 }),
        },
        env_hash: environment.hash(),
        environment: environment.into(),
        prev_hash: Some("5".repeat(64)),
        dispatch: None,
        schedule: Some(benchlab::record::Schedule {
            order: benchlab::record::Order::Random,
            seed: Some(4_000_000_000),
            position: 7,
            of: 12,
            control: Some(benchlab::record::ControlAt::Middle),
        }),
        host_check: Some(Box::new(host_check())),
        hash: String::new(),
    };
    r.hash = r.compute_hash();
    r
}

/// A host check with every option set: a fingerprint, and a quiet check that waited, with both
/// windows.
fn host_check() -> benchlab::host::HostCheck {
    use benchlab::host::fingerprint::{Fingerprint, Probe};
    use benchlab::host::quiet::{CpuLoad, Offender, Quiet, Wait, Window};
    let probe = |name: &str, unit: &str, faster: bool, v: f64| Probe {
        name: name.into(),
        unit: unit.into(),
        higher_is_faster: faster,
        value: v,
        lower: v * 0.9,
        upper: v * 1.1,
        repetitions: 15,
    };
    let window = Window {
        wall_ms: 500,
        per_cpu: vec![CpuLoad { cpu: 0, busy: 0.25, steal: 0.01 }, CpuLoad { cpu: 1, busy: 0.5, steal: 0.0 }],
        own_cpu: 0.5,
        other_cpu: 0.25,
        engine_cpu: Some(0.125),
        offenders: vec![Offender { comm: "rustc".into(), cpu: 0.25, processes: 2 }],
        freq_min_khz: Some(2_000_000),
        freq_max_khz: Some(3_500_000),
        governors: Some(vec!["performance".into()]),
        smt_siblings: Some("2-3".into()),
        smt_busy: Some(0.0625),
        memory_pressure: Some(1.5),
        memory_available: Some(0.75),
    };
    benchlab::host::HostCheck {
        fingerprint: Some(std::sync::Arc::new(Fingerprint {
            measured_at: "2026-11-30T00:00:00Z".into(),
            cpus: "1,0".into(),
            probes: vec![
                probe("cpu_loop", "ns/iter", false, 8.75),
                probe("memory_bandwidth", "GB/s", true, 7.5),
                probe("pipe_pingpong", "us", false, 42.5),
                probe("spawn", "ms", false, 0.75),
            ],
        })),
        quiet: Some(Quiet {
            noisy: true,
            reasons: vec!["other processes used 0.25 CPU of cpus 0-1 before the cell (rustc 0.25)".into()],
            cpus: "0-1".into(),
            before: Some(window.clone()),
            during: Some(window),
            wait: Some(Wait { limit_s: 60, waited_ms: 1500, probes: 2, quiet: false }),
        }),
    }
}

/// What the committed JSON Schema of a record says is wrong with `record`.
fn schema_errors(record: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(benchlab::record::SCHEMA).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    validator.iter_errors(record).map(|e| format!("{e} at {}", e.instance_path)).collect()
}

fn every_workload() -> Vec<(&'static str, Workload)> {
    vec![
        ("workload_cold_start", Workload::ColdStart { spawns: 10 }),
        (
            "workload_serial_calls",
            Workload::SerialCalls { tool: "add".into(), warmup: Warmup::Fixed(100), calls: 1_000 },
        ),
        (
            "workload_serial_calls_stable_warmup",
            Workload::SerialCalls { tool: "add".into(), warmup: Warmup::Stable(stable_rule()), calls: 1_000 },
        ),
        (
            "workload_concurrency_session",
            Workload::Concurrency {
                tool: "add".into(),
                workers: 8,
                warmup_ms: Warmup::Fixed(1_000),
                duration_ms: 5_000,
                lifecycle: Lifecycle::Session,
                idle_after_ms: 30_000,
                mix: Vec::new(),
                session_calls: 0,
                stages: Vec::new(),
                start_vus: 0,
                think: None,
                flow: Vec::new(),
                session: benchlab::spec::SessionScope::PerIteration,
                warmup_excludes: benchlab::spec::WarmupExcludes::Everything,
            },
        ),
        (
            "workload_concurrency_per_call",
            Workload::Concurrency {
                tool: "echo".into(),
                workers: 2,
                warmup_ms: Warmup::Fixed(500),
                duration_ms: 2_000,
                lifecycle: Lifecycle::PerCall,
                idle_after_ms: 0,
                mix: Vec::new(),
                session_calls: 0,
                stages: Vec::new(),
                start_vus: 0,
                think: None,
                flow: Vec::new(),
                session: benchlab::spec::SessionScope::PerIteration,
                warmup_excludes: benchlab::spec::WarmupExcludes::Everything,
            },
        ),
        (
            "workload_concurrency_staged_flow",
            Workload::Concurrency {
                tool: "flow".into(),
                workers: 50,
                warmup_ms: Warmup::Fixed(0),
                duration_ms: 320_000,
                lifecycle: Lifecycle::Iteration,
                idle_after_ms: 0,
                mix: Vec::new(),
                session_calls: 0,
                stages: vec![
                    benchlab::spec::Stage { duration_ms: 10_000, target: 50 },
                    benchlab::spec::Stage { duration_ms: 300_000, target: 50 },
                    benchlab::spec::Stage { duration_ms: 10_000, target: 0 },
                ],
                start_vus: 0,
                think: Some(benchlab::spec::Think { min_ms: 50, max_ms: 150, seed: 7 }),
                flow: vec![vec!["calculate_fibonacci".into()], vec!["tools/list".into()]],
                session: benchlab::spec::SessionScope::PerVu,
                warmup_excludes: benchlab::spec::WarmupExcludes::Latency,
            },
        ),
        (
            "workload_concurrency_iteration_mix",
            Workload::Concurrency {
                tool: "mix".into(),
                workers: 10,
                warmup_ms: Warmup::Fixed(1_000),
                duration_ms: 10_000,
                lifecycle: Lifecycle::Iteration,
                idle_after_ms: 0,
                mix: vec![
                    benchlab::spec::MixEntry { tool: "get_cart".into(), weight: 3 },
                    benchlab::spec::MixEntry { tool: "search_products".into(), weight: 1 },
                ],
                session_calls: 5,
                stages: Vec::new(),
                start_vus: 0,
                think: None,
                flow: Vec::new(),
                session: benchlab::spec::SessionScope::PerIteration,
                warmup_excludes: benchlab::spec::WarmupExcludes::Everything,
            },
        ),
        (
            "workload_open_loop",
            Workload::OpenLoop {
                tool: "add".into(),
                rate: 2_000,
                connections: 4,
                warmup_ms: Warmup::Fixed(1_000),
                duration_ms: 5_000,
                idle_after_ms: 3_000,
            },
        ),
        (
            "workload_soak_open",
            Workload::Soak {
                tool: "checksum".into(),
                workers: 100,
                rate: Some(500),
                lifecycle: Lifecycle::Session,
                idle_before_ms: 60_000,
                ramp_ms: 60_000,
                steady_ms: 1_800_000,
                idle_after_ms: 300_000,
                interval_ms: 1_000,
                leak_floor_bytes_per_hour: 1 << 20,
                cycles: 0,
                cycle_load_ms: 0,
                cycle_idle_ms: 0,
            },
        ),
        (
            "workload_soak_closed",
            Workload::Soak {
                tool: "checksum".into(),
                workers: 100,
                rate: None,
                lifecycle: Lifecycle::PerCall,
                idle_before_ms: 0,
                ramp_ms: 0,
                steady_ms: 60_000,
                idle_after_ms: 0,
                interval_ms: 250,
                leak_floor_bytes_per_hour: 0,
                cycles: 5,
                cycle_load_ms: 60_000,
                cycle_idle_ms: 120_000,
            },
        ),
        (
            "workload_http_api",
            Workload::HttpApi {
                tool: "add".into(),
                workers: 8,
                warmup_ms: Warmup::Fixed(1_000),
                duration_ms: 5_000,
                idle_after_ms: 0,
            },
        ),
    ]
}

#[test]
fn a_fully_populated_record_failed_and_ok() {
    let load = Workload::OpenLoop {
        tool: "add".into(),
        rate: 2_000,
        connections: 4,
        warmup_ms: Warmup::Fixed(1_000),
        duration_ms: 5_000,
        idle_after_ms: 3_000,
    };
    let records = vec![
        record(0, Status::Failed, Expect::Failure, load),
        record(1, Status::Ok, Expect::Success, Workload::ColdStart { spawns: 5 }),
    ];
    for r in &records {
        assert_eq!(r.compute_hash(), r.hash);
        assert_eq!(schema_errors(&serde_json::to_value(r).unwrap()), Vec::<String>::new(), "{}", r.cell.id);
    }
    pin_eq("records_failed_and_ok", &records);
}

#[test]
fn a_staged_flow_and_its_figures_meet_the_record_schema() {
    let (_, w) =
        every_workload().into_iter().find(|(n, _)| *n == "workload_concurrency_staged_flow").unwrap();
    let mut r = record(3, Status::Ok, Expect::Success, w);
    r.metrics.load = Some(Box::new(load_metrics_staged()));
    r.hash = r.compute_hash();
    assert_eq!(schema_errors(&serde_json::to_value(&r).unwrap()), Vec::<String>::new());
    // What the schema refuses: a session scope or warm-up rule it does not know.
    let mut v = serde_json::to_value(&r).unwrap();
    v["cell"]["workload"]["session"] = "per_user".into();
    assert!(!schema_errors(&v).is_empty());
}

#[test]
fn a_record_from_a_cluster_names_its_node_and_job() {
    let mut r = record(2, Status::Failed, Expect::Success, Workload::ColdStart { spawns: 5 });
    r.failure = Some(Failure::new(FailureReason::NodeFail, "node n1 failed under job 7_3"));
    r.dispatch = Some(Box::new(benchlab::record::Dispatch {
        scheduler: "slurm".into(),
        cluster: "benchlab".into(),
        partition: "lab".into(),
        node: "n2".into(),
        job_id: "7_3".into(),
        array_job_id: Some("7".into()),
        array_task_id: Some(3),
        allocated_cpus: "1".into(),
        attempts: 2,
        requeued: Some("Slurm requeued job 7_3 after node n1 failed under it".into()),
        image_digest: Some(format!("sha256:{}", "6".repeat(64))),
    }));
    r.hash = r.compute_hash();
    assert_eq!(schema_errors(&serde_json::to_value(&r).unwrap()), Vec::<String>::new());
    pin_eq("record_dispatch", &r.dispatch);
    pin_eq("record_node_fail", &r.failure);
}

/// A server's serverInfo over the limit: kept as its cut name and version, with its size; the
/// record meets the schema and reads back the same. Without a cut, the field is absent.
#[test]
fn a_cut_server_info_is_recorded_as_cut() {
    let mut r = record(3, Status::Ok, Expect::Success, Workload::ColdStart { spawns: 5 });
    let claim = json!({"name": "n".repeat(300), "version": "9", "blob": "x".repeat(8000)});
    let (info, cut) = benchlab::record::claimed::bound_server_info(Some(claim));
    r.observed.server_info = info.map(std::sync::Arc::new);
    r.observed.server_info_truncated = cut;
    r.hash = r.compute_hash();
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(schema_errors(&v), Vec::<String>::new());
    assert!(v["observed"]["server_info_truncated"].as_u64().unwrap() > 8000, "{}", v["observed"]);
    assert_eq!(v["observed"]["server_info"]["name"].as_str().unwrap().len(), 256);
    let back: Record = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
    let plain = record(4, Status::Ok, Expect::Success, Workload::ColdStart { spawns: 5 });
    let v = serde_json::to_value(&plain).unwrap();
    assert!(v["observed"].get("server_info_truncated").is_none(), "{}", v["observed"]);
    // The schema refuses a cut size that is no cut.
    let mut bad = serde_json::to_value(&r).unwrap();
    bad["observed"]["server_info_truncated"] = json!(10);
    assert!(!schema_errors(&bad).is_empty());
}

#[test]
fn every_workload_variant_alone() {
    for (name, w) in every_workload() {
        pin_eq(name, &w);
    }
}

#[test]
fn every_failure_reason() {
    use FailureReason::*;
    let failures: Vec<Failure> =
        [Crash, StartupTimeout, Timeout, ProtocolError, WrongResult, ToolError, Oom, EngineError]
            .into_iter()
            .map(|r| Failure::new(r, format!("{} detail", r.as_str())))
            .collect();
    for f in &failures {
        assert_eq!(serde_json::to_value(f.reason).unwrap(), json!(f.reason.as_str()));
    }
    pin_eq("failures", &failures);
}

#[test]
fn small_enums_and_cell_parts() {
    pin_eq("status", &vec![Status::Ok, Status::Failed]);
    pin_eq("expect", &vec![Expect::Success, Expect::Failure]);
    let minimal = HttpTarget {
        transport: Transport::Sse,
        port: 0,
        path: "/sse".into(),
        reply: Some(ReplyMode::Json),
        session: Some(SessionMode::Stateless),
        api_route: None,
        api_style: Some(ApiStyle::Plain),
        host: None,
    };
    let stdio = HttpTarget {
        transport: Transport::Stdio,
        reply: None,
        session: None,
        api_style: None,
        host: None,
        ..minimal.clone()
    };
    pin_eq("http_targets", &vec![http_target(), minimal, stdio]);
    // A placement outside `--parallel` leaves the slot out.
    pin_eq("placements", &vec![placement(), Placement { parallel: None, shared: true, ..placement() }]);
    pin_eq("timeouts_default", &Timeouts::default());
    pin_eq("repeat", &Repeat { index: 0, of: 1, fresh_container: false });
    pin_eq("source_info", &SourceInfo { file: "servers/a.py".into(), sha256: "6".repeat(64), loc: 12 });
    pin_eq("load_metrics", &load_metrics());
    pin_eq("load_metrics_threads", &LoadMetrics { driver_threads: Some(2), ..load_metrics() });
    pin_eq("load_metrics_staged", &load_metrics_staged());
    pin_eq("load_memory", &load_memory());
    // An iteration load keeps each step's histogram and the iterations completed.
    let step = load_metrics().latency.unwrap();
    pin_eq(
        "load_metrics_steps",
        &LoadMetrics {
            steps: [("initialize".to_string(), step.clone()), ("session".to_string(), step)]
                .into_iter()
                .collect(),
            iterations: Some(40),
            series: None,
            soak: None,
            http_rps: None,
            http_requests: None,
            ..load_metrics()
        },
    );
    // Backing services: the scenario's spec, the placement that gives them CPUs, what the driver
    // and backend report, and what the record and its environment keep.
    let redis = benchlab::spec::ServiceSpec {
        name: "redis".into(),
        kind: benchlab::spec::ServiceKind::Redis,
        seed: 7,
        fault: None,
        declared_by: Some("the recipe of fastmcp, [api.fastmcp-shop]".into()),
        port: None,
        expectations_sha256: None,
        expectations_from: None,
        program: None,
    };
    let api = benchlab::spec::ServiceSpec {
        name: "api".into(),
        kind: benchlab::spec::ServiceKind::Api,
        seed: 7,
        fault: Some("exit@40".into()),
        declared_by: None,
        port: None,
        expectations_sha256: None,
        expectations_from: None,
        program: None,
    };
    let mock = benchlab::spec::ServiceSpec {
        name: "mock-api".into(),
        kind: benchlab::spec::ServiceKind::Mock,
        seed: 7,
        fault: None,
        declared_by: None,
        port: Some(1081),
        expectations_sha256: Some("8".repeat(64)),
        expectations_from: None,
        program: None,
    };
    let program = |ready: benchlab::spec::Readiness| benchlab::spec::ServiceSpec {
        name: "cache".into(),
        kind: benchlab::spec::ServiceKind::Program,
        seed: 7,
        fault: None,
        declared_by: None,
        port: Some(6390),
        expectations_sha256: None,
        expectations_from: None,
        program: Some(benchlab::spec::ServiceProgram {
            source: None,
            packages: vec!["redis-server".into()],
            command: vec!["/usr/bin/redis-server".into(), "--port".into(), "6390".into()],
            env: [("A".to_string(), "1".to_string())].into(),
            ready,
            seed_command: Some(vec!["/usr/bin/redis-cli".into(), "set".into(), "k".into(), "v".into()]),
            cpus: benchlab::spec::CpuQuota::from_cpus(0.5),
            memory_bytes: Some(128 << 20),
        }),
    };
    let programs = vec![
        program(benchlab::spec::Readiness::Tcp),
        program(benchlab::spec::Readiness::Http { path: "/health".into() }),
        program(benchlab::spec::Readiness::Command { argv: vec!["redis-cli".into(), "ping".into()] }),
    ];
    let mut programs = programs;
    programs.push(benchlab::spec::ServiceSpec {
        name: "counter".into(),
        port: Some(9100),
        program: Some(benchlab::spec::ServiceProgram {
            source: Some(benchlab::spec::ServerSource {
                origin: benchlab::spec::SourceOrigin::Git {
                    url: "https://example.invalid/b".into(),
                    commit: "ccb84cf".into(),
                },
                path: "counter".into(),
            }),
            packages: Vec::new(),
            command: vec!["python3".into(), "counter.py".into()],
            env: Default::default(),
            ready: benchlab::spec::Readiness::Http { path: "/health".into() },
            seed_command: None,
            cpus: None,
            memory_bytes: None,
        }),
        ..programs[0].clone()
    });
    pin_eq("program_service_specs", &programs);
    let specs = vec![redis, api, mock];
    pin_eq("service_specs", &specs);
    let mut r = record(3, Status::Ok, Expect::Success, Workload::ColdStart { spawns: 5 });
    r.cell.services = programs;
    assert_eq!(schema_errors(&serde_json::to_value(&r).unwrap()), Vec::<String>::new());
    // The record schema takes every kind and a mock's port and expectations' hash.
    let mut r = record(3, Status::Ok, Expect::Success, Workload::ColdStart { spawns: 5 });
    r.cell.services = specs;
    assert_eq!(schema_errors(&serde_json::to_value(&r).unwrap()), Vec::<String>::new());
    pin_eq(
        "placement_with_services",
        &Placement { services_cpus: Some("1".into()), services_share_driver: true, ..placement() },
    );
    pin_eq(
        "service_metrics",
        &vec![benchlab::record::ServiceMetrics {
            name: "redis".into(),
            ready_ms: Some(12.5),
            seed_sha256: Some("7".repeat(64)),
            items: Some(161),
            cpu_s: Some(0.25),
            window_s: Some(5.0),
            memory_peak_bytes: Some(9 << 20),
            memory_end_bytes: Some(8 << 20),
            exited: Some(3),
        }],
    );
    pin_eq(
        "service_manifests",
        &vec![benchlab::record::manifest::ServiceManifest {
            name: "redis".into(),
            kind: benchlab::spec::ServiceKind::Redis,
            image_id: "sha256:abc".into(),
            version: "5:7.0.15-1~deb12u10".into(),
        }],
    );
}

#[test]
fn the_environment_manifest_alone() {
    pin_eq("environment", &environment());
    // Written before the sandbox was recorded: the key is absent, not null.
    let old = Environment { sandbox: None, ..environment() };
    assert!(serde_json::to_value(&old).unwrap().get("sandbox").is_none());
}

fn driver_outcome() -> DriverOutcome {
    DriverOutcome {
        failure: Some(Failure::new(FailureReason::WrongResult, "expected 3, got 4")),
        protocol_version: Some("2025-11-25".into()),
        server_info: Some(json!({"name": "shapes"})),
        cold_start_ns: vec![101_000_000, 99_000_000],
        tools_list_ns: vec![1_500_000],
        calls_histogram: Some(histogram().histogram),
        calls_ok: 999,
        memory_after_initialize: Some(tree(30 << 20)),
        memory_end: Some(tree(31 << 20)),
        cgroup_after_initialize: Some(cgroup(40 << 20, 0)),
        cgroup_end: Some(cgroup(360 << 20, 300 << 20)),
        exits: vec![exit_info()],
        load: Some(load_metrics()),
        load_memory: Some(load_memory()),
        warmup: None,
        services: Vec::new(),
    }
}

#[test]
fn driver_wire_messages() {
    let spec = DriverSpec {
        lab_dir: PathBuf::from("/lab"),
        server: ServerLaunch {
            argv: vec!["python".into(), "server.py".into()],
            env: vec![("BENCHLAB_PORT".into(), "8123".into())],
            cwd: Some("/srv".into()),
        },
        http: Some(http_target()),
        suite: "weekly".into(),
        suite_data: None,
        workload: Workload::SerialCalls { tool: "add".into(), warmup: Warmup::Fixed(10), calls: 100 },
        timeouts: Timeouts::default(),
        ungated: Some(json!({"a": 1, "b": 2})),
        services: Vec::new(),
        driver_cpus: Vec::new(),
    };
    pin("driver_spec", &spec);
    pin("driver_spec_gated_stdio", &DriverSpec { http: None, ungated: None, ..spec.clone() });
    pin("driver_spec_threads", &DriverSpec { driver_cpus: vec![0, 1], ..spec });
    pin("driver_outcome", &driver_outcome());
    pin("driver_outcome_default", &DriverOutcome::default());
    let events = vec![
        DriverEvent::Progress { phase: "calls".into(), done: 50, total: 100 },
        DriverEvent::Outcome { outcome: Box::new(driver_outcome()) },
    ];
    pin("driver_events", &events);
}

#[test]
fn shim_wire_messages() {
    let requests = vec![
        Request::Spawn {
            argv: vec!["node".into(), "server.js".into()],
            env: vec![("HOME".into(), "/tmp".into())],
            cwd: Some("/srv".into()),
            stderr_log: PathBuf::from("/lab/server.log"),
            output_to_log: true,
        },
        Request::Memory { pid: 7 },
        Request::Cpu { pid: 7 },
        Request::CgroupPeak,
        Request::CgroupUsage,
        Request::CgroupMemory { pid: 7 },
        Request::Stop { pid: 7, grace_ms: 2_000, term_ms: 2_000 },
        Request::Shutdown,
    ];
    pin("shim_requests", &requests);
    let replies = vec![
        Reply::Spawned { pid: 7 },
        Reply::Memory { memory: tree(30 << 20) },
        Reply::Cpu { cpu_ns: 1_234_567 },
        Reply::CgroupMemory {
            memory: Some(cgroup(360 << 20, 300 << 20)),
            source: "/sys/fs/cgroup/memory".into(),
        },
        Reply::CgroupMemory { memory: None, source: "no memory/memory.usage_in_bytes".into() },
        Reply::CgroupPeak { bytes: Some(99 << 20), source: "memory.peak".into() },
        Reply::CgroupUsage { bytes: Some(98 << 20), source: "memory/memory.usage_in_bytes".into() },
        Reply::Stopped { exit: exit_info(), memory_before_stop: Some(tree(31 << 20)) },
        Reply::Bye,
        Reply::Error { message: "no such process".into() },
    ];
    pin("shim_replies", &replies);
}

fn records_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            records_files(&p, out);
        } else if p.file_name().is_some_and(|n| n == "records.jsonl") {
            out.push(p);
        }
    }
}

#[test]
fn every_committed_record_reads_and_writes_back_unchanged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let mut files = Vec::new();
    records_files(&root, &mut files);
    assert!(files.len() >= 5, "expected several committed runs under {}, found {files:?}", root.display());
    let (mut lines, mut bad) = (0, Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            lines += 1;
            let at =
                format!("{}:{}", f.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(f).display(), i + 1);
            let stored: Value = serde_json::from_str(line).unwrap();
            let record: Record = match serde_json::from_str(line) {
                Ok(r) => r,
                Err(e) => {
                    bad.push(format!("{at}: does not read as a Record: {e}"));
                    continue;
                }
            };
            let errors = schema_errors(&stored);
            if !errors.is_empty() {
                bad.push(format!("{at}: breaks the record schema: {errors:?}"));
            } else if serde_json::to_value(&record).unwrap() != stored {
                bad.push(format!("{at}: writes back as different JSON"));
            } else if record.compute_hash() != record.hash {
                bad.push(format!("{at}: its hash no longer matches its content"));
            }
        }
    }
    assert!(bad.is_empty(), "{} of {lines} committed records changed shape:\n{}", bad.len(), bad.join("\n"));
    assert!(lines > 100, "only {lines} committed records found");
}
