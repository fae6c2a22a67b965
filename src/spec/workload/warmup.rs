//! Warm-up by rule: how a workload warms up (a fixed amount, or until the p50 of a moving window
//! settles within a tolerance, with a cap) and the rule itself as pure functions over window p50s
//! and call latencies, so that the driver, `plan` and the tests read one definition. What a
//! warm-up that ran by rule reports is `spec::WarmupReport`; running it is the driver's.

use std::collections::VecDeque;

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

use crate::spec::WarmupReport;

/// How a workload warms up before it measures. The units are the workload's: calls for
/// `serial_calls` (its `warmup` key), milliseconds for the load workloads (their `warmup_ms`).
/// Stored as a number (fixed, as every record before rules existed has it) or as the rule's
/// object (`{"until": "stable", "window": …, "tolerance": …, "max": …, "windows": …}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmup {
    /// This many unrecorded calls, or this long.
    Fixed(u64),
    /// Until the p50 settles; see [`StableRule`].
    Stable(StableRule),
}

/// Warm-up ends at the end of the first window that completes a run of `windows` consecutive
/// windows whose p50s are each within ±`tolerance` of their median; it ends at `max` whatever
/// the p50s do (the cap: the last window is cut short there and judged like the others). A
/// window is `window` calls (`serial_calls`) or `window` ms of every call completed in it, all
/// workers together (load workloads; only correct answers count, and a window with none has no
/// p50 and settles nothing). The median, not the mean, is the centre so that one odd window
/// cannot drag the centre toward itself and hide that it is odd; p50s, not means, so that a
/// stray slow call (a GC pause, the host's noise) does not decide when warm-up ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(into = "RuleShape", from = "RuleShape")]
pub struct StableRule {
    /// Calls (serial_calls) or ms (load) per window.
    pub window: u64,
    /// The relative band around the windows' median, as a fraction (0.05 is ±5 %).
    pub tolerance: f64,
    /// The cap: calls (serial_calls) or ms (load), warm-up included no more.
    pub max: u64,
    /// How many consecutive windows must agree.
    pub windows: u32,
}

// The tolerance comes from a parsed percentage or stored JSON, both finite: never NaN.
impl Eq for StableRule {}

/// A rule as stored: what it waits for first (`"until": "stable"`, the only rule so far), so
/// that a rule of another kind is refused by older readers rather than read as this one.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleShape {
    until: Until,
    window: u64,
    tolerance: f64,
    max: u64,
    windows: u32,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Until {
    Stable,
}

impl From<StableRule> for RuleShape {
    fn from(r: StableRule) -> Self {
        RuleShape {
            until: Until::Stable,
            window: r.window,
            tolerance: r.tolerance,
            max: r.max,
            windows: r.windows,
        }
    }
}

impl From<RuleShape> for StableRule {
    fn from(r: RuleShape) -> Self {
        let RuleShape { until: Until::Stable, window, tolerance, max, windows } = r;
        StableRule { window, tolerance, max, windows }
    }
}

/// The p50s of at most this many windows are kept for the record (the last ones).
pub const REPORTED_WINDOWS: usize = 64;

impl StableRule {
    /// `serial_calls`' rule when the scenario says `warmup = "stable"`: windows of 200 calls,
    /// ±5 %, 3 windows, at most 10,000 calls. At a p50 of 0.1–3 ms that is 0.06–1.8 s at least
    /// (600 calls) and 1–30 s at most. A window of 200 calls gives a p50 whose own noise is
    /// about 1.25·σ/√200 ≈ 2–4 % for the spreads (σ of log latency 0.1–0.5) MCP servers show
    /// here, so a stationary server agrees within ±5 % after a few windows, while the ×1.2 and
    /// more of a cold interpreter, JIT or cache does not.
    pub const CALLS: StableRule = StableRule { window: 200, tolerance: 0.05, max: 10_000, windows: 3 };
    /// The load workloads' rule for `warmup = "stable"`: windows of 500 ms, ±5 %, 3 windows, at
    /// most 30 s. Half a second of one virtual user at 3 ms is already 160 calls; more users
    /// only make each p50 steadier. 1.5 s at least (the old fixed default was 1 s).
    pub const LOAD: StableRule = StableRule { window: 500, tolerance: 0.05, max: 30_000, windows: 3 };

