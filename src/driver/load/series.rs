//! A load's time series as it runs: every completion (warm-up included, correct or failed) goes
//! into the interval its completion time falls in, as HdrHistogram interval logs assign them;
//! an interval's histogram is encoded when the next one starts, so a soak of days holds one
//! histogram in memory, not one per interval. One per driver thread (completions arrive in time
//! order); several threads' series, on the same origin and interval, are merged at the end.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::spec::SeriesInterval;
use crate::stats;

pub(super) struct Intervals {
    origin: Instant,
    interval: Duration,
    /// The interval being filled, and what it holds.
    k: u64,
    hist: Histogram<u64>,
    ok: u64,
    failed: u64,
    closed: Vec<SeriesInterval>,
}

impl Intervals {
    pub(super) fn new(origin: Instant, interval: Duration) -> Intervals {
        Intervals {
            origin,
            interval: interval.max(Duration::from_millis(1)),
            k: 0,
            hist: stats::latency_histogram(),
            ok: 0,
            failed: 0,
            closed: Vec::new(),
        }
    }

    /// Sets the origin (the instant the first call is due); before any completion.
    pub(super) fn set_origin(&mut self, origin: Instant) {
        self.origin = origin;
    }

    pub(super) fn interval_ms(&self) -> u64 {
        self.interval.as_millis() as u64
    }

    /// The interval an instant falls in (an instant before the origin: the first).
    fn index(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.origin).as_nanos() / self.interval.as_nanos()) as u64
    }

    pub(super) fn add(&mut self, done: Instant, latency: Duration, ok: bool) {
        let k = self.index(done);
        while self.k < k {
            self.close();
        }
        if ok {
            self.ok += 1;
            stats::record(&mut self.hist, latency);
        } else {
            self.failed += 1;
        }
    }

    fn close(&mut self) {
        self.closed.push(SeriesInterval {
            t_ms: self.k * self.interval_ms(),
            ok: self.ok,
            failed: self.failed,
            histogram: (self.ok > 0).then(|| stats::encode_histogram(&self.hist)),
        });
        self.hist.reset();
        (self.ok, self.failed) = (0, 0);
        self.k += 1;
    }

    /// Every interval from the origin to the last completion (the last one partial).
    pub(super) fn finish(mut self) -> Vec<SeriesInterval> {
        if self.ok + self.failed > 0 {
            self.close();
        }
        self.closed
    }
}

/// Several driver threads' series (the same origin and interval) as one: each interval's counts
/// summed and its histograms added.
pub(super) fn merge(mut parts: Vec<Vec<SeriesInterval>>) -> Vec<SeriesInterval> {
    if parts.len() == 1 {
        return parts.pop().unwrap_or_default();
    }
    let mut out: Vec<SeriesInterval> = Vec::new();
    let mut hists: Vec<Option<Histogram<u64>>> = Vec::new();
    for part in parts {
        for (k, iv) in part.into_iter().enumerate() {
            if out.len() <= k {
                out.push(SeriesInterval { t_ms: iv.t_ms, ok: 0, failed: 0, histogram: None });
                hists.push(None);
            }
            out[k].ok += iv.ok;
            out[k].failed += iv.failed;
            if let Some(h) = iv.histogram.as_deref().and_then(|h| stats::decode_histogram(h).ok()) {
                match &mut hists[k] {
                    Some(sum) => {
                        let _ = sum.add(&h);
                    }
                    none => *none = Some(h),
                }
            }
        }
    }
    for (iv, h) in out.iter_mut().zip(hists) {
        iv.histogram = h.map(|h| stats::encode_histogram(&h));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_series_merge_interval_by_interval() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let (mut a, mut b) =
            (Intervals::new(t0, Duration::from_secs(1)), Intervals::new(t0, Duration::from_secs(1)));
        a.add(at(10), Duration::from_millis(2), true);
        a.add(at(1_500), Duration::from_millis(3), false);
        b.add(at(20), Duration::from_millis(4), true);
        b.add(at(2_500), Duration::from_millis(5), true);
        let v = merge(vec![a.finish(), b.finish()]);
        assert_eq!(
            v.iter().map(|i| (i.t_ms, i.ok, i.failed)).collect::<Vec<_>>(),
            [(0, 2, 0), (1_000, 0, 1), (2_000, 1, 0)]
        );
        let h = stats::decode_histogram(v[0].histogram.as_deref().unwrap()).unwrap();
        assert_eq!(h.len(), 2);
        assert!(v[1].histogram.is_none());
        assert_eq!(merge(vec![Vec::new()]).len(), 0);
    }

    #[test]
    fn completions_go_to_the_interval_of_their_completion_time_and_gaps_are_kept() {
        let t0 = Instant::now();
        let mut s = Intervals::new(t0, Duration::from_secs(1));
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        s.add(at(10), Duration::from_millis(2), true);
        s.add(at(999), Duration::from_millis(4), true);
        s.add(at(1_000), Duration::from_millis(8), false);
        // Nothing completes in [2 s, 3 s).
        s.add(at(3_500), Duration::from_millis(1), true);
        let v = s.finish();
        assert_eq!(
            v.iter().map(|i| (i.t_ms, i.ok, i.failed)).collect::<Vec<_>>(),
            [(0, 2, 0), (1_000, 0, 1), (2_000, 0, 0), (3_000, 1, 0)]
        );
        assert!(v[1].histogram.is_none() && v[2].histogram.is_none());
        let h = stats::decode_histogram(v[0].histogram.as_deref().unwrap()).unwrap();
        assert_eq!(h.len(), 2);
        assert!((h.max() as f64 - 4e6).abs() / 4e6 < 0.001, "{}", h.max());
        assert!(Intervals::new(t0, Duration::from_secs(1)).finish().is_empty());
    }
}
