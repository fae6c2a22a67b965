//! Statistics without I/O: latency histograms (HdrHistogram, nanoseconds), their standard V2
//! compressed encoding, percentile summaries in milliseconds, medians of small samples, and
//! seeded bootstrap confidence intervals, coefficients of variation and the noise flag; `runs`:
//! between-run intervals (runs as the unit) and the seeded shuffle of a run's order; `slope`:
//! Theil–Sen slopes with an interval that respects autocorrelation (soaks). Nothing
//! here reads a clock or a random source: the same inputs and seed give the same intervals.

mod runs;
pub mod slope;
pub use runs::{between_runs, hull, mean_interval, ratio_between_runs, seeded_shuffle, t_975};
pub use slope::{theil_sen, Slope};

use std::time::Duration;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies are recorded in nanoseconds, from 1 ns to 10 minutes, with 3 significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("static bounds are valid")
}

/// Records a latency, saturating at the histogram's ceiling rather than losing the sample.
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record(d.as_nanos().min(u128::from(u64::MAX)) as u64);
}

/// The standard V2 deflate encoding, base64: readable by other HdrHistogram tools.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut buf).expect("serialising into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("histogram is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram is not a V2 HdrHistogram: {0:?}")]
    Hdr(hdrhistogram::serialization::DeserializeError),
}

pub fn decode_histogram(s: &str) -> Result<Histogram<u64>, DecodeError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(s)?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).map_err(DecodeError::Hdr)
}

/// Several runs' stored histograms added into one (those that do not decode, or do not fit,
/// are left out); None when none decodes.
pub fn merge_histograms<'a>(encoded: impl IntoIterator<Item = &'a str>) -> Option<Histogram<u64>> {
    let mut merged: Option<Histogram<u64>> = None;
    for h in encoded.into_iter().filter_map(|e| decode_histogram(e).ok()) {
        match &mut merged {
            Some(m) => {
                let _ = m.add(&h);
            }
            None => merged = Some(h),
        }
    }
    merged
}

/// Summary of a latency distribution, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Summarises a histogram (values in ns). `None` when it holds nothing.
///
/// The percentile rule is the hdrhistogram crate's `value_at_quantile`, and every p50/p90/p95/p99
/// of a histogram in a record follows it: of the n recorded values in ascending order, take the
/// one of rank k = max(1, ⌈q·n⌉) (nearest rank, no interpolation: with 10 values p50 is the 5th
/// and p99 the 10th), then report the highest value equivalent to it, the top of its bucket, at
/// most 1/1024 (under 0.1 %) above the value recorded with 3 significant digits. `min_ms` is the
/// lowest value equivalent to the smallest, `max_ms` the highest equivalent to the largest, and
/// `mean_ms` weighs each bucket's middle by its count. HdrHistogram's current Java
/// `getValueAtPercentile` takes the same rank; its older releases and the Python port (`hdrh`,
/// `get_value_at_percentile`) round q·n half up instead, so with 51 to 99 values their p99 is the
/// second largest where this one is the largest. `stats::tests::the_percentile_rule_is_pinned`
/// holds the rule.
pub fn summarize(h: &Histogram<u64>) -> Option<LatencySummary> {
    if h.is_empty() {
        return None;
    }
    Some(LatencySummary {
        count: h.len(),
        min_ms: ms(h.min()),
        p50_ms: ms(h.value_at_quantile(0.50)),
        p90_ms: ms(h.value_at_quantile(0.90)),
        p95_ms: ms(h.value_at_quantile(0.95)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        max_ms: ms(h.max()),
        mean_ms: h.mean() / 1e6,
    })
}

/// Summarises raw samples (ns) exactly: p90, p95 and p99 by nearest rank (the sample of rank
/// max(1, ⌈q·n⌉) in ascending order, as in [`summarize`] but without buckets), p50 the median
/// (the mean of the middle two for an even count), min, max and mean of the samples themselves.
pub fn summarize_samples(samples_ns: &[u64]) -> Option<LatencySummary> {
    if samples_ns.is_empty() {
        return None;
    }
    let mut s = samples_ns.to_vec();
    s.sort_unstable();
    let rank = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
    Some(LatencySummary {
        count: s.len() as u64,
        min_ms: ms(s[0]),
        p50_ms: ms(median_sorted(&s)),
        p90_ms: ms(rank(0.90)),
        p95_ms: ms(rank(0.95)),
        p99_ms: ms(rank(0.99)),
        max_ms: ms(s[s.len() - 1]),
        mean_ms: s.iter().map(|&v| v as f64).sum::<f64>() / s.len() as f64 / 1e6,
    })
}

/// The median of sorted samples (the mean of the middle two for an even count).
fn median_sorted(s: &[u64]) -> u64 {
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2
    }
}

