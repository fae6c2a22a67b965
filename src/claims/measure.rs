//! The measured side of a claim: a selector's value in a run's records, with its confidence
//! interval, the number of samples or repeats behind it, its coefficient of variation and the
//! noise flag; and the interval of a ratio of two selectors. Pure: records in, figures out.
//!
//! Where intervals come from:
//! - Runs (records sharing a cell id, `cell.repeat` set): runs are the unit. Each run's statistic,
//!   their median, and the between-run 95 % interval ([`stats::between_runs`], Student t on the
//!   logarithms), never narrower than the within-run interval of the runs pooled (their samples
//!   or histograms together), which is kept beside it. The CV is the runs' spread, and a CV over
//!   [`stats::NOISY_CV`] flags the cell noisy; runs the quiet check flagged are counted.
//! - One run of cold starts or first tools/list: a bootstrap of the statistic over the samples
//!   (at least [`MIN_CI_SAMPLES`]); CV over the samples, flagged as the reports flag it.
//! - One run of calls or an HTTP load's latency: [`stats::histogram_quantile_cis`] for quantiles;
//!   the mean gets mean ± 1.96·sd/√n. Never flagged noisy (the CV is the distribution's shape).
//! - Single readings (RSS, lines of code, throughput, error rate, CPU): a zero-width interval.
//! - The share of memory released by a soak with connect/disconnect cycles: one share per
//!   disconnection, their mean and the Student t interval between them.
//!
//! Ratios: two cells with two runs or more each get Welch's t on the logarithms of their runs'
//! values ([`stats::ratio_between_runs`]), never narrower than the ratio of their within-run
//! intervals; two sample sets of one run each are resampled independently
//! ([`stats::ratio_ci`]); otherwise the two intervals are combined on the log scale by MOVER,
//! as `report::compare` does for histogram quantiles.

use serde::Serialize;

use crate::record::{Record, Status};
use crate::report::{CONFIDENCE, MIN_CI_SAMPLES, RESAMPLES, SEED};
use crate::spec::HistogramMetric;
use crate::stats::{self, Interval};

use super::parse::{cell_matches, Aggregate, Selector};

/// How a figure's interval was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// Median across runs of the cell, with the between-run interval.
    Repeats,
    /// Bootstrap over one run's samples.
    Samples,
    /// Bootstrap of a histogram quantile, or the normal interval of its mean.
    Histogram,
    /// One reading, no interval.
    Reading,
    /// Several cells combined (`aggregate`).
    Aggregate,
    /// A count that does not vary between runs (lines of code): exact, no interval needed.
    Exact,
    /// The mean of a soak's disconnections (its load's and its connect/disconnect cycles'),
    /// with the t interval between them.
    Cycles,
}

/// A measured figure, in the metric's own unit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub estimate: f64,
    /// None for a single reading.
    pub ci: Option<Interval>,
    /// Samples (or calls) behind it.
    pub n: u64,
    /// Runs behind it (1 for a single run).
    pub repeats: u32,
    /// With two runs or more: the within-run interval of the runs pooled, shown beside the
    /// between-run one (which is never narrower).
    pub within: Option<Interval>,
    /// Runs measured while the quiet check found the host loud.
    pub noisy_runs: u32,
    pub cv: Option<f64>,
    pub noisy: bool,
    pub basis: Basis,
    /// The cell ids it came from.
    pub cells: Vec<String>,
    /// Why no verdict may rest on this figure, when none may: a single reading, or an interval
    /// from within one run (between-run spread unknown). None when it has a between-run interval
    /// (repeats, or samples that are each a fresh server process) or is exact.
    pub undecidable: Option<String>,
    /// What the ratio bootstrap resamples: per-repeat values or raw samples.
    #[serde(skip)]
    pub resample: Vec<f64>,
}

impl Measured {
    /// The interval, a zero-width one for a reading.
    pub fn interval(&self) -> Interval {
        self.ci.unwrap_or(Interval {
            estimate: self.estimate,
            lower: self.estimate,
            upper: self.estimate,
            confidence: CONFIDENCE,
        })
    }
}

