//! The shape of a closed loop written as data, as a k6 script states it: stages of virtual users
//! (k6's ramping-vus, as pure functions of time that the driver, `plan` and the tests share),
//! think time between iterations (fixed or uniform, drawn from a recorded seed), an iteration's
//! flow of sessions and steps, and what a warm-up excludes. Running them is the driver's.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::stats::SplitMix64;

/// One stage of a ramping closed loop: over `duration_ms` the count of virtual users moves
/// linearly from the previous stage's target (the first: the workload's `start_vus`) to
/// `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    pub duration_ms: u64,
    pub target: u32,
}

/// The stages' whole length, ms.
pub fn stages_ms(stages: &[Stage]) -> u64 {
    stages.iter().map(|s| s.duration_ms).sum()
}

/// Scales the stages' durations so that they last `total_ms` together (a reduced run), their
/// shape kept: each in proportion, the rounding's remainder on the last.
pub fn scale_stages(stages: &mut [Stage], total_ms: u64) {
    let old = u128::from(stages_ms(stages).max(1));
    let mut left = total_ms;
    let n = stages.len();
    for (i, s) in stages.iter_mut().enumerate() {
        s.duration_ms = if i + 1 == n {
            left
        } else {
            ((u128::from(s.duration_ms) * u128::from(total_ms) / old) as u64).min(left)
        };
        left -= s.duration_ms;
    }
}

/// The most virtual users the stages ever want (at least `start`).
pub fn peak_vus(start: u32, stages: &[Stage]) -> u32 {
    stages.iter().map(|s| s.target).fold(start, u32::max)
}

/// The virtual users wanted `t_ms` after the start, as k6's ramping-vus has them: within a stage
/// from `a` to `b` over `d` ms, `a ± floor(|b − a| · e / d)` at `e` ms into it (a ramp up adds
/// its first user only once a whole user's share of the stage has passed; a ramp down removes
/// one as soon as its share has); a stage of 0 ms jumps at once; after the last stage its target.
pub fn vus_at(start: u32, stages: &[Stage], t_ms: u64) -> u32 {
    let mut from = start;
    let mut stage_start = 0u64;
    for s in stages {
        let end = stage_start + s.duration_ms;
        if t_ms < end {
            let e = u128::from(t_ms - stage_start);
            let d = u128::from(s.duration_ms);
            let moved = (u128::from(from.abs_diff(s.target)) * e / d) as u32;
            return if s.target >= from { from + moved } else { from - moved };
        }
        from = s.target;
        stage_start = end;
    }
    from
}

/// The first instant at or after `from_ms` at which virtual user `vu` (0-based: it runs while
/// more than `vu` users are wanted) is wanted, or None if it never is again.
pub fn next_wanted(start: u32, stages: &[Stage], vu: u32, from_ms: u64) -> Option<u64> {
    if vus_at(start, stages, from_ms) > vu {
        return Some(from_ms);
    }
    let mut from = start;
    let mut stage_start = 0u64;
    for s in stages {
        let end = stage_start + s.duration_ms;
        if end > from_ms && s.target > vu {
            if s.duration_ms == 0 || s.target <= from {
                // A jump, or a ramp down to above `vu`: wanted at the stage's end, unless a jump
                // at the same instant takes it back.
                if vus_at(start, stages, end) > vu {
                    return Some(end);
                }
                from = s.target;
                stage_start = end;
                continue;
            }
            // The ramp reaches vu + 1 users once (vu + 1 − from) · d / (b − from) ms have passed.
            let need = u128::from((vu + 1).saturating_sub(from));
            let span = u128::from(s.target - from);
            let e = (need * u128::from(s.duration_ms)).div_ceil(span) as u64;
            return Some((stage_start + e).max(from_ms));
        }
        from = s.target;
        stage_start = end;
    }
    None
}

/// Think time, slept at the end of each iteration outside every timed step: uniform in
/// [`min_ms`, `max_ms`] (fixed when they are equal), each virtual user drawing from its own
/// SplitMix64 stream of `seed` (see [`Think::rng`]), so a run's draws are the same every time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Think {
    pub min_ms: u64,
    pub max_ms: u64,
    pub seed: u64,
}

/// The seed of a think time the scenario does not seed.
pub const DEFAULT_THINK_SEED: u64 = 45;

impl Think {
    /// Virtual user `vu`'s generator: the stream of `seed` advanced by the user's number, so no
    /// two users draw the same sequence.
    pub(crate) fn rng(&self, vu: u64) -> SplitMix64 {
        SplitMix64(self.seed ^ vu.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    /// The next pause, to the microsecond.
    pub(crate) fn draw(&self, rng: &mut SplitMix64) -> Duration {
        let (lo, hi) = (self.min_ms * 1_000, self.max_ms.max(self.min_ms) * 1_000);
        Duration::from_micros(lo + rng.below(hi - lo + 1))
    }
}

/// What virtual users do with the sessions of a `flow`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionScope {
    /// Each inner list of the flow is a session of its own in every iteration.
    #[default]
    PerIteration,
    /// One session per virtual user, kept across its iterations: every step in it.
    PerVu,
}

impl SessionScope {
    pub(crate) fn is_default(&self) -> bool {
        *self == SessionScope::PerIteration
    }
}

/// What a load's warm-up keeps out of its figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmupExcludes {
    /// Nothing of the warm-up counts (calls, errors, latency, HTTP requests).
    #[default]
    Everything,
    /// The warm-up's calls, errors and HTTP requests count (over warm-up and window); only their
    /// latencies are left out.
    Latency,
}

