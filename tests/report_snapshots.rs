//! The report renderers over committed runs (results/ is never rewritten, so its records are
//! fixed inputs): snapshots of Markdown, CSV, Bencher JSON and the summary JSON with the run id
//! and timestamps redacted, and structural checks of the HTML page, whose SVG is too large and
//! too incidental to snapshot. The rendered pages are left in the test's scratch folder
//! (target/tmp) for a person to look at.

use std::path::Path;

use benchlab::record::store::read_records;
use benchlab::record::Record;
use benchlab::report::{self, Format};

const SEED_000: &str = "results/seed-000-stdio/20261130T095040Z-seed-000-stdio-8336/records.jsonl";
const SEED_001: &str =
    "results/seed-001-python-servers/20261130T095003Z-seed-001-python-servers-6622/records.jsonl";

fn records(path: &str) -> Vec<Record> {
    read_records(&Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect("committed records read")
}

/// Replaces what differs between runs of the same cells: run ids and write times.
fn redact(text: &str, records: &[Record]) -> String {
    let mut s = text.to_string();
    for r in records {
        s = s.replace(&r.run_id, "[run-id]").replace(&r.recorded_at, "[recorded-at]");
    }
    s
}

fn keep_for_people(name: &str, html: &str) {
    let _ = std::fs::write(Path::new(env!("CARGO_TARGET_TMPDIR")).join(name), html);
}

#[test]
fn markdown_of_seed_000() {
    let r = records(SEED_000);
    insta::assert_snapshot!("seed_000_markdown", redact(&report::markdown(&r), &r));
}

#[test]
fn csv_of_seed_000() {
    let r = records(SEED_000);
    let csv = report::csv(&r);
    let header_fields = csv.lines().next().unwrap().split(',').count();
    assert!(csv.lines().all(|l| l.split(',').count() == header_fields), "{csv}");
    insta::assert_snapshot!("seed_000_csv", redact(&csv, &r));
}

#[test]
fn bencher_json_of_seed_000() {
    let r = records(SEED_000);
    let text = report::bencher_json(&r);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let benchmarks = v.as_object().unwrap();
    assert_eq!(benchmarks.len(), r.len(), "one benchmark per cell");
    for (name, measures) in benchmarks {
        assert!(r.iter().any(|rec| &rec.cell.id == name), "{name}");
        for (measure, m) in measures.as_object().unwrap() {
            let value = m["value"].as_f64().unwrap();
            if let (Some(lo), Some(hi)) = (m.get("lower_value"), m.get("upper_value")) {
                let (lo, hi) = (lo.as_f64().unwrap(), hi.as_f64().unwrap());
                assert!(lo <= value && value <= hi, "{name} {measure}: {lo} <= {value} <= {hi}");
            }
        }
    }
    assert!(benchmarks["ts-1.0.4-node/serial_calls"].get("call_p99_ms").is_some());
    assert!(benchmarks["ts-1.0.4-node/cold_start"]["cold_start_ms"].get("lower_value").is_some());
    insta::assert_snapshot!("seed_000_bencher", redact(&text, &r));
}

#[test]
fn summary_json_of_seed_000() {
    let r = records(SEED_000);
    insta::assert_snapshot!("seed_000_summary_json", redact(&report::render(Format::Json, &r), &r));
}

#[test]
fn markdown_and_csv_of_a_run_with_expected_failures() {
    let r = records(SEED_001);
    let md = report::markdown(&r);
    assert!(md.contains("## Failures"));
    assert!(md.contains("| mcp-2.3.0-with-1.x-import/cold_start | crash | yes |"), "{md}");
    // Every Markdown table row has its table's column count: no text broke a row.
    for table in md.split("\n\n").filter(|b| b.starts_with('|')) {
        let columns = |l: &str| l.replace("\\|", "").matches('|').count();
        let first = columns(table.lines().next().unwrap());
        assert!(table.lines().all(|l| columns(l) == first), "{table}");
    }
    // The failed cells measured nothing, so they have no metric rows; the CSV is metrics only.
    let csv = report::csv(&r);
    assert!(!csv.contains("with-1.x-import"), "{csv}");
    // A header, 9 measured cells x 5 metrics, less calls in the 3 cold_start cells.
    assert_eq!(csv.lines().count(), 1 + 9 * 5 - 3);
}

/// Structure every page must have: the charts, no fetch of anything, every cell and its
/// environment shown.
fn check_page(html: &str, records: &[Record], charts: usize) {
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    assert_eq!(html.matches("<svg").count(), charts, "inline SVG charts");
    assert_eq!(html.matches("</svg>").count(), charts);
    for fetch in ["<script", "<link", "<img", "<iframe", "src=", "href=", "url(", "@import"] {
        assert!(!html.contains(fetch), "the page must fetch nothing, found {fetch:?}");
    }
    assert!(html.contains("Content-Security-Policy"));
    assert_eq!(html.matches("<table").count(), html.matches("</table>").count());
    for r in records {
        assert!(html.contains(&r.cell.id), "cell {} shown", r.cell.id);
        let e = &r.environment;
        assert!(html.contains(&e.image.input_hash), "input hash of {}", r.cell.id);
        assert!(html.contains(&r.env_hash));
        assert!(html.contains(&format!("{} {}", e.runtime.name, e.runtime.version)));
        for d in &e.deviations {
            assert!(html.contains(d), "deviation {d:?} shown");
        }
    }
}

#[test]
fn html_of_seed_000() {
    let r = records(SEED_000);
    let html = report::html(&r);
    keep_for_people("seed-000.html", &html);
    // Cold start bars, RSS bars, the percentile plot.
    check_page(&html, &r, 3);
    assert!(!html.contains("http://") && !html.contains("https://"), "no URL at all");
    // Four serial-calls cells, four curves in the legend.
    for cell in ["ts-1.0.4-node/serial_calls", "mcp-1.1.2/serial_calls"] {
        assert!(html.contains(&format!(">\n{cell}\n</text>")), "legend names {cell}");
    }
    assert_eq!(html, report::html(&r), "the page is a function of the records");
}

#[test]
fn html_of_a_run_with_expected_failures_escapes_their_details() {
    let r = records(SEED_001);
    let html = report::html(&r);
    keep_for_people("seed-001.html", &html);
    check_page(&html, &r, 3);
    // The server's traceback quotes code: it is shown as text, never as markup.
    assert!(html.contains("No module named &#39;mcp.server.fastmcp&#39;"));
    assert!(html.contains("(expected)"));
}

#[test]
fn an_empty_run_renders_without_charts() {
    for f in Format::ALL {
        let out = report::render(f, &[]);
        assert!(out.ends_with('\n'), "{f}");
    }
    let html = report::html(&[]);
    assert_eq!(html.matches("<svg").count(), 0);
    assert!(html.contains("No cold starts"));
    assert_eq!(report::bencher_json(&[]).trim(), "{}");
}

// ---------------------------------------------------------------------------------------------
// HTTP load cells, built in code from a committed stdio record (its environment and hashes are
// real; the cell and metrics are replaced): closed loop over streamable HTTP at 1 and 10 workers,
// the REST route, open loop with late and dropped requests, a failed cell that still measured,
// and a cell repeated three times.

use benchlab::mcp::transport::{HttpTarget, ReplyMode, SessionMode, Transport};
use benchlab::record::Status;
use benchlab::spec::TreeMemory;
use benchlab::spec::{Failure, FailureReason, HistogramMetric, LoadMemory, LoadMetrics, MemoryLevel, Repeat};
use benchlab::spec::{Lifecycle, Warmup, Workload};
use benchlab::stats;
use std::collections::BTreeMap;

/// A histogram of `n` latencies spread evenly from `lo_us` to `hi_us`, with a tail of 1% at
/// `tail_us`.
fn latency(n: u64, lo_us: u64, hi_us: u64, tail_us: u64) -> HistogramMetric {
    let mut h = stats::latency_histogram();
    for i in 0..n {
        let v = if i % 100 == 99 { tail_us } else { lo_us + (hi_us - lo_us) * i / n };
        h.record(v * 1000).unwrap();
    }
    HistogramMetric {
        summary: stats::summarize(&h).unwrap(),
        histogram: stats::encode_histogram(&h),
        warmup: None,
    }
}

fn tree(mib: u64) -> Option<TreeMemory> {
    Some(TreeMemory { rss_bytes: mib << 20, hwm_bytes: mib << 20, processes: 1 })
}

struct LoadSpec {
    server: &'static str,
    id: &'static str,
    transport: &'static str,
    session: SessionMode,
    workload: Workload,
    ok: u64,
    errors: &'static [(&'static str, u64)],
    p50_us: u64,
    tail_us: u64,
    peak_mib: u64,
}

