//! Two runs' cells matched by id and each metric judged: the ratio b/a (or the error-rate
//! difference) with its interval, made as the documentation of `compare` says, the verdict
//! against the threshold, and the CI gate. Records in, a `Comparison` out; no text.

use crate::record::diffenv::{self, latest_by_cell};
use crate::record::{Record, Status};
use crate::report::rows::{status_text, CONFIDENCE, MIN_CI_SAMPLES, RESAMPLES, SEED};
use crate::stats::{self, Interval};

use super::{
    invert, CellComparison, CompareMetric, Comparison, FailedCell, Method, MetricComparison, SkippedMetric,
    Verdict, ERROR_RATE_TOLERANCE,
};

/// FNV-1a: a stable hash for per-metric seeds (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// A seed per cell, metric and side, so an interval does not depend on the other cells.
fn seed(cell: &str, metric: &str, side: &str) -> u64 {
    SEED ^ fnv1a(format!("compare\0{cell}\0{metric}\0{side}").as_bytes())
}

enum Judged {
    Compared(MetricComparison),
    Skipped(String),
    /// Not measured in either run: nothing to say.
    Absent,
}

/// One quantile of two histograms (a, b) and the interval of b/a, MOVER over each quantile's
/// bootstrap interval; None when an interval is not positive.
fn quantile_ratio(
    ha: &hdrhistogram::Histogram<u64>,
    hb: &hdrhistogram::Histogram<u64>,
    q: f64,
    cell: &str,
    metric: CompareMetric,
) -> Option<(f64, f64, Interval)> {
    let ci = |h, side| {
        stats::histogram_quantile_cis(h, &[q], RESAMPLES, CONFIDENCE, seed(cell, metric.as_str(), side))
    };
    let (ia, ib) = (ci(ha, "a"), ci(hb, "b"));
    match (ia.first(), ib.first()) {
        (Some(ia), Some(ib)) if ia.lower > 0.0 && ib.lower > 0.0 => {
            Some((ia.estimate, ib.estimate, stats::mover_ratio(ia, ib)))
        }
        _ => None,
    }
}

