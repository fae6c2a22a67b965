//! The idle phase after a load: with every connection closed, the server tree's RSS and the
//! server container's cgroup memory usage are read through the shim every `SAMPLE_INTERVAL` for
//! the workload's `idle_after`, and the level at the phase's end is the median of its last
//! samples with their range. It runs on the driver's own thread once the load's runtime is gone,
//! so it sleeps with `std::thread::sleep`. What the load itself sampled is `sampler`'s.

use std::time::{Duration, Instant};

use crate::driver::load::sampler::SAMPLE_INTERVAL;
use crate::driver::stdio::ShimClient;
use crate::driver::workload::Progress;
use crate::spec::{IdleSeries, MemoryLevel, TreeMemory};

/// The level is read over the last this-many ms of the phase, or its last fifth if shorter.
const TAIL_MS: u64 = 5_000;
/// ... and over at least this many samples.
const TAIL_MIN_SAMPLES: usize = 3;

/// What the idle phase saw.
pub(super) struct Idle {
    pub(super) series: IdleSeries,
    /// The last reading of the server's tree (the phase's end, unless the server died).
    pub(super) last: Option<TreeMemory>,
    /// Milliseconds after the load at which the server was found dead, if it died.
    pub(super) died_at_ms: Option<u64>,
}

/// Samples the server for `length` from `closed_at` (the instant every connection was closed):
/// at once, then every `SAMPLE_INTERVAL`, and once more at the phase's end. A reading the shim
/// could not give is left out; a server found dead ends the phase.
pub(super) fn idle_phase(
    shim: &mut ShimClient,
    pid: u32,
    closed_at: Instant,
    length: Duration,
    progress: &mut Progress,
) -> Idle {
    let total_ms = length.as_millis() as u64;
    let end = closed_at + length;
    let mut idle = Idle { series: IdleSeries::default(), last: None, died_at_ms: None };
    for k in 0u32.. {
        let due = (closed_at + SAMPLE_INTERVAL * k).min(end);
        while Instant::now() < due {
            std::thread::sleep(due - Instant::now());
        }
        let t_ms = closed_at.elapsed().as_millis() as u64;
        match shim.memory(pid) {
            Ok(m) if m.processes == 0 => {
                idle.died_at_ms = Some(t_ms);
                return idle;
            }
            Ok(m) => {
                let cgroup = shim.cgroup_usage().ok().flatten();
                idle.series.t_ms.push(t_ms);
                idle.series.rss_bytes.push(m.rss_bytes);
                idle.series.cgroup_bytes.push(cgroup);
                idle.last = Some(m);
            }
            Err(_) => {}
        }
        progress("idle", t_ms.min(total_ms), total_ms);
        if due >= end {
            break;
        }
    }
    idle
}

impl Idle {
    /// The tree RSS and cgroup usage levels at the end of a phase of `phase_ms`.
    pub(super) fn levels(&self, phase_ms: u64) -> (Option<MemoryLevel>, Option<MemoryLevel>) {
        let s = &self.series;
        let rss: Vec<(u64, u64)> = s.t_ms.iter().copied().zip(s.rss_bytes.iter().copied()).collect();
        let cgroup: Vec<(u64, u64)> =
            s.t_ms.iter().zip(&s.cgroup_bytes).filter_map(|(t, b)| Some((*t, (*b)?))).collect();
        (level(&rss, phase_ms), level(&cgroup, phase_ms))
    }
}