/// A figure, or why there is none.
pub type Measure = Result<Measured, String>;

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn seed(parts: &str) -> u64 {
    SEED ^ fnv1a(format!("verify\0{parts}").as_bytes())
}

fn quantile(s: &mut [f64], q: f64) -> f64 {
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_unstable_by(f64::total_cmp);
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[rank - 1]
}

fn stat_fn(stat: &str) -> fn(&mut [f64]) -> f64 {
    match stat {
        "mean" => |s| stats::mean(s).unwrap_or(f64::NAN),
        "min" => |s| s.iter().copied().fold(f64::INFINITY, f64::min),
        "max" => |s| s.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        "p95" => |s| quantile(s, 0.95),
        "p99" => |s| quantile(s, 0.99),
        _ => stats::median,
    }
}

/// A single reading: no interval, no spread.
fn reading(cell: &str, v: Option<f64>, what: &str) -> Measure {
    let v = v.ok_or_else(|| format!("{cell} recorded no {what}"))?;
    Ok(Measured {
        estimate: v,
        ci: None,
        n: 1,
        repeats: 1,
        within: None,
        noisy_runs: 0,
        cv: None,
        noisy: false,
        basis: Basis::Reading,
        cells: vec![cell.to_string()],
        undecidable: Some(format!("{cell}'s {what} is one reading with no interval")),
        resample: vec![v],
    })
}

/// One record's figure for a selector (no repeats, no aggregation).
fn from_record(r: &Record, sel: &Selector) -> Measure {
    let m = &r.metrics;
    let cell = r.cell.id.clone();
    let reading = |v: Option<f64>, what: &str| reading(&cell, v, what);
    let load = m.load.as_ref();
    let under = m.memory.under_load.as_ref();
    match sel.metric.as_str() {
        "cold_start" | "tools_list" => {
            let sm = if sel.metric == "cold_start" { &m.cold_start } else { &m.tools_list };
            let samples = sm.as_ref().map(|s| s.samples_ms.clone()).unwrap_or_default();
            from_samples(&cell, samples, sel)
        }
        "latency" if sel.step.is_some() => {
            let step = sel.step.as_deref().expect("checked");
            let load = load.ok_or_else(|| format!("{cell} recorded no load"))?;
            let hm = load.steps.get(step).ok_or_else(|| {
                let known: Vec<&str> = load.steps.keys().map(String::as_str).collect();
                format!("{cell} recorded no step {step:?} (its steps: {})", known.join(", "))
            })?;
            from_histogram(&cell, hm, sel)
        }
        "calls" | "latency" => {
            let hm =
                if sel.metric == "calls" { m.calls.as_ref() } else { load.and_then(|l| l.latency.as_ref()) };
            let hm = hm.ok_or_else(|| format!("{cell} recorded no {} histogram", sel.metric))?;
            from_histogram(&cell, hm, sel)
        }
        "rss_after_initialize" => {
            reading(m.memory.after_initialize.as_ref().map(|t| t.rss_bytes as f64), "RSS after initialize")
        }
        "loc" => reading(r.cell.server.source.as_ref().map(|s| s.loc as f64), "server source (lines of code)")
            .map(|m| Measured { basis: Basis::Exact, undecidable: None, ..m }),
        "throughput" => reading(load.map(|l| l.throughput_rps), "load throughput"),
        "http_rps" => reading(load.and_then(|l| l.http_rps), "HTTP requests per second (every request)"),
        "error_rate" => reading(load.map(|l| l.error_rate), "load error rate"),
        "server_cpu" => reading(load.and_then(|l| l.server_cpu_cores), "server CPU under load"),
        "rss_idle" => reading(
            under.and_then(|u| u.idle_before.as_ref()).map(|t| t.rss_bytes as f64),
            "idle RSS before load",
        ),
        "rss_peak" => reading(
            under.and_then(|u| u.peak_during.as_ref()).map(|t| t.rss_bytes as f64),
            "peak RSS under load",
        ),
        "rss_after" => match under.and_then(|u| u.after_level.as_ref()) {
            Some(l) => reading(Some(l.estimate as f64), "RSS level after the load"),
            None => Err(format!(
                "{cell} recorded no RSS level after an idle phase (its record predates the idle phase, or idle_after was 0); a reading taken just after the load does not show memory given back"
            )),
        },
        "rss_released" => released(&cell, under, load.and_then(|l| l.soak.as_ref())),
        "cgroup_peak" => {
            reading(under.and_then(|u| u.cgroup_peak_bytes).map(|b| b as f64), "cgroup memory peak")
        }
        "rss_slope" => Err(format!("{cell}'s RSS slope is judged by a soak_slope claim, not as a figure")),
        other => Err(format!("unknown metric {other}")),
    }
}