fn compare_metric(ra: &Record, rb: &Record, metric: CompareMetric, threshold_pct: f64) -> Judged {
    let cell = ra.cell.id.as_str();
    let (ma, mb) = (&ra.metrics, &rb.metrics);
    let made = |a: f64, b: f64, n_a: u64, n_b: u64, ratio: Interval, method: Method| {
        Judged::Compared(MetricComparison {
            cell: cell.to_string(),
            metric,
            unit: metric.unit(),
            a,
            b,
            n_a,
            n_b,
            ratio,
            method,
            higher_is_better: false,
            verdict: Verdict::judge(&ratio, threshold_pct),
            within: None,
            runs: None,
        })
    };
    let one_sided = |in_a: bool, in_b: bool| match (in_a, in_b) {
        (false, false) => Judged::Absent,
        (true, false) => Judged::Skipped("measured in a only".into()),
        _ => Judged::Skipped("measured in b only".into()),
    };
    match metric {
        CompareMetric::ColdStart | CompareMetric::ToolsList => {
            let pick = |m: &crate::record::Metrics| {
                if metric == CompareMetric::ColdStart {
                    m.cold_start.clone()
                } else {
                    m.tools_list.clone()
                }
            };
            let (sa, sb) = match (
                pick(ma).filter(|s| !s.samples_ms.is_empty()),
                pick(mb).filter(|s| !s.samples_ms.is_empty()),
            ) {
                (Some(sa), Some(sb)) => (sa.samples_ms, sb.samples_ms),
                (x, y) => return one_sided(x.is_some(), y.is_some()),
            };
            let (n_a, n_b) = (sa.len() as u64, sb.len() as u64);
            if n_a < MIN_CI_SAMPLES || n_b < MIN_CI_SAMPLES {
                return Judged::Skipped(format!(
                    "too few samples for an interval ({n_a} and {n_b}, need {MIN_CI_SAMPLES})"
                ));
            }
            let s = seed(cell, metric.as_str(), "ab");
            match stats::ratio_ci(&sb, &sa, stats::median, RESAMPLES, CONFIDENCE, s) {
                Some(ratio) => made(
                    stats::median(&mut sa.clone()),
                    stats::median(&mut sb.clone()),
                    n_a,
                    n_b,
                    ratio,
                    Method::BootstrapMedianRatio,
                ),
                None => Judged::Skipped("the median in a is zero".into()),
            }
        }
        CompareMetric::CallP50 | CompareMetric::CallP95 | CompareMetric::CallP99 => {
            let (ca, cb) = match (&ma.calls, &mb.calls) {
                (Some(ca), Some(cb)) => (ca, cb),
                (x, y) => return one_sided(x.is_some(), y.is_some()),
            };
            let q = match metric {
                CompareMetric::CallP50 => 0.50,
                CompareMetric::CallP95 => 0.95,
                _ => 0.99,
            };
            let decode = |s: &str| stats::decode_histogram(s).ok().filter(|h| h.len() >= MIN_CI_SAMPLES);
            let (ha, hb) = match (decode(&ca.histogram), decode(&cb.histogram)) {
                (Some(ha), Some(hb)) => (ha, hb),
                _ => return Judged::Skipped("a histogram is unreadable or holds too few calls".into()),
            };
            match quantile_ratio(&ha, &hb, q, cell, metric) {
                Some((a, b, ratio)) => made(a, b, ha.len(), hb.len(), ratio, Method::HistogramQuantileMover),
                None => Judged::Skipped("no positive quantile interval".into()),
            }
        }
        CompareMetric::RssAfterInitialize => {
            let (xa, xb) = match (&ma.memory.after_initialize, &mb.memory.after_initialize) {
                (Some(xa), Some(xb)) => (xa.rss_bytes as f64, xb.rss_bytes as f64),
                (x, y) => return one_sided(x.is_some(), y.is_some()),
            };
            if xa <= 0.0 {
                return Judged::Skipped("zero RSS in a".into());
            }
            let r = xb / xa;
            let ratio = Interval { estimate: r, lower: r, upper: r, confidence: CONFIDENCE };
            made(xa, xb, 1, 1, ratio, Method::SingleReading)
        }
        // Load metrics go through `compare_load_metric`, over every repeat.
        CompareMetric::Throughput
        | CompareMetric::LoadP50
        | CompareMetric::LoadP99
        | CompareMetric::ErrorRate => Judged::Absent,
    }
}

