//! Tests of the version histories: version order, series and points, step detection.

use super::series::fnv1a;
use super::steps::{fit, steps_of};
use super::*;
use crate::record::tests::sample_record;
use crate::record::Status;
use crate::spec::{HistogramMetric, Repeat};
use crate::spec::{Warmup, Workload};
use crate::stats;

#[test]
fn versions_sort_numerically_with_pre_releases_first() {
    let mut v = vec![
        "1.10.0",
        "1.9.0",
        "1.2",
        "1.10.0rc1",
        "1.10.0-beta.2",
        "v1.1.2",
        "1.10.0.post1",
        "1.10.0.dev0",
        "1.10.0-rc.10",
        "1.10.0-rc.9",
        "2.0.0+build.5",
        "1.2.0.1",
    ];
    v.sort_by(|a, b| compare_versions(a, b));
    assert_eq!(
        v,
        [
            "v1.1.2",
            "1.2",
            "1.2.0.1",
            "1.9.0",
            "1.10.0.dev0",
            "1.10.0-beta.2",
            "1.10.0rc1",
            "1.10.0-rc.9",
            "1.10.0-rc.10",
            "1.10.0",
            "1.10.0.post1",
            "2.0.0+build.5",
        ]
    );
    assert_eq!(compare_versions("1.9.0", "1.10.0"), std::cmp::Ordering::Less);
    assert_eq!(compare_versions("1.0.0-alpha.1", "1.0.0-alpha.beta"), std::cmp::Ordering::Less);
    assert_eq!(compare_versions("1.0.0-alpha", "1.0.0-alpha.1"), std::cmp::Ordering::Less);
    assert_eq!(compare_versions("1.2", "1.2.0"), std::cmp::Ordering::Less, "ties broken by the text");
}

/// A deterministic jitter in [-1, 1].
pub(super) fn jitter(k: usize) -> f64 {
    let h = fnv1a(&(k as u64).to_le_bytes());
    (h % 2001) as f64 / 1000.0 - 1.0
}

/// Points with the given values and intervals of ± `rel` around them.
fn points(values: &[f64], rel: f64) -> Vec<Option<Point>> {
    values
        .iter()
        .map(|&v| {
            Some(Point::within_run(
                v,
                Some(Interval {
                    estimate: v,
                    lower: v * (1.0 - rel),
                    upper: v * (1.0 + rel),
                    confidence: 0.95,
                }),
                20,
            ))
        })
        .collect()
}

fn detect(metric: HistoryMetric, values: &[f64], rel: f64) -> Vec<Step> {
    let points = points(values, rel);
    let versions: Vec<String> = (0..values.len()).map(|i| format!("1.{i}.0")).collect();
    let segments = fit(&points);
    steps_of(
        &MetricHistory {
            metric,
            unit: metric.unit(),
            points,
            segments,
            controls: Vec::new(),
            control_drift: None,
        },
        &versions,
    )
}

#[test]
fn a_flat_noisy_series_has_no_step() {
    let v: Vec<f64> = (0..60).map(|k| 100.0 * (1.0 + 0.04 * jitter(k))).collect();
    assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.03), []);
    // Tight intervals (a histogram of many calls) over run-to-run noise: still none.
    assert_eq!(detect(HistoryMetric::CallP50, &v, 0.005), []);
}

#[test]
fn one_clear_jump_is_one_step_at_its_version() {
    let v: Vec<f64> =
        (0..30).map(|k| if k < 17 { 600.0 } else { 840.0 } * (1.0 + 0.03 * jitter(k))).collect();
    let steps = detect(HistoryMetric::ColdStart, &v, 0.03);
    assert_eq!(steps.len(), 1, "{steps:?}");
    let s = &steps[0];
    assert_eq!((s.from_version.as_str(), s.to_version.as_str(), s.index), ("1.16.0", "1.17.0", 17));
    assert!(s.regression && (s.ratio - 1.4).abs() < 0.05, "{s:?}");
    // The same jump in throughput is an improvement; a fall is a regression.
    assert!(!detect(HistoryMetric::Throughput, &v, 0.03)[0].regression);
    let fall: Vec<f64> = v.iter().map(|x| 100_000.0 / x).collect();
    let s = &detect(HistoryMetric::Throughput, &fall, 0.03)[0];
    assert!(s.regression && s.ratio < 0.75 && s.index == 17, "{s:?}");
}