/// The share of the load's memory growth the server gave back by the end of the idle phase:
/// (peak − level after) / (peak − idle before), from one record; a load that grew the tree by
/// less than 4 MiB and 5 % has nothing to release, and says so. A soak's idle before is its
/// level at the end of the idle phase before the load (a level, as the one after is), other
/// loads' the reading after initialize. A soak with connect/disconnect cycles gives one share
/// per disconnection (its load's and each cycle's, all against the idle level before any
/// client): their mean, with the Student t interval between them (see [`between_cycles`]).
fn released(
    cell: &str,
    under: Option<&crate::spec::LoadMemory>,
    soak: Option<&crate::spec::SoakFigures>,
) -> Measure {
    let u = under.ok_or_else(|| format!("{cell} recorded no memory under load"))?;
    let idle = match soak.and_then(|s| s.idle_before) {
        Some(level) => Some(level.estimate),
        None => u.idle_before.as_ref().map(|t| t.rss_bytes),
    };
    let (Some(idle), Some(peak)) = (idle, u.peak_during.as_ref()) else {
        return Err(format!("{cell} recorded no idle or peak RSS"));
    };
    let Some(after) = u.after_level.as_ref() else {
        return Err(format!(
            "{cell} recorded no RSS level after an idle phase (its record predates the idle phase, or idle_after was 0)"
        ));
    };
    let first = share_released(cell, idle, peak.rss_bytes, after.estimate, "load");
    let cycles = soak.map_or(&[][..], |s| &s.cycles[..]);
    if cycles.is_empty() {
        return reading(cell, Some(first?), "share of the load's growth released");
    }
    let mut shares = Vec::new();
    let mut skipped = Vec::new();
    let all = std::iter::once(first).chain(cycles.iter().enumerate().map(|(k, c)| {
        match (c.peak_rss_bytes, &c.after) {
            (Some(peak), Some(after)) => {
                share_released(cell, idle, peak, after.estimate, &format!("cycle {}", k + 1))
            }
            _ => Err(format!("{cell}'s cycle {} recorded no peak or level after", k + 1)),
        }
    }));
    for s in all {
        match s {
            Ok(v) => shares.push(v),
            Err(e) => skipped.push(e),
        }
    }
    between_cycles(cell, &shares, &skipped)
}

/// One disconnection's share released: (peak − after) / (peak − idle), or why there is nothing
/// to release (a growth under 4 MiB and 5 % of the idle level).
fn share_released(cell: &str, idle: u64, peak: u64, after: u64, what: &str) -> Result<f64, String> {
    let (idle, peak, after) = (idle as f64, peak as f64, after as f64);
    let growth = peak - idle;
    if growth < (4.0 * 1_048_576.0f64).max(0.05 * idle) {
        return Err(format!(
            "{cell}'s {what} grew the server tree by only {:.1} MiB (idle {:.1} MiB, peak {:.1} MiB): there is nothing to release",
            growth / 1_048_576.0,
            idle / 1_048_576.0,
            peak / 1_048_576.0
        ));
    }
    Ok((peak - after) / growth)
}