    /// Whether the windows judged so far (their p50s, in order; None: no call completed in the
    /// window) end warm-up: the last `windows` of them each within ±`tolerance` of their median.
    pub fn settled(&self, p50s: &[Option<f64>]) -> bool {
        let k = self.windows as usize;
        if k == 0 || p50s.len() < k {
            return false;
        }
        let Some(mut last) = p50s[p50s.len() - k..].iter().copied().collect::<Option<Vec<f64>>>() else {
            return false;
        };
        last.sort_by(f64::total_cmp);
        let median = if k % 2 == 1 { last[k / 2] } else { (last[k / 2 - 1] + last[k / 2]) / 2.0 };
        // A hair of slack so that a p50 exactly on the band's edge is inside, as written.
        let band = self.tolerance * median * (1.0 + 1e-9);
        last.iter().all(|p| (p - median).abs() <= band)
    }
}

impl Warmup {
    /// The most warm-up can take (calls or ms): what a cell's time limit counts.
    pub fn cap(&self) -> u64 {
        match self {
            Warmup::Fixed(n) => *n,
            Warmup::Stable(r) => r.max,
        }
    }

    /// What `plan` expects warm-up to take (calls or ms): a fixed amount, or the least a rule
    /// takes (`windows` × `window`: a server that is warm already settles then). The cap bounds
    /// the time limit, not the estimate; the record says what it took.
    pub fn expected(&self) -> u64 {
        match self {
            Warmup::Fixed(n) => *n,
            Warmup::Stable(r) => (u64::from(r.windows) * r.window).min(r.max),
        }
    }

    /// The rule, for a warm-up by rule.
    pub fn rule(&self) -> Option<StableRule> {
        match self {
            Warmup::Fixed(_) => None,
            Warmup::Stable(r) => Some(*r),
        }
    }
}

impl Serialize for Warmup {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Warmup::Fixed(n) => s.serialize_u64(*n),
            Warmup::Stable(r) => r.serialize(s),
        }
    }
}

/// A number (fixed) or the rule's object; written by hand, not `untagged`, so the stored bytes
/// depend on nothing but the value.
impl<'de> Deserialize<'de> for Warmup {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = Warmup;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a warm-up: a number, or a rule {\"until\": \"stable\", ...}")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Warmup, E> {
                Ok(Warmup::Fixed(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Warmup, E> {
                u64::try_from(n).map(Warmup::Fixed).map_err(|_| E::custom("a warm-up is not negative"))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Warmup, A::Error> {
                StableRule::deserialize(de::value::MapAccessDeserializer::new(map)).map(Warmup::Stable)
            }
        }
        d.deserialize_any(V)
    }
}

/// The p50 of some latencies in ns, in ms (HdrHistogram's p50: the smallest value at or above
/// half of them); None for none. Reorders the slice.
pub fn p50_ms(latencies_ns: &mut [u64]) -> Option<f64> {
    if latencies_ns.is_empty() {
        return None;
    }
    let mid = (latencies_ns.len() - 1) / 2;
    let (_, p50, _) = latencies_ns.select_nth_unstable(mid);
    Some(*p50 as f64 / 1e6)
}

/// A warm-up under a rule, judged window by window (windows of calls or of time alike).
#[derive(Debug, Clone)]
pub struct Settling {
    rule: StableRule,
    /// The p50s of the last windows (at most [`REPORTED_WINDOWS`], always at least `windows`).
    p50s: VecDeque<Option<f64>>,
    seen: u32,
}

impl Settling {
    pub fn new(rule: StableRule) -> Self {
        Settling { rule, p50s: VecDeque::new(), seen: 0 }
    }

    /// Judges one more window by its p50 (ms; None when no call completed in it): true when
    /// warm-up ends there by the rule.
    pub fn window(&mut self, p50_ms: Option<f64>) -> bool {
        self.p50s.push_back(p50_ms);
        if self.p50s.len() > REPORTED_WINDOWS.max(self.rule.windows as usize) {
            self.p50s.pop_front();
        }
        self.seen += 1;
        self.rule.settled(self.p50s.make_contiguous())
    }