#[test]
fn a_short_series_finds_its_step() {
    let steps = detect(HistoryMetric::CallP99, &[100.0, 103.0, 99.0, 150.0, 148.0, 152.0], 0.02);
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0].to_version, "1.3.0");
    assert_eq!(change_text(steps[0].ratio), "+50 %");
}

#[test]
fn two_steps_are_two_steps() {
    let v: Vec<f64> = (0..30)
        .map(|k| match k {
            0..=9 => 100.0,
            10..=19 => 130.0,
            _ => 95.0,
        } * (1.0 + 0.02 * jitter(k)))
        .collect();
    let steps = detect(HistoryMetric::ColdStart, &v, 0.02);
    let at: Vec<(usize, bool)> = steps.iter().map(|s| (s.index, s.regression)).collect();
    assert_eq!(at, [(10, true), (20, false)], "{steps:?}");
}

/// Noise drawn from a seeded stream: the sum of three jitters (roughly normal, sd ≈ 1).
fn noise_at(seed: usize, k: usize) -> f64 {
    (0..3).map(|j| jitter(seed * 1000 + 3 * k + j)).sum()
}

#[test]
fn false_steps_are_rare_and_real_ones_found() {
    // 300 flat series of 30 versions, 3% noise (sd), intervals ±6% (about 2 sd): no step.
    let mut false_steps = 0;
    let mut found = 0;
    for seed in 0..300 {
        let flat: Vec<f64> = (0..30).map(|k| 100.0 * (1.0 + 0.03 * noise_at(seed, k))).collect();
        false_steps += detect(HistoryMetric::ColdStart, &flat, 0.06).len();
        // Intervals from within one run (a histogram of many calls) far narrower than the
        // noise between runs: the noise estimate from neighbours keeps the fit honest.
        false_steps += detect(HistoryMetric::CallP50, &flat, 0.005).len();
        // The same with a 25% step at version 15: found at its version.
        let step: Vec<f64> =
            flat.iter().enumerate().map(|(k, v)| if k < 15 { *v } else { v * 1.25 }).collect();
        let steps = detect(HistoryMetric::ColdStart, &step, 0.06);
        found += usize::from(steps.len() == 1 && steps[0].index == 15);
    }
    assert_eq!(false_steps, 0);
    assert!(found >= 285, "found {found} of 300");
}

#[test]
fn a_slow_drift_is_no_burst_of_steps() {
    // +1.5% per release, doubling over 48 releases, within the intervals of neighbours.
    let v: Vec<f64> = (0..48).map(|k| 100.0 * 1.015f64.powi(k as i32) * (1.0 + 0.01 * jitter(k))).collect();
    assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.03), []);
}

#[test]
fn a_single_outlier_is_no_step() {
    let mut v: Vec<f64> = (0..25).map(|k| 100.0 * (1.0 + 0.02 * jitter(k))).collect();
    v[12] = 200.0;
    assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.01), []);
    // Nor at either end.
    v[12] = 100.0;
    v[24] = 200.0;
    assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.01), []);
    v[24] = 100.0;
    v[0] = 30.0;
    assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.01), []);
}

#[test]
fn a_jump_within_overlapping_intervals_is_no_step() {
    let v: Vec<f64> = (0..20).map(|k| if k < 10 { 100.0 } else { 115.0 }).collect();
    assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.2), []);
    assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.02).len(), 1);
    // Under the minimum change, even with tight intervals: none.
    let v: Vec<f64> = (0..20).map(|k| if k < 10 { 100.0 } else { 107.0 }).collect();
    assert_eq!(detect(HistoryMetric::ColdStart, &v, 0.001), []);
}

pub(super) fn record(server: &str, version: &str, workload: &str, cold_ms: f64) -> Record {
    let mut r = sample_record(server);
    r.cell.server.family = "python-mcp".into();
    r.cell.server.sdk_version = version.into();
    r.cell.server.runtime = "cpython-trixie".into();
    r.cell.id = format!("{server}/{workload}");
    r.metrics.cold_start.as_mut().unwrap().samples_ms = (0..8).map(|i| cold_ms + f64::from(i)).collect();
    if workload != "cold_start" {
        r.cell.workload = Workload::SerialCalls { tool: "add".into(), warmup: Warmup::Fixed(0), calls: 100 };
        let mut h = stats::latency_histogram();
        for us in 1..=100u64 {
            h.record(us * 10_000).unwrap();
        }
        r.metrics.calls = Some(HistogramMetric {
            summary: stats::summarize(&h).unwrap(),
            histogram: stats::encode_histogram(&h),
            warmup: None,
        });
    }
    r
}