fn load_record(template: &Record, seq: u64, s: LoadSpec) -> Record {
    let mut r = template.clone();
    r.seq = seq;
    r.cell.id = format!("{}/{}", s.server, s.id);
    r.cell.server.id = s.server.into();
    r.cell.transport =
        serde_json::from_value(serde_json::json!(s.transport)).expect("a stored transport name");
    r.cell.http = Some(HttpTarget {
        transport: Transport::StreamableHttp,
        port: 8000,
        path: "/mcp".into(),
        reply: Some(ReplyMode::Json),
        session: Some(s.session),
        api_route: Some("/api/{tool}".into()),
        api_style: None,
        host: None,
    });
    let (mode, workers, target) = match &s.workload {
        Workload::OpenLoop { rate, connections, .. } => ("open", *connections, Some(*rate as f64)),
        Workload::Concurrency { workers, .. } | Workload::HttpApi { workers, .. } => {
            ("closed", *workers, None)
        }
        _ => unreachable!(),
    };
    r.cell.workload = s.workload;
    let failed: u64 = s.errors.iter().map(|(_, n)| n).sum();
    r.metrics = Default::default();
    r.metrics.load = Some(Box::new(LoadMetrics {
        mode: if mode == "open" { benchlab::spec::LoadMode::Open } else { benchlab::spec::LoadMode::Closed },
        workers,
        connections: workers,
        warmup_ms: 500,
        window_ms: 2000.0,
        window_nominal_ms: Some(2000),
        ok: s.ok,
        failed,
        throughput_rps: s.ok as f64 / 2.0,
        error_rate: if s.ok + failed == 0 { 0.0 } else { failed as f64 / (s.ok + failed) as f64 },
        errors: s.errors.iter().map(|(k, n)| (k.to_string(), *n)).collect::<BTreeMap<_, _>>(),
        sessions: u64::from(workers),
        reinitializations: 0,
        reconnects: 0,
        latency: (s.ok > 0).then(|| latency(s.ok, s.p50_us / 2, s.p50_us * 3 / 2, s.tail_us)),
        target_rps: target,
        late: target.map(|_| 12),
        dropped: target.map(|_| 3),
        server_cpu_cores: Some(0.5 + f64::from(workers) / 40.0),
        driver_cpu_cores: None,
        driver_threads: None,
        error_examples: vec![],
        warmup: None,
        series: None,
        soak: None,
        http_rps: None,
        http_requests: None,
        steps: BTreeMap::new(),
        iterations: None,
        ..Default::default()
    }));
    r.metrics.memory.after_initialize = tree(15);
    // Closed-loop MCP cells had a 30 s idle phase after the load (its level 3 MiB under the
    // peak, give or take a MiB); the others one reading 500 ms after.
    let idle_after_ms = r.cell.workload.idle_after_ms();
    let level = |mib: u64| MemoryLevel {
        estimate: mib << 20,
        lower: (mib - 1) << 20,
        upper: (mib + 1) << 20,
        n: 21,
        from_ms: 25_000,
        to_ms: 30_000,
    };
    r.metrics.memory.under_load = Some(LoadMemory {
        idle_before: tree(15),
        peak_during: tree(s.peak_mib),
        after: tree(s.peak_mib - 1),
        samples: 8,
        interval_ms: 250,
        cgroup_peak_bytes: Some((s.peak_mib + 4) << 20),
        idle_after_ms,
        after_series: None,
        after_level: (idle_after_ms > 0).then(|| level(s.peak_mib - 3)),
        after_cgroup_level: (idle_after_ms > 0).then(|| level(s.peak_mib + 1)),
    });
    r
}

