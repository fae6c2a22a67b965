//! Statistics without I/O: latency histograms (HdrHistogram, nanoseconds), their standard V2
//! compressed encoding, percentile summaries in milliseconds, and medians of small samples.

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

/// Summary of a latency distribution, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// Summarises raw samples (ns) exactly, with nearest-rank percentiles.
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
    fn sample_summaries_use_exact_medians() {
        let s = summarize_samples(&[4_000_000, 1_000_000, 3_000_000, 2_000_000]).unwrap();
        assert_eq!(s.p50_ms, 2.5);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.max_ms, 4.0);
        assert_eq!(s.p95_ms, 4.0);
        assert!(summarize_samples(&[]).is_none());
    }
}