#[test]
fn records_become_series_in_version_order_with_repeats_pooled() {
    let mut rs = Vec::new();
    for (v, ms) in [("1.10.0", 300.0), ("1.2.0", 100.0), ("1.9.0", 100.0), ("1.11.0", 300.0)] {
        rs.push(record(&format!("mcp-{v}"), v, "cold_start", ms));
        rs.push(record(&format!("mcp-{v}"), v, "calls", ms));
    }
    // A repeated cell: its samples pooled.
    let mut again = record("mcp-1.9.0", "1.9.0", "cold_start", 100.0);
    again.cell.repeat = Some(Repeat { index: 1, of: 2, fresh_container: true });
    rs.push(again);
    // A failed cell adds no point; a family with two versions is no history.
    let mut failed = record("mcp-1.12.0", "1.12.0", "cold_start", 900.0);
    failed.status = Status::Failed;
    failed.failure = Some(crate::spec::Failure::new(crate::spec::FailureReason::Crash, "gone"));
    rs.push(failed);
    for v in ["0.1", "0.2"] {
        let mut r = record(&format!("ts-{v}"), v, "cold_start", 50.0);
        r.cell.server.family = "ts-sdk".into();
        rs.push(r);
    }
    let hs = histories(&rs);
    assert_eq!(hs.len(), 2, "cold start and calls of python-mcp");
    let cold = &hs[0];
    assert_eq!(cold.versions, ["1.2.0", "1.9.0", "1.10.0", "1.11.0", "1.12.0"]);
    assert_eq!(cold.failures[4].as_deref(), Some("crash"));
    assert!(cold.metrics.iter().all(|m| m.points[4].is_none()), "a failed version has no points");
    assert_eq!(cold.label, "python-mcp on cpython-trixie, stdio, weekly suite, cold_start, cpus 1/0");
    let metrics: Vec<HistoryMetric> = cold.metrics.iter().map(|m| m.metric).collect();
    assert_eq!(metrics, [HistoryMetric::ColdStart, HistoryMetric::RssAfterInitialize]);
    let pts = &cold.metrics[0].points;
    assert_eq!(pts[1].as_ref().unwrap().n, 16, "two repeats of 8 spawns");
    assert!(pts[0].as_ref().unwrap().ci.is_some());
    assert_eq!(cold.steps.len(), 1, "{:?}", cold.steps);
    assert_eq!((cold.steps[0].from_version.as_str(), cold.steps[0].to_version.as_str()), ("1.9.0", "1.10.0"));
    assert!(!cold.api_changes());
    let mut moved = rs.clone();
    for r in moved.iter_mut().filter(|r| compare_versions(&r.cell.server.sdk_version, "1.10.0").is_ge()) {
        r.cell.server.api = "mcpserver".into();
    }
    let moved = histories(&moved);
    assert!(moved[0].api_changes());
    assert!(step_line(&moved[0], &moved[0].steps[0]).contains("; api builtin → mcpserver), regression"));
    assert!(
        step_line(cold, &cold.steps[0]).starts_with("cold start ▲ +"),
        "{}",
        step_line(cold, &cold.steps[0])
    );
    let calls = &hs[1];
    assert_eq!(calls.key.workload, "calls");
    let metrics: Vec<HistoryMetric> = calls.metrics.iter().map(|m| m.metric).collect();
    assert_eq!(metrics, [HistoryMetric::CallP50, HistoryMetric::CallP99, HistoryMetric::RssAfterInitialize]);
    let p50 = calls.metrics[0].points[0].as_ref().unwrap();
    assert_eq!(p50.n, 100);
    assert!(p50.ci.unwrap().contains(p50.value) && (p50.value - 0.5).abs() < 0.01, "{p50:?}");
    assert!(calls.steps.is_empty(), "identical histograms");
    // The same records give the same histories, and JSON carries them.
    assert_eq!(histories(&rs), hs);
    let j = history_json(&rs);
    assert_eq!(j["series"].as_array().unwrap().len(), 2);
    assert_eq!(j["series"][0]["steps"][0]["to_version"], "1.10.0");
    assert_eq!(j["series"][0]["metrics"][0]["points"][2]["version"], "1.10.0");
    assert!(histories(&rs[..4]).is_empty(), "two versions are no history");
    // Nor two versions and a failed one.
    let mut two = rs[..4].to_vec();
    two.push(rs.iter().find(|r| r.status == Status::Failed).unwrap().clone());
    assert!(histories(&two).is_empty());
}