fn concurrency(workers: u32) -> Workload {
    Workload::Concurrency {
        tool: "add".into(),
        workers,
        warmup_ms: Warmup::Fixed(500),
        duration_ms: 2000,
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
    }
}

/// The load fixture run: 8 records, 6 cells.
fn load_records() -> Vec<Record> {
    let template = records(SEED_000).remove(0);
    let spec = |server, id, transport, workload, ok, errors, p50_us, tail_us, peak_mib| LoadSpec {
        server,
        id,
        transport,
        session: SessionMode::Stateless,
        workload,
        ok,
        errors,
        p50_us,
        tail_us,
        peak_mib,
    };
    let mut out = vec![
        spec("fast", "concurrency-w1", "streamable-http", concurrency(1), 4000, &[], 400, 1500, 16),
        spec("fast", "concurrency-w10", "streamable-http", concurrency(10), 18000, &[], 900, 6000, 18),
        spec(
            "fast",
            "http_api-w10",
            "http-api",
            Workload::HttpApi {
                tool: "add".into(),
                workers: 10,
                warmup_ms: Warmup::Fixed(500),
                duration_ms: 2000,
                idle_after_ms: 0,
            },
            28000,
            &[],
            700,
            1300,
            17,
        ),
        spec(
            "fast",
            "open_loop",
            "streamable-http",
            Workload::OpenLoop {
                tool: "add".into(),
                rate: 5000,
                connections: 16,
                warmup_ms: Warmup::Fixed(500),
                duration_ms: 2000,
                idle_after_ms: 0,
            },
            9985,
            &[("timeout", 12), ("http_status", 3)],
            450,
            4000,
            17,
        ),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, s)| load_record(&template, i as u64, s))
    .collect::<Vec<_>>();
    // A cell that failed mid-load: it keeps what it measured.
    let mut failed = load_record(
        &template,
        4,
        LoadSpec {
            server: "flaky",
            id: "concurrency-w10",
            transport: "streamable-http",
            session: SessionMode::Stateful,
            workload: concurrency(10),
            ok: 1200,
            errors: &[("connect", 40), ("session_expired", 7)],
            p50_us: 3000,
            tail_us: 90_000,
            peak_mib: 60,
        },
    );
    failed.status = Status::Failed;
    failed.failure = Some(Failure::new(FailureReason::Crash, "server exited with 137 during the load\nmore"));
    out.push(failed);
    // A cell repeated three times.
    for (i, ok) in [6000u64, 6400, 5000].into_iter().enumerate() {
        let mut r = load_record(
            &template,
            5 + i as u64,
            LoadSpec {
                server: "steady",
                id: "concurrency-w10",
                transport: "sse",
                session: SessionMode::Stateful,
                workload: concurrency(10),
                ok,
                errors: if i == 2 { &[("timeout", 5)] } else { &[] },
                p50_us: 1500 + 100 * i as u64,
                tail_us: 8000,
                peak_mib: 30 + i as u64,
            },
        );
        r.cell.http.as_mut().unwrap().transport = Transport::Sse;
        r.cell.http.as_mut().unwrap().reply = None;
        r.cell.http.as_mut().unwrap().session = None;
        r.cell.repeat = Some(Repeat { index: i as u32, of: 3, fresh_container: true });
        out.push(r);
    }
    out
}

