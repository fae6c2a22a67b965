//! `audit` against a real store: an intact one audits clean, and every one of 1,000 seeded random
//! mutations of its records.jsonl (an edited byte, a deleted, swapped or duplicated line, a cut
//! in the middle of a line) is detected, pinpointed at the first line that differs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use benchlab::hash::sha256_hex;
use benchlab::record::audit::{audit, Check, SCENARIO_FILE};
use benchlab::record::manifest::{
    BaseManifest, BenchlabManifest, EngineManifest, Environment, HostManifest, ImageManifest, Package,
    RuntimeManifest,
};
use benchlab::record::store::{Store, HEAD_FILE, RECORDS_FILE};
use benchlab::record::{
    Cell, MemoryMetrics, Metrics, Observed, Record, SampleMetric, ServerIdent, Status, FORMAT_VERSION,
};
use benchlab::spec::SourceInfo;
use benchlab::spec::Timeouts;
use benchlab::spec::{ExitInfo, TreeMemory};
use benchlab::spec::{Expect, Warmup, Workload};
use benchlab::spec::{Failure, FailureReason, HistogramMetric, LoadMemory, LoadMetrics, Placement, Repeat};
use benchlab::stats::LatencySummary;

const SCENARIO: &str = "name = \"audit\"\n[[server]]\nid = \"null\"\nfamily = \"benchlab-null\"\n";