impl WarmupExcludes {
    pub(crate) fn is_default(&self) -> bool {
        *self == WarmupExcludes::Everything
    }
}

/// The step of a flow that lists the tools; any other step is a tool of the suite.
pub const LIST_STEP: &str = "tools/list";

/// The distinct tools of a flow, in their first order.
pub fn flow_tools(flow: &[Vec<String>]) -> Vec<&str> {
    let mut tools: Vec<&str> = Vec::new();
    for step in flow.iter().flatten().filter(|s| *s != LIST_STEP) {
        if !tools.contains(&step.as_str()) {
            tools.push(step);
        }
    }
    tools
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(duration_ms: u64, target: u32) -> Stage {
        Stage { duration_ms, target }
    }

    /// The proving case: 10 s up to 50, 5 min at 50, 10 s down to 0.
    fn k6() -> Vec<Stage> {
        vec![st(10_000, 50), st(300_000, 50), st(10_000, 0)]
    }

    #[test]
    fn ramping_vus_moves_linearly_between_targets_as_k6_steps_them() {
        let s = k6();
        assert_eq!(stages_ms(&s), 320_000);
        assert_eq!(peak_vus(0, &s), 50);
        assert_eq!(vus_at(0, &s, 0), 0);
        // One user per 200 ms of the ramp up, the first once its 200 ms have passed.
        assert_eq!(vus_at(0, &s, 199), 0);
        assert_eq!(vus_at(0, &s, 200), 1);
        assert_eq!(vus_at(0, &s, 5_000), 25);
        assert_eq!(vus_at(0, &s, 9_999), 49);
        assert_eq!(vus_at(0, &s, 10_000), 50);
        assert_eq!(vus_at(0, &s, 200_000), 50);
        // Down: one leaves as soon as its share has passed.
        assert_eq!(vus_at(0, &s, 310_000), 50);
        assert_eq!(vus_at(0, &s, 310_200), 49);
        assert_eq!(vus_at(0, &s, 319_999), 1);
        assert_eq!(vus_at(0, &s, 320_000), 0);
        assert_eq!(vus_at(0, &s, 999_999), 0);
        // A start above zero, and a stage of 0 ms that jumps.
        let jump = [st(0, 8), st(1_000, 8), st(1_000, 4)];
        assert_eq!(vus_at(2, &jump, 0), 8);
        assert_eq!(vus_at(2, &jump, 1_500), 6);
        assert_eq!(vus_at(3, &[st(1_000, 3)], 500), 3, "a stage at the start's level holds it");
        assert_eq!(vus_at(7, &[], 10), 7);
    }

    #[test]
    fn a_virtual_user_is_next_wanted_exactly_where_the_schedule_first_wants_it() {
        // Against a brute-force search over every millisecond (the proving case scaled down
        // a hundredfold, to keep the search short).
        let schedules: Vec<(u32, Vec<Stage>)> = vec![
            (0, vec![st(100, 50), st(3_000, 50), st(100, 0)]),
            (0, vec![st(1_000, 3), st(500, 1), st(0, 5), st(700, 5), st(900, 2), st(1_300, 7)]),
            (4, vec![st(1_000, 0), st(1_000, 6)]),
            (0, vec![st(10, 50)]),
            (0, vec![st(0, 5), st(0, 1), st(1_000, 1)]),
            (0, vec![st(500, 0), st(0, 5), st(0, 2), st(300, 2), st(0, 0), st(200, 3)]),
        ];
        for (start, s) in &schedules {
            let end = stages_ms(s) + 10;
            for vu in 0..peak_vus(*start, s) + 1 {
                for from in (0..end).step_by(37) {
                    let brute = (from..end).find(|t| vus_at(*start, s, *t) > vu);
                    assert_eq!(next_wanted(*start, s, vu, from), brute, "vu {vu} from {from} of {s:?}");
                }
            }
        }
    }

    #[test]
    fn a_reduced_run_scales_the_stages_to_its_length() {
        let mut s = k6();
        scale_stages(&mut s, 32_000);
        assert_eq!(s, [st(1_000, 50), st(30_000, 50), st(1_000, 0)]);
        scale_stages(&mut s, 1_001);
        assert_eq!(stages_ms(&s), 1_001);
        assert_eq!(s.iter().map(|x| x.target).collect::<Vec<_>>(), [50, 50, 0]);
    }

    #[test]
    fn think_draws_are_seeded_within_their_bounds_and_differ_between_users() {
        let t = Think { min_ms: 50, max_ms: 150, seed: 7 };
        let draws = |vu| {
            let mut r = t.rng(vu);
            (0..2_000).map(|_| t.draw(&mut r)).collect::<Vec<_>>()
        };
        let a = draws(0);
        assert_eq!(a, draws(0), "the same seed and user draw the same pauses");
        assert_ne!(a, draws(1), "another user draws others");
        assert!(a.iter().all(|d| (Duration::from_millis(50)..=Duration::from_millis(150)).contains(d)));
        let mean = a.iter().map(Duration::as_secs_f64).sum::<f64>() / a.len() as f64;
        assert!((mean - 0.1).abs() < 0.005, "uniform over the range: {mean}");
        assert!(
            a.iter().any(|d| *d < Duration::from_millis(60))
                && a.iter().any(|d| *d > Duration::from_millis(140))
        );
        let fixed = Think { min_ms: 100, max_ms: 100, seed: 7 };
        let mut r = fixed.rng(3);
        assert!((0..10).all(|_| fixed.draw(&mut r) == Duration::from_millis(100)));
    }
}