/// The shares released at a soak's disconnections (its load's and its cycles'): their mean and
/// the 95 % Student t interval of it (shares near 0 or 1 are not log-normal, so not
/// `stats::between_runs`). The disconnections are of one server process, so the interval says
/// how that process gives memory back, not how another run's would. Fewer than two shares is a
/// reading with no interval; shares left out (nothing to release) are named.
fn between_cycles(cell: &str, shares: &[f64], skipped: &[String]) -> Measure {
    let left_out = if skipped.is_empty() {
        String::new()
    } else {
        format!(" ({} left out: {})", skipped.len(), skipped.join("; "))
    };
    match shares.len() {
        0 => return Err(format!("{cell} has no disconnection with memory to release{left_out}")),
        1 => {
            return reading(cell, Some(shares[0]), "share of the load's growth released").map(|m| Measured {
                undecidable: Some(format!("{cell}'s share released is one disconnection's{left_out}")),
                ..m
            })
        }
        _ => {}
    }
    let i = stats::mean_interval(shares)
        .ok_or_else(|| format!("{cell}'s shares released are not all finite: {shares:?}"))?;
    Ok(Measured {
        estimate: i.estimate,
        ci: Some(i),
        n: shares.len() as u64,
        repeats: 1,
        within: None,
        noisy_runs: 0,
        cv: None,
        noisy: false,
        basis: Basis::Cycles,
        cells: vec![cell.to_string()],
        undecidable: None,
        resample: shares.to_vec(),
    })
}

/// A statistic of one run's cold-start or tools/list samples, bootstrapped when there are enough.
fn from_samples(cell: &str, samples: Vec<f64>, sel: &Selector) -> Measure {
    if samples.is_empty() {
        return Err(format!("{cell} recorded no {} samples", sel.metric));
    }
    if sel.stat == "first" {
        return reading(cell, Some(samples[0]), "first sample");
    }
    let (samples, stat) =
        if sel.stat == "rest_p50" { (samples[1..].to_vec(), "p50") } else { (samples, sel.stat.as_str()) };
    let f = stat_fn(stat);
    let estimate = f(&mut samples.clone());
    let n = samples.len() as u64;
    let ci = (n >= MIN_CI_SAMPLES).then(|| {
        stats::bootstrap_ci(&samples, f, RESAMPLES, CONFIDENCE, seed(&format!("{cell}\0{}", sel.text())))
    });
    let cv = stats::coefficient_of_variation(&samples);
    Ok(Measured {
        estimate,
        ci,
        n,
        repeats: 1,
        within: None,
        noisy_runs: 0,
        cv,
        noisy: stats::is_noisy(cv),
        basis: if ci.is_some() { Basis::Samples } else { Basis::Reading },
        cells: vec![cell.to_string()],
        undecidable: ci.is_none().then(|| {
            format!(
                "{cell} has {n} {} sample(s), fewer than the {MIN_CI_SAMPLES} an interval needs",
                sel.metric
            )
        }),
        resample: samples,
    })
}