/// The two-sided normal quantile of a confidence level (0.95 → 1.96), by bisection on erf.
fn z_of(confidence: f64) -> f64 {
    // Abramowitz and Stegun 7.1.26 is accurate to 1.5e-7, plenty for an interval's width.
    let erf = |x: f64| {
        let t = 1.0 / (1.0 + 0.327_591_1 * x);
        let y = ((((1.061_405_429 * t - 1.453_152_027) * t + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t;
        1.0 - y * (-x * x).exp()
    };
    let (mut lo, mut hi) = (0.0f64, 10.0f64);
    for _ in 0..80 {
        let mid = (lo + hi) / 2.0;
        if erf(mid / std::f64::consts::SQRT_2) < confidence {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Wilson's score interval of a proportion x / n.
fn wilson(x: u64, n: u64, z: f64) -> (f64, f64, f64) {
    let (nf, p) = (n as f64, x as f64 / n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / nf;
    let centre = (p + z2 / (2.0 * nf)) / denom;
    let half = z * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom;
    (p, (centre - half).max(0.0), (centre + half).min(1.0))
}

/// Newcombe's hybrid score interval (his method 10) of the difference of two proportions b − a.
fn newcombe_difference(xa: u64, na: u64, xb: u64, nb: u64, confidence: f64) -> Interval {
    let z = z_of(confidence);
    let (pa, la, ua) = wilson(xa, na, z);
    let (pb, lb, ub) = wilson(xb, nb, z);
    let d = pb - pa;
    Interval {
        estimate: d,
        lower: d - ((pb - lb).powi(2) + (ua - pa).powi(2)).sqrt(),
        upper: d + ((ub - pb).powi(2) + (pa - la).powi(2)).sqrt(),
        confidence,
    }
}

/// Judges an error-rate difference against [`ERROR_RATE_TOLERANCE`].
fn judge_difference(d: &Interval) -> Verdict {
    let t = ERROR_RATE_TOLERANCE;
    if !d.is_finite() {
        Verdict::Inconclusive
    } else if d.lower > t {
        Verdict::Slower
    } else if d.upper < -t {
        Verdict::Faster
    } else if d.lower >= -t && d.upper <= t {
        Verdict::Unchanged
    } else {
        Verdict::Inconclusive
    }
}

/// Every repeat's histogram of a load cell, merged.
fn pooled_histogram(rs: &[&Record]) -> Option<hdrhistogram::Histogram<u64>> {
    let mut pooled: Option<hdrhistogram::Histogram<u64>> = None;
    for r in rs {
        let Some(lat) = r.metrics.load.as_ref().and_then(|l| l.latency.as_ref()) else { continue };
        let h = stats::decode_histogram(&lat.histogram).ok()?;
        match pooled.as_mut() {
            Some(p) => p.add(&h).ok()?,
            None => pooled = Some(h),
        }
    }
    pooled.filter(|h| h.len() >= MIN_CI_SAMPLES)
}

/// A load metric of one cell over all its successful repeats in each run.
fn compare_load_metric(
    cell: &str,
    ra: &[&Record],
    rb: &[&Record],
    metric: CompareMetric,
    threshold_pct: f64,
) -> Judged {
    let with_load = |rs: &[&Record]| rs.iter().any(|r| r.metrics.load.is_some());
    match (with_load(ra), with_load(rb)) {
        (false, false) => return Judged::Absent,
        (true, false) => return Judged::Skipped("measured in a only".into()),
        (false, true) => return Judged::Skipped("measured in b only".into()),
        _ => {}
    }
    let made = |a: f64, b: f64, n_a: u64, n_b: u64, ratio: Interval, method: Method| {
        let higher_is_better = metric.higher_is_better();
        let verdict = match method {
            Method::Difference => judge_difference(&ratio),
            _ if higher_is_better => Verdict::judge(&invert(&ratio), threshold_pct),
            _ => Verdict::judge(&ratio, threshold_pct),
        };
        Judged::Compared(MetricComparison {
            cell: cell.to_string(),
            metric,
            unit: metric.unit(),
            a,
            b,
            n_a,
            n_b,
            ratio,
            method,
            higher_is_better,
            verdict,
            within: None,
            runs: None,
        })
    };
    match metric {
        CompareMetric::Throughput => {
            let tps = |rs: &[&Record]| -> Vec<f64> {
                rs.iter().filter_map(|r| Some(r.metrics.load.as_ref()?.throughput_rps)).collect()
            };
            let (ta, tb) = (tps(ra), tps(rb));
            let (ma, mb) = (stats::median(&mut ta.clone()), stats::median(&mut tb.clone()));
            if ma.is_nan() || ma <= 0.0 || !mb.is_finite() {
                return Judged::Skipped("no throughput in a".into());
            }
            let (n_a, n_b) = (ta.len() as u64, tb.len() as u64);
            if n_a >= MIN_CI_SAMPLES && n_b >= MIN_CI_SAMPLES {
                let s = seed(cell, metric.as_str(), "ab");
                if let Some(ratio) = stats::ratio_ci(&tb, &ta, stats::median, RESAMPLES, CONFIDENCE, s) {
                    return made(ma, mb, n_a, n_b, ratio, Method::BootstrapMedianRatio);
                }
            }
            let r = mb / ma;
            made(
                ma,
                mb,
                n_a,
                n_b,
                Interval { estimate: r, lower: r, upper: r, confidence: CONFIDENCE },
                Method::SingleReading,
            )
        }
        CompareMetric::LoadP50 | CompareMetric::LoadP99 => {
            let q = if metric == CompareMetric::LoadP50 { 0.50 } else { 0.99 };
            let (Some(ha), Some(hb)) = (pooled_histogram(ra), pooled_histogram(rb)) else {
                return Judged::Skipped("a histogram is unreadable or holds too few calls".into());
            };
            match quantile_ratio(&ha, &hb, q, cell, metric) {
                Some((a, b, ratio)) => made(a, b, ha.len(), hb.len(), ratio, Method::HistogramQuantileMover),
                None => Judged::Skipped("no positive quantile interval".into()),
            }
        }
        _ => {
            let counts = |rs: &[&Record]| {
                rs.iter()
                    .filter_map(|r| r.metrics.load.as_ref())
                    .fold((0u64, 0u64), |(f, n), l| (f + l.failed, n + l.ok + l.failed))
            };
            let ((fa, na), (fb, nb)) = (counts(ra), counts(rb));
            if na == 0 || nb == 0 {
                return Judged::Skipped("no calls in a run's window".into());
            }
            let d = newcombe_difference(fa, na, fb, nb, CONFIDENCE);
            made(fa as f64 / na as f64, fb as f64 / nb as f64, na, nb, d, Method::Difference)
        }
    }
}

/// The ok runs of a cell (A/A control measurements left out).
fn runs_of<'a>(rs: &'a [Record], id: &str) -> Vec<&'a Record> {
    rs.iter().filter(|r| r.cell.id == id && r.status == Status::Ok && !is_control(r)).collect()
}

/// Whether a record is an A/A control measurement (not one of its cell's runs).
fn is_control(r: &Record) -> bool {
    r.schedule.as_ref().is_some_and(|s| s.control.is_some())
}

/// One run's value of a metric: the median of its samples, a quantile of its histogram (of
/// calls, or of the load's latency), its throughput or its RSS reading.
fn run_value(r: &Record, metric: CompareMetric) -> Option<f64> {
    let median = |m: Option<&crate::record::SampleMetric>| {
        let v: Vec<f64> = m?.samples_ms.iter().copied().filter(|v| v.is_finite()).collect();
        (!v.is_empty()).then(|| stats::median(&mut v.clone()))
    };
    let quantile = |m: Option<&crate::spec::HistogramMetric>, q: f64| {
        let h = stats::decode_histogram(&m?.histogram).ok().filter(|h| !h.is_empty())?;
        Some(h.value_at_quantile(q) as f64 / 1e6)
    };
    let load = r.metrics.load.as_ref();
    match metric {
        CompareMetric::ColdStart => median(r.metrics.cold_start.as_ref()),
        CompareMetric::ToolsList => median(r.metrics.tools_list.as_ref()),
        CompareMetric::CallP50 => quantile(r.metrics.calls.as_ref(), 0.50),
        CompareMetric::CallP95 => quantile(r.metrics.calls.as_ref(), 0.95),
        CompareMetric::CallP99 => quantile(r.metrics.calls.as_ref(), 0.99),
        CompareMetric::RssAfterInitialize => {
            r.metrics.memory.after_initialize.as_ref().map(|m| m.rss_bytes as f64)
        }
        CompareMetric::Throughput => load.map(|l| l.throughput_rps),
        CompareMetric::LoadP50 => quantile(load.and_then(|l| l.latency.as_ref()), 0.50),
        CompareMetric::LoadP99 => quantile(load.and_then(|l| l.latency.as_ref()), 0.99),
        CompareMetric::ErrorRate => None,
    }
}

/// A metric judged again with runs as the unit when both sides have two or more runs of the
/// cell ([`Method::BetweenRuns`]); the first judgement's interval is kept as `within`.
fn between_runs(m: MetricComparison, ra: &[&Record], rb: &[&Record], threshold_pct: f64) -> MetricComparison {
    if m.method == Method::Difference || ra.len() < 2 || rb.len() < 2 {
        return m;
    }
    let values = |rs: &[&Record]| -> Vec<f64> { rs.iter().filter_map(|r| run_value(r, m.metric)).collect() };
    let (va, vb) = (values(ra), values(rb));
    let Some(ratio) = stats::ratio_between_runs(&va, &vb) else { return m };
    let ratio = stats::hull(ratio, Some(m.ratio));
    let verdict = match m.higher_is_better {
        true => Verdict::judge(&invert(&ratio), threshold_pct),
        false => Verdict::judge(&ratio, threshold_pct),
    };
    MetricComparison {
        a: stats::median(&mut va.clone()),
        b: stats::median(&mut vb.clone()),
        n_a: va.len() as u64,
        n_b: vb.len() as u64,
        within: Some(m.ratio),
        runs: Some((va.len() as u32, vb.len() as u32)),
        ratio,
        method: Method::BetweenRuns,
        verdict,
        ..m
    }
}

/// Compares run b against run a: ratios are b / a, so `slower` means b is slower. Cells are
/// matched by id (the latest record of an id stands); see the module docs for the intervals.
pub fn compare(a: &[Record], b: &[Record], threshold_pct: f64) -> Comparison {
    let env = diffenv::diff_runs(a, b);
    let lb = latest_by_cell(b);
    let mut cells = Vec::new();
    let mut failed = Vec::new();
    let mut skipped = Vec::new();
    for ra in latest_by_cell(a) {
        let Some(rb) = lb.iter().find(|r| r.cell.id == ra.cell.id) else { continue };
        if ra.status != Status::Ok || rb.status != Status::Ok {
            failed.push(FailedCell {
                cell: ra.cell.id.clone(),
                status_a: status_text(ra),
                status_b: status_text(rb),
            });
            continue;
        }
        let mut metrics = Vec::new();
        // Load metrics use every successful repeat of the cell in each run.
        let id = ra.cell.id.as_str();
        let (all_a, all_b) = (runs_of(a, id), runs_of(b, id));
        for metric in CompareMetric::ALL {
            let judged = if metric.is_load() {
                compare_load_metric(&ra.cell.id, &all_a, &all_b, metric, threshold_pct)
            } else {
                compare_metric(ra, rb, metric, threshold_pct)
            };
            match judged {
                Judged::Compared(m) => metrics.push(between_runs(m, &all_a, &all_b, threshold_pct)),
                Judged::Skipped(reason) => {
                    skipped.push(SkippedMetric { cell: ra.cell.id.clone(), metric, reason })
                }
                Judged::Absent => {}
            }
        }
        let env_diff =
            env.cells.iter().find(|c| c.cell == ra.cell.id).map(|c| c.diffs.clone()).unwrap_or_default();
        cells.push(CellComparison {
            cell: ra.cell.id.clone(),
            server: ra.cell.server.id.clone(),
            workload: ra.cell.workload.kind().to_string(),
            env_hash_a: ra.env_hash.clone(),
            env_hash_b: rb.env_hash.clone(),
            metrics,
            env_diff,
        });
    }
    Comparison {
        runs_a: env.runs_a,
        runs_b: env.runs_b,
        threshold_pct,
        confidence: CONFIDENCE,
        cells,
        failed,
        only_in_a: env.only_in_a,
        only_in_b: env.only_in_b,
        skipped,
        env_common: env.common,
        hosts: hosts_compared(a, b),
    }
}

/// The first speed fingerprint among a run's records.
fn fingerprint(rs: &[Record]) -> Option<&crate::host::Fingerprint> {
    rs.iter().find_map(|r| r.host_check.as_ref()?.fingerprint.as_deref())
}

/// The two runs' hosts compared by their speed fingerprints, when both have one.
pub fn hosts_compared(a: &[Record], b: &[Record]) -> Option<super::HostsCompared> {
    use crate::host::fingerprint as fp;
    let (fa, fb) = (fingerprint(a)?, fingerprint(b)?);
    let c = fp::compare(fa, fb);
    Some(super::HostsCompared {
        a: fp::summary(fa),
        b: fp::summary(fb),
        line: fp::comparison_line(&c),
        differs: c.differs,
    })
}

/// The metrics that fail a CI gate: flagged slower (or larger) with the interval's lower bound
/// above 1 + `fail_if_slower_pct` / 100, in the sense where above 1 is worse (a throughput drop
/// of more than the percentage fails it: a/b above the limit); and any error rate flagged `more
/// errors` (its difference is beyond [`ERROR_RATE_TOLERANCE`]), whatever the percentage.
pub fn gate_failures(c: &Comparison, fail_if_slower_pct: f64) -> Vec<&MetricComparison> {
    let limit = 1.0 + fail_if_slower_pct / 100.0;
    c.metrics()
        .filter(|m| {
            m.verdict == Verdict::Slower && (m.method == Method::Difference || m.cost_ratio().lower > limit)
        })
        .collect()
}

/// The CI gate of `--fail-if-slower <pct>`: true when it passes, i.e. no metric is flagged slower
/// by more than `fail_if_slower_pct` at its lower bound. Memory counts (larger is worse);
/// failed and unmatched cells do not (the CLI reports them).
pub fn gate(c: &Comparison, fail_if_slower_pct: f64) -> bool {
    gate_failures(c, fail_if_slower_pct).is_empty()
}