#[test]
fn a_long_sweep_is_quick_and_drawn() {
    let t = std::time::Instant::now();
    let mut rs = Vec::new();
    for k in 0..150 {
        let v = format!("1.{k}.0");
        let ms = if k < 90 { 600.0 } else { 800.0 } * (1.0 + 0.01 * jitter(k));
        rs.push(record(&format!("mcp-{v}"), &v, "cold_start", ms));
    }
    let hs = histories(&rs);
    assert_eq!(hs[0].versions.len(), 150);
    let steps: Vec<&str> = hs[0].steps.iter().map(|s| s.to_version.as_str()).collect();
    assert_eq!(steps, ["1.90.0"]);
    assert!(t.elapsed().as_secs() < 60, "{:?}", t.elapsed());
    eprintln!("150 versions: {:?}", t.elapsed());
}

#[test]
fn load_cells_follow_throughput_and_a_fall_is_a_regression() {
    let mut rs = Vec::new();
    for (k, v) in ["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0"].iter().enumerate() {
        for repeat in 0..3u32 {
            let mut r = sample_record(&format!("ts-{v}"));
            r.cell.server.sdk_version = v.to_string();
            r.cell.id = format!("ts-{v}/concurrency-w10");
            r.cell.transport = crate::spec::CellTransport::StreamableHttp;
            r.cell.workload = Workload::Concurrency {
                tool: "add".into(),
                workers: 10,
                warmup_ms: Warmup::Fixed(100),
                duration_ms: 1000,
                lifecycle: Default::default(),
                idle_after_ms: 0,
                mix: Vec::new(),
                session_calls: 0,
                stages: Vec::new(),
                start_vus: 0,
                think: None,
                flow: Vec::new(),
                session: crate::spec::SessionScope::PerIteration,
                warmup_excludes: crate::spec::WarmupExcludes::Everything,
            };
            r.cell.repeat = Some(Repeat { index: repeat, of: 3, fresh_container: true });
            let rps = if k < 3 { 5000.0 } else { 3000.0 } + 20.0 * f64::from(repeat);
            r.metrics.cold_start = None;
            r.metrics.load = Some(Box::new(crate::spec::LoadMetrics {
                mode: crate::spec::LoadMode::Closed,
                workers: 10,
                throughput_rps: rps,
                ..Default::default()
            }));
            rs.push(r);
        }
    }
    let hs = histories(&rs);
    assert_eq!(hs.len(), 1);
    let metrics: Vec<HistoryMetric> = hs[0].metrics.iter().map(|m| m.metric).collect();
    assert_eq!(metrics, [HistoryMetric::Throughput, HistoryMetric::RssAfterInitialize]);
    let p = hs[0].metrics[0].points[0].as_ref().unwrap();
    assert_eq!((p.value, p.n), (5020.0, 3), "the median of three repeats");
    assert_eq!(point_text(Unit::Rps, p), "5,020 req/s [4,971–5,070, 3 runs; within 5,000–5,040]");
    let s = &hs[0].steps;
    assert_eq!(s.len(), 1, "{s:?}");
    assert!(s[0].regression && s[0].to_version == "1.3.0" && s[0].ratio < 0.7, "{s:?}");
    assert!(step_line(&hs[0], &s[0]).starts_with("throughput ▼ −40 % at benchlab-null 1.3.0"));
}

#[test]
fn points_read_with_their_interval() {
    let p = Point::within_run(
        612.3,
        Some(Interval { estimate: 612.3, lower: 598.2, upper: 631.0, confidence: 0.95 }),
        10,
    );
    assert_eq!(point_text(Unit::Ms, &p), "612 ms [598–631]");
    let p = Point::within_run(
        0.1023,
        Some(Interval { estimate: 0.1023, lower: 0.1019, upper: 0.1049, confidence: 0.95 }),
        10,
    );
    assert_eq!(point_text(Unit::Ms, &p), "102.3 µs [101.9–104.9]");
    let p = Point::within_run(3.0 * 1048576.0, None, 1);
    assert_eq!(point_text(Unit::Bytes, &p), "3.0 MiB");
    assert_eq!(change_text(0.88), "−12 %");
}