// ---------------------------------------------------------------------------------------------
// Confidence intervals and noise.

/// A point estimate with a confidence interval around it, in the unit of the samples.
///
/// Empty input gives NaN everywhere (see [`Interval::is_finite`]); renderers check before use.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The statistic over the original samples.
    pub estimate: f64,
    pub lower: f64,
    pub upper: f64,
    /// The nominal coverage, e.g. 0.95.
    pub confidence: f64,
}

impl Interval {
    fn nan(confidence: f64) -> Interval {
        Interval { estimate: f64::NAN, lower: f64::NAN, upper: f64::NAN, confidence }
    }

    pub fn width(&self) -> f64 {
        self.upper - self.lower
    }

    pub fn contains(&self, x: f64) -> bool {
        self.lower <= x && x <= self.upper
    }

    /// False for the NaN interval of an empty sample (or an infinite ratio).
    pub fn is_finite(&self) -> bool {
        self.estimate.is_finite() && self.lower.is_finite() && self.upper.is_finite()
    }
}

/// A coefficient of variation above this marks a metric as noisy (10%).
pub const NOISY_CV: f64 = 0.10;

/// The noise flag: true when the coefficient of variation is known and above [`NOISY_CV`].
pub fn is_noisy(cv: Option<f64>) -> bool {
    cv.is_some_and(|c| c > NOISY_CV)
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fast PRNG whose whole state is one word, so a
/// bootstrap is a pure function of its seed. Not for anything that needs unpredictability.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` by multiply-shift (Lemire). The bias is at most n / 2^64: nothing a
    /// bootstrap of fewer than 2^40 samples could see.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// The q-quantile of sorted values with linear interpolation between order statistics
/// (Hyndman and Fan's type 7, the default of R and NumPy).
fn quantile_sorted(s: &[f64], q: f64) -> f64 {
    match s.len() {
        0 => f64::NAN,
        1 => s[0],
        n => {
            let h = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            s[lo] + (h - lo as f64) * (s[hi] - s[lo])
        }
    }
}

/// The percentile-method interval from bootstrap replicates of a statistic.
fn percentile_interval(estimate: f64, mut replicates: Vec<f64>, confidence: f64) -> Interval {
    if replicates.is_empty() {
        return Interval { estimate, lower: estimate, upper: estimate, confidence };
    }
    replicates.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    Interval {
        estimate,
        lower: quantile_sorted(&replicates, tail),
        upper: quantile_sorted(&replicates, 1.0 - tail),
        confidence,
    }
}

fn check_confidence(confidence: f64) -> f64 {
    debug_assert!(confidence > 0.0 && confidence < 1.0, "confidence {confidence} is not in (0, 1)");
    confidence.clamp(f64::EPSILON, 1.0 - f64::EPSILON)
}

/// A bootstrap confidence interval of `statistic` over `samples`, by the percentile method:
/// `resamples` resamples with replacement, each of the original size, drawn by a PRNG seeded
/// with `seed` (the same call gives the same interval, on any machine). `statistic` may reorder
/// the slice it is given (a median sorts or selects in place). `confidence` is in (0, 1), e.g.
/// 0.95. An empty sample gives the NaN interval; zero resamples give a zero-width interval at the
/// estimate.
///
/// The percentile method is accurate for statistics like the median with tens of samples or
/// more; with a handful of samples its intervals are too narrow, so callers show n beside them.
pub fn bootstrap_ci(
    samples: &[f64],
    statistic: impl Fn(&mut [f64]) -> f64,
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> Interval {
    let confidence = check_confidence(confidence);
    if samples.is_empty() {
        return Interval::nan(confidence);
    }
    let mut buf = samples.to_vec();
    let estimate = statistic(&mut buf);
    let mut rng = SplitMix64(seed);
    let n = samples.len() as u64;
    let mut replicates = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for slot in buf.iter_mut() {
            *slot = samples[rng.below(n) as usize];
        }
        replicates.push(statistic(&mut buf));
    }
    percentile_interval(estimate, replicates, confidence)
}

/// The median of samples (the mean of the middle two for an even count), reordering them in
/// place in linear time. NaN for an empty slice.
pub fn median(samples: &mut [f64]) -> f64 {
    let n = samples.len();
    if n == 0 {
        return f64::NAN;
    }
    let (_, upper, _) = samples.select_nth_unstable_by(n / 2, f64::total_cmp);
    let upper = *upper;
    if n % 2 == 1 {
        upper
    } else {
        // The lower middle is the largest of the left part after selection.
        let lower = samples[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    }
}

/// A bootstrap confidence interval of the median (see [`bootstrap_ci`]).
pub fn median_ci(samples: &[f64], resamples: usize, confidence: f64, seed: u64) -> Interval {
    bootstrap_ci(samples, median, resamples, confidence, seed)
}

/// The arithmetic mean; `None` for an empty slice.
pub fn mean(samples: &[f64]) -> Option<f64> {
    if samples.is_empty() {
        None
    } else {
        Some(samples.iter().sum::<f64>() / samples.len() as f64)
    }
}

/// Sample standard deviation (n − 1 denominator) over the mean. `None` with fewer than two
/// samples or a zero mean, where it means nothing.
pub fn coefficient_of_variation(samples: &[f64]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let m = mean(samples)?;
    if m == 0.0 {
        return None;
    }
    let var = samples.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (samples.len() - 1) as f64;
    Some(var.sqrt() / m.abs())
}

/// The coefficient of variation of a histogram's recorded values (population standard
/// deviation over the mean, as HdrHistogram computes them). `None` when it is empty.
pub fn histogram_cv(h: &Histogram<u64>) -> Option<f64> {
    if h.is_empty() || h.mean() == 0.0 {
        return None;
    }
    Some(h.stdev() / h.mean())
}

/// A bootstrap confidence interval (percentile method) of `statistic(a) / statistic(b)`, e.g.
/// "FastMCP's median cold start is 1.32x the SDK's". See [`bootstrap_ci`] for `resamples`,
/// `confidence` and `seed`. The two sets are unrelated (different servers, different runs):
/// each set's indices are resampled on its own, each to its own size.
///
/// `None` when either set is empty, or when the statistic of `b` is zero. Replicates whose denominator is zero are infinite and sort to the top.
pub fn ratio_ci(
    a: &[f64],
    b: &[f64],
    statistic: impl Fn(&mut [f64]) -> f64,
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> Option<Interval> {
    let confidence = check_confidence(confidence);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (mut ba, mut bb) = (a.to_vec(), b.to_vec());
    let denominator = statistic(&mut bb);
    if denominator == 0.0 {
        return None;
    }
    let estimate = statistic(&mut ba) / denominator;
    let mut rng = SplitMix64(seed);
    let mut replicates = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for slot in ba.iter_mut() {
            *slot = a[rng.below(a.len() as u64) as usize];
        }
        for slot in bb.iter_mut() {
            *slot = b[rng.below(b.len() as u64) as usize];
        }
        replicates.push(statistic(&mut ba) / statistic(&mut bb));
    }
    Some(percentile_interval(estimate, replicates, confidence))
}

/// A histogram's recorded values as a weighted sample: distinct values (the highest equivalent
/// value of each bucket, in ns, as `value_at_quantile` reports them) and running counts. Its size
/// is the number of distinct buckets (hundreds), whatever the number of samples.
struct WeightedSample {
    values_ns: Vec<u64>,
    cumulative: Vec<u64>,
}

impl WeightedSample {
    fn from_histogram(h: &Histogram<u64>) -> WeightedSample {
        let mut values_ns = Vec::new();
        let mut cumulative = Vec::new();
        let mut total = 0u64;
        for v in h.iter_recorded() {
            total += v.count_at_value();
            values_ns.push(v.value_iterated_to());
            cumulative.push(total);
        }
        WeightedSample { values_ns, cumulative }
    }

    fn total(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }

    /// HdrHistogram's rank of the q-quantile: ceil(q·n), at least 1 (1-based).
    fn rank(&self, q: f64) -> u64 {
        ((q.clamp(0.0, 1.0) * self.total() as f64).ceil() as u64).clamp(1, self.total().max(1))
    }

    /// The value (ns) of the sample at 0-based position `index` in sorted order.
    fn value_at_index(&self, index: u64) -> u64 {
        let bucket = self.cumulative.partition_point(|&c| c <= index);
        self.values_ns[bucket.min(self.values_ns.len() - 1)]
    }
}

impl SplitMix64 {
    /// Uniform in [0, 1), 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller; the second variate is dropped for simplicity).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit(); // (0, 1]: ln is finite
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Gamma(shape, 1) for shape >= 1 (Marsaglia and Tsang 2000).
    fn gamma(&mut self, shape: f64) -> f64 {
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.unit();
            if u < 1.0 - 0.0331 * x.powi(4) || u.ln() < 0.5 * x * x + d * (1.0 - v + v.ln()) {
                return d * v;
            }
        }
    }

    /// Beta(a, b) for a, b >= 1.
    fn beta(&mut self, a: f64, b: f64) -> f64 {
        let x = self.gamma(a);
        let y = self.gamma(b);
        x / (x + y)
    }
}

/// Bootstrap confidence intervals (percentile method) of several quantiles of a latency
/// histogram, in milliseconds, one per entry of `quantiles` (each in (0, 1]). Empty when the
/// histogram is. The estimates equal `value_at_quantile`.
///
/// The histogram's recorded values (`iter_recorded`) are rebuilt as a weighted sample of its
/// distinct buckets, so memory is the number of buckets whatever n is. A resample of n values
/// drawn with replacement is not drawn value by value: its quantile of rank k is the value at
/// sorted position floor(n·U), where U is the k-th smallest of n uniform variates, which is
/// Beta(k, n + 1 − k) distributed. One Beta draw per resample and quantile gives exactly the
/// bootstrap distribution of drawing all n values (a test checks the two agree), in time
/// independent of n. Deterministic given the seed; the Beta draws use the platform's `ln` and
/// `cos`, so a build against another libm could move a bound by a bucket.
pub fn histogram_quantile_cis(
    h: &Histogram<u64>,
    quantiles: &[f64],
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> Vec<Interval> {
    let confidence = check_confidence(confidence);
    let w = WeightedSample::from_histogram(h);
    let n = w.total();
    if n == 0 {
        return Vec::new();
    }
    let mut rng = SplitMix64(seed);
    quantiles
        .iter()
        .map(|&q| {
            let k = w.rank(q);
            let estimate = ms(w.value_at_index(k - 1));
            let replicates = (0..resamples)
                .map(|_| {
                    let u = rng.beta(k as f64, (n + 1 - k) as f64);
                    ms(w.value_at_index(((n as f64 * u) as u64).min(n - 1)))
                })
                .collect();
            percentile_interval(estimate, replicates, confidence)
        })
        .collect()
}

/// The percentile distribution of a latency histogram as (quantile, ms) points, the curve of
/// HdrHistogram's percentile plots: 5 steps per halving of the distance to 100%, then the
/// maximum. Empty when the histogram is.
pub fn percentile_curve(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<(f64, f64)> =
        h.iter_quantiles(5).map(|v| (v.quantile_iterated_to(), ms(v.value_iterated_to()))).collect();
    out.dedup_by(|b, a| a.0 == b.0);
    out
}

/// MOVER on the log scale: the interval of b/a from intervals of a and b (all positive).
pub fn mover_ratio(a: &Interval, b: &Interval) -> Interval {
    let r = b.estimate / a.estimate;
    let ln = |x: f64| x.ln();
    let down = (ln(b.estimate) - ln(b.lower)).hypot(ln(a.upper) - ln(a.estimate));
    let up = (ln(b.upper) - ln(b.estimate)).hypot(ln(a.estimate) - ln(a.lower));
    Interval { estimate: r, lower: r * (-down).exp(), upper: r * up.exp(), confidence: a.confidence }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_round_trip_through_the_v2_encoding() {
        let mut h = latency_histogram();
        for v in [40_000u64, 41_000, 45_000, 90_000, 1_500_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back, h);
        let s = summarize(&back).unwrap();
        assert_eq!(s.count, 5);
        assert!((s.p50_ms - 0.045).abs() < 0.0001, "{s:?}");
        assert!((s.max_ms - 1.5).abs() < 0.002, "{s:?}");
        assert!(decode_histogram("not base64!").is_err());
    }

    #[test]
    fn the_percentile_rule_is_pinned() {
        // Ten values a millisecond apart, far wider than a bucket: the rank picks the value.
        let values: Vec<u64> = (1..=10).map(|i| i * 1_000_000).collect();
        let mut h = latency_histogram();
        for &v in &values {
            h.record(v).unwrap();
        }
        let top = |v: u64| ms(h.highest_equivalent(v));
        let s = summarize(&h).unwrap();
        assert_eq!(s.p50_ms, top(values[4]), "p50 of 10 is the 5th (rank ceil(0.5*10) = 5)");
        assert_eq!(s.p90_ms, top(values[8]), "p90 of 10 is the 9th");
        assert_eq!(s.p95_ms, top(values[9]), "p95 of 10 is the 10th (rank ceil(9.5) = 10)");
        assert_eq!(s.p99_ms, top(values[9]), "p99 of 10 is the 10th");
        assert_eq!((s.min_ms, s.max_ms), (ms(h.lowest_equivalent(values[0])), top(values[9])));
        // Reported as the top of the bucket: above the value by less than 0.1 %.
        assert!(s.p50_ms > 5.0 && s.p50_ms < 5.0 * 1.001, "{}", s.p50_ms);
        assert_eq!(h.value_at_quantile(0.0), h.lowest_equivalent(values[0]), "q = 0: the lowest equivalent");

        // 60 values: p99 is the largest (rank 60); rounding 59.4 half up would take the 59th.
        let mut h = latency_histogram();
        for i in 1..=60u64 {
            h.record(i * 1_000_000).unwrap();
        }
        assert_eq!(summarize(&h).unwrap().p99_ms, ms(h.highest_equivalent(60_000_000)));

        // Raw samples take the same ranks, without buckets, and the exact median.
        let s = summarize_samples(&values).unwrap();
        assert_eq!((s.p90_ms, s.p95_ms, s.p99_ms), (9.0, 10.0, 10.0));
        assert_eq!(s.p50_ms, 5.5, "the median of an even count is the mean of the middle two");
    }

    #[test]
    fn sample_summaries_use_exact_medians() {
        let s = summarize_samples(&[4_000_000, 1_000_000, 3_000_000, 2_000_000]).unwrap();
        assert_eq!(s.p50_ms, 2.5);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.max_ms, 4.0);
        assert_eq!(s.p95_ms, 4.0);
        assert!(summarize_samples(&[]).is_none());
    }

    /// Exponential(1) draws by the inverse CDF: its median is ln 2.
    fn exponential(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64(seed);
        (0..n).map(|_| -(1.0 - rng.unit()).ln()).collect()
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [7.0]), 7.0);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn a_constant_sample_has_a_zero_width_interval() {
        let i = median_ci(&[5.0; 12], 500, 0.95, 1);
        assert_eq!((i.estimate, i.lower, i.upper), (5.0, 5.0, 5.0));
        assert_eq!(i.width(), 0.0);
        assert_eq!(i.confidence, 0.95);
        assert!(!median_ci(&[], 100, 0.95, 1).is_finite());
        // No resamples: nothing to spread the estimate.
        let z = median_ci(&[1.0, 2.0, 9.0], 0, 0.95, 1);
        assert_eq!((z.lower, z.upper), (2.0, 2.0));
    }

    #[test]
    fn bootstraps_are_deterministic_given_the_seed() {
        let x = exponential(40, 7);
        let a = median_ci(&x, 1000, 0.95, 42);
        assert_eq!(a, median_ci(&x, 1000, 0.95, 42));
        assert_ne!(a, median_ci(&x, 1000, 0.95, 43));
        assert!(a.lower <= a.estimate && a.estimate <= a.upper, "{a:?}");
        // A wider confidence gives a wider interval from the same replicates.
        let b = median_ci(&x, 1000, 0.99, 42);
        assert!(b.lower <= a.lower && a.upper <= b.upper, "{a:?} {b:?}");
    }

    #[test]
    fn the_median_interval_covers_the_true_median() {
        let truth = std::f64::consts::LN_2;
        let i = median_ci(&exponential(400, 2026), 2000, 0.95, 9);
        assert!(i.contains(truth), "{i:?} should cover ln 2");
        assert!(i.width() < 0.3, "{i:?}");
        // Coverage over many seeded experiments is near the nominal 95%.
        let trials = 200;
        let covered = (0..trials)
            .filter(|&t| median_ci(&exponential(61, 1000 + t), 400, 0.95, t).contains(truth))
            .count();
        assert!((170..=trials as usize).contains(&covered), "covered {covered} of {trials}");
    }

    #[test]
    fn coefficients_of_variation() {
        let cv = coefficient_of_variation(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert!((cv - 2.5f64.sqrt() / 3.0).abs() < 1e-12, "{cv}");
        assert_eq!(coefficient_of_variation(&[4.0; 5]), Some(0.0));
        assert_eq!(coefficient_of_variation(&[4.0]), None);
        assert_eq!(coefficient_of_variation(&[-1.0, 1.0]), None);
        assert!(is_noisy(Some(0.11)) && !is_noisy(Some(0.09)) && !is_noisy(None));
    }

    #[test]
    fn ratio_intervals_resample_each_set_on_its_own() {
        let b = exponential(50, 3);
        let a: Vec<f64> = b.iter().map(|x| 2.0 * x).collect();
        // The sets are resampled apart, so even a = 2b spreads, and still covers 2.
        let i = ratio_ci(&a, &b, median, 500, 0.95, 1).unwrap();
        assert_eq!(i.estimate, 2.0);
        assert!(i.width() > 0.0 && i.contains(2.0), "{i:?}");
        assert!(ratio_ci(&a, &b[..10], median, 10, 0.95, 1).is_some());
        assert!(ratio_ci(&a, &[0.0, 0.0], median, 10, 0.95, 1).is_none());
        assert!(ratio_ci(&[], &b, median, 10, 0.95, 1).is_none());
    }

    #[test]
    fn histogram_quantile_intervals() {
        // 10,000 calls: uniform over 1..=10,000 µs.
        let mut h = latency_histogram();
        for us in 1..=10_000u64 {
            h.record(us * 1000).unwrap();
        }
        let cis = histogram_quantile_cis(&h, &[0.5, 0.99], 300, 0.95, 5);
        assert_eq!(cis.len(), 2);
        assert_eq!(cis[0].estimate, ms(h.value_at_quantile(0.5)));
        assert_eq!(cis[1].estimate, ms(h.value_at_quantile(0.99)));
        assert!(cis[0].contains(5.0) && cis[0].width() < 0.5, "{:?}", cis[0]);
        assert!(cis[1].contains(9.9) && cis[1].width() < 0.2, "{:?}", cis[1]);
        assert_eq!(cis, histogram_quantile_cis(&h, &[0.5, 0.99], 300, 0.95, 5));

        let mut c = latency_histogram();
        for _ in 0..500 {
            c.record(250_000).unwrap();
        }
        let flat = histogram_quantile_cis(&c, &[0.5], 100, 0.95, 1);
        assert_eq!(flat[0].width(), 0.0);
        assert_eq!(histogram_cv(&c), Some(0.0));
        assert!(histogram_quantile_cis(&latency_histogram(), &[0.5], 10, 0.95, 1).is_empty());
        assert_eq!(histogram_cv(&latency_histogram()), None);
    }

    /// The plain bootstrap of a histogram quantile: draw all n values, count, take the quantile.
    fn brute_force_quantile_ci(h: &Histogram<u64>, q: f64, resamples: usize, seed: u64) -> Interval {
        let w = WeightedSample::from_histogram(h);
        let n = w.total();
        let k = w.rank(q);
        let mut rng = SplitMix64(seed);
        let reps = (0..resamples)
            .map(|_| {
                let mut positions: Vec<u64> = (0..n).map(|_| rng.below(n)).collect();
                positions.select_nth_unstable((k - 1) as usize);
                ms(w.value_at_index(positions[(k - 1) as usize]))
            })
            .collect();
        percentile_interval(ms(w.value_at_index(k - 1)), reps, 0.95)
    }

    #[test]
    fn the_beta_shortcut_matches_drawing_every_value() {
        let mut h = latency_histogram();
        for (i, x) in exponential(2000, 11).into_iter().enumerate() {
            h.record((x * 1e6) as u64 + 1 + i as u64 % 3).unwrap();
        }
        for q in [0.5, 0.9, 0.99] {
            let fast = histogram_quantile_cis(&h, &[q], 4000, 0.95, 1)[0];
            let slow = brute_force_quantile_ci(&h, q, 1000, 2);
            assert_eq!(fast.estimate, slow.estimate);
            let tol = 0.25 * slow.width();
            assert!(
                (fast.lower - slow.lower).abs() <= tol && (fast.upper - slow.upper).abs() <= tol,
                "q={q}: beta {fast:?} against brute force {slow:?}"
            );
        }
    }

    #[test]
    fn histogram_intervals_narrow_with_the_square_root_of_n() {
        // Values below 2048 ns are exact at 3 significant digits: no bucket rounding.
        let mut small = latency_histogram();
        let mut large = latency_histogram();
        for ns in 1..=2000u64 {
            small.record(ns).unwrap();
            large.record_n(ns, 25).unwrap();
        }
        // The same distribution with 25x the samples: the interval is about 5x narrower.
        let s = histogram_quantile_cis(&small, &[0.5], 4000, 0.95, 3)[0];
        let l = histogram_quantile_cis(&large, &[0.5], 4000, 0.95, 3)[0];
        assert_eq!(s.estimate, l.estimate);
        assert!(l.contains(l.estimate) && l.width() > 0.0);
        let r = s.width() / l.width();
        assert!((4.0..6.5).contains(&r), "{s:?} {l:?} ratio {r}");
    }

    #[test]
    fn percentile_curves_end_at_the_maximum() {
        let mut h = latency_histogram();
        for us in 1..=1000u64 {
            h.record(us * 1000).unwrap();
        }
        let curve = percentile_curve(&h);
        assert!(curve.len() > 10);
        assert!(curve.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        let last = curve.last().unwrap();
        assert_eq!(last.0, 1.0);
        assert!((last.1 - 1.0).abs() < 0.001, "{last:?}");
        assert!(percentile_curve(&latency_histogram()).is_empty());
    }
}