/// A statistic of one run's calls or load latency histogram: quantiles bootstrapped from the
/// histogram, the mean (or total) with its normal interval, the max as a reading.
fn from_histogram(cell: &str, hm: &HistogramMetric, sel: &Selector) -> Measure {
    let h = stats::decode_histogram(&hm.histogram).map_err(|e| format!("{cell}: {e}"))?;
    if h.is_empty() {
        return Err(format!("{cell}: the {} histogram is empty", sel.metric));
    }
    let n = h.len();
    let cv = stats::histogram_cv(&h);
    let (estimate, ci) = match sel.stat.as_str() {
        "max" => (hm.summary.max_ms, None),
        "min" => (h.min() as f64 / 1e6, None),
        "mean" | "total" => {
            let mean = h.mean() / 1e6;
            let half = 1.96 * h.stdev() / 1e6 / (n as f64).sqrt();
            let k = if sel.stat == "total" { n as f64 / 1000.0 } else { 1.0 };
            let i = Interval {
                estimate: mean * k,
                lower: (mean - half) * k,
                upper: (mean + half) * k,
                confidence: CONFIDENCE,
            };
            (i.estimate, Some(i))
        }
        q => {
            let q = match q {
                "p90" => 0.90,
                "p95" => 0.95,
                "p99" => 0.99,
                _ => 0.50,
            };
            let cis = stats::histogram_quantile_cis(
                &h,
                &[q],
                RESAMPLES,
                CONFIDENCE,
                seed(&format!("{cell}\0{}", sel.text())),
            );
            let i = cis[0];
            (i.estimate, Some(i))
        }
    };
    Ok(Measured {
        estimate,
        ci,
        n,
        repeats: 1,
        within: None,
        noisy_runs: 0,
        cv,
        noisy: false,
        basis: if ci.is_some() { Basis::Histogram } else { Basis::Reading },
        cells: vec![cell.to_string()],
        undecidable: Some(if ci.is_some() {
            format!("{cell} ran once: its interval is within one run, and the spread between runs is unknown (run the cell with repeats)")
        } else {
            format!("{cell}'s {} {} is one reading with no interval", sel.metric, sel.stat)
        }),
        resample: vec![estimate],
    })
}

/// The records of one cell id: the latest of each repeat index of each run (the runs judged
/// together each count).
pub(super) fn repeats_of<'a>(records: &'a [Record], id: &str) -> Vec<&'a Record> {
    let mut by_index: std::collections::BTreeMap<(&str, u32), &Record> = Default::default();
    for r in records.iter().filter(|r| r.cell.id == id) {
        by_index.insert((r.run_id.as_str(), r.cell.repeat.map_or(0, |p| p.index)), r);
    }
    by_index.into_values().collect()
}

/// One cell's figure: its single run, or the median of its repeats.
fn from_cell(records: &[Record], id: &str, sel: &Selector) -> Measure {
    let runs = repeats_of(records, id);
    if runs.is_empty() {
        return Err(format!("no record of cell {id} in the run"));
    }
    // Lines of code are the source's, known before anything ran: a failed cell has them too
    // (e.g. a source's program that does not start on the version it names).
    if sel.metric == "loc" {
        return from_record(runs[0], sel);
    }
    let ok: Vec<&Record> = runs.iter().copied().filter(|r| r.status == Status::Ok).collect();
    if ok.is_empty() {
        let r = runs[0];
        let why = r.failure.as_ref().map_or("failed".to_string(), |f| f.to_string());
        return Err(format!("cell {id} failed: {}", why.lines().next().unwrap_or("")));
    }
    if ok.len() == 1 {
        // A soak's disconnections are of one server process: one run's spread, not between runs.
        return from_record(ok[0], sel).map(|m| match m.basis {
            Basis::Cycles if m.undecidable.is_none() => Measured {
                undecidable: Some(format!(
                    "{id} ran once: its {} disconnections are of one server process, and the spread between runs is unknown (judge two or more runs)",
                    m.n
                )),
                ..m
            },
            _ => m,
        });
    }
    let figures: Vec<Measured> = ok.iter().map(|r| from_record(r, sel)).collect::<Result<_, _>>()?;
    let values: Vec<f64> = figures.iter().map(|f| f.estimate).collect();
    let estimate = stats::median(&mut values.clone());
    // The runs pooled give the within-run interval; a reading has none.
    let within = from_record(&pooled(&ok), sel).ok().and_then(|m| m.ci);
    let ci = match stats::between_runs(&values) {
        Some(between) => stats::hull(between, within),
        // A value that is zero or negative has no log-scale interval: the runs' range.
        None => {
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            stats::hull(Interval { estimate, lower: lo, upper: hi, confidence: CONFIDENCE }, within)
        }
    };
    let cv = stats::coefficient_of_variation(&values);
    Ok(Measured {
        estimate,
        ci: Some(ci),
        n: figures.iter().map(|f| f.n).sum(),
        repeats: values.len() as u32,
        within,
        noisy_runs: ok.iter().filter(|r| r.on_noisy_host()).count() as u32,
        cv,
        noisy: stats::is_noisy(cv),
        basis: Basis::Repeats,
        cells: vec![id.to_string()],
        undecidable: None,
        resample: values,
    })
}