    /// What the record says of this warm-up, once it ended (`stable`: by the rule, not at `max`).
    pub fn report(&self, stable: bool, calls: u64, ms: f64) -> WarmupReport {
        WarmupReport {
            rule: self.rule,
            stable,
            calls,
            ms: (ms * 1e3).round() / 1e3,
            windows_seen: self.seen,
            window_p50_ms: self.p50s.iter().rev().take(REPORTED_WINDOWS).rev().copied().collect(),
        }
    }
}

/// A `serial_calls` warm-up under a rule, fed one call at a time.
#[derive(Debug, Clone)]
pub struct CallWarmup {
    settling: Settling,
    window: Vec<u64>,
    calls: u64,
}

impl CallWarmup {
    pub fn new(rule: StableRule) -> Self {
        CallWarmup { settling: Settling::new(rule), window: Vec::new(), calls: 0 }
    }

    /// Counts one warm-up call and its latency (ns): `Some(stable)` when warm-up ends after it,
    /// by the rule (`true`) or at `max` (`false`); None while it goes on.
    pub fn call(&mut self, latency_ns: u64) -> Option<bool> {
        let rule = self.settling.rule;
        self.calls += 1;
        self.window.push(latency_ns);
        if (self.window.len() as u64) < rule.window && self.calls < rule.max {
            return None;
        }
        let stable = self.settling.window(p50_ms(&mut self.window));
        self.window.clear();
        if stable {
            Some(true)
        } else {
            (self.calls >= rule.max).then_some(false)
        }
    }

    /// Warm-up calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls
    }