/// A record as the orchestrator would hand it to the store (hashes and chain left to `append`),
/// varied by `i`: awkward floats, escapes and non-ASCII text, a failure, a histogram.
fn record(i: usize) -> Record {
    let placement = Placement {
        server_cpus: format!("{}", 1 + i % 3),
        driver_cpus: "0".into(),
        shared: i % 4 == 3,
        memory_limit_bytes: 512 << 20,
        parallel: (i % 5 == 4).then_some(benchlab::spec::ParallelSlot { slot: (i % 2) as u32, slots: 2 }),
        services_cpus: None,
        services_share_driver: false,
        cpu_quota: None,
    };
    let summary = LatencySummary {
        count: 3 + i as u64,
        min_ms: 0.1 * i as f64,
        p50_ms: 0.30000000000000004,
        p90_ms: 1.0 / 3.0,
        p95_ms: 2.5e-7,
        p99_ms: 1e21,
        max_ms: 12345.678 + i as f64,
        mean_ms: 0.7000000000000001,
    };
    let serial = i % 2 == 1;
    let failed = i % 3 == 2;
    let mut env = BTreeMap::new();
    if i.is_multiple_of(2) {
        env.insert("PYTHONHASHSEED".to_string(), format!("{i}"));
    }
    Record {
        format_version: FORMAT_VERSION,
        run_id: "20261130T000000Z-audit-1".into(),
        seq: 0,
        recorded_at: "2026-11-30T00:00:00Z".into(),
        status: if failed { Status::Failed } else { Status::Ok },
        failure: failed.then(|| {
            Failure::new(FailureReason::WrongResult, format!("cell {i}: got \"é\\n\u{1}\" ✓\nnot 42"))
        }),
        cell: Cell {
            id: format!("server-{i}/{}", if serial { "serial_calls" } else { "cold_start" }),
            server: ServerIdent {
                id: format!("server-{i}"),
                family: "python-mcp".into(),
                sdk_version: "1.30.0".into(),
                api: "mcpserver".into(),
                runtime: "cpython-bookworm".into(),
                runtime_version: "3.11.2".into(),
                source: i.is_multiple_of(2).then(|| SourceInfo {
                    file: "servers/python/echo.py".into(),
                    sha256: "a".repeat(64),
                    loc: 31,
                }),
                env,
                workers: None,
                built_from: None,
            },
            transport: benchlab::spec::CellTransport::Stdio,
            suite: "weekly".into(),
            suite_sha256: None,
            workload: if serial {
                Workload::SerialCalls { tool: "echo".into(), warmup: Warmup::Fixed(10), calls: 100 }
            } else {
                Workload::ColdStart { spawns: 3 }
            },
            placement: placement.clone(),
            timeouts: Timeouts::default(),
            expect: if failed { Expect::Failure } else { Expect::Success },
            http: None,
            repeat: (i % 4 == 1).then_some(Repeat { index: 1, of: 3, fresh_container: true }),
            services: Vec::new(),
        },
        metrics: Box::new(Metrics {
            cold_start: (!serial).then(|| SampleMetric {
                samples_ms: vec![0.1, 0.30000000000000004, 1e-9 * i as f64],
                summary: summary.clone(),
            }),
            tools_list: None,
            calls: serial.then(|| HistogramMetric {
                summary: summary.clone(),
                histogram: "HISTFAAAACl4nJNpmSzMwMBgxgABzFCaEUrLQ2kBKC0FpcWgNJxmgmlmBABBqwJh".into(),
                warmup: None,
            }),
            memory: MemoryMetrics {
                after_initialize: Some(TreeMemory {
                    rss_bytes: 4096 * i as u64,
                    hwm_bytes: 8192,
                    processes: 1,
                }),
                end: None,
                under_load: i.is_multiple_of(3).then_some(LoadMemory {
                    idle_before: None,
                    peak_during: Some(TreeMemory { rss_bytes: 1 << 20, hwm_bytes: 1 << 21, processes: 2 }),
                    after: None,
                    samples: 12,
                    interval_ms: 250,
                    cgroup_peak_bytes: Some(123_456_789),
                    ..Default::default()
                }),
                ..Default::default()
            },
            load: i
                .is_multiple_of(3)
                .then(|| LoadMetrics {
                    mode: benchlab::spec::LoadMode::Closed,
                    workers: 10,
                    connections: 10,
                    warmup_ms: 1000,
                    window_ms: 2_000.000_001,
                    window_nominal_ms: None,
                    ok: 1234,
                    failed: 1,
                    throughput_rps: 617.0 + 1e-7,
                    error_rate: 1.0 / 1235.0,
                    errors: [("timeout".to_string(), 1)].into_iter().collect(),
                    sessions: 10,
                    reinitializations: 0,
                    reconnects: 0,
                    latency: None,
                    target_rps: None,
                    late: None,
                    dropped: None,
                    server_cpu_cores: Some(0.97),
                    driver_cpu_cores: None,
                    driver_threads: None,
                    error_examples: vec!["timeout: no answer within 10000 ms".into()],
                    warmup: None,
                    series: None,
                    soak: None,
                    http_rps: None,
                    http_requests: None,
                    steps: Default::default(),
                    iterations: None,
                    ..Default::default()
                })
                .map(Box::new),
            services: Vec::new(),
        }),
        observed: Observed {
            server_info_truncated: None,
            protocol_version: Some("2025-06-18".into()),
            server_info: Some(std::sync::Arc::new(
                serde_json::json!({"name": "echo", "version": "1.0", "x": -1.5e-7}),
            )),
            exits: vec![ExitInfo {
                how: "exited".into(),
                code: Some(0),
                signal: None,
                stop_ms: 1.25,
                left_behind: None,
            }],
            left_behind: None,
        },
        environment: Environment {
            image: ImageManifest {
                reference: "benchlab/python-mcp:1.30.0".into(),
                image_id: "sha256:0123".into(),
                input_hash: "b".repeat(64),
                base: BaseManifest {
                    reference: "benchlab/base:bookworm".into(),
                    image_id: "sha256:4567".into(),
                    suite: Some("bookworm".into()),
                    rootfs_sha256: None,
                },
                packages: vec![Package { name: "mcp".into(), version: "1.30.0".into() }],
                system_packages: vec![],
            },
            runtime: RuntimeManifest { name: "cpython".into(), version: "3.11.2".into() },
            host: HostManifest {
                kernel: "6.1.0".into(),
                cpu_model: "Test CPU".into(),
                cpus_online: "0-3".into(),
                logical_cpus: 4,
                memory_bytes: 8 << 30,
                cgroup_version: 2,
            },
            engine: EngineManifest {
                kind: "docker".into(),
                version: "27.0".into(),
                api_version: "1.47".into(),
            },
            placement,
            benchlab: BenchlabManifest { version: "0.1.0".into(), binary_sha256: "c".repeat(64) },
            scenario_sha256: sha256_hex(SCENARIO.as_bytes()),
            deviations: if i == 4 { vec!["runtime 3.12.3 asked, 3.11.2 used".into()] } else { vec![] },
            sandbox: None,
            services: Vec::new(),
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

/// A run folder with `n` records, its scenario.toml and head, as a run leaves it.
fn run_dir(n: usize) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let mut store = Store::open(d.path()).unwrap();
    std::fs::write(d.path().join(SCENARIO_FILE), SCENARIO).unwrap();
    for i in 0..n {
        store.append(record(i)).unwrap();
    }
    let path = d.path().join(RECORDS_FILE);
    (d, path)
}

/// splitmix64: small, deterministic, good enough to choose mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    EditByte,
    DeleteLine,
    SwapLines,
    DuplicateLine,
    TruncateMidLine,
}

const KINDS: [Kind; 5] =
    [Kind::EditByte, Kind::DeleteLine, Kind::SwapLines, Kind::DuplicateLine, Kind::TruncateMidLine];

/// Bytes that keep a JSON line plausible, so edits reach the hash and chain checks and not only
/// the parser.
const JSONISH: &[u8] = b"0123456789abcdefABCDEFeE+-.\"\\,:{}[] \nnulltrue";

fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.split_inclusive(|b| *b == b'\n').map(<[u8]>::to_vec).collect()
}