#[test]
fn a_sweep_of_soaks_names_the_release_where_a_leak_appeared() {
    let mut rs = Vec::new();
    for (k, v) in ["1.0.0", "1.1.0", "1.2.0", "1.3.0"].iter().enumerate() {
        let mut r = sample_record(&format!("ts-{v}"));
        r.cell.server.sdk_version = v.to_string();
        r.cell.id = format!("ts-{v}/soak");
        r.cell.transport = crate::spec::CellTransport::StreamableHttp;
        r.cell.workload = Workload::Soak {
            tool: "add".into(),
            workers: 10,
            rate: None,
            lifecycle: Default::default(),
            idle_before_ms: 1000,
            ramp_ms: 1000,
            steady_ms: 60_000,
            idle_after_ms: 1000,
            interval_ms: 1000,
            leak_floor_bytes_per_hour: 1 << 20,
            cycles: 0,
            cycle_load_ms: 0,
            cycle_idle_ms: 0,
        };
        r.metrics.cold_start = None;
        let mib = if k >= 2 { 40.0 } else { 0.0 } * 1_048_576.0;
        let slope =
            stats::Slope { estimate: mib, lower: mib - 1e5, upper: mib + 1e5, n: 60, n_effective: 30.0 };
        r.metrics.load = Some(Box::new(crate::spec::LoadMetrics {
            mode: crate::spec::LoadMode::Closed,
            workers: 10,
            throughput_rps: 1000.0,
            soak: Some(crate::spec::SoakFigures {
                rss_bytes_per_hour: Some(slope),
                leak_floor_bytes_per_hour: 1 << 20,
                leak: k >= 2,
                ..Default::default()
            }),
            ..Default::default()
        }));
        rs.push(r);
    }
    let hs = histories(&rs);
    assert_eq!(hs.len(), 1);
    let h = &hs[0];
    assert_eq!(h.leak_changes.len(), 1, "{:?}", h.leak_changes);
    assert_eq!(
        (h.leak_changes[0].from_version.as_str(), h.leak_changes[0].to_version.as_str()),
        ("1.1.0", "1.2.0")
    );
    let lines = control_lines(h);
    assert!(lines[0].starts_with("LEAK APPEARS at benchlab-null 1.2.0 (1.1.0 0.00 MiB/h"), "{lines:?}");
    assert!(lines[1].contains("1.3.0 40.00 MiB/h"), "{lines:?}");
    assert_eq!(history_json(&rs)["series"][0]["leak_changes"][0]["to_version"], "1.2.0");
}

#[test]
fn a_record_is_of_a_series_exactly_when_its_key_is_that_series() {
    let base = record("python-mcp-1.2.0", "1.2.0", "calls-100", 10.0);
    let mut variants = vec![
        base.clone(),
        record("python-mcp-1.3.0", "1.3.0", "calls-100", 12.0),
        record("python-mcp-1.2.0", "1.2.0", "cold_start", 10.0),
    ];
    let changes: [fn(&mut Record); 7] = [
        |r| r.cell.server.family = "ts-sdk".into(),
        |r| r.cell.server.runtime = "cpython-bookworm".into(),
        |r| r.cell.suite = "daily".into(),
        |r| r.cell.placement.server_cpus = "0".into(),
        |r| r.cell.placement.shared = !r.cell.placement.shared,
        |r| {
            r.cell.server.env.insert("A".into(), "1".into());
        },
        |r| {
            r.cell.server.env.insert("A".into(), "2".into());
        },
    ];
    for change in changes {
        let mut r = base.clone();
        change(&mut r);
        variants.push(r);
    }
    for a in &variants {
        let key = SeriesKey::of(a);
        for b in &variants {
            assert_eq!(
                key.is_of(b),
                key == SeriesKey::of(b),
                "{} against {}",
                key.label(),
                SeriesKey::of(b).label()
            );
        }
    }
    // Not every variant is its own series, nor all one.
    let distinct: std::collections::BTreeSet<SeriesKey> = variants.iter().map(SeriesKey::of).collect();
    assert!(distinct.len() > 2 && distinct.len() < variants.len(), "{}", distinct.len());
}