/// The level at the end of a series of `(t_ms, bytes)` samples in time order, from a phase of
/// `phase_ms`: the median and range of the samples within the last `TAIL_MS` or the last fifth
/// of the phase, whichever is shorter, counted back from the last sample, and at least the last
/// `TAIL_MIN_SAMPLES` (see `spec::MemoryLevel`). None for an empty series.
pub(super) fn level(samples: &[(u64, u64)], phase_ms: u64) -> Option<MemoryLevel> {
    let (to_ms, _) = *samples.last()?;
    let span = TAIL_MS.min(phase_ms / 5);
    let by_time = samples.iter().position(|(t, _)| t + span >= to_ms).unwrap_or(samples.len() - 1);
    let start = by_time.min(samples.len().saturating_sub(TAIL_MIN_SAMPLES));
    let tail = &samples[start..];
    let mut v: Vec<u64> = tail.iter().map(|(_, b)| *b).collect();
    v.sort_unstable();
    let n = v.len();
    // Sorted, so the lower middle is not above the upper: their mean rounds down.
    let estimate = if n % 2 == 1 { v[n / 2] } else { v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2 };
    Some(MemoryLevel { estimate, lower: v[0], upper: v[n - 1], n: n as u32, from_ms: tail[0].0, to_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series every 250 ms over `phase_ms`, both ends included.
    fn series(phase_ms: u64, bytes: impl Fn(u64) -> u64) -> Vec<(u64, u64)> {
        (0..=phase_ms / 250).map(|k| (k * 250, bytes(k * 250))).collect()
    }

    #[test]
    fn the_level_of_a_30_s_phase_is_the_median_and_range_of_its_last_5_s() {
        // Memory falls for 10 s after the load, then wobbles by a page around 50 MiB.
        let s = series(30_000, |t| if t < 10_000 { 90 << 20 } else { (50 << 20) + (t / 250 % 2) * 4096 });
        let l = level(&s, 30_000).unwrap();
        // 25 000, 25 250, ..., 30 000: 21 samples.
        assert_eq!((l.from_ms, l.to_ms, l.n), (25_000, 30_000, 21));
        assert_eq!((l.lower, l.upper), (50 << 20, (50 << 20) + 4096));
        // 11 samples at the even steps (k = 100, 102, ..., 120) hold 50 MiB: the median.
        assert_eq!(l.estimate, 50 << 20);
        assert!(l.estimate < 90 << 20, "the level is not the peak");
    }

    #[test]
    fn a_short_phase_reads_its_last_fifth_with_at_least_three_samples() {
        // 3 s: the last fifth is 600 ms, i.e. the samples at 2500, 2750 and 3000.
        let s = series(3_000, |t| 1_000_000 - t);
        let l = level(&s, 3_000).unwrap();
        assert_eq!((l.from_ms, l.to_ms, l.n), (2_500, 3_000, 3));
        assert_eq!((l.estimate, l.lower, l.upper), (1_000_000 - 2_750, 1_000_000 - 3_000, 1_000_000 - 2_500));
        // 500 ms: a fifth holds one sample, so the last three are taken.
        let s = series(500, |t| 10 + t);
        let l = level(&s, 500).unwrap();
        assert_eq!((l.from_ms, l.n, l.estimate, l.lower, l.upper), (0, 3, 260, 10, 510));
        // An even count takes the mean of the middle two, rounded down.
        let l = level(&[(0, 7), (250, 10), (500, 4), (750, 1)], 750).unwrap();
        assert_eq!((l.n, l.estimate, l.lower, l.upper), (3, 4, 1, 10));
        let l = level(&[(0, 7), (250, 10)], 250).unwrap();
        assert_eq!((l.n, l.estimate, l.lower, l.upper), (2, 8, 7, 10));
        assert_eq!(level(&[], 1_000), None);
    }

    #[test]
    fn the_cgroup_level_skips_readings_that_failed() {
        let idle = Idle {
            series: IdleSeries {
                t_ms: vec![0, 250, 500, 750, 1_000],
                rss_bytes: vec![5, 4, 3, 2, 1],
                cgroup_bytes: vec![Some(50), None, Some(30), None, Some(10)],
            },
            last: None,
            died_at_ms: None,
        };
        let (rss, cgroup) = idle.levels(1_000);
        assert_eq!(rss.map(|l| (l.n, l.estimate)), Some((3, 2)));
        let cgroup = cgroup.unwrap();
        assert_eq!((cgroup.n, cgroup.estimate, cgroup.from_ms, cgroup.to_ms), (3, 30, 0, 1_000));
        let none = Idle { series: IdleSeries { cgroup_bytes: vec![None; 5], ..idle.series.clone() }, ..idle };
        assert_eq!(none.levels(1_000).1, None);
    }
}