fn mutate(kind: Kind, original: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut ls = lines(original);
    match kind {
        Kind::EditByte => {
            let mut out = original.to_vec();
            let at = rng.below(out.len());
            out[at] = if rng.next().is_multiple_of(2) {
                rng.next() as u8
            } else {
                JSONISH[rng.below(JSONISH.len())]
            };
            return out;
        }
        Kind::DeleteLine => {
            ls.remove(rng.below(ls.len()));
        }
        Kind::SwapLines => {
            let (a, b) = (rng.below(ls.len()), rng.below(ls.len()));
            ls.swap(a, b);
        }
        Kind::DuplicateLine => {
            let copy = ls[rng.below(ls.len())].clone();
            ls.insert(rng.below(ls.len() + 1), copy);
        }
        Kind::TruncateMidLine => loop {
            let at = rng.below(original.len());
            if at > 0 && original[at - 1] != b'\n' {
                return original[..at].to_vec();
            }
        },
    }
    ls.concat()
}

#[test]
fn an_intact_store_audits_clean_and_can_be_continued() {
    let (d, path) = run_dir(6);
    let r = audit(&path);
    assert!(r.is_clean(), "{:#?}", r.problems);
    assert_eq!((r.lines, r.records, r.last_seq), (6, 6, Some(5)));
    assert_eq!(r.scenario_sha256.as_deref(), Some(sha256_hex(SCENARIO.as_bytes()).as_str()));
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert!(!r.being_written);

    let mut store = Store::open(d.path()).unwrap();
    let r = audit(&path);
    assert!(r.being_written && r.is_clean(), "an open store is seen as being written");
    assert_eq!(r.writer_pid, Some(std::process::id()));
    assert_eq!(store.append(record(6)).unwrap().seq, 6);
    drop(store);
    assert!(audit(&path).is_clean());
}

/// What one worker saw: mutations audited and skipped by kind, first problems by check.
#[derive(Default)]
struct Tally {
    tried: BTreeMap<Kind, usize>,
    skipped: BTreeMap<Kind, usize>,
    first_checks: BTreeMap<Check, usize>,
    /// Mutations that only the encoding or round-trip checks caught: the hash over the parsed
    /// record would have passed them.
    format_only: usize,
}