/// The runs of one cell as one record: their cold-start and tools/list samples together and
/// their histograms added, so the within-run interval sees every run's samples at once.
fn pooled(runs: &[&Record]) -> Record {
    let mut out = runs[0].clone();
    let m = &mut out.metrics;
    for r in &runs[1..] {
        let o = &r.metrics;
        for (to, from) in [(&mut m.cold_start, &o.cold_start), (&mut m.tools_list, &o.tools_list)] {
            if let (Some(to), Some(from)) = (to.as_mut(), from.as_ref()) {
                to.samples_ms.extend_from_slice(&from.samples_ms);
            }
        }
        let from_load = o.load.as_ref().and_then(|l| l.latency.as_ref());
        let to_load = m.load.as_mut().and_then(|l| l.latency.as_mut());
        for (to, from) in [(m.calls.as_mut(), o.calls.as_ref()), (to_load, from_load)] {
            if let (Some(to), Some(from)) = (to, from) {
                if let Some(h) = stats::merge_histograms([to.histogram.as_str(), from.histogram.as_str()]) {
                    to.histogram = stats::encode_histogram(&h);
                }
            }
        }
    }
    out
}

/// The cell ids of the run a selector matches, in record order.
pub fn matching_cells(records: &[Record], pattern: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    // Each distinct cell id is matched once, however many records (repeats) it has.
    let mut seen = std::collections::HashSet::new();
    for r in records {
        // The pattern first: only the cells it matches are remembered.
        if cell_matches(pattern, &r.cell.id) && seen.insert(r.cell.id.as_str()) {
            ids.push(r.cell.id.clone());
        }
    }
    ids
}

/// A selector's figure in a run's records.
pub fn measure(records: &[Record], sel: &Selector) -> Measure {
    let ids = matching_cells(records, &sel.cell);
    match (ids.len(), sel.aggregate) {
        (0, _) => Err(format!("no record of cell {} in the run", sel.cell)),
        (1, _) | (_, None) => from_cell(records, &ids[0], sel),
        (_, Some(agg)) => {
            let parts: Vec<Measured> =
                ids.iter().map(|id| from_cell(records, id, sel)).collect::<Result<_, _>>()?;
            let combine = |xs: Vec<f64>| -> f64 {
                let mut xs = xs;
                match agg {
                    Aggregate::Mean => stats::mean(&xs).unwrap_or(f64::NAN),
                    Aggregate::Median => stats::median(&mut xs),
                    Aggregate::Min => xs.iter().copied().fold(f64::INFINITY, f64::min),
                    Aggregate::Max => xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                }
            };
            // Bounds combined as the estimates are: exact for min and max of comonotone bounds,
            // and for a mean it assumes the cells' errors move together (wider, not narrower).
            let ivs: Vec<Interval> = parts.iter().map(Measured::interval).collect();
            let estimate = combine(parts.iter().map(|p| p.estimate).collect());
            let any_ci = parts.iter().any(|p| p.ci.is_some());
            let ci = any_ci.then(|| Interval {
                estimate,
                lower: combine(ivs.iter().map(|i| i.lower).collect()),
                upper: combine(ivs.iter().map(|i| i.upper).collect()),
                confidence: CONFIDENCE,
            });
            Ok(Measured {
                estimate,
                ci,
                n: parts.iter().map(|p| p.n).sum(),
                repeats: parts.iter().map(|p| p.repeats).min().unwrap_or(1),
                within: None,
                noisy_runs: parts.iter().map(|p| p.noisy_runs).sum(),
                cv: parts.iter().filter_map(|p| p.cv).reduce(f64::max),
                noisy: parts.iter().any(|p| p.noisy),
                basis: Basis::Aggregate,
                cells: ids,
                undecidable: {
                    let why: Vec<String> = parts.iter().filter_map(|p| p.undecidable.clone()).collect();
                    (!why.is_empty()).then(|| why.join("; "))
                },
                resample: vec![estimate],
            })
        }
    }
}