#[test]
fn load_cells_get_their_own_table() {
    let r = load_records();
    let md = report::markdown(&r);
    assert!(md.contains("## HTTP load") && !md.contains("## Summary"), "no empty stdio summary");
    for table in md.split("\n\n").filter(|b| b.starts_with('|')) {
        let columns = |l: &str| l.replace("\\|", "").matches('|').count();
        let first = columns(table.lines().next().unwrap());
        assert!(table.lines().all(|l| columns(l) == first), "{table}");
    }
    // Error rates are always there, 0 % included; kinds in compact form; open loop late/dropped.
    assert!(md.contains("| 0 % |"), "{md}");
    assert!(md.contains("0.15 % (timeout 12, http_status 3); late 12, dropped 3"), "{md}");
    assert!(md.contains("open 5,000/s (16 conn)") && md.contains("4,993 of 5,000"), "{md}");
    assert!(md.contains("streamable-http json/stateless") && md.contains("| http-api |"), "{md}");
    // The failed cell shows what it measured and why it failed.
    assert!(md.contains("failed: crash: server exited with 137 during the load |"), "{md}");
    assert!(md.contains("3.77 % (connect 40, session_expired 7)"), "{md}");
    // Three repeats, one row: the median.
    assert_eq!(md.matches("| steady |").count(), 1, "{md}");
    assert!(md.contains("3,000 |") && md.contains("(median of 3)"), "{md}");
    insta::assert_snapshot!("load_markdown", redact(&md, &r));
    let table = report::render(Format::Table, &r);
    assert!(table.contains("HTTP load (server cpus") && table.contains("p99.9"), "{table}");
    insta::assert_snapshot!("load_table", redact(&table, &r));
}