/// Runs mutations `worker`, `worker + workers`, ... below 1,000 on a copy of the run folder.
fn mutate_and_audit(template: &Path, worker: u64, workers: u64) -> Tally {
    let d = tempfile::tempdir().unwrap();
    for f in [RECORDS_FILE, HEAD_FILE, SCENARIO_FILE] {
        std::fs::copy(template.join(f), d.path().join(f)).unwrap();
    }
    let path = d.path().join(RECORDS_FILE);
    let original = std::fs::read(&path).unwrap();
    let original_lines = lines(&original);
    let mut tally = Tally::default();
    for i in (worker..1_000).step_by(workers as usize) {
        let kind = KINDS[i as usize % KINDS.len()];
        let mut rng = Rng(i.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0xa0d1);
        let mutated = mutate(kind, &original, &mut rng);
        if mutated == original {
            *tally.skipped.entry(kind).or_default() += 1;
            continue;
        }
        *tally.tried.entry(kind).or_default() += 1;
        std::fs::write(&path, &mutated).unwrap();
        let r = audit(&path);
        let context =
            || format!("mutation {i} ({kind:?}) not pinpointed:\n{}", String::from_utf8_lossy(&mutated));
        let first = r.first_problem().unwrap_or_else(|| panic!("mutation {i} ({kind:?}) undetected"));
        *tally.first_checks.entry(first.check).or_default() += 1;
        tally.format_only +=
            usize::from(r.problems.iter().all(|p| matches!(p.check, Check::Encoding | Check::RoundTrip)));

        let now = lines(&mutated);
        let same = original_lines.iter().zip(&now).take_while(|(a, b)| a == b).count();
        if same == now.len() {
            // Whole lines gone from the end: only the head can tell.
            assert_eq!((first.line, first.check), (None, Check::Head), "{}\n{first}", context());
        } else {
            assert_eq!(first.line, Some(same + 1), "{}\n{first}", context());
        }
        if i % 25 == 0 {
            match Store::open(d.path()) {
                Ok(_) => panic!("mutation {i} ({kind:?}): a damaged store was opened for appending"),
                Err(e) => assert!(e.to_string().contains("refusing to append to a damaged store"), "{e}"),
            }
        }
    }
    std::fs::write(&path, &original).unwrap();
    assert!(audit(&path).is_clean());
    tally
}

#[test]
fn every_mutation_of_the_records_is_detected_at_the_first_line_that_differs() {
    let (d, _) = run_dir(5);
    let template = d.path();
    // Debug builds hash slowly: share the 1,000 mutations among the CPUs.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4) as u64;
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> =
            (0..workers).map(|w| s.spawn(move || mutate_and_audit(template, w, workers))).collect();
        handles.into_iter().map(|h| h.join().expect("a mutation worker passed")).collect()
    });
    let mut all = Tally::default();
    for t in tallies {
        for (k, n) in t.tried {
            *all.tried.entry(k).or_default() += n;
        }
        for (k, n) in t.skipped {
            *all.skipped.entry(k).or_default() += n;
        }
        for (c, n) in t.first_checks {
            *all.first_checks.entry(c).or_default() += n;
        }
        all.format_only += t.format_only;
    }
    eprintln!("mutations detected, by kind: {:?}; skipped as byte-identical: {:?}", all.tried, all.skipped);
    eprintln!("first problem, by check: {:?}", all.first_checks);
    eprintln!("caught only by the encoding or round-trip checks: {}", all.format_only);
    assert_eq!(all.tried.values().sum::<usize>() + all.skipped.values().sum::<usize>(), 1_000);
    for kind in KINDS {
        assert!(
            all.tried.get(&kind).copied().unwrap_or(0) >= 150,
            "too few {kind:?} mutations: {:?}",
            all.tried
        );
    }
}

#[test]
fn committed_results_audit_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("results");
    let Ok(scenarios) = std::fs::read_dir(&root) else { return };
    for run in scenarios.flatten().filter_map(|s| std::fs::read_dir(s.path()).ok()).flatten().flatten() {
        let path = run.path().join(RECORDS_FILE);
        if path.exists() {
            let r = audit(&path);
            assert!(r.is_clean(), "{}: {:#?}", path.display(), r.problems);
        }
    }
}