/// How a ratio's interval was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatioMethod {
    /// Welch's t on the logarithms of two cells' runs.
    BetweenRuns,
    /// Two sample sets resampled independently.
    IndependentSamples,
    /// The two intervals combined on the log scale (MOVER).
    Mover,
    /// Two readings: the ratio itself.
    Readings,
}

/// The interval of `num / den`, and how it was made. `None` when the denominator is zero.
pub fn ratio(num: &Measured, den: &Measured, stat: &str, tag: &str) -> Option<(Interval, RatioMethod)> {
    if den.estimate <= 0.0 || num.estimate <= 0.0 {
        return None;
    }
    let s = seed(&format!("{tag}\0ratio"));
    if num.basis == Basis::Repeats && den.basis == Basis::Repeats {
        if let Some(between) = stats::ratio_between_runs(&den.resample, &num.resample) {
            let within = match (num.within, den.within) {
                (Some(n), Some(d)) if n.lower > 0.0 && d.lower > 0.0 => Some(stats::mover_ratio(&d, &n)),
                _ => None,
            };
            return Some((stats::hull(between, within), RatioMethod::BetweenRuns));
        }
    }
    if num.basis == Basis::Samples && den.basis == Basis::Samples {
        let stat = if stat == "rest_p50" { "p50" } else { stat };
        let i = stats::ratio_ci(&num.resample, &den.resample, stat_fn(stat), RESAMPLES, CONFIDENCE, s)?;
        return Some((i, RatioMethod::IndependentSamples));
    }
    let (a, b) = (den.interval(), num.interval());
    if num.ci.is_none() && den.ci.is_none() {
        let r = num.estimate / den.estimate;
        return Some((
            Interval { estimate: r, lower: r, upper: r, confidence: CONFIDENCE },
            RatioMethod::Readings,
        ));
    }
    if a.lower <= 0.0 || b.lower <= 0.0 {
        let r = num.estimate / den.estimate;
        return Some((
            Interval { estimate: r, lower: 0.0, upper: f64::INFINITY, confidence: CONFIDENCE },
            RatioMethod::Mover,
        ));
    }
    Some((stats::mover_ratio(&a, &b), RatioMethod::Mover))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;
    use crate::spec::Repeat;

    fn sel(cell: &str, metric: &str, stat: &str) -> Selector {
        Selector { cell: cell.into(), metric: metric.into(), stat: stat.into(), aggregate: None, step: None }
    }

    #[test]
    fn samples_get_bootstrap_intervals_and_repeats_pool() {
        let mut r = sample_record("a");
        r.metrics.cold_start.as_mut().unwrap().samples_ms = vec![10.0, 11.0, 9.0, 10.5, 9.5];
        let m = measure(&[r.clone()], &sel("a/cold_start", "cold_start", "p50")).unwrap();
        assert_eq!((m.estimate, m.basis, m.n), (10.0, Basis::Samples, 5));
        assert!(m.ci.unwrap().contains(10.0) && !m.noisy);
        let first = measure(&[r.clone()], &sel("a/cold_start", "cold_start", "first")).unwrap();
        assert_eq!((first.estimate, first.basis), (10.0, Basis::Reading));
        // Three repeats: the median of their medians, an interval across repeats.
        let recs: Vec<Record> = [10.0, 20.0, 12.0]
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut x = r.clone();
                x.metrics.cold_start.as_mut().unwrap().samples_ms = vec![*v; 3];
                x.cell.repeat = Some(Repeat { index: i as u32, of: 3, fresh_container: true });
                x
            })
            .collect();
        let m = measure(&recs, &sel("a/cold_start", "cold_start", "p50")).unwrap();
        assert_eq!((m.estimate, m.repeats, m.basis), (12.0, 3, Basis::Repeats));
        assert!(m.noisy, "{m:?}");
        // Runs are the unit: the between-run interval holds every run, and the pooled within-run
        // interval (nine samples) is kept beside it, narrower.
        let (ci, within) = (m.ci.unwrap(), m.within.unwrap());
        assert!(ci.lower <= 10.0 && ci.upper >= 20.0, "{ci:?}");
        assert!(within.lower >= ci.lower && within.upper <= ci.upper, "{within:?} {ci:?}");
        assert_eq!(m.noisy_runs, 0);
        // Paired ratio of repeats: 2x every time.
        let doubled: Vec<Record> = recs
            .iter()
            .map(|x| {
                let mut y = x.clone();
                y.cell.id = "b/cold_start".into();
                for s in &mut y.metrics.cold_start.as_mut().unwrap().samples_ms {
                    *s *= 2.0;
                }
                y
            })
            .collect();
        let all: Vec<Record> = recs.iter().chain(&doubled).cloned().collect();
        let b = measure(&all, &sel("b/cold_start", "cold_start", "p50")).unwrap();
        let a = measure(&all, &sel("a/cold_start", "cold_start", "p50")).unwrap();
        let (i, how) = ratio(&b, &a, "p50", "t").unwrap();
        // Welch's t on the logarithms: the runs' geometric means are exactly 2× apart, and the
        // interval around it is as wide as three unpaired runs a side allow.
        assert_eq!(how, RatioMethod::BetweenRuns);
        assert!((i.estimate - 2.0).abs() < 1e-9 && i.lower < 2.0 && i.upper > 2.0, "{i:?}");
    }

    #[test]
    fn memory_released_is_read_from_the_idle_phase_only() {
        use crate::spec::{LoadMemory, MemoryLevel, TreeMemory};
        let mib = |m: u64| TreeMemory { rss_bytes: m << 20, hwm_bytes: m << 20, processes: 1 };
        let mut u = LoadMemory {
            idle_before: Some(mib(40)),
            peak_during: Some(mib(90)),
            after: Some(mib(90)),
            ..Default::default()
        };
        // Without an idle phase there is no level after the load: not measured, not "after = peak".
        assert!(released("c", Some(&u), None).unwrap_err().contains("no RSS level after an idle phase"));
        let level = |m: u64| MemoryLevel {
            estimate: m << 20,
            lower: m << 20,
            upper: m << 20,
            n: 20,
            from_ms: 25_000,
            to_ms: 30_000,
        };
        u.after_level = Some(level(50));
        let m = released("c", Some(&u), None).unwrap();
        assert!((m.estimate - 0.8).abs() < 1e-9, "{m:?}");
        // A soak's level before the load (after a minute idle) is the idle, not the reading
        // after initialize: (90 - 50) / (90 - 30).
        let soak = crate::spec::SoakFigures { idle_before: Some(level(30)), ..Default::default() };
        let m = released("c", Some(&u), Some(&soak)).unwrap();
        assert!((m.estimate - 40.0 / 60.0).abs() < 1e-9, "{m:?}");
        u.after_level = Some(level(90));
        assert_eq!(released("c", Some(&u), None).unwrap().estimate, 0.0);
        // A load that hardly grew the tree has nothing to release.
        u.peak_during = Some(mib(41));
        assert!(released("c", Some(&u), None).unwrap_err().contains("nothing to release"));
    }

    #[test]
    fn missing_and_failed_cells_say_why() {
        let mut r = sample_record("a");
        assert!(measure(&[r.clone()], &sel("z/cold_start", "cold_start", "p50"))
            .unwrap_err()
            .contains("no record"));
        r.status = Status::Failed;
        r.failure = Some(crate::spec::Failure::new(crate::spec::FailureReason::Crash, "boom"));
        assert!(measure(&[r], &sel("a/cold_start", "cold_start", "p50")).unwrap_err().contains("crash"));
    }
}