#[test]
fn load_cells_in_json_and_csv_one_row_per_repeat() {
    let r = load_records();
    let json: serde_json::Value = serde_json::from_str(&report::render(Format::Json, &r)).unwrap();
    assert_eq!(json["summary"].as_array().unwrap().len(), 0);
    let load = json["load"].as_array().unwrap();
    assert_eq!(load.len(), 8, "one row per record");
    assert_eq!(load[5]["repeat"], 0);
    assert_eq!(load[3]["errors"]["timeout"], 12);
    assert!(load[0]["p999_ms"].as_f64().unwrap() > load[0]["p99_ms"].as_f64().unwrap() * 0.99);
    let csv = report::csv(&r);
    let header_fields = csv.lines().next().unwrap().split(',').count();
    assert!(csv.lines().all(|l| l.split(',').count() == header_fields), "{csv}");
    assert_eq!(
        csv.matches("steady/concurrency-w10,steady,concurrency,ok,throughput,rps").count(),
        3,
        "{csv}"
    );
    insta::assert_snapshot!("load_csv", redact(&csv, &r));
}

#[test]
fn load_cells_in_bencher_format() {
    let r = load_records();
    let text = report::bencher_json(&r);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let fast = &v["fast/concurrency-w10"];
    for m in ["throughput_rps", "latency_p50_ms", "latency_p99_ms", "latency_p999_ms", "error_rate"] {
        assert!(fast[m]["value"].is_number(), "{m}: {text}");
    }
    assert_eq!(fast["error_rate"]["value"], 0.0);
    // Repeats: the median, bounded by the smallest and largest repeat.
    let steady = &v["steady/concurrency-w10"]["throughput_rps"];
    assert_eq!((steady["value"].as_f64(), steady["lower_value"].as_f64()), (Some(3000.0), Some(2500.0)));
    assert_eq!(steady["upper_value"].as_f64(), Some(3200.0));
    insta::assert_snapshot!("load_bencher", redact(&text, &r));
}

#[test]
fn html_of_load_cells_has_the_load_charts() {
    let r = load_records();
    let html = report::html(&r);
    keep_for_people("load.html", &html);
    // Throughput, p99 and error rate vs workers; a percentile plot per workload and load level
    // (concurrency 1, concurrency 10, http_api 10, open loop); RSS idle vs peak. No stdio charts.
    check_page(&html, &r, 3 + 4 + 1);
    for title in [
        "Throughput vs workers (server cpus 1, driver cpus 0)",
        "p99 latency vs workers",
        "Error rate vs workers",
        "Latency by percentile, open_loop open 5,000/s",
        "RSS idle vs peak under load, per server",
    ] {
        assert!(html.contains(title), "{title}");
    }
    assert!(!html.contains("No cold starts"), "no stdio notes on a load-only page");
    assert!(html.contains("steady · sse"), "a line per server and transport");
    assert_eq!(html, report::html(&r), "the page is a function of the records");
    // Stdio and load records together: both sections, every chart.
    let mut both = records(SEED_000);
    both.extend(r);
    let html = report::html(&both);
    check_page(&html, &both, 3 + 3 + 4 + 1);
    assert!(html.contains("<h2>Summary</h2>") && html.contains("<h2>HTTP load</h2>"));
}