    /// What the record says of this warm-up, once it ended after `ms` of wall time.
    pub fn report(&self, stable: bool, ms: f64) -> WarmupReport {
        self.settling.report(stable, self.calls, ms)
    }
}

/// The rule over a sequence of per-call latencies (ns): how many calls warm-up takes and
/// whether it settled (`true`) or hit `max`; None when the sequence ends first.
pub fn warmup_calls(rule: StableRule, latencies_ns: impl IntoIterator<Item = u64>) -> Option<(u64, bool)> {
    let mut w = CallWarmup::new(rule);
    latencies_ns.into_iter().find_map(|ns| w.call(ns)).map(|stable| (w.calls(), stable))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: StableRule = StableRule::CALLS;

    /// A deterministic generator (xorshift), so the "random" sequences are the same every run.
    struct Rng(u64);
    impl Rng {
        fn unit(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Log-normal around `median_ns` with a spread `sigma` (of the log), plus rare spikes.
        fn latency(&mut self, median_ns: f64, sigma: f64) -> u64 {
            // Box-Muller.
            let (u1, u2) = (self.unit().max(1e-12), self.unit());
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            let spike = if self.unit() < 0.02 { 3.0 + 17.0 * self.unit() } else { 1.0 };
            (median_ns * (sigma * z).exp() * spike) as u64
        }
    }

    #[test]
    fn a_steady_server_settles_at_the_first_chance() {
        let steady = std::iter::repeat(1_000_000u64);
        assert_eq!(warmup_calls(RULE, steady), Some((600, true)), "3 windows of 200 calls");
    }

    #[test]
    fn a_slow_start_settles_once_the_p50_stops_falling() {
        // 3 ms falling to 1 ms over the first 2,000 calls, flat after.
        let calls = (0..20_000u64).map(|i| {
            let excess = 2.0 * (1.0 - (i as f64 / 2_000.0)).max(0.0);
            ((1.0 + excess) * 1e6) as u64
        });
        // The window of calls 1,800–1,999 (p50 1.1 ms) is still 10 % above the next two; the
        // three windows from call 2,000 on agree.
        assert_eq!(warmup_calls(RULE, calls), Some((2_600, true)));
        // While the p50 falls by 0.2 ms (7 % and more) per window, it does not settle.
        assert!(warmup_calls(RULE, (0..1_200u64).map(|i| 3_000_000 - i * 1_000)).is_none());
    }

    #[test]
    fn a_server_that_never_settles_runs_to_the_cap() {
        // Every window 10 % slower than the last.
        let drifting = (0..20_000u64).map(|i| (1e6 * 1.1f64.powi((i / 200) as i32)) as u64);
        assert_eq!(warmup_calls(RULE, drifting), Some((10_000, false)));
        // A cap that is not a multiple of the window cuts the last window short.
        let rule = StableRule { max: 1_050, ..RULE };
        let drifting = (0..20_000u64).map(|i| (1e6 * 1.1f64.powi((i / 200) as i32)) as u64);
        assert_eq!(warmup_calls(rule, drifting), Some((1_050, false)));
    }

    #[test]
    fn noisy_but_stationary_settles_well_before_the_cap() {
        // σ 0.4 of the log (spreads up to p90 ≈ 1.7 × p50, as Node servers show here) and 2 %
        // spikes of 3–20×: no trend at all, so warm-up must end by the rule, early.
        for seed in 1..=20u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let calls = (0..20_000).map(|_| rng.latency(1e6, 0.4));
            let (n, stable) = warmup_calls(RULE, calls).unwrap();
            assert!(stable && n <= 4_000, "seed {seed}: {n} calls, stable {stable}");
        }
    }

    #[test]
    fn the_rule_is_the_last_windows_within_the_band_around_their_median() {
        let r = StableRule { window: 1, tolerance: 0.05, max: 100, windows: 3 };
        let s = |v: &[f64]| r.settled(&v.iter().map(|x| Some(*x)).collect::<Vec<_>>());
        assert!(!s(&[1.0, 1.0]), "fewer than 3 windows");
        assert!(s(&[2.0, 1.0, 1.05, 0.95]), "only the last 3 count; the edges are inside");
        assert!(!s(&[1.0, 1.06, 1.0]));
        assert!(!r.settled(&[Some(1.0), None, Some(1.0)]), "a window without a p50 settles nothing");
        let even = StableRule { windows: 4, ..r };
        assert!(even.settled(&[Some(1.0), Some(1.0), Some(1.1), Some(1.1)]), "median 1.05, ±0.05");
        assert_eq!(p50_ms(&mut [4_000_000, 1_000_000, 3_000_000, 2_000_000]), Some(2.0));
        assert_eq!(p50_ms(&mut []), None);
    }

    #[test]
    fn the_report_keeps_the_last_64_window_p50s() {
        let mut s = Settling::new(StableRule { window: 10, tolerance: 0.01, max: 1_000, windows: 3 });
        for i in 0..100 {
            assert!(!s.window(Some(f64::from(i))));
        }
        let r = s.report(false, 1_000, 12.345_678_9);
        assert_eq!((r.windows_seen, r.window_p50_ms.len(), r.ms), (100, 64, 12.346));
        assert_eq!(r.window_p50_ms[0], Some(36.0));
    }

    #[test]
    fn fixed_and_rule_forms_have_their_stored_shapes() {
        assert_eq!(serde_json::to_string(&Warmup::Fixed(200)).unwrap(), "200");
        let rule = serde_json::to_string(&Warmup::Stable(RULE)).unwrap();
        assert_eq!(rule, r#"{"until":"stable","window":200,"tolerance":0.05,"max":10000,"windows":3}"#);
        assert_eq!(serde_json::from_str::<Warmup>(&rule).unwrap(), Warmup::Stable(RULE));
        assert_eq!(serde_json::from_str::<Warmup>("200").unwrap(), Warmup::Fixed(200));
        for bad in
            ["-1", "\"stable\"", r#"{"until":"steady","window":1,"tolerance":0.1,"max":3,"windows":3}"#]
        {
            assert!(serde_json::from_str::<Warmup>(bad).is_err(), "{bad}");
        }
        let extra = r#"{"until":"stable","window":1,"tolerance":0.1,"max":3,"windows":3,"k":1}"#;
        assert!(serde_json::from_str::<Warmup>(extra).is_err());
    }
}