// ---------------------------------------------------------------------------------------------
// Version history: a version-matrix sweep built in code from the committed python-mcp 1.1.2 cells
// of seed-000 (environment and hashes real; version, samples and histograms replaced). Cold start
// steps up by ~38% at 1.9.0, call latency steps down by ~30% at 1.10.0, the calls' server source
// changes API generation at 1.11, one version is repeated twice and one failed; a TypeScript series
// on Bun at three versions stays flat.

/// A cold start around `ms`, 10 spawns with a small deterministic wiggle.
fn spawns(ms: f64, k: usize) -> Vec<f64> {
    (0..10).map(|i| ms * (1.0 + 0.015 * ((k * 7 + i * 3) as f64).sin())).collect()
}

fn sweep_record(template: &Record, family: &str, runtime: &str, version: &str, seq: u64) -> Record {
    let mut r = template.clone();
    let workload = r.cell.id.rsplit('/').next().unwrap().to_string();
    let server = format!("{family}-{version}");
    r.seq = seq;
    r.cell.id = format!("{server}/{workload}");
    r.cell.server.id = server;
    r.cell.server.family = family.into();
    r.cell.server.runtime = runtime.into();
    r.cell.server.sdk_version = version.into();
    r
}

fn history_records() -> Vec<Record> {
    let seed = records(SEED_000);
    let find = |id: &str| seed.iter().find(|r| r.cell.id == id).unwrap().clone();
    let (cold, calls) = (find("mcp-1.1.2/cold_start"), find("mcp-1.1.2/serial_calls"));
    let mut out = Vec::new();
    let versions = ["1.1.2", "1.10.0", "1.2.0", "1.3.0", "1.9.0", "1.8.1", "1.10.1", "1.11.0rc1", "1.11.0"];
    for (k, v) in versions.iter().enumerate() {
        let (n, _) = semver_rank(v);
        let cold_ms = if n >= 9 { 845.0 } else { 612.0 };
        let p50_us = if n >= 10 { 70 } else { 100 };
        let repeats = if *v == "1.3.0" { 2 } else { 1 };
        for i in 0..repeats {
            let mut c = sweep_record(&cold, "python-mcp", "cpython-trixie", v, out.len() as u64);
            let m = c.metrics.cold_start.as_mut().unwrap();
            m.samples_ms = spawns(cold_ms, k * 2 + i);
            m.summary = summary_of(&m.samples_ms);
            c.metrics.memory.after_initialize = tree(38 + (k as u64 % 2));
            if repeats > 1 {
                c.cell.repeat = Some(Repeat { index: i as u32, of: repeats as u32, fresh_container: true });
            }
            out.push(c);
        }
        let mut s = sweep_record(&calls, "python-mcp", "cpython-trixie", v, out.len() as u64);
        // The server source moves to the newer API generation with the 1.11 line.
        if n >= 11 {
            s.cell.server.api = "mcpserver".into();
        }
        s.metrics.calls = Some(latency(2000, p50_us / 2, p50_us * 3 / 2 + k as u64, p50_us * 20));
        out.push(s);
    }
    // A failed cell adds no point to its series, only its failure.
    let mut failed = sweep_record(&cold, "python-mcp", "cpython-trixie", "1.12.0", out.len() as u64);
    failed.status = Status::Failed;
    failed.failure = Some(Failure::new(FailureReason::Crash, "ImportError"));
    failed.metrics = Default::default();
    out.push(failed);
    let bun = find("ts-1.0.4-bun/cold_start");
    for (k, v) in ["1.0.4", "1.5.0", "1.12.1"].iter().enumerate() {
        let mut c = sweep_record(&bun, "ts-sdk", "bun-1.1.38", v, out.len() as u64);
        let m = c.metrics.cold_start.as_mut().unwrap();
        m.samples_ms = spawns(95.0, k);
        m.summary = summary_of(&m.samples_ms);
        out.push(c);
    }
    out
}

fn summary_of(samples_ms: &[f64]) -> stats::LatencySummary {
    stats::summarize_samples(&samples_ms.iter().map(|x| (x * 1e6) as u64).collect::<Vec<_>>()).unwrap()
}

/// The minor version and the whole text, enough to place the fixture's versions.
fn semver_rank(v: &str) -> (u32, &str) {
    (v.split('.').nth(1).unwrap().parse().unwrap(), v)
}

#[test]
fn history_of_a_version_sweep_in_table_and_markdown() {
    let r = history_records();
    let hs = report::histories(&r);
    let labels: Vec<&str> = hs.iter().map(|h| h.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "python-mcp on cpython-trixie, stdio, pulse suite, cold_start, cpus 1/0",
            "python-mcp on cpython-trixie, stdio, pulse suite, serial_calls (calculate_tax), cpus 1/0",
            "ts-sdk on bun-1.1.38, stdio, pulse suite, cold_start, cpus 1/0",
        ]
    );
    assert_eq!(
        hs[0].versions,
        ["1.1.2", "1.2.0", "1.3.0", "1.8.1", "1.9.0", "1.10.0", "1.10.1", "1.11.0rc1", "1.11.0", "1.12.0"]
    );
    let steps: Vec<(&str, &str, bool)> = hs
        .iter()
        .flat_map(|h| h.steps.iter().map(|s| (s.metric.as_str(), s.to_version.as_str(), s.regression)))
        .collect();
    assert_eq!(
        steps,
        [("cold_start", "1.9.0", true), ("call_p50", "1.10.0", false)],
        "p99 sits at the edge of a 1% tail: its intervals reach into it and overlap; {hs:#?}"
    );
    let table = report::history_table(&r).unwrap();
    assert!(table.contains("cold start ▲ +38 % at python-mcp 1.9.0 (1.8.1 6"), "{table}");
    assert!(report::history_table(&records(SEED_000)).is_none(), "no series of 3 versions there");
    insta::assert_snapshot!("history_table", redact(&report::render(Format::Table, &r), &r));
    let md = report::markdown(&r);
    assert!(md.contains("## History across versions"), "{md}");
    for table in md.split("\n\n").filter(|b| b.starts_with('|')) {
        let columns = |l: &str| l.replace("\\|", "").matches('|').count();
        let first = columns(table.lines().next().unwrap());
        assert!(table.lines().all(|l| columns(l) == first), "{table}");
    }
    insta::assert_snapshot!("history_markdown", redact(&md, &r));
    let json = report::history_json(&r);
    assert_eq!(json["series"].as_array().unwrap().len(), 3);
    assert_eq!(json["series"][0]["steps"][0]["from_version"], "1.8.1");
    assert_eq!(json["series"][0]["metrics"][0]["points"][2]["n"], 20, "two repeats pooled");
    assert_eq!(json["series"][0]["failures"][9], "crash");
    assert!(json["series"][0]["metrics"][0]["points"][9].is_null());
}

#[test]
fn html_of_a_version_sweep_has_a_chart_per_series_and_metric() {
    let r = history_records();
    let html = report::html(&r);
    keep_for_people("history.html", &html);
    // The stdio charts (3), then cold start, tools/list? (not in these records), RSS of the
    // python cold-start series; p50, p99, RSS of the calls series; cold start and RSS of bun.
    let hs = report::histories(&r);
    let charts: usize = hs.iter().map(|h| h.metrics.len()).sum();
    check_page(&html, &r, 3 + charts);
    assert!(html.contains("<h2>History across versions</h2>"));
    assert!(html.contains("▲ +38 % at 1.9.0") && html.contains("▼ −"), "steps are marked");
    assert_eq!(html, report::html(&r), "the page is a function of the records");
}
